package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/roofline"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/suites"
)

func historyCommand() *cli.Command {
	format := &cli.StringFlag{Name: "format", Value: "table", Usage: formatList()}
	filters := []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "only this model (e.g. Qwen3-30B-A3B)"},
		&cli.StringFlag{Name: "metric", Usage: "only this metric (e.g. tok_s, which takes in decode_tok_s; ms_per_layer)"},
		&cli.StringFlag{Name: "series", Usage: "only this series (e.g. \"MPS baseline\")"},
		format,
	}
	return &cli.Command{
		Name:  "history",
		Usage: "the documented performance history runs are compared against",
		Description: "The figures the project's source documents report, with their source, date,\n" +
			"hardware, model, dtype, batch size, metric and unit. `import` adds figures from\n" +
			"markdown tables (such as a project's KNOWLEDGE_BASE.md).",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list the documented figures, grouped by source document, with the file they are read from",
				Flags: []cli.Flag{format},
				Action: func(c *cli.Context) error {
					pts := historyPoints(c.App.ErrWriter)
					type group struct {
						n           int
						models      map[string]bool
						files       []string
						date, hw    string
						first, last string
					}
					var order []string
					groups := map[string]*group{}
					for _, p := range pts {
						g := groups[p.Source]
						if g == nil {
							g = &group{models: map[string]bool{}, date: p.Date, hw: p.Hardware}
							groups[p.Source] = g
							order = append(order, p.Source)
						}
						g.n++
						g.models[p.Model] = true
						if f := historyFile(p.File); !slices.Contains(g.files, f) {
							g.files = append(g.files, f)
						}
					}
					t := &table.Table{Header: []string{"source", "date", "hardware", "models", "figures", "file"}}
					for _, s := range order {
						g := groups[s]
						var ms []string
						for m := range g.models {
							ms = append(ms, m)
						}
						slices.Sort(ms)
						t.Rows = append(t.Rows, []string{s, g.date, g.hw, strings.Join(ms, ", "), strconv.Itoa(g.n), strings.Join(g.files, ", ")})
					}
					return render(c, t)
				},
			},
			{
				Name:  "show",
				Usage: "show documented figures, filtered",
				Description: "The roofline column is a batch-1 decode figure's fraction of its machine's\n" +
					"memory-bandwidth roofline: the Apple GPU's bandwidth over the bytes a decode step\n" +
					"of the model's preset reads in the documented dtype. Figures of machines the Apple\n" +
					"GPU table does not know, of models without a preset, without a dtype, or at\n" +
					"batch > 1 (aggregate tok/s) have none.",
				Flags: filters,
				Action: func(c *cli.Context) error {
					pts := historyPoints(c.App.ErrWriter)
					model, metric, series := c.String("model"), c.String("metric"), c.String("series")
					sel := history.Filter(pts, model, metric, series)
					if len(sel) == 0 && len(pts) > 0 {
						return historyNone(pts, "--model", model, metric, series)
					}
					return render(c, pointsTable(sel))
				},
			},
			{
				Name:      "import",
				Usage:     "read the markdown tables of a file and save the figures they map to (- reads standard input)",
				ArgsUsage: "FILE.md",
				Description: "Columns map to the history's fields and metrics by their headers (Date, Batch,\n" +
					"Decode tok/s, Time per layer, ...). A unit in a header's parentheses is its bare numbers'\n" +
					"(Latency (s) is read in seconds and kept in ms; a cell's own unit wins); a column of\n" +
					"another rate (GB/s, req/s) is left out. A wrong cell (a date that is no day, a negative\n" +
					"figure, a row whose cells do not match its header, a row repeated) fails the import, every\n" +
					"one named by line, table, row and column; a word where a figure goes is skipped with a\n" +
					"warning. --dry-run prints what would be saved. A FILE.md of - is standard input, which\n" +
					"has no file name to be the figures' source: --source names it.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "model", Usage: "model of the figures, where the table has no model column", Required: true},
					&cli.StringFlag{Name: "hardware", Value: "unknown", Usage: "hardware the figures were measured on"},
					&cli.StringFlag{Name: "source", Usage: "source name recorded with each figure (default: the file name; required with - for standard input)"},
					&cli.StringFlag{Name: "date", Usage: "date of figures whose table has no date column (YYYY-MM-DD, YYYY-MM, YYYY or unknown)"},
					&cli.StringFlag{Name: "series", Usage: "series of figures whose table names none"},
					&cli.StringFlag{Name: "dtype", Usage: "dtype of figures whose table names none, one bench --dtype takes: " + strings.Join(suites.ModelDTypes, ", ")},
					&cli.StringFlag{Name: "out", TakesFile: true, Usage: "history YAML file to write (default: SOURCE.yaml in the user's history folder, $MTLBENCH_HISTORY, which every command reads); the figures it holds are kept, but this page's of the same model, which are replaced"},
					&cli.BoolFlag{Name: "dry-run", Usage: "print the figures; write nothing"},
					format,
				},
				Action: func(c *cli.Context) error {
					if err := oneArg(c, "history import", "markdown file", "import each on its own"); err != nil {
						return err
					}
					// The dtypes mtlbench runs in, so that its figures and runs
					// name one dtype one way.
					if dt := c.String("dtype"); dt != "" {
						if err := enumFlag("--dtype", dt, suites.ModelDTypes...); err != nil {
							return err
						}
					}
					if err := noStdout("--out", c.String("out"), "the figures are merged into those the history file holds"); err != nil {
						return err
					}
					// A folder that is not there is found before the page is read.
					if err := checkWritable("--out", c.String("out")); err != nil {
						return err
					}
					arg, src := c.Args().First(), c.String("source")
					if arg == stdinPath && src == "" {
						return fmt.Errorf("history import -: standard input has no file name to be the figures' source: name it with --source")
					}
					text, path, err := readInput(c.App.Reader, arg, readfile.Config, "a history page")
					if err != nil {
						return err
					}
					if src == "" {
						src = filepath.Base(path)
					}
					date := c.String("date")
					if why := history.DateProblem(date); date != "" && why != "" {
						return fmt.Errorf("--date %q %s", date, why)
					}
					res, err := history.ImportMarkdown(text, history.Point{Source: src, Model: c.String("model"), Hardware: c.String("hardware"),
						Date: date, Series: c.String("series"), DType: c.String("dtype")})
					if err != nil {
						// Each wrong cell is its own line, each naming the page.
						return errors.New(path + ": " + strings.ReplaceAll(err.Error(), "\n", "\n"+path+": "))
					}
					for _, col := range res.Columns {
						fmt.Fprintf(c.App.ErrWriter, "column %q -> %s\n", col, res.Mapped[col])
					}
					for _, col := range res.Unmapped {
						fmt.Fprintf(c.App.ErrWriter, "column %q could not be mapped and was left out\n", col)
					}
					// Named with the page, as its errors are and every other
					// command's warnings ("mtlbench: warning: FILE: ...").
					for _, w := range res.Warnings {
						fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: %s: %s\n", path, w)
					}
					// A figure without a date is the usual refusal: said with
					// the flag that gives one, not as a missing field.
					var undated []string
					for _, p := range res.Points {
						if p.Date == "" {
							undated = append(undated, strconv.Itoa(p.Line))
						}
					}
					if len(undated) > 0 {
						has, at := "has", "line "
						if len(undated) > 1 {
							has, at = "have", "lines "
						}
						return fmt.Errorf("%s: %s %s no date (%s%s): its table has no date column, or the cell is empty; "+
							"give the date the figures were measured with --date YYYY-MM-DD (or --date unknown)",
							path, plural.Of(len(undated), "figure"), has, at, firstLines(undated))
					}
					// What the write would refuse, --dry-run refuses too.
					if err := history.Check(res.Points); err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
					if !c.Bool("dry-run") {
						out := c.String("out")
						if out == "" {
							dir := envconfig.HistoryDir()
							if err := makeFolder("history folder", dir, "set MTLBENCH_HISTORY to a folder, or name the file with --out"); err != nil {
								return err
							}
							out = filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))+".yaml")
						}
						page := path
						if arg == stdinPath {
							page = "" // no file to keep from being overwritten
						}
						kept, replaced, err := writeHistory(out, page, res.Points)
						if err != nil {
							return err
						}
						fmt.Fprintf(c.App.ErrWriter, "%s written to %s (%d kept from before, %d replaced)\n", plural.Of(len(res.Points), "figure"), out, kept, replaced)
					}
					return render(c, pointsTable(res.Points))
				},
			},
		},
	}
}

// historyPoints is the built-in history and the user's imported figures
// ($MTLBENCH_HISTORY). A broken entry or file is warned about on errw and
// the rest is used, by every command that reads the history alike: one
// bad line of an imported page should not hide the documented figures.
// historyFile names the file a figure was read from for a reader: the
// built-in history's by its own name (the source documents' names are
// content hashes), the user's folder's by its path.
func historyFile(f string) string {
	if u, ok := strings.CutPrefix(f, history.UserPrefix); ok {
		return u
	}
	return "built in: " + path.Base(f)
}

func historyPoints(errw io.Writer) []history.Point {
	pts, err := history.All(envconfig.HistoryDir())
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(errw, "mtlbench: warning: history: %s (left out; the other figures are read)\n", line)
		}
	}
	return pts
}

// historyNone is the error of filters that leave no documented figures
// (history show's; report's --history-model, modelFlag): the first filter
// that leaves none, and the values of the figures the filters before it
// keep.
func historyNone(pts []history.Point, modelFlag, model, metric, series string) error {
	var with string
	for _, f := range []struct {
		flag, want, noun string
		of               func(history.Point) string
		keep             func([]history.Point) []history.Point
	}{
		{modelFlag, model, "models", func(p history.Point) string { return p.Model },
			func(p []history.Point) []history.Point { return history.Filter(p, model, "", "") }},
		{"--metric", metric, "metrics", func(p history.Point) string { return p.Metric },
			func(p []history.Point) []history.Point { return history.Filter(p, "", metric, "") }},
		{"--series", series, "series", func(p history.Point) string { return p.Series },
			func(p []history.Point) []history.Point { return history.Filter(p, "", "", series) }},
	} {
		if f.want == "" {
			continue
		}
		next := f.keep(pts)
		if len(next) > 0 {
			pts, with = next, with+fmt.Sprintf(" %s %q", f.flag, f.want)
			continue
		}
		var have []string
		for _, p := range pts {
			if v := f.of(p); v != "" && !slices.Contains(have, v) {
				have = append(have, v)
			}
		}
		slices.Sort(have)
		// a typo says what it is close to, as a suite's key does
		guess := ""
		if d := suggest.DidYouMean(f.want, have); d != "" {
			guess = " (" + d + ")"
		}
		if with == "" {
			return fmt.Errorf("%s %q: no documented figures%s (documented %s: %s)", f.flag, f.want, guess, f.noun, strings.Join(have, ", "))
		}
		return fmt.Errorf("%s %q: no documented figures with%s%s (their %s: %s)", f.flag, f.want, with, guess, f.noun, strings.Join(have, ", "))
	}
	return nil
}

func pointsTable(pts []history.Point) *table.Table {
	t := &table.Table{Header: []string{"date", "model", "hardware", "series", "dtype", "batch", "component", "params", "metric", "value", "unit", "roofline", "source"},
		Data: &table.Data{Columns: []string{"date", "model", "hardware", "series", "dtype", "batch", "component", "metric",
			"qualifier", "value", "unit", "roofline_frac", "roofline_tok_s", "source", "section", "note"}}}
	for _, p := range pts {
		batch := ""
		if p.Batch > 0 {
			batch = strconv.Itoa(p.Batch)
		}
		src := p.Source
		if p.Section != "" {
			src += " § " + p.Section
		}
		var params []string
		for k, v := range p.Params {
			// A range's upper end is in its value (history.Point.Figure).
			if k == "max" && history.IsRange(p.Qualifier) {
				continue
			}
			params = append(params, k+"="+v)
		}
		slices.Sort(params)
		t.Rows = append(t.Rows, []string{p.Date, p.Model, p.Hardware, p.Series, p.DType, batch, p.Component, strings.Join(params, " "),
			p.Metric, p.Figure(), p.Unit, rooflineCell(p), src})
		row := map[string]any{"date": p.Date, "model": p.Model, "hardware": p.Hardware, "series": p.Series, "dtype": p.DType,
			"batch": nil, "component": p.Component, "metric": p.Metric, "qualifier": p.Qualifier, "value": p.Value, "unit": p.Unit,
			"roofline_frac": nil, "roofline_tok_s": nil, "source": p.Source, "section": p.Section, "note": p.Note}
		if p.Batch > 0 {
			row["batch"] = p.Batch
		}
		if f, l, ok := roofline.Of(p, documentedModelBytes); ok {
			row["roofline_frac"], row["roofline_tok_s"] = f, l.TokS
		}
		for k, v := range p.Params {
			row["param_"+k] = table.Typed(v)
		}
		t.Data.Add(row)
	}
	return t
}

// rooflineCell is a figure's fraction of its machine's decode roofline,
// "5.4% of 125 tok/s (M3 Ultra, 819 GB/s)", or "" where the machine, the model's
// bytes or a batch-1 decode figure is missing (reports/roofline).
func rooflineCell(p history.Point) string {
	f, l, ok := roofline.Of(p, documentedModelBytes)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s of %.0f tok/s (%s, %s GB/s)", pct(f), l.TokS, l.GPU.Chip, strconv.FormatFloat(l.GPU.BandwidthGBs, 'f', -1, 64))
}

// pct prints a fraction as a percentage with two significant digits below
// 10%, so small fractions of the roofline do not read as 0%.
func pct(f float64) string {
	if f*100 < 9.95 {
		return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + "%"
}

func render(c *cli.Context, t *table.Table) error {
	f, err := parseTableFormat(c.String("format"))
	if err != nil {
		return err
	}
	return t.Render(c.App.Writer, f)
}

// writeHistory saves points to out, merged with the figures out already
// holds (history.Merge), and writes nothing over the page they came from
// ("" where standard input gave it) or over a file that is no history file.
func writeHistory(out, page string, points []history.Point) (kept, replaced int, err error) {
	st, err := os.Stat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, history.Save(out, points)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("--out: %w", err)
	}
	if pst, perr := os.Stat(page); page != "" && perr == nil && os.SameFile(st, pst) {
		return 0, 0, fmt.Errorf("--out %s is the page being imported: not overwritten", out)
	}
	old, err := history.LoadFile(out)
	if err != nil {
		return 0, 0, fmt.Errorf("--out %s exists and is not a history file, so it is not overwritten: %w", out, err)
	}
	merged, replaced := history.Merge(old, points)
	return len(merged) - len(points), replaced, history.Save(out, merged)
}

// firstLines lists line numbers, the first few of a long list.
func firstLines(lines []string) string {
	if len(lines) > 5 {
		return strings.Join(lines[:5], ", ") + fmt.Sprintf(" and %d more", len(lines)-5)
	}
	return strings.Join(lines, ", ")
}
