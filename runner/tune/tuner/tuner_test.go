package tuner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/suites"
)

// brokenMoE is the test hook that breaks one strategy: its output is
// doubled, a wrong answer however fast it is.
type brokenMoE struct {
	bridge.Backend
	bad bridge.MoEStrategy
}

// KernelSourceHash passes the CPU's through: the wrapper runs its kernels.
func (b *brokenMoE) KernelSourceHash(k string) string { return tune.SourceHash(b.Backend, k) }

func (b *brokenMoE) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	b.Backend.MoE(out, x, w, p)
	if p.Strategy == b.bad {
		b.Backend.Add(out, out, out)
	}
}

// quick keeps a tuning run short: the statistics are not the point here.
func quick(be bridge.Backend, db *results.DB) Options {
	return Options{Backend: be, DB: db, Rounds: 3, Confirm: 6, Top: 2, SampleTime: time.Millisecond, Seed: 1, ToolVersion: "test"}
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

var smallMoE = tune.Shape{"tokens": 4, "experts": 8, "top_k": 2, "hidden": 64, "intermediate": 32}

func TestWrongCandidateIsDisqualified(t *testing.T) {
	be := &brokenMoE{Backend: cpu.New(cpu.Options{Threads: 2}), bad: bridge.MoEChunked}
	b, err := ShapeBucket(be, "moe", "f32", smallMoE, "test")
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t)
	rep, err := Run(context.Background(), []Bucket{b}, quick(be, db))
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	status := map[string]string{}
	for _, c := range r.Candidates {
		if c.Status != StatusPruned {
			status[b.Kernel.String(c.Config)] = c.Status
		}
		if c.Status == StatusDisqualified && !strings.Contains(c.Reason, "wrong answer") {
			t.Errorf("%v disqualified for %q, not a wrong answer", c.Config, c.Reason)
		}
	}
	// 8 pairs: grouped, loop, chunked/2, chunked/4.
	want := map[string]string{"grouped": StatusTimed, "loop": StatusTimed, "chunked/2": StatusDisqualified, "chunked/4": StatusDisqualified}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("%s: %s, want %s (all: %v)", k, status[k], v, status)
		}
	}
	if r.Winner["strategy"] == "chunked" {
		t.Errorf("a wrong candidate won: %v", r.Winner)
	}

	// The run holds one case per candidate: samples for the timed, the
	// error for the disqualified, the reason for the pruned.
	runs, err := db.Runs(results.RunFilter{Kind: results.KindTune})
	if err != nil || len(runs) != 1 || runs[0].Status != results.RunComplete {
		t.Fatalf("tune runs %+v %v", runs, err)
	}
	// The backend's notes are the run's own (a machine row keeps its first
	// run's fields).
	if want := be.Info().Notes; want == "" || runs[0].BackendNotes != want {
		t.Errorf("tune run's backend notes %q, want %q", runs[0].BackendNotes, want)
	}
	cases, _ := db.Cases(runs[0].ID)
	if len(cases) != len(r.Candidates) {
		t.Fatalf("%d cases for %d candidates", len(cases), len(r.Candidates))
	}
	byStatus := map[string]int{}
	for _, c := range cases {
		byStatus[c.Status]++
		switch c.Status {
		case results.CaseFailed:
			if !strings.Contains(c.Error, "wrong answer") || c.Params["tune.strategy"] != "chunked" {
				t.Errorf("failed case %s: %q", c.Name, c.Error)
			}
		case results.CaseDone:
			ss, _ := db.Samples(c.ID)
			n := map[string]int{}
			for _, s := range ss {
				n[s.Metric]++
			}
			if n["us_per_call"] != 3 {
				t.Errorf("%s: %d first-round samples, want 3", c.Name, n["us_per_call"])
			}
			if c.Params["config"] == "grouped" && n["confirm_us_per_call"] != 6 {
				t.Errorf("the default has %d confirmation samples, want 6", n["confirm_us_per_call"])
			}
		case results.CaseSkipped:
			if !strings.Contains(c.Error, "duplicate") {
				t.Errorf("skipped case %s: %q", c.Name, c.Error)
			}
		}
	}
	if byStatus[results.CaseFailed] != 2 || byStatus[results.CaseDone] != 2 {
		t.Errorf("case statuses %v", byStatus)
	}
	e := r.Entry
	if e == nil || e.SourceHash != cpu.KernelSourceHash("moe") || e.Device != be.Info().Name || e.RunID != runs[0].ID || e.Shape["threads"] != 2 {
		t.Errorf("entry %+v", e)
	}
}

func TestDefaultBrokenFailsBucket(t *testing.T) {
	be := &brokenMoE{Backend: cpu.New(cpu.Options{Threads: 2}), bad: bridge.MoEGrouped}
	b, _ := ShapeBucket(be, "moe", "f32", smallMoE, "test")
	rep, err := Run(context.Background(), []Bucket{b}, quick(be, nil))
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Err == nil || r.Entry != nil || !strings.Contains(r.Err.Error(), "default grouped failed") {
		t.Errorf("broken default: err %v entry %v", r.Err, r.Entry)
	}
}

func TestKeepsDefaultWithoutEnoughGain(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	b, _ := ShapeBucket(be, "moe", "f32", smallMoE, "test")
	o := quick(be, nil)
	o.MinGain = 100 // nothing is 101x faster
	rep, err := Run(context.Background(), []Bucket{b}, o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if !r.Winner.Equal(r.Default) || r.Speedup != 1 || !strings.Contains(r.Verdict, "default grouped kept") {
		t.Errorf("winner %v speedup %v verdict %q", r.Winner, r.Speedup, r.Verdict)
	}
	if r.Entry == nil || !r.Entry.Config.Equal(r.Entry.Default) {
		t.Errorf("entry %+v", r.Entry)
	}
}

// Each bucket's result reaches OnResult as the bucket ends, before the
// next begins: what a tune measured is kept however it ends later.
func TestResultsAsBucketsEnd(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	var buckets []Bucket
	for _, tokens := range []int{1, 2} {
		shape := smallMoE.Clone()
		shape["tokens"] = tokens
		b, err := ShapeBucket(be, "moe", "f32", shape, "test")
		if err != nil {
			t.Fatal(err)
		}
		buckets = append(buckets, b)
	}
	o := quick(be, nil)
	var got []string
	o.Progress = func(e Event) {
		if e.Phase == "space" {
			got = append(got, fmt.Sprintf("%s %d", e.Phase, e.Bucket))
		}
	}
	o.OnResult = func(r *Result) error {
		got = append(got, "result "+r.Bucket.Describe())
		return nil
	}
	if _, err := Run(context.Background(), buckets, o); err != nil {
		t.Fatal(err)
	}
	want := []string{"result " + buckets[0].Describe(), "result " + buckets[1].Describe()}
	var results []string
	for _, g := range got {
		if strings.HasPrefix(g, "result ") {
			results = append(results, g)
		}
	}
	if !slices.Equal(results, want) {
		t.Fatalf("results %q, want %q", results, want)
	}
	if i := slices.Index(got, want[0]); i < 0 || !slices.Contains(got, "space 2") || slices.Contains(got[:i], "space 2") {
		t.Errorf("the first bucket's result came after the second bucket's work: %q", got)
	}
	o.OnResult = func(*Result) error { return errors.New("disk full") }
	if _, err := Run(context.Background(), buckets, o); err == nil || err.Error() != "disk full" {
		t.Errorf("a result that cannot be kept: %v", err)
	}
}

func TestLeastConfirm(t *testing.T) {
	for _, tc := range []struct {
		alpha float64
		top   int
		want  int
	}{{0.05, 3, 5}, {0.05, 1, 4}, {0.01, 3, 6}, {0.5, 1, 2}} {
		if got := LeastConfirm(tc.alpha, tc.top); got != tc.want {
			t.Errorf("LeastConfirm(%g, %d) = %d, want %d", tc.alpha, tc.top, got, tc.want)
		}
	}
}

func TestSearchStrategies(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	for _, strategy := range []string{Exhaustive, Random, Local} {
		t.Run(strategy, func(t *testing.T) {
			mm, err := ShapeBucket(be, "matmul", "f32", tune.Shape{"m": 2, "n": 96, "k": 64}, "test")
			if err != nil {
				t.Fatal(err)
			}
			o := quick(be, nil)
			o.Strategy, o.Trials = strategy, 3
			rep, err := Run(context.Background(), []Bucket{mm}, o)
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			timed, all := 0, 0
			for _, c := range r.Candidates {
				if c.Status == StatusDisqualified {
					t.Errorf("%v: %s (the split must not change the answer)", c.Config, c.Reason)
				}
				if c.Status == StatusTimed {
					timed++
				}
				if c.Status != StatusPruned {
					all++
				}
				if c.Default && c.Status != StatusTimed {
					t.Errorf("the default was not timed: %s", c.Status)
				}
			}
			switch strategy {
			case Exhaustive:
				if timed != all {
					t.Errorf("exhaustive timed %d of %d", timed, all)
				}
			case Random:
				if timed != 4 {
					t.Errorf("random timed %d, want the default and 3 trials", timed)
				}
			case Local:
				if timed < 2 || timed > all {
					t.Errorf("local timed %d of %d", timed, all)
				}
			}
		})
	}
}

func TestBudgetLimitsCandidates(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	mm, _ := ShapeBucket(be, "matmul", "f32", tune.Shape{"m": 1, "n": 512, "k": 64}, "test")
	o := quick(be, nil)
	o.SampleTime, o.Budget = 5*time.Millisecond, 250*time.Millisecond
	rep, err := Run(context.Background(), []Bucket{mm}, o)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range rep.Results[0].Candidates {
		if c.Status == StatusNotTimed {
			n++
			if c.Reason != "budget exhausted" {
				t.Errorf("untimed for %q", c.Reason)
			}
		}
	}
	if n == 0 {
		t.Error("a 250ms budget timed every candidate of 13")
	}
}

const miniSuite = `name: mini
model: { preset: qwen3-moe-mini, seed: 1 }
backend: cpu
repetitions: 2
params: { prompt_len: 8, gen_len: 4 }
cases:
  - name: decode
    matrix: { batch: [1, 4, 16] }
  - name: pinned
    params: { moe_strategy: grouped }
    matrix: { batch: [4] }
  - name: kernel
    op: moe
    params: { tokens: 64, experts: 8, top_k: 2, hidden: 64, intermediate: 32, moe_strategy: chunked }
`

func loadSuite(t *testing.T, text string) *suites.Suite {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(p, []byte(text), 0o644)
	s, err := suites.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSuiteBuckets(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	bs, err := SuiteBuckets(loadSuite(t, miniSuite), be, []string{"moe"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bs {
		got = append(got, b.Describe()+" <- "+b.Label)
	}
	want := []string{
		"moe bf16 experts=32,hidden=512,intermediate=256,threads=2,tokens=1,top_k=4 <- qwen3-moe-mini batch=1",
		"moe bf16 experts=32,hidden=512,intermediate=256,threads=2,tokens=4,top_k=4 <- qwen3-moe-mini batch=4",
		"moe bf16 experts=32,hidden=512,intermediate=256,threads=2,tokens=16,top_k=4 <- qwen3-moe-mini batch=16",
		"moe bf16 experts=8,hidden=64,intermediate=32,threads=2,tokens=64,top_k=2 <- kernel",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("buckets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	all, err := SuiteBuckets(loadSuite(t, miniSuite), be, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, b := range all {
		kinds[string(b.Kernel.Op)]++
	}
	// Per batch: q/o (512x512), k/v (128x512), o (512x512 again), router
	// (32x512) and the LM head (8192x512).
	if kinds["moe"] != 4 || kinds["matmul"] != 3*4 {
		t.Errorf("kernels %v", kinds)
	}
	if _, err := SuiteBuckets(loadSuite(t, miniSuite), be, []string{"attention"}, nil); err == nil {
		t.Error("an undeclared kernel was accepted")
	}
	// A packed model on the CPU, which has no packed kernels of its own to
	// tune: its MoE and matmul configs serve the packed ops too.
	packed, err := SuiteBuckets(loadSuite(t, strings.Replace(miniSuite, "seed: 1", "seed: 1, dtype: q4", 1)), be, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds = map[string]int{}
	for _, b := range packed {
		kinds[string(b.Kernel.Op)]++
	}
	if kinds["moe"] != 4 || kinds["matmul"] != 3*4 {
		t.Errorf("packed model's kernels %v", kinds)
	}
}

// A case at another goroutine count than the tuner's looks its configs up
// there: its buckets are left out, and the tuner says how to tune them.
func TestSuiteBucketsAtOtherThreads(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	text := miniSuite + `  - name: one-thread
    params: { batch: 2, threads: 1 }
  - name: kernel-one-thread
    op: moe
    params: { tokens: 3, experts: 8, top_k: 2, hidden: 64, intermediate: 32, threads: 1 }
  - name: two-threads
    params: { batch: 8, threads: 2 }
`
	s := loadSuite(t, text)
	bs, err := SuiteBuckets(s, be, []string{"moe"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, b := range bs {
		labels = append(labels, b.Label)
		if strings.Contains(b.Label, "one-thread") || b.Shape["tokens"] == 2 || b.Shape["tokens"] == 3 {
			t.Errorf("a bucket of a 1-thread case: %s (%s)", b.Describe(), b.Label)
		}
	}
	if !slices.ContainsFunc(labels, func(l string) bool { return strings.Contains(l, "batch=8") }) {
		t.Errorf("the 2-thread case's bucket is missing: %q", labels)
	}
	notes := OtherThreads(s, be)
	want := []string{
		"case one-thread runs at threads=1, and its tuned configs are looked up there: tune it with --threads 1",
		"case kernel-one-thread runs at threads=1, and its tuned configs are looked up there: tune it with --threads 1",
	}
	if !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
}

// A run of no bucket would record an empty tune run and succeed, having
// tuned nothing: it is refused, as a dry run of it is.
func TestCheckRefusesNoBuckets(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	if err := Check(nil, Options{Backend: be}); err == nil || err.Error() != "tuner: no bucket to tune" {
		t.Errorf("Check(no buckets) = %v", err)
	}
	if rep, err := Run(context.Background(), nil, Options{Backend: be}); rep != nil || err == nil {
		t.Errorf("Run(no buckets) = %v, %v", rep, err)
	}
}

// gpuDevice is a backend as the tuner sees a GPU: Metal's name and
// threadgroup limits (the kernels never run).
type gpuDevice struct{ bridge.Backend }

func (g gpuDevice) Info() bridge.DeviceInfo {
	i := g.Backend.Info()
	i.Backend = string(ops.Metal)
	return i
}

func (gpuDevice) Limits() ops.Limits {
	return ops.Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
}

// A case's threads is the CPU's goroutine count: a GPU's tuned configs are
// not keyed by it, so on a GPU the case is tuned like any other, with no
// word of another thread count.
func TestSuiteBucketsThreadsOnGPU(t *testing.T) {
	be := gpuDevice{cpu.New(cpu.Options{Threads: 2})}
	s := loadSuite(t, `name: one
backend: metal
cases:
  - name: mm
    kind: kernel
    op: matmul
    params: { m: 1, n: 64, k: 64, threads: 1 }
`)
	bs, err := SuiteBuckets(s, be, nil, nil)
	if err != nil || len(bs) != 1 || bs[0].Label != "mm" {
		t.Errorf("buckets %v, %v; want the case's matmul", bs, err)
	}
	if notes := OtherThreads(s, be); len(notes) > 0 {
		t.Errorf("notes %q on a GPU", notes)
	}
}

// A suite whose only tunable cases run at another goroutine count has
// buckets all the same: the error says where, and how to tune them.
func TestSuiteBucketsOnlyAtOtherThreads(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 2})
	s := loadSuite(t, `name: one
backend: cpu
cases:
  - name: mm
    kind: kernel
    op: matmul
    params: { m: 1, n: 64, k: 64, threads: 1 }
`)
	_, err := SuiteBuckets(s, be, nil, nil)
	want := "no case of the suite runs a tunable cpu kernel at 2 threads: case mm runs at threads=1, and its tuned configs are looked up there: tune it with --threads 1"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v\nwant it to end %q", err, want)
	}
}

func TestParseShape(t *testing.T) {
	s, err := ParseShape("--shape", "tokens=4, experts=32")
	if err != nil || s["tokens"] != 4 || s["experts"] != 32 {
		t.Errorf("%v %v", s, err)
	}
	for _, good := range []string{"tokens=4;experts=32", "tokens=4 experts=32", " tokens=4 ,experts=32 "} {
		if s, err := ParseShape("--shape", good); err != nil || len(s) != 2 {
			t.Errorf("%q: %v %v", good, s, err)
		}
	}
	// An empty item is a value left out, said as every list of the
	// command line says it (internal/listarg), and =8 a name; each error
	// names the flag and the shape.
	empty := "is empty (a comma or semicolon too many, or a variable left unset?)"
	for _, bad := range []struct{ shape, want string }{
		{"tokens", `--shape "tokens": want name=value pairs, got "tokens"`},
		{"tokens=x", `--shape "tokens=x": tokens=x is not a positive integer`},
		{"tokens=0", `--shape "tokens=0": tokens=0 is not a positive integer`},
		{"m=1,m=2", `--shape "m=1,m=2": m is given twice`},
		{"=8", `--shape "=8": no name before = in "=8"`},
		{"m=1,,n=8", `--shape "m=1,,n=8": item 2 of 3 ` + empty},
		{"m=1,", `--shape "m=1,": item 2 of 2 ` + empty},
		{",m=1", `--shape ",m=1": item 1 of 2 ` + empty},
		{"m=1;;n=8", `--shape "m=1;;n=8": item 2 of 3 ` + empty},
		{"m=1, ,n=8", `--shape "m=1, ,n=8": item 2 of 3 ` + empty},
		{" ", `--shape " ": item 1 of 1 ` + empty},
	} {
		if _, err := ParseShape("--shape", bad.shape); err == nil || err.Error() != bad.want {
			t.Errorf("%q: %v\nwant %s", bad.shape, err, bad.want)
		}
	}
}

// Settings no default stands for are refused before anything runs, each
// named as its flag.
func TestRunRefusesBadOptions(t *testing.T) {
	be := cpu.New(cpu.Options{})
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Rounds: -1}, "--rounds -1"},
		{Options{Top: -1}, "--top -1"},
		{Options{Alpha: 2}, "--alpha 2"},
		{Options{MinGain: -1}, "--min-gain -1"},
		{Options{SampleTime: -time.Second}, "--sample-time -1s"},
		{Options{Budget: -time.Minute}, "--budget -1m0s"},
		// 4 against 4 can give no p below 0.029, over the 0.017 the best of
		// 3 finalists must beat.
		{Options{Confirm: 4}, "--confirm 4: with --top 3 and --alpha 0.05 no finalist can ever be significantly faster than the default in fewer than 5 rounds"},
	} {
		c.o.Backend = be
		if _, err := Run(context.Background(), nil, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

// asCUDA is the CPU backend reporting itself as CUDA: SuiteBuckets reads
// only the backend's name and limits.
type asCUDA struct{ bridge.Backend }

func (a asCUDA) Info() bridge.DeviceInfo {
	i := a.Backend.Info()
	i.Backend = "cuda"
	return i
}

// On CUDA a packed model's matmuls are tuned where its GEMVs run them (the
// decode step's rows and short prompts'; tensor cores take 128 rows and
// more), in its packed format, and its float matmul buckets go: no float
// GEMV runs them.
func TestSuiteBucketsOfAPackedModelOnCUDA(t *testing.T) {
	be := asCUDA{cpu.New(cpu.Options{Threads: 2})}
	bs, err := SuiteBuckets(loadSuite(t, strings.Replace(miniSuite, "seed: 1", "seed: 1, dtype: q4", 1)), be, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	shapes := map[[3]int]bool{}
	for _, b := range bs {
		switch b.Kernel.Op {
		case ops.MatMul:
			t.Errorf("float matmul bucket %s for a packed model", b.Describe())
		case ops.QMatMul:
			shapes[[3]int{b.Shape[ops.M], b.Shape[ops.N], b.Shape[ops.K]}] = true
			if b.DType != "q4" || b.Shape[ops.M] >= 128 {
				t.Errorf("qmatmul bucket %s: want q4 at fewer rows than tensor cores take", b.Describe())
			}
		}
	}
	// q's projection (512 x 512) in the decode steps (batches 1, 4, 16)
	// and in the short prompts (8 and 32 rows).
	for _, m := range []int{1, 4, 16, 8, 32} {
		if !shapes[[3]int{m, 512, 512}] {
			t.Errorf("no qmatmul bucket for q's projection at %d rows (have %v)", m, shapes)
		}
	}
}

// A run is failed when no bucket of it was tuned, each on an error of its
// own; one tuned bucket, or an interrupt, is not that.
func TestAllFailed(t *testing.T) {
	bad, stop := &Result{Err: errors.New("no")}, &Result{Err: ErrInterrupted}
	for _, c := range []struct {
		rs   []*Result
		want bool
	}{
		{nil, false},
		{[]*Result{bad}, true},
		{[]*Result{bad, bad}, true},
		{[]*Result{bad, {}}, false},
		{[]*Result{bad, stop}, false},
	} {
		if got := allFailed(c.rs); got != c.want {
			t.Errorf("%d results: allFailed %v, want %v", len(c.rs), got, c.want)
		}
	}
}

// A tuned file keeps a p-value's digits however small it is.
func TestSignificant(t *testing.T) {
	for _, c := range []struct{ v, want float64 }{{5.4321e-09, 5.43e-09}, {0.0123456, 0.0123}, {1, 1}, {0, 0}} {
		if got := significant(c.v, 3); got != c.want {
			t.Errorf("significant(%g, 3) = %g, want %g", c.v, got, c.want)
		}
	}
}

// metalLike is the CPU backend taken for Metal: the tuner derives Metal's
// buckets from it.
type metalLike struct{ bridge.Backend }

func (b metalLike) Info() bridge.DeviceInfo {
	in := b.Backend.Info()
	in.Backend, in.Name = "metal", "Test GPU"
	return in
}

func (metalLike) Limits() tune.Limits {
	return tune.Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
}

// A suite's norms and argmax read no weight matrix: they are tuned at
// their own dtype, where the engine looks them up, not at the model's; a
// --dtype for them is refused.
func TestSuiteBucketsFixedDType(t *testing.T) {
	be := metalLike{cpu.New(cpu.Options{Threads: 2})}
	bs, err := SuiteBuckets(loadSuite(t, miniSuite), be, []string{"rms_norm", "argmax", "matmul"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, b := range bs {
		seen[string(b.Kernel.Op)] = b.DType
	}
	if want := map[string]string{"rms_norm": "f32", "argmax": "f32", "matmul": "bf16"}; !maps.Equal(seen, want) {
		t.Errorf("bucket dtypes %v, want %v", seen, want)
	}
	if _, err := ShapeBucket(be, "rms_norm", "bf16", tune.Shape{"tokens": 1, "width": 512}, "--shape"); err == nil ||
		!strings.Contains(err.Error(), "reads no weight matrix") {
		t.Errorf("rms_norm at bf16: %v", err)
	}
}

// A bucket's progress counts its candidates and rounds in words, and a
// default kept for want of finalists says why: a space of the default
// alone said "1 candidates pass" and "no other candidate ran correctly",
// as if others had been wrong.
func TestOneCandidateSaysSo(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 1})
	for _, tc := range []struct {
		shape  tune.Shape
		rounds int
		want   []string
	}{
		{tune.Shape{"m": 1, "n": 8, "k": 8}, 1, []string{"space: 1 candidate, 6 pruned",
			"time: 1 candidate passes the reference check; 1 interleaved round of",
			"done: default even/1t kept: it is the only candidate the space leaves at this shape"}},
		{tune.Shape{"m": 1, "n": 32, "k": 8}, 2, []string{"space: 3 candidates, 4 pruned",
			"time: 3 candidates pass the reference check; 2 interleaved rounds of"}},
	} {
		b, err := ShapeBucket(be, "matmul", "f32", tc.shape, "test")
		if err != nil {
			t.Fatal(err)
		}
		o := quick(be, nil)
		o.Rounds = tc.rounds
		var got []string
		o.Progress = func(e Event) { got = append(got, e.Phase+": "+e.Msg) }
		rep, err := Run(context.Background(), []Bucket{b}, o)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(got, "\n")
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: progress lacks %q:\n%s", tc.shape.Key(), w, all)
			}
		}
		if r := rep.Results[0]; r.Entry == nil || r.Entry.Note != r.Verdict {
			t.Errorf("%s: entry %+v, verdict %q", tc.shape.Key(), r.Entry, r.Verdict)
		}
	}
}

func TestNoFinalist(t *testing.T) {
	def := &Candidate{Default: true, Status: StatusTimed}
	pruned := &Candidate{Status: StatusPruned}
	wrong := &Candidate{Status: StatusDisqualified}
	untimed := &Candidate{Status: StatusNotTimed, Reason: "budget exhausted"}
	for _, tc := range []struct {
		cands []*Candidate
		want  string
	}{
		{[]*Candidate{def, pruned}, "it is the only candidate the space leaves at this shape"},
		{[]*Candidate{def, wrong, pruned, wrong}, "no other candidate ran correctly"},
		{[]*Candidate{def, wrong, untimed, untimed}, "no other candidate reached the confirmation: 1 disqualified, 2 not timed"},
		{[]*Candidate{def, untimed}, "no other candidate reached the confirmation: 0 disqualified, 1 not timed"},
	} {
		if got := noFinalist(tc.cands); got != tc.want {
			t.Errorf("%d candidates: %q, want %q", len(tc.cands), got, tc.want)
		}
	}
}
