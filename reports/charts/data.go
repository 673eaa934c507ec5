package charts

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/roofline"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
)

// Point is one plotted value with its 95% confidence interval; Lo and Hi
// are NaN when there is none (too few samples for a 95% interval).
type Point struct {
	X, Y   float64
	Lo, Hi float64
}

// Series is one line of a line chart, points in X order.
type Series struct {
	Label  string
	Points []Point
	// Documented marks figures from the project's documents (dashed).
	Documented bool
}

// BatchData is ThroughputVsBatch's input: decode tok/s against batch size.
type BatchData struct {
	Title  string // "" = default title
	Series []Series
}

// ChunkData is MoEChunkCurve's input: a time (YLabel says which, with its
// unit) against the MoE chunk size.
type ChunkData struct {
	Title  string
	YLabel string // e.g. "MoE time per layer (ms)"
	Series []Series
}

// BreakdownBar is one stacked bar: milliseconds per layer per decode step
// by component (keys of Components), from op timings averaged over the
// layers run.
type BreakdownBar struct {
	Label string
	MS    map[string]float64
	// Layers is how many layers the average is over; OutsideMS is the time
	// per decode step of ops outside the layers (embedding, lm_head), by
	// component: not per layer, so it is not drawn in the bars.
	Layers     int
	OutsideMS  map[string]float64
	Documented bool
}

// BreakdownData is ComponentBreakdown's input.
type BreakdownData struct {
	Title string
	Bars  []BreakdownBar
}

// RooflineBar is one case's achieved fraction of the memory-bandwidth
// roofline; Group (a run) sets the colour and the legend entry.
type RooflineBar struct {
	Label, Group string
	Value        float64
	Lo, Hi       float64 // 95% CI, NaN when none
}

// RooflineData is RooflineFraction's input.
type RooflineData struct {
	Title string
	Bars  []RooflineBar
}

// TimelinePoint is one figure at a date ("2024-12-11", "2025-12" or
// Undated). Lo/Hi is a documented range or a measured 95% CI (NaN: none).
type TimelinePoint struct {
	Date      string
	Value     float64
	Lo, Hi    float64
	Qualifier string // documented qualifier: "~", ">=", "range", ...
}

// TimelineSeries is one series of the history timeline. Hardware is part
// of the series' identity: figures from different hardware are never one
// series. Truncated series (a run of the first layers of a model) are drawn
// as markers only, never joined by lines.
type TimelineSeries struct {
	Label      string
	Hardware   string
	Documented bool
	Truncated  bool
	Points     []TimelinePoint
}

// TimelineData is HistoryTimeline's input.
type TimelineData struct {
	Title  string
	Model  string
	Series []TimelineSeries
	// Rooflines are the memory-bandwidth rooflines of decode tok/s of the
	// documented machines (roofline.Documented), drawn as horizontal lines.
	Rooflines []roofline.Line
	// Notes explain what was left out (runs of other models, ...).
	Notes []string
}

// Undated is the Date of documented figures whose document gives no date.
const Undated = "unknown"

// RunData is one run as the charts need it.
type RunData struct {
	Run   results.Run
	Cases []CaseData
}

// CaseData is one case with its per-metric summaries and op timings.
type CaseData struct {
	results.Case
	Stats   map[string]*stats.Summary
	Timings []results.OpTiming
}

// LoadRuns reads the runs (in the given order) with their cases, sample
// summaries and op timings.
func LoadRuns(db *results.DB, runIDs []int64) ([]RunData, error) {
	var out []RunData
	for _, id := range runIDs {
		r, err := db.GetRun(id)
		if err != nil {
			return nil, err
		}
		cases, err := db.Cases(id)
		if err != nil {
			return nil, err
		}
		samples, err := db.RunSamples(id)
		if err != nil {
			return nil, err
		}
		rd := RunData{Run: *r}
		for _, c := range cases {
			cd := CaseData{Case: c, Stats: stats.ByMetric(samples[c.ID])}
			if cd.Timings, err = db.OpTimings(c.ID); err != nil {
				return nil, err
			}
			rd.Cases = append(rd.Cases, cd)
		}
		out = append(out, rd)
	}
	return out, nil
}

// pointOf is a summary as a plotted point.
func pointOf(x float64, s *stats.Summary) Point {
	p := Point{X: x, Y: s.Center, Lo: math.NaN(), Hi: math.NaN()}
	if s.N > 1 && !math.IsInf(s.Lo, 0) && !math.IsInf(s.Hi, 0) && !math.IsNaN(s.Lo) && !math.IsNaN(s.Hi) {
		p.Lo, p.Hi = s.Lo, s.Hi
	}
	return p
}

// summarize is stats.Summarize as a point.
func summarize(x float64, vals []float64) Point {
	if len(vals) == 0 {
		return Point{X: x, Y: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	}
	sorted := append([]float64(nil), vals...)
	sort.Float64s(sorted)
	s := &stats.Summary{N: len(sorted), Summary: stats.Summarize(sorted), Values: sorted}
	return pointOf(x, s)
}

func (c *CaseData) done() bool { return c.Status == results.CaseDone }

// group is the case's entry name in the suite (before the first "/").
func (c *CaseData) group() string {
	g, _, _ := strings.Cut(c.Name, "/")
	return g
}

func (c *CaseData) truncated() bool { return c.LayersTotal > 0 && c.LayersRun < c.LayersTotal }

// layersNote is "4/48 layers" for a layer-limited case, "" otherwise.
func (c *CaseData) layersNote() string {
	if !c.truncated() {
		return ""
	}
	return fmt.Sprintf("%d/%d layers", c.LayersRun, c.LayersTotal)
}

func (c *CaseData) intParam(name string) (int, bool) {
	v, ok := c.Params[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, err == nil
}

// paramsWithout is the case's parameter key without the named parameters
// and without the "tuned.*" ones: those record what the engine picked (the
// tuned kernel config, which can follow batch or chunk size), not what the
// suite asked for, so they must not split a sweep into separate lines.
func (c *CaseData) paramsWithout(names ...string) string {
	p := make(map[string]string, len(c.Params))
	for k, v := range c.Params {
		if !strings.HasPrefix(k, "tuned.") {
			p[k] = v
		}
	}
	for _, n := range names {
		delete(p, n)
	}
	return results.CanonicalKey(p)
}

// RunLabel names a run in legends: "run 7", its tag, and "emulated" when
// the numbers come from an emulated device.
func RunLabel(r results.Run) string {
	s := fmt.Sprintf("run %d", r.ID)
	if r.Tag != "" {
		s += " [" + r.Tag + "]"
	}
	if r.Emulated {
		s += " (emulated)"
	}
	return s
}

// Hardware names the device a run measured: the GPU when there is one,
// the CPU model otherwise; ", emulated" when it was emulated.
func Hardware(r results.Run) string {
	h := machineName(r)
	if r.Emulated {
		h += ", emulated"
	}
	return h
}

func machineName(r results.Run) string {
	for _, h := range []string{r.Machine.GPUName, r.Machine.CPUModel, r.Machine.Hostname} {
		if h != "" {
			return h
		}
	}
	return "unknown machine"
}

// part is one component of a legend label.
type part struct{ key, val string }

// labels joins each series' parts, dropping parts whose value is the same
// for every series (they go in the title) unless the key is in keep.
func labels(descs [][]part, keep ...string) []string {
	keepSet := map[string]bool{}
	for _, k := range keep {
		keepSet[k] = true
	}
	vals := map[string]map[string]bool{}
	for _, d := range descs {
		for _, p := range d {
			if vals[p.key] == nil {
				vals[p.key] = map[string]bool{}
			}
			vals[p.key][p.val] = true
		}
	}
	out := make([]string, len(descs))
	for i, d := range descs {
		var s []string
		for _, p := range d {
			if p.val == "" {
				continue
			}
			// A part missing from some series also tells them apart.
			present := 0
			for _, e := range descs {
				for _, q := range e {
					if q.key == p.key {
						present++
						break
					}
				}
			}
			if keepSet[p.key] || len(vals[p.key]) > 1 || present < len(descs) {
				s = append(s, p.val)
			}
		}
		out[i] = strings.Join(s, ", ")
	}
	return out
}

// shared returns the value of key when every desc has the same one.
func shared(descs [][]part, key string) string {
	v, seen := "", false
	for _, d := range descs {
		found := ""
		for _, p := range d {
			if p.key == key {
				found = p.val
			}
		}
		if seen && found != v {
			return ""
		}
		v, seen = found, true
	}
	return v
}

// batchGroup is a set of a run's model cases that differ in batch only.
type batchGroup struct {
	run   *RunData
	name  string // suite entry
	rest  string // parameters other than batch
	cases []*CaseData
}

// batchGroups picks, per run, the cases that make a throughput-vs-batch
// line: suite entries that sweep batch alone (a "batch-scaling" entry).
// A run with no such entry falls back to any set of cases with at least two
// batch sizes and otherwise equal parameters.
func batchGroups(runs []RunData) []batchGroup {
	var out []batchGroup
	for ri := range runs {
		run := &runs[ri]
		byKey := map[string]*batchGroup{}
		var order []string
		restsPerEntry := map[string]map[string]bool{}
		for ci := range run.Cases {
			c := &run.Cases[ci]
			if !c.done() || c.Kind != results.CaseModel || c.Stats["decode_tok_s"] == nil {
				continue
			}
			if b, ok := c.intParam("batch"); !ok || b <= 0 {
				continue
			}
			rest := c.paramsWithout("batch")
			k := c.group() + "\x00" + rest
			if byKey[k] == nil {
				byKey[k] = &batchGroup{run: run, name: c.group(), rest: rest}
				order = append(order, k)
			}
			byKey[k].cases = append(byKey[k].cases, c)
			if restsPerEntry[c.group()] == nil {
				restsPerEntry[c.group()] = map[string]bool{}
			}
			restsPerEntry[c.group()][rest] = true
		}
		var pure, multi []batchGroup
		for _, k := range order {
			g := byKey[k]
			if distinctBatches(g.cases) < 2 {
				continue
			}
			multi = append(multi, *g)
			if len(restsPerEntry[g.name]) == 1 {
				pure = append(pure, *g)
			}
		}
		if len(pure) > 0 {
			out = append(out, pure...)
		} else {
			out = append(out, multi...)
		}
	}
	return out
}

func distinctBatches(cs []*CaseData) int {
	seen := map[int]bool{}
	for _, c := range cs {
		b, _ := c.intParam("batch")
		seen[b] = true
	}
	return len(seen)
}

// BatchSeries extracts decode tok/s against batch size: one series per run
// and suite entry that sweeps batch (see batchGroups).
func BatchSeries(runs []RunData) BatchData {
	groups := batchGroups(runs)
	var (
		descs  [][]part
		series []Series
	)
	for _, g := range groups {
		s := Series{}
		for _, c := range g.cases {
			b, _ := c.intParam("batch")
			s.Points = append(s.Points, pointOf(float64(b), c.Stats["decode_tok_s"]))
		}
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
		series = append(series, s)
		c0 := g.cases[0]
		descs = append(descs, []part{
			{"run", RunLabel(g.run.Run)}, {"backend", g.run.Run.Backend},
			{"model", c0.Params["model"]}, {"entry", g.name}, {"rest", restLabel(c0)},
			{"layers", c0.layersNote()}, {"timing", g.run.Run.TimingMode + " timing"},
		})
	}
	ls := labels(descs, "run", "backend", "layers")
	for i := range series {
		series[i].Label = ls[i]
	}
	return BatchData{Title: titleWith("Decode throughput vs batch size", descs), Series: series}
}

// restLabel shows a case's non-swept parameters that matter to a reader
// (MoE dispatch), leaving out workload sizes that are the same everywhere.
func restLabel(c *CaseData) string {
	var s []string
	for _, k := range []string{"moe_strategy", "moe_chunk", "dtype"} {
		if v, ok := c.Params[k]; ok {
			s = append(s, k+"="+v)
		}
	}
	return strings.Join(s, " ")
}

// titleWith appends what every series shares (model, timing) to a title.
func titleWith(title string, descs [][]part) string {
	var extra []string
	if m := shared(descs, "model"); m != "" {
		extra = append(extra, m)
	}
	if t := shared(descs, "timing"); t == "profile timing" {
		extra = append(extra, t)
	}
	if a := shared(descs, "arrivals"); strings.HasPrefix(a, "gamma") {
		extra = append(extra, a) // Poisson is what a rate means unless said
	}
	if len(extra) > 0 {
		title += " — " + strings.Join(extra, ", ")
	}
	return title
}

// perLayerMS is, per repetition, the milliseconds per layer per decode
// step of each component (layer >= 0 ops, averaged over the layers), and
// the milliseconds per step of each component outside the layers.
func perLayerMS(ts []results.OpTiming) (perRep map[int]map[string]float64, outside map[int]map[string]float64, layers int) {
	perRep = map[int]map[string]float64{}
	outside = map[int]map[string]float64{}
	layerSet := map[int]map[int]bool{}
	for _, t := range ts {
		if t.Layer < 0 {
			if outside[t.Rep] == nil {
				outside[t.Rep] = map[string]float64{}
			}
			outside[t.Rep][t.Component] += t.Seconds * 1000
			continue
		}
		if perRep[t.Rep] == nil {
			perRep[t.Rep] = map[string]float64{}
			layerSet[t.Rep] = map[int]bool{}
		}
		perRep[t.Rep][t.Component] += t.Seconds * 1000
		layerSet[t.Rep][t.Layer] = true
	}
	for rep, m := range perRep {
		n := len(layerSet[rep])
		layers = max(layers, n)
		for k := range m {
			m[k] /= float64(n)
		}
	}
	return perRep, outside, layers
}

// medianOver is the median over repetitions of each component.
func medianOver(perRep map[int]map[string]float64) map[string]float64 {
	vals := map[string][]float64{}
	for _, m := range perRep {
		for k, v := range m {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, v := range vals {
		out[k] = summarize(0, v).Y
	}
	return out
}

// Breakdown extracts the per-component time per layer of every profiled
// model case, plus the documented per-layer breakdowns of the same models
// from hist (bars labelled "documented: ...").
func Breakdown(runs []RunData, hist []history.Point) BreakdownData {
	var (
		bars   []BreakdownBar
		descs  [][]part
		models = map[string]bool{}
	)
	for ri := range runs {
		run := &runs[ri]
		for ci := range run.Cases {
			c := &run.Cases[ci]
			if !c.done() || c.Kind != results.CaseModel || len(c.Timings) == 0 {
				continue
			}
			perRep, outside, layers := perLayerMS(c.Timings)
			if layers == 0 {
				continue
			}
			bars = append(bars, BreakdownBar{MS: medianOver(perRep), OutsideMS: medianOver(outside), Layers: layers})
			descs = append(descs, []part{{"run", RunLabel(run.Run)}, {"backend", run.Run.Backend},
				{"model", c.Params["model"]}, {"case", c.Name}})
			models[history.ModelKey(c.Params["model"])] = true
		}
	}
	ls := labels(descs, "case")
	for i := range bars {
		bars[i].Label = ls[i]
	}
	title := titleWith("Decode step breakdown per layer", descs)
	bars = append(bars, documentedBreakdowns(hist, models)...)
	return BreakdownData{Title: title, Bars: bars}
}

// documentedBreakdowns are the documents' per-layer component times for
// the given models: one bar per document section and series that states at
// least two components.
func documentedBreakdowns(hist []history.Point, models map[string]bool) []BreakdownBar {
	type key struct{ src, sec, series, hw, date, model string }
	byKey := map[key]map[string]float64{}
	var order []key
	isComp := map[string]bool{}
	for _, c := range Components {
		isComp[c] = true
	}
	for _, p := range hist {
		if p.Metric != "ms_per_layer" || !isComp[p.Component] || !models[history.ModelKey(p.Model)] || p.Params["moe_chunk"] != "" {
			continue
		}
		k := key{p.Source, p.Section, p.Series, p.Hardware, p.Date, p.Model}
		if byKey[k] == nil {
			byKey[k] = map[string]float64{}
			order = append(order, k)
		}
		byKey[k][p.Component] = p.Value
	}
	var out []BreakdownBar
	for _, k := range order {
		if len(byKey[k]) < 2 {
			continue
		}
		hw := k.hw
		if hw == "" {
			hw = "hardware not stated"
		}
		label := fmt.Sprintf("documented: %s, %s (%s, %s)", k.series, k.model, hw, k.date)
		out = append(out, BreakdownBar{Label: label, MS: byKey[k], Documented: true})
	}
	return out
}

// ChunkSeries extracts time against MoE chunk size: one series per run and
// batch size (and other parameters). The time is the MoE component per
// layer when every case was profiled, the decode step time otherwise. The
// documents' chunk-size tables of the same model are added when the time
// is the MoE per-layer time, which is what they report.
func ChunkSeries(runs []RunData, hist []history.Point) ChunkData {
	type grp struct {
		run   *RunData
		rest  string
		cases []*CaseData
	}
	byKey := map[string]*grp{}
	var order []string
	profiled := true
	for ri := range runs {
		run := &runs[ri]
		for ci := range run.Cases {
			c := &run.Cases[ci]
			if !c.done() || c.Kind != results.CaseModel {
				continue
			}
			if ch, ok := c.intParam("moe_chunk"); !ok || ch <= 0 {
				continue
			}
			if c.Stats["step_ms"] == nil && len(c.Timings) == 0 {
				continue
			}
			if !hasComponent(c.Timings, results.CompMoE) {
				profiled = false
			}
			k := fmt.Sprintf("%d\x00%s\x00%s", run.Run.ID, c.group(), c.paramsWithout("moe_chunk"))
			if byKey[k] == nil {
				byKey[k] = &grp{run: run, rest: c.paramsWithout("moe_chunk")}
				order = append(order, k)
			}
			byKey[k].cases = append(byKey[k].cases, c)
		}
	}
	d := ChunkData{YLabel: "decode step time (ms)"}
	if profiled {
		d.YLabel = "MoE time per layer per decode step (ms)"
	}
	var descs [][]part
	models := map[string]bool{}
	for _, k := range order {
		g := byKey[k]
		var s Series
		for _, c := range g.cases {
			ch, _ := c.intParam("moe_chunk")
			if profiled {
				perRep, _, _ := perLayerMS(c.Timings)
				var vals []float64
				for _, m := range perRep {
					vals = append(vals, m[results.CompMoE])
				}
				s.Points = append(s.Points, summarize(float64(ch), vals))
			} else if st := c.Stats["step_ms"]; st != nil {
				s.Points = append(s.Points, pointOf(float64(ch), st))
			}
		}
		if len(s.Points) == 0 {
			continue
		}
		sort.Slice(s.Points, func(i, j int) bool { return s.Points[i].X < s.Points[j].X })
		c0 := g.cases[0]
		batch := "batch " + c0.Params["batch"]
		if c0.Params["batch"] == "" {
			batch = "batch not set"
		}
		d.Series = append(d.Series, s)
		descs = append(descs, []part{{"run", RunLabel(g.run.Run)}, {"backend", g.run.Run.Backend},
			{"model", c0.Params["model"]}, {"batch", batch}, {"strategy", c0.Params["moe_strategy"]},
			{"layers", c0.layersNote()}, {"timing", g.run.Run.TimingMode + " timing"}})
		models[history.ModelKey(c0.Params["model"])] = true
	}
	ls := labels(descs, "batch")
	for i := range d.Series {
		d.Series[i].Label = ls[i]
	}
	d.Title = titleWith("MoE chunk size sweep", descs)
	if profiled {
		d.Series = append(d.Series, documentedChunks(hist, models)...)
	}
	return d
}

func hasComponent(ts []results.OpTiming, comp string) bool {
	for _, t := range ts {
		if t.Component == comp {
			return true
		}
	}
	return false
}

// documentedChunks are the documents' MoE ms-per-layer figures against
// moe_chunk for the given models, one series per table (two points or more).
func documentedChunks(hist []history.Point, models map[string]bool) []Series {
	type key struct{ src, sec, series, hw, model string }
	byKey := map[key][]Point{}
	var order []key
	for _, p := range hist {
		if p.Metric != "ms_per_layer" || p.Component != results.CompMoE || !models[history.ModelKey(p.Model)] {
			continue
		}
		ch, err := strconv.ParseFloat(p.Params["moe_chunk"], 64)
		if err != nil || ch <= 0 {
			continue
		}
		k := key{p.Source, p.Section, p.Series, p.Hardware, p.Model}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], Point{X: ch, Y: p.Value, Lo: math.NaN(), Hi: math.NaN()})
	}
	var out []Series
	for _, k := range order {
		pts := byKey[k]
		if len(pts) < 2 {
			continue
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		hw := k.hw
		if hw == "" {
			hw = "hardware not stated"
		}
		out = append(out, Series{Label: fmt.Sprintf("documented: %s, %s (%s)", k.series, k.model, hw), Points: pts, Documented: true})
	}
	return out
}

// Roofline extracts the achieved fraction of the memory-bandwidth roofline
// (metric roofline_frac) of every model case that has one.
func Roofline(runs []RunData) RooflineData {
	var (
		bars  []RooflineBar
		descs [][]part
	)
	for ri := range runs {
		run := &runs[ri]
		for ci := range run.Cases {
			c := &run.Cases[ci]
			s := c.Stats["roofline_frac"]
			if !c.done() || s == nil {
				continue
			}
			p := pointOf(0, s)
			bars = append(bars, RooflineBar{Label: c.Name, Group: RunLabel(run.Run) + ", " + run.Run.Backend + " on " + machineName(run.Run),
				Value: p.Y, Lo: p.Lo, Hi: p.Hi})
			descs = append(descs, []part{{"model", c.Params["model"]}, {"timing", run.Run.TimingMode + " timing"}})
		}
	}
	return RooflineData{Title: titleWith("Achieved fraction of the memory-bandwidth roofline", descs), Bars: bars}
}

// batchOnlyCases are a run's finished model cases with decode tok/s whose
// suite entry varies nothing but the batch size (a single case counts):
// the cases comparable with documented throughput, leaving out sweeps of
// MoE chunk size or dispatch.
func batchOnlyCases(run *RunData) []*CaseData {
	rests := map[string]map[string]bool{}
	var cases []*CaseData
	for ci := range run.Cases {
		c := &run.Cases[ci]
		if !c.done() || c.Kind != results.CaseModel || c.Stats["decode_tok_s"] == nil {
			continue
		}
		if rests[c.group()] == nil {
			rests[c.group()] = map[string]bool{}
		}
		rests[c.group()][c.paramsWithout("batch")] = true
		cases = append(cases, c)
	}
	var out []*CaseData
	for _, c := range cases {
		if len(rests[c.group()]) == 1 {
			out = append(out, c)
		}
	}
	return out
}

// DocumentedModels are the models the history chart can show: those with a
// documented throughput figure, sorted (a model stated as unknown left out).
func DocumentedModels(hist []history.Point) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range hist {
		if history.MeasuredThroughput(p.Metric) && p.Model != "" && !strings.EqualFold(p.Model, "unknown") && !seen[p.Model] {
			seen[p.Model] = true
			out = append(out, p.Model)
		}
	}
	sort.Strings(out)
	return out
}

// HistoryModel picks the model the history chart shows: the runs' most
// common model that the history documents; "" (no chart) when the runs have
// none, so a small model's runs never sit on a big model's history; the
// most documented model when there are no runs at all.
func HistoryModel(runs []RunData, hist []history.Point) string {
	documented := map[string]string{} // lower -> as documented
	count := map[string]int{}
	for _, p := range hist {
		if history.MeasuredThroughput(p.Metric) {
			documented[history.ModelKey(p.Model)] = p.Model
			count[p.Model]++
		}
	}
	runCount := map[string]int{}
	for _, r := range runs {
		for _, c := range r.Cases {
			if m, ok := documented[history.ModelKey(c.Params["model"])]; ok && c.Kind == results.CaseModel {
				runCount[m]++
			}
		}
	}
	best := func(m map[string]int) string {
		var names []string
		for k := range m {
			if k != "" && !strings.EqualFold(k, "unknown") {
				names = append(names, k)
			}
		}
		sort.Slice(names, func(i, j int) bool {
			if m[names[i]] != m[names[j]] {
				return m[names[i]] > m[names[j]]
			}
			return names[i] < names[j]
		})
		if len(names) == 0 {
			return ""
		}
		return names[0]
	}
	if len(runs) > 0 {
		// Another model's history beside these runs would read as theirs:
		// none rather than the most documented one.
		return best(runCount)
	}
	return best(count)
}

// Timeline extracts the documented throughput figures of model over date,
// one series per document series, batch size and hardware, with the runs'
// decode tok/s of the same model overlaid (cases of suite entries that vary
// batch size alone, see batchOnlyCases). Runs of a truncated model
// (layers run < layers of the model) are their own series, labelled with
// the layer count. model "" picks one with HistoryModel.
func Timeline(runs []RunData, hist []history.Point, model string) TimelineData {
	if model == "" {
		model = HistoryModel(runs, hist)
	}
	d := TimelineData{Model: model, Title: "Documented decode throughput over time — " + model}
	type dkey struct {
		series, hw string
		batch      int
	}
	bySeries := map[dkey]*TimelineSeries{}
	var order []dkey
	type dup struct {
		k     dkey
		date  string
		value float64
	}
	seen := map[dup]bool{}
	undated := 0
	for _, p := range hist {
		if !history.MeasuredThroughput(p.Metric) || !history.SameModel(p.Model, model) {
			continue
		}
		hw := p.Hardware
		if hw == "" || strings.EqualFold(hw, "unknown") {
			hw = "hardware not stated"
		}
		k := dkey{p.Series, hw, p.Batch}
		date := p.Date
		if date == "" || strings.EqualFold(date, "unknown") {
			date = Undated
		}
		// The same figure is often stated in several sections.
		if u := (dup{k, date, p.Value}); seen[u] {
			continue
		} else {
			seen[u] = true
		}
		if date == Undated {
			undated++
		}
		if bySeries[k] == nil {
			label := p.Series
			if label == "" {
				label = "documented"
			}
			if p.Batch > 0 {
				label += fmt.Sprintf(", batch %d", p.Batch)
			}
			label += " (" + hw + ")"
			bySeries[k] = &TimelineSeries{Label: label, Hardware: hw, Documented: true}
			order = append(order, k)
		}
		tp := TimelinePoint{Date: date, Value: p.Value, Lo: math.NaN(), Hi: math.NaN(), Qualifier: p.Qualifier}
		if history.IsRange(p.Qualifier) {
			if hi, err := strconv.ParseFloat(p.Params["max"], 64); err == nil {
				tp.Lo, tp.Hi = p.Value, hi
			}
		}
		bySeries[k].Points = append(bySeries[k].Points, tp)
	}
	for _, k := range order {
		d.Series = append(d.Series, *bySeries[k])
	}
	if undated > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d documented figure(s) of %s carry no date in their document: a time axis has no place for them, so they are not drawn (mtlbench history show --model %q lists them).", undated, model, model))
	}

	// Runs: one series per machine, backend, case and layer count, so a
	// series joins the same measurement across dates only.
	type rkey struct{ hw, backend, name, layers, timing string }
	runSeries := map[rkey]*TimelineSeries{}
	var rorder []rkey
	others := map[string]bool{}
	for ri := range runs {
		run := runs[ri].Run
		for _, c := range batchOnlyCases(&runs[ri]) {
			if m := c.Params["model"]; !history.SameModel(m, model) {
				others[m] = true
				continue
			}
			k := rkey{Hardware(run), run.Backend, c.Name, c.layersNote(), run.TimingMode}
			if runSeries[k] == nil {
				label := fmt.Sprintf("mtlbench %s %s (%s)", run.Backend, c.Name, k.hw)
				if k.layers != "" {
					label += ", " + k.layers
				}
				if run.TimingMode == results.TimingProfile {
					label += ", profile timing"
				}
				runSeries[k] = &TimelineSeries{Label: label, Hardware: k.hw, Truncated: c.truncated()}
				rorder = append(rorder, k)
			}
			p := pointOf(0, c.Stats["decode_tok_s"])
			runSeries[k].Points = append(runSeries[k].Points, TimelinePoint{
				Date: run.StartedAt.UTC().Format("2006-01-02"), Value: p.Y, Lo: p.Lo, Hi: p.Hi})
		}
	}
	for _, k := range rorder {
		d.Series = append(d.Series, *runSeries[k])
	}
	if len(others) > 0 {
		var names []string
		for m := range others {
			names = append(names, m)
		}
		sort.Strings(names)
		d.Notes = append(d.Notes, fmt.Sprintf("Runs of %s are not overlaid: the history chart shows %s only.", strings.Join(names, ", "), model))
	}
	for _, s := range d.Series {
		if s.Truncated {
			d.Notes = append(d.Notes, "Runs of a truncated model (first layers only) are separate series, drawn as markers and never joined to whole-model figures: their tok/s is not a whole-model figure.")
			break
		}
	}
	return d
}
