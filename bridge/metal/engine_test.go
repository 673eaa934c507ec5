package metal_test

import (
	"encoding/json"
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

const fixtureDir = "../../runner/testdata/hf"

type reference struct {
	Prompts []struct {
		Tokens     []int32   `json:"tokens"`
		LogitsLast []float32 `json:"logits_last"`
		Greedy     []int32   `json:"greedy"`
	} `json:"prompts"`
}

func openEngine(t testing.TB, be bridge.Backend, spec model.Spec, opts engine.Options) *engine.Engine {
	t.Helper()
	cfg, src, err := model.Open(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	e, err := engine.New(be, cfg, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The window fixtures (a window of 8) decode with split-K partitions of 3
// keys, counted from each token's window start: the step's own key, rotated
// in the attention (one phase) or written before it (two), lands in the
// cache from the partition that holds it, and the tokens and last logits
// stay transformers' (docs/metal-kernels.md, "Sliding windows").
func TestWindowSplitKMatchesTransformers(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, c := range []struct {
		fixture string
		tuning  metal.Tuning
	}{
		{"mistral_window", metal.Tuning{AttnPartitionSize: 3}},
		{"qwen2_window", metal.Tuning{AttnPartitionSize: 3}},
		{"mistral_window", metal.Tuning{AttnPartitionSize: 3, AttnTwoPhase: true}},
	} {
		t.Run(fmt.Sprintf("%s, two-phase %v", c.fixture, c.tuning.AttnTwoPhase), func(t *testing.T) {
			dir := filepath.Join(fixtureDir, c.fixture)
			ref := readReference(t, filepath.Join(dir, "reference.json"))
			eng := openEngine(t, newEmu(t, c.tuning), model.Spec{Model: dir}, engine.Options{})
			for i, p := range ref.Prompts {
				got, err := eng.Generate([]engine.Request{{Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true}})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got[0].Tokens, p.Greedy) {
					t.Errorf("prompt %d: %v, transformers %v", i, got[0].Tokens, p.Greedy)
				}
				if d := kernels.MaxAbsDiff(got[0].Logits, p.LogitsLast); d > 1e-4 {
					t.Errorf("prompt %d: logits differ from transformers' by %.3g", i, d)
				}
			}
		})
	}
}

// TestGenerateMatchesCPU runs the transformers fixtures on the emulated
// Metal backend and the CPU backend: the same greedy tokens (also those
// transformers chose), last-prompt logits within f32 rounding of the CPU's
// and within 1e-4 of transformers', and the same distinct experts per MoE
// layer and step. Among them are scaled RoPEs (llama3, qwen3_yarn), Mixtral
// (as transformers and as llama.cpp write it), models that slide by a
// window of 8 past it (mistral_window on every layer, qwen2_window on one:
// decode, and prefill of all prompts at once) and GGUF files of f32 weights
// with llama3's rope_freqs, linear scaling and YaRN.
func TestGenerateMatchesCPU(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	var fixtures [][2]string // model, reference
	for _, arch := range []string{"llama", "llama_bias", "llama_mlp_bias", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt2", "gpt2_untied", "llama3", "qwen3_yarn",
		"mistral_window", "qwen2_window"} {
		fixtures = append(fixtures, [2]string{filepath.Join(fixtureDir, arch), filepath.Join(fixtureDir, arch, "reference.json")})
	}
	for _, name := range []string{"llama-rope-llama3", "llama-rope-linear", "llama-rope-yarn", "mixtral-f32"} {
		base := filepath.Join(fixtureDir, "..", "gguf", name)
		fixtures = append(fixtures, [2]string{base + ".gguf", base + ".json"})
	}
	for _, fx := range fixtures {
		t.Run(strings.TrimSuffix(filepath.Base(fx[0]), ".gguf"), func(t *testing.T) {
			dir := fx[0]
			ref := readReference(t, fx[1])
			mb := newEmu(t, metal.Tuning{})
			cpuEng := openEngine(t, cpu.New(cpu.Options{}), model.Spec{Model: dir}, engine.Options{})
			mtlEng := openEngine(t, mb, model.Spec{Model: dir}, engine.Options{})
			var reqs []engine.Request
			for i, p := range ref.Prompts {
				reqs = append(reqs, engine.Request{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true})
			}
			// One request at a time on the CPU; all at once (continuous
			// batching: prefill and decode in one step) on Metal.
			var want []engine.Output
			for _, r := range reqs {
				o, err := cpuEng.Generate([]engine.Request{r})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, o...)
			}
			got, err := mtlEng.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for i := range reqs {
				d := kernels.MaxAbsDiff(got[i].Logits, want[i].Logits)
				dt := kernels.MaxAbsDiff(got[i].Logits, ref.Prompts[i].LogitsLast)
				t.Logf("prompt %d (%d tokens): tokens %v, logits max abs diff %.2g vs cpu, %.2g vs transformers",
					i, len(reqs[i].Prompt), got[i].Tokens, d, dt)
				if dt > 1e-4 {
					t.Errorf("prompt %d: logits differ from transformers' by %.3g", i, dt)
				}
				if !slices.Equal(got[i].Tokens, want[i].Tokens) {
					t.Errorf("prompt %d: metal %v, cpu %v", i, got[i].Tokens, want[i].Tokens)
				}
				if !slices.Equal(got[i].Tokens, ref.Prompts[i].Greedy) {
					t.Errorf("prompt %d: metal %v, transformers %v", i, got[i].Tokens, ref.Prompts[i].Greedy)
				}
				if d > 1e-4 {
					t.Errorf("prompt %d: logits differ from the CPU's by %.3g", i, d)
				}
			}
		})
	}
}

// TestExpertsTouchedAndProfile steps the MoE fixture on both backends with
// the same requests: each step's distinct experts per MoE layer agree, and
// profile mode times every op group with one command buffer each.
func TestExpertsTouchedAndProfile(t *testing.T) {
	mb := newEmu(t, metal.Tuning{})
	dir := filepath.Join(fixtureDir, "qwen3_moe")
	for _, strategy := range []bridge.MoEStrategy{bridge.MoEGrouped, bridge.MoEChunked, bridge.MoELoop} {
		opts := engine.Options{MoE: bridge.MoEParams{Strategy: strategy, ChunkSize: 3}, Profile: true}
		ce := openEngine(t, cpu.New(cpu.Options{}), model.Spec{Model: dir}, opts)
		me := openEngine(t, mb, model.Spec{Model: dir}, opts)
		for _, e := range []*engine.Engine{ce, me} {
			for i := range 3 {
				p := make([]int32, 3+5*i)
				for j := range p {
					p[j] = int32((i*97 + j*31) % 512)
				}
				if err := e.Add(engine.Request{ID: i, Prompt: p, MaxNewTokens: 3}); err != nil {
					t.Fatal(err)
				}
			}
		}
		for step := 0; ce.Pending(); step++ {
			cr, err := ce.Step()
			if err != nil {
				t.Fatal(err)
			}
			mr, err := me.Step()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cr.Stats.ExpertsTouched, mr.Stats.ExpertsTouched) {
				t.Errorf("%s step %d: experts touched %v, cpu %v", strategy, step, mr.Stats.ExpertsTouched, cr.Stats.ExpertsTouched)
			}
			if len(mr.Stats.Timings) != len(cr.Stats.Timings) {
				t.Errorf("%s step %d: %d timings, cpu %d", strategy, step, len(mr.Stats.Timings), len(cr.Stats.Timings))
			}
			for i, tm := range mr.Stats.Timings {
				c := cr.Stats.Timings[min(i, len(cr.Stats.Timings)-1)]
				if tm.Layer != c.Layer || tm.Op != c.Op || tm.Duration <= 0 {
					t.Errorf("%s step %d timing %d: %+v (cpu %+v)", strategy, step, i, tm, c)
					break
				}
			}
			if st := mb.LastStep(); st.CommandBuffers != len(mr.Stats.Timings) {
				t.Errorf("%s step %d: %d command buffers for %d timed op groups", strategy, step, st.CommandBuffers, len(mr.Stats.Timings))
			}
		}
		if me.Pending() {
			t.Fatalf("%s: metal engine has requests left", strategy)
		}
	}
}

// decodeStepLog runs a prefill step and a decode step of qwen3-moe-mini on
// dev through a Recorder and returns the decode step's log.
func decodeStepLog(t *testing.T, dev mtl.Device, batch int) ([]metal.Event, metal.StepStats) {
	rec := metal.NewRecorder(dev)
	be, err := metal.New(rec, metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	e := openEngine(t, be, model.Spec{Model: "qwen3-moe-mini", Seed: 7}, engine.Options{KVTokens: 256, Synchronous: true})
	for r := range batch {
		p := []int32{int32(11 + r), 502, int32(3000 + r)}
		if err := e.Add(engine.Request{ID: r, Prompt: p, MaxNewTokens: 4}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := e.Step(); err != nil || res.PrefillTokens != 3*batch {
		t.Fatalf("prefill step: %+v, %v", res, err)
	}
	n := rec.Len()
	res, err := e.Step()
	if err != nil || res.DecodeTokens != batch {
		t.Fatalf("decode step: %+v, %v", res, err)
	}
	return rec.Events()[n:], be.LastStep()
}

// TestEncodingIsDeviceAgnostic records a decode step of qwen3-moe-mini on
// the emulator and on a device that runs nothing: the backend makes the
// very same calls, in the same order, with the same arguments, so the
// emulator tests the encoding a real Metal device gets.
func TestEncodingIsDeviceAgnostic(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	const batch = 2
	onEmu, st := decodeStepLog(t, emu.New(emu.Options{}), batch)
	onNull, _ := decodeStepLog(t, metal.NullDevice{}, batch)
	if len(onEmu) != len(onNull) {
		t.Errorf("emu recorded %d events, the null device %d", len(onEmu), len(onNull))
	}
	for i := range min(len(onEmu), len(onNull)) {
		if onEmu[i] != onNull[i] {
			t.Fatalf("event %d: emu %v, null device %v", i, onEmu[i], onNull[i])
		}
	}
	kinds := map[string]int{}
	for _, ev := range onEmu {
		kinds[ev.Kind]++
	}
	// Encode-only: the step is committed in pieces as it is encoded
	// (bridge.StreamPieces), each piece one command buffer of one
	// concurrent pass (barriers between dependent dispatches), waited for
	// once.
	dispatches := kinds["dispatch"] + kinds["dispatch-threads"]
	var p bridge.StreamPieces
	pieces, cut := 0, 0
	for d := 1; d <= dispatches; d++ {
		if p.Take(d - cut) {
			pieces, cut = pieces+1, d
		}
	}
	if cut < dispatches {
		pieces++
	}
	if pieces < 2 {
		t.Errorf("a decode step of %d dispatches is %d piece(s): the test no longer shows a step committed in pieces", dispatches, pieces)
	}
	if kinds["concurrent encoder"] != pieces || kinds["encoder"] != 0 || kinds["commit"] != pieces || kinds["wait"] != pieces || onEmu[len(onEmu)-1].Kind != "wait" {
		t.Errorf("decode step: %d concurrent and %d serial encoders, %d commits, %d waits; want %d pieces", kinds["concurrent encoder"], kinds["encoder"], kinds["commit"], kinds["wait"], pieces)
	}
	t.Logf("decode step (batch %d): %d events, %d dispatches, %d barriers, %d pipelines switches; emulated GPU time %v",
		batch, len(onEmu), kinds["dispatch"]+kinds["dispatch-threads"], kinds["barrier"], kinds["pipeline"], st.GPUTime)
	if testing.Verbose() {
		for i, ev := range onEmu {
			if ev.Kind == "pipeline" || ev.Kind == "dispatch" || ev.Kind == "dispatch-threads" {
				fmt.Printf("  %4d %v\n", i, ev)
			}
		}
	}
}

// An encoder keeps a threadgroup memory length until it is set again, so a
// kernel with no threadgroup memory argument must not find one left by the
// dispatch before it: a device that adds up the lengths (as the darwin
// layer checks them) would count it against that kernel's limit.
func TestNoStaleThreadgroupMemory(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	// The kernels that take a threadgroup(0) buffer sized by the host.
	uses := []string{"matmul_", "moe_route", "moe_router_route", "moe_group", "moe_mm_", "paged_attention_d", "paged_attention_prefill"}
	for _, batch := range []int{1, 3} {
		events, _ := decodeStepLog(t, emu.New(emu.Options{}), batch)
		length, kernel, checked := 0, "", 0
		for _, ev := range events {
			switch ev.Kind {
			case "encoder":
				length = 0
			case "pipeline":
				kernel = ev.Name
			case "tgmem":
				if ev.Index == 0 {
					length = ev.Length
				}
			case "dispatch", "dispatch-threads":
				takes := false
				for _, u := range uses {
					takes = takes || strings.HasPrefix(kernel, u)
				}
				if !takes && length != 0 {
					t.Errorf("batch %d: %s dispatched with %d bytes of threadgroup memory left set", batch, kernel, length)
				}
				checked++
			}
		}
		if checked == 0 {
			t.Fatal("no dispatch recorded")
		}
	}
}

// Decode past the attention's partition size takes the split-K kernel and
// its reduce; with RoPE and QK-norm fused into it (Qwen3) that dispatch
// binds 17 buffers, more than a fixed table of 16 held. Partitions of 16
// keys put every fixture's decode there (float, mlx-lm and GGUF
// checkpoints; three requests of 9, 40 and 70 tokens in one batch, so the
// sequences of a step have one, three and five partitions): the same
// tokens as the CPU and logits within 1e-4 of its, fused or not.
func TestSplitDecodeMatchesCPU(t *testing.T) {
	mb := newEmu(t, metal.Tuning{AttnPartitionSize: 16})
	var models []string
	for _, arch := range []string{"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gpt2"} {
		models = append(models, filepath.Join(fixtureDir, arch))
	}
	for _, fx := range quantFixtures {
		models = append(models, filepath.Join("../../runner/testdata", fx[0]))
	}
	for _, dir := range models {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var reqs []engine.Request
			for i, n := range []int{9, 40, 70} {
				p := make([]int32, n)
				for j := range p {
					p[j] = int32((j*37 + 11*i + 5) % 256)
				}
				reqs = append(reqs, engine.Request{ID: i, Prompt: p, MaxNewTokens: 4, WantLogits: true})
			}
			// An f32 cache on both: a packed checkpoint's float dtype is
			// half, and so by default is the cache a GPU backend keeps.
			opts := engine.Options{KVDType: "f32"}
			want, err := openEngine(t, cpu.New(cpu.Options{}), model.Spec{Model: dir}, opts).Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			for _, fusion := range []bool{true, false} {
				opts.NoFusion = !fusion
				got, err := openEngine(t, mb, model.Spec{Model: dir}, opts).Generate(reqs)
				if err != nil {
					t.Fatalf("fusion %v: %v", fusion, err)
				}
				for i := range reqs {
					d := kernels.MaxAbsDiff(got[i].Logits, want[i].Logits)
					if !slices.Equal(got[i].Tokens, want[i].Tokens) || d > 1e-4 {
						t.Errorf("fusion %v, request %d: tokens %v (cpu %v), logits %.3g off the CPU's", fusion, i,
							got[i].Tokens, want[i].Tokens, d)
					}
				}
			}
		})
	}
}

// readReference reads a fixture's reference.json: transformers' logits and
// greedy tokens for its prompts.
func readReference(t *testing.T, path string) reference {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return ref
}
