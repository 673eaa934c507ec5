// Package tuner finds the fastest config of a kernel's tuning space (package
// tune) for each shape bucket on this device, as the documented history's
// MoE chunk-size sweeps did (reports/history/data), but with the
// measurement discipline mtlbench applies everywhere.
//
// For each bucket: the space is enumerated and pruned by the kernel's
// constraints; every surviving candidate (or the subset a random or local
// search visits) runs once and is checked against the pure-Go reference
// (kbench's Check): a wrong answer disqualifies it, whatever its speed. The
// others are calibrated and warmed up, then timed in interleaved rounds (the
// order shuffled each round) so machine noise lands on all of them alike.
// The fastest few by median are timed again, with the default, in fresh
// interleaved rounds, and the best of those is named the winner only when a
// Mann-Whitney U test (Bonferroni-corrected for the finalists compared)
// says it is faster than the default and the gain clears MinGain;
// otherwise the default is kept.
//
// Every candidate becomes a case of one results run of kind "tune", with
// all its samples (us_per_call for the first rounds, confirm_us_per_call
// for the second); disqualified ones are failed cases with the error,
// pruned and unvisited ones skipped cases with the reason. Each bucket's
// outcome is a tune.Entry for the tuned-config file.
package tuner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/quantile"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// Search strategies.
const (
	Exhaustive = "exhaustive"
	Random     = "random"
	Local      = "local"
)

// Candidate statuses.
const (
	StatusTimed        = "timed"
	StatusDisqualified = "disqualified"
	StatusPruned       = "pruned"
	StatusNotTimed     = "not timed"
)

// Options configure a tuning run.
type Options struct {
	// Backend is what the kernels run on (required); the tuner wraps it to
	// apply each candidate.
	Backend bridge.Backend
	// DB, when set, receives a run of kind "tune".
	DB *results.DB
	// Store is how the run waits for a store another process holds; its
	// Context is the run's when unset. A store that refuses a bucket stops
	// the run with what it measured kept in a recovery file
	// (results.Recorder).
	Store results.RecordOptions

	Strategy string        // exhaustive (default), random or local
	Budget   time.Duration // wall-clock budget for all buckets; 0: none
	Rounds   int           // interleaved rounds for every candidate (default 10)
	Confirm  int           // rounds for the finalists and the default (default 20)
	Top      int           // finalists besides the default (default 3)
	Trials   int           // random search: candidates drawn besides the default (default 8)
	Alpha    float64       // significance level (default 0.05)
	// MinGain is the smallest speedup worth a tuned config (default 0.01):
	// a significant 0.3% is not worth diverging from the default.
	MinGain float64
	// SampleTime is the length of one timed repetition (default 20 ms).
	SampleTime time.Duration
	Seed       uint64
	// WitnessGPU is the Apple GPU the cost witness reads its counts
	// against on metal-emu (applegpu's table; "" for the M3 Ultra).
	WitnessGPU string

	// The run record.
	ToolVersion, GitCommit          string
	SuiteName, SuitePath, SuiteHash string
	Tag                             string

	Progress func(Event)
	// OnResult, when set, gets each bucket's result as soon as the bucket
	// is done (a tuned config is kept then, not only at the end); an error
	// stops the run.
	OnResult func(*Result) error
	// Tuned, when set, is the tuned-config file whose winners tuned for
	// exactly this run's buckets are kept, not tuned again (--skip-tuned,
	// stored); the others are tuned.
	Tuned *tune.File
}

// check refuses settings no default stands for: a zero is the default, a
// negative count or duration, a significance level outside (0, 1) or a
// negative gain is an error, named as the command's flag.
func (o *Options) check() error {
	var bad []string
	for _, c := range []struct {
		flag string
		v    int
	}{{"rounds", o.Rounds}, {"confirm", o.Confirm}, {"top", o.Top}, {"trials", o.Trials}} {
		if c.v < 0 {
			bad = append(bad, fmt.Sprintf("--%s %d: want a positive count (0: the default)", c.flag, c.v))
		}
	}
	if o.Budget < 0 {
		bad = append(bad, fmt.Sprintf("--budget %v: want a positive duration (0: none)", o.Budget))
	}
	if o.SampleTime < 0 {
		bad = append(bad, fmt.Sprintf("--sample-time %v: want a positive duration (0: the default)", o.SampleTime))
	}
	if o.Alpha < 0 || o.Alpha >= 1 || math.IsNaN(o.Alpha) {
		bad = append(bad, fmt.Sprintf("--alpha %g: want a significance level between 0 and 1", o.Alpha))
	}
	if o.MinGain < 0 || math.IsNaN(o.MinGain) || math.IsInf(o.MinGain, 0) {
		bad = append(bad, fmt.Sprintf("--min-gain %g: want a speedup of 0 or more", o.MinGain))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

func (o *Options) defaults() {
	if o.Strategy == "" {
		o.Strategy = Exhaustive
	}
	if o.Rounds <= 0 {
		o.Rounds = 10
	}
	if o.Confirm <= 0 {
		o.Confirm = 20
	}
	if o.Top <= 0 {
		o.Top = 3
	}
	if o.Trials <= 0 {
		o.Trials = 8
	}
	if o.Alpha <= 0 {
		o.Alpha = 0.05
	}
	if o.MinGain == 0 {
		o.MinGain = 0.01
	}
	if o.SampleTime <= 0 {
		o.SampleTime = 20 * time.Millisecond
	}
}

// Event reports progress.
type Event struct {
	Bucket, Buckets int // 1-based
	Label           string
	Phase           string // "space", "check", "time", "confirm", "done"
	Round, Rounds   int
	Msg             string
}

// Bucket is one kernel at one shape to tune.
type Bucket struct {
	Kernel *tune.Kernel
	DType  string
	Shape  tune.Shape // normalised
	// Label says where the bucket came from, e.g. "qwen3-moe-mini batch=4".
	Label string
	// At is where in its suite the first case it came from is written
	// ("my.yaml:12:5"); "" for a --shape. An error of the bucket leads
	// with it, as run's of the case does.
	At string
}

// Describe is "moe bf16 experts=32,...,tokens=4".
func (b Bucket) Describe() string { return string(b.Kernel.Op) + " " + b.DType + " " + b.Shape.Key() }

// Candidate is one config's outcome in a bucket.
type Candidate struct {
	Config  tune.Config
	Raw     tune.Config // the grid point local search reached it from
	Status  string
	Reason  string    // why pruned, disqualified or not timed
	MaxErr  float64   // against the reference
	Iters   int       // op calls per repetition
	Samples []float64 // us per call, first rounds
	Confirm []float64 // us per call, confirmation rounds
	Default bool
	Winner  bool
	// Witness is one call as the device's cost witness counted it (the
	// Metal emulator), nil where nothing counts.
	Witness *kbench.Witness
	caseID  int64
}

// Median of the first rounds (NaN when untimed).
func (c *Candidate) Median() float64 { return median(c.Samples) }

// Result is one bucket's outcome.
type Result struct {
	Bucket     Bucket
	Default    tune.Config
	Winner     tune.Config // the default when it was kept
	Speedup    float64     // default's confirmation median over the winner's
	P          float64     // Mann-Whitney p-value, winner vs default
	Verdict    string
	Candidates []*Candidate
	Err        error       // the bucket could not be tuned
	Entry      *tune.Entry // nil when Err, or Emulated
	// Skipped: Options.Tuned held a winner tuned for exactly this bucket,
	// which Entry is; nothing was timed, recorded or written again.
	Skipped bool
	// Emulated: the device is an emulation (metal-emu), whose timings are
	// the CPU's; the candidates were checked, and nothing is written.
	Emulated bool
	// Fewest is the candidate the cost witness counted moving the fewest
	// bytes (ties: the fewest distinct bytes, then the first) among those
	// launching BusyCore simdgroups a core or more (among all where none
	// does), nil where nothing counts: what an emulated run can say of a
	// GPU.
	Fewest *Candidate
}

// Report is a whole tuning run.
type Report struct {
	RunID   int64
	Results []*Result
	Elapsed time.Duration
}

// ErrInterrupted is returned when the context ends a run early; finished
// buckets are kept.
var ErrInterrupted = errors.New("tuning interrupted")

// Check refuses, before anything is allocated or recorded, what Run would
// refuse or what no bucket of it could run: options out of range, too few
// confirm rounds, a bucket's op parameters its kernel case rejects, a
// bucket too large for the machine. A dry run checks the same.
func Check(buckets []Bucket, o Options) error {
	if err := o.check(); err != nil {
		return err
	}
	o.defaults()
	if o.Backend == nil {
		return errors.New("tuner: no backend")
	}
	// Emulated timings write no config, so only there may the rounds be
	// too few to show a winner.
	if need := LeastConfirm(o.Alpha, o.Top); o.Confirm < need && !o.Backend.Info().Emulated {
		return fmt.Errorf("--confirm %d: with --top %d and --alpha %g no finalist can ever be significantly faster than the default "+
			"in fewer than %d rounds (the least p of %d against %d values is %.2g, over the %.2g a finalist must beat)",
			o.Confirm, o.Top, o.Alpha, need, o.Confirm, o.Confirm, leastP(o.Confirm), o.Alpha/float64(o.Top))
	}
	switch o.Strategy {
	case Exhaustive, Random, Local:
	default:
		return fmt.Errorf("unknown search strategy %q (want exhaustive, random or local)", o.Strategy)
	}
	// A run of nothing would be recorded, and succeed, having tuned nothing.
	if len(buckets) == 0 {
		return errors.New("tuner: no bucket to tune")
	}
	return fits(o.Backend, buckets)
}

// Run tunes every bucket in order and returns their results; a bucket that
// cannot be tuned has Err set and the others go on.
func Run(ctx context.Context, buckets []Bucket, o Options) (*Report, error) {
	if err := Check(buckets, o); err != nil {
		return nil, err
	}
	o.defaults()
	start := time.Now()
	rep := &Report{}
	info := o.Backend.Info()
	var rec *results.Recorder
	if o.DB != nil {
		notes := fmt.Sprintf("strategy=%s budget=%v rounds=%d confirm=%d top=%d alpha=%g min_gain=%g buckets=%d",
			o.Strategy, o.Budget, o.Rounds, o.Confirm, o.Top, o.Alpha, o.MinGain, len(buckets))
		if info.Emulated {
			notes += " witness_gpu=" + witnessGPU(o.WitnessGPU)
		}
		run := &results.Run{SuiteName: o.SuiteName, SuitePath: o.SuitePath, SuiteHash: o.SuiteHash,
			ToolVersion: o.ToolVersion, GitCommit: o.GitCommit, Tag: o.Tag, Backend: info.Backend,
			Kind: results.KindTune, Emulated: info.Emulated, Machine: machineOf(info), Notes: notes,
			BackendNotes: info.Notes}
		so := o.Store
		if so.Context == nil {
			so.Context = ctx
		}
		var err error
		if rec, err = o.DB.Record(run, so); err != nil {
			return nil, err
		}
		rep.RunID = run.ID
	}
	var err error
	for i, b := range buckets {
		if ctx.Err() != nil {
			err = ErrInterrupted
			break
		}
		var budget time.Duration
		if o.Budget > 0 {
			budget = (o.Budget - time.Since(start)) / time.Duration(len(buckets)-i)
			if budget <= 0 {
				budget = time.Nanosecond // still time the default and a neighbour or two
			}
		}
		t := &bucketRun{o: &o, b: b, idx: i + 1, n: len(buckets), budget: budget,
			rng: rand.New(rand.NewPCG(o.Seed, uint64(i)))}
		if e, why := o.Stored(b); e != nil {
			rep.Results = append(rep.Results, skipped(b, e))
			t.event(StatusSkipped, 0, 0, "tuned earlier (run %d) for this build: %s kept, not tuned again", e.RunID, b.Kernel.String(e.Config))
			continue
		} else if why != "" {
			t.event("space", 0, 0, "tuned again: %s", why)
		}
		r := t.run(ctx)
		if r.Entry != nil {
			r.Entry.RunID = rep.RunID
		}
		rep.Results = append(rep.Results, r)
		if rec != nil {
			err = record(rec, r)
		}
		// The bucket's config is kept even where the store refused its
		// candidates (the recovery file holds them).
		if o.OnResult != nil {
			if rerr := o.OnResult(r); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			break
		}
		if ctx.Err() != nil {
			err = ErrInterrupted
			break
		}
	}
	rep.Elapsed = time.Since(start)
	if rec != nil {
		status := results.RunComplete
		if errors.Is(err, ErrInterrupted) {
			status = results.RunInterrupted
		} else if err != nil || allFailed(rep.Results) {
			status = results.RunFailed
		}
		if ferr := rec.FinishRun(status); ferr != nil && err == nil {
			err = ferr
		}
	}
	return rep, err
}

// allFailed reports whether no bucket of a run was tuned: each stopped on
// an error of its own, so the run as a whole failed.
func allFailed(rs []*Result) bool {
	for _, r := range rs {
		if r.Err == nil || errors.Is(r.Err, ErrInterrupted) {
			return false
		}
	}
	return len(rs) > 0
}

// fits works out every bucket's memory before anything is allocated or
// recorded (kbench.Need, what Prepare checks again): a bucket too large
// for this machine, or whose op parameters its kernel case refuses, fails
// the run at once, naming where it came from, its kernel and shape, instead of filling
// gigabytes first or recording a run of failed buckets. Other problems
// (a backend that cannot run the op) are left to the bucket, which reports
// them as it always has.
func fits(be bridge.Backend, buckets []Bucket) error {
	var errs []error
	// Each error leads with the bucket's Label, the suite's cases or the
	// --shape it came from: a suite of many cases says which to change.
	from := func(b Bucket, err error) error {
		if b.Label == "" {
			return err
		}
		if b.At != "" {
			return fmt.Errorf("%s: %s: %w", b.At, b.Label, err)
		}
		return fmt.Errorf("%s: %w", b.Label, err)
	}
	for _, b := range buckets {
		m, err := kbench.Need(&candidateBackend{Backend: be}, kernelCase(b))
		if pe := (*kbench.ParamError)(nil); errors.As(err, &pe) {
			errs = append(errs, from(b, fmt.Errorf("%s: %w", b.Describe(), err)))
			continue
		}
		if err != nil {
			continue
		}
		if err := m.Err(); err != nil {
			errs = append(errs, from(b, err))
		}
	}
	return errors.Join(errs...)
}

// interrupted reports whether err is the run's context ending, not a
// failure of the candidate or bucket that returned it.
func interrupted(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// candidateBackend applies one candidate: it rewrites the MoE params of
// every call, and sets the inner backend's matmul split.
type candidateBackend struct {
	bridge.Backend
	moe *bridge.MoEParams
}

// RunsWindows is the inner backend's (bridge.WindowRunner), which the
// embedding alone would hide.
func (c *candidateBackend) RunsWindows() bool {
	w, ok := c.Backend.(bridge.WindowRunner)
	return ok && w.RunsWindows()
}

func (c *candidateBackend) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	if c.moe != nil {
		p = *c.moe
	}
	c.Backend.MoE(out, x, w, p)
}

// The packed-weight ops go through to a backend that runs them (kbench
// asks QuantWeight first, so the others are never reached on one that
// does not).

func (c *candidateBackend) QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	qb, ok := c.Backend.(bridge.QuantBackend)
	if !ok {
		return nil, fmt.Errorf("the %s backend does not run packed weights", c.Backend.Info().Backend)
	}
	return qb.QuantWeight(spec, shape, data, scales, biases)
}

// LastStepCost passes the device's cost witness through (the Metal
// emulator's), so each candidate's launch is counted; false elsewhere.
func (c *candidateBackend) LastStepCost() ([]mtl.DispatchStats, bool) {
	if w, ok := c.Backend.(interface {
		LastStepCost() ([]mtl.DispatchStats, bool)
	}); ok {
		return w.LastStepCost()
	}
	return nil, false
}

func (c *candidateBackend) SupportsQuant(spec quant.Spec) error {
	if qs, ok := c.Backend.(bridge.QuantSupport); ok {
		return qs.SupportsQuant(spec)
	}
	if _, ok := c.Backend.(bridge.QuantBackend); !ok {
		return fmt.Errorf("the %s backend does not run packed weights", c.Backend.Info().Backend)
	}
	return nil
}

// PrefersWider passes the backend's preference through, so a tuned engine
// loads packed weights as the backend's own would (engine.RunConfig).
func (c *candidateBackend) PrefersWider(spec quant.Spec) bool {
	p, ok := c.Backend.(bridge.QuantPreference)
	return ok && p.PrefersWider(spec)
}

func (c *candidateBackend) QMatMul(out, x, w, bias bridge.Tensor) {
	c.Backend.(bridge.QuantBackend).QMatMul(out, x, w, bias)
}

func (c *candidateBackend) QEmbedding(out, table bridge.Tensor) {
	c.Backend.(bridge.QuantBackend).QEmbedding(out, table)
}

func (c *candidateBackend) QMoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	c.Backend.(bridge.QuantBackend).QMoE(out, x, w, p)
}

// apply makes cb run config for kernel: a GPU backend takes it as its
// launch parameters; the MoE dispatch goes through every MoE call's params.
func apply(cb *candidateBackend, kernel string, c tune.Config) error {
	if lt, ok := cb.Backend.(bridge.LaunchTuner); ok {
		c := c.Clone()
		lt.SetLaunchConfig(kernel, func(string, map[string]int) (map[string]string, bool) { return c, true })
		if kernel == string(ops.MoE) {
			p := tune.MoEParams(c)
			cb.moe = &p
		}
		return nil
	}
	switch ops.ID(kernel) {
	case ops.MoE:
		p := tune.MoEParams(c)
		cb.moe = &p
		return nil
	case ops.MatMul:
		s, ok := cb.Backend.(tune.MatMulSplitter)
		if !ok {
			return fmt.Errorf("the %s backend cannot change its matmul split", cb.Backend.Info().Backend)
		}
		piece, threads := tune.MatMulSplit(c)
		s.SetMatMulSplit(func(int, int, int, bridge.DType) (int, int) { return piece, threads })
		return nil
	}
	return fmt.Errorf("no way to apply a %s config on this backend", kernel)
}

// reset returns cb to the backend's own behaviour.
func reset(cb *candidateBackend) {
	cb.moe = nil
	if lt, ok := cb.Backend.(bridge.LaunchTuner); ok {
		for _, k := range tune.Kernels(cb.Backend.Info().Backend) {
			lt.SetLaunchConfig(string(k.Op), nil)
		}
	}
	if s, ok := cb.Backend.(tune.MatMulSplitter); ok {
		s.SetMatMulSplit(nil)
	}
}

// bucketRun tunes one bucket.
type bucketRun struct {
	o      *Options
	b      Bucket
	idx, n int
	budget time.Duration
	start  time.Time
	// setup is the last candidate's check and calibration: with a large
	// shape's reference check, far more than its timed rounds.
	setup time.Duration
	rng   *rand.Rand
	cb    *candidateBackend
	bench *kbench.Bench
	res   *Result
	byKey map[string]*Candidate
}

func (t *bucketRun) event(phase string, round, rounds int, format string, args ...any) {
	if t.o.Progress != nil {
		t.o.Progress(Event{Bucket: t.idx, Buckets: t.n, Label: t.b.Label, Phase: phase, Round: round, Rounds: rounds, Msg: fmt.Sprintf(format, args...)})
	}
}

// left is the bucket's remaining budget (a large value without one).
func (t *bucketRun) left() time.Duration {
	if t.budget == 0 {
		return time.Duration(math.MaxInt64)
	}
	return t.budget - time.Since(t.start)
}

func (t *bucketRun) run(ctx context.Context) *Result {
	t.start = time.Now()
	k, lim := t.b.Kernel, tune.LimitsFor(t.o.Backend, string(t.b.Kernel.Op), t.b.DType)
	t.res = &Result{Bucket: t.b, Default: k.DefaultConfig(t.b.Shape, lim)}
	t.byKey = map[string]*Candidate{}
	cands, pruned := k.Candidates(t.b.Shape, lim)
	for i, c := range cands {
		t.add(&Candidate{Config: c, Status: StatusNotTimed, Default: i == 0})
	}
	for _, p := range pruned {
		t.res.Candidates = append(t.res.Candidates, &Candidate{Config: p.Config, Status: StatusPruned, Reason: p.Reason})
	}
	t.event("space", 0, 0, "%s, %d pruned by constraints or as duplicates", plural.Of(len(cands), "candidate"), len(pruned))

	t.cb = &candidateBackend{Backend: t.o.Backend}
	defer reset(t.cb)
	b, err := kbench.PrepareContext(ctx, t.cb, kernelCase(t.b))
	if interrupted(err) {
		err = ErrInterrupted // while filling: the bucket was not tuned, nothing is wrong with it
	}
	if err != nil {
		t.res.Err = err
		return t.res
	}
	defer b.Close()
	t.event("space", 0, 0, "memory: %s", b.Memory())
	if err := b.SetAppleGPU(t.o.WitnessGPU); err != nil {
		t.res.Err = err
		return t.res
	}
	t.bench = b

	var timed []*Candidate
	switch t.o.Strategy {
	case Local:
		timed, err = t.local(ctx)
	default:
		timed, err = t.sweep(ctx, cands)
	}
	def := t.byKey[t.res.Default.Key()]
	if err == nil && def.Status != StatusTimed {
		err = fmt.Errorf("the default %s failed: %s", k.String(def.Config), def.Reason)
	}
	if err != nil {
		t.res.Err = err
		return t.res
	}
	if t.o.Backend.Info().Emulated {
		t.emulated(def)
		return t.res
	}
	t.confirm(ctx, def, timed)
	return t.res
}

// emulated ends a bucket on an emulated device: its timings are the CPU's
// running the kernels, not a GPU's, so the default stays and no tuned
// config is written; the reference check has disqualified every wrong
// candidate all the same.
func (t *bucketRun) emulated(def *Candidate) {
	r := t.res
	r.Emulated = true
	r.Winner, r.Speedup, r.P = def.Config, 1, 1
	checked, wrong := 0, 0
	for _, c := range r.Candidates {
		switch c.Status {
		case StatusDisqualified:
			wrong++
			checked++
		case StatusTimed:
			checked++
		}
	}
	r.Verdict = fmt.Sprintf("emulated: %s checked against the reference, %d disqualified; timings are the emulator's, not a GPU's: no tuned config", plural.Of(checked, "candidate"), wrong)
	r.Fewest = fewestBytes(r.Candidates)
	if r.Fewest != nil && def.Witness != nil {
		r.Verdict += "; " + witnessVerdict(def, r.Fewest, t.b.Kernel.String(r.Fewest.Config))
	}
	t.event("done", 0, 0, "%s", r.Verdict)
}

// fewestBytes is the timed candidate the witness counted moving the fewest
// bytes (ties: the fewest distinct bytes, then the first) among the
// launches that keep the GPU's cores busy, else among all; nil where none
// was counted.
func fewestBytes(cands []*Candidate) *Candidate {
	for _, busy := range []bool{true, false} {
		var f *Candidate
		for _, c := range cands {
			if c.Status != StatusTimed || c.Witness == nil || busy && c.Witness.SimdgroupsPerCore < BusyCore {
				continue
			}
			if f == nil || c.Witness.Bytes() < f.Witness.Bytes() ||
				c.Witness.Bytes() == f.Witness.Bytes() && c.Witness.Footprint() < f.Witness.Footprint() {
				f = c
			}
		}
		if f != nil {
			return f
		}
	}
	return nil
}

// witnessVerdict is what the cost witness says of a bucket: the default's
// bytes, and the launch moving the fewest (fewest, named name) among those
// keeping BusyCore simdgroups a core, else among all. A default that keeps
// fewer busy is not among them, however few bytes it moves, so fewest is
// named whenever it is another launch.
func witnessVerdict(def, fewest *Candidate, name string) string {
	among := fmt.Sprintf("of the launches with %d or more simdgroups a core", BusyCore)
	if fewest.Witness.SimdgroupsPerCore < BusyCore {
		among = fmt.Sprintf("of all launches (none has %d simdgroups a core)", BusyCore)
	}
	v := "the cost witness: the default moves " + witnessNote(def.Witness)
	if fewest == def {
		return v + ", the fewest " + among
	}
	return v + "; " + among + ", " + name + " moves the fewest, " + witnessNote(fewest.Witness)
}

// BusyCore is the simdgroups a GPU core needs to hide memory latency
// (docs/metal-kernels.md): the witness's pick among candidates prefers
// those that launch at least this many per core.
const BusyCore = 2

// witnessNote is what the witness counted of one call: "4.33 MB (traffic
// 89%, footprint 100%, 3.2 simdgroups a core of the Apple M3 Ultra)".
func witnessNote(w *kbench.Witness) string {
	return fmt.Sprintf("%s (traffic %.0f%%, footprint %.0f%%, %s simdgroups a core of the %s)",
		decimalBytes(w.Bytes()), 100*w.Efficiency, 100*w.FootprintEfficiency(w.Ideal), tenths(w.SimdgroupsPerCore), w.GPU)
}

// decimalBytes is n bytes to three significant digits in the decimal unit
// that holds it ("9.68 kB", "42.1 MB"), so the launches a verdict compares
// at small shapes do not all read "0.01 MB".
func decimalBytes(n int64) string {
	v := float64(n)
	if v < 999.5 {
		return fmt.Sprintf("%d B", n)
	}
	for _, u := range []string{"kB", "MB", "GB"} {
		v /= 1000
		switch {
		case v < 9.995:
			return fmt.Sprintf("%.2f %s", v, u)
		case v < 99.95:
			return fmt.Sprintf("%.1f %s", v, u)
		case v < 999.5:
			return fmt.Sprintf("%.0f %s", v, u)
		}
	}
	return fmt.Sprintf("%.0f TB", v/1000)
}

// tenths is x to one decimal, or to two significant digits where one
// decimal would show a launch of some simdgroups as 0.0.
func tenths(x float64) string {
	if x > 0 && x < 0.05 {
		return strconv.FormatFloat(x, 'f', int(-math.Floor(math.Log10(x)))+1, 64)
	}
	return fmt.Sprintf("%.1f", x)
}

func (t *bucketRun) add(c *Candidate) {
	t.byKey[c.Config.Key()] = c
	t.res.Candidates = append(t.res.Candidates, c)
}

// kernelCase is the kbench case of a bucket: its op parameters and dtype.
func kernelCase(b Bucket) ops.Args {
	return ops.Args{Op: b.Kernel.Op, Ints: b.Kernel.OpParams(b.Shape), DType: ops.DType(b.DType)}
}

// prepare checks a candidate against the reference and calibrates its
// repetition; it reports whether the candidate may be timed.
func (t *bucketRun) prepare(c *Candidate) bool {
	defer func(start time.Time) { t.setup = time.Since(start) }(time.Now())
	k := t.b.Kernel
	if err := apply(t.cb, string(k.Op), c.Config); err != nil {
		c.Status, c.Reason = StatusDisqualified, err.Error()
		return false
	}
	maxErr, err := t.bench.Check()
	c.MaxErr = maxErr
	if interrupted(err) {
		c.Reason = "interrupted" // not a wrong answer: the check was cut short
		return false
	}
	if err != nil {
		c.Status, c.Reason = StatusDisqualified, "wrong answer: "+err.Error()
		t.event("check", 0, 0, "%s disqualified: %v", k.String(c.Config), err)
		return false
	}
	// Calibrate: two single calls to warm up, then runs of 4x as many calls
	// until one lasts an eighth of a sample (one call's time can be far
	// from a long run's: caches, a loaded machine), then one warm-up
	// repetition at full length.
	t.bench.SetIters(1)
	for range 2 {
		if _, err := t.bench.Run(); err != nil {
			c.Status, c.Reason = StatusDisqualified, err.Error()
			return false
		}
	}
	var per time.Duration
	for iters := 1; ; iters *= 4 {
		t.bench.SetIters(iters)
		s, err := t.bench.Run()
		if err != nil {
			c.Status, c.Reason = StatusDisqualified, err.Error()
			return false
		}
		per = time.Duration(s[0].Value * 1e3) // us a call -> ns
		if time.Duration(iters)*per >= t.o.SampleTime/8 || iters >= 1<<18 {
			break
		}
	}
	c.Iters = int(min(max(math.Round(float64(t.o.SampleTime)/float64(max(per, 1))), 1), 1<<20))
	t.bench.SetIters(c.Iters)
	if _, err := t.bench.Run(); err != nil {
		c.Status, c.Reason = StatusDisqualified, err.Error()
		return false
	}
	// What the witness counts of this candidate's launch, where it counts.
	w, ok, err := t.bench.Rewitness()
	if err != nil {
		c.Status, c.Reason = StatusDisqualified, err.Error()
		return false
	}
	if ok {
		c.Witness = w
	}
	c.Status, c.Reason = StatusTimed, ""
	return true
}

// sample times one repetition of c.
func (t *bucketRun) sample(c *Candidate) (float64, error) {
	if err := apply(t.cb, string(t.b.Kernel.Op), c.Config); err != nil {
		return 0, err
	}
	t.bench.SetIters(c.Iters)
	s, err := t.bench.Run()
	if err != nil {
		return 0, err
	}
	return s[0].Value, nil
}

// rounds times cs in n interleaved rounds, shuffled each round, appending
// to each candidate's samples (confirm: its confirmation samples).
func (t *bucketRun) rounds(ctx context.Context, cs []*Candidate, n int, phase string, confirm bool) error {
	order := slices.Clone(cs)
	for r := range n {
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		t.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, c := range order {
			if c.Status != StatusTimed {
				continue
			}
			// A sample is the unit of waiting: an interrupt ends the round.
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			v, err := t.sample(c)
			if err != nil {
				c.Status, c.Reason = StatusDisqualified, err.Error()
				continue
			}
			if confirm {
				c.Confirm = append(c.Confirm, v)
			} else {
				c.Samples = append(c.Samples, v)
			}
		}
		t.event(phase, r+1, n, "")
	}
	return nil
}

// plan fits the first rounds to the budget: it returns how many
// candidates of n to time and in how many rounds.
func (t *bucketRun) plan(n int) (cands, rounds int) { return t.planIn(n, t.left()) }

// planIn is plan with left of the budget remaining: the clock read once,
// by plan, so the same time left gives the same plan.
func (t *bucketRun) planIn(n int, left time.Duration) (cands, rounds int) {
	rounds = t.o.Rounds
	if t.budget == 0 {
		return n, rounds
	}
	// In float nanoseconds: a count or sample time the flags allow (--rounds
	// 1e11) would overflow a Duration's product and keep every round.
	st := float64(t.o.SampleTime)
	confirm := float64(t.o.Confirm) * float64(t.o.Top+1) * st
	avail := float64(left) - confirm
	// rounds, then the check and calibration: at least three samples' worth
	base := max(float64(t.setup), 3*st)
	per := func(r int) float64 { return float64(r)*st + base }
	if rounds > 5 && float64(n)*per(rounds) > avail && st > 0 {
		// The most rounds that fit, found at once, not one at a time.
		rounds = int(max(5, min(float64(rounds), math.Floor((avail/float64(n)-base)/st)+1)))
	}
	for rounds > 5 && float64(n)*per(rounds) > avail {
		rounds--
	}
	cands = n
	if float64(n)*per(rounds) > avail {
		cands = max(int(max(avail/per(rounds), 0)), 2)
	}
	return min(cands, n), rounds
}

// sweep times the candidates of an exhaustive or random search: the
// default always, then all others (exhaustive) or a random draw of Trials
// (random), as many as the budget allows.
func (t *bucketRun) sweep(ctx context.Context, cands []tune.Config) ([]*Candidate, error) {
	// The default first: what its setup takes, the plan leaves for each
	// other candidate's.
	if ctx.Err() != nil {
		return nil, ErrInterrupted
	}
	var timed []*Candidate
	if def := t.byKey[cands[0].Key()]; t.prepare(def) {
		timed = append(timed, def)
	}
	n, rounds := t.plan(len(cands))
	why := "budget exhausted"
	if t.o.Strategy == Random && n > t.o.Trials+1 {
		n, why = t.o.Trials+1, "not drawn by random search"
	}
	order := make([]int, len(cands)-1)
	for i := range order {
		order[i] = i + 1
	}
	if n < len(cands) {
		t.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		t.event("space", 0, 0, "timing %d of %d candidates (%s)", n, len(cands), why)
	}
	for _, i := range order[:n-1] {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		c := t.byKey[cands[i].Key()]
		if t.prepare(c) {
			timed = append(timed, c)
		}
	}
	for _, i := range order[n-1:] {
		t.byKey[cands[i].Key()].Reason = why
	}
	pass := "pass"
	if len(timed) == 1 {
		pass = "passes"
	}
	t.event("time", 0, rounds, "%s %s the reference check; %s of %v samples",
		plural.Of(len(timed), "candidate"), pass, plural.Of(rounds, "interleaved round"), t.o.SampleTime)
	return timed, t.rounds(ctx, timed, rounds, "time", false)
}

// local is a hill climb from the default: each step times the current
// config with its unvisited neighbours (one parameter one step away, past
// steps that change nothing or cannot run: ops.Space.Neighbours) in
// interleaved rounds and moves to the fastest, until none is faster or the
// budget ends.
func (t *bucketRun) local(ctx context.Context) ([]*Candidate, error) {
	k, lim := t.b.Kernel, tune.LimitsFor(t.o.Backend, string(t.b.Kernel.Op), t.b.DType)
	raw := k.Default(t.b.Shape, lim)
	cur := t.byKey[t.res.Default.Key()]
	cur.Raw = raw
	if !t.prepare(cur) {
		return nil, nil // the caller reports the failed default
	}
	timed := []*Candidate{cur}
	visited := map[string]bool{cur.Config.Key(): true}
	for step := 0; ; step++ {
		group := []*Candidate{cur}
		for _, m := range k.Neighbours(raw, t.b.Shape, lim) {
			c := t.byKey[m.Config.Key()]
			if c == nil || visited[m.Config.Key()] {
				continue
			}
			visited[m.Config.Key()] = true
			c.Raw = m.Raw
			if ctx.Err() != nil {
				return nil, ErrInterrupted
			}
			if t.prepare(c) {
				group = append(group, c)
				timed = append(timed, c)
			}
		}
		if len(group) == 1 {
			break
		}
		n, rounds := t.plan(len(group))
		if step > 0 && n < len(group) {
			for _, c := range group[1:] {
				c.Status, c.Reason = StatusNotTimed, "budget exhausted"
			}
			break
		}
		mark := map[*Candidate]int{}
		for _, c := range group {
			mark[c] = len(c.Samples)
		}
		if err := t.rounds(ctx, group, rounds, "time", false); err != nil {
			return nil, err
		}
		// Compare within this step's rounds only: they were interleaved.
		best := cur
		for _, c := range group {
			if c.Status == StatusTimed && median(c.Samples[mark[c]:]) < median(best.Samples[mark[best]:]) {
				best = c
			}
		}
		t.event("time", 0, 0, "local step %d: %s -> %s", step+1, k.String(cur.Config), k.String(best.Config))
		if best == cur {
			break
		}
		cur, raw = best, best.Raw
	}
	for _, c := range t.res.Candidates {
		if c.Status == StatusNotTimed && c.Reason == "" {
			c.Reason = "not reached by local search"
		}
	}
	var out []*Candidate
	for _, c := range timed {
		if c.Status == StatusTimed {
			out = append(out, c)
		}
	}
	return out, nil
}

// confirm re-times the fastest candidates with the default and names the
// winner.
func (t *bucketRun) confirm(ctx context.Context, def *Candidate, timed []*Candidate) {
	k := t.b.Kernel
	var ranked []*Candidate
	for _, c := range timed {
		if c.Status == StatusTimed && !c.Default && len(c.Samples) > 0 {
			ranked = append(ranked, c)
		}
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].Median() < ranked[j].Median() })
	finalists := ranked[:min(t.o.Top, len(ranked))]
	r := t.res
	r.Winner, r.Speedup, r.P = def.Config, 1, 1
	if len(finalists) > 0 {
		group := append(slices.Clone(finalists), def)
		n := t.o.Confirm
		if t.budget > 0 {
			// A short budget cuts the rounds, never below what can show a
			// winner (or 6, where asked for more).
			fit := int(t.left() / (time.Duration(len(group)) * t.o.SampleTime))
			n = max(min(n, fit), LeastConfirm(t.o.Alpha, t.o.Top), min(6, t.o.Confirm))
		}
		t.event("confirm", 0, n, "%s vs the default %s", joinConfigs(k, finalists), k.String(def.Config))
		if err := t.rounds(ctx, group, n, "confirm", true); err != nil {
			r.Err = err
			return
		}
		var best *Candidate
		for _, c := range finalists {
			if c.Status == StatusTimed && len(c.Confirm) > 0 && (best == nil || median(c.Confirm) < median(best.Confirm)) {
				best = c
			}
		}
		if def.Status != StatusTimed || len(def.Confirm) == 0 {
			r.Err = fmt.Errorf("the default %s failed: %s", k.String(def.Config), def.Reason)
			return
		}
		if best != nil {
			dm, bm := median(def.Confirm), median(best.Confirm)
			th := benchmath.DefaultThresholds
			cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(def.Confirm, &th), benchmath.NewSample(best.Confirm, &th))
			alpha := t.o.Alpha / float64(len(finalists)) // Bonferroni: the best of several
			gain := dm/bm - 1
			r.P = cmp.P
			switch {
			case bm < dm && cmp.P < alpha && gain >= t.o.MinGain:
				r.Winner, r.Speedup = best.Config, dm/bm
				r.Verdict = fmt.Sprintf("%s is %.3fx the default %s (p=%.2g < %.2g)", k.String(best.Config), dm/bm, k.String(def.Config), cmp.P, alpha)
			case bm >= dm:
				r.Verdict = fmt.Sprintf("default %s kept: the fastest finalist %s is not faster (%.3fx, p=%.2g)", k.String(def.Config), k.String(best.Config), dm/bm, cmp.P)
			case cmp.P >= alpha:
				r.Verdict = fmt.Sprintf("default %s kept: %s at %.3fx is not significant (p=%.2g >= %.2g)", k.String(def.Config), k.String(best.Config), dm/bm, cmp.P, alpha)
			default:
				r.Verdict = fmt.Sprintf("default %s kept: %s gains %.1f%%, below the %.1f%% minimum", k.String(def.Config), k.String(best.Config), 100*gain, 100*t.o.MinGain)
			}
		}
	}
	if r.Verdict == "" {
		r.Verdict = "default " + k.String(def.Config) + " kept: " + noFinalist(t.res.Candidates)
	}
	for _, c := range t.res.Candidates {
		c.Winner = c.Config.Equal(r.Winner) && c.Status == StatusTimed
	}
	info := t.o.Backend.Info()
	r.Entry = &tune.Entry{Device: tune.DeviceName(t.o.Backend), Backend: info.Backend, Kernel: string(k.Op), DType: t.b.DType,
		Shape: t.b.Shape.Clone(), Config: r.Winner.Clone(), Default: def.Config.Clone(), Speedup: round(r.Speedup, 4),
		P: significant(r.P, 3), Samples: len(def.Confirm), SourceHash: tune.SourceHash(t.o.Backend, string(k.Op)),
		ToolVersion: t.o.ToolVersion, TunedAt: time.Now().UTC().Truncate(time.Second), Note: r.Verdict}
	t.event("done", 0, 0, "%s", r.Verdict)
}

// noFinalist says why no candidate but the default reached the
// confirmation: the space left none, every other was disqualified, or some
// were never timed (a budget, a search that did not draw them).
func noFinalist(cands []*Candidate) string {
	others, wrong := 0, 0
	for _, c := range cands {
		if c.Default || c.Status == StatusPruned {
			continue
		}
		others++
		if c.Status == StatusDisqualified {
			wrong++
		}
	}
	switch {
	case others == 0:
		return "it is the only candidate the space leaves at this shape"
	case wrong == others:
		return "no other candidate ran correctly"
	}
	return fmt.Sprintf("no other candidate reached the confirmation: %d disqualified, %d not timed", wrong, others-wrong)
}

// LeastConfirm is the fewest confirmation rounds in which the best of top
// finalists can be significantly faster than the default at alpha
// (Bonferroni over the finalists): the Mann-Whitney U test of n values
// against n can give no p below 2/C(2n, n).
func LeastConfirm(alpha float64, top int) int {
	n := 2
	for leastP(n) >= alpha/float64(max(top, 1)) && n < 64 {
		n++
	}
	return n
}

// leastP is the smallest two-sided Mann-Whitney p of n values against n:
// every value of one side below every value of the other.
func leastP(n int) float64 {
	c := 1.0 // C(2n, n), built up as a float
	for i := 1; i <= n; i++ {
		c = c * float64(n+i) / float64(i)
	}
	return 2 / c
}

func joinConfigs(k *tune.Kernel, cs []*Candidate) string {
	s := ""
	for i, c := range cs {
		if i > 0 {
			s += ", "
		}
		s += k.String(c.Config)
	}
	return s
}

func median(v []float64) float64 { return quantile.Median(v) }

// significant keeps v's first digits, however small v is: a p-value of
// 5.4e-09 stays that, not 0.
func significant(v float64, digits int) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', digits, 64), 64)
	if err != nil {
		return v
	}
	return r
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
