package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/selftest"
)

func selftestCommand() *cli.Command {
	return &cli.Command{
		Name:  "selftest",
		Usage: "check every kernel of a backend against the reference",
		Description: "Runs each op of the backend contract on seeded random inputs and edge cases\n" +
			"(contexts that end mid-block, one token, GQA ratios 1/4/8, head sizes 16-256,\n" +
			"experts no token routes to) and compares with the pure-Go reference. Prints\n" +
			"kernel, shape, max error and verdict; exits 1 if any check fails. Each failure,\n" +
			"and each check that took a second or more, is printed on stderr as it ends. A check the\n" +
			"backend does not support is skipped, counted apart from the passes; a run whose\n" +
			"every check was skipped checked nothing and exits 2. Run it first on a new\n" +
			"machine: mtlbench selftest --backend metal",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "backend to check: " + strings.Join(backends.Names, ", ")},
			&cli.IntFlag{Name: "threads", Usage: threadsUsage},
			&cli.BoolFlag{Name: "failures", Usage: "list only the failing checks (or say there were none)"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: formatList()},
			&cli.BoolFlag{Name: "model-shapes", Usage: "add the checks at the shipped models' shapes (GPU fast paths; slow on the CPU)"},
			&cli.StringFlag{Name: "filter", Usage: "run only the checks whose \"name op k=v ...\" contains one of these '|'-separated substrings; a part that is one k=v also matches the checks keyed as it, those that leave k out where v is its default (dtype=bf16)"},
			&cli.BoolFlag{Name: "timed", Usage: "time each check that passed, then check it again"},
		},
		Action: func(c *cli.Context) error {
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			be, info, err := openBackendFlag(c)
			if err != nil {
				return err
			}
			defer be.Close()
			fmt.Fprintf(c.App.ErrWriter, "selftest: %s on %s\n", info.Backend, info.Name)
			o := selftest.Options{ModelShapes: c.Bool("model-shapes"), Filter: c.String("filter"), Timed: c.Bool("timed")}
			rs, err := selftest.RunWith(be, o, func(done, total int, r selftest.Result) {
				selftestProgress(c.App.ErrWriter, done, total, r)
			})
			if err != nil {
				return err
			}
			if len(rs) == 0 && o.Filter != "" {
				// A typo would otherwise pass, having checked nothing.
				return fmt.Errorf("--filter %q matches no check (%smtlbench selftest --backend %s lists them)", o.Filter, filterHint(o.Filter), info.Backend)
			}
			t, n := selftestTable(info.Backend, rs, c.Bool("failures"), o.Timed)
			if err := renderSelftest(c.App.Writer, f, t, n, c.Bool("failures")); err != nil {
				return err
			}
			if n.failed > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %s failed on %s%s%s", n.failed, plural.Of(len(rs), "check"), info.Backend, n.skippedNote(), fastMathAdvice(info))}
			}
			if n.passed == 0 {
				// Every check was skipped: nothing was checked, which is no
				// more a pass than a filter that matches nothing.
				if o.Filter != "" {
					all := "all "
					if len(rs) == 1 {
						all = ""
					}
					return fmt.Errorf("--filter %q matches %s, %sskipped on %s (the verdicts say why): nothing was checked", o.Filter, plural.Of(len(rs), "check"), all, info.Backend)
				}
				return fmt.Errorf("all %d checks were skipped on %s (the verdicts say why): nothing was checked", len(rs), info.Backend)
			}
			if n.skipped > 0 {
				fmt.Fprintf(c.App.ErrWriter, "%d of %s passed on %s%s\n", n.passed, plural.Of(len(rs), "check"), info.Backend, n.skippedNote())
				return nil
			}
			if len(rs) == 1 {
				fmt.Fprintf(c.App.ErrWriter, "the 1 check passed on %s\n", info.Backend)
				return nil
			}
			fmt.Fprintf(c.App.ErrWriter, "all %d checks passed on %s\n", len(rs), info.Backend)
			return nil
		},
	}
}

// slowCheck is how long a check may take before the selftest says, as it
// ends, that it passed: a check at a model's shape takes seconds to
// minutes (--model-shapes, metal-emu), and a run of many says nothing
// between failures otherwise.
const slowCheck = time.Second

// selftestProgress writes on w a check that failed, and one that passed or
// was skipped after slowCheck or more, as it ends.
func selftestProgress(w io.Writer, done, total int, r selftest.Result) {
	switch {
	case !r.Passed():
		fmt.Fprintf(w, "[%d/%d] %s %s: FAIL: %v\n", done, total, r.Case, r.Shape, r.Err)
	case r.Elapsed < slowCheck:
	case r.Skipped:
		fmt.Fprintf(w, "[%d/%d] %s: skipped in %.1fs\n", done, total, r.Case, r.Elapsed.Seconds())
	default:
		fmt.Fprintf(w, "[%d/%d] %s %s: ok in %.1fs\n", done, total, r.Case, r.Shape, r.Elapsed.Seconds())
	}
}

// fastMathAdvice is, for failures of Metal kernels compiled with fast math,
// how to tell their error from fast math's; "" otherwise.
func fastMathAdvice(info bridge.DeviceInfo) string {
	if !strings.HasPrefix(info.Backend, "metal") || strings.Contains(info.Notes, "fast math off") {
		return ""
	}
	return "; run again with MTLBENCH_METAL_FAST_MATH=0: a failure that goes away is fast math's, not the kernel's (docs/metal-kernels.md)"
}

// selftestCounts counts a selftest's verdicts. A skipped check (the
// backend does not support it) neither passed nor failed.
type selftestCounts struct{ passed, failed, skipped int }

// skippedNote is ", N skipped" when checks were skipped, else "".
func (n selftestCounts) skippedNote() string {
	if n.skipped == 0 {
		return ""
	}
	return fmt.Sprintf(", %d skipped", n.skipped)
}

// selftestTable renders results: kernel, shape, max error (and time per
// call when timed, the cost witness's efficiencies where it counted) and
// verdict. failuresOnly keeps the failed checks, not the skipped ones.
func selftestTable(backend string, rs []selftest.Result, failuresOnly, timed bool) (*table.Table, selftestCounts) {
	t := &table.Table{Title: "selftest on " + backend, Header: []string{"case", "shape", "max error"}}
	if timed {
		t.Header = append(t.Header, "us/call")
	}
	witness := slices.ContainsFunc(rs, func(r selftest.Result) bool { return r.Efficiency > 0 })
	if witness {
		t.Header = append(t.Header, "traffic eff %", "footprint eff %")
	}
	t.Header = append(t.Header, "verdict")
	var n selftestCounts
	for _, r := range rs {
		verdict := "ok"
		maxErr := fmt.Sprintf("%.2g", r.MaxErr)
		switch {
		case r.Skipped:
			verdict = "skipped: " + r.Err.Error()
			// Nothing was computed, so there is no error to show.
			maxErr = ""
			n.skipped++
		case r.Err != nil:
			verdict = "FAIL: " + r.Err.Error()
			n.failed++
		default:
			n.passed++
		}
		if failuresOnly && (r.Err == nil || r.Skipped) {
			continue
		}
		row := []string{r.Case, r.Shape, maxErr}
		if timed {
			us := "-"
			if r.UsPerCall > 0 {
				us = fmt.Sprintf("%.1f", r.UsPerCall)
			}
			row = append(row, us)
		}
		if witness {
			row = append(row, effCell(r.Efficiency), effCell(r.FootprintEfficiency))
		}
		t.Rows = append(t.Rows, append(row, verdict))
	}
	t.Notes = append(t.Notes, table.Notef("%s: %d passed, %d failed, %d skipped; tolerances relative to max(1, max|reference|): f32 1e-4, f16 5e-3, bf16 3e-2",
		plural.Of(len(rs), "check"), n.passed, n.failed, n.skipped))
	if witness {
		t.Notes = append(t.Notes, table.Notef("traffic eff: the op's ideal bytes over the bytes the cost witness counted its kernels moving; footprint eff: over the distinct bytes of each dispatch; "+
			"a decode-path kernel of %d MiB or more fails under %.0f%% traffic or %.0f%% footprint (docs/metal-kernels.md)",
			selftest.MinTrafficBytes>>20, 100/selftest.TrafficLimit, 100/selftest.FootprintLimit))
	}
	return t, n
}

// renderSelftest writes t in format f. Under --failures a run with none
// says so in the text forms, where a table of only a header would read as
// cut short; csv and json keep their empty lists, which a program reads.
func renderSelftest(w io.Writer, f table.Format, t *table.Table, n selftestCounts, failuresOnly bool) error {
	if !failuresOnly || n.failed > 0 || table.IsData(f) {
		return t.Render(w, f)
	}
	total := n.passed + n.failed + n.skipped
	_, err := fmt.Fprintf(w, "%s: no failures (%s: %d passed, %d skipped)\n", t.Title, plural.Of(total, "check"), n.passed, n.skipped)
	return err
}

// filterHint is `did you mean "rms_norm"?; ` for a --filter part that is a
// near miss of a checked op's name ("rmsnorm"), else "".
func filterHint(filter string) string {
	cases, err := selftest.Cases()
	if err != nil {
		return ""
	}
	more, _ := selftest.ModelCases()
	var ops []string
	for _, c := range append(cases, more...) {
		if op := string(c.Op); !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	for _, f := range strings.Split(filter, "|") {
		if s := suggest.DidYouMean(f, ops); s != "" {
			return s + "; "
		}
	}
	return ""
}

// effCell prints an efficiency as a whole percentage, "-" for none.
func effCell(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", 100*x)
}

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "devices",
		Usage: "list the compute backends and devices on this machine",
		Description: "With --pipelines, also each tunable kernel's limits on each device that reports them (Metal:\n" +
			"a pipeline's maxTotalThreadsPerThreadgroup, which register use may put below the device's 1024).\n" +
			"The two tables are then one document: titled in table and md, a \"# title\" line before each in\n" +
			"csv, a json array of {title, rows} objects.",
		Flags: []cli.Flag{&cli.StringFlag{Name: "format", Value: "table", Usage: formatList()},
			&cli.BoolFlag{Name: "pipelines", Usage: "also list each tunable kernel's pipeline limits"},
			&cli.StringFlag{Name: "backend", Usage: "list only this backend (" + strings.Join(backends.Names[1:], ", ") + "), opening no other: metal-emu's first open compiles its kernels for minutes"}},
		Action: func(c *cli.Context) error {
			names := backends.Names[1:]
			if b := c.String("backend"); b != "" {
				if err := enumFlag("--backend", b, names...); err != nil {
					return err
				}
				names = []string{b}
			}
			bo, err := backendOptions(0)
			if err != nil {
				return err
			}
			// csv and json take the sizes in bytes, not the table's "23.5 GiB".
			t := &table.Table{Header: []string{"backend", "device", "cores", "memory", "available", "status"},
				Data: &table.Data{Columns: []string{"backend", "device", "cores", "memory_bytes", "available_bytes", "status"}}}
			pt := &table.Table{Title: "pipelines", Header: []string{"backend", "op", "kernel", "max threads/threadgroup", "simd width", "static threadgroup memory"}}
			for _, name := range names {
				be, err := backends.Open(name, bo)
				if err != nil {
					t.Rows = append(t.Rows, []string{name, "-", "-", "-", "-", backendStatus(name, err)})
					t.Data.Add(map[string]any{"backend": name, "status": backendStatus(name, err)})
					continue
				}
				row := deviceRow(name, be.Info())
				t.Rows = append(t.Rows, row)
				t.Data.Add(deviceData(row, be.Info()))
				if pl, ok := be.(bridge.PipelineLimits); ok && c.Bool("pipelines") {
					for _, l := range pl.PipelineLimits() {
						if l.Err != nil {
							pt.Rows = append(pt.Rows, []string{name, l.Op, l.Kernel, "-", "-", l.Err.Error()})
							continue
						}
						pt.Rows = append(pt.Rows, []string{name, l.Op, l.Kernel, fmt.Sprint(l.MaxThreads), fmt.Sprint(l.SIMDWidth), fmt.Sprintf("%d B", l.StaticThreadgroupMemory)})
					}
				}
				be.Close()
			}
			if len(pt.Rows) > 0 {
				// One document of two titled tables: csv and json of two
				// tables written one after the other would not parse.
				f, err := parseTableFormat(c.String("format"))
				if err != nil {
					return err
				}
				t.Title = "devices"
				return table.RenderAll(c.App.Writer, f, []*table.Table{t, pt})
			}
			return render(c, t)
		},
	}
}

// deviceRow is a backend's row of the devices table. A device that does
// not report a core count (a Mac whose IORegistry lacks it; the
// emulator is no GPU) shows "-", not 0.
func deviceRow(name string, in bridge.DeviceInfo) []string {
	status := "ok"
	if in.Emulated {
		status = "ok (emulated: timings are not comparable with real ones)"
	}
	for _, n := range []string{in.Notes, in.Startup} {
		if n != "" {
			status += "; " + n
		}
	}
	cores := "-"
	if in.Cores > 0 {
		cores = fmt.Sprint(in.Cores)
	}
	return []string{name, in.Name, cores, gib(in.MemoryBytes), gib(in.AvailableBytes), status}
}

// deviceData is a device row's data form: counts and sizes as numbers,
// null where the device reports none.
func deviceData(row []string, in bridge.DeviceInfo) map[string]any {
	d := map[string]any{"backend": row[0], "device": in.Name, "status": row[5]}
	for k, v := range map[string]int64{"cores": int64(in.Cores), "memory_bytes": in.MemoryBytes, "available_bytes": in.AvailableBytes} {
		if v > 0 {
			d[k] = v
		}
	}
	return d
}

func gib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
