// Package htmlreport writes a self-contained HTML report of recorded runs:
// run metadata (suite, machine, backend, timing mode, commit, emulated),
// the charts of package charts inlined as SVG, summary tables of medians
// with 95% confidence intervals, the per-component breakdown of profiled
// cases, and the comparison with the documented performance history.
//
// The page has no external assets (no scripts, stylesheets, fonts or
// images to fetch), so it can be mailed or attached to a CI run as one
// file. The charts are also written beside it as PNG and SVG.
package htmlreport

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/reports/charts"
	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/roofline"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
)

// Options tunes the report.
type Options struct {
	// Title heads the page; "" = "mtlbench report: run N, ...".
	Title string
	// History is the documented history; nil loads history.Embedded().
	History []history.Point
	// HistoryModel is the model of the history comparison; "" picks the
	// runs' model when documented, else the most documented one.
	HistoryModel string
	// ToolVersion is printed in the footer.
	ToolVersion string
	// ModelBytes gives the bytes a decode step of a documented model reads:
	// the history chart's rooflines and the history table's fractions of
	// them (nil: none).
	ModelBytes roofline.ModelBytes
	// Now stamps the page; zero = time.Now().
	Now time.Time
	// Warn, when set, is told of each chart the page leaves out because it
	// has no value that can be drawn, as the page's warnings say too.
	Warn func(string)
}

// IndexName is the report's file name inside its directory.
const IndexName = "index.html"

// Write writes dir/index.html and the charts beside it (NAME.png and
// NAME.svg) for the given runs.
func Write(dir string, db *results.DB, runIDs []int64, opts Options) error {
	_, err := WriteFiles(dir, db, runIDs, opts)
	return err
}

// WriteFiles is Write returning the paths written, index.html first.
func WriteFiles(dir string, db *results.DB, runIDs []int64, opts Options) ([]string, error) {
	if len(runIDs) == 0 {
		return nil, fmt.Errorf("htmlreport: no runs to report")
	}
	runs, err := charts.LoadRuns(db, runIDs)
	if err != nil {
		return nil, err
	}
	hist := opts.History
	var histErr error
	if hist == nil {
		// Partial history is still worth showing; the error goes on the page.
		hist, histErr = history.Embedded()
		if hist == nil {
			hist = []history.Point{}
		}
	}
	named, leftOut, err := charts.BuildFrom(runs, charts.Options{History: hist, HistoryModel: opts.HistoryModel, ModelBytes: opts.ModelBytes})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report folder %s: %w", dir, err)
	}
	var files []string
	page := pageData{
		Title:       opts.Title,
		ToolVersion: opts.ToolVersion,
		DBPath:      db.Path(),
		Now:         opts.Now,
	}
	if page.Now.IsZero() {
		page.Now = time.Now()
	}
	if histErr != nil {
		page.Warnings = append(page.Warnings, fmt.Sprintf("The documented history did not load completely: %v", histErr))
	}
	for _, w := range leftOut {
		page.Warnings = append(page.Warnings, "The "+w+".")
		if opts.Warn != nil {
			opts.Warn(w)
		}
	}
	for _, n := range named {
		paths, err := n.Chart.SaveFiles(dir, n.Name)
		files = append(files, paths...)
		if err != nil {
			return files, err
		}
		svg, err := n.Chart.SVG()
		if err != nil {
			return files, err
		}
		f := figure{ID: n.Name, Title: n.Chart.Title, SVG: inlineSVG(svg, n.Chart.Title),
			PNG: n.Name + ".png", SVGFile: n.Name + ".svg", Caption: captions[n.Name], Notes: n.Notes}
		if n.Name == charts.NameHistory {
			page.History = &f
		} else {
			page.Figures = append(page.Figures, f)
		}
	}
	if err := charts.RemoveStale(dir, named); err != nil {
		return files, err
	}
	page.NotDrawn = notDrawn(named, leftOut)
	fillRuns(&page, runs)
	page.Summaries = summaries(runs)
	page.Breakdown = breakdownTable(runs)
	model := opts.HistoryModel
	if model == "" {
		model = charts.HistoryModel(runs, hist)
	}
	page.HistoryModel = model
	if model == "" {
		page.HistoryNone = historyNone(runs, hist)
	}
	page.HistoryTable = historyTable(hist, model, opts.ModelBytes)
	if page.Title == "" {
		ids := make([]string, len(runs))
		for i, r := range runs {
			ids[i] = strconv.FormatInt(r.Run.ID, 10)
		}
		noun := "run"
		if len(ids) > 1 {
			noun = "runs"
		}
		page.Title = fmt.Sprintf("mtlbench report: %s %s (%s)", noun, strings.Join(ids, ", "), suiteNames(runs))
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, page); err != nil {
		return files, fmt.Errorf("htmlreport: %w", err)
	}
	index := filepath.Join(dir, IndexName)
	if err := os.WriteFile(index, b.Bytes(), 0o644); err != nil {
		return files, err
	}
	return append([]string{index}, files...), nil
}

// chartNeeds say what each chart is drawn from, in report order, for the
// page to say why one is not there (the serving charts share one line).
var chartNeeds = []struct {
	names []string
	need  string
}{
	{[]string{charts.NameThroughput}, "throughput against batch size (model cases with decode tok/s at two or more batch sizes, their other parameters alike)"},
	{[]string{charts.NameBreakdown}, "the per-component breakdown (model cases run with profile timing)"},
	{[]string{charts.NameMoEChunk}, "the MoE chunk curve (model cases at two or more moe_chunk sizes)"},
	{[]string{charts.NameServing, charts.NameServingLatency}, "the serving charts (model cases whose requests arrive at two or more rates)"},
	{[]string{charts.NameRoofline}, "the roofline fraction (model cases that record roofline_frac)"},
}

// notDrawn lists what the charts neither drawn nor left out (leftOut says
// why those are missing) are drawn from.
func notDrawn(named []charts.Named, leftOut []string) []string {
	there := func(name string) bool {
		for _, n := range named {
			if n.Name == name {
				return true
			}
		}
		for _, w := range leftOut {
			if strings.HasPrefix(w, "chart "+name+" ") {
				return true
			}
		}
		return false
	}
	var out []string
	for _, c := range chartNeeds {
		if !slices.ContainsFunc(c.names, there) {
			out = append(out, c.need)
		}
	}
	return out
}

// historyNone says why there is no history chart when none of the runs'
// models has documented throughput figures, naming the models that have.
func historyNone(runs []charts.RunData, hist []history.Point) string {
	var models []string
	for _, r := range runs {
		for _, c := range r.Cases {
			if m := c.Params["model"]; m != "" && c.Kind == results.CaseModel && !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
	}
	var s string
	switch len(models) {
	case 0:
		s = "These runs have no model cases to set beside the documented history"
	case 1:
		s = "No documented throughput figures of these runs' model (" + models[0] + ")"
	default:
		s = "No documented throughput figures of these runs' models (" + strings.Join(models, ", ") + ")"
	}
	if docs := charts.DocumentedModels(hist); len(docs) > 0 {
		s += "; --history-model draws those of another: " + strings.Join(docs, ", ")
	}
	return s + "."
}

func suiteNames(runs []charts.RunData) string {
	seen := map[string]bool{}
	var names []string
	for _, r := range runs {
		if !seen[r.Run.SuiteName] {
			seen[r.Run.SuiteName] = true
			names = append(names, r.Run.SuiteName)
		}
	}
	return strings.Join(names, ", ")
}

// captions say how to read each chart.
var captions = map[string]string{
	charts.NameThroughput:     "Median decode throughput against batch size for the cases of each run that sweep batch alone; error bars are the 95% confidence interval of the median.",
	charts.NameBreakdown:      "Time per layer of one decode step by component, from profile-mode op timings averaged over the layers run (median over repetitions). Ops outside the layers (embedding, lm_head, sampling) are in the table below, not in the bars.",
	charts.NameMoEChunk:       "MoE time against chunk size, one line per batch size; dashed lines are the documents' chunk-size tables of the same model.",
	charts.NameServing:        "Requests served a second (and, for cases with an slo, those within it: goodput) against the rate at which they arrived (Poisson, or gamma of the burstiness the legend gives); past what the engine sustains, served falls below offered and goodput below served. Error bars are the 95% confidence interval of the median.",
	charts.NameServingLatency: "The 99th-percentile time to first token and the median end-to-end latency, from each request's arrival, against the offered rate: queueing shows as latency growing with the rate.",
	charts.NameRoofline:       "Achieved memory read bandwidth of a decode step as a fraction of the machine's measured peak (metric roofline_frac).",
	charts.NameHistory:        "Throughput figures of the project's documents over the date they carry, with this report's runs of the same model overlaid. Each series is one document series on one piece of hardware; truncated-model runs are never joined to whole-model figures. Horizontal lines are the memory-bandwidth rooflines of batch-1 decode on the documented Apple machines.",
}

type figure struct {
	ID, Title    string
	SVG          template.HTML
	PNG, SVGFile string
	Caption      string
	Notes        []string
}

type kv struct{ K, V string }

type runInfo struct {
	ID     int64
	Fields []kv
}

type htmlTable struct {
	Title string
	// Details tables are folded away (<details>) under their title.
	Details bool
	Header  []string
	Rows    [][]string
	Right   []bool
	Notes   []string
}

type pageData struct {
	Title, ToolVersion, DBPath string
	Now                        time.Time
	Runs                       []runInfo
	Warnings                   []string
	Figures                    []figure
	Summaries                  []htmlTable
	Breakdown                  *htmlTable
	// NotDrawn says, for each chart the runs have no data for, what it is
	// drawn from.
	NotDrawn     []string
	History      *figure
	HistoryModel string
	// HistoryNone says why there is no history chart when no model was
	// chosen for it.
	HistoryNone  string
	HistoryTable *htmlTable
}

var svgStart = regexp.MustCompile(`<svg width="[^"]*" height="[^"]*"`)

// inlineSVG drops the XML prolog (not allowed inside HTML) and lets the
// SVG shrink to the page width.
func inlineSVG(svg []byte, title string) template.HTML {
	s := string(svg)
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	loc := svgStart.FindStringIndex(s)
	if loc != nil {
		s = s[:loc[1]] + ` role="img" aria-label="` + template.HTMLEscapeString(title) + `" style="max-width:100%;height:auto"` + s[loc[1]:]
	}
	// Generated by gonum/plot's SVG canvas, which escapes all text.
	return template.HTML(s)
}

func fillRuns(page *pageData, runs []charts.RunData) {
	var profile, truncated, emulated bool
	for _, rd := range runs {
		r := rd.Run
		m := r.Machine
		commit := r.GitCommit
		if commit == "" {
			commit = "-"
		}
		machine := []string{}
		if m.Hostname != "" {
			machine = append(machine, m.Hostname)
		}
		if m.OS != "" || m.Arch != "" {
			machine = append(machine, m.OS+"/"+m.Arch)
		}
		if m.CPUModel != "" {
			cpu := m.CPUModel
			if m.CPUCores > 0 {
				cpu += fmt.Sprintf(" (%d cores)", m.CPUCores)
			}
			machine = append(machine, cpu)
		}
		if m.MemoryBytes > 0 {
			machine = append(machine, fmt.Sprintf("%.0f GiB RAM", float64(m.MemoryBytes)/(1<<30)))
		}
		if m.GPUName != "" {
			g := m.GPUName
			if m.GPUMemoryBytes > 0 {
				g += fmt.Sprintf(" (%.0f GiB)", float64(m.GPUMemoryBytes)/(1<<30))
			}
			machine = append(machine, g)
		}
		if m.Driver != "" {
			machine = append(machine, "driver "+m.Driver)
		}
		if m.ThermalState != "" {
			machine = append(machine, "thermal "+m.ThermalState)
		}
		if m.PowerState != "" {
			machine = append(machine, "power "+m.PowerState)
		}
		var extra []string
		for k, v := range m.Extra {
			extra = append(extra, k+"="+v)
		}
		sort.Strings(extra)
		emu := "no"
		if r.Emulated {
			emu = "YES: numbers come from an emulated device"
			emulated = true
		}
		fields := []kv{
			{"suite", r.SuiteName + suffix(" (", r.SuitePath, ")")},
			{"suite hash", short(r.SuiteHash, 12)},
			{"tag", dash(r.Tag)},
			{"kind / status", r.Kind + " / " + r.Status},
			{"backend", dash(r.Backend)},
			{"timing mode", r.TimingMode},
			{"emulated", emu},
			{"git commit", commit},
			{"tool version", dash(r.ToolVersion)},
			{"started", fmtTime(r.StartedAt)},
			{"ended", fmtTime(r.EndedAt)},
			{"machine", dash(strings.Join(machine, ", "))},
		}
		if len(extra) > 0 {
			fields = append(fields, kv{"machine notes", strings.Join(extra, ", ")})
		}
		if r.Notes != "" {
			fields = append(fields, kv{"notes", r.Notes})
		}
		page.Runs = append(page.Runs, runInfo{ID: r.ID, Fields: fields})
		if r.TimingMode == results.TimingProfile {
			profile = true
		}
		for _, c := range rd.Cases {
			if c.LayersTotal > 0 && c.LayersRun < c.LayersTotal {
				truncated = true
			}
		}
	}
	if profile {
		page.Warnings = append(page.Warnings, "Profile timing synchronises after every op: its throughput figures are lower than throughput-mode figures and must not be compared with them.")
	}
	if truncated {
		page.Warnings = append(page.Warnings, "Some cases ran only the first layers of their model (layers column: run/total): their throughput is not a whole-model figure.")
	}
	if emulated {
		page.Warnings = append(page.Warnings, "Some runs are emulated: their numbers do not measure real hardware.")
	}
}

func suffix(pre, s, post string) string {
	if s == "" {
		return ""
	}
	return pre + s + post
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return dash(s)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func summaries(runs []charts.RunData) []htmlTable {
	var out []htmlTable
	for _, rd := range runs {
		var model, kernel *htmlTable
		all := &htmlTable{
			Title:  fmt.Sprintf("Run %d: every metric (median and 95%% CI)", rd.Run.ID),
			Header: []string{"case", "metric", "unit", "n", "median", "95% CI low", "95% CI high"},
		}
		cases, byCase := make([]results.Case, len(rd.Cases)), make([]map[string]*stats.Summary, len(rd.Cases))
		for i, c := range rd.Cases {
			cases[i], byCase[i] = c.Case, c.Stats
		}
		modelCols, _ := stats.ModelColumnsFor(cases, byCase)
		kernelCols, _ := stats.KernelColumnsFor(cases, byCase)
		layers := stats.LayersColumn(cases)
		bw := stats.KernelBandwidth(&rd.Run)
		var overBW []string // kernel cases whose GB/s passes bw
		for _, c := range rd.Cases {
			cols, t := modelCols, &model
			if c.Kind == results.CaseKernel {
				cols, t = kernelCols, &kernel
			}
			if *t == nil {
				*t = &htmlTable{Title: fmt.Sprintf("Run %d (%s): %s cases, median ± 95%% CI", rd.Run.ID, rd.Run.SuiteName, c.Kind), Header: stats.CaseHeader(c.Kind, layers, cols)}
			}
			row := []string{c.Name}
			if c.Kind != results.CaseKernel && layers {
				l := "-"
				if c.LayersTotal > 0 {
					l = fmt.Sprintf("%d/%d", c.LayersRun, c.LayersTotal)
				}
				row = append(row, l)
			}
			for _, col := range cols {
				if c.Status != results.CaseDone {
					row = append(row, c.Status)
					continue
				}
				cell := col.Cell(c.Stats[col.Metric])
				if c.Kind == results.CaseKernel && col.Metric == "gb_s" && bw.Over(c.Stats[col.Metric]) {
					cell += stats.OverMark
					overBW = append(overBW, c.Name)
				}
				row = append(row, cell)
			}
			row = append(row, tunedParams(c.Params))
			(*t).Rows = append((*t).Rows, row)
			if c.Status == results.CaseFailed && c.Error != "" {
				(*t).Notes = append((*t).Notes, c.Name+" failed: "+c.Error)
			}
			var metrics []string
			for m := range c.Stats {
				metrics = append(metrics, m)
			}
			sort.Strings(metrics)
			for _, m := range metrics {
				s := c.Stats[m]
				lo, hi := "-", "-"
				if s.N > 1 && !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) {
					lo, hi = num(s.Lo), num(s.Hi)
				}
				all.Rows = append(all.Rows, []string{c.Name, m, s.Unit, strconv.Itoa(s.N), num(s.Center), lo, hi})
			}
		}
		if len(rd.Cases) == 0 {
			// Said in the table's place, as show says it: an empty
			// section reads as a page that failed to render.
			out = append(out, htmlTable{Title: fmt.Sprintf("Run %d (%s)", rd.Run.ID, rd.Run.SuiteName), Notes: []string{stats.NoCases(&rd.Run) + "."}})
		}
		for _, t := range []*htmlTable{model, kernel} {
			if t == nil {
				continue
			}
			dropEmptyLast(t, "tuned configs")
			if t == model && layers {
				t.Notes = append(t.Notes, "layers: layers run / layers of the model; figures of truncated models are not whole-model figures.")
			}
			if n := bw.Note(overBW); t == kernel && n != "" {
				t.Notes = append(t.Notes, n+".")
			}
			if n := stats.BurstRateNote(cases); t == model && n != "" {
				t.Notes = append(t.Notes, n+".")
			}
			t.Notes = append(t.Notes, "± is the 95% confidence interval of the median, in percent of it; no ± where too few repetitions give no interval. Cases that did not finish show their status.")
			align(t)
			out = append(out, *t)
		}
		if len(all.Rows) > 0 {
			all.Details = true
			align(all)
			out = append(out, *all)
		}
	}
	return out
}

// tunedParams shows the "tuned.*" parameters a case recorded: the kernel
// configs the engine looked up, and where they came from.
func tunedParams(p map[string]string) string {
	var s []string
	for k, v := range p {
		if name, ok := strings.CutPrefix(k, "tuned."); ok {
			s = append(s, name+": "+v)
		}
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}

// dropEmptyLast gives t a last column named header when some row has a
// value in it (rows carry it as their last cell), and removes it otherwise.
func dropEmptyLast(t *htmlTable, header string) {
	used := false
	for _, r := range t.Rows {
		used = used || r[len(r)-1] != ""
	}
	if used {
		t.Header = append(t.Header, header)
		return
	}
	for i, r := range t.Rows {
		t.Rows[i] = r[:len(r)-1]
	}
}

// num prints five significant digits: enough to compare, short to read.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 5, 64) }

// numericCell matches cells right-aligned in tables.
var numericCell = regexp.MustCompile(`^[~<>≥≤+-]?\d[\d,]*(\.\d+)?([eE][+-]?\d+)?( ?(±[\d.]+%|±\?|ms|x|%|\(n=\d+\)))?$`)

// align marks columns whose cells are all numbers (or "-", or the status of
// a case that did not finish, which a summary prints in its figures' place)
// right-aligned.
func align(t *htmlTable) {
	t.Right = make([]bool, len(t.Header))
	for i := range t.Header {
		seen, ok := false, true
		for _, r := range t.Rows {
			if i >= len(r) || r[i] == "-" || r[i] == "" {
				continue
			}
			if i > 0 && (r[i] == results.CasePending || r[i] == results.CaseFailed || r[i] == results.CaseSkipped) {
				continue
			}
			seen = true
			if !numericCell.MatchString(r[i]) {
				ok = false
				break
			}
		}
		t.Right[i] = seen && ok
	}
}

// breakdownTable lists the profiled cases' milliseconds per layer by
// component, and the ops outside the layers per step.
func breakdownTable(runs []charts.RunData) *htmlTable {
	bd := charts.Breakdown(runs, nil)
	if len(bd.Bars) == 0 {
		return nil
	}
	t := &htmlTable{Title: "Decode step breakdown (profile timing, median over repetitions)",
		Header: []string{"case", "layers"}}
	// Only the components some case has: a dense model has no MoE column.
	var comps []string
	for _, c := range charts.Components {
		for _, b := range bd.Bars {
			if b.MS[c] > 0 {
				comps = append(comps, c)
				break
			}
		}
	}
	for _, c := range comps {
		t.Header = append(t.Header, c+" ms/layer")
	}
	t.Header = append(t.Header, "total ms/layer", "outside layers ms/step")
	for _, b := range bd.Bars {
		row := []string{b.Label, strconv.Itoa(b.Layers)}
		total, outside := 0.0, 0.0
		for _, c := range comps {
			row = append(row, fmt.Sprintf("%.4f", b.MS[c]))
			total += b.MS[c]
		}
		for _, v := range b.OutsideMS {
			outside += v
		}
		row = append(row, fmt.Sprintf("%.4f", total), fmt.Sprintf("%.4f", outside))
		t.Rows = append(t.Rows, row)
	}
	t.Notes = []string{"Per-layer times are op timings of layers 0..N-1 summed by component and divided by the layers run; ops outside the layers (embedding, final norm, lm_head, sampling) are per decode step."}
	align(t)
	return t
}

// historyTable lists the documented throughput figures of model, as the
// history chart draws them.
func historyTable(hist []history.Point, model string, bytes roofline.ModelBytes) *htmlTable {
	t := &htmlTable{Title: "Documented throughput figures of " + model,
		Header: []string{"date", "hardware", "series", "batch", "metric", "value", "of roofline", "source", "section"}}
	for _, p := range hist {
		if !history.SameModel(p.Model, model) || !history.MeasuredThroughput(p.Metric) {
			continue
		}
		b := "-"
		if p.Batch > 0 {
			b = strconv.Itoa(p.Batch)
		}
		v := p.Figure()
		roof := "-"
		if f, l, ok := roofline.Of(p, bytes); ok {
			roof = fmt.Sprintf("%.1f%% of %.0f tok/s (%s)", f*100, l.TokS, l.GPU.Chip)
		}
		t.Rows = append(t.Rows, []string{p.Date, dash(p.Hardware), dash(p.Series), b, p.Metric, v + " " + p.Unit, roof, p.Source, p.Section})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	align(t)
	return t
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"right": func(t htmlTable, i int) bool { return i < len(t.Right) && t.Right[i] },
	"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="mtlbench{{with .ToolVersion}} {{.}}{{end}}">
<title>{{.Title}}</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1.5em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0 0.4em; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; vertical-align: top; }
th { background: #f4f4f4; text-align: left; }
td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.meta th { width: 9em; }
.runs { display: flex; flex-wrap: wrap; gap: 1.5em; }
.warn { background: #fff6e0; border-left: 4px solid #e69f00; padding: 0.5em 0.8em; margin: 0.6em 0; }
figure { margin: 1.5em 0; }
figcaption { color: #444; font-size: 0.92em; max-width: 75em; }
figcaption .note { color: #8a5a00; }
.tnote { color: #555; font-size: 0.88em; margin: 0.2em 0 1em; }
details { margin: 0.5em 0 1.5em; }
summary { cursor: pointer; color: #0366d6; }
footer { color: #777; font-size: 0.85em; margin-top: 3em; border-top: 1px solid #ddd; padding-top: 0.5em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sub">Generated {{date .Now}} from {{.DBPath}}</p>
{{range .Warnings}}<div class="warn">{{.}}</div>
{{end}}
<h2>Runs</h2>
<div class="runs">
{{range .Runs}}<table class="meta">
<caption><b>run {{.ID}}</b></caption>
{{range .Fields}}<tr><th>{{.K}}</th><td>{{.V}}</td></tr>
{{end}}</table>
{{end}}</div>
<h2>Charts</h2>
{{range .Figures}}{{template "figure" .}}{{end}}
{{with .NotDrawn}}<p class="tnote">Not drawn, for want of the data they are drawn from: {{range $i, $n := .}}{{if $i}}; {{end}}{{$n}}{{end}}.</p>{{end}}
<h2>Summary</h2>
{{range .Summaries}}{{if .Details}}<details><summary>{{.Title}}</summary>
{{template "table" .}}</details>
{{else}}<h3>{{.Title}}</h3>
{{template "table" .}}{{end}}{{end}}
{{with .Breakdown}}<h3>{{.Title}}</h3>
{{template "table" .}}{{end}}
<h2>Documented history{{with .HistoryModel}}: {{.}}{{end}}</h2>
{{with .History}}{{template "figure" .}}{{else}}<p>{{with .HistoryNone}}{{.}}{{else}}No documented throughput figures to compare with.{{end}}</p>{{end}}
{{with .HistoryTable}}<details><summary>{{.Title}} ({{len .Rows}})</summary>
{{template "table" .}}</details>{{end}}
<footer>mtlbench{{with .ToolVersion}} {{.}}{{end}}. Medians with 95% confidence intervals (golang.org/x/perf/benchmath, no distribution assumed). Charts are also saved beside this page as PNG and SVG.</footer>
</body>
</html>
{{define "figure"}}<figure id="{{.ID}}">
{{.SVG}}
<figcaption>{{.Caption}}{{range .Notes}} <span class="note">{{.}}</span>{{end}} Files: <a href="{{.PNG}}">{{.PNG}}</a>, <a href="{{.SVGFile}}">{{.SVGFile}}</a>.</figcaption>
</figure>
{{end}}
{{define "table"}}{{$t := .}}{{if .Header}}<table>
<thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if right $t $i}} class="r"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</tbody>
</table>{{end}}
{{range .Notes}}<p class="tnote">{{.}}</p>
{{end}}{{end}}`
