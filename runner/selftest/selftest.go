// Package selftest checks every op of a backend against the pure-Go
// reference over the shapes kernels get wrong. It is the first thing to run
// on a new machine or backend: `mtlbench selftest --backend B`.
package selftest

import (
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/suites"
)

//go:embed selftest.yaml
var suiteYAML []byte

// Result is one check.
type Result struct {
	Case    string
	Shape   string
	MaxErr  float64
	Err     error
	Skipped bool
	Elapsed time.Duration
}

// Passed reports whether the check passed (or was skipped as unsupported).
func (r Result) Passed() bool { return r.Err == nil || r.Skipped }

// Cases are the checks, parsed from the embedded suite.
func Cases() ([]suites.Case, error) {
	s, err := suites.Parse("selftest.yaml", suiteYAML)
	if err != nil {
		return nil, err
	}
	return s.Cases, nil
}

// Run checks every case on be, calling progress after each when non-nil.
func Run(be bridge.Backend, progress func(done, total int, r Result)) ([]Result, error) {
	cases, err := Cases()
	if err != nil {
		return nil, err
	}
	var out []Result
	for i, c := range cases {
		r := Result{Case: c.Name}
		start := time.Now()
		b, err := kbench.Prepare(be, c.Kernel)
		if err != nil {
			r.Err = err
			r.Skipped = errors.Is(err, errors.ErrUnsupported)
		} else {
			r.Shape = b.Describe()
			r.MaxErr, r.Err = b.Check()
			b.Close()
		}
		r.Elapsed = time.Since(start)
		out = append(out, r)
		if progress != nil {
			progress(i+1, len(cases), r)
		}
	}
	return out, nil
}

// Table renders results: kernel, shape, max error and verdict.
func Table(backend string, rs []Result, failuresOnly bool) (*table.Table, int) {
	t := &table.Table{Title: "selftest on " + backend, Header: []string{"case", "shape", "max error", "verdict"}}
	failed := 0
	for _, r := range rs {
		verdict := "ok"
		switch {
		case r.Skipped:
			verdict = "skipped: " + r.Err.Error()
		case r.Err != nil:
			verdict = "FAIL: " + r.Err.Error()
			failed++
		}
		if failuresOnly && r.Err == nil {
			continue
		}
		t.Rows = append(t.Rows, []string{r.Case, r.Shape, fmt.Sprintf("%.2g", r.MaxErr), verdict})
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d checks, %d failed; tolerances relative to max(1, max|reference|): f32 1e-4, f16 5e-3, bf16 3e-2", len(rs), failed))
	return t, failed
}
