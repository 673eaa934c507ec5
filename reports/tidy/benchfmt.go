package tidy

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/perf/benchfmt"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// exact are metrics that count the workload (bytes a step reads, dispatches,
// preemptions) rather than time it: benchstat should take them as exact,
// not as a sample with noise.
var exact = map[string]bool{"bytes_per_step": true, "preemptions": true, "dispatches_per_step": true,
	"witness_bytes_per_step": true, "witness_traffic_efficiency": true, "witness_tok_s": true,
	"witness_footprint_bytes_per_step": true, "witness_footprint_efficiency": true, "witness_lanes_per_load": true,
	"witness_critical_loads": true}

// BenchUnit is a metric's unit in the Go benchmark format: one token per
// metric, so decode and prefill tok/s stay apart. A space (in a metric a
// store took before names were checked) would end the unit.
func BenchUnit(metric string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || unicode.IsSpace(r) {
			return '-'
		}
		return r
	}, metric)
}

// WriteBenchfmt writes runs in the Go benchmark format through
// golang.org/x/perf/benchfmt: unit metadata first (better=higher|lower,
// assume=exact for workload counts), then per case its configuration lines
// (commit, model, dtype, backend, machine...) and one benchmark line per
// repetition, so benchstat reads a run as it reads `go test -bench`.
func WriteBenchfmt(w io.Writer, runs []*Run) error {
	bw := benchfmt.NewWriter(w)
	seen := map[string]bool{}
	for _, r := range runs {
		for _, ss := range r.Samples {
			for _, s := range ss {
				seen[s.Metric] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for m := range seen {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, m := range names {
		u := BenchUnit(m)
		switch metrics.Of(m) {
		case metrics.HigherIsBetter:
			if err := bw.Write(unitMeta(u, "better", "higher")); err != nil {
				return err
			}
		case metrics.LowerIsBetter:
			if err := bw.Write(unitMeta(u, "better", "lower")); err != nil {
				return err
			}
		}
		if exact[m] {
			if err := bw.Write(unitMeta(u, "assume", "exact")); err != nil {
				return err
			}
		}
	}
	for _, r := range runs {
		named := false
		for _, c := range r.Cases {
			byRep := map[int][]results.Sample{}
			var reps []int
			for _, s := range r.Samples[c.ID] {
				if _, ok := byRep[s.Rep]; !ok {
					reps = append(reps, s.Rep)
				}
				byRep[s.Rep] = append(byRep[s.Rep], s)
			}
			slices.Sort(reps)
			res := &benchfmt.Result{Name: benchfmt.Name(BenchName(c)), Iters: 1}
			for _, kv := range benchConfig(r.Run, c) {
				res.SetConfig(kv[0], kv[1])
			}
			// SetConfig records internal keys; these are the file's.
			for i := range res.Config {
				res.Config[i].File = true
			}
			for _, rep := range reps {
				res.Values = res.Values[:0]
				for _, s := range byRep[rep] {
					// As the statistics of show and compare leave it out
					// (LeftOut says which).
					if results.CheckValue(s.Metric, s.Unit, s.Value) != nil {
						continue
					}
					res.Values = append(res.Values, benchfmt.Value{Value: s.Value, Unit: BenchUnit(s.Metric)})
				}
				if len(res.Values) == 0 {
					continue // a line of no value is not one benchfmt reads
				}
				if !named {
					named = true
					if _, err := io.WriteString(w, runLine(r.Run)); err != nil {
						return err
					}
				}
				if err := bw.Write(res); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func unitMeta(unit, key, value string) *benchfmt.UnitMetadata {
	return &benchfmt.UnitMetadata{UnitMetadataKey: benchfmt.UnitMetadataKey{Unit: unit, Key: key}, OrigUnit: unit, Value: value}
}

// runLine names the run whose results follow, on a line benchfmt readers
// pass over: "# run 3: tag pr, commit abc, ...". Its run, tag, build and
// overrides differ from any other run's, and benchstat splits results of
// differing configuration lines into tables of their own, so as those
// lines `benchstat old.txt new.txt` would compare nothing (docs/data.md).
func runLine(r *results.Run) string {
	var parts []string
	for _, kv := range [][2]string{{"tag", r.Tag}, {"commit", r.GitCommit}, {"tree-commit", r.TreeCommit},
		{"version", r.ToolVersion}, {"overrides", results.OverridesText(r.Overrides)}} {
		if v := strings.Join(strings.Fields(kv[1]), " "); v != "" {
			parts = append(parts, kv[0]+" "+v)
		}
	}
	line := "# run " + strconv.FormatInt(r.ID, 10)
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	return line + "\n"
}

// benchConfig is a case's configuration lines, in a fixed order; empty
// values are left out (benchfmt reads "key:" as a deletion). They say what
// was measured and where, which benchstat keeps apart, never which run it
// was (runLine).
func benchConfig(r *results.Run, c results.Case) [][2]string {
	m := r.Machine
	kv := [][2]string{
		// A run that records no OS (llama-bench's, whose file names none)
		// ran on a machine this one need not be: left out, not guessed.
		{"goos", m.OS}, {"goarch", m.Arch},
		{"cpu", m.CPUModel}, {"gpu", m.GPUName}, {"pkg", "mtlbench/" + r.SuiteName},
		{"backend", r.Backend}, {"timing", r.TimingMode},
		{"model", c.Params["model"]}, {"dtype", c.Params["dtype"]}, {"seed", c.Params["seed"]},
	}
	if c.LayersTotal > 0 {
		kv = append(kv, [2]string{"layers", strconv.Itoa(c.LayersRun) + "/" + strconv.Itoa(c.LayersTotal)})
	}
	if r.Emulated {
		kv = append(kv, [2]string{"emulated", "true"})
	}
	out := kv[:0]
	for _, p := range kv {
		p[1] = strings.Join(strings.Fields(p[1]), " ")
		if p[1] != "" {
			out = append(out, p)
		}
	}
	return out
}

// BenchName is "<Group>/k=v/...": the group in CamelCase and every
// parameter of the case's key, each at the value the case ran with (a
// `run --set` value, which the key keeps at the suite's), as benchstat's
// sub-benchmark keys ("Benchmark" is the writer's). Cases of different
// keys get different names, so benchstat pairs only what compare pairs.
// Spaces would end the name, so they become underscores.
func BenchName(c results.Case) string {
	group, rest, _ := strings.Cut(c.Name, "/")
	var params []string
	if parts := strings.Split(c.Key, "/"); len(parts) >= 2 {
		group, params = parts[1], parts[2:]
	} else if rest != "" {
		params = strings.Split(rest, "/")
	}
	var b strings.Builder
	up, sep := true, false
	for _, r := range group {
		if r == '-' || r == '_' || r == '.' {
			up, sep = true, true
			continue
		}
		// "norm-2" and "norm2" stay apart: a separator before a digit is kept.
		if sep && unicode.IsDigit(r) && b.Len() > 0 {
			b.WriteByte('_')
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		sep = false
		b.WriteRune(r)
	}
	for _, p := range params {
		k, v, ok := strings.Cut(p, "=")
		// A key's value escapes "=": one holding it is a list of pairs
		// (a tune run's bucket, "k=512,m=1,n=32"), not one parameter's.
		if ran, has := c.Params[k]; ok && has && ran != "" && !strings.Contains(v, "=") {
			// Spelt as the key spells it: a "/" or space in free text would
			// split the name's parts or merge two cases' names.
			v = suites.KeyText(k, ran)
		}
		if ok {
			b.WriteString("/" + k + "=" + v)
		} else {
			b.WriteString("/" + p)
		}
	}
	name := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, b.String())
	// benchfmt reads a trailing "-N" as GOMAXPROCS, taking it from the
	// last parameter's value ("variant=v-2").
	digits := strings.TrimRight(name, "0123456789")
	if len(digits) < len(name) && strings.HasSuffix(digits, "-") {
		name = digits[:len(digits)-1] + "%2D" + name[len(digits):]
	}
	return name
}
