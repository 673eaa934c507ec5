package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/reports/charts"
	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/htmlreport"
	"github.com/mtlbench/mtlbench/results"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "write an HTML report with charts of one or more runs",
		ArgsUsage: "[RUN...] (id, tag, \"latest\" or git commit, or a,b for several; default: the latest benchmark run, not a tune or peer run)",
		Description: "Writes DIR/index.html, a self-contained page (charts inlined as SVG) with the runs'\n" +
			"metadata, summary tables (medians ± 95% CI), throughput vs batch, the per-component\n" +
			"breakdown, the MoE chunk curve, serving sweeps (requests served and latency against the\n" +
			"offered request rate), the roofline fraction and the documented history\n" +
			"(with the memory-bandwidth roofline of each documented Apple machine),\n" +
			"and saves each chart beside it as PNG and SVG. Prints the paths written.",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "out", TakesFile: true, Aliases: []string{"o"}, Value: "mtlbench-report", Usage: "directory to write the report into"},
			&cli.StringFlag{Name: "history-model", Usage: "model of the documented-history chart (default: the runs' model if documented)"},
			&cli.StringFlag{Name: "title", Usage: "page title (default: \"mtlbench report: run 3 (ci)\", the runs' ids and suites)"},
		},
		Action: func(c *cli.Context) error {
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			refs := c.Args().Slice()
			var ids []int64
			if len(refs) == 0 {
				// The latest benchmark run: a tune or peer run has no report
				// of its own to make.
				latest, err := db.Runs(results.RunFilter{Kind: results.KindSuite, Limit: 1})
				if err != nil {
					return err
				}
				if len(latest) == 0 {
					return fmt.Errorf("no benchmark run in %s: record one (mtlbench run ci) or name runs", db.Path())
				}
				ids = []int64{latest[0].ID}
			} else if ids, err = resolveRuns(db, refs); err != nil {
				return err
			}
			hist := historyPoints(c.App.ErrWriter)
			if m := c.String("history-model"); m != "" && len(hist) > 0 {
				if err := historyModelDrawn(hist, m); err != nil {
					return err
				}
			}
			if c.String("out") == "" {
				return fmt.Errorf("--out: no folder named to write the report into")
			}
			if err := noStdout("--out", c.String("out"), "the report is a folder of files (index.html and its charts)"); err != nil {
				return err
			}
			if err := makeFolder("--out", c.String("out"), "the report is a folder of files (index.html and its charts)"); err != nil {
				return err
			}
			paths, err := htmlreport.WriteFiles(c.String("out"), db, ids, htmlreport.Options{History: hist,
				Title: c.String("title"), HistoryModel: c.String("history-model"), ToolVersion: readBuildInfo().Version,
				ModelBytes: documentedModelBytes,
				Warn:       func(w string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", w) },
			})
			for _, p := range paths {
				fmt.Fprintln(c.App.Writer, p)
			}
			return err
		},
	}
}

// resolveRuns turns references into run ids, in the order given, each run
// once (a tag can name several runs; they come newest first). A reference
// may be a comma-separated list, as compare takes one: a tag never holds a
// comma (results.CheckTag).
func resolveRuns(db *results.DB, refs []string) ([]int64, error) {
	return resolveRunsLatest(db, refs, 0)
}

// resolveRunsLatest is resolveRuns keeping only the newest latest runs of
// each reference (0: all), as compare.Load does for compare and gate, so
// show --latest names the runs compare --latest pools.
func resolveRunsLatest(db *results.DB, refs []string, latest int) ([]int64, error) {
	if strings.Trim(strings.Join(refs, ""), ", \t") == "" {
		return nil, results.EmptyRefError(strings.Join(refs, " "))
	}
	var list []string
	for _, ref := range refs {
		l, err := results.SplitRefs(ref)
		if err != nil {
			return nil, err
		}
		list = append(list, l...)
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, ref := range list {
		got, err := db.ResolveRef(ref)
		if err != nil {
			return nil, err
		}
		if latest > 0 && len(got) > latest {
			got = got[:latest] // ResolveRef lists newest first
		}
		for _, id := range got {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// historyModelDrawn refuses a --history-model the history chart would not
// draw: a model whose documented figures hold no decode throughput (only
// per-layer times, or the figures of a model stated as unknown) passes
// history.Filter, yet left the chart out and the page saying so.
func historyModelDrawn(hist []history.Point, model string) error {
	models := charts.DocumentedModels(hist)
	for _, m := range models {
		if history.SameModel(m, model) {
			return nil
		}
	}
	what := "no documented figures"
	if len(history.Filter(hist, model, "", "")) > 0 {
		what = "no documented decode throughput, which the history chart draws"
	}
	return fmt.Errorf("--history-model %q: %s (documented models: %s)", model, what, strings.Join(models, ", "))
}
