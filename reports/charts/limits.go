package charts

import (
	"errors"
	"fmt"
	"image"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
)

// maxValue is the largest value a chart draws. Axes pad past their largest
// value (up to 1.35x) and map values to points as (v-min)/span·width,
// which overflow to ±Inf from about 1e308 (from -6e305 for a bar left of a
// 0..1.25 axis); a bar to an infinite coordinate leaves gonum's clipping
// as NaN, and the PNG rasteriser never finishes with that. 1e300 leaves
// room for all of it.
const maxValue = 1e300

// drawable reports whether a chart can draw v: every quantity charted
// (tok/s, ms, fractions) is finite and not negative.
func drawable(v float64) bool { return v >= 0 && v <= maxValue }

// leftOut collects the values a chart could not draw, so its legend can
// say so: a value off the axes would otherwise vanish without a word.
type leftOut struct {
	n    int
	seen []float64
}

// value reports whether v can be drawn, counting it when not.
func (l *leftOut) value(v float64) bool {
	if drawable(v) {
		return true
	}
	l.n++
	same := func(s float64) bool { return s == v || math.IsNaN(s) && math.IsNaN(v) }
	if len(l.seen) < 3 && !slices.ContainsFunc(l.seen, same) {
		l.seen = append(l.seen, v)
	}
	return false
}

// ci reports whether lo..hi is an interval a chart can draw (of zero width
// too: every repetition the same); NaN bounds are no interval, not a fault.
func (l *leftOut) ci(lo, hi float64) bool {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return false
	}
	okLo, okHi := l.value(lo), l.value(hi)
	return okLo && okHi && hi >= lo
}

// examples are the first distinct values left out, as the legend shows them.
func (l *leftOut) examples() string {
	s := ""
	for i, v := range l.seen {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatFloat(v, 'g', 3, 64)
	}
	return s
}

// note adds the legend lines that say what was left out, if anything was.
func (l *leftOut) note(c *Chart) {
	if l.n == 0 {
		return
	}
	what := "values"
	if l.n == 1 {
		what = "value"
	}
	c.legendHeader(fmt.Sprintf("* %d %s not drawn: negative,", l.n, what))
	c.legendHeader(fmt.Sprintf("  not finite or over %g (%s)", maxValue, l.examples()))
}

// ErrNothingDrawable is a chart's error when every value it had was left
// out: the chart is missing, not the report (BuildFrom).
var ErrNothingDrawable = errors.New("no value can be drawn")

// nothingDrawable is a chart's error when every value it had was left out.
func (l *leftOut) nothingDrawable() error {
	return fmt.Errorf("%w: all %d are negative, not finite or over %g (%s)", ErrNothingDrawable, l.n, maxValue, l.examples())
}

// maxCoord bounds, in points, where a chart draws anything. The PNG
// rasteriser (golang/freetype) keeps coordinates in 26.6 fixed point in an
// int32: past 2^25 pixels (2.0e7 pt at 120 dpi) they wrap and it loops
// without end, and below that its time grows with a shape's height (0.2 s
// at 1e7 pt). What a chart shows lies within a canvas (under 2e3 pt).
const maxCoord = 1e5

// guard passes drawing on to a canvas, refusing any shape or text placed
// beyond maxCoord: the last line of defence against a value far outside
// the axes reaching the rasteriser.
type guard struct {
	vg.CanvasSizer
	m   []affine // transforms as Push saved them; the last is current
	err error
}

func newGuard(c vg.CanvasSizer) *guard { return &guard{CanvasSizer: c, m: []affine{identity}} }

// affine maps x, y to a·x + b·y + c, d·x + e·y + f.
type affine struct{ a, b, c, d, e, f float64 }

var identity = affine{a: 1, e: 1}

func (m affine) apply(p vg.Point) (float64, float64) {
	x, y := float64(p.X), float64(p.Y)
	return m.a*x + m.b*y + m.c, m.d*x + m.e*y + m.f
}

func (g *guard) top() *affine { return &g.m[len(g.m)-1] }

func (g *guard) Push() { g.m = append(g.m, *g.top()); g.CanvasSizer.Push() }

func (g *guard) Pop() {
	if len(g.m) > 1 {
		g.m = g.m[:len(g.m)-1]
	}
	g.CanvasSizer.Pop()
}

func (g *guard) Translate(p vg.Point) {
	m := g.top()
	m.c, m.f = m.c+m.a*float64(p.X)+m.b*float64(p.Y), m.f+m.d*float64(p.X)+m.e*float64(p.Y)
	g.CanvasSizer.Translate(p)
}

func (g *guard) Rotate(rad float64) {
	m, sin, cos := g.top(), math.Sin(rad), math.Cos(rad)
	m.a, m.b = m.a*cos+m.b*sin, -m.a*sin+m.b*cos
	m.d, m.e = m.d*cos+m.e*sin, -m.d*sin+m.e*cos
	g.CanvasSizer.Rotate(rad)
}

func (g *guard) Scale(x, y float64) {
	m := g.top()
	m.a, m.d, m.b, m.e = m.a*x, m.d*x, m.b*y, m.e*y
	g.CanvasSizer.Scale(x, y)
}

// within reports whether p lands within maxCoord, recording the first
// point that does not.
func (g *guard) within(p vg.Point, r vg.Length) bool {
	x, y := g.top().apply(p)
	if math.Abs(x)+float64(r) <= maxCoord && math.Abs(y)+float64(r) <= maxCoord {
		return true // NaN fails both comparisons
	}
	if g.err == nil {
		g.err = fmt.Errorf("a shape at (%.3g, %.3g) pt lies beyond ±%g pt, far off the canvas: not drawn", x, y, maxCoord)
	}
	return false
}

func (g *guard) pathWithin(p vg.Path) bool {
	for _, c := range p {
		if c.Type == vg.CloseComp {
			continue
		}
		if !g.within(c.Pos, c.Radius) {
			return false
		}
		for _, q := range c.Control {
			if !g.within(q, 0) {
				return false
			}
		}
	}
	return true
}

func (g *guard) Stroke(p vg.Path) {
	if g.pathWithin(p) {
		g.CanvasSizer.Stroke(p)
	}
}

func (g *guard) Fill(p vg.Path) {
	if g.pathWithin(p) {
		g.CanvasSizer.Fill(p)
	}
}

func (g *guard) FillString(f font.Face, p vg.Point, text string) {
	if g.within(p, 0) {
		g.CanvasSizer.FillString(f, p, text)
	}
}

func (g *guard) DrawImage(r vg.Rectangle, img image.Image) {
	if g.within(r.Min, 0) && g.within(r.Max, 0) {
		g.CanvasSizer.DrawImage(r, img)
	}
}

// series is ss without the points a chart cannot draw, and without the
// intervals it cannot draw (the point stays).
func (l *leftOut) series(ss []Series) []Series {
	out := make([]Series, len(ss))
	for i, s := range ss {
		out[i], out[i].Points = s, nil
		for _, p := range s.Points {
			if !l.value(p.Y) {
				continue
			}
			if !l.ci(p.Lo, p.Hi) {
				p.Lo, p.Hi = math.NaN(), math.NaN()
			}
			out[i].Points = append(out[i].Points, p)
		}
	}
	return out
}

// breakdown is bars with the component times a chart cannot draw taken out.
func (l *leftOut) breakdown(bars []BreakdownBar) []BreakdownBar {
	out := make([]BreakdownBar, len(bars))
	for i, b := range bars {
		out[i], out[i].MS = b, map[string]float64{}
		for _, comp := range Components {
			if v, ok := b.MS[comp]; ok && l.value(v) {
				out[i].MS[comp] = v
			}
		}
	}
	return out
}

// roofline is bars without those a chart cannot draw, and without the
// intervals it cannot draw (the bar stays).
func (l *leftOut) roofline(bars []RooflineBar) []RooflineBar {
	var out []RooflineBar
	for _, b := range bars {
		if !l.value(b.Value) {
			continue
		}
		if !l.ci(b.Lo, b.Hi) {
			b.Lo, b.Hi = math.NaN(), math.NaN()
		}
		out = append(out, b)
	}
	return out
}

// timeline is ss without the figures a chart cannot draw, and without the
// ranges it cannot draw. Figures of 0 stay: HistoryTimeline draws them on a
// linear axis and counts them on a log one, which has no place for them.
func (l *leftOut) timeline(ss []TimelineSeries) []TimelineSeries {
	out := make([]TimelineSeries, len(ss))
	for i, s := range ss {
		out[i], out[i].Points = s, nil
		for _, p := range s.Points {
			if !l.value(p.Value) {
				continue
			}
			if !l.ci(p.Lo, p.Hi) {
				p.Lo, p.Hi = math.NaN(), math.NaN()
			}
			out[i].Points = append(out[i].Points, p)
		}
	}
	return out
}
