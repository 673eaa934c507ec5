package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/reports/charts"
	"github.com/mtlbench/mtlbench/reports/compare"
	"github.com/mtlbench/mtlbench/reports/table"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "compare two sets of runs case by case: medians, 95% CIs, change and p-value",
		ArgsUsage: "A B (each a run id, tag, \"latest\" or git commit; a comma-separated list pools its runs)",
		Description: "Matches the cases of A (baseline) and B (candidate) on their parameter keys and\n" +
			"prints one table per metric, benchstat style: both medians with 95% confidence\n" +
			"intervals, the change, the Mann-Whitney U p-value and a verdict (~ when the\n" +
			"difference is not significant at --alpha). A reference that names several runs\n" +
			"(a tag, a commit run twice) pools their samples; --latest keeps only the newest.\n" +
			"Emulated runs are never compared with real ones, nor truncated models with whole ones.\n\n" +
			"Examples:\n\n" +
			"   mtlbench compare main pr\n" +
			"   mtlbench compare 41,42 latest --format md\n" +
			"   mtlbench compare llama.cpp mine --out cmp       # a peer import beside mtlbench's runs",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: formatList() + " (one row per case and metric)"},
			&cli.Float64Flag{Name: "alpha", Value: compare.DefaultAlpha, Usage: "significance level of the verdicts"},
			&cli.IntFlag{Name: "latest", Usage: "use only the newest N runs of each reference (0: all)"},
			&cli.StringFlag{Name: "out", TakesFile: true, Usage: "also write the comparison as an HTML page (DIR/compare.html) with its charts to this directory"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return fmt.Errorf("compare needs two run references, A (baseline) and B (candidate), got %d", c.NArg())
			}
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			alpha := c.Float64("alpha")
			if err := checkAlpha(alpha); err != nil {
				return err
			}
			if err := checkRunCount(c, "latest"); err != nil {
				return err
			}
			if err := noStdout("--out", c.String("out"), "the comparison's page is a folder of files (compare.html and its charts)"); err != nil {
				return err
			}
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			refA, refB := c.Args().Get(0), c.Args().Get(1)
			a, err := compare.Load(db, refA, refA, c.Int("latest"))
			if err != nil {
				return fmt.Errorf("A: %w", err)
			}
			b, err := compare.Load(db, refB, refB, c.Int("latest"))
			if err != nil {
				return fmt.Errorf("B: %w", err)
			}
			if dir := c.String("out"); dir != "" {
				// Made now, so a folder that cannot be is said before the tables.
				if err := makeFolder("--out", dir, "compare writes a folder (compare.html and its charts)"); err != nil {
					return err
				}
			}
			cmp := compare.Compare(a, b, compare.Options{Alpha: alpha})
			fmt.Fprintf(c.App.ErrWriter, "A: %s\nB: %s\n", a.Describe(), b.Describe())
			if ids := compare.Shared(a, b); len(ids) > 0 {
				fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: A and B both hold run %s: its cases compare with themselves\n", joinIDs(ids))
			}
			if cmp.NotComparable != "" {
				return fmt.Errorf("not comparable: %s", cmp.NotComparable)
			}
			tables := cmp.Tables()
			// Nothing compared is gate's "cannot tell" (exit 3), returned once
			// the cases only one side holds are printed (docs/data.md).
			var nothing error
			if len(cmp.Rows) == 0 {
				if matched := len(a.Keys()) - len(cmp.OnlyA); matched > 0 {
					nothing = fmt.Errorf("nothing to compare: A and B match on %s, but no matched pair holds samples of one metric on both sides (runs interrupted before a repetition? see `mtlbench show`)", plural.Of(matched, "case"))
				} else {
					nothing = fmt.Errorf("nothing to compare: no case of A (%s) matches a case of B (%s); cases match on their parameter keys (see `mtlbench show`)",
						caseList(cmp.OnlyA), caseList(cmp.OnlyB))
				}
				nothing = &exitError{code: 3, err: nothing}
			}
			if table.IsData(f) {
				if err := cmp.Data().Render(c.App.Writer, f); err != nil {
					return err
				}
				// The tables print these under them; data has no place for
				// them, and a reader of it must not miss them.
				for _, n := range cmp.Notes {
					fmt.Fprintln(c.App.ErrWriter, "note:", n)
				}
			} else if len(tables) > 0 {
				if err := table.RenderAll(c.App.Writer, f, tables); err != nil {
					return err
				}
			}
			if dir := c.String("out"); dir != "" {
				var ids []int64
				for _, side := range []*compare.Side{a, b} {
					for _, r := range side.Runs {
						ids = append(ids, r.ID)
					}
				}
				hist := historyPoints(c.App.ErrWriter)
				paths, leftOut, err := charts.WriteCharts(dir, db, ids, charts.Options{History: hist, ModelBytes: documentedModelBytes})
				if err != nil {
					return fmt.Errorf("charts: %w", err)
				}
				for _, w := range leftOut {
					fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", w)
				}
				page := filepath.Join(dir, "compare.html")
				f, err := os.Create(page)
				if err != nil {
					return err
				}
				if err := cmp.WriteHTML(f, paths); err != nil {
					f.Close()
					return fmt.Errorf("%s: %w", page, err)
				}
				if err := f.Close(); err != nil {
					return err
				}
				for _, p := range append([]string{page}, paths...) {
					fmt.Fprintln(c.App.ErrWriter, "wrote", p)
				}
			}
			return nothing
		},
	}
}

// checkRunCount refuses a negative count of runs in flag (0 is all),
// before any database is opened.
func checkRunCount(c *cli.Context, flag string) error {
	if n := c.Int(flag); n < 0 {
		return fmt.Errorf("--%s %d: want a count of runs (0: all)", flag, n)
	}
	return nil
}

// checkAlpha refuses a significance level outside (0, 1), NaN too.
func checkAlpha(alpha float64) error {
	if !(alpha > 0 && alpha < 1) {
		return fmt.Errorf("--alpha must be between 0 and 1, got %g", alpha)
	}
	return nil
}

// caseList names a side's cases for a message, the first few and how many
// more: a store's runs can hold hundreds.
func caseList(cases []*compare.Case) string {
	const shown = 4
	if len(cases) == 0 {
		return "no cases"
	}
	names := make([]string, 0, shown+1)
	for i, x := range cases {
		if i == shown {
			names = append(names, fmt.Sprintf("and %d more", len(cases)-shown))
			break
		}
		names = append(names, x.DisplayName())
	}
	return strings.Join(names, ", ")
}
