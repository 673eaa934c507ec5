package bench

import (
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/suites"
)

const tinySuite = `name: tiny
model:
  preset: qwen3-moe-mini
  layers: 1
repetitions: 2
warmup: 1
interleave: %INTERLEAVE%
timing: %TIMING%
params: { prompt_len: 8, gen_len: 4 }
cases:
  - name: decode
    matrix:
      batch: [1, 2]
  - name: norm
    op: rms_norm
    params: { tokens: 4, width: 256 }
`

func loadSuite(t *testing.T, text string, repl ...string) *suites.Suite {
	t.Helper()
	r := strings.NewReplacer(append([]string{"%INTERLEAVE%", "true", "%TIMING%", "throughput"}, repl...)...)
	// Later replacements win: apply the caller's first.
	text = strings.NewReplacer(repl...).Replace(text)
	text = r.Replace(text)
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := suites.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openDB(t *testing.T) *results.DB {
	t.Helper()
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestRunRecordsEveryRepetition(t *testing.T) {
	for _, timing := range []string{"throughput", "profile"} {
		t.Run(timing, func(t *testing.T) {
			s := loadSuite(t, tinySuite, "%TIMING%", timing)
			db := openDB(t)
			events := 0
			sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: 16 << 20, Progress: func(Event) { events++ }})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Run.Status != results.RunRunning && sum.Run.ID == 0 {
				t.Fatal("no run recorded")
			}
			run, _ := db.GetRun(sum.RunID)
			if run.Status != results.RunComplete || run.TimingMode != timing {
				t.Fatalf("run status %q timing %q", run.Status, run.TimingMode)
			}
			if len(sum.Cases) != 3 {
				t.Fatalf("%d cases, want 3", len(sum.Cases))
			}
			for _, c := range sum.Cases {
				if c.Status != results.CaseDone {
					t.Fatalf("case %s: %s %s", c.Name, c.Status, c.Error)
				}
				samples, _ := db.Samples(c.ID)
				reps := map[int]bool{}
				for _, s := range samples {
					reps[s.Rep] = true
					// Suites may gate only what their kinds of case record.
					list := metrics.ModelCase
					if c.Kind == results.CaseKernel {
						list = metrics.KernelCase
					}
					if !slices.Contains(list, s.Metric) {
						t.Errorf("%s case %s records %s, which metrics does not list for its kind", c.Kind, c.Name, s.Metric)
					}
				}
				if len(reps) != 2 {
					t.Errorf("case %s: samples for reps %v, want 2 reps", c.Name, reps)
				}
				if c.Kind == results.CaseModel {
					if c.LayersRun != 1 || c.LayersTotal != 6 {
						t.Errorf("case %s: layers %d/%d, want 1/6", c.Name, c.LayersRun, c.LayersTotal)
					}
					timings, _ := db.OpTimings(c.ID)
					if (timing == "profile") != (len(timings) > 0) {
						t.Errorf("case %s: %d op timings in %s mode", c.Name, len(timings), timing)
					}
					if timing == "profile" && !hasMetric(samples, "profile_overhead_pct") {
						t.Errorf("case %s: profile mode did not record its cost", c.Name)
					}
				}
			}
			// warm-up + reps per case, plus one unprofiled rep per model case in profile mode
			want := 3 * 3
			if timing == "profile" {
				want += 2
			}
			if events != want {
				t.Errorf("%d progress events, want %d", events, want)
			}
		})
	}
}

func hasMetric(s []results.Sample, m string) bool {
	for _, x := range s {
		if x.Metric == m {
			return true
		}
	}
	return false
}

// A run stopped part-way keeps the cases it finished, is marked
// interrupted, and --resume finishes only the rest.
func TestInterruptAndResume(t *testing.T) {
	s := loadSuite(t, tinySuite, "%INTERLEAVE%", "false")
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
		if e.Done == 4 { // the first case is done (1 warm-up + 2 reps), the second has started
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	run, _ := db.GetRun(sum.RunID)
	if run.Status != results.RunInterrupted {
		t.Fatalf("status %q, want interrupted", run.Status)
	}
	cases, _ := db.Cases(sum.RunID)
	if cases[0].Status != results.CaseDone || cases[1].Status == results.CaseDone {
		t.Fatalf("after interrupt: %s=%s %s=%s", cases[0].Name, cases[0].Status, cases[1].Name, cases[1].Status)
	}
	first, _ := db.Samples(cases[0].ID)

	// Resumed with other overrides, its repetitions would measure other
	// settings under the same cases: refused, the run left to resume.
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID, Set: map[string]string{"fusion": "off"}}); err == nil ||
		!strings.Contains(err.Error(), `was recorded with overrides "" (now "fusion=off")`) {
		t.Fatalf("resume with other overrides: %v", err)
	}
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID, Threads: 1}); err == nil ||
		!strings.Contains(err.Error(), `was recorded with threads default (now 1)`) {
		t.Fatalf("resume with other threads: %v", err)
	}
	// Resumed with another tag, the tag was dropped without a word; none
	// given keeps the run's (a run's printed resume names none).
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID, Tag: "later"}); err == nil ||
		!strings.Contains(err.Error(), `was recorded with tag "" (now "later")`) {
		t.Fatalf("resume with another tag: %v", err)
	}
	// Another suite's run, and a run of no suite, are named as what they are.
	other := loadSuite(t, strings.Replace(tinySuite, "name: tiny", "name: other", 1))
	if _, err := Run(context.Background(), other, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID}); err == nil ||
		!strings.Contains(err.Error(), `run 1 is of suite "tiny"`) || !strings.Contains(err.Error(), `not of "other"`) {
		t.Fatalf("resume from another suite: %v", err)
	}
	tuned, err := db.CreateRun(&results.Run{SuiteName: "tune", Kind: results.KindTune, Backend: "cpu", TimingMode: "throughput"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: tuned}); err == nil ||
		!strings.Contains(err.Error(), "is a tune run, not a suite's") {
		t.Fatalf("resume of a tune run: %v", err)
	}
	sum2, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.RunID != sum.RunID {
		t.Fatalf("resume made run %d, want %d", sum2.RunID, sum.RunID)
	}
	run, _ = db.GetRun(sum.RunID)
	if run.Status != results.RunComplete {
		t.Fatalf("status after resume %q", run.Status)
	}
	cases, _ = db.Cases(sum.RunID)
	for _, c := range cases {
		if c.Status != results.CaseDone {
			t.Errorf("case %s %s after resume", c.Name, c.Status)
		}
	}
	again, _ := db.Samples(cases[0].ID)
	if len(again) != len(first) {
		t.Errorf("resume re-ran a finished case: %d samples, had %d", len(again), len(first))
	}
}

// Impossible suites fail with the position of the problem, before a run
// is recorded.
func TestImpossibleSuitesFailBeforeRunning(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"kv-blocks", `name: x
model: { preset: qwen3-moe-mini }
cases:
  - name: c
    params: { batch: 8, prompt_len: 64, gen_len: 64, kv_blocks: 7 }
`, "suite.yaml:5:"},
		{"too-big", `name: x
model: { preset: qwen3-30b-a3b }
cases:
  - name: c
    params: { batch: 1 }
`, "needs"},
		// Past the model's positions and past memory: the positions are
		// what is wrong, and what is said.
		{"positions", `name: x
model: { preset: qwen3-moe-mini }
cases:
  - name: c
    params: { batch: 1, prompt_len: 8, gen_len: 10000000 }
`, "more than the"},
		// The same, for a case whose model an earlier case loaded.
		{"positions-later", `name: x
model: { preset: qwen3-moe-mini }
cases:
  - name: a
    params: { batch: 1, prompt_len: 8, gen_len: 4 }
  - name: b
    params: { batch: 1, prompt_len: 8, gen_len: 10000000 }
`, "suite.yaml:7:"},
		// A case whose model an earlier case loaded is checked against
		// memory as that case would be alone.
		{"fit-later", `name: x
model: { preset: qwen3-moe-mini }
cases:
  - name: a
    params: { batch: 1, prompt_len: 8, gen_len: 4 }
  - name: b
    params: { batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 16777216, block_size: 32 }
`, "suite.yaml:2:18: case b: model qwen3-moe-mini needs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := loadSuite(t, c.yaml)
			db := openDB(t)
			_, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, MemoryLimit: 8 << 30})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
			if runs, _ := db.Runs(results.RunFilter{}); len(runs) != 0 {
				t.Fatalf("%d runs recorded for an impossible suite", len(runs))
			}
		})
	}
}

// A case's largest step holds every layer's activations for its tokens
// (a batch's whole prefill without a prefill_budget): the fit check counts
// them, as it does weights and the KV cache, so a batch whose prefill would
// take gigabytes is refused with the figure before any work, not run out of
// memory. The same batch with a prefill_budget takes its prompts in chunks.
func TestFitCountsStepActivations(t *testing.T) {
	const limit = 256 << 20 // weights 41 MiB, KV cache 33 MiB; the prefill ~700 MiB
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 64, prompt_len: 512, gen_len: 1 }
`)
	db := openDB(t)
	_, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, MemoryLimit: limit})
	if err == nil || !strings.Contains(err.Error(), "a step's activations") {
		t.Fatalf("err = %v, want the step's activations counted against the limit", err)
	}
	if runs, _ := db.Runs(results.RunFilter{}); len(runs) != 0 {
		t.Fatalf("%d runs recorded for a case refused", len(runs))
	}
	s = loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 64, prompt_len: 512, gen_len: 1, prefill_budget: 1024 }
`)
	if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1, MemoryLimit: limit}); err != nil {
		t.Fatalf("with a prefill budget: %v", err)
	}
}

// The memory check bounds a step's activations by the longest request the
// run draws, not the longest its range_ratio allows, which none may reach:
// a limit that holds the weights, the cache (sized for the range's longest)
// and a step of the drawn requests runs, though it is short of a step of
// the range's longest.
func TestFitCountsDrawnLengths(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 2, prompt_len: 1000, gen_len: 1, range_ratio: 0.9 }
`)
	mp := s.Cases[0].Model
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	be := cpu.New(cpu.Options{})
	run := engine.RunConfig(be, cfg)
	kvdt, err := engine.KVDType(be, src.DType(), mp.KVDType)
	if err != nil {
		t.Fatal(err)
	}
	w := caseWorkload(s, mp)
	kv := w.KVTokens(mp.BlockSize, mp.MaxSeqs)
	need := func(perSeq int) int64 {
		tokens, rows := engine.LargestStep(min(kv, 2*perSeq), 0, 2, 2)
		return run.WeightBytes(src.DType()) + run.KVBytesPerToken(kvdt)*int64(kv) + engine.StepBytes(run, be.ActDType(), tokens, rows)
	}
	_, p, g := w.longest()
	pmax, gmax := mp.MaxLens()
	limit := need(p + g)
	if need(pmax+gmax) <= limit {
		t.Fatalf("drawn %d+%d tokens, the range's %d+%d: the same step", p, g, pmax, gmax)
	}
	db := openDB(t)
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, MemoryLimit: limit}); err != nil {
		t.Fatalf("limit %d for requests of at most %d+%d tokens: %v", limit, p, g, err)
	}
	// A byte less is short of what the drawn requests take.
	if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1, MemoryLimit: limit - 1}); err == nil || !strings.Contains(err.Error(), "a step's activations") {
		t.Fatalf("limit %d: %v, want the step's activations counted against it", limit-1, err)
	}
}

// With fit: truncate-layers a model that does not fit runs its first layers
// and says so.
func TestTruncateLayersRecordsDepth(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, fit: truncate-layers }
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 1, prompt_len: 4, gen_len: 2 }
`)
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, MemoryLimit: 100 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := sum.Cases[0]
	if c.LayersTotal != 6 || c.LayersRun < 1 || c.LayersRun >= 6 {
		t.Fatalf("layers %d/%d, want a truncated depth of 6", c.LayersRun, c.LayersTotal)
	}
}

// An interleaved run (the default) interrupted mid-way keeps every
// repetition it finished, and --resume runs exactly the missing ones.
func TestInterleavedInterruptKeepsRepetitions(t *testing.T) {
	s := loadSuite(t, tinySuite) // interleave: true; 3 cases, 1 warm-up, 2 reps
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	reps := 0
	sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
		if e.Rep >= 0 && e.Err == nil {
			reps++
		}
		if reps == 4 { // round 0 of all three cases, and the first case's rep 1
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	cases, _ := db.Cases(sum.RunID)
	stored := 0
	for _, c := range cases {
		stored += c.RepsDone
		ss, _ := db.Samples(c.ID)
		got := map[int]bool{}
		for _, x := range ss {
			got[x.Rep] = true
		}
		if len(got) != c.RepsDone {
			t.Errorf("case %s: samples of %d reps, reps_done %d", c.Name, len(got), c.RepsDone)
		}
	}
	if stored != reps {
		t.Fatalf("%d repetitions finished, %d stored", reps, stored)
	}
	ran := 0
	_, err = Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID, Progress: func(e Event) {
		if e.Rep >= 0 {
			ran++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*2 - reps; ran != want {
		t.Errorf("resume ran %d repetitions, want the %d missing", ran, want)
	}
	cases, _ = db.Cases(sum.RunID)
	for _, c := range cases {
		ss, _ := db.Samples(c.ID)
		got := map[int]bool{}
		for _, x := range ss {
			got[x.Rep] = true
		}
		if c.Status != results.CaseDone || len(got) != 2 || c.RepsDone != 2 {
			t.Errorf("case %s after resume: %s, reps %v, reps_done %d", c.Name, c.Status, got, c.RepsDone)
		}
	}
}

// A model case's repetitions stored by a run interrupted before the case
// finished are of its layer-limited model, and the store says so: show
// marks them so, and compare does not take them for whole-model figures.
func TestInterruptedRunKeepsLayers(t *testing.T) {
	s := loadSuite(t, tinySuite) // the model cut to 1 layer
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
		if e.Rep == 0 && e.Err == nil {
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	cases, err := db.Cases(sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	models := 0
	for _, c := range cases {
		if c.Kind != results.CaseModel {
			continue
		}
		models++
		if c.Status == results.CaseDone || c.LayersRun != 1 || c.LayersTotal <= 1 {
			t.Errorf("case %s: %s, layers %d of %d; want pending, 1 of the model's", c.Name, c.Status, c.LayersRun, c.LayersTotal)
		}
	}
	if models == 0 {
		t.Fatal("no model case stored")
	}
}

// A run its process still runs cannot be resumed by another.
func TestResumeOfALiveRunIsRefused(t *testing.T) {
	s := loadSuite(t, tinySuite)
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	var resumeErr error
	_, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
		if e.Done == 1 {
			// Another process resuming this live run (this test process
			// is its owner; a second owner's pid stands for the other).
			other, err := results.Open(db.Path())
			if err != nil {
				t.Error(err)
				return
			}
			defer other.Close()
			_, err = other.SQL().Exec(`UPDATE runs SET owner_pid = ? WHERE id = 1`, os.Getppid())
			if err != nil {
				t.Error(err)
			}
			resumeErr = other.ResumeRun(1)
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(resumeErr, results.ErrRunBusy) {
		t.Errorf("resuming a live run: %v, want ErrRunBusy", resumeErr)
	}
}

// A prompt at depth: the context before it is prefilled but not measured;
// the prefill figures are the prompt's own step, whose FLOPs per token
// include attention over the depth (model.Config.StepFLOPs), and the
// matmul probe gives their fraction of the peak.
func TestPrefillAtDepthMeasuresThePrompt(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { prompt_len: 8, gen_len: 1 }
    matrix:
      depth: [0, 20]
      batch: [1, 2]
`)
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithLayers(1); err != nil {
		t.Fatal(err)
	}
	// A depth that is no multiple of the prompt: the context is filled up
	// to it, and the prompts after it are one step, at either batch.
	for i, c := range sum.Cases {
		depth := int64(20 * (i / 2))
		samples, _ := db.Samples(c.ID)
		got := map[string]float64{}
		for _, s := range samples {
			got[s.Metric] = s.Value
		}
		var attended int64
		for p := depth; p < depth+8; p++ {
			attended += p + 1
		}
		want := cfg.StepFLOPs(8, model.Attended{All: attended}, 1) / 8
		perToken := got["prefill_gflop_s"] * 1e9 / got["prefill_tok_s"]
		if math.Abs(perToken-want) > 1e-6*want || got["prefill_roofline_frac"] <= 0 {
			t.Errorf("case %s: %.6g FLOPs a prompt token (want %.6g, the prompt's own step), roofline fraction %g",
				c.Name, perToken, want, got["prefill_roofline_frac"])
		}
	}
}

// A packed model's cases record its format as their dtype, not the float
// dtype of its scales: a q4 run is not filed as a bf16 one. A checkpoint's
// is its kind and the packed type most of its matrices use. A float
// checkpoint runs, and records, its own dtype unless the suite sets one (a
// GGUF of floats too), a preset bf16.
func TestPackedRunsRecordTheirFormat(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct{ model, want string }{
		{"preset: qwen3-moe-mini\n  layers: 1\n  dtype: bf16", "bf16"},
		{"preset: qwen3-moe-mini\n  layers: 1\n  dtype: q4", "q4"},
		{"preset: qwen3-moe-mini\n  layers: 1\n  dtype: q8_0", "q8_0"},
		{"path: " + abs("../testdata/mlx/qwen3_moe-q8"), "mlx-q8"},
		{"path: " + abs("../testdata/gguf/llama-q4_k_m.gguf"), "gguf-q4_k"},
		{"preset: qwen3-moe-mini\n  layers: 1", "bf16"},
		{"path: " + abs("../testdata/hf/llama"), "f32"},
		{"path: " + abs("../testdata/hf/llama") + "\n  dtype: bf16", "bf16"},
		{"path: " + abs("../testdata/gguf/llama-rope-linear.gguf"), "f32"},
		{"path: " + abs("../testdata/gguf/llama-rope-linear.gguf") + "\n  dtype: f16", "f16"},
	} {
		dt := c.want
		t.Run(dt, func(t *testing.T) {
			s := loadSuite(t, strings.Replace(tinySuite, "  preset: qwen3-moe-mini\n  layers: 1\n", "  "+c.model+"\n", 1))
			db := openDB(t)
			sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: 16 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range sum.Cases {
				if c.Kind == results.CaseModel && c.Params["dtype"] != dt {
					t.Errorf("case %s records dtype %q, want %q", c.Name, c.Params["dtype"], dt)
				}
			}
		})
	}
}

// Requests staggered further apart than the engine takes to serve one
// arrive as soon as it is idle: the steps between would be empty, so a
// stagger of a billion steps does not spin through them.
func TestStaggerSkipsIdleSteps(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 1, prompt_len: 4, gen_len: 2, requests: 3, arrival: "stagger:1000000000" }
`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := Run(ctx, s, Options{DB: openDB(t), BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Cases) != 1 {
		t.Fatalf("%d cases", len(sum.Cases))
	}
}

// weights: synthetic with a path runs seeded weights of the checkpoint's
// architecture, in a packed dtype too, and its cases say so.
func TestSyntheticWeightsOfACheckpoint(t *testing.T) {
	s := loadSuite(t, `name: syn
model: { path: ../testdata/hf/qwen3_moe, weights: synthetic, dtype: q4 }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: decode
`)
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := db.Cases(sum.RunID)
	if len(cases) != 1 || cases[0].Status != results.CaseDone {
		t.Fatalf("cases %+v", cases)
	}
	p := cases[0].Params
	if p["weights"] != "synthetic" || p["dtype"] != "q4" || p["model"] != "qwen3_moe" {
		t.Errorf("recorded params %v, want weights synthetic, dtype q4, model qwen3_moe", p)
	}
}

// A model case records the seed of its weights and prompts beside its key,
// so that runs of two seeds are told apart, and its model's vocabulary, which
// a top_k in its key is read against (suites.StoredKeys).
func TestModelCasesRecordTheSeed(t *testing.T) {
	for _, c := range []struct{ model, want, vocab string }{
		{"{ preset: qwen3-moe-mini, layers: 1 }", "1", "8192"},
		{"{ preset: qwen3-moe-mini, layers: 1, seed: 7 }", "7", "8192"},
		{"{ path: ../testdata/hf/llama }", "1", "512"}, // its config.json's vocab_size
	} {
		t.Run(c.model, func(t *testing.T) {
			s := loadSuite(t, `name: seed
model: `+c.model+`
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: decode
  - name: norm
    op: rms_norm
    params: { tokens: 4, width: 64 }
`)
			db := openDB(t)
			sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
			if err != nil {
				t.Fatal(err)
			}
			cases, _ := db.Cases(sum.RunID)
			for _, rc := range cases {
				got, ok := rc.Params["seed"]
				if rc.Kind == results.CaseModel && got != c.want || rc.Kind == results.CaseKernel && ok {
					t.Errorf("%s case %s records seed %q (recorded %v), want %q on model cases only", rc.Kind, rc.Name, got, ok, c.want)
				}
				got, ok = rc.Params["vocab"]
				if rc.Kind == results.CaseModel && got != c.vocab || rc.Kind == results.CaseKernel && ok {
					t.Errorf("%s case %s records vocab %q (recorded %v), want %q on model cases only", rc.Kind, rc.Name, got, ok, c.vocab)
				}
			}
		})
	}
}

// A case's threads is the goroutine count its repetitions run on, and the
// one its tuned configs are looked up at; a backend with no goroutines
// refuses it.
func TestCaseThreads(t *testing.T) {
	s := loadSuite(t, `name: th
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: d
    matrix: { threads: [1, 3] }
  - name: mm
    op: matmul
    params: { m: 1, n: 64, k: 64, dtype: f32 }
    matrix: { threads: [1, 3] }
  - name: all
`)
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := db.Cases(sum.RunID)
	got := map[string]string{}
	for _, c := range cases {
		got[c.Name] = c.Params["tuned.matmul"]
	}
	for name, want := range map[string]string{"d/threads=1": "even/1t", "d/threads=3": "even/3t", "all": "even/2t"} {
		if !strings.HasPrefix(got[name], want) {
			t.Errorf("%s: tuned.matmul %q, want %s", name, got[name], want)
		}
	}

	be := cpu.New(cpu.Options{Threads: 2})
	ps, done, err := prepare(context.Background(), s, be, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	for _, p := range ps {
		if _, err := p.rep(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		want := 2
		if p.threads > 0 {
			want = p.threads
		}
		if be.Threads() != want {
			t.Errorf("%s ran on %d goroutines, want %d", p.c.Name, be.Threads(), want)
		}
	}

	s = loadSuite(t, "name: th\nbackend: metal-emu\ncases:\n  - name: mm\n    op: matmul\n    params: { m: 1, n: 64, k: 64, threads: 2 }\n")
	if _, _, err := prepare(context.Background(), s, noThreads{be}, 0, 0, nil); err == nil || !strings.Contains(err.Error(), "threads is the cpu backend's") {
		t.Errorf("threads on a backend without goroutines: %v", err)
	}
}

// noThreads hides the CPU backend's goroutine count.
type noThreads struct{ bridge.Backend }

// A case's peak resident set is its own: the other models a suite holds
// (every layer count of a matrix over layers) are not in it.
func TestPeakRSSIsTheCase(t *testing.T) {
	if host.Resident(make([]byte, 1)) < 0 {
		t.Skip("the kernel does not say which pages are resident (mincore), and the peak cannot be reset")
	}
	const suite = `name: rss
model: { preset: qwen3-moe-mini }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: l
    matrix: { layers: %LAYERS% }
`
	peak := func(layers string) float64 {
		db := openDB(t)
		sum, err := Run(context.Background(), loadSuite(t, suite, "%LAYERS%", layers), Options{DB: db, BandwidthBuffer: -1})
		if err != nil {
			t.Fatal(err)
		}
		samples, _ := db.Samples(sum.Cases[0].ID) // layers=1
		for _, s := range samples {
			if s.Metric == "peak_rss_bytes" {
				return s.Value
			}
		}
		t.Fatal("no peak_rss_bytes")
		return 0
	}
	alone, beside := peak("[1]"), peak("[1, 6]")
	// The 6-layer model's bf16 weights alone are 168 MiB.
	if beside > 1.5*alone+16<<20 {
		t.Errorf("layers=1 peaks at %.0f MiB beside a 6-layer model, %.0f MiB alone", beside/(1<<20), alone/(1<<20))
	}
}

// A suite that cannot run fails before the bandwidth probe's work (a
// quarter of a GiB read for a second); one that runs is probed, and its
// model cases get the figure.
func TestCasesAreCheckedBeforeTheProbe(t *testing.T) {
	probed := 0
	was := measureReadBandwidth
	measureReadBandwidth = func(int, int) float64 { probed++; return 1e9 }
	t.Cleanup(func() { measureReadBandwidth = was })
	for _, tt := range []struct {
		name, yaml, want string
		probes           int
	}{
		{"no such model", "name: x\nbackend: cpu\nmodel: { path: /nonexistent/model }\ncases:\n  - name: c\n", "/nonexistent/model", 0},
		{"past memory", "name: x\nbackend: cpu\nmodel: { preset: qwen3-30b-a3b }\ncases:\n  - name: c\n", "needs", 0},
		{"runs", "name: x\nbackend: cpu\nmodel: { preset: qwen3-moe-mini }\nrepetitions: 1\nwarmup: 0\ncases:\n  - name: c\n    params: { prompt_len: 4, gen_len: 2 }\n", "", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			probed = 0
			s := loadSuite(t, tt.yaml)
			sum, err := Run(context.Background(), s, Options{DB: openDB(t), MemoryLimit: 8 << 30})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if probed != tt.probes {
				t.Errorf("%d probes, want %d", probed, tt.probes)
			}
			if tt.want == "" && sum.Run.ReadBandwidthGBs != 1 {
				t.Errorf("run's bandwidth %g GB/s, want the probe's 1", sum.Run.ReadBandwidthGBs)
			}
		})
	}
}

// residentMemory is a backend whose available memory shrinks by each
// weight it is handed, as a machine's does while a model's weights are
// held in memory.
type residentMemory struct {
	bridge.Backend
	avail int64
}

func (r *residentMemory) Info() bridge.DeviceInfo {
	i := r.Backend.Info()
	i.AvailableBytes = r.avail
	return i
}

func (r *residentMemory) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	r.avail -= int64(len(data))
	return r.Backend.Weight(dt, shape, data)
}

// Cases that share a loaded model are checked against the memory there was
// before it loaded: the weights they share are not needed twice. Checked
// against what was left, every case after the first of a model truncated
// to fill memory was refused (make run on a 24 GB machine).
func TestSharedModelCheckedOnce(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, fit: truncate-layers }
repetitions: 1
warmup: 0
cases:
  - name: c
    matrix: { batch: [1, 2, 4] }
    params: { prompt_len: 4, gen_len: 2 }
`)
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	half, _ := cfg.WithLayers(cfg.Layers / 2)
	be := &residentMemory{Backend: cpu.New(cpu.Options{Threads: 1}), avail: half.WeightBytes(bridge.BF16) * 3 / 2}
	ps, done, err := prepare(context.Background(), s, be, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if len(ps) != 3 {
		t.Fatalf("%d cases prepared, want 3", len(ps))
	}
	for _, p := range ps {
		if l := p.model.Config.Layers; l < 1 || l >= cfg.Layers || l != ps[0].model.Config.Layers {
			t.Errorf("%s: %d layers, want the first case's truncated %d of %d", p.c.Name, l, ps[0].model.Config.Layers, cfg.Layers)
		}
	}
}

// A kernel case its backend does not run (a packed format the CPU reads
// transcoded) is skipped, recorded with the reason, and the others run:
// docs/suites.md says so, and validate, which passes such a case, agrees.
// A suite of nothing the backend runs is refused before a run is recorded.
func TestUnsupportedKernelCasesAreSkipped(t *testing.T) {
	s := loadSuite(t, `name: k
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: norm
    op: rms_norm
    params: { tokens: 1, width: 64 }
  - name: gemv
    op: qmatmul
    params: { m: 1, n: 64, k: 256 }
    matrix: { dtype: [q4, q5_k] }
`)
	if err := Check(s, nil); err != nil {
		t.Fatalf("validate: %v", err)
	}
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, c := range sum.Cases {
		status[c.Name] = c.Status
		if c.Name == "gemv/dtype=q5_k" && !strings.Contains(c.Error, "Q5_K") {
			t.Errorf("skipped case's reason %q does not name the format", c.Error)
		}
	}
	want := map[string]string{"norm": results.CaseDone, "gemv/dtype=q4": results.CaseDone, "gemv/dtype=q5_k": results.CaseSkipped}
	if !maps.Equal(status, want) {
		t.Errorf("cases %v, want %v", status, want)
	}
	if sum.Skipped != 1 || sum.Failed != 0 {
		t.Errorf("summary: %d skipped, %d failed; want 1 and 0", sum.Skipped, sum.Failed)
	}

	none := loadSuite(t, `name: k
backend: cpu
cases:
  - name: gemv
    op: qmatmul
    params: { m: 1, n: 64, k: 256, dtype: q5_k }
`)
	_, err = Run(context.Background(), none, Options{DB: db, BandwidthBuffer: -1})
	if err == nil || !strings.Contains(err.Error(), "suite.yaml:4:5: case gemv: op=qmatmul: cpu: Q5_K") || !strings.Contains(err.Error(), "no case of the suite runs on the cpu backend") {
		t.Fatalf("err = %v", err)
	}
	if runs, _ := db.Runs(results.RunFilter{}); len(runs) != 1 {
		t.Errorf("%d runs recorded, want only the first", len(runs))
	}
}

// A suite run case by case (interleave: false) makes a kernel case's data
// as the case comes to run and frees it once the case finishes, so it
// holds one case's data at a time; an interleaved suite holds every case's
// while they run, and frees them all at its end. Before, every case's data
// was made before the first ran and held until the backend closed.
func TestKernelCasesHeldWhileTheyRun(t *testing.T) {
	for _, c := range []struct {
		interleave string
		most       int64
	}{{"false", 1}, {"true", 3}} {
		t.Run("interleave="+c.interleave, func(t *testing.T) {
			s := loadSuite(t, `name: k
backend: cpu
repetitions: 2
warmup: 1
interleave: %INTERLEAVE%
cases:
  - name: gemv
    op: qmatmul
    params: { m: 1, n: 256, k: 512 }
    matrix: { dtype: [q4, q8, q4_0] }
`, "%INTERLEAVE%", c.interleave)
			base := kbench.Live()
			var most int64
			_, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1, Progress: func(Event) {
				most = max(most, kbench.Live()-base)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if most != c.most {
				t.Errorf("at most %d cases' data held at once, want %d", most, c.most)
			}
			if n := kbench.Live() - base; n != 0 {
				t.Errorf("%d cases' data still held after the run", n)
			}
		})
	}
}

// A model case run after kernel cases, case by case, peaks at what it peaks
// at alone: the kernel cases' data, freed, is given back (the Metal
// backend's pool, the Go heap) before it starts. Before, on metal-emu, it
// counted every earlier case's buffers, kept in the pool.
func TestPeakRSSAfterKernelCases(t *testing.T) {
	if host.Resident(make([]byte, 1)) < 0 {
		t.Skip("the kernel does not say which pages are resident (mincore), and the peak cannot be reset")
	}
	const suite = `name: rss
model: { preset: qwen3-moe-mini, layers: 1 }
backend: %BACKEND%
repetitions: 1
warmup: 0
interleave: false
params: { prompt_len: 4, gen_len: 2 }
cases:
%KERNELS%
  - name: step
`
	const kernels = `  - name: big
    op: matmul
    params: { m: 1, k: 4096, dtype: f32 }
    matrix: { n: [4096, 6144, 8192] }`
	for _, backend := range []string{"cpu", "metal-emu"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "metal-emu" {
				if _, err := emu.FindCompiler(""); err != nil {
					t.Skip(err)
				}
			}
			peak := func(kernelCases string) float64 {
				db := openDB(t)
				s := loadSuite(t, suite, "%BACKEND%", backend, "%KERNELS%", kernelCases)
				sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
				if err != nil {
					t.Fatal(err)
				}
				c := sum.Cases[len(sum.Cases)-1]
				samples, _ := db.Samples(c.ID)
				for _, s := range samples {
					if s.Metric == "peak_rss_bytes" {
						return s.Value
					}
				}
				t.Fatal("no peak_rss_bytes")
				return 0
			}
			alone, after := peak(""), peak(kernels)
			// The kernel cases' weights are 64, 96 and 128 MiB.
			t.Logf("step peaks at %.0f MiB after the kernel cases, %.0f MiB alone", after/(1<<20), alone/(1<<20))
			if after > 1.5*alone+32<<20 {
				t.Errorf("step peaks at %.0f MiB after the kernel cases, %.0f MiB alone", after/(1<<20), alone/(1<<20))
			}
		})
	}
}

// A run interrupted under an earlier mtlbench, which keyed a kernel case
// with a suite param its op does not read (rms_norm with k=64), resumes
// the case it stored, not none (suites.StoredKeys).
func TestResumeOfARunStoredUnderOldKeys(t *testing.T) {
	s := loadSuite(t, `name: old
repetitions: 2
warmup: 0
interleave: false
params: { k: 64, width: 256 }
cases:
  - name: mm
    op: matmul
    params: { m: 1, n: 32 }
  - name: norm
    op: rms_norm
    params: { tokens: 4 }
`)
	db := openDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
		if e.Done == 2 { // mm is done, norm is not
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	cases, _ := db.Cases(sum.RunID)
	if len(cases) != 2 || cases[1].Status == results.CaseDone || !strings.HasPrefix(cases[1].Key, "kernel/norm/op=rms_norm/") {
		t.Fatalf("after interrupt: %+v", cases)
	}
	// As the earlier mtlbench stored it.
	old := strings.Replace(cases[1].Key, "kernel/norm/", "kernel/norm/k=64/", 1)
	if _, err := db.SQL().Exec(`UPDATE cases SET case_key = ? WHERE id = ?`, old, cases[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID}); err != nil {
		t.Fatal(err)
	}
	cases, _ = db.Cases(sum.RunID)
	if len(cases) != 2 || cases[1].Status != results.CaseDone || cases[1].Key != old {
		t.Errorf("after resume: %+v", cases)
	}
}

// A run interrupted under an earlier mtlbench, which keyed a parameter
// written at its default (tokens: 1, dtype: bf16) with it, resumes the
// cases it stored, whether the suite still writes the defaults or has
// since dropped them: its finished case is not run again, nor stored twice
// (suites.StoredKeys).
func TestResumeOfARunStoredWithDefaultsInItsKeys(t *testing.T) {
	const suite = `name: defaults
repetitions: 2
warmup: 0
interleave: false
cases:
  - name: norm
    op: rms_norm
    params: { width: 256%NORM% }
  - name: mm
    op: matmul
    params: { n: 32, k: 64%MM% }
`
	// withSeg is key as the earlier mtlbench spelled it: seg among its
	// parameters, sorted.
	withSeg := func(key, seg string) string {
		parts := strings.Split(key, "/")
		if slices.Contains(parts, seg) {
			return key
		}
		rest := append(slices.Clone(parts[2:]), seg)
		slices.Sort(rest)
		return strings.Join(append(parts[:2:2], rest...), "/")
	}
	for _, tc := range []struct{ name, norm, mm string }{
		{"the suite writes the defaults", ", tokens: 1", ", dtype: bf16"},
		{"the suite has dropped them", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, suite, "%NORM%", tc.norm, "%MM%", tc.mm)
			db := openDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Progress: func(e Event) {
				if e.Done == 2 { // norm is done, mm is not
					cancel()
				}
			}})
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("err = %v, want ErrInterrupted", err)
			}
			cases, _ := db.Cases(sum.RunID)
			if len(cases) != 2 || cases[0].Status != results.CaseDone || cases[1].Status == results.CaseDone {
				t.Fatalf("after interrupt: %+v", cases)
			}
			done, _ := db.Samples(cases[0].ID)
			// As the earlier mtlbench stored them.
			old := []string{withSeg(cases[0].Key, "tokens=1"), withSeg(cases[1].Key, "dtype=bf16")}
			for i, k := range old {
				if _, err := db.SQL().Exec(`UPDATE cases SET case_key = ? WHERE id = ?`, k, cases[i].ID); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID}); err != nil {
				t.Fatal(err)
			}
			cases, _ = db.Cases(sum.RunID)
			if len(cases) != 2 || cases[0].Key != old[0] || cases[1].Key != old[1] ||
				cases[0].Status != results.CaseDone || cases[1].Status != results.CaseDone || cases[0].RepsDone != 2 {
				t.Fatalf("after resume: %+v", cases)
			}
			if again, _ := db.Samples(cases[0].ID); !reflect.DeepEqual(again, done) {
				t.Errorf("the finished case ran again: %d samples before the resume, %d after", len(done), len(again))
			}
		})
	}
}

// An interleaved suite makes every kernel case's data before the first
// repetition, so its cases must fit together: cases that each fit alone,
// but not side by side, are refused before any is made, pointing at
// interleave: false, rather than filling memory until one case fails. Run
// one at a time, they pass.
func TestInterleavedKernelCasesFitTogether(t *testing.T) {
	const suite = `name: k
repetitions: 1
warmup: 0
interleave: %INTERLEAVE%
cases:
  - name: mm
    op: matmul
    params: { m: 1, k: 1024, dtype: f32 }
    matrix: { n: [1024, 1536, 2048] }
`
	var most, held int64
	probe := cpu.New(cpu.Options{Threads: 1})
	for _, n := range []int{1024, 1536, 2048} {
		m, err := kbench.Need(probe, ops.Args{Op: ops.MatMul, DType: "f32", Ints: ops.Shape{ops.M: 1, ops.N: n, ops.K: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, m.Tensors+m.Scratch)
		held += m.Tensors
	}
	avail := most + 1<<20
	if held <= avail {
		t.Fatalf("the cases together (%d bytes) fit in %d", held, avail)
	}
	for _, tc := range []struct{ interleave, want string }{
		{"true", "suite.yaml:4:13: the 3 interleaved kernel cases need ~"},
		{"false", ""},
	} {
		t.Run("interleave="+tc.interleave, func(t *testing.T) {
			s := loadSuite(t, suite, "%INTERLEAVE%", tc.interleave)
			be := &residentMemory{Backend: cpu.New(cpu.Options{Threads: 1}), avail: avail}
			base := kbench.Live()
			ps, done, err := prepare(context.Background(), s, be, 0, 0, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				done()
				if len(ps) != 3 {
					t.Errorf("%d cases prepared, want 3", len(ps))
				}
				return
			}
			if err == nil {
				for _, p := range ps {
					p.closeKernel()
				}
				done()
				t.Fatal("cases that do not fit together were prepared")
			}
			msg := err.Error()
			if i := strings.Index(msg, tc.want); i < 0 || !strings.Contains(msg, "interleave: false") {
				t.Errorf("error %q, want %q and interleave: false", msg, tc.want)
			}
			if n := kbench.Live() - base; n != 0 {
				t.Errorf("%d cases' data made before the refusal", n)
			}
		})
	}
}
