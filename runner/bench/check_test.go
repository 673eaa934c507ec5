package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// Check refuses the kernel parameters run refuses, with run's words and
// the parameter's line, and leaves memory to run.
func TestCheckKernelCases(t *testing.T) {
	s := loadSuite(t, `name: k
backend: cpu
cases:
  - name: packed
    kind: kernel
    op: matmul
    params: { m: 1, n: 64, k: 64, dtype: q4 }
  - name: wide
    kind: kernel
    op: matmul
    params: { m: 1, n: 2147483647, k: 64 }
  - name: large
    kind: kernel
    op: matmul
    params: { m: 65536, n: 65536, k: 65536 }
  - name: fine
    kind: kernel
    op: rms_norm
    params: { tokens: 4, width: 256 }
`)
	err := Check(s, nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{":7:42: case packed: dtype=q4: supported dtypes are f32, f16, bf16", ":11:24: case wide: n=2147483647: must be at most"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	// A value from `run --set` is blamed on the --set, in Check and in run.
	s = loadSuite(t, "name: k\nbackend: cpu\ncases:\n  - name: mm\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64 }\n")
	if err := s.Override(map[string]string{"dtype": "q4"}); err != nil {
		t.Fatal(err)
	}
	want := "--set dtype=q4: case mm: dtype=q4: supported dtypes are f32, f16, bf16"
	if err := Check(s, nil); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check: %v, want %q", err, want)
	}
	if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: %v, want %q", err, want)
	}
	for _, not := range []string{"large", "fine"} {
		if strings.Contains(msg, "case "+not) {
			t.Errorf("%q refuses case %s, which run may take", msg, not)
		}
	}
}

// Check refuses a model case whose kv_blocks cannot hold one request,
// with run's words and the parameter's line; fewer than its batch needs
// side by side is allowed (the scheduler preempts), and run records the
// preemptions.
func TestCheckKVBlocks(t *testing.T) {
	s := loadSuite(t, `name: kv
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 8, gen_len: 12, block_size: 8, batch: 3 }
cases:
  - name: decode
    matrix:
      kv_blocks: [2, 5]
`)
	err := Check(s, nil)
	if err == nil {
		t.Fatal("no error")
	}
	// The case is named: the matrix's line is every kv_blocks case's.
	want := ":10:19: case decode/kv_blocks=2: kv_blocks=2 hold 16 tokens, but one request of 8+12 tokens needs 3 blocks of 8"
	if msg := err.Error(); !strings.Contains(msg, want) || strings.Count(msg, " hold ") != 1 {
		t.Errorf("%q, want one error saying %q", msg, want)
	}
	s.Cases = s.Cases[1:]
	if err := Check(s, nil); err != nil {
		t.Fatal(err)
	}
	got := runFirstCase(t, s)
	if got["preemptions"] == 0 || got["decode_tok_s"] <= 0 {
		t.Errorf("5 blocks for 3 requests of 3: %v", got)
	}
}

// With a range_ratio, kv_blocks must hold the longest request the run
// draws (seeded: every run draws the same), not the longest the range
// allows, which none may reach. Seed 1 draws prompts of 13, 17 and 14
// tokens and outputs of 6, 5 and 8: the longest request is 22 tokens, 3
// blocks of 8, where the range reaches 24+12 tokens, 5 blocks.
func TestCheckKVBlocksDrawnLengths(t *testing.T) {
	for _, c := range []struct {
		name, blocks, want string
	}{
		{"every drawn request fits", "3", ""},
		{"a drawn request does not fit", "2",
			":8:110: case c: kv_blocks=2 hold 16 tokens, but its longest request (request 1 at range_ratio 0.5) of 17+5 tokens needs 3 blocks of 8 (hint: raise kv_blocks to 3 or more)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadSuite(t, `name: kv
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 1, requests: 3, prompt_len: 16, gen_len: 8, range_ratio: 0.5, block_size: 8, kv_blocks: `+c.blocks+` }
`)
			if w := caseWorkload(s, s.Cases[0].Model); w.KVTokens(8, 1) != 5*8 {
				t.Fatalf("the range's longest request takes %d tokens' blocks, want 5 blocks of 8", w.KVTokens(8, 1))
			}
			if got, ran := checkThenRun(t, s, c.want); ran && got["decode_tok_s"] <= 0 {
				t.Errorf("3 blocks for the longest drawn request: %v", got)
			}
		})
	}
}

// With a range_ratio, the model's positions must hold the longest request
// the run draws, not the longest the range allows, which none may reach:
// the test model has 256 positions, and prompt_len 200 and gen_len 40 at
// range_ratio 0.1 reach 220 + 44 tokens, where seed 1's three requests are
// 238 tokens at most.
func TestCheckPositionsDrawnLengths(t *testing.T) {
	for _, c := range []struct {
		name, params, want string
	}{
		{"every drawn request fits", "prompt_len: 200, gen_len: 40", ""},
		{"a drawn request does not fit", "prompt_len: 240, gen_len: 20",
			":8:27: case c: prompt_len 240 and gen_len 20 at range_ratio 0.1 draw request 1 of 242 + 18 = 260 tokens, more than the 256 positions of llama (hint: lower prompt_len or gen_len)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadSuite(t, `name: pos
model: { path: ../testdata/hf/llama }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { `+c.params+`, batch: 1, requests: 3, range_ratio: 0.1 }
`)
			if got, ran := checkThenRun(t, s, c.want); ran && got["decode_tok_s"] <= 0 {
				t.Errorf("every drawn request within the positions: %v", got)
			}
		})
	}
}

// A request past the model's positions is refused at the length to lower
// and hints the lengths that can shed the excess, each alone where any
// can: depth 1 beside gen_len 5000 hinted "lower depth", at depth's line.
// Each case's params are on line 8, in the order depth, prompt_len,
// gen_len; qwen3-moe-mini has 4096 positions.
func TestCheckPositionsNamesWhatToLower(t *testing.T) {
	for _, c := range []struct {
		depth, prompt, gen int
		at, lower          string
	}{
		{1, 4, 5000, "gen_len", "gen_len"},
		{5000, 4, 2, "depth", "depth"},
		{0, 3000, 3000, "prompt_len", "prompt_len or gen_len"},
		{0, 2, 4100, "gen_len", "gen_len"},
		{2000, 2000, 2000, "depth", "depth or prompt_len or gen_len"},
		{2000, 100, 2100, "gen_len", "depth or gen_len"},
		{3000, 3000, 3000, "depth", "depth or prompt_len or gen_len"},
	} {
		params := fmt.Sprintf("depth: %d, prompt_len: %d, gen_len: %d", c.depth, c.prompt, c.gen)
		s := loadSuite(t, `name: pos
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { `+params+`, batch: 1 }
`)
		err := Check(s, nil)
		col := strings.Index(params, c.at+":") + len("    params: { ") + 1
		lens := fmt.Sprintf("prompt_len %d + gen_len %d", c.prompt, c.gen)
		if c.depth > 0 {
			lens = fmt.Sprintf("depth %d + %s", c.depth, lens)
		}
		want := fmt.Sprintf(":8:%d: case c: %s = %d tokens, more than the 4096 positions of qwen3-moe-mini (hint: lower %s)",
			col+len(c.at)+2, lens, c.depth+c.prompt+c.gen, c.lower)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", params, err, want)
		}
	}
}

// A kv_blocks too few for the batch's prompts side by side, each
// prefilled whole as they all arrive at once, is refused: the scheduler
// seats a request only where its prompt fits, so the batch would run a
// part at a time under its label, preempting nothing. Under a prefill
// budget or at a depth the scheduler's own run decides it: a pool that
// never runs as many requests side by side as one of the workload's size
// is refused, naming the least that does, and that one is taken, however
// much it preempts. Staggered arrivals are the run's to seat.
func TestCheckKVBlocksSeatTheBatch(t *testing.T) {
	for _, c := range []struct {
		name, params, want string
	}{
		{"one request's blocks", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 3",
			":7:64: case c: kv_blocks=3 seat 1 of the batch's 4 prompts of 17 tokens (3 blocks of 8 each), so the batch would run a part at a time under its label and nothing is preempted (hint: raise kv_blocks to 12 or more, or lower batch to 1)"},
		{"a block short", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 11",
			"kv_blocks=11 seat 3 of the batch's 4 prompts"},
		// A range's prompts seat as the scheduler seats those the run
		// draws: seed 1's 13, 17 and 14 tokens take 2, 3 and 2 blocks, so
		// 6 never seat the three side by side, though 3 prompts of the
		// range's shortest, 8 tokens, take 3.
		{"the prompts a range draws", "batch: 3, prompt_len: 16, gen_len: 8, range_ratio: 0.5, kv_blocks: 6",
			":7:82: case c: kv_blocks=6 run at most 2 of the batch's 3 requests side by side as their prompts are drawn at range_ratio 0.5, each prefilled whole, where a cache of their size runs 3, so the batch would run a part at a time under its label (hint: raise kv_blocks to 7 or more)"},
		{"the prompts a range draws, the least pool", "batch: 3, prompt_len: 16, gen_len: 8, range_ratio: 0.5, kv_blocks: 7", ""},
		{"the prompts side by side", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 12", ""},
		// 8 tokens a step: the first request holds 3 blocks for its 17
		// before the next can start, and a cache of 12 runs 3 at once, the
		// first finishing before the fourth's prompt starts.
		{"a prefill budget", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 3, prefill_budget: 8",
			":7:64: case c: kv_blocks=3 run at most 1 of the batch's 4 requests side by side as their prompts are prefilled 8 tokens a step, where a cache of their size runs 3, so the batch would run a part at a time under its label (hint: raise kv_blocks to 7 or more)"},
		{"a prefill budget, a block short", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 6, prefill_budget: 8", "kv_blocks=6 run at most 2 of the batch's 4 requests side by side"},
		{"a prefill budget's least pool", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 7, prefill_budget: 8", ""},
		{"a prefill budget's pool past it", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 9, prefill_budget: 8", ""},
		// Each request's context to the depth takes a block, so 3 seat 3
		// of 4; 4 seat them all, and preemption does the rest.
		{"at a depth", "batch: 4, prompt_len: 9, gen_len: 5, depth: 8, kv_blocks: 3",
			"kv_blocks=3 run at most 3 of the batch's 4 requests side by side as their prompts are prefilled 36 tokens a step, where a cache of their size runs 4, so the batch would run a part at a time under its label (hint: raise kv_blocks to 4 or more)"},
		{"at a depth, the least pool", "batch: 4, prompt_len: 9, gen_len: 5, depth: 8, kv_blocks: 4", ""},
		{"staggered", "batch: 4, prompt_len: 17, gen_len: 5, kv_blocks: 3, arrival: 'stagger:2'", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := loadSuite(t, `name: kv
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { block_size: 8 }
cases:
  - name: c
    params: { `+c.params+` }
`)
			err := Check(s, nil)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want it to say %q", err, c.want)
			}
		})
	}
}

// Layers beyond the model are refused at the value that sets them, a
// case's or the model's, by Check and by run alike.
func TestCheckLayers(t *testing.T) {
	for _, tt := range []struct{ model, cases, want string }{
		{"{preset: qwen3-moe-mini}", "  - name: c\n    matrix: { layers: [1, 7] }\n", ":9:27: case c/layers=7: qwen3-moe-mini: layers=7 out of range 1..6"},
		{"{preset: qwen3-moe-mini, layers: 100}", "  - name: c\n", ":2:41: qwen3-moe-mini: layers=100 out of range 1..6"},
		{"{path: ../testdata/hf/llama, layers: 3}", "  - name: c\n", ":2:45: llama: layers=3 out of range 1..2"},
	} {
		s := loadSuite(t, "name: l\nmodel: "+tt.model+"\nbackend: cpu\nrepetitions: 1\nwarmup: 0\nparams: {prompt_len: 4, gen_len: 2}\ncases:\n"+tt.cases)
		if err := Check(s, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check: %v, want %q", err, tt.want)
		}
		if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run: %v, want %q", err, tt.want)
		}
	}
}

// MoE parameters on a model without experts are refused at the value, in
// validate and in run alike (a --set included), once for a value its cases
// share; on a mixture-of-experts model they are taken.
func TestCheckMoEParamsNeedExperts(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		set        map[string]string
		want       []string // nil: accepted
	}{
		{"matrix on a dense preset", `name: d
model: { preset: tinyllama-1.1b }
cases:
  - name: d
    params: { batch: 1, prompt_len: 8, gen_len: 2, moe_strategy: chunked }
    matrix: { moe_chunk: [8, 256] }
`, nil, []string{
			"suite.yaml:5:66: moe_strategy chunked: model tinyllama-1.1b has no experts (only a mixture-of-experts model reads moe_strategy and moe_chunk)",
		}},
		{"dense checkpoint", `name: d
model: { path: %LLAMA% }
cases:
  - name: d
    params: { batch: 1, prompt_len: 8, gen_len: 2 }
    matrix: { moe_chunk: [8, 256] }
`, nil, []string{
			"suite.yaml:6:27: moe_chunk 8: model",
			"suite.yaml:6:30: moe_chunk 256: model",
		}},
		{"--set on a dense model", `name: d
model: { preset: gpt2 }
cases:
  - name: d
    params: { batch: 1, prompt_len: 8, gen_len: 2 }
`, map[string]string{"moe_chunk": "4"}, []string{"--set moe_chunk=4: moe_chunk 4: model gpt2 has no experts"}},
		{"moe model", `name: m
model: { preset: qwen3-moe-mini }
cases:
  - name: d
    params: { batch: 1, prompt_len: 8, gen_len: 2, moe_strategy: chunked }
    matrix: { moe_chunk: [8, 256] }
`, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			llama, _ := filepath.Abs("../testdata/hf/llama")
			s := loadSuite(t, tt.yaml, "%LLAMA%", llama)
			if err := s.Override(tt.set); err != nil {
				t.Fatal(err)
			}
			err := Check(s, nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check: no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("Check: %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Check: %v\nwant %q", err, want)
				}
			}
			db := openDB(t)
			if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1}); err == nil || !strings.Contains(err.Error(), tt.want[0]) {
				t.Errorf("Run: %v, want %q", err, tt.want[0])
			}
		})
	}
}

// A parameter one backend alone reads (threads: the cpu's; witness_gpu:
// metal-emu's) on a suite that names another backend is refused by
// validate as run refuses it, with run's words at the value; auto is left
// to run, which knows what it picks.
func TestCheckOneBackendParams(t *testing.T) {
	const threads = `name: t
model: { preset: qwen3-moe-mini, layers: 1 }
backend: %BACKEND%
cases:
  - name: d
    params: { prompt_len: 4, gen_len: 2, threads: 2 }
  - name: k
    op: rms_norm
    params: { width: 64, threads: 2 }
`
	const witness = `name: t
model: { preset: qwen3-moe-mini, layers: 1 }
backend: %BACKEND%
cases:
  - name: d
    params: { prompt_len: 4, gen_len: 2, witness_gpu: M2 Pro }
  - name: k
    op: rms_norm
    params: { width: 64, witness_gpu: M2 Pro }
`
	for _, tc := range []struct {
		suite, backend string
		want           []string
	}{
		{threads, "cuda", []string{"suite.yaml:6:51: case d: threads=2: the cuda backend runs no CPU goroutines (threads is the cpu backend's)"}},
		{threads, "metal", []string{"suite.yaml:6:51: case d: threads=2: the metal backend runs no CPU goroutines (threads is the cpu backend's)"}},
		{threads, "metal-emu", []string{"suite.yaml:9:35: case k: threads=2: the metal-emu backend runs no CPU goroutines (threads is the cpu backend's)"}},
		{threads, "cpu", nil},
		{threads, "auto", nil},
		{witness, "cpu", []string{
			"suite.yaml:6:55: case d: witness_gpu=M2 Pro: the cpu backend has no cost witness (witness_gpu is the metal-emu backend's)",
			"suite.yaml:9:39: case k: witness_gpu=M2 Pro: the cpu backend has no cost witness (witness_gpu is the metal-emu backend's)"}},
		{witness, "metal", []string{"case d: witness_gpu=M2 Pro: the metal backend has no cost witness"}},
		{witness, "cuda", []string{"case k: witness_gpu=M2 Pro: the cuda backend has no cost witness"}},
		{witness, "metal-emu", nil},
		{witness, "auto", nil},
	} {
		s := loadSuite(t, tc.suite, "%BACKEND%", tc.backend)
		err := Check(s, nil)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("backend %s: %v", tc.backend, err)
		case tc.want != nil && err == nil:
			t.Errorf("backend %s: no error, want %q", tc.backend, tc.want)
		}
		for _, w := range tc.want {
			if err != nil && !strings.Contains(err.Error(), w) {
				t.Errorf("backend %s: %v, want %q", tc.backend, err, w)
			}
		}
	}
}

// suites validate (Check) asks the suite's cpu backend which kv_dtype it
// keeps, as run asks it before any case runs, so the two agree: the cpu
// keeps f32, f16 and bf16 caches, which both take and run records; a
// backend it cannot ask here (auto, or one only its machine opens) is left
// to run.
func TestCheckKVDTypeAsRun(t *testing.T) {
	const suite = `name: t
model: { preset: qwen3-moe-mini, layers: 1 }
backend: %BACKEND%
repetitions: 1
warmup: 0
cases:
  - name: d
    params: { prompt_len: 4, gen_len: 2 }
    matrix: { kv_dtype: [%KV%] }
`
	for _, tc := range []struct {
		backend, kv string
		want        []string // Check's and run's errors; nil: both take it
		checkOnly   bool     // a backend this machine may not open: run is not asked
	}{
		{"cpu", "auto, f32", nil, false},
		{"cpu", "f16", nil, false},
		{"cpu", "auto, bf16, f16", nil, false},
		{"auto", "f16", nil, true},
		{"metal", "bf16", nil, true},
	} {
		s := loadSuite(t, suite, "%BACKEND%", tc.backend, "%KV%", tc.kv)
		errs := []error{Check(s, nil)}
		if !tc.checkOnly {
			db := openDB(t)
			_, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
			errs = append(errs, err)
			runs, _ := db.Runs(results.RunFilter{})
			if tc.want != nil && len(runs) != 0 {
				t.Errorf("backend %s, kv_dtype [%s]: a refused run recorded %d runs", tc.backend, tc.kv, len(runs))
			}
			if tc.want == nil && err == nil {
				// Every kv_dtype taken ran: a case done for each.
				var done int
				for _, r := range runs {
					cs, _ := db.Cases(r.ID)
					for _, c := range cs {
						if c.Status == results.CaseDone {
							done++
						}
					}
				}
				if n := len(strings.Split(tc.kv, ",")); done != n {
					t.Errorf("backend %s, kv_dtype [%s]: %d cases done, want %d", tc.backend, tc.kv, done, n)
				}
			}
		}
		for i, err := range errs {
			who := []string{"Check", "Run"}[i]
			if tc.want == nil {
				if err != nil {
					t.Errorf("%s: backend %s, kv_dtype [%s]: %v", who, tc.backend, tc.kv, err)
				}
				continue
			}
			if err == nil {
				t.Errorf("%s: backend %s, kv_dtype [%s]: no error, want %q", who, tc.backend, tc.kv, tc.want)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: backend %s, kv_dtype [%s]: %v, want %q", who, tc.backend, tc.kv, err, w)
				}
			}
		}
	}
}

// run refuses witness_gpu on a backend without the cost witness as it
// refuses threads on one without goroutines, before any case runs.
func TestRunRefusesWitnessGPUElsewhere(t *testing.T) {
	s := loadSuite(t, "name: w\nbackend: cpu\ncases:\n  - name: mm\n    op: matmul\n    params: { m: 1, n: 64, k: 64, witness_gpu: M2 Pro }\n")
	db := openDB(t)
	_, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
	want := "suite.yaml:6:48: case mm: witness_gpu=M2 Pro: the cpu backend has no cost witness (witness_gpu is the metal-emu backend's)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: %v, want %q", err, want)
	}
	if runs, _ := db.Runs(results.RunFilter{}); len(runs) != 0 {
		t.Errorf("a refused run recorded %d runs", len(runs))
	}
}

// run's --threads on a backend other than the cpu's is refused in the
// words of a case's threads, naming the flag, before any case runs: it
// would change nothing, yet be recorded as the run's threads.
func TestRunRefusesThreadsFlagElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		{"cuda", 2, "--threads: threads=2: the cuda backend runs no CPU goroutines (threads is the cpu backend's)"},
		{"metal", 4, "--threads: threads=4: the metal backend runs no CPU goroutines (threads is the cpu backend's)"},
		{"metal-emu", 2, "--threads: threads=2: the metal-emu backend runs no CPU goroutines (threads is the cpu backend's)"},
		{"cpu", 2, ""},
		{"auto", 2, ""}, // the command that opens it decides
		{"cuda", 0, ""},
	} {
		err := ThreadsFlag(tc.n, tc.name, nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want) {
			t.Errorf("ThreadsFlag(%d, %s): %v, want %q", tc.n, tc.name, err, tc.want)
		}
	}
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip("no metal-emu backend to run on:", err)
	}
	s := loadSuite(t, "name: w\nbackend: metal-emu\ncases:\n  - name: mm\n    op: matmul\n    params: { m: 1, n: 64, k: 64 }\n")
	db := openDB(t)
	_, err := Run(context.Background(), s, Options{DB: db, Threads: 2, BandwidthBuffer: -1})
	want := "--threads: threads=2: the metal-emu backend runs no CPU goroutines (threads is the cpu backend's)"
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v, want %q", err, want)
	}
	if runs, _ := db.Runs(results.RunFilter{}); len(runs) != 0 {
		t.Errorf("a refused run recorded %d runs", len(runs))
	}
}

// A kernel case with several parameters out of range gets an error for
// each, at that parameter's position and naming the case, in Check and in
// run alike; joined as one, the second stood on a line of its own that
// said neither where nor which case.
func TestKernelCaseErrorsEachAtTheirParameter(t *testing.T) {
	for _, tc := range []struct {
		name, params string
		want         []string
	}{
		{"embedding", "{ n: 2147483648, width: 2147483648 }", []string{
			":7:37: case c: width=2147483648: must be at most",
			":7:18: case c: n=2147483648: must be at most",
		}},
		{"rope", "{ num_heads: 2147483648, tokens: 2147483648 }", []string{
			":7:46: case c: tokens=2147483648: must be at most",
			":7:26: case c: num_heads=2147483648: must be at most",
		}},
		// Written under its alias (hidden for width), it is named so.
		{"rms_norm", "{ tokens: 1, hidden: 2147483648 }", []string{
			":7:34: case c: hidden=2147483648: must be at most",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, "name: k\nbackend: cpu\ncases:\n  - name: c\n    kind: kernel\n    op: "+tc.name+"\n    params: "+tc.params+"\n")
			check := Check(s, nil)
			_, run := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1})
			for what, err := range map[string]error{"Check": check, "Run": run} {
				if err == nil {
					t.Fatalf("%s: no error", what)
				}
				lines := strings.Split(err.Error(), "\n")
				for _, want := range tc.want {
					if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
						t.Errorf("%s: %q does not say %q", what, err, want)
					}
				}
				for _, l := range lines {
					if !strings.Contains(l, "suite.yaml:") || !strings.Contains(l, "case c: ") {
						t.Errorf("%s: line %q says neither where nor which case", what, l)
					}
				}
			}
		})
	}
}

// checkThenRun checks s: where want is set, Check must refuse it saying
// want; else it must pass, and the suite runs, its first case's metrics
// returned (ran true).
func checkThenRun(t *testing.T, s *suites.Suite, want string) (map[string]float64, bool) {
	t.Helper()
	err := Check(s, nil)
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want it to say %q", err, want)
		}
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return runFirstCase(t, s), true
}

// runFirstCase runs s into a new store and returns its first case's
// metrics.
func runFirstCase(t *testing.T, s *suites.Suite) map[string]float64 {
	t.Helper()
	db := openDB(t)
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	return caseMetrics(t, db, sum.Cases[0].ID)
}

// The longest request a case draws is the one a scan of every request
// finds, the first of that length, though the draws stop at the first as
// long as the range allows.
func TestLongestIsTheScan(t *testing.T) {
	for _, w := range []Workload{
		{Requests: 3, PromptLen: 8, GenLen: 4},
		{Requests: 1000, PromptLen: 100, GenLen: 2, RangeRatio: 0.9, Seed: 1},
		{Requests: 1000, PromptLen: 2000, GenLen: 2000, RangeRatio: 0.5, Seed: 3},
		{Requests: 50, PromptLen: 1, GenLen: 1, RangeRatio: 0.5, Seed: 2},
	} {
		var i, prompt, gen int
		if w.RangeRatio <= 0 {
			prompt, gen = w.PromptLen, w.GenLen
		} else {
			prompts, gens := w.Lengths()
			for j := range prompts {
				if prompts[j]+gens[j] > prompt+gen {
					i, prompt, gen = j, prompts[j], gens[j]
				}
			}
		}
		if gi, gp, gg := w.longest(); gi != i || gp != prompt || gg != gen {
			t.Errorf("%+v: longest request %d of %d+%d, the scan's %d of %d+%d", w, gi, gp, gg, i, prompt, gen)
		}
	}
}

// checkWithin checks s and fails the test if Check errs or has not
// returned within d: the guard of the suites that once held it for minutes.
func checkWithin(t *testing.T, s *suites.Suite, d time.Duration, what string) {
	t.Helper()
	if _, err := checkWarnsWithin(t, s, d, what); err != nil {
		t.Fatal(err)
	}
}

// checkWarnsWithin is checkWithin returning what Check warned of and its
// error.
func checkWarnsWithin(t *testing.T, s *suites.Suite, d time.Duration, what string) ([]string, error) {
	t.Helper()
	type result struct {
		warned []string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = Check(s, func(line string) { r.warned = append(r.warned, line) })
		done <- r
	}()
	select {
	case r := <-done:
		return r.warned, r.err
	case <-time.After(d):
		t.Fatalf("Check of %s did not return in %v", what, d)
		return nil, nil
	}
}

// A suite of many cases of a million requests at a range_ratio is checked
// without drawing them where the longest the range allows fits the model's
// positions: it drew every request of every case, 1000 cases for tens of
// seconds before suites validate or run said a word.
func TestCheckDrawsFew(t *testing.T) {
	s := loadSuite(t, `name: draws
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
cases:
  - name: c
    params: { gen_len: 4, range_ratio: 0.9, requests: 1048576 }
    matrix: { prompt_len: 1-100, batch: 1-10 }
`)
	checkWithin(t, s, 5*time.Second, "1000 cases of a million requests")
}

// A kv_blocks the scheduler's own run decides (with a range_ratio) draws
// the requests as it seats them: every request of a million was drawn for
// each of the two runs a case makes, 1000 cases for 40 seconds.
func TestCheckSeatsDrawFew(t *testing.T) {
	s := loadSuite(t, `name: seats
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { gen_len: 64, range_ratio: 0.5, requests: 1048576, kv_blocks: 900, batch: 64 }
cases:
  - name: c
    matrix: { prompt_len: 100-199, max_seqs: 64-73 }
`)
	checkWithin(t, s, 15*time.Second, "1000 cases of a million requests seated by kv_blocks")
}

// A kv_blocks that holds the longest request the range allows is taken
// without drawing the requests, as the model's positions are: every case
// drew a million requests looking for its longest, 1000 cases for half a
// minute.
func TestCheckKVBlocksDrawFew(t *testing.T) {
	s := loadSuite(t, `name: draws
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { gen_len: 1000, range_ratio: 0.9, requests: 1048576, kv_blocks: 100000 }
cases:
  - name: c
    matrix: { prompt_len: 1000-1099, batch: 1-10 }
`)
	checkWithin(t, s, 5*time.Second, "1000 cases of a million requests under a kv_blocks")
}

// The scheduler runs that decide the kv_blocks of a suite's cases are
// bounded together, not one case at a time, and a run that is the same
// for many cases (the pool of the workload's size, in a sweep of
// kv_blocks) is run once: a sweep of 1000 kv_blocks values over a million
// requests held validate and run for minutes. A case whose runs were
// given up is said, named with why, not passed without a word.
func TestCheckSeatsSuiteBound(t *testing.T) {
	for _, tc := range []struct {
		name, params, matrix string
		want                 []string // the warnings, in order
	}{
		{"the workload's pool undecided, run once", "batch: 64, prefill_budget: 128, requests: 1000000", "kv_blocks: 80-1079",
			[]string{"kv_blocks of cases c/kv_blocks=80, c/kv_blocks=81, c/kv_blocks=82 and 997 more not checked against what seats the batch: the scheduler's run over the case's requests passed 4194304 tokens undecided; the run records their preemptions"}},
		{"each kv_blocks undecided", "batch: 64, prefill_budget: 65536, requests: 1000000", "kv_blocks: 4000-4999",
			[]string{"kv_blocks of cases c/kv_blocks=4000, c/kv_blocks=4001, c/kv_blocks=4002 and ",
				"more not checked against what seats the batch: " + gaveUpSuite + "; the run records their preemptions"}},
		{"a pool past what a run holds", "batch: 65536, prefill_budget: 65536, requests: 1000000", "kv_blocks: 4000-4001",
			[]string{"kv_blocks of cases c/kv_blocks=4000, c/kv_blocks=4001 not checked against what seats the batch: the scheduler's run would hold more than 67108864 blocks and tokens; the run records their preemptions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, `name: sweep
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { prompt_len: 1024, gen_len: 256, `+tc.params+` }
cases:
  - name: c
    matrix: { `+tc.matrix+` }
`)
			warned, err := checkWarnsWithin(t, s, 15*time.Second, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range warned {
				if strings.HasPrefix(w, "kv_blocks of") {
					got = append(got, w)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("warned %q, want %d lines like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// The requests a suite's checks draw are drawn once for the cases that
// draw the same, and bounded with its scheduler runs: each case whose
// range allows prompts past the model's positions drew its million
// requests, 3 seconds for these 1000 cases and ten times that for the
// 10000 a suite may hold. The cases past the bound are said, not passed.
func TestCheckDrawsSuiteBound(t *testing.T) {
	for _, tc := range []struct{ name, matrix, want string }{
		{"one draw for many cases", "{ batch: 1-1000 }", ""},
		{"a draw for each case", "{ prompt_len: 2000-2999 }",
			"the requests of cases c/prompt_len="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, `name: pos
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { prompt_len: 2900, gen_len: 500, range_ratio: 0.5, requests: 1048576 }
cases:
  - name: c
    matrix: `+tc.matrix+`
`)
			warned, err := checkWarnsWithin(t, s, 15*time.Second, tc.name)
			// Refused for the positions of the requests they draw.
			if err == nil || !strings.Contains(err.Error(), "more than the 4096 positions of qwen3-moe-mini") {
				t.Errorf("Check: %v, want cases refused past the positions", err)
			}
			if tc.want == "" {
				if len(warned) > 0 {
					t.Errorf("warned %q", warned)
				}
				return
			}
			suffix := "not checked against the model's positions: " + gaveUpSuite + "; the run refuses a request past them when it comes"
			if len(warned) != 1 || !strings.HasPrefix(warned[0], tc.want) || !strings.HasSuffix(warned[0], suffix) {
				t.Errorf("warned %q, want a line %q ... %q", warned, tc.want, suffix)
			}
		})
	}
}

// run checks the cases' kv_blocks as Check does, their scheduler runs
// shared and bounded over the suite before any work, and says the cases it
// gave up on through Options.Warn.
func TestPrepareSeatsSuiteBound(t *testing.T) {
	s := loadSuite(t, `name: sweep
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { batch: 64, prompt_len: 1024, gen_len: 256, prefill_budget: 128, requests: 1000000 }
cases:
  - name: c
    matrix: { kv_blocks: 80-1079 }
`)
	type result struct {
		warned []string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		ps, closeAll, err := prepare(context.Background(), s, cpu.New(cpu.Options{Threads: 1}), 0, 0, func(line string) { r.warned = append(r.warned, line) })
		if err == nil {
			closeAll()
			if len(ps) != 1000 {
				err = fmt.Errorf("%d cases prepared, want 1000", len(ps))
			}
		}
		r.err = err
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		want := "kv_blocks of cases c/kv_blocks=80, c/kv_blocks=81, c/kv_blocks=82 and 997 more not checked against what seats the batch: the scheduler's run over the case's requests passed 4194304 tokens undecided; the run records their preemptions"
		if len(r.warned) != 1 || r.warned[0] != want {
			t.Errorf("warned %q, want %q", r.warned, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("prepare of 1000 cases of a million requests did not return in 30s")
	}
}

// A sweep of kv_blocks shares its scheduler runs (and what the hint's
// search found) between its cases, and each case is judged as it is alone,
// in words, whichever order the sweep lists its values in.
func TestCheckKVBlocksSweepAsAlone(t *testing.T) {
	for _, tc := range []struct{ params, values string }{
		{"batch: 4, prompt_len: 17, gen_len: 5, prefill_budget: 8", "[9, 7, 6, 3, 4]"},
		{"batch: 4, prompt_len: 17, gen_len: 5, prefill_budget: 8", "[3, 4, 6, 7, 9]"},
		{"batch: 3, prompt_len: 16, gen_len: 8, range_ratio: 0.5", "[7, 6, 5, 3]"},
		{"batch: 4, prompt_len: 9, gen_len: 5, depth: 8", "[2, 3, 4]"},
		{"batch: 8, prompt_len: 40, gen_len: 30, prefill_budget: 16, requests: 20", "30-60"},
	} {
		t.Run(tc.params+" "+tc.values, func(t *testing.T) {
			const suite = "name: kv\nmodel: { preset: qwen3-moe-mini, layers: 1 }\nbackend: cpu\nparams: { block_size: 8 }\ncases:\n  - name: c\n    params: { %s }\n    matrix: { kv_blocks: %s }\n"
			sweep := map[string]string{} // case -> its error, "" where none
			s := loadSuite(t, fmt.Sprintf(suite, tc.params, tc.values))
			for _, c := range s.Cases {
				sweep[c.Name] = ""
			}
			if err := Check(s, nil); err != nil {
				for _, e := range err.(suites.ErrorList) {
					name, _, _ := strings.Cut(strings.TrimPrefix(e.Msg, "case "), ":")
					sweep[name] = strings.Replace(e.Msg, "case "+name+":", "case c:", 1)
				}
			}
			refused := 0
			for name, got := range sweep {
				_, kb, _ := strings.Cut(name, "=")
				alone := loadSuite(t, fmt.Sprintf(suite, tc.params, "["+kb+"]"))
				want := ""
				if err := Check(alone, nil); err != nil {
					want = strings.Replace(err.(suites.ErrorList)[0].Msg, "case "+name+":", "case c:", 1)
					refused++
				}
				if got != want {
					t.Errorf("%s in the sweep: %q, alone: %q", name, got, want)
				}
			}
			if refused == 0 || refused == len(sweep) {
				t.Errorf("%d of the sweep's %d cases refused: the sweep tells nothing apart", refused, len(sweep))
			}
		})
	}
}

// A model whose name is not one line of text (a checkpoint folder named
// with a line break) is refused where the suite names it, before a run
// stores it as every case's model parameter, which import would refuse.
func TestModelNameOfOneLine(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"a\nb", `model name "a\nb" holds the control character U+000A at byte 1`},
		{"tab\there", `model name "tab\there" holds the control character U+0009 at byte 3`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.name)
			if err := os.CopyFS(dir, os.DirFS("../testdata/hf/llama")); err != nil {
				t.Fatal(err)
			}
			s := loadSuite(t, "name: l\nmodel: {path: "+strconv.Quote(dir)+"}\nbackend: cpu\nrepetitions: 1\nwarmup: 0\nparams: {prompt_len: 4, gen_len: 2}\ncases:\n  - name: c\n")
			want := ":2:15: " + tc.want
			if err := Check(s, nil); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Check: %v, want %q", err, want)
			}
			if err := CheckModel(s); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("CheckModel: %v, want %q", err, want)
			}
		})
	}
}
