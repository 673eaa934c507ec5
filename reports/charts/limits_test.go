package charts

import (
	"errors"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// inTime runs f, failing the test when it has not returned within d: a
// chart that sends the rasteriser into an endless loop must fail here, not
// hang the run (the goroutine is left behind; the test binary ends).
func inTime(t *testing.T, d time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
		return nil
	}
}

// render draws c as PNG and SVG, returning the SVG's text.
func render(c *Chart) (string, error) {
	if _, err := c.PNG(); err != nil {
		return "", err
	}
	svg, err := c.SVG()
	return string(svg), err
}

// Every chart, given an extreme value among normal ones, is drawn in
// time: the values a chart cannot draw are left out and said to be, the
// others drawn. Before, a roofline fraction or a breakdown time of -1e307
// (or 1.7e308) never finished rendering, and the history chart never
// finished being built for a figure of 1.7e308.
func TestExtremeValuesNeverHang(t *testing.T) {
	nan := math.NaN()
	charts := []struct {
		name string
		make func(v float64) (*Chart, error)
	}{
		{"roofline", func(v float64) (*Chart, error) {
			return RooflineFraction(RooflineData{Bars: []RooflineBar{
				{Label: "a", Group: "run 1", Value: v, Lo: nan, Hi: nan},
				{Label: "b", Group: "run 1", Value: 0.5, Lo: 0.4, Hi: 0.6}}})
		}},
		{"roofline CI", func(v float64) (*Chart, error) {
			return RooflineFraction(RooflineData{Bars: []RooflineBar{
				{Label: "a", Group: "run 1", Value: 0.4, Lo: v, Hi: 0.6},
				{Label: "b", Group: "run 1", Value: 0.5, Lo: nan, Hi: nan}}})
		}},
		{"throughput", func(v float64) (*Chart, error) {
			return ThroughputVsBatch(BatchData{Series: []Series{{Label: "s",
				Points: []Point{noCI(1, 10), noCI(2, v), pt(4, 30, 28, 31)}}}})
		}},
		{"throughput CI", func(v float64) (*Chart, error) {
			return ThroughputVsBatch(BatchData{Series: []Series{{Label: "s",
				Points: []Point{pt(1, 10, 9, v), noCI(2, 20), noCI(4, 30)}}}})
		}},
		{"moe chunk", func(v float64) (*Chart, error) {
			return MoEChunkCurve(ChunkData{Series: []Series{{Label: "s",
				Points: []Point{noCI(8, 1.5), noCI(16, v), noCI(32, 2.5)}}}})
		}},
		{"breakdown", func(v float64) (*Chart, error) {
			return ComponentBreakdown(BreakdownData{Bars: []BreakdownBar{
				{Label: "a", MS: map[string]float64{"attention": 1, "moe": v}},
				{Label: "b", MS: map[string]float64{"attention": 2, "moe": 3}}}})
		}},
		{"history", func(v float64) (*Chart, error) {
			return HistoryTimeline(TimelineData{Series: []TimelineSeries{{Label: "s", Points: []TimelinePoint{
				{Date: "2025-01-01", Value: 10, Lo: nan, Hi: nan}, {Date: "2025-02-01", Value: v, Lo: nan, Hi: nan}}}}})
		}},
		{"history range", func(v float64) (*Chart, error) {
			return HistoryTimeline(TimelineData{Series: []TimelineSeries{{Label: "s", Points: []TimelinePoint{
				{Date: "2025-01-01", Value: 10, Lo: 5, Hi: v}, {Date: "2025-02-01", Value: 20, Lo: nan, Hi: nan}}}}})
		}},
	}
	values := []struct {
		v     float64
		drawn bool // false: left out, and the legend says so
	}{
		{-math.MaxFloat64, false}, {-1e307, false}, {-1e300, false}, {-1e10, false},
		{math.Inf(1), false}, {math.Inf(-1), false}, {math.MaxFloat64, false}, {1e307, false},
		{1e300, true}, {1e-300, true}, {math.SmallestNonzeroFloat64, true}, {0.75, true},
	}
	for _, ch := range charts {
		for _, tc := range values {
			t.Run(ch.name+"/"+strconv.FormatFloat(tc.v, 'g', 3, 64), func(t *testing.T) {
				var svg string
				err := inTime(t, 30*time.Second, func() error {
					c, err := ch.make(tc.v)
					if err != nil {
						return err
					}
					svg, err = render(c)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if noted := strings.Contains(svg, "not drawn"); noted == tc.drawn {
					t.Errorf("legend says a value was not drawn: %v; want %v", noted, !tc.drawn)
				}
			})
		}
	}
}

// A chart whose every value is left out is an error that says why, not a
// chart quietly missing (ErrNoData) nor one that never ends.
func TestNothingDrawable(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		make func() (*Chart, error)
	}{
		{"roofline", func() (*Chart, error) {
			return RooflineFraction(RooflineData{Bars: []RooflineBar{{Label: "a", Group: "g", Value: -1e308, Lo: nan, Hi: nan}}})
		}},
		{"throughput", func() (*Chart, error) {
			return ThroughputVsBatch(BatchData{Series: []Series{{Label: "s", Points: []Point{noCI(1, math.Inf(1))}}}})
		}},
		{"breakdown", func() (*Chart, error) {
			return ComponentBreakdown(BreakdownData{Bars: []BreakdownBar{{Label: "a", MS: map[string]float64{"moe": -1e307}}}})
		}},
		{"history", func() (*Chart, error) {
			return HistoryTimeline(TimelineData{Series: []TimelineSeries{{Label: "s",
				Points: []TimelinePoint{{Date: "2025-01-01", Value: math.MaxFloat64, Lo: nan, Hi: nan}}}}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := inTime(t, 30*time.Second, func() error {
				c, err := tc.make()
				if err == nil {
					_, err = render(c)
				}
				return err
			})
			if err == nil || errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "no value can be drawn") {
				t.Fatalf("err = %v, want one saying no value can be drawn", err)
			}
		})
	}
}

// offCanvas fills a bar from the plot's origin to a point x, y pt away
// (unclipped, as a bar to a coordinate that overflowed once reached the
// rasteriser) and strokes its diagonal.
type offCanvas struct{ x, y vg.Length }

func (o offCanvas) Plot(c draw.Canvas, _ *plot.Plot) {
	x0, y0 := c.Min.X, c.Min.Y
	x1, y1 := x0+o.x, y0+o.y
	c.FillPolygon(color.Black, []vg.Point{{X: x0, Y: y0}, {X: x0 + 5, Y: y0}, {X: x1 + 5, Y: y1}, {X: x1, Y: y1}})
	c.StrokeLine2(draw.LineStyle{Color: color.Black, Width: 1}, x0, y0, x1, y1)
}

// The canvas refuses a shape far off it, whatever drew it: the rasteriser
// fills in time in proportion to a shape's height and never finishes past
// 2^25 pixels (2.0e7 pt at 120 dpi), or at NaN.
func TestFarShapesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		x, y    vg.Length
		refused bool
	}{
		{"on the canvas", 100, 100, false},
		{"a few canvases off", -3000, 5000, false},
		{"1e7 pt up", 0, 1e7, true},
		{"past the fixed point", 0, -2.1e7, true},
		{"1e300 pt across", 1e300, 10, true},
		{"NaN", vg.Length(math.NaN()), 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChart("off", "x", "y")
			c.plot.Add(offCanvas{tc.x, tc.y}, plotter.NewFunction(func(x float64) float64 { return x }))
			c.plot.X.Min, c.plot.X.Max, c.plot.Y.Min, c.plot.Y.Max = 0, 1, 0, 1
			err := inTime(t, 30*time.Second, func() error { _, err := render(c); return err })
			if refused := err != nil && strings.Contains(err.Error(), "off the canvas"); refused != tc.refused {
				t.Fatalf("err = %v; want refused %v", err, tc.refused)
			}
		})
	}
}

// Tick makers end on any range: an infinite bound once made logTicks loop
// for ever, and a thousand decades made the history chart take seconds.
func TestTicksOnExtremeRanges(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name  string
		ticks func() plot.ConstantTicks
		most  int
		least int
	}{
		{"log to +Inf", func() plot.ConstantTicks { return logTicks(1, inf) }, 0, 0},
		{"log from 0", func() plot.ConstantTicks { return logTicks(0, 10) }, 0, 0},
		{"log over 600 decades", func() plot.ConstantTicks { return logTicks(1e-300, 1e300) }, 20, 5},
		{"log over one decade", func() plot.ConstantTicks { return logTicks(3, 40) }, 30, 3},
		{"linear to +Inf", func() plot.ConstantTicks { return linearTicks(0, inf) }, 0, 0},
		{"linear to 1e300", func() plot.ConstantTicks { return linearTicks(0, 1e300) }, 30, 3},
		{"pow2 to +Inf", func() plot.ConstantTicks { return pow2Ticks(1, inf) }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts plot.ConstantTicks
			inTime(t, 10*time.Second, func() error { ts = tc.ticks(); return nil })
			if len(ts) > tc.most || len(ts) < tc.least {
				t.Errorf("%d ticks, want %d to %d", len(ts), tc.least, tc.most)
			}
		})
	}
}

// The labels of one axis share a notation: where one needs an exponent
// (past 1e9, or below 0.0001), every label but 0 has one.
func TestTicksUseOneNotation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ticks plot.ConstantTicks
		want  []string // labels the axis must carry
	}{
		{"log 1e8 to 1e10", logTicks(0.7e8, 1.4e10), []string{"1e+08", "2e+08", "1e+10"}},
		{"log 1e-6 to 1e-2", logTicks(0.7e-6, 1.4e-2), []string{"1e-06", "1e-02"}},
		{"log over 600 decades", logTicks(1e-300, 1e300), []string{"1e+00"}},
		{"linear to 5e9", linearTicks(0, 5e9), []string{"0", "1e+09", "5e+09"}},
		{"linear to 2.5e9", linearTicks(0, 2.5e9), []string{"0", "5e+08", "2.5e+09"}},
		{"values", valueTicks([]float64{1, 1e12}), []string{"1e+00", "1e+12"}},
		{"plain log", logTicks(3, 40), []string{"5", "10", "20"}},
		{"plain linear", linearTicks(0, 10), []string{"0", "2", "10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var labels []string
			exp, nonzero := 0, 0
			for _, tk := range tc.ticks {
				if tk.Label == "" {
					continue
				}
				labels = append(labels, tk.Label)
				if tk.Label != "0" {
					nonzero++
				}
				if strings.Contains(tk.Label, "e") {
					exp++
				}
			}
			if exp != 0 && exp != nonzero {
				t.Errorf("labels mix notations: %q", labels)
			}
			for _, w := range tc.want {
				if !slices.Contains(labels, w) {
					t.Errorf("labels %q lack %q", labels, w)
				}
			}
		})
	}
}
