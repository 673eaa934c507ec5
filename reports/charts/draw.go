package charts

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/mtlbench/mtlbench/reports/roofline"
)

// ErrNoData is returned by the drawing functions when there is nothing to
// draw; callers skip that chart.
var ErrNoData = errors.New("charts: no data for this chart")

// lineStyle is series i's line; documented figures are dashed.
func lineStyle(i int, dashed bool) draw.LineStyle {
	ls := draw.LineStyle{Color: colorAt(i), Width: vg.Points(1.6)}
	if dashed {
		ls.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return ls
}

func glyphStyle(i int, shape draw.GlyphDrawer, radius vg.Length) draw.GlyphStyle {
	return draw.GlyphStyle{Color: colorAt(i), Radius: radius, Shape: shape}
}

// X axis kinds of xyPlot.
const (
	xBatch = iota // log2 when the values span 4x or more; ticks at the values
	xChunk        // always log2; ticks at every power of two
)

// xyPlot draws series as lines with markers and CI error bars; it is the
// body of ThroughputVsBatch and MoEChunkCurve. Log axes are drawn as
// linear axes of log2(x) with ticks labelled in x: gonum's LogScale puts
// the axis label's layout box at the arithmetic midpoint, which squeezes
// the plot.
func xyPlot(c *Chart, series []Series, xkind int) (ci intervals, err error) {
	var out leftOut
	series = out.series(series)
	var xs []float64
	ymax, xmin, xmax := 0.0, math.Inf(1), math.Inf(-1)
	ok := func(p Point) bool { return p.X > 0 && p.X <= maxValue }
	for _, s := range series {
		for _, p := range s.Points {
			if !ok(p) {
				continue
			}
			xs = append(xs, p.X)
			xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
			ymax = math.Max(ymax, p.Y)
			if hasCI(p) {
				ymax = math.Max(ymax, p.Hi)
			}
		}
	}
	if len(xs) == 0 {
		if out.n > 0 {
			return ci, out.nothingDrawable()
		}
		return ci, ErrNoData
	}
	logX := xkind == xChunk || xmax/xmin >= 3.9
	tx := func(x float64) float64 { return x }
	if logX {
		tx = math.Log2
	}
	// Series are dodged sideways a little so that equal values and their
	// error bars stay visible (ticks keep the true positions). However many
	// series there are, the spread stays within a third of the gap between
	// neighbouring x values and inside the axis padding, so that each point
	// stays inside the axes and nearest its own tick.
	span := tx(xmax) - tx(xmin)
	if span == 0 {
		span = 1
	}
	pad := 0.3 // the padding past the outermost x values, in axis units
	if !logX {
		pad = math.Max((xmax-xmin)*0.08, 0.5)
	}
	spread := 1.6 * pad
	sorted := slices.Sorted(slices.Values(xs))
	for i := 1; i < len(sorted); i++ {
		if d := tx(sorted[i]) - tx(sorted[i-1]); d > 0 {
			spread = math.Min(spread, d/3)
		}
	}
	step := 0.015 * span
	if n := len(series); n > 1 {
		step = math.Min(step, spread/float64(n-1))
	}
	dodge := func(i int) float64 { return (float64(i) - float64(len(series)-1)/2) * step }
	for i, s := range series {
		var xys, errs plotter.XYs
		var yerr plotter.YErrors
		for _, p := range s.Points {
			if !ok(p) {
				continue
			}
			x := tx(p.X) + dodge(i)
			xys = append(xys, plotter.XY{X: x, Y: p.Y})
			if ci.add(p) {
				errs = append(errs, plotter.XY{X: x, Y: p.Y})
				yerr = append(yerr, struct{ Low, High float64 }{p.Y - p.Lo, p.Hi - p.Y})
			}
		}
		if len(xys) == 0 {
			continue
		}
		ln := &plotter.Line{XYs: xys, LineStyle: lineStyle(i, s.Documented)}
		sc := &plotter.Scatter{XYs: xys, GlyphStyle: glyphStyle(i, glyphAt(i), vg.Points(3.5))}
		c.plot.Add(ln, sc)
		if len(errs) > 0 {
			c.plot.Add(&plotter.YErrorBars{XYs: errs, YErrors: yerr, CapWidth: vg.Points(6),
				LineStyle: draw.LineStyle{Color: colorAt(i), Width: vg.Points(1)}})
		}
		c.addLegend(s.Label, ln, sc)
	}
	var ticks plot.ConstantTicks
	switch {
	case xkind == xChunk:
		lo, hi := xmin, xmax
		if lo == hi {
			lo, hi = lo/2, hi*2
		}
		ticks = pow2Ticks(lo, hi)
		c.plot.X.Min, c.plot.X.Max = math.Log2(lo)-0.3, math.Log2(hi)+0.3
	case logX:
		ticks = valueTicks(xs)
		c.plot.X.Min, c.plot.X.Max = math.Log2(xmin)-pad, math.Log2(xmax)+pad
	default:
		ticks = valueTicks(xs)
		c.plot.X.Min, c.plot.X.Max = math.Max(xmin-pad, 0), xmax+pad
	}
	for i := range ticks {
		ticks[i].Value = tx(ticks[i].Value)
	}
	c.plot.X.Tick.Marker = ticks
	// Throughput and time start at zero so that ratios read true.
	c.plot.Y.Min, c.plot.Y.Max = 0, ymax*1.1
	c.plot.Y.Tick.Marker = linearTicks(0, ymax*1.1)
	out.note(c)
	return ci, nil
}

// ciNote is the legend line that says what the error bars are, or why
// there are none: too few repetitions for an interval, or intervals of
// zero width (every repetition the same), which have no bar to draw.
func ciNote(c *Chart, ci intervals) {
	switch {
	case ci.drawn:
		c.legendHeader("error bars: 95% CI of the median")
	case ci.zero && !ci.none:
		c.legendHeader("no error bars: each 95% CI")
		c.legendHeader("  has zero width")
	case ci.zero:
		c.legendHeader("no error bars: 95% CIs of zero width")
		c.legendHeader("  or too few repetitions")
	default:
		c.legendHeader("no error bars: too few repetitions")
		c.legendHeader("  for a 95% CI")
	}
}

// ThroughputVsBatch draws decode throughput against batch size, one line
// per series (run, backend), with 95% CI error bars. The x axis is log2
// when the batch sizes span a factor of 4 or more; ticks are at the
// measured batch sizes, labelled where their labels do not overlap.
func ThroughputVsBatch(d BatchData) (*Chart, error) {
	title := d.Title
	if title == "" {
		title = "Decode throughput vs batch size"
	}
	c := newChart(title, "batch size (concurrent sequences)", "decode throughput (tok/s)")
	ci, err := xyPlot(c, d.Series, xBatch)
	if err != nil {
		return nil, err
	}
	ciNote(c, ci)
	return c, nil
}

// MoEChunkCurve draws time against MoE chunk size on a log2 x axis, one
// line per series (batch size), documented tables dashed.
func MoEChunkCurve(d ChunkData) (*Chart, error) {
	title := d.Title
	if title == "" {
		title = "MoE chunk size sweep"
	}
	yl := d.YLabel
	if yl == "" {
		yl = "time per decode step (ms)"
	}
	c := newChart(title, "MoE chunk size ((token, expert) pairs per GEMM, log2 scale)", yl)
	ci, err := xyPlot(c, d.Series, xChunk)
	if err != nil {
		return nil, err
	}
	ciNote(c, ci)
	return c, nil
}

// barGeometry sizes horizontal bar charts: the plot grows with the number
// of bars so labels never overlap, and returns the bar thickness.
func barGeometry(c *Chart, nCats, perCat int) vg.Length {
	slot := vg.Points(float64(12 + 10*perCat))
	c.plotH = max(vg.Inch*3.5, slot*vg.Length(nCats)+vg.Inch*1.4)
	return slot * 0.7 / vg.Length(perCat)
}

// nominalY puts names on the y axis top to bottom and widens the plot by
// the longest name so the data area keeps its width.
func nominalY(c *Chart, names []string) {
	rev := make([]string, len(names))
	longest := vg.Length(0)
	for i, n := range names {
		rev[len(names)-1-i] = n
		longest = max(longest, c.plot.Y.Tick.Label.Width(n))
	}
	c.plot.NominalY(rev...)
	c.plotW += longest
	c.plot.Y.Min, c.plot.Y.Max = -0.6, float64(len(names))-0.4
}

// ComponentBreakdown draws stacked horizontal bars of milliseconds per
// layer per decode step by component, one bar per case (documented
// breakdowns included), the total at the end of each bar.
func ComponentBreakdown(d BreakdownData) (*Chart, error) {
	if len(d.Bars) == 0 {
		return nil, ErrNoData
	}
	title := d.Title
	if title == "" {
		title = "Decode step breakdown per layer"
	}
	c := newChart(title, "time per layer per decode step (ms)", "")
	var out leftOut
	d.Bars = out.breakdown(d.Bars)
	width := barGeometry(c, len(d.Bars), 1)
	n := len(d.Bars)
	names := make([]string, n)
	totals := make([]float64, n)
	for i, b := range d.Bars {
		names[i] = b.Label
		for _, comp := range Components {
			totals[i] += b.MS[comp]
		}
	}
	var below *plotter.BarChart
	for _, comp := range Components {
		vals := make(plotter.Values, n)
		any := false
		for i, b := range d.Bars {
			vals[n-1-i] = b.MS[comp]
			any = any || b.MS[comp] > 0
		}
		if !any {
			continue
		}
		bc, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, err
		}
		bc.Horizontal = true
		bc.Color = componentColors[comp]
		bc.LineStyle = draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		c.plot.Add(bc)
		c.addLegend(componentName(comp), bc)
	}
	if below == nil {
		if out.n > 0 {
			return nil, out.nothingDrawable()
		}
		return nil, ErrNoData
	}
	maxT := 0.0
	lx := make(plotter.XYs, n)
	lt := make([]string, n)
	for i, t := range totals {
		maxT = math.Max(maxT, t)
		lx[n-1-i] = plotter.XY{X: t, Y: float64(n - 1 - i)}
		lt[n-1-i] = fmtMS(t)
	}
	c.plot.Add(&boxLabels{xys: lx, texts: lt})
	nominalY(c, names)
	c.plot.X.Min, c.plot.X.Max = 0, maxT*1.15
	c.plot.X.Tick.Marker = linearTicks(0, maxT*1.15)
	c.legendHeader("bar end: total per layer")
	c.legendHeader("ops outside layers (lm_head...)")
	c.legendHeader("  are not included")
	out.note(c)
	return c, nil
}

func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.3f ms", v)
}

// RooflineFraction draws the achieved fraction of the memory-bandwidth
// roofline per case as horizontal bars (one colour per run), with 95% CI
// error bars and a dashed line at 1.0.
func RooflineFraction(d RooflineData) (*Chart, error) {
	var out leftOut
	if d.Bars = out.roofline(d.Bars); len(d.Bars) == 0 {
		if out.n > 0 {
			return nil, out.nothingDrawable()
		}
		return nil, ErrNoData
	}
	title := d.Title
	if title == "" {
		title = "Achieved fraction of the memory-bandwidth roofline"
	}
	c := newChart(title, "achieved / peak memory read bandwidth (ratio; 1.0 = roofline)", "")
	var cats, groups []string
	catIdx, grpIdx := map[string]int{}, map[string]int{}
	for _, b := range d.Bars {
		if _, ok := catIdx[b.Label]; !ok {
			catIdx[b.Label] = len(cats)
			cats = append(cats, b.Label)
		}
		if _, ok := grpIdx[b.Group]; !ok {
			grpIdx[b.Group] = len(groups)
			groups = append(groups, b.Group)
		}
	}
	// A category holds one bar per run that has the case; bars are
	// spread only among the runs present, so a bar stays on its label.
	present := make([][]RooflineBar, len(cats))
	for _, b := range d.Bars {
		present[catIdx[b.Label]] = append(present[catIdx[b.Label]], b)
	}
	perCat := 1
	for _, p := range present {
		perCat = max(perCat, len(p))
	}
	n := len(cats)
	width := barGeometry(c, n, perCat)
	step := 0.8 / float64(perCat) // data units between bars of a category
	xmax := 1.0
	var ci intervals
	above := false
	// The roofline goes behind the bars and the value labels on top, so
	// that neither hides a number.
	roof := &plotter.Line{XYs: plotter.XYs{{X: 1, Y: -0.6}, {X: 1, Y: float64(n) - 0.4}},
		LineStyle: draw.LineStyle{Color: color.RGBA{200, 0, 0, 255}, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}}
	c.plot.Add(roof)
	thumb := make([]*plotter.BarChart, len(groups))
	var errs, lxy plotter.XYs
	var xerr plotter.XErrors
	var ltxt []string
	for ci0, bars := range present {
		pos := float64(n - 1 - ci0)
		for k, b := range bars {
			y := pos + (float64(len(bars)-1)/2-float64(k))*step // first run on top
			bc, err := plotter.NewBarChart(plotter.Values{b.Value}, width)
			if err != nil {
				return nil, err
			}
			bc.Horizontal = true
			bc.XMin = y
			bc.Color = colorAt(grpIdx[b.Group])
			bc.LineStyle.Width = 0
			c.plot.Add(bc)
			if thumb[grpIdx[b.Group]] == nil {
				thumb[grpIdx[b.Group]] = bc
			}
			xmax = math.Max(xmax, b.Value)
			end := b.Value
			if ci.add(Point{Y: b.Value, Lo: b.Lo, Hi: b.Hi}) {
				errs = append(errs, plotter.XY{X: b.Value, Y: y})
				xerr = append(xerr, struct{ Low, High float64 }{b.Value - b.Lo, b.Hi - b.Value})
				xmax = math.Max(xmax, b.Hi)
				end = b.Hi
			}
			lxy = append(lxy, plotter.XY{X: end, Y: y})
			label := fmt.Sprintf("%.2f", b.Value)
			if b.Value > 1 {
				// Past the roofline: flagged where the number is read.
				label += " > 1 *"
				above = true
			}
			ltxt = append(ltxt, label)
		}
	}
	if len(errs) > 0 {
		c.plot.Add(&plotter.XErrorBars{XYs: errs, XErrors: xerr, CapWidth: width * 0.6,
			LineStyle: draw.LineStyle{Color: color.Black, Width: vg.Points(1)}})
	}
	c.plot.Add(&boxLabels{xys: lxy, texts: ltxt})
	for gi, grp := range groups {
		c.addLegend(grp, thumb[gi])
	}
	c.addLegend("roofline (1.0)", roof)
	nominalY(c, cats)
	c.plot.X.Min, c.plot.X.Max = 0, xmax*1.25
	c.plot.X.Tick.Marker = linearTicks(0, xmax*1.25)
	ciNote(c, ci)
	if above {
		// The explanation travels with the PNG, not only the HTML caption.
		c.legendHeader("* above 1: faster than the measured DRAM")
		c.legendHeader("  read bandwidth, so part of the working")
		c.legendHeader("  set came from caches (small or truncated")
		c.legendHeader("  models); not a whole-model figure")
	}
	out.note(c)
	return c, nil
}

// boxLabels writes text right of each point on a white box, so a grid or
// reference line behind it does not cut through the digits.
type boxLabels struct {
	xys   plotter.XYs
	texts []string
}

func (l *boxLabels) Plot(c draw.Canvas, p *plot.Plot) {
	sty := textStyle(9, color.Gray{Y: 40})
	sty.YAlign = draw.YCenter
	trX, trY := p.Transforms(&c)
	for i, xy := range l.xys {
		pt := vg.Point{X: trX(xy.X) + vg.Points(4), Y: trY(xy.Y)}
		r := sty.Rectangle(l.texts[i]).Add(pt)
		r.Min.X -= 1.5
		r.Max.X += 1.5
		c.SetColor(color.White)
		c.Fill(r.Path())
		c.FillText(sty, pt, l.texts[i])
	}
}

// undatedLabel is the axis label of the slot for undated figures.
const undatedLabel = "undated"

// HistoryTimeline draws documented throughput figures over date with runs
// overlaid. Dates are an ordered axis of the dates that occur (documents
// give days or months); figures whose document gives no date are drawn in a
// separate slot at the right. Each series has its own colour; the marker
// shape is the hardware, and hardware is in every legend label. Series of
// several points are joined, except truncated-model series (markers only).
// The y axis is logarithmic when the values span more than 20x.
func HistoryTimeline(d TimelineData) (*Chart, error) {
	title := d.Title
	if title == "" {
		title = "Documented decode throughput over time"
		if d.Model != "" {
			title += " — " + d.Model
		}
	}
	c := newChart(title, "date (documented or recorded)", "decode throughput (tok/s)")
	var out leftOut
	d.Series = out.timeline(d.Series)
	dateSet := map[string]bool{}
	ymin, ymax := math.Inf(1), math.Inf(-1) // ymin: of the figures above 0
	undated := false
	for _, s := range d.Series {
		for _, p := range s.Points {
			if p.Date == Undated {
				undated = true
			} else {
				dateSet[p.Date] = true
			}
			if p.Value > 0 {
				ymin = math.Min(ymin, p.Value)
			}
			ymax = math.Max(ymax, p.Value)
			if !math.IsNaN(p.Hi) {
				ymax = math.Max(ymax, p.Hi)
			}
			if !math.IsNaN(p.Lo) && p.Lo > 0 {
				ymin = math.Min(ymin, p.Lo)
			}
			if !math.IsNaN(p.Hi) && p.Hi > 0 {
				ymin = math.Min(ymin, p.Hi) // the top of a range from 0 is on the axis
			}
		}
	}
	if math.IsInf(ymax, -1) {
		if out.n > 0 {
			return nil, out.nothingDrawable()
		}
		return nil, ErrNoData
	}
	// The rooflines are on the chart even when far above the figures: how
	// far is the point of drawing them.
	for _, r := range d.Rooflines {
		if r.TokS > 0 && drawable(r.TokS) {
			ymax = math.Max(ymax, r.TokS)
		}
	}
	// A real time axis: each figure at its date (a month or a year at its
	// middle); figures without a date have no place on it and are left out
	// (Timeline's note says how many).
	var dates []string
	for k := range dateSet {
		if _, ok := parseDate(k); ok {
			dates = append(dates, k)
		}
	}
	if len(dates) == 0 {
		return nil, ErrNoData
	}
	sort.Strings(dates) // ISO dates and months sort in time order
	pos := map[string]float64{}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, dt := range dates {
		t, _ := parseDate(dt)
		pos[dt] = float64(t.Unix())
		xmin, xmax = math.Min(xmin, pos[dt]), math.Max(xmax, pos[dt])
	}
	const day = 24 * 3600.0
	pad := math.Max(15*day, (xmax-xmin)*0.06)
	x0, x1 := xmin-pad, xmax+pad
	_ = undated
	// Series sharing a date are spread sideways so none hides another.
	atDate := map[string][]int{}
	for i, s := range d.Series {
		seen := map[string]bool{}
		for _, p := range s.Points {
			if !seen[p.Date] {
				seen[p.Date] = true
				atDate[p.Date] = append(atDate[p.Date], i)
			}
		}
	}
	offset := func(date string, series int) float64 {
		ids := atDate[date]
		if len(ids) < 2 {
			return 0
		}
		// At most a few days apart: sideways enough to see, never a date.
		w := math.Min(0.04*(x1-x0), math.Min(6*day, day*float64(len(ids))))
		for k, id := range ids {
			if id == series {
				return -w/2 + w*float64(k)/float64(len(ids)-1)
			}
		}
		return 0
	}
	var documented, measured []int
	for i, s := range d.Series {
		if s.Documented {
			documented = append(documented, i)
		} else {
			measured = append(measured, i)
		}
	}
	// A log axis is drawn as a linear axis of log10(value) with ticks
	// labelled in tok/s (see xyPlot for why not plot.LogScale).
	logY := ymax/ymin > 20 // false when every figure is 0 (ymin +Inf)
	zeros := 0             // figures of 0 a log axis has no place for
	fromFloor := 0         // ranges reaching down to 0, drawn from the log axis's floor
	ty := func(v float64) float64 { return v }
	ylo, yhi := 0.0, ymax*1.12 // the y axis, in values
	if logY {
		ty = math.Log10
		ylo, yhi = ymin/1.35, ymax*1.35
		if ylo == 0 {
			ylo = ymin // a subnormal figure: dividing lost it
		}
	}
	var floorMarks plotter.XYs // where a range leaves the axis at its floor
	draw1 := func(i int) {
		s := d.Series[i]
		var xys, errs plotter.XYs
		var yerr plotter.YErrors
		pts := append([]TimelinePoint(nil), s.Points...)
		sort.SliceStable(pts, func(a, b int) bool { return pos[pts[a].Date] < pos[pts[b].Date] })
		var joined plotter.XYs // dated points only: undated ones have no time order
		dates := map[string]bool{}
		for _, p := range pts {
			if _, dated := pos[p.Date]; !dated {
				continue
			}
			x := pos[p.Date] + offset(p.Date, i)
			hasRange := !math.IsNaN(p.Lo) && !math.IsNaN(p.Hi) && p.Hi > p.Lo
			if logY && hasRange && p.Lo <= 0 {
				// A log axis has no place for 0, but the rest of the range
				// has one: drawn up from the floor, an arrow there saying it
				// goes on below. A figure of 0 is the range's low end, so
				// the arrow is its mark.
				floor := ty(ylo)
				errs = append(errs, plotter.XY{X: x, Y: floor})
				yerr = append(yerr, struct{ Low, High float64 }{0, ty(p.Hi) - floor})
				floorMarks = append(floorMarks, plotter.XY{X: x, Y: floor})
				fromFloor++
				if p.Value == 0 {
					continue
				}
			}
			if logY && p.Value == 0 {
				zeros++
				continue
			}
			y := ty(p.Value)
			xys = append(xys, plotter.XY{X: x, Y: y})
			if p.Date != Undated {
				joined = append(joined, plotter.XY{X: x, Y: y})
				dates[p.Date] = true
			}
			if hasRange && (p.Lo > 0 || !logY) {
				errs = append(errs, plotter.XY{X: x, Y: y})
				yerr = append(yerr, struct{ Low, High float64 }{y - ty(p.Lo), ty(p.Hi) - y})
			}
		}
		if len(errs) > 0 {
			c.plot.Add(&plotter.YErrorBars{XYs: errs, YErrors: yerr, CapWidth: vg.Points(5),
				LineStyle: draw.LineStyle{Color: colorAt(i), Width: vg.Points(1)}})
		}
		if len(xys) == 0 {
			if len(errs) > 0 {
				c.addLegend(s.Label, &plotter.Scatter{GlyphStyle: glyphStyle(i, glyphAt(i), vg.Points(3.5))})
			}
			return
		}
		radius := vg.Points(3.5)
		if !s.Documented {
			radius = vg.Points(4.5)
		}
		// Colour, marker and dash all change from series to series, so no
		// two of them look alike even past the palette's length.
		sc := &plotter.Scatter{XYs: xys, GlyphStyle: glyphStyle(i, glyphAt(i), radius)}
		thumbs := []plot.Thumbnailer{sc}
		if !s.Truncated && len(dates) > 1 {
			ls := lineStyle(i, false)
			if s.Documented {
				ls.Dashes = dashAt(i)
			}
			ln := &plotter.Line{XYs: joined, LineStyle: ls}
			c.plot.Add(ln)
			thumbs = append([]plot.Thumbnailer{ln}, sc)
		}
		c.plot.Add(sc)
		c.addLegend(s.Label, thumbs...)
	}
	if len(documented) > 0 {
		c.legendHeader("documented (project documents):")
		for _, i := range documented {
			draw1(i)
		}
	}
	if len(measured) > 0 {
		c.legendHeader("measured by mtlbench:")
		for _, i := range measured {
			draw1(i)
		}
	}
	drawRooflines(c, d.Rooflines, x0, x1, ty)
	c.plot.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02"}
	if xmax-xmin > 3*365*day {
		c.plot.X.Tick.Marker = plot.TimeTicks{Format: "2006"}
	}
	c.plot.X.Min, c.plot.X.Max = x0, x1
	if len(floorMarks) > 0 {
		arrows := &plotter.Scatter{XYs: floorMarks, GlyphStyle: draw.GlyphStyle{Color: color.Black, Radius: vg.Points(4), Shape: downArrow{}}}
		c.plot.Add(arrows)
		what := "ranges reach"
		if fromFloor == 1 {
			what = "range reaches"
		}
		c.addLegend(fmt.Sprintf("%d %s down to 0: drawn from", fromFloor, what), arrows)
		c.legendHeader("  the axis floor (a log axis has no 0)")
	}
	if logY {
		lo, hi := ylo, yhi
		ticks := logTicks(lo, hi)
		for i := range ticks {
			ticks[i].Value = math.Log10(ticks[i].Value)
		}
		c.plot.Y.Min, c.plot.Y.Max = math.Log10(lo), math.Log10(hi)
		c.plot.Y.Tick.Marker = ticks
		c.plot.Y.Label.Text += ", log scale"
	} else {
		top := yhi
		if top == 0 {
			top = 1 // every figure 0
		}
		c.plot.Y.Min, c.plot.Y.Max = 0, top
		c.plot.Y.Tick.Marker = linearTicks(0, top)
	}
	c.plot.X.Tick.Label.Rotation = math.Pi / 6
	c.plot.X.Tick.Label.XAlign = draw.XRight
	if zeros > 0 {
		what := "figures"
		if zeros == 1 {
			what = "figure"
		}
		c.legendHeader(fmt.Sprintf("* %d %s of 0 not drawn:", zeros, what))
		c.legendHeader("  a log axis has no place for 0")
	}
	out.note(c)
	return c, nil
}

// downArrow is a filled triangle whose tip is at the point, pointing down:
// a range that goes on below the log axis's floor.
type downArrow struct{}

func (downArrow) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	r := sty.Radius
	var p vg.Path
	p.Move(vg.Point{X: pt.X, Y: pt.Y})
	p.Line(vg.Point{X: pt.X - r, Y: pt.Y + 1.6*r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + 1.6*r})
	p.Close()
	c.SetColor(sty.Color)
	c.Fill(p)
}

// dashes are the documented series' line patterns, cycled apart from the
// palette so series i and i+len(palette) differ.
var dashes = [][]vg.Length{
	{vg.Points(5), vg.Points(3)},
	{vg.Points(2), vg.Points(2)},
	{vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)},
	{vg.Points(10), vg.Points(4)},
	{vg.Points(1), vg.Points(3)},
	{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2), vg.Points(1), vg.Points(2)},
}

func dashAt(i int) []vg.Length { return dashes[(i/len(palette)+i)%len(dashes)] }

// parseDate reads a documented date: a day, a month (its 15th) or a year
// (its 1 July), so each has one place on a time axis.
func parseDate(s string) (time.Time, bool) {
	for _, f := range []struct {
		layout string
		mid    time.Duration
	}{{"2006-01-02", 0}, {"2006-01", 14 * 24 * time.Hour}, {"2006", 181 * 24 * time.Hour}} {
		if t, err := time.Parse(f.layout, s); err == nil {
			return t.Add(f.mid), true
		}
	}
	return time.Time{}, false
}

// rooflineColors are dark and apart from the series palette's first
// colours, so a roofline does not read as a series.
var rooflineColors = []color.Color{
	color.RGBA{200, 0, 0, 255}, color.RGBA{120, 0, 90, 255}, color.RGBA{90, 60, 0, 255}, color.RGBA{0, 0, 0, 255},
}

// drawRooflines draws each machine's decode roofline as a horizontal
// dash-dotted line across [x0, x1], labelled with its tok/s at the left, and
// lists them in the legend as "<chip> roofline (<GB/s> GB/s)".
func drawRooflines(c *Chart, lines []roofline.Line, x0, x1 float64, ty func(float64) float64) {
	var lxy plotter.XYs
	var ltxt []string
	first := true
	for i, r := range lines {
		if !(r.TokS > 0) || !drawable(r.TokS) {
			continue
		}
		if first {
			c.legendHeader("memory-bandwidth rooflines (batch 1):")
			first = false
		}
		y := ty(r.TokS)
		ln := &plotter.Line{XYs: plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}},
			LineStyle: draw.LineStyle{Color: rooflineColors[i%len(rooflineColors)], Width: vg.Points(1.4),
				Dashes: []vg.Length{vg.Points(7), vg.Points(2), vg.Points(1.5), vg.Points(2)}}}
		c.plot.Add(ln)
		c.addLegend(r.Label(), ln)
		lxy = append(lxy, plotter.XY{X: x0, Y: y})
		ltxt = append(ltxt, fmt.Sprintf("%s: %s tok/s", r.GPU.Chip, fmtNum(r.TokS)))
	}
	if len(lxy) > 0 {
		c.plot.Add(&boxLabels{xys: lxy, texts: ltxt})
	}
}
