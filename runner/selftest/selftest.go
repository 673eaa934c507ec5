// Package selftest checks every op of a backend against the pure-Go
// reference over the shapes kernels get wrong. It is the first thing to run
// on a new machine or backend: `mtlbench selftest --backend B`. The checks
// are defined here once, for every backend: selftest.yaml holds the edge
// cases, models.yaml the shipped models' shapes.
package selftest

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/suites"
)

var (
	//go:embed selftest.yaml
	suiteYAML []byte
	//go:embed models.yaml
	modelsYAML []byte
)

// Result is one check.
type Result struct {
	Case    string
	Shape   string
	MaxErr  float64
	Err     error
	Skipped bool
	Elapsed time.Duration
	// UsPerCall is the op's time per call when the check was timed
	// (Options.Timed), else 0.
	UsPerCall float64
	// Efficiency is the op's ideal bytes over the bytes the device's cost
	// witness counted, FootprintEfficiency over the distinct bytes of each
	// dispatch (0: no witness, or no footprint counted).
	Efficiency, FootprintEfficiency float64
}

// TrafficLimit is how many times its ideal bytes a decode-path kernel may
// move (as the cost witness counts it) before the selftest fails it:
// docs/metal-kernels.md. Shapes under MinTrafficBytes of ideal traffic are
// not held to it, as their arguments and metadata outweigh their data.
const (
	TrafficLimit    = 1.25
	MinTrafficBytes = 1 << 20
)

// FootprintLimit is how many times its ideal bytes a decode-path kernel's
// dispatches may touch, each distinct byte counted once: bytes beyond the
// ideal are ones the op does not need (padding, a whole buffer where a
// slice would do), which re-reads from cache cannot excuse. Split-K decode
// attention's partial results are such bytes by design: 6% of a Qwen3
// layer's at 512 tokens of context.
const FootprintLimit = 1.10

// rereadNote names the operand whose re-reads (or re-writes) add the most
// bytes, for a traffic failure: "; most re-read: matvec_bf16's x, 320.0
// reads of its 65536 distinct bytes".
func rereadNote(ops []mtl.KernelOperand) string {
	if len(ops) == 0 || ops[0].Excess() <= 0 {
		return ""
	}
	o := ops[0]
	if o.Written-o.FootprintWritten > o.Read-o.FootprintRead {
		return fmt.Sprintf("; most re-written: %s's %s, %.1f writes of its %d distinct bytes", o.Kernel, o.Name, o.Rewrites(), o.FootprintWritten)
	}
	return fmt.Sprintf("; most re-read: %s's %s, %.1f reads of its %d distinct bytes", o.Kernel, o.Name, o.Rereads(), o.FootprintRead)
}

// decodePath reports whether a kernel case is one a decode step runs many
// of: GEMVs (a few rows), decode attention, MoE of a few tokens grouped by
// expert (the loop and chunked strategies read an expert once per pair or
// chunk by design: what they cost is what the strategy sweeps measure).
func decodePath(a ops.Args) bool {
	switch a.Op {
	case ops.MatMul:
		m, _ := a.Int(ops.M)
		return m <= 8
	case ops.PagedAttentionDecode:
		return true
	case ops.MoE:
		t, _ := a.Int(ops.Tokens)
		return t <= 8 && (a.MoEStrategy == "" || a.MoEStrategy == ops.MoEGrouped)
	}
	return false
}

// Passed reports whether the check passed (or was skipped as unsupported).
func (r Result) Passed() bool { return r.Err == nil || r.Skipped }

// Cases are the edge-case checks every backend must pass.
func Cases() ([]suites.Case, error) { return parse("selftest.yaml", suiteYAML) }

// ModelCases are the checks at the shipped models' shapes, which take the
// GPU kernels' fast paths; on the CPU the largest take half a minute.
func ModelCases() ([]suites.Case, error) { return parse("models.yaml", modelsYAML) }

func parse(name string, data []byte) ([]suites.Case, error) {
	s, err := suites.Parse(name, data)
	if err != nil {
		return nil, err
	}
	return s.Cases, nil
}

// Options select and extend the checks.
type Options struct {
	// ModelShapes adds ModelCases to Cases.
	ModelShapes bool
	// Filter keeps the checks whose "name shape" contains one of its
	// '|'-separated substrings; empty keeps every check.
	Filter string
	// Timed times each check that passed (which on a GPU exercises graph
	// capture and replay) and then checks it again.
	Timed bool
}

// Run checks every edge case on be, calling progress after each when
// non-nil.
func Run(be bridge.Backend, progress func(done, total int, r Result)) ([]Result, error) {
	return RunWith(be, Options{}, progress)
}

// RunWith checks the cases o selects on be.
func RunWith(be bridge.Backend, o Options, progress func(done, total int, r Result)) ([]Result, error) {
	cases, err := Cases()
	if err != nil {
		return nil, err
	}
	if o.ModelShapes {
		more, err := ModelCases()
		if err != nil {
			return nil, err
		}
		cases = append(cases, more...)
	}
	return RunCases(be, cases, o, progress)
}

// RunCases checks cases on be (o.ModelShapes is ignored).
func RunCases(be bridge.Backend, cases []suites.Case, o Options, progress func(done, total int, r Result)) ([]Result, error) {
	if o.Filter != "" {
		var kept []suites.Case
		for _, c := range cases {
			if matches(c, o.Filter) {
				kept = append(kept, c)
			}
		}
		cases = kept
	}
	var out []Result
	for i, c := range cases {
		r := check(be, c, o)
		out = append(out, r)
		if progress != nil {
			progress(i+1, len(cases), r)
		}
	}
	return out, nil
}

// matches reports whether "name op k=v ..." (params sorted by name, a
// trailing space after each) contains one of filter's '|'-separated
// substrings, or whether one of them, a single k=v, is a value the case keys
// as (suites.Case.KeysAs): a default, tokens=1, keeps the checks that leave
// it out as those that write it (docs/suites.md, "A default written is a
// default left out").
func matches(c suites.Case, filter string) bool {
	rec := c.Recorded()
	names := make([]string, 0, len(rec))
	for k := range rec {
		names = append(names, k)
	}
	sort.Strings(names)
	s := c.Name + " " + string(c.Op) + " "
	for _, k := range names {
		s += k + "=" + rec[k] + " "
	}
	for _, f := range strings.Split(filter, "|") {
		if f != "" && strings.Contains(s, f) {
			return true
		}
		name, value, ok := strings.Cut(strings.TrimSpace(f), "=")
		if ok && name != "" && value != "" && !strings.ContainsAny(name+value, " =") && c.KeysAs(name, value) {
			return true
		}
	}
	return false
}

// Failed counts the checks that failed (skipped ones pass).
func Failed(rs []Result) int {
	n := 0
	for _, r := range rs {
		if !r.Passed() {
			n++
		}
	}
	return n
}

// Err joins the failures of rs, nil when every check passed.
func Err(rs []Result) error {
	var errs []error
	for _, r := range rs {
		if !r.Passed() {
			errs = append(errs, fmt.Errorf("%s %s: %w", r.Case, r.Shape, r.Err))
		}
	}
	return errors.Join(errs...)
}

func check(be bridge.Backend, c suites.Case, o Options) (r Result) {
	r.Case = c.Name
	start := time.Now()
	defer func() { r.Elapsed = time.Since(start) }()
	b, err := kbench.Prepare(be, c.Kernel)
	if err != nil {
		r.Err = err
		r.Skipped = errors.Is(err, errors.ErrUnsupported)
		return r
	}
	defer b.Close()
	r.Shape = b.Describe()
	if r.MaxErr, r.Err = b.Check(); r.Err != nil {
		return r
	}
	w, ok, err := b.Witness()
	if err != nil {
		r.Err = err
		return r
	}
	if ok {
		r.Efficiency = w.Efficiency
		if w.Footprint() > 0 {
			r.FootprintEfficiency = w.FootprintEfficiency(w.Ideal)
		}
		// A kernel that computed the right values touched every byte the
		// op needs: fewer distinct bytes than the ideal mean the op's cost
		// model counts bytes no kernel must move, and every roofline of it
		// is too high.
		if fp := w.Footprint(); fp > 0 && fp < w.Ideal {
			r.Err = fmt.Errorf("%s: touches %d distinct bytes, fewer than the op's ideal %d: its cost model (kernels/ops) counts bytes the op need not move",
				r.Shape, fp, w.Ideal)
			return r
		}
		if decodePath(c.Kernel) && w.Ideal >= MinTrafficBytes && float64(w.Bytes()) > TrafficLimit*float64(w.Ideal) {
			r.Err = fmt.Errorf("%s: moves %d bytes, %.2f× the op's ideal %d (a decode-path kernel may move %.2f×)%s",
				r.Shape, w.Bytes(), float64(w.Bytes())/float64(w.Ideal), w.Ideal, TrafficLimit, rereadNote(w.Operands))
			return r
		}
		if fp := w.Footprint(); decodePath(c.Kernel) && w.Ideal >= MinTrafficBytes && float64(fp) > FootprintLimit*float64(w.Ideal) {
			r.Err = fmt.Errorf("%s: touches %d distinct bytes, %.2f× the op's ideal %d (a decode-path kernel may touch %.2f×)",
				r.Shape, fp, float64(fp)/float64(w.Ideal), w.Ideal, FootprintLimit)
			return r
		}
	}
	if !o.Timed {
		return r
	}
	s, err := b.Run()
	if err != nil {
		r.Err = err
		return r
	}
	for _, x := range s {
		if x.Metric == "us_per_call" {
			r.UsPerCall = x.Value
		}
	}
	e2, err := b.Check()
	r.MaxErr = max(r.MaxErr, e2)
	if err != nil {
		r.Err = fmt.Errorf("after timing: %w", err)
	}
	return r
}
