// Package charts draws mtlbench's report charts with gonum.org/v1/plot:
// decode throughput against batch size, the per-component breakdown of a
// decode step, the MoE chunk-size curve, the documented performance
// history with new runs overlaid, and the achieved fraction of the
// memory-bandwidth roofline. Each chart is written as PNG and SVG.
//
// Extraction and drawing are separate: LoadRuns reads runs from a
// results.DB into plain structs, BatchSeries/Breakdown/ChunkSeries/
// Timeline/Roofline turn those into chart data (BatchData, BreakdownData,
// ...), and ThroughputVsBatch/ComponentBreakdown/... draw chart data, so
// the drawing can be tested on hand-made series. Build and WriteCharts do
// all of it for a set of run ids.
//
// Every chart has a title, axis labels with units and a legend. Legends are
// drawn in a panel to the right of the plot area, never over the data.
package charts

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	stdfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is a drawn chart, ready to be written as PNG or SVG.
type Chart struct {
	// Title is the chart's title as drawn.
	Title string

	plot   *plot.Plot
	legend plot.Legend
	// plotW and plotH are the size of the plot area (axes and data); the
	// legend panel is added to the right of it.
	plotW, plotH vg.Length
}

// PNG resolution: 8 in wide at 120 dpi keeps 10 pt tick labels readable.
const pngDPI = 120

// Default plot area size.
const (
	defaultW = 8 * vg.Inch
	defaultH = 5 * vg.Inch
)

const legendGap = 14 // points between plot area and legend panel

var (
	sans     = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBold = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: stdfont.WeightBold}
)

// newChart returns a chart with mtlbench's fonts, a light grid, and
// the title and axis labels set.
func newChart(title, xLabel, yLabel string) *Chart {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = font.From(sansBold, 13)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 10)
	}
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	leg := plot.NewLegend()
	leg.TextStyle.Font = font.From(sans, 10)
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(3)
	return &Chart{Title: title, plot: p, legend: leg, plotW: defaultW, plotH: defaultH}
}

// addLegend adds an entry to the chart's legend panel.
func (c *Chart) addLegend(name string, thumbs ...plot.Thumbnailer) {
	c.legend.Add(name, thumbs...)
}

// legendHeader adds a line of text with no symbol (a group heading).
func (c *Chart) legendHeader(name string) {
	c.legend.Add(name)
}

// size is the whole canvas: plot area plus legend panel, tall enough for
// both.
func (c *Chart) size() (w, h, legendW vg.Length) {
	r := c.legend.Rectangle(draw.Canvas{})
	legendW = r.Size().X + legendGap + 10
	titleH := vg.Length(0)
	if c.plot.Title.Text != "" {
		titleH = c.plot.Title.TextStyle.Rectangle(c.plot.Title.Text).Size().Y + c.plot.Title.Padding
	}
	h = max(c.plotH, r.Size().Y+titleH+20)
	w = c.plotW + legendW
	// A title wider than the plot area gets the room it needs.
	if tw := c.plot.Title.TextStyle.Rectangle(c.plot.Title.Text).Size().X + 20; tw > w {
		w = tw
	}
	return w, h, legendW
}

// drawOn draws the chart through a guard, so that a shape far off the
// canvas is an error rather than a rasteriser that never returns.
func (c *Chart) drawOn(vc vg.CanvasSizer) error {
	g := newGuard(vc)
	c.draw(g)
	return g.err
}

func (c *Chart) draw(vc vg.CanvasSizer) {
	_, _, legendW := c.size()
	dc := draw.New(vc)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	pad := vg.Points(6)
	plotArea := draw.Crop(dc, pad, -(legendW + pad), pad, -pad)
	if ts, ok := c.plot.X.Tick.Marker.(plot.ConstantTicks); ok && c.plot.X.Tick.Label.Rotation == 0 {
		da := c.plot.DataCanvas(plotArea)
		c.plot.X.Tick.Marker = thinLabels(ts, c.plot.X.Tick.Label, c.plot.X.Min, c.plot.X.Max, da.Max.X-da.Min.X)
	}
	c.plot.Draw(plotArea)
	titleH := vg.Length(0)
	if c.plot.Title.Text != "" {
		titleH = c.plot.Title.TextStyle.Rectangle(c.plot.Title.Text).Size().Y + c.plot.Title.Padding
	}
	legArea := dc
	legArea.Min.X = plotArea.Max.X + legendGap
	legArea.Max.Y -= titleH + pad + 4
	legArea.Min.Y += pad
	c.legend.Draw(legArea)
}

// PNG renders the chart as a PNG image.
func (c *Chart) PNG() ([]byte, error) {
	w, h, _ := c.size()
	vc := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(pngDPI))}
	if err := c.drawOn(vc); err != nil {
		return nil, fmt.Errorf("charts: %s: png: %w", c.Title, err)
	}
	var b bytes.Buffer
	if _, err := vc.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("charts: %s: png: %w", c.Title, err)
	}
	return b.Bytes(), nil
}

// SVG renders the chart as an SVG document. Text stays text; the font
// family gets metric-compatible fallbacks (Arial, Helvetica) because
// browsers without Liberation Sans would otherwise use a serif font.
func (c *Chart) SVG() ([]byte, error) {
	w, h, _ := c.size()
	vc := vgsvg.New(w, h)
	if err := c.drawOn(vc); err != nil {
		return nil, fmt.Errorf("charts: %s: svg: %w", c.Title, err)
	}
	var b bytes.Buffer
	if _, err := vc.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("charts: %s: svg: %w", c.Title, err)
	}
	out := bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	return out, nil
}

// Save writes the chart to dir/name.png and dir/name.svg, creating dir.
func (c *Chart) Save(dir, name string) error {
	_, err := c.SaveFiles(dir, name)
	return err
}

// SaveFiles is Save returning the paths written (png first).
func (c *Chart) SaveFiles(dir, name string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	png, err := c.PNG()
	if err != nil {
		return nil, err
	}
	svg, err := c.SVG()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		ext  string
		data []byte
	}{{".png", png}, {".svg", svg}} {
		p := filepath.Join(dir, name+f.ext)
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// palette is Okabe-Ito, then darker and lighter tones: distinguishable with
// the common colour-vision deficiencies, in this order.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{120, 120, 120, 255}, // grey
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{140, 86, 75, 255},   // brown
	color.RGBA{148, 103, 189, 255}, // purple
	color.RGBA{188, 189, 34, 255},  // olive
	color.RGBA{23, 190, 207, 255},  // cyan
	color.RGBA{0, 60, 110, 255},    // navy
	color.RGBA{150, 40, 20, 255},   // dark red
	color.RGBA{0, 100, 70, 255},    // dark green
	color.RGBA{130, 60, 110, 255},  // plum
	color.RGBA{160, 110, 0, 255},   // ochre
	color.RGBA{250, 128, 114, 255}, // salmon
	color.RGBA{70, 70, 70, 255},    // dark grey
	color.RGBA{180, 170, 120, 255}, // khaki
}

func colorAt(i int) color.Color { return palette[i%len(palette)] }

// glyphs are cycled per series so that series differ in shape as well as
// colour (and stay apart in greyscale print).
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{},
	draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

func glyphAt(i int) draw.GlyphDrawer { return glyphs[i%len(glyphs)] }

// Component colours are fixed so the same component looks the same in
// every chart.
var componentColors = map[string]color.Color{
	"attention": color.RGBA{0, 114, 178, 255},
	"moe":       color.RGBA{213, 94, 0, 255},
	"mlp":       color.RGBA{230, 159, 0, 255},
	"norm":      color.RGBA{0, 158, 115, 255},
	"other":     color.RGBA{150, 150, 150, 255},
}

// Components lists the op-timing components in drawing order.
var Components = []string{"attention", "moe", "mlp", "norm", "other"}

// componentName is a component as a person reads it in a legend.
func componentName(c string) string {
	switch c {
	case "moe":
		return "MoE"
	case "mlp":
		return "MLP (dense)"
	case "norm":
		return "norm (RMSNorm)"
	}
	return c
}

// pow2Ticks labels every power of two in [lo, hi]: batch sizes and chunk
// sizes are powers of two, so these are the values people look for.
func pow2Ticks(lo, hi float64) plot.ConstantTicks {
	if !finiteRange(lo, hi) {
		return nil
	}
	var ts []plot.Tick
	for v := 1.0 / 1024; v <= hi*1.0001; v *= 2 {
		if v >= lo*0.9999 {
			ts = append(ts, plot.Tick{Value: v, Label: fmtNum(v)})
		}
	}
	return oneNotation(ts)
}

// valueTicks labels exactly the given values (plus none other).
func valueTicks(vals []float64) plot.ConstantTicks {
	sort.Float64s(vals)
	var ts []plot.Tick
	for i, v := range vals {
		if i > 0 && v == vals[i-1] {
			continue
		}
		ts = append(ts, plot.Tick{Value: v, Label: fmtNum(v)})
	}
	return oneNotation(ts)
}

// thinLabels keeps every tick of ts but blanks the labels that would
// overlap the label kept before them, on a horizontal axis from min to max
// drawn over width: many batch or chunk sizes, each with its own tick, would
// otherwise print their numbers over one another. The first label is always
// kept; ts is not changed.
func thinLabels(ts plot.ConstantTicks, sty text.Style, min, max float64, width vg.Length) plot.ConstantTicks {
	if !(max > min) || width <= 0 {
		return ts
	}
	out := slices.Clone(ts)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	gap := sty.Width("0") // at least a digit's width between two labels
	lastRight := vg.Length(math.Inf(-1))
	for i, t := range out {
		if t.Label == "" {
			continue
		}
		x := vg.Length((t.Value - min) / (max - min) * float64(width))
		half := sty.Width(t.Label) / 2
		if x-half < lastRight+gap {
			out[i].Label = ""
			continue
		}
		lastRight = x + half
	}
	return out
}

// logTicks labels 1, 2 and 5 times each power of ten in [lo, hi], with
// unlabelled minor ticks between; plot.LogTicks labels only the powers
// of ten, which leaves a narrow range (say 3..40 tok/s) unreadable. Over
// more than a dozen decades it labels a power of ten every few decades:
// thousands of ticks take seconds to draw, and none can be read.
func logTicks(lo, hi float64) plot.ConstantTicks {
	if !finiteRange(lo, hi) || lo <= 0 {
		return nil
	}
	e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if e1-e0 > 12 {
		return sparseLogTicks(lo, hi, e0, e1)
	}
	var ts []plot.Tick
	for e := e0; e <= e1; e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo*0.9999 || v > hi*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = fmtNum(v)
			}
			ts = append(ts, t)
		}
	}
	return oneNotation(ts)
}

// sparseLogTicks labels about a dozen powers of ten from 10^e0 to 10^e1.
func sparseLogTicks(lo, hi, e0, e1 float64) plot.ConstantTicks {
	step := math.Ceil((e1 - e0) / 12)
	var ts []plot.Tick
	for e := math.Ceil(e0/step) * step; e <= e1; e += step {
		if v := math.Pow(10, e); v >= lo*0.9999 && v <= hi*1.0001 {
			ts = append(ts, plot.Tick{Value: v, Label: fmtNum(v)})
		}
	}
	return oneNotation(ts)
}

// finiteRange reports whether lo..hi is an axis range ticks can be put on:
// an infinite bound would have the tick loops run for ever.
func finiteRange(lo, hi float64) bool {
	return !math.IsInf(lo, 0) && !math.IsInf(hi, 0) && !math.IsNaN(lo) && !math.IsNaN(hi) && hi >= lo
}

// linearTicks labels about six round values (1, 2, 2.5 or 5 times a power
// of ten apart) in [lo, hi], with an unlabelled minor tick between each;
// plot.DefaultTicks often labels only two or three values.
func linearTicks(lo, hi float64) plot.ConstantTicks {
	if !finiteRange(lo, hi) {
		return nil
	}
	if !(hi > lo) {
		return plot.ConstantTicks{{Value: lo, Label: fmtNum(lo)}}
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []plot.Tick
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		v := k * step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts = append(ts, plot.Tick{Value: v, Label: fmtNum(v)})
		if mid := v + step/2; mid <= hi {
			ts = append(ts, plot.Tick{Value: mid})
		}
	}
	return oneNotation(ts)
}

// oneNotation writes every label of an axis's ticks in one notation: where
// fmtNum gives any of them an exponent, all but 0 get one, so 100000000
// never stands beside 1e+10 and the eye can compare them.
func oneNotation(ts plot.ConstantTicks) plot.ConstantTicks {
	exp := false
	for _, t := range ts {
		exp = exp || strings.Contains(t.Label, "e")
	}
	if !exp {
		return ts
	}
	for i, t := range ts {
		if t.Label != "" && t.Value != 0 {
			ts[i].Label = fmtExp(t.Value)
		}
	}
	return ts
}

// fmtExp writes v with an exponent and at most three significant digits,
// without trailing zeros: 1e+10, 2.5e+09.
func fmtExp(v float64) string {
	s := strconv.FormatFloat(v, 'e', 2, 64)
	m, e, _ := strings.Cut(s, "e")
	if strings.Contains(m, ".") {
		m = strings.TrimRight(strings.TrimRight(m, "0"), ".")
	}
	return m + "e" + e
}

// fmtNum prints a tick or label value without trailing zeros.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e9:
		// Past any real figure; hundreds of digits would push the plot aside.
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 1000 || a == math.Trunc(a):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01:
		return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 3, 64), "0"), ".")
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// textStyle is a style for labels drawn inside the data area.
func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{Font: font.From(sans, size), Color: c, Handler: plot.DefaultTextHandler}
}

// hasCI reports whether p carries a confidence interval a chart can draw
// as an error bar: one of zero width has no bar to draw (intervals.add).
func hasCI(p Point) bool { return drawable(p.Lo) && drawable(p.Hi) && p.Hi > p.Lo }

// intervals records which kinds of 95% CI a chart's points had, for the
// legend's word on its error bars.
type intervals struct {
	drawn bool // an interval drawn as an error bar
	zero  bool // an interval of zero width: every repetition the same
	none  bool // no interval: too few repetitions
}

// add records p's interval and reports whether it is drawn as an error bar.
func (iv *intervals) add(p Point) bool {
	switch {
	case hasCI(p):
		iv.drawn = true
		return true
	case drawable(p.Lo) && drawable(p.Hi) && p.Hi == p.Lo:
		iv.zero = true
	default:
		iv.none = true
	}
	return false
}
