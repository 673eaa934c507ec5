package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// cancelOnWrite cancels a run as its step log is written: the steps after
// it are queued or running on the emulator when the context ends.
type cancelOnWrite struct {
	cancel context.CancelFunc
	after  int
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if c.after--; c.after < 0 {
		c.cancel()
	}
	return len(p), nil
}

// On metal-emu an interrupt ends the dispatches in flight (an emulated
// step can take minutes), and what they return is an interrupted run,
// not a failed case or a model that would not load: before the run's
// cases are prepared, or with a decode step on its way.
func TestInterruptOnTheEmulator(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	suite := `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: metal-emu
repetitions: 2
warmup: 0
cases:
  - name: c
    params: { batch: 1, prompt_len: 8, gen_len: 64, steps: overlapped }
`
	for _, after := range []int{-1, 3} {
		ctx, cancel := context.WithCancel(context.Background())
		if after < 0 {
			cancel()
		}
		db := openDB(t)
		sum, err := Run(ctx, loadSuite(t, suite, "", ""), Options{DB: db, BandwidthBuffer: -1, Steps: &cancelOnWrite{cancel: cancel, after: after}})
		cancel()
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("interrupted after %d steps: %v, want ErrInterrupted", after, err)
		}
		if sum == nil {
			continue
		}
		for _, c := range sum.Cases {
			if c.Status == results.CaseFailed || strings.Contains(c.Error, "stopped") {
				t.Errorf("interrupted after %d steps: case %s %s (%s), want it left to resume", after, c.Name, c.Status, c.Error)
			}
		}
	}
}

// A profiled case interrupted once its repetitions are stored, as its
// profile's cost is timed, is left to the resume, which times that cost
// against the stored repetitions: not finished without it, the interrupt
// dropped.
func TestInterruptBeforeTheProfileCost(t *testing.T) {
	for _, interleave := range []string{"true", "false"} {
		t.Run("interleave="+interleave, func(t *testing.T) {
			suite := `name: p
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
timing: profile
repetitions: 2
warmup: 0
interleave: ` + interleave + `
cases:
  - name: c
    params: { batch: 1, prompt_len: 8, gen_len: 4 }
`
			db := openDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			progress := func(e Event) {
				if e.Rep == 1 {
					cancel() // the last repetition is stored
				}
			}
			sum, err := Run(ctx, loadSuite(t, suite), Options{DB: db, BandwidthBuffer: -1, Progress: progress})
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("interrupted as the profile's cost was timed: %v, want ErrInterrupted", err)
			}
			for _, c := range sum.Cases {
				if c.Status == results.CaseDone || c.RepsDone != 2 {
					t.Fatalf("case %s: %s with %d repetitions, want both stored and the case left to resume", c.Name, c.Status, c.RepsDone)
				}
			}
			sum, err = Run(context.Background(), loadSuite(t, suite), Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range sum.Cases {
				samples, _ := db.Samples(c.ID)
				if c.Status != results.CaseDone || !hasMetric(samples, "profile_overhead_pct") {
					t.Errorf("resumed case %s: %s, profile_overhead_pct recorded: %v; want done with it", c.Name, c.Status, hasMetric(samples, "profile_overhead_pct"))
				}
			}
		})
	}
}

// A run interrupted while its cases are prepared (a model's weights made,
// its kernel cases planned) stops before it is recorded: no run of pending
// cases is stored for a signal that came before any case began.
func TestInterruptWhilePreparedRecordsNothing(t *testing.T) {
	for _, tc := range []struct{ name, cases string }{
		{"a model case", "model: { preset: qwen3-moe-mini, layers: 1 }\nparams: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: d\n"},
		{"a kernel case planned as it runs", "interleave: false\ncases:\n  - { name: mm, op: matmul, params: { n: 16, k: 16 } }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := loadSuite(t, "name: x\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n"+tc.cases)
			// The signal comes as the run starts, before its cases are made.
			sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1, Start: func(*suites.Suite) { cancel() }})
			if !errors.Is(err, ErrInterrupted) || sum != nil {
				t.Fatalf("Run: %v, summary %v; want ErrInterrupted and none", err, sum)
			}
			if runs, err := db.Runs(results.RunFilter{}); err != nil || len(runs) != 0 {
				t.Errorf("%d runs recorded (%v), want none", len(runs), err)
			}
		})
	}
}

// A signal while the cases' tuned configs are looked up, the last work
// before the run is recorded (a model's tensors listed for each case:
// minutes for a sweep of thousands on a large model), stops the run at the
// case in hand and records nothing, as one while the cases were made does;
// it went on to the last case and stored a run of pending cases.
func TestInterruptWhileTunedLookedUpRecordsNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel int // the lookup that the signal comes during
	}{
		{"during the first case", 1},
		{"during the second case", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			defer func(f func(map[string]string, *prepared)) { lookUpTuned = f }(lookUpTuned)
			lookUpTuned = func(params map[string]string, p *prepared) {
				calls++
				if calls == tc.cancel {
					cancel()
				}
				tunedParams(params, p)
			}
			s := loadSuite(t, "name: x\nbackend: cpu\nrepetitions: 1\nwarmup: 0\nmodel: { preset: qwen3-moe-mini, layers: 1 }\n"+
				"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: d\n    matrix: { batch: [1, 2, 3, 4] }\n")
			sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: -1})
			if !errors.Is(err, ErrInterrupted) || sum != nil {
				t.Fatalf("Run: %v, summary %v; want ErrInterrupted and none", err, sum)
			}
			if calls != tc.cancel {
				t.Errorf("tuned configs looked up for %d cases, want %d: the lookups went on past the signal", calls, tc.cancel)
			}
			if runs, err := db.Runs(results.RunFilter{}); err != nil || len(runs) != 0 {
				t.Errorf("%d runs recorded (%v), want none", len(runs), err)
			}
		})
	}
}
