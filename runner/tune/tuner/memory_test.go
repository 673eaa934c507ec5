package tuner

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// limited is a CPU backend that says it has avail bytes and counts the
// tensors it is handed (a small memory limit injected: nothing large is
// allocated); cancel, when set, runs at the first one.
type limited struct {
	*cpu.Backend
	avail  int64
	handed int
	cancel func()
}

func newLimited(avail int64) *limited {
	return &limited{Backend: cpu.New(cpu.Options{Threads: 2}), avail: avail}
}

func (l *limited) Info() bridge.DeviceInfo {
	i := l.Backend.Info()
	i.AvailableBytes = l.avail
	return i
}

func (l *limited) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	l.handed++
	if l.cancel != nil {
		l.cancel()
	}
	return l.Backend.Weight(dt, shape, data)
}

// A bucket that cannot fit fails the run before anything is allocated or
// recorded, naming where it came from (a suite's case, the --shape), its
// kernel and shape, what it needs and what there is.
func TestTuneChecksMemoryFirst(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		kernel string
		shape  tune.Shape
		avail  int64
		label  string
		desc   string
	}{
		{"matmul", tune.Shape{"m": 1, "n": 4096, "k": 4096}, 16 * MiB, "mm", "matmul m=1 n=4096 k=4096 dtype=bf16"},
		{"matmul", tune.Shape{"m": 2048, "n": 1024, "k": 4096}, 40 * MiB, "--shape m=2048,n=1024,k=4096", "matmul m=2048 n=1024 k=4096 dtype=bf16"},
		{"moe", tune.Shape{"tokens": 4, "experts": 64, "top_k": 2, "hidden": 512, "intermediate": 512}, 24 * MiB,
			"experts; experts-2", "moe tokens=4 experts=64 top_k=2 hidden=512 intermediate=512 dtype=bf16"},
		{"matmul", tune.Shape{"m": 1 << 31, "n": 16, "k": 16}, 40 * MiB, "huge", "m=2147483648: must be at most"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			be := newLimited(tc.avail)
			b, err := ShapeBucket(be, tc.kernel, "bf16", tc.shape, tc.label)
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t)
			_, err = Run(context.Background(), []Bucket{b}, quick(be, db))
			if err == nil {
				t.Fatal("tuned a bucket that does not fit")
			}
			if !strings.HasPrefix(err.Error(), tc.label+": ") {
				t.Errorf("error %q does not name where the bucket came from, %s", err, tc.label)
			}
			if !strings.Contains(err.Error(), tc.desc) {
				t.Errorf("error %q does not say %q", err, tc.desc)
			}
			if be.handed != 0 {
				t.Errorf("%d tensors handed to the backend first", be.handed)
			}
			if runs, _ := db.Runs(results.RunFilter{Kind: results.KindTune}); len(runs) != 0 {
				t.Errorf("%d runs recorded for a bucket that cannot fit", len(runs))
			}
		})
	}
}

// Tuning allocates little beyond the case's tensors: no candidate's check
// copies the weights to f32 (that, 13 times over, grew a 512 MiB bf16
// weight's tune to 2.6 GB).
func TestTuneAllocatesLittle(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	b, err := ShapeBucket(be, "matmul", "bf16", tune.Shape{"m": 1, "n": 1024, "k": 4096}, "test")
	if err != nil {
		t.Fatal(err)
	}
	const weight = 1024 * 4096 * 2
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := Run(context.Background(), []Bucket{b}, quick(be, nil))
	runtime.ReadMemStats(&after)
	if err != nil || rep.Results[0].Err != nil {
		t.Fatal(err, rep.Results[0].Err)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("tuning %d candidates allocated %d KiB for a %d KiB weight", len(rep.Results[0].Candidates), got>>10, weight>>10)
	if got > 2*weight {
		t.Errorf("tuning %d candidates allocated %d MiB for a %d MiB weight", len(rep.Results[0].Candidates), got>>20, weight>>20)
	}
}

// An interrupt while a case fills its tensors stops the filling: the
// weight after the first tensor is never handed to the backend.
func TestTuneInterruptedWhileFilling(t *testing.T) {
	be := newLimited(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	be.cancel = cancel
	b, err := ShapeBucket(be, "matmul", "bf16", tune.Shape{"m": 1, "n": 4096, "k": 4096}, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(ctx, []Bucket{b}, quick(be, nil))
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("got %v, want %v", err, ErrInterrupted)
	}
	if be.handed != 1 {
		t.Errorf("%d tensors handed to the backend after the interrupt at the first", be.handed)
	}
}

// A budget holds whatever counts the flags give: --rounds 1e11 overflowed
// the plan's durations and ran every round past a 5 s budget, and 2^31
// rounds were cut one at a time (seconds; 1e11, minutes). The plans are
// made with the whole budget left, as planIn takes it: the clock between
// the bucket's start and plan on a loaded machine took a round off.
func TestPlanHugeCounts(t *testing.T) {
	for _, tc := range []struct {
		rounds, confirm int
		cands, want     int
	}{
		{100_000_000_000, 20, 14, 9}, // 14 x (9 x 20 ms + 60 ms) fit in 5 s less 1.6 s of confirming
		{1 << 31, 20, 14, 9},
		{math.MaxInt, 20, 14, 9},
		{10, math.MaxInt / 2, 2, 5}, // the confirming alone is past the budget
	} {
		o := &Options{Rounds: tc.rounds, Confirm: tc.confirm, Top: 3, SampleTime: 20 * time.Millisecond}
		r := &bucketRun{o: o, budget: 5 * time.Second}
		start := time.Now()
		cands, rounds := r.planIn(14, r.budget)
		if cands != tc.cands || rounds != tc.want {
			t.Errorf("--rounds %d --confirm %d: %d candidates in %d rounds, want %d in %d", tc.rounds, tc.confirm, cands, rounds, tc.cands, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("--rounds %d: planned in %v", tc.rounds, d)
		}
	}
}

// The budget's plan leaves each candidate the time its setup took (the
// default's check and calibration), not only its timed rounds: a large
// shape's reference check made a 5 s budget take 20 s.
func TestPlanCountsSetup(t *testing.T) {
	o := &Options{Rounds: 10, Confirm: 6, Top: 2, SampleTime: time.Millisecond}
	for _, tc := range []struct {
		setup         time.Duration
		cands, rounds int
	}{
		{0, 14, 10},                    // 14 x 13 ms fit in 982 ms
		{100 * time.Millisecond, 9, 5}, // 982 ms / 105 ms
		{500 * time.Millisecond, 2, 5}, // the default and one more, at least
		{2 * time.Millisecond, 14, 10}, // cheaper than the 3 samples assumed
	} {
		r := &bucketRun{o: o, budget: time.Second, setup: tc.setup}
		if cands, rounds := r.planIn(14, r.budget); cands != tc.cands || rounds != tc.rounds {
			t.Errorf("setup %v: %d candidates in %d rounds, want %d in %d", tc.setup, cands, rounds, tc.cands, tc.rounds)
		}
	}
}

// A bucket of a suite's case that cannot fit is named by the case's place
// in the file as well as its name, as run names the case, so the error says
// which line of which suite to change.
func TestTuneSuiteBucketTooLargeNamesTheLine(t *testing.T) {
	for _, tc := range []struct{ name, suite, want string }{
		{"one case", "name: one\nbackend: cpu\ncases:\n  - name: mm\n    op: matmul\n    params: {m: 1, n: 4096, k: 4096}\n",
			"s.yaml:4:5: mm: matmul m=1 n=4096 k=4096 dtype=bf16 needs"},
		{"the second of two", "name: two\nbackend: cpu\ncases:\n  - {name: small, op: matmul, params: {m: 1, n: 16, k: 16}}\n  - {name: big, op: matmul, params: {m: 1, n: 4096, k: 4096}}\n",
			"s.yaml:5:5: big: matmul m=1 n=4096 k=4096 dtype=bf16 needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newLimited(16 << 20)
			s := loadSuite(t, tc.suite)
			bs, err := SuiteBuckets(s, be, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Run(context.Background(), bs, quick(be, openDB(t)))
			if err == nil || !strings.Contains(err.Error(), string(filepath.Separator)+tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
