// Package bench drives benchmark suites: it prepares every case (and rejects
// impossible ones before anything runs), executes repetitions with warm-up,
// interleaving and cool-down, and records every sample in the results store
// as each repetition finishes.
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/internal/quantile"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/suites"
)

// Options configure a suite run.
type Options struct {
	DB *results.DB
	// OpenDB, where DB is nil, makes the store as the run is about to
	// record into it: after the backend opened and every case was
	// prepared, so a run refused for either leaves no store behind. A
	// resume's store is opened before anything else: it makes none.
	OpenDB      func() (*results.DB, error)
	Backend     string // overrides the suite's backend when set (run's --backend, which errors name)
	Tag         string
	Threads     int   // run's --threads: the cpu backend's goroutines; another backend refuses it (ThreadsFlag)
	Resume      int64 // a run id to finish instead of starting a new run
	ToolVersion string
	GitCommit   string // the binary's commit
	TreeCommit  string // the working directory's, when it is another
	// BandwidthBuffer is the buffer size for the read-bandwidth probe
	// (default 256 MiB; 0 keeps the default, negative skips the probe).
	BandwidthBuffer int
	// Progress receives one event per finished repetition.
	Progress func(Event)
	// Start, when set, receives the suite once its cases are known (after
	// Set, which may sweep), before any work: the first case can be
	// minutes away, a run of thousands of cases should say so at once.
	Start func(*suites.Suite)
	// Set overrides parameters of every case (`run --set`), keeping case
	// keys; the run's notes record them.
	Set map[string]string
	// MemoryLimit, when positive, caps the memory a model may use below
	// what the backend reports: for shared machines, and for tests.
	MemoryLimit int64
	// Tuned are the tuned kernel configs model cases without explicit MoE
	// params use (tuned.go); nil: tune.Default without an override folder.
	Tuned *tune.Store
	// Backends are the backends' own options; Threads above sets theirs.
	Backends backends.Options
	// Pace, when set, is called before every warm-up and repetition of a
	// case and may block: `ab` uses it to run two binaries' repetitions in
	// turn, so that the machine's load falls on both alike.
	Pace func() error
	// Slowdown lengthens every engine and kernel step by this fraction
	// (MTLBENCH_TEST_SLOWDOWN): only for measuring the perf gate's power.
	Slowdown float64
	// Steps, when set, receives every step of the model cases' warm-ups
	// and repetitions as a JSON line (StepRecord).
	Steps io.Writer
	// Warn receives what the run says without stopping (a checkpoint's
	// tensors its model does not read: model.UnreadNote), before any case
	// runs; nil: standard error, as an "mtlbench: warning:" line.
	Warn func(string)
	// Store is how the run waits for a store another process holds; its
	// Context is the run's when unset. A store that refuses a write stops
	// the run with what it measured kept in a recovery file
	// (results.Recorder).
	Store results.RecordOptions
}

// Event reports progress.
type Event struct {
	Done, Total int // repetitions, warm-up included
	Case        string
	Rep         int // -1 during warm-up
	Headline    string
	Err         error
}

// measureReadBandwidth is the CPU's bandwidth probe (a variable for tests
// that check what runs before it).
var measureReadBandwidth = host.MeasureReadBandwidth

// ErrInterrupted is returned when the context ends a run early; the cases
// finished so far are kept and the run can be resumed.
var ErrInterrupted = errors.New("run interrupted")

// ErrStepLog is wrapped by the error of a run stopped because its step
// log (Options.Steps) could not be written: what it measured is stored,
// and the run can be resumed as an interrupted one.
var ErrStepLog = errors.New("step log")

// prepared is a case ready to run.
type prepared struct {
	c      suites.Case
	id     int64
	model  *ModelCase
	kernel *kbench.Bench
	// name is the case's label as the run stores it (relabel), which the
	// progress and the step log give too, so they name what show names.
	name string
	// openKernel allocates and fills a kernel case's data: at once for an
	// interleaved suite, whose cases all run together, else just before the
	// case runs, its data freed once it finishes, so a suite run case by
	// case holds one case's data at a time (docs/suites.md).
	openKernel func(context.Context) (*kbench.Bench, error)
	layersRun  int
	layersAll  int
	samples    []results.Sample // extra samples stored when the case finishes
	// tunedMoE are the MoE dispatches the case recorded, before it ran, that
	// its steps would take from the tuned configs (tuned.moe and
	// tuned.moe.prefill).
	tunedMoE []string
	steps    []time.Duration
	failed   error
	// skip is why the backend does not run the case (a kernel case's op
	// or format it lacks): recorded as skipped, never run.
	skip string
	// start is the first repetition to run: those before it are stored
	// (a resumed case).
	start int
	// threads is the case's `threads` (0: the backend's count), set on the
	// backend before each of its repetitions, as cases interleave.
	threads int
	be      bridge.Backend
}

// closeKernel frees a kernel case's data, if it holds any.
func (p *prepared) closeKernel() {
	if p.kernel != nil {
		p.kernel.Close()
		p.kernel = nil
	}
}

// useThreads gives the backend the case's goroutine count.
func (p *prepared) useThreads() { setThreads(p.be, p.threads) }

// label is the case's name as its run stores it, else as the suite gives it.
func (p *prepared) label() string {
	if p.name != "" {
		return p.name
	}
	return p.c.Name
}

func (p *prepared) rep(ctx context.Context, profile bool) (*RepResult, error) {
	p.useThreads()
	if p.model != nil {
		return p.model.Rep(ctx, profile)
	}
	ks, err := p.kernel.Run()
	if err != nil {
		return nil, err
	}
	r := &RepResult{}
	for _, s := range ks {
		r.Samples = append(r.Samples, results.Sample{Metric: s.Metric, Value: s.Value, Unit: s.Unit})
	}
	// Run took the witness's count, if the device keeps one.
	if w, ok, err := p.kernel.Witness(); err == nil && ok {
		r.Operands = w.OperandTraffic(0)
	}
	return r, nil
}

// Summary is what a finished run reports.
type Summary struct {
	RunID   int64
	Run     *results.Run
	Cases   []results.Case
	Failed  int
	Skipped int // cases the backend does not run (docs/suites.md)
	Elapsed time.Duration
}

// Run executes suite s and records it in o.DB.
func Run(ctx context.Context, s *suites.Suite, o Options) (*Summary, error) {
	start := time.Now()
	// First: --set may change the backend, the timing and the repetitions.
	if err := s.Override(o.Set); err != nil {
		return nil, err
	}
	if o.Start != nil {
		o.Start(s)
	}
	backendName, backendPos := s.Backend, s.Positions["backend"]
	if o.Backend != "" {
		// The flag chose the backend: an error names it, not the suite's line.
		backendName, backendPos = o.Backend, suites.Pos{File: "--backend " + o.Backend}
	}
	if o.Resume != 0 {
		if err := o.openDB(); err != nil {
			return nil, err
		}
	}
	bo := o.Backends
	bo.Threads = o.Threads
	// An emulated step can take minutes: an interrupt ends its dispatches.
	bo.Emu.Stop = ctx.Done()
	be, err := backends.Open(backendName, bo)
	if err != nil {
		if backendPos.Line > 0 {
			// the suite's line: the message names what it holds
			return nil, s.ErrorAt(backendPos, "backend %s: %v", backendName, err)
		}
		return nil, s.ErrorAt(backendPos, "%v", err)
	}
	defer be.Close()
	info := be.Info()
	if err := ThreadsFlag(o.Threads, info.Backend, be); err != nil {
		return nil, err
	}
	var resumed *results.Run
	if o.Resume != 0 {
		if resumed, err = checkResume(s, o, info); err != nil {
			return nil, err
		}
	}

	if err := vocabulary(s); err != nil {
		return nil, err
	}
	// Every case first: a suite that cannot run (a model path that is not
	// there, a case past memory) fails before the probes' work.
	cases, closeModels, err := prepare(ctx, s, be, o.MemoryLimit, o.Slowdown, o.warn)
	if err != nil {
		return nil, err
	}
	defer closeModels()
	warnUnread(s, cases, o.warn)
	bw := 0.0
	if p, ok := be.(bridge.BandwidthProber); ok && o.BandwidthBuffer >= 0 {
		// A GPU's own probe: a streaming read of device memory.
		if bw, err = p.MeasureBandwidth(); err != nil {
			if ctx.Err() != nil {
				return nil, ErrInterrupted
			}
			return nil, fmt.Errorf("%s backend: %w", info.Backend, err)
		}
	} else if o.BandwidthBuffer >= 0 && info.Backend == "cpu" {
		size := o.BandwidthBuffer
		if size == 0 {
			size = 256 << 20
		}
		bw = measureReadBandwidth(max(o.Threads, runtime.GOMAXPROCS(0)), size)
		// Hand the probe's buffer back so peak RSS reflects the cases alone.
		debug.FreeOSMemory()
	}
	for _, p := range cases {
		if p.model != nil {
			p.model.Bandwidth = bw
		}
	}
	useTuned(cases, o.tunedStore())
	peak, err := probeMatmulPeak(be, o, cases)
	if err != nil {
		return nil, fmt.Errorf("%s backend: %w", info.Backend, err)
	}
	var fresh []results.Case
	if resumed == nil {
		if fresh, err = recordedCases(ctx, s, o, cases); err != nil {
			return nil, err
		}
	}
	// A signal while the cases were made, the probes ran (a model's
	// weights take a while) or the cases' tuned configs were looked up
	// stops the run before it is recorded: a run stopped before any case
	// began stores nothing (docs/data.md), not a run of pending cases to
	// resume.
	if ctx.Err() != nil {
		return nil, ErrInterrupted
	}

	if o.Store.Context == nil {
		o.Store.Context = ctx
	}
	if err := o.openDB(); err != nil {
		return nil, err
	}
	rec, err := openRun(s, o, info, bw, peak, cases, fresh, resumed)
	if err != nil {
		return nil, err
	}
	run := rec.Run()
	todo := cases[:0:0]
	for _, p := range cases {
		if p.id != 0 && p.skip == "" {
			todo = append(todo, p)
		}
	}
	err = execute(ctx, s, o, rec, todo)
	status := results.RunComplete
	if errors.Is(err, ErrInterrupted) {
		status = results.RunInterrupted
	} else if err != nil {
		status = results.RunFailed
	}
	if ferr := rec.FinishRun(status); ferr != nil && err == nil {
		err = ferr
	}
	// The run as it ended (its final status), not as it began.
	sum := &Summary{RunID: run.ID, Run: rec.Run(), Elapsed: time.Since(start)}
	// The cases as the store holds them; where they cannot be read back,
	// as the run recorded them, and the error says so: a run is never
	// reported as one that stored nothing for a read that failed.
	var cerr error
	if sum.Cases, cerr = o.DB.Cases(run.ID); cerr != nil {
		sum.Cases = rec.Cases()
		err = errors.Join(err, fmt.Errorf("run %d's cases could not be read back from %s (the summary gives them as recorded; mtlbench show %d reads them): %w",
			run.ID, o.DB.Path(), run.ID, cerr))
	}
	for _, c := range sum.Cases {
		switch c.Status {
		case results.CaseFailed:
			sum.Failed++
		case results.CaseSkipped:
			sum.Skipped++
		}
	}
	if err == nil && sum.Failed > 0 {
		err = fmt.Errorf("%d of %d cases failed (see `mtlbench show %d`)", sum.Failed, len(sum.Cases), run.ID)
	}
	return sum, err
}

// openDB opens the store the run records in, if it is not open yet.
func (o *Options) openDB() error {
	if o.DB != nil {
		return nil
	}
	if o.OpenDB == nil {
		return errors.New("bench: no results database to record the run in")
	}
	db, err := o.OpenDB()
	if err != nil {
		return err
	}
	o.DB = db
	return nil
}

// sameSuite says why run cannot be resumed from s: it is no suite's run
// (a tune or a peer import), another suite's, or another version of s.
func sameSuite(run *results.Run, s *suites.Suite) error {
	if run.Kind != results.KindSuite {
		return fmt.Errorf("run %d is a %s run, not a suite's: only a suite's run resumes", run.ID, run.Kind)
	}
	if run.SuiteName != s.Name {
		from := ""
		if run.SuitePath != "" && run.SuitePath != run.SuiteName {
			from = " (" + run.SuitePath + ")"
		}
		return fmt.Errorf("run %d is of suite %q%s, not of %q (%s)", run.ID, run.SuiteName, from, s.Name, s.File)
	}
	if run.SuiteHash != s.Hash {
		return &SuiteChangedError{Run: run.ID, File: s.File, Was: run.SuiteHash, Now: s.Hash}
	}
	return nil
}

// SuiteChangedError is a resume from another version of the run's suite:
// bench, whose suite its flags build, says which flags to give instead.
type SuiteChangedError struct {
	Run            int64
	File, Was, Now string
}

func (e *SuiteChangedError) Error() string {
	return fmt.Sprintf("run %d was made from a different version of %s (suite hash %.12s, now %.12s)", e.Run, e.File, e.Was, e.Now)
}

// checkResume is the run o.Resume names, or why it cannot be resumed with
// s on this backend: checked before the cases are prepared and the
// machine probed, so that a mistyped run or store costs none of that work.
func checkResume(s *suites.Suite, o Options, info bridge.DeviceInfo) (*results.Run, error) {
	run, err := o.DB.GetRun(o.Resume)
	if errors.Is(err, results.ErrNotFound) {
		return nil, fmt.Errorf("resume: run %d is not in %s (mtlbench runs --db %s lists the runs there)", o.Resume, o.DB.Path(), o.DB.Path())
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if err := sameSuite(run, s); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	// The rest of what the run's cases measured under: repetitions of
	// other settings would be stored as the same cases.
	var differ []string
	if was, now := results.OverridesText(run.Overrides), results.OverridesText(o.Set); was != now {
		differ = append(differ, fmt.Sprintf("overrides %q (now %q)", was, now))
	}
	if run.Backend != info.Backend {
		differ = append(differ, fmt.Sprintf("backend %s (now %s)", run.Backend, info.Backend))
	}
	if run.TimingMode != s.Timing && s.Timing != "" {
		differ = append(differ, fmt.Sprintf("timing %s (now %s)", run.TimingMode, s.Timing))
	}
	// Runs recorded before the thread count was are not checked on it.
	if was := run.Threads; was != "" && was != threadsText(o.Threads) {
		differ = append(differ, fmt.Sprintf("threads %s (now %s)", was, threadsText(o.Threads)))
	}
	// A backend switch (graphs, fast math off) shows in its notes; runs
	// recorded before the notes were are not checked on them.
	if was := run.BackendNotes; was != "" && was != info.Notes {
		differ = append(differ, fmt.Sprintf("backend notes %q (now %q)", was, info.Notes))
	}
	// The run keeps its tag: another one asked for would be dropped
	// without a word, and the run not found by it. None asked keeps it.
	if o.Tag != "" && o.Tag != run.Tag {
		differ = append(differ, fmt.Sprintf("tag %q (now %q)", run.Tag, o.Tag))
	}
	if len(differ) > 0 {
		return nil, fmt.Errorf("resume: run %d was recorded with %s: resume it with the settings it was made with", run.ID, strings.Join(differ, ", "))
	}
	// Complete, or another live process's: openRun's claim decides, this
	// says so before the work.
	if err := o.DB.CheckResume(run.ID); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	return run, nil
}

// recordedCases are cases as a new run stores them (recordedCase). A model
// case's tuned configs are looked up case by case (seconds for a sweep of
// thousands), so a signal meanwhile stops the run at the case in hand.
func recordedCases(ctx context.Context, s *suites.Suite, o Options, cases []*prepared) ([]results.Case, error) {
	rc := make([]results.Case, 0, len(cases))
	for _, p := range cases {
		if ctx.Err() != nil {
			return nil, ErrInterrupted
		}
		rc = append(rc, recordedCase(s, o, p))
	}
	return rc, nil
}

// openRun claims the resumed run (checkResume's), or stores a new one of
// cases recorded as rc (recordedCases), and gives each case to run its id;
// the recorder stores the run from then on.
func openRun(s *suites.Suite, o Options, info bridge.DeviceInfo, bw, peak float64, cases []*prepared, rc []results.Case, resumed *results.Run) (*results.Recorder, error) {
	if run := resumed; run != nil {
		// Claim the run first: a run another live process is running is
		// refused, and two resumes of one run cannot both proceed.
		rec, err := o.DB.Resume(run.ID, o.Store)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		// Read as cases are keyed now: a run stored before a keying rule
		// changed resumes its own cases, not none of them.
		stored := rec.Cases()
		keys := make([]string, len(stored))
		for i, c := range stored {
			keys[i] = c.Key
		}
		vocab := 0
		for _, p := range cases {
			if p.model != nil {
				vocab = p.model.Config.Vocab
				break
			}
		}
		byKey := map[string]results.Case{}
		for i, k := range suites.StoredKeys(keys, vocab) {
			byKey[k] = stored[i]
		}
		var missing []*prepared
		for _, p := range cases {
			c, ok := byKey[p.c.Key]
			if !ok {
				missing = append(missing, p)
				continue
			}
			if c.Status != results.CaseDone {
				p.id, p.start, p.name = c.ID, min(c.RepsDone, s.Repetitions), c.Name
				if s.Timing == results.TimingProfile && p.model != nil {
					if p.steps, err = resumedSteps(o.DB, p.id, p.start); err != nil {
						return nil, fmt.Errorf("resume: %w", err)
					}
				}
			}
		}
		// Cases the store lacks (a run an earlier mtlbench stored without
		// them, its store failing between the two) are added and measured,
		// not left out of a run then reported complete.
		if err := addCases(rec, s, o, missing); err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		return rec, nil
	}
	mode := s.Timing
	run := &results.Run{SuiteName: s.Name, SuitePath: recordedPath(s), SuiteHash: s.Hash, ToolVersion: o.ToolVersion,
		GitCommit: o.GitCommit, TreeCommit: o.TreeCommit, Tag: o.Tag, Backend: info.Backend, TimingMode: mode, Kind: results.KindSuite,
		Overrides: o.Set, ReadBandwidthGBs: bw / 1e9, MatmulPeakGFLOPs: peak / 1e9, Emulated: info.Emulated, Machine: machineOf(info)}
	run.Threads = threadsText(o.Threads)
	run.BackendNotes = info.Notes
	// The run and its cases in one transaction: never a run without them.
	rec, err := o.DB.RecordCases(run, rc, o.Store)
	if err != nil {
		return nil, err
	}
	for i, p := range cases {
		p.id, p.name = rc[i].ID, rc[i].Name
		if p.skip != "" {
			if err := rec.SkipCase(p.id, p.skip); err != nil {
				return nil, err
			}
		}
	}
	return rec, nil
}

// addCases stores cases as pending cases of rec's run and gives each its
// id; a case the backend does not run is marked skipped.
func addCases(rec *results.Recorder, s *suites.Suite, o Options, cases []*prepared) error {
	if len(cases) == 0 {
		return nil
	}
	var rc []results.Case
	for _, p := range cases {
		rc = append(rc, recordedCase(s, o, p))
	}
	if err := rec.AddCases(rc); err != nil {
		return err
	}
	for i, p := range cases {
		p.id, p.name = rc[i].ID, rc[i].Name
		if p.skip != "" {
			if err := rec.SkipCase(p.id, p.skip); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordedCase is case p as a run stores it, with the parameters the
// runner adds to its suite's (model, dtype, seed, vocab, tuned configs).
func recordedCase(s *suites.Suite, o Options, p *prepared) results.Case {
	params := p.c.Recorded()
	if p.model != nil {
		params["model"] = p.model.Config.Name
		params["dtype"] = weightFormat(p.model.Config, p.model.Source)
		// the seed draws the synthetic weights and the prompts: runs of
		// two seeds measured different work under one key
		params["seed"] = strconv.FormatInt(s.Model.Seed, 10)
		// what a top_k is read against when the run's keys are read back
		// (suites.StoredKeys)
		params[suites.RecordedVocab] = strconv.Itoa(p.model.Config.Vocab)
		if s.Model.Path != "" && s.Model.Weights == suites.WeightsSynthetic {
			// a checkpoint's architecture, not its figures
			params["weights"] = suites.WeightsSynthetic
		}
		p.useThreads() // the configs the case's goroutine count looks up
		lookUpTuned(params, p)
		setThreads(p.be, 0)
		for _, k := range []string{"tuned.moe", "tuned.moe.prefill"} {
			if v := params[k]; v != "" && !slices.Contains(p.tunedMoE, v) {
				p.tunedMoE = append(p.tunedMoE, v)
			}
		}
	}
	return results.Case{Key: p.c.Key, Name: relabel(p.c.Name, o.Set, params), Kind: p.c.Kind, Params: params,
		LayersRun: p.layersRun, LayersTotal: p.layersAll}
}

// resumedSteps are the decode step times (step_ms) of a resumed profiled
// case's stored repetitions before start: what its profile's cost
// (profile_overhead_pct) is measured against with the repetitions the
// resume adds, even where it adds none.
func resumedSteps(db *results.DB, caseID int64, start int) ([]time.Duration, error) {
	samples, err := db.Samples(caseID)
	if err != nil {
		return nil, err
	}
	var steps []time.Duration
	for _, sm := range samples {
		if sm.Metric == "step_ms" && sm.Rep < start {
			steps = append(steps, time.Duration(sm.Value*float64(time.Millisecond)))
		}
	}
	return steps, nil
}

// recordedPath is where a run says its suite came from: the file's
// absolute path, so that a gate run from another folder reads the same file
// (and checks its hash); a built-in's or a synthetic suite's name (bench's)
// as it is, even where a file of that name lies about.
func recordedPath(s *suites.Suite) string {
	if strings.HasPrefix(s.File, suites.ShippedPrefix) {
		return s.File
	}
	st, err := os.Stat(s.File)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 1<<24 {
		return s.File
	}
	data, err := os.ReadFile(s.File)
	if err != nil || fmt.Sprintf("%x", sha256.Sum256(data)) != s.Hash {
		return s.File
	}
	if abs, err := filepath.Abs(s.File); err == nil {
		return abs
	}
	return s.File
}

// probeMatmulPeak measures the device's matmul rate for the weights of the
// suite's model cases, as the bandwidth is probed for decode, and gives it
// to each model case (prefill's roofline); 0 when the backend has no probe,
// probes are off or no case runs a model.
func probeMatmulPeak(be bridge.Backend, o Options, cases []*prepared) (float64, error) {
	p, ok := be.(bridge.MatmulPeakProber)
	if !ok || o.BandwidthBuffer < 0 {
		return 0, nil
	}
	var peak float64
	for _, c := range cases {
		if c.model == nil {
			continue
		}
		if peak == 0 {
			var err error
			if peak, err = p.MeasureMatmulPeak(c.model.Source.DType()); err != nil {
				return 0, err
			}
		}
		c.model.MatmulPeak = peak
	}
	return peak, nil
}

// threadsText is how a run's --threads is recorded: "default" when unset.
func threadsText(n int) string {
	if n <= 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

// machineOf is the machine's stable facts. The backend's notes go with the
// run (Run.BackendNotes): a machine row keeps its first run's fields.
func machineOf(info bridge.DeviceInfo) results.Machine {
	host, _ := os.Hostname()
	m := results.Machine{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUModel: info.Name,
		CPUCores: runtime.NumCPU(), MemoryBytes: info.MemoryBytes}
	if info.Backend != "cpu" {
		m.GPUName = info.Name
	}
	return m
}

// execute runs warm-ups and repetitions, storing each repetition as it
// finishes and finishing each case in the store after its last one.
func execute(ctx context.Context, s *suites.Suite, o Options, rec *results.Recorder, cases []*prepared) error {
	reps, warm := s.Repetitions, s.Warmup
	total := 0
	for _, p := range cases {
		total += reps - p.start + warm
	}
	profile := s.Timing == results.TimingProfile
	if profile {
		total += len(cases)
	}
	done := 0
	var steps *json.Encoder // the step log
	if o.Steps != nil {
		steps = json.NewEncoder(o.Steps)
	}
	step := func(p *prepared, rep int) error {
		if p.failed != nil {
			return nil
		}
		if s.Cooldown > 0 && done > 0 {
			select {
			case <-time.After(s.Cooldown):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		if o.Pace != nil {
			if err := o.Pace(); err != nil {
				return err
			}
		}
		var logErr error
		if steps != nil && p.model != nil {
			p.model.StepLog = func(r StepRecord) {
				r.Case, r.Rep = p.label(), rep
				if err := steps.Encode(r); err != nil && logErr == nil {
					logErr = err
				}
			}
		}
		r, err := p.rep(ctx, profile)
		if p.model != nil {
			p.model.StepLog = nil
		}
		done++
		ev := Event{Done: done, Total: total, Case: p.label(), Rep: rep}
		if err != nil {
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			p.failed = err
			ev.Err = err
			if o.Progress != nil {
				o.Progress(ev)
			}
			return rec.FailCase(p.id, err.Error())
		}
		if rep >= 0 {
			var ss []results.Sample
			// The headline: the first of the case's headline metrics it
			// recorded, else its first sample.
			heads, best := headlines(p), -1
			for _, sm := range r.Samples {
				sm.Rep = rep
				ss = append(ss, sm)
				i := slices.Index(heads, sm.Metric)
				if ev.Headline == "" || i >= 0 && (best < 0 || i < best) {
					ev.Headline = fmt.Sprintf("%s %.4g %s", sm.Metric, sm.Value, sm.Unit)
					best = i
				}
			}
			var ts []results.OpTiming
			for _, t := range r.Timings {
				t.Rep = rep
				ts = append(ts, t)
			}
			ops := append([]results.OperandTraffic(nil), r.Operands...)
			for i := range ops {
				ops[i].Rep = rep
			}
			// Stored as it finishes: an interrupted run keeps it.
			if err := rec.AddRep(p.id, rep, ss, ts, ops...); err != nil {
				return err
			}
			p.steps = append(p.steps, r.DecodeStepTime)
		}
		if o.Progress != nil {
			o.Progress(ev)
		}
		if logErr != nil {
			// Stopped once this repetition is stored; resume finishes the run.
			return fmt.Errorf("%w: %w", ErrStepLog, logErr)
		}
		return nil
	}
	finish := func(p *prepared) error {
		if p.failed != nil {
			return nil
		}
		if profile && p.model != nil {
			// What profiling costs: the same case once without per-op timing.
			p.useThreads()
			r, err := p.model.Rep(ctx, false)
			if err != nil && ctx.Err() != nil {
				// Not finished without its cost: its repetitions are
				// stored, and a resume times this again (resumedSteps).
				return ErrInterrupted
			}
			done++
			if o.Progress != nil {
				o.Progress(Event{Done: done, Total: total, Case: p.label(), Rep: -1, Headline: "unprofiled repetition (profile cost)"})
			}
			if err == nil && r.DecodeStepTime > 0 && len(p.steps) > 0 {
				prof := median(p.steps)
				p.samples = append(p.samples, results.Sample{Rep: 0, Metric: "profile_overhead_pct",
					Value: 100 * (prof.Seconds()/r.DecodeStepTime.Seconds() - 1), Unit: "%"})
			}
		}
		if err := recordTunedUsed(rec, p); err != nil {
			return err
		}
		return rec.FinishCase(p.id, p.samples, nil, p.layersRun, p.layersAll)
	}
	// open makes a kernel case's data as the case comes to run (prepared's
	// openKernel); a failure fails the case, as a failed repetition does.
	open := func(p *prepared) error {
		if p.kernel != nil || p.openKernel == nil || p.failed != nil {
			return nil
		}
		b, err := p.openKernel(ctx)
		if err == nil {
			p.kernel = b
			return nil
		}
		if ctx.Err() != nil {
			return ErrInterrupted
		}
		p.failed = err
		if o.Progress != nil {
			o.Progress(Event{Done: done, Total: total, Case: p.label(), Rep: -1, Err: err})
		}
		return rec.FailCase(p.id, err.Error())
	}
	warmUp := func(p *prepared) error {
		for w := 0; w < warm; w++ {
			if err := step(p, -1); err != nil {
				return err
			}
		}
		return nil
	}
	if len(cases) > 0 {
		giveBack(cases[0].be) // what preparing left: not the first case's
	}
	if s.Interleave {
		for _, p := range cases {
			if err := warmUp(p); err != nil {
				return err
			}
		}
		for r := 0; r < reps; r++ {
			for _, p := range cases {
				if r < p.start {
					continue
				}
				if err := step(p, r); err != nil {
					return err
				}
			}
		}
		for _, p := range cases {
			if err := finish(p); err != nil {
				return err
			}
			p.closeKernel()
		}
		return nil
	}
	for _, p := range cases {
		if err := open(p); err != nil {
			return err
		}
		if err := warmUp(p); err != nil {
			return err
		}
		for r := p.start; r < reps; r++ {
			if err := step(p, r); err != nil {
				return err
			}
		}
		if err := finish(p); err != nil {
			return err
		}
		p.closeKernel()
		giveBack(p.be)
	}
	return nil
}

// giveBack returns what a finished case freed to the system, the backend's
// kept buffers (bridge.Trimmer) and the Go heap's, so the next case, run
// after it, neither holds it nor counts it in its peak RSS.
func giveBack(be bridge.Backend) {
	if t, ok := be.(bridge.Trimmer); ok {
		t.Trim()
	}
	debug.FreeOSMemory()
}

func median(d []time.Duration) time.Duration { return quantile.Duration(d, 0.5) }

// warn is o.Warn, or a line on standard error.
func (o Options) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
		return
	}
	fmt.Fprintln(os.Stderr, "mtlbench: warning:", msg)
}

// warnUnread says which tensors of the cases' checkpoint folder the model
// does not read (model.Unread): its figures may be another model's. Once:
// the cases' loads (one a layer count) say the same.
func warnUnread(s *suites.Suite, cases []*prepared, warn func(string)) {
	said := map[string]bool{}
	for _, p := range cases {
		if p.model == nil {
			continue
		}
		model.WarnUnread(s.Model.Path, p.model.Source, func(line string) {
			if !said[line] {
				said[line] = true
				warn(line)
			}
		})
	}
}

// modelKey identifies one loaded model: cases that differ only in engine
// parameters share weights.
type modelKey struct{ layers int }

// prepare turns every case into something runnable, or fails with the
// positions of everything wrong before a single case runs.
func prepare(ctx context.Context, s *suites.Suite, be bridge.Backend, limit int64, slowdown float64, warn func(string)) ([]*prepared, func(), error) {
	var errs suites.ErrorList
	// The kv_blocks checks' scheduler runs, shared by the cases as Check
	// shares them; what they left unchecked is said once the cases are.
	sc := newSuiteChecks()
	fail := func(p suites.Pos, format string, args ...any) {
		if e, ok := s.ErrorAt(p, format, args...).(*suites.Error); ok {
			errs = append(errs, e)
		} else {
			errs = append(errs, &suites.Error{Pos: p, Msg: fmt.Sprintf(format, args...)})
		}
	}
	models := map[modelKey]*loadedModel{}
	closeAll := func() {
		for _, m := range models {
			m.src.Close()
		}
	}
	var out []*prepared
	if err := interleavedFit(s, be); err != nil {
		return nil, nil, err
	}
	// Preparing reads the tuned configs at the case's goroutine count.
	defer setThreads(be, 0)
	for _, c := range s.Cases {
		p := &prepared{c: c, be: be, threads: caseThreads(c)}
		if refused := otherBackendRefused(s, c, be.Info().Backend, be); len(refused) > 0 {
			errs = append(errs, refused...)
			continue
		}
		p.useThreads()
		if c.Kind == suites.KindKernel {
			p.openKernel = func(ctx context.Context) (*kbench.Bench, error) {
				b, err := kbench.PrepareContext(ctx, be, c.Kernel)
				if err != nil {
					return nil, err
				}
				if err := b.SetAppleGPU(c.WitnessGPU()); err != nil {
					b.Close()
					return nil, err
				}
				b.Slowdown = slowdown
				return b, nil
			}
			var err error
			if s.Interleave {
				p.kernel, err = p.openKernel(ctx)
			} else {
				// Planned now, every parameter and the case's memory
				// checked as preparing it would; allocated as it runs.
				var m kbench.Memory
				if m, err = kbench.Need(be, c.Kernel); err == nil {
					err = m.Err()
				}
			}
			if err != nil && ctx.Err() != nil {
				closeAll()
				return nil, nil, ErrInterrupted
			}
			if errors.Is(err, errors.ErrUnsupported) {
				// What this backend lacks (a format the CPU reads
				// transcoded) another runs: skipped, as validate leaves it.
				p.skip = err.Error()
				out = append(out, p)
				continue
			}
			if err != nil {
				errs = append(errs, kernelErrors(s, c, err)...)
				continue
			}
			if err := kbench.CheckAppleGPU(c.WitnessGPU()); err != nil {
				p.closeKernel()
				fail(c.PosOf(suites.ParamWitnessGPU), "case %s: %v", c.Name, err)
				continue
			}
			out = append(out, p)
			continue
		}
		if s.Model == nil {
			fail(c.Pos, "case %s is a model case but the suite names no model", c.Name)
			continue
		}
		mc, err := modelCase(ctx, s, c, be, models, limit, sc)
		if mc != nil {
			mc.Engine.Slowdown = slowdown
			var ok bool
			if mc.WitnessGPU, ok = WitnessGPU(c.WitnessGPU()); !ok && err == nil {
				err = s.ErrorAt(c.PosOf(suites.ParamWitnessGPU), "case %s: no Apple GPU %q in the table (bridge/mtl/applegpu)", c.Name, c.WitnessGPU())
			}
		}
		if err != nil && ctx.Err() != nil {
			closeAll()
			return nil, nil, ErrInterrupted
		}
		if err != nil {
			var se *suites.Error
			if errors.As(err, &se) {
				errs = append(errs, se)
			} else {
				fail(c.Pos, "case %s: %v", c.Name, err)
			}
			continue
		}
		p.model = mc
		p.layersRun, p.layersAll = mc.Config.Layers, mc.Config.ModelLayers
		out = append(out, p)
	}
	if warn != nil {
		for _, n := range sc.notes() {
			warn(n)
		}
	}
	if len(errs) > 0 {
		closeAll()
		return nil, nil, dedupe(errs)
	}
	if len(out) > 0 && !slices.ContainsFunc(out, func(p *prepared) bool { return p.skip == "" }) {
		// A run of nothing but skipped cases would record no figure.
		for _, p := range out {
			fail(p.c.Pos, "case %s: %s", p.c.Name, p.skip)
		}
		closeAll()
		return nil, nil, fmt.Errorf("no case of the suite runs on the %s backend:\n%w", be.Info().Backend, dedupe(errs))
	}
	for _, p := range out {
		if p.model == nil {
			continue
		}
		for _, lm := range models {
			if model.Source(lm.src) != p.model.Source {
				p.model.others = append(p.model.others, lm.src)
			}
		}
	}
	return out, closeAll, nil
}

// interleavedFit refuses an interleaved suite whose kernel cases fit one
// by one but not together: each case's data is made before the first
// repetition (docs/suites.md), so each case's own check, against what the
// cases before it left, would fill memory before one failed. Their tensors
// are summed with the largest reference check; a case that fails its own
// check, or that the backend does not run, is left to prepare's loop.
func interleavedFit(s *suites.Suite, be bridge.Backend) error {
	avail := be.Info().AvailableBytes
	if !s.Interleave || avail <= 0 {
		return nil
	}
	var held, scratch, largest int64
	n := 0
	var big suites.Case
	for _, c := range s.Cases {
		if c.Kind != suites.KindKernel || len(otherBackendRefused(s, c, be.Info().Backend, be)) > 0 {
			continue
		}
		m, err := kbench.Need(be, c.Kernel)
		if err != nil || m.Err() != nil {
			continue
		}
		n++
		held += m.Tensors
		scratch = max(scratch, m.Scratch)
		if m.Tensors > largest {
			largest, big = m.Tensors, c
		}
	}
	if n < 2 || held+scratch <= avail {
		return nil
	}
	pos, ok := s.Positions["interleave"]
	if !ok {
		pos = big.Pos
	}
	return s.ErrorAt(pos, "the %d interleaved kernel cases need ~%s together (every case's data is made before the first repetition; the largest, case %s, holds %s), the %s backend has %s available (hint: interleave: false makes each case's data as it runs and frees it after)",
		n, engine.GiB(held+scratch), big.Name, engine.GiB(largest), be.Info().Backend, engine.GiB(avail))
}

// oneBackend are the case parameters one backend alone reads: on a case
// another backend runs, the parameter would change nothing, yet be recorded
// with the case as a setting it ran with (docs/suites.md).
var oneBackend = []struct {
	param, backend, others string // others: what any other backend lacks
	value                  func(suites.Case) string
	// reads says whether the backend named so reads it; be is nil where
	// none is open (suites validate).
	reads func(name string, be bridge.Backend) bool
}{
	{string(ops.Threads), "cpu", "runs no CPU goroutines", func(c suites.Case) string {
		if n := caseThreads(c); n > 0 {
			return strconv.Itoa(n)
		}
		return ""
	}, func(name string, be bridge.Backend) bool {
		if be != nil {
			_, ok := be.(bridge.Threader)
			return ok
		}
		return name == "cpu"
	}},
	{suites.ParamWitnessGPU, "metal-emu", "has no cost witness", suites.Case.WitnessGPU,
		func(name string, _ bridge.Backend) bool { return name == "metal-emu" }},
}

// OtherBackend is the error of a parameter one backend alone reads
// (oneBackend) set to value ("": unset) for the backend named so (be: the
// one open, or nil), nil when it reads it: run, bench, tune and suites
// validate refuse it in these words.
func OtherBackend(param, value, name string, be bridge.Backend) error {
	for _, o := range oneBackend {
		if o.param == param && value != "" && !o.reads(name, be) {
			return fmt.Errorf("%s=%s: the %s backend %s (%s is the %s backend's)", param, value, name, o.others, param, o.backend)
		}
	}
	return nil
}

// ThreadsFlag is the error of a command's --threads count n (0: unset) for
// the backend named so (be: the one open, or nil, where "auto" is left to
// the command that opens it), nil where it reads it. The count is a case's
// threads for every case, so one rule (OtherBackend) refuses both: only the
// cpu backend's goroutines, and its bandwidth probe, take it.
func ThreadsFlag(n int, name string, be bridge.Backend) error {
	if n == 0 || be == nil && (name == "" || name == "auto") {
		return nil
	}
	if err := OtherBackend(string(ops.Threads), strconv.Itoa(n), name, be); err != nil {
		return fmt.Errorf("--threads: %w", err)
	}
	return nil
}

// otherBackendRefused are the errors of case c setting parameters the
// backend does not read (OtherBackend), each at its value: run's and
// validate's.
func otherBackendRefused(s *suites.Suite, c suites.Case, name string, be bridge.Backend) []*suites.Error {
	var errs []*suites.Error
	for _, o := range oneBackend {
		if err := OtherBackend(o.param, o.value(c), name, be); err != nil {
			if e, ok := s.ErrorAt(c.PosOf(o.param), "case %s: %v", c.Name, err).(*suites.Error); ok {
				errs = append(errs, e)
			}
		}
	}
	return errs
}

// caseThreads is a case's `threads` parameter, 0 when it sets none.
func caseThreads(c suites.Case) int {
	if c.Kind == suites.KindKernel {
		n, _ := c.Kernel.Int(ops.Threads)
		return n
	}
	return c.Model.Threads
}

// setThreads sets be's goroutine count where it has one.
func setThreads(be bridge.Backend, n int) {
	if t, ok := be.(bridge.Threader); ok {
		t.SetThreads(n)
	}
}

type loadedModel struct {
	cfg *model.Config
	src model.Source
	// avail and where are the memory the first case that loaded the model
	// was checked against. Its weights are resident from then on, and the
	// later cases share them: checked against what is left, each would
	// count the weights twice.
	avail int64
	where string
}

func modelCase(ctx context.Context, s *suites.Suite, c suites.Case, be bridge.Backend, models map[modelKey]*loadedModel, limit int64, sc *suiteChecks) (*ModelCase, error) {
	sm, mp := s.Model, c.Model
	w := caseWorkload(s, mp)
	opts := engine.Options{
		BlockSize:   mp.BlockSize,
		TokenBudget: caseTokenBudget(mp),
		MaxSeqs:     mp.MaxSeqs,
		MoE:         bridge.MoEParams{Strategy: bridge.MoEStrategy(mp.MoEStrategy), ChunkSize: mp.MoEChunk},
		Synchronous: mp.Synchronous,
		NoFusion:    !mp.Fusion,
		KVDType:     mp.KVDType,
	}
	if mp.KVBlocks > 0 {
		if err := checkKVBlocks(s, c, sc); err != nil {
			return nil, err
		}
	}
	opts.KVTokens = caseKVTokens(w, mp)
	layers := sm.Layers
	if mp.Layers > 0 {
		layers = mp.Layers
	}
	key := modelKey{layers}
	lm := models[key]
	first := lm == nil
	if first {
		spec, err := model.SuiteSpec(sm, layers)
		if err != nil {
			return nil, modelError(s, err)
		}
		cfg, src, err := model.Open(spec)
		if le := (*model.LayersError)(nil); errors.As(err, &le) && mp.Layers > 0 {
			return nil, s.ErrorAt(c.PosOf(suites.ParamLayers), "case %s: %v", c.Name, err)
		}
		if err != nil {
			return nil, modelError(s, err)
		}
		lm = &loadedModel{cfg: cfg, src: src}
	}
	// Every case is checked against the model it runs, whether it loads it
	// or an earlier case did: its own cache size and kv_dtype may not fit.
	cfg, err := checkCase(s, c, be, lm, opts, limit, sc)
	if err != nil {
		if first {
			lm.src.Close()
		}
		return nil, err
	}
	if first {
		lm.cfg, lm.src = cfg, model.NewCached(lm.src)
		models[key] = lm
		// Before anything is timed: a model that computes NaN is as fast
		// as one that works, and its figures would be garbage.
		if err := engine.CheckFinite(ctx, be, lm.cfg, lm.src, opts); err != nil {
			return nil, s.ErrorAt(sm.Pos, "%v", err)
		}
	}
	return &ModelCase{Backend: be, Config: cfg, Source: lm.src, Engine: opts, Work: w}, nil
}

// checkCase refuses a case its model cannot run: sequences past the model's
// positions, a kv_dtype the backend lacks, or weights and cache past the
// memory available; it returns the config the case runs (fewer layers
// under fit: truncate-layers).
func checkCase(s *suites.Suite, c suites.Case, be bridge.Backend, lm *loadedModel, opts engine.Options, limit int64, sc *suiteChecks) (*model.Config, error) {
	if err := checkMoE(s, c, lm.cfg); err != nil {
		return nil, err
	}
	// Positions first: a case past the model's context would also size
	// its cache past memory, and the positions are what is wrong.
	if err := checkPositions(s, c, lm.cfg, sc); err != nil {
		return nil, err
	}
	avail, where := lm.avail, lm.where
	if where == "" {
		info := be.Info()
		avail, where = info.AvailableBytes, info.Backend+" ("+info.Name+")"
		if limit > 0 && (avail <= 0 || limit < avail) {
			avail, where = limit, "the memory limit"
		}
		lm.avail, lm.where = avail, where
	}
	kvdt, err := kvDType(s, c, be, lm.src.DType())
	if err != nil {
		return nil, err
	}
	cfg := lm.cfg
	run := engine.RunConfig(be, cfg)
	// A sequence brings at most its whole length to one step (a preempted
	// one computes its tokens again), less than the cache's whole blocks
	// where its requests are short: the longest request the run draws, not
	// the longest a range_ratio allows, which none may reach.
	// Where the draws were given up, the longest the range allows stands
	// for it: the step is sized for no less than the run brings.
	mp := c.Model
	w := caseWorkload(s, mp)
	_, prompt, gen, why := sc.longest(w)
	if why != "" {
		prompt, gen = w.maxLens()
		sc.giveUp(stepUnchecked, why, "", c.Name)
	}
	stepOf := func(mp suites.ModelParams, kvTokens, prompt, gen int) int64 {
		seqs := mp.Requests
		if mp.MaxSeqs > 0 {
			seqs = min(seqs, mp.MaxSeqs)
		}
		tokens, rows := engine.LargestStep(min(kvTokens, seqs*(mp.Depth+prompt+gen)), caseTokenBudget(mp), mp.MaxSeqs, seqs)
		return engine.StepBytes(run, be.ActDType(), tokens, rows)
	}
	step := stepOf(mp, opts.KVTokens, prompt, gen)
	if err := engine.CheckFit(run, lm.src.DType(), kvdt, opts.KVTokens, step, avail, where); err != nil {
		var fe *engine.FitError
		isFit := errors.As(err, &fe)
		if s.Model.Fit == "truncate-layers" && isFit && fe.MaxLayers > 0 {
			cfg, _ = cfg.WithLayers(fe.MaxLayers)
			return cfg, nil
		}
		msg := err.Error()
		if isFit {
			// The lengths that alone would fit, checked as this case is,
			// at the longest lengths its range allows (no draws: a bound).
			hint := fitHint(c, mp, smallerKV(be, mp.KVDType, kvdt), func(m suites.ModelParams) bool {
				w := caseWorkload(s, m)
				kv := caseKVTokens(w, m)
				p, g := w.maxLens()
				kvdt, err := engine.KVDType(be, lm.src.DType(), m.KVDType)
				return err == nil && engine.CheckFit(run, lm.src.DType(), kvdt, kv, stepOf(m, kv, p, g), avail, where) == nil
			})
			if hint != "" {
				msg += " (hint: " + hint + ")"
			}
		}
		return nil, s.ErrorAt(s.Model.Pos, "case %s: %s", c.Name, msg)
	}
	return cfg, nil
}

// caseKVTokens is the KV cache a model case's engine gets: kv_blocks of
// block_size where set, else what its workload needs (Workload.KVTokens).
func caseKVTokens(w Workload, mp suites.ModelParams) int {
	if mp.KVBlocks > 0 {
		return mp.KVBlocks * mp.BlockSize
	}
	return w.KVTokens(mp.BlockSize, mp.MaxSeqs)
}

// smallerKV is the kv_dtype a case asked (asked: "auto" or a dtype) as it
// runs on be (dt), and the dtypes be keeps in fewer bytes, largest first:
// the memory hint's choices (fitHint).
func smallerKV(be bridge.Backend, asked string, dt bridge.DType) kvChoice {
	ch := kvChoice{From: dt.String()}
	if asked == "auto" {
		ch.From = "auto: " + ch.From
	}
	have := []bridge.DType{be.ActDType()}
	if k, ok := be.(bridge.KVCacheDTypes); ok {
		have = append(have, k.KVDTypes()...)
	}
	slices.SortStableFunc(have, func(a, b bridge.DType) int { return b.Size() - a.Size() })
	for _, d := range have {
		if d.Size() < dt.Size() && !slices.Contains(ch.Smaller, d.String()) {
			ch.Smaller = append(ch.Smaller, d.String())
		}
	}
	return ch
}

// kvDType is the KV cache dtype case c runs on be with a model of dtype
// model, or the error, at the case's kv_dtype, of one be does not keep:
// run's and suites validate's (Check) words.
func kvDType(s *suites.Suite, c suites.Case, be bridge.Backend, model bridge.DType) (bridge.DType, error) {
	dt, err := engine.KVDType(be, model, c.Model.KVDType)
	if err != nil {
		return 0, s.ErrorAt(c.PosOf(suites.ParamKVDType), "case %s: %v", c.Name, err)
	}
	return dt, nil
}

// weightFormat is the dtype a model case records: a packed model's format
// (a preset's name; a checkpoint's kind and the packed type most of its
// matrices use, e.g. gguf-q4_k), else its weights' float dtype. A packed
// model's float dtype is only that of its scales and its unpacked tensors,
// and would file a q4 run as a bf16 one.
func weightFormat(c *model.Config, src model.Source) string {
	if c.Quant == nil {
		return src.DType().String()
	}
	if slices.Contains(model.QuantFormats, c.Quant.Name) {
		return c.Quant.Name
	}
	if d, ok := tune.PackedDType(c); ok {
		return c.Quant.Name + "-" + string(d)
	}
	// A checkpoint of a packed kind with no packed matrix runs its floats.
	return src.DType().String()
}

// headlines are the metrics a case's progress line shows, the first it
// records: a serving case's requests a second within its slo, else its
// decode speed.
func headlines(p *prepared) []string {
	if p.model != nil && (p.model.Work.Rate > 0 || p.model.Work.SLO != nil) {
		return []string{"goodput_per_s", "request_per_s"}
	}
	return []string{"decode_tok_s"}
}
