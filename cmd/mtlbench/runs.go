package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/reports/tidy"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list recorded runs, newest first",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "tag", Usage: "only runs with this tag, or any of a comma-separated list (as compare takes them)"},
			&cli.StringFlag{Name: "suite", Usage: "only runs of this suite"},
			&cli.StringFlag{Name: "kind", Usage: "only runs of this kind: suite (run, bench), tune or peer"},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most this many runs (0: all)"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: formatList()},
		},
		Action: func(c *cli.Context) error {
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			if err := checkRunCount(c, "limit"); err != nil {
				return err
			}
			// A flag's typo is said before the store is looked for.
			if k := c.String("kind"); k != "" {
				if err := enumFlag("--kind", k, results.KindSuite, results.KindTune, results.KindPeer); err != nil {
					return err
				}
			}
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			filter := results.RunFilter{SuiteName: c.String("suite"), Kind: c.String("kind"), Limit: c.Int("limit")}
			if t := c.String("tag"); t == "" && c.IsSet("tag") {
				// --tag "" is no tag, as a run records it: the untagged
				// runs, not every run as if --tag were left out.
				filter.Tags = []string{""}
			} else if t != "" {
				if strings.Trim(t, ", \t") == "" {
					return fmt.Errorf("--tag %q names no tag", t)
				}
				tags, err := listarg.Split("--tag", t)
				if err != nil {
					return err
				}
				filter.Tags = tags
			}
			// One run past the limit says whether the list is cut.
			limit := filter.Limit
			if limit > 0 {
				filter.Limit++
			}
			runs, err := db.Runs(filter)
			if err != nil {
				return err
			}
			cut := limit > 0 && len(runs) > limit
			if cut {
				runs = runs[:limit]
			}
			if err := runsTable(runs).Render(c.App.Writer, f); err != nil {
				return err
			}
			// On stderr, so that neither a cut list nor an empty one reads
			// as all the store holds; stdout keeps the table alone.
			switch {
			case cut:
				noun := "runs"
				if limit == 1 {
					noun = "run"
				}
				fmt.Fprintf(c.App.ErrWriter, "listed the newest %d %s; more match (--limit 0 lists all)\n", limit, noun)
			case len(runs) == 0 && (filter.SuiteName != "" || filter.Kind != "" || len(filter.Tags) > 0):
				hint, err := runsFilterHint(db, filter)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "no run in %s matches the filters%s\n", db.Path(), hint)
			case len(runs) == 0:
				fmt.Fprintf(c.App.ErrWriter, "no runs in %s\n", db.Path())
			}
			return nil
		},
	}
}

// runsFilterHint names the suite and tags the store holds that a --suite or
// --tag matching no run is close to (" (--suite \"benc\": did you mean
// \"bench\"?)"), or "": a typo read as a store without such runs.
func runsFilterHint(db *results.DB, f results.RunFilter) (string, error) {
	all, err := db.Runs(results.RunFilter{})
	if err != nil {
		return "", err
	}
	var suiteNames, tags []string
	for _, r := range all {
		suiteNames = append(suiteNames, r.SuiteName)
		if r.Tag != "" {
			tags = append(tags, r.Tag)
		}
	}
	var hints []string
	if f.SuiteName != "" && !slices.Contains(suiteNames, f.SuiteName) {
		if h := suggest.DidYouMean(f.SuiteName, suiteNames); h != "" {
			hints = append(hints, fmt.Sprintf("--suite %q: %s", f.SuiteName, h))
		}
	}
	for _, t := range f.Tags {
		if !slices.Contains(tags, t) {
			if h := suggest.DidYouMean(t, tags); h != "" {
				hints = append(hints, fmt.Sprintf("--tag %q: %s", t, h))
			}
		}
	}
	if len(hints) == 0 {
		return "", nil
	}
	return " (" + strings.Join(hints, "; ") + ")", nil
}

// runsTable lists runs: display cells, and as data every provenance field.
func runsTable(runs []results.Run) *table.Table {
	t := &table.Table{Header: []string{"run", "suite", "kind", "tag", "backend", "timing", "status", "started", "commit", "machine", "overrides"},
		Data: &table.Data{Columns: []string{"run", "suite", "suite_path", "suite_hash", "tag", "kind", "backend", "timing",
			"status", "emulated", "started", "ended", "commit", "tree_commit", "version", "overrides", "threads", "backend_notes", "notes",
			"read_bandwidth_gb_s", "matmul_peak_gflop_s", "hostname", "os", "arch", "cpu", "cpu_cores", "memory_bytes", "gpu", "gpu_memory_bytes"}}}
	for _, r := range runs {
		commit := short(r.GitCommit)
		if r.TreeCommit != "" {
			commit += " (tree " + short(r.TreeCommit) + ")"
		}
		machine := tidy.MachineName(r.Machine)
		if r.Emulated {
			machine += " (emulated)"
		}
		t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), r.SuiteName, r.Kind, r.Tag, r.Backend, r.TimingMode, r.Status,
			r.StartedAt.Local().Format(time.DateTime), commit, machine, results.OverridesText(r.Overrides)})
		m := r.Machine
		var bw any
		if r.ReadBandwidthGBs > 0 {
			bw = r.ReadBandwidthGBs
		}
		var peak any
		if r.MatmulPeakGFLOPs > 0 {
			peak = r.MatmulPeakGFLOPs
		}
		var ended any
		if !r.EndedAt.IsZero() {
			ended = r.EndedAt
		}
		t.Data.Add(map[string]any{
			"run": r.ID, "suite": r.SuiteName, "suite_path": r.SuitePath, "suite_hash": r.SuiteHash, "tag": r.Tag,
			"kind": r.Kind, "backend": r.Backend, "timing": r.TimingMode, "status": r.Status, "emulated": r.Emulated,
			"started": r.StartedAt, "ended": ended, "commit": r.GitCommit, "tree_commit": r.TreeCommit,
			"version": r.ToolVersion, "overrides": results.OverridesText(r.Overrides), "threads": r.Threads, "backend_notes": r.BackendNotes, "notes": r.Notes,
			"read_bandwidth_gb_s": bw, "matmul_peak_gflop_s": peak, "hostname": m.Hostname, "os": m.OS, "arch": m.Arch, "cpu": m.CPUModel,
			"cpu_cores": m.CPUCores, "memory_bytes": m.MemoryBytes, "gpu": m.GPUName, "gpu_memory_bytes": m.GPUMemoryBytes,
		})
	}
	return t
}

func short(commit string) string {
	if len(commit) > 10 {
		return commit[:10]
	}
	return commit
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a reference's runs: each case with medians and confidence intervals",
		ArgsUsage: "RUN... (id, tag, \"latest\" or git commit; a tag or commit names every run it matches, and a,b the runs of both, as in compare)",
		Description: "Examples:\n\n" +
			"   mtlbench show latest\n" +
			"   mtlbench show main --format md\n" +
			"   mtlbench show main --format csv > main.csv   # tidy data: one row per run, case and metric (docs/data.md)\n" +
			"   mtlbench show main --format jsonl --raw      # one row per sample",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: formatList(formatBenchfmt) + " (csv, json, jsonl: one row per run, case and metric)"},
			&cli.BoolFlag{Name: "raw", Usage: "with csv, json or jsonl: one row per sample (refused with the other formats)"},
			&cli.IntFlag{Name: "latest", Usage: "show only the newest N runs of each reference, as compare --latest pools them (0: all)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("show needs a run (id, tag, \"latest\" or commit)")
			}
			if err := checkRunCount(c, "latest"); err != nil {
				return err
			}
			format, err := parseRunFormat(c.String("format"))
			if err != nil {
				return err
			}
			// Only the data formats have a row per sample; benchfmt's lines
			// leave out what the statistics leave out, so --raw would be a lie.
			if c.Bool("raw") && !table.IsData(table.Format(format)) {
				return fmt.Errorf("show: --raw goes with --format csv, json or jsonl (one row per sample), not --format %s", format)
			}
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			ids, err := resolveRunsLatest(db, c.Args().Slice(), c.Int("latest"))
			if err != nil {
				return err
			}
			var runs []*results.Run
			for _, id := range ids {
				r, err := db.GetRun(id)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			// Oldest first, as they ran, whatever the order of the
			// references that named them.
			slices.SortStableFunc(runs, func(a, b *results.Run) int {
				if d := a.StartedAt.Compare(b.StartedAt); d != 0 {
					return d
				}
				return cmp.Compare(a.ID, b.ID)
			})
			for _, run := range runs {
				backend := run.Backend
				if run.BackendNotes != "" {
					backend += " (" + run.BackendNotes + ")"
				}
				fmt.Fprintf(c.App.ErrWriter, "run %d: suite %s, %s, backend %s on %s, %s timing\n", run.ID, run.SuiteName, run.Status, backend, tidy.MachineName(run.Machine), run.TimingMode)
				data := table.IsData(table.Format(format)) || format == formatBenchfmt
				if err := printCaseErrors(c.App.ErrWriter, db, run, data); err != nil {
					return err
				}
			}
			return printRuns(c.App.Writer, c.App.ErrWriter, db, runs, format, c.Bool("raw"))
		},
	}
}

// printCaseErrors prints why each failed or skipped case of a run has no
// figures: the error `run` stored (and sent the user here to read), and,
// for the data formats, that the run stored no case.
func printCaseErrors(w io.Writer, db *results.DB, run *results.Run, data bool) error {
	cases, err := db.Cases(run.ID)
	if err != nil {
		return err
	}
	if len(cases) == 0 && data {
		// the data formats write no row for such a run; the tables say it
		fmt.Fprintf(w, "  %s\n", stats.NoCases(run))
	}
	for _, c := range cases {
		if (c.Status == results.CaseFailed || c.Status == results.CaseSkipped) && c.Error != "" {
			fmt.Fprintf(w, "  case %s %s: %s\n", c.Name, c.Status, c.Error)
		} else if c.Status == results.CasePending && c.RepsDone > 0 {
			fmt.Fprintf(w, "  case %s unfinished: %s stored\n", c.Name, plural.Of(c.RepsDone, "repetition"))
		}
	}
	return nil
}

// printRuns prints several runs: data formats as one table, the others one
// run after another. The samples the statistics leave out are named on
// errw where the format has no place for notes.
func printRuns(w, errw io.Writer, db *results.DB, runs []*results.Run, format string, raw bool) error {
	f := table.Format(format)
	if table.IsData(f) || format == formatBenchfmt {
		var trs []*tidy.Run
		for _, r := range runs {
			tr, err := tidy.Load(db, r)
			if err != nil {
				return err
			}
			trs = append(trs, tr)
		}
		if !raw {
			for _, note := range tidy.LeftOut(trs) {
				fmt.Fprintln(errw, "mtlbench: warning:", note)
			}
		} else if f == table.FormatJSON || f == table.FormatJSONL {
			for _, note := range tidy.RawNulls(trs) {
				fmt.Fprintln(errw, "mtlbench: warning:", note)
			}
		}
		if format == formatBenchfmt {
			return tidy.WriteBenchfmt(w, trs)
		}
		d := tidy.Summaries(trs)
		if raw {
			d = tidy.Raw(trs)
		}
		return d.Render(w, f)
	}
	for i, r := range runs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		cases, err := db.Cases(r.ID)
		if err != nil {
			return err
		}
		if err := printRun(w, db, &bench.Summary{RunID: r.ID, Run: r, Cases: cases}, format, raw); err != nil {
			return err
		}
	}
	return nil
}
