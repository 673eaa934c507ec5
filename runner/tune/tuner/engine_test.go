package tuner

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// How the engine and the suite runner use tuned configs, end to end.

func miniStore(be bridge.Backend, from string, entries ...tune.Entry) *tune.Store {
	l := tune.Layer{Name: from}
	for _, e := range entries {
		l.Entries = append(l.Entries, tune.Located{Entry: e, File: "test.json"})
	}
	return tune.NewStore(l)
}

func miniMoE(be bridge.Backend, tokens int, cfg tune.Config) tune.Entry {
	return tune.Entry{Device: be.Info().Name, Backend: "cpu", Kernel: "moe", DType: "bf16",
		Shape:  tune.Shape{"tokens": tokens, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256, "threads": 2},
		Config: cfg, Default: tune.Config{"strategy": "grouped"}, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: cpu.KernelSourceHash("moe")}
}

func generate(t *testing.T, be bridge.Backend, o engine.Options) ([]engine.Output, map[string]string) {
	t.Helper()
	cfg, _ := model.Preset("qwen3-moe-mini")
	cfg, _ = cfg.WithLayers(1)
	e, err := engine.New(be, cfg, model.NewCached(model.NewSynthetic(1, bridge.BF16)), o)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []engine.Request
	for i := range 2 {
		p := make([]int32, 16)
		for j := range p {
			p[j] = int32(i*131 + j*7)
		}
		reqs = append(reqs, engine.Request{ID: i, Prompt: p, MaxNewTokens: 4})
	}
	out, err := e.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return out, e.TunedUsed()
}

func TestEngineUsesTunedConfig(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	// Decode steps run 2 tokens, the prefill 32 (four octaves from the
	// bucket: the default).
	store := miniStore(be, tune.FromUser, miniMoE(be, 2, tune.Config{"strategy": "chunked", "chunk": "2"}))
	want, _ := generate(t, be, engine.Options{})
	got, used := generate(t, be, engine.Options{Tuned: bench.TunedLookup(store)})
	if used["moe"] != "chunked/2 (user cache); grouped (default)" {
		t.Errorf("moe used %q", used["moe"])
	}
	if _, ok := used["matmul"]; ok {
		t.Errorf("no matmul entries, yet the split was looked up: %q", used["matmul"])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the tuned dispatch changed the tokens: %v vs %v", got, want)
	}
	// Explicit params win.
	_, used = generate(t, be, engine.Options{Tuned: bench.TunedLookup(store), MoE: bridge.MoEParams{Strategy: bridge.MoELoop}})
	if _, ok := used["moe"]; ok {
		t.Errorf("explicit MoE params looked up %q", used["moe"])
	}
	// A tuned matmul split is installed for the step and gives the same answer.
	mm := tune.Entry{Device: be.Info().Name, Backend: "cpu", Kernel: "matmul", DType: "bf16",
		Shape:  tune.Shape{"m": 2, "n": 8192, "k": 512, "threads": 2},
		Config: tune.Config{"piece": "256", "threads": "2"}, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: cpu.KernelSourceHash("matmul")}
	got, used = generate(t, be, engine.Options{Tuned: bench.TunedLookup(miniStore(be, tune.FromShipped, mm))})
	if !strings.Contains(used["matmul"], "256/2t (shipped)") {
		t.Errorf("matmul used %q", used["matmul"])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the tuned split changed the tokens")
	}
}

func TestSuiteRecordsTunedConfigs(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	s := loadSuite(t, `name: tuned
model: { preset: qwen3-moe-mini, layers: 1, seed: 1 }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: tuned
    params: { batch: 4 }
  - name: pinned
    params: { batch: 4, moe_strategy: loop }
`)
	store := miniStore(be, tune.FromUser, miniMoE(be, 4, tune.Config{"strategy": "chunked", "chunk": "4"}))
	db := openDB(t)
	sum, err := bench.Run(context.Background(), s, bench.Options{DB: db, Threads: 2, BandwidthBuffer: -1, Tuned: store})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range sum.Cases {
		got[c.Name] = c.Params["tuned.moe"] + " | " + c.Params["tuned.moe.prefill"] + " | " + c.Params["tuned.matmul"]
	}
	want := map[string]string{
		// Decode: 4 tokens, tuned. Prefill: 16 tokens, two octaves away,
		// still within reach, so it is recorded only when it differs.
		"tuned":  "chunked/4 (user cache) |  | even/2t (default)",
		"pinned": "loop (explicit) |  | even/2t (default)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tuned params %q, want %q", got, want)
	}
}

// A case records the MoE dispatches its steps took: requests arriving one
// at a time make 1-token decode steps, which a 1-token bucket serves,
// whatever the batch the case allows.
func TestSuiteRecordsTunedConfigsUsed(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	s := loadSuite(t, `name: tuned
model: { preset: qwen3-moe-mini, layers: 1, seed: 1 }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 3 }
cases:
  - name: one-at-a-time
    params: { batch: 4, requests: 4, arrival: "stagger:20" }
  - name: together
    params: { batch: 4 }
`)
	store := miniStore(be, tune.FromUser, miniMoE(be, 4, tune.Config{"strategy": "chunked", "chunk": "4"}),
		miniMoE(be, 1, tune.Config{"strategy": "loop"}))
	db := openDB(t)
	sum, err := bench.Run(context.Background(), s, bench.Options{DB: db, Threads: 2, BandwidthBuffer: -1, Tuned: store})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range sum.Cases {
		got[c.Name] = c.Params["tuned.moe"]
	}
	want := map[string]string{
		"one-at-a-time": "chunked/4 (user cache); loop (user cache)", // 4-token prompts, 1-token decode steps
		"together":      "chunked/4 (user cache)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tuned.moe %q, want %q", got, want)
	}
}
