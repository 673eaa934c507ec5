package results

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/metrics"
)

// What a sample's value can be. Every path that stores samples (a run's
// repetitions, import, peer imports) checks them with CheckSample, so the
// store never holds a value its metric cannot take: reports draw, compare
// and gate whatever the store holds.

// CheckSample says why s cannot be stored: no metric, a negative repetition,
// a value that is not finite, or one below what its metric can be.
func CheckSample(s Sample) error {
	if s.Metric == "" || s.Rep < 0 {
		return fmt.Errorf("needs a metric and rep >= 0 (got %q, %d)", s.Metric, s.Rep)
	}
	if strings.IndexFunc(s.Metric, func(r rune) bool { return r != '_' && !isASCIIAlnum(r) }) >= 0 {
		// It names a column's value and a benchfmt unit, which a space or
		// newline would split; every metric mtlbench records is one.
		return fmt.Errorf("metric %q rep %d: a metric's name is letters, digits and _", s.Metric, s.Rep)
	}
	if err := CheckValue(s.Metric, s.Unit, s.Value); err != nil {
		return fmt.Errorf("%s rep %d: %w", s.Metric, s.Rep, err)
	}
	if err := metrics.CheckUnit(s.Metric, s.Unit); err != nil {
		return fmt.Errorf("%s rep %d: %w", s.Metric, s.Rep, err)
	}
	return nil
}

// CheckValue says why v is no value of metric (in unit): not finite,
// below what the metric can be, or implausibly large (metrics.CheckValue).
// Statistics leave such values out, as a store written before CheckSample
// may hold them.
func CheckValue(metric, unit string, v float64) error { return metrics.CheckValue(metric, unit, v) }

// Check says what of rec cannot be stored, naming its case: a sample
// (CheckSample), or the run's shape (checkShape: a status of no run, a case
// key repeated, a repetition recorded twice...), so that an import can point
// at it before anything is stored.
func (rec *RunRecord) Check() error {
	if err := CheckTag(rec.Run.Tag); err != nil {
		return err
	}
	if err := rec.checkShape(); err != nil {
		return err
	}
	if err := rec.checkText(); err != nil {
		return err
	}
	for i := range rec.Cases {
		c := &rec.Cases[i]
		for j, s := range c.Samples {
			if err := CheckSample(s); err != nil {
				return fmt.Errorf("case %d %q sample %d: %w", i, c.Case.Name, j, err)
			}
		}
		// The op timings and operand traffic too: found only as the
		// store took them, they were named by the new store's case id.
		for j, t := range c.Timings {
			if err := timingFault(t); err != nil {
				return fmt.Errorf("case %d %q timing %d: %w", i, c.Case.Name, j, err)
			}
		}
		type operand struct {
			rep             int
			kernel, operand string
		}
		seen := map[operand]bool{}
		for j, o := range c.Operands {
			if err := operandFault(o); err != nil {
				return fmt.Errorf("case %d %q operand traffic %d %w", i, c.Case.Name, j, err)
			}
			k := operand{o.Rep, o.Kernel, o.Operand}
			if seen[k] {
				return fmt.Errorf("case %d %q operand traffic %d: %s's %s rep %d recorded twice", i, c.Case.Name, j, o.Kernel, o.Operand, o.Rep)
			}
			seen[k] = true
		}
	}
	return nil
}

// CheckLine says why s cannot name a run's tag, a case or its key: text
// that is not UTF-8, or that holds a control character (a newline, a tab),
// which would break the tables, csv rows and benchfmt lines that print it.
// Suites hold names to less (suites.Parse); this is the rule for what
// comes from elsewhere, as import does.
func CheckLine(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not UTF-8 text", what, s)
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return fmt.Errorf("%s %q holds the control character %U at byte %d", what, s, []rune(s[i:])[0], i)
	}
	return nil
}

func isASCIIAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// checkText says which of rec's fields that are printed on one line (a
// table's cell, a csv column or value, a benchfmt configuration line)
// holds a control character (CheckLine), naming it as the export does, or
// which of the machine's counts is negative.
func (rec *RunRecord) checkText() error {
	r, m := &rec.Run, &rec.Run.Machine
	for _, f := range []struct{ field, v string }{
		{"run.suite_name", r.SuiteName}, {"run.backend", r.Backend}, {"run.tool_version", r.ToolVersion},
		{"run.git_commit", r.GitCommit}, {"run.tree_commit", r.TreeCommit}, {"run.threads", r.Threads},
		{"run.backend_notes", r.BackendNotes}, {"run.machine.hostname", m.Hostname}, {"run.machine.os", m.OS},
		{"run.machine.arch", m.Arch}, {"run.machine.cpu_model", m.CPUModel}, {"run.machine.gpu_name", m.GPUName},
		{"run.machine.driver", m.Driver}, {"run.machine.thermal_state", m.ThermalState}, {"run.machine.power_state", m.PowerState},
	} {
		if err := CheckLine(f.field, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		field string
		v     int64
	}{{"run.machine.cpu_cores", int64(m.CPUCores)}, {"run.machine.memory_bytes", m.MemoryBytes}, {"run.machine.gpu_memory_bytes", m.GPUMemoryBytes}} {
		if f.v < 0 {
			return fmt.Errorf("%s %d is negative: a count cannot be", f.field, f.v)
		}
	}
	// What the run's kernel figures are held against: a negative one was
	// stored as none, and one past any machine's marks every figure.
	for _, f := range []struct {
		field, unit string
		v           float64
	}{{"read_bandwidth_gb_s", "GB/s", r.ReadBandwidthGBs}, {"matmul_peak_gflop_s", "GFLOP/s", r.MatmulPeakGFLOPs}} {
		if err := CheckValue(f.field, f.unit, f.v); err != nil {
			return fmt.Errorf("run.%s: %w", f.field, err)
		}
	}
	if err := checkPairs("run.overrides", r.Overrides); err != nil {
		return err
	}
	for i := range rec.Cases {
		c := &rec.Cases[i].Case
		if err := checkPairs("params", c.Params); err != nil {
			return fmt.Errorf("case %d %q: %w", i, c.Name, err)
		}
	}
	return nil
}

// checkPairs says which name or value of m (what: the field) is empty
// (a name) or holds a control character: a parameter's name is a column.
func checkPairs(what string, m map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k == "" {
			return fmt.Errorf("%s: a name that is empty", what)
		}
		if err := cmp.Or(CheckLine(what+" name", k), CheckLine(what+"."+k, m[k])); err != nil {
			return err
		}
	}
	return nil
}
