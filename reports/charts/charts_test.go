package charts

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/envconfig"
)

// Set MTLBENCH_CHARTS_DIR to keep the test charts for looking at them.
func keep(t *testing.T, c *Chart, name string) {
	t.Helper()
	dir := envconfig.Get("MTLBENCH_CHARTS_DIR")
	if dir == "" {
		return
	}
	if err := c.Save(dir, name); err != nil {
		t.Fatal(err)
	}
}

// checkChart renders c both ways: the PNG must decode at the size the chart
// asks for (120 dpi), the SVG must hold the title and axis labels as text.
func checkChart(t *testing.T, c *Chart, texts ...string) {
	t.Helper()
	pngData, err := c.PNG()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatalf("png: %v", err)
	}
	w, h, _ := c.size()
	wantW, wantH := int(math.Ceil(w.Dots(pngDPI))), int(math.Ceil(h.Dots(pngDPI)))
	b := img.Bounds()
	if abs(b.Dx()-wantW) > 1 || abs(b.Dy()-wantH) > 1 {
		t.Errorf("png is %dx%d, want %dx%d", b.Dx(), b.Dy(), wantW, wantH)
	}
	if b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("png %dx%d is too small to read", b.Dx(), b.Dy())
	}
	// A blank image would decode too: require some non-white pixels.
	dark := 0
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			if r, g, bb, _ := img.At(x, y).RGBA(); r+g+bb < 3*0xc000 {
				dark++
			}
		}
	}
	if dark < 200 {
		t.Errorf("png has only %d dark sample pixels", dark)
	}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("<svg")) {
		t.Fatal("svg has no <svg element")
	}
	for _, s := range append([]string{c.Title}, texts...) {
		if !bytes.Contains(svg, []byte(html.EscapeString(s))) {
			t.Errorf("svg lacks text %q", s)
		}
	}
}

func abs(v int) int { return max(v, -v) }

func pt(x, y, lo, hi float64) Point { return Point{X: x, Y: y, Lo: lo, Hi: hi} }

func noCI(x, y float64) Point { return Point{X: x, Y: y, Lo: math.NaN(), Hi: math.NaN()} }

func TestThroughputVsBatch(t *testing.T) {
	d := BatchData{Series: []Series{
		{Label: "run 3, metal", Points: []Point{pt(1, 6.7, 6.5, 6.9), pt(2, 11.3, 11, 11.6), pt(4, 16.5, 16, 17), pt(8, 23.1, 22, 24), pt(16, 32.8, 31, 34)}},
		{Label: "run 4, cpu", Points: []Point{noCI(1, 2.1), noCI(4, 5.5), noCI(16, 9.9)}},
	}}
	c, err := ThroughputVsBatch(d)
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, c, "batch size (concurrent sequences)", "decode throughput (tok/s)", "run 3, metal", "run 4, cpu", "16")
	keep(t, c, "throughput")
	if _, err := ThroughputVsBatch(BatchData{}); !errors.Is(err, ErrNoData) {
		t.Errorf("empty data: err = %v, want ErrNoData", err)
	}
}

func TestComponentBreakdown(t *testing.T) {
	d := BreakdownData{Title: "Decode step breakdown per layer — test", Bars: []BreakdownBar{
		{Label: "batch-scaling/batch=1", MS: map[string]float64{"attention": 0.9, "moe": 1.3, "norm": 0.1, "other": 0.05}, Layers: 4},
		{Label: "batch-scaling/batch=16", MS: map[string]float64{"attention": 1.4, "moe": 2.9, "norm": 0.2}, Layers: 4},
		{Label: "documented: Chunked bmm, Qwen3-30B-A3B (M-series Mac, 2024-12-11)", MS: map[string]float64{"attention": 1.16, "moe": 1.46, "norm": 0.6}, Documented: true},
	}}
	c, err := ComponentBreakdown(d)
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, c, "time per layer per decode step (ms)", "attention", "MoE", "norm (RMSNorm)", "other", "3.22 ms", "batch-scaling/batch=16")
	keep(t, c, "breakdown")
	if _, err := ComponentBreakdown(BreakdownData{}); !errors.Is(err, ErrNoData) {
		t.Errorf("empty data: err = %v, want ErrNoData", err)
	}
}

func TestMoEChunkCurve(t *testing.T) {
	var s1, s16 Series
	for i, ch := range []float64{8, 16, 32, 64, 128, 256} {
		s1.Points = append(s1.Points, pt(ch, 0.5+0.3/float64(i+1), 0.45, 0.9))
		s16.Points = append(s16.Points, noCI(ch, 2.0-0.1*float64(i)))
	}
	s1.Label, s16.Label = "batch 1", "batch 16"
	doc := Series{Label: "documented: chunked bmm, Qwen3-30B-A3B (M-series Mac)", Documented: true,
		Points: []Point{noCI(8, 1.99), noCI(16, 1.45), noCI(32, 1.42), noCI(64, 1.40), noCI(128, 1.41), noCI(256, 1.41)}}
	c, err := MoEChunkCurve(ChunkData{YLabel: "MoE time per layer per decode step (ms)", Series: []Series{s1, s16, doc}})
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, c, "MoE chunk size ((token, expert) pairs per GEMM, log2 scale)", "MoE time per layer per decode step (ms)",
		"batch 1", "batch 16")
	keep(t, c, "moe-chunk")
	// Ticks are at the powers of two, labelled in chunk sizes.
	svg := must(c.SVG())
	for _, tick := range []string{">8</text>", ">16</text>", ">64</text>", ">256</text>"} {
		if !bytes.Contains(svg, []byte(tick)) {
			t.Errorf("chunk axis lacks tick %s", tick)
		}
	}
	if bytes.Contains(svg, []byte(">100</text>")) {
		t.Error("log2 chunk axis has a decimal tick")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestRooflineFraction(t *testing.T) {
	nan := math.NaN()
	d := RooflineData{Bars: []RooflineBar{
		{Label: "decode/batch=1", Group: "run 1, metal on Apple M3 Ultra", Value: 0.62, Lo: 0.6, Hi: 0.65},
		{Label: "decode/batch=1", Group: "run 2, metal on Apple M3 Ultra", Value: 0.71, Lo: 0.69, Hi: 0.74},
		{Label: "decode/batch=8", Group: "run 1, metal on Apple M3 Ultra", Value: 0.35, Lo: nan, Hi: nan},
		{Label: "decode/batch=8", Group: "run 2, metal on Apple M3 Ultra", Value: 1.12, Lo: 1.0, Hi: 1.2},
		{Label: "only-in-run-2", Group: "run 2, metal on Apple M3 Ultra", Value: 0.5, Lo: nan, Hi: nan},
	}}
	c, err := RooflineFraction(d)
	if err != nil {
		t.Fatal(err)
	}
	checkChart(t, c, "achieved / peak memory read bandwidth (ratio; 1.0 = roofline)", "roofline (1.0)",
		"run 1, metal on Apple M3 Ultra", "run 2, metal on Apple M3 Ultra", "decode/batch=8", "1.12 > 1 *",
		"* above 1: faster than the measured DRAM")
	if strings.Contains(svgOf(t, c), "0.71 &gt; 1") {
		t.Error("a fraction below 1 is flagged")
	}
	keep(t, c, "roofline")
}

func TestHistoryTimeline(t *testing.T) {
	hist := testHistory()
	runs := []RunData{
		testRun(7, "Apple M3 Ultra", 4, 48, time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), map[int]float64{1: 80, 4: 150}),
		testRun(8, "Apple M3 Ultra", 48, 48, time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC), map[int]float64{1: 7.2}),
		testRun(9, "Apple M3 Ultra", 48, 48, time.Date(2026, 4, 1, 11, 0, 0, 0, time.UTC), map[int]float64{1: 8.1}),
	}
	d := Timeline(runs, hist, "")
	if d.Model != "Qwen3-30B-A3B" {
		t.Fatalf("model = %q", d.Model)
	}
	byLabel := map[string]TimelineSeries{}
	for _, s := range d.Series {
		if _, dup := byLabel[s.Label]; dup {
			t.Errorf("two series labelled %q", s.Label)
		}
		byLabel[s.Label] = s
		if !strings.Contains(s.Label, s.Hardware) {
			t.Errorf("series %q does not name its hardware %q", s.Label, s.Hardware)
		}
	}
	// Same series name on different hardware: two series.
	if _, ok := byLabel["Metal V1.5, batch 1 (Apple M3 Ultra)"]; !ok {
		t.Errorf("missing Metal V1.5 on M3 Ultra; have %v", keys(byLabel))
	}
	if _, ok := byLabel["Metal V1.5, batch 1 (M-series Mac)"]; !ok {
		t.Errorf("missing Metal V1.5 on M-series Mac; have %v", keys(byLabel))
	}
	// Duplicates across sections are one point.
	if s := byLabel["Chunked bmm (M-series Mac)"]; len(s.Points) != 1 {
		t.Errorf("Chunked bmm has %d points, want 1 (duplicate sections)", len(s.Points))
	}
	trunc, whole := 0, 0
	for _, s := range d.Series {
		if s.Documented {
			continue
		}
		if strings.Contains(s.Label, "4/48 layers") {
			trunc++
			if !s.Truncated {
				t.Errorf("%q is not marked truncated", s.Label)
			}
		} else {
			whole++
			if s.Truncated {
				t.Errorf("%q is marked truncated", s.Label)
			}
			// Whole-model runs 8 and 9 of the same case form one series.
			if len(s.Points) != 2 {
				t.Errorf("%q has %d points, want 2 (runs 8 and 9)", s.Label, len(s.Points))
			}
		}
	}
	if trunc != 2 || whole != 1 {
		t.Errorf("truncated series %d (want 2, one per batch), whole-model %d (want 1)", trunc, whole)
	}
	if !strings.Contains(strings.Join(d.Notes, " "), "no date") {
		t.Errorf("notes do not mention undated figures: %q", d.Notes)
	}
	c, err := HistoryTimeline(d)
	if err != nil {
		t.Fatal(err)
	}
	// A real date axis: ticks are dates, not the figures' own labels, and
	// no "undated" slot.
	checkChart(t, c, "date (documented or recorded)", "decode throughput (tok/s), log scale",
		"2025-", "4/48 layers", "Apple M3 Ultra", "M-series Mac")
	if svg := svgOf(t, c); strings.Contains(svg, ">undated<") {
		t.Error("the time axis has an undated slot")
	}
	if x1, x2 := mustDate(t, "2024-12-10"), mustDate(t, "2024-12-11"); x2.Sub(x1) != 24*time.Hour {
		t.Errorf("parseDate: one day is %v", x2.Sub(x1))
	}
	keep(t, c, "history")

	// A run of another model is noted, not overlaid.
	other := testRun(10, "AMD EPYC", 2, 6, time.Now(), map[int]float64{1: 900})
	for i := range other.Cases {
		other.Cases[i].Params["model"] = "qwen3-moe-mini"
	}
	d = Timeline([]RunData{other}, hist, "Qwen3-30B-A3B")
	for _, s := range d.Series {
		if !s.Documented {
			t.Errorf("run of another model overlaid: %q", s.Label)
		}
	}
	if !strings.Contains(strings.Join(d.Notes, " "), "qwen3-moe-mini") {
		t.Errorf("notes do not mention the other model: %q", d.Notes)
	}
}

// TestHistoryRooflines checks the history chart draws the roofline of each
// documented machine the Apple GPU table knows, and of no other.
func TestHistoryRooflines(t *testing.T) {
	hist := testHistory()
	for i := range hist {
		hist[i].DType = "float16"
	}
	// A machine spelt as 003-metal-engine-v2.6.yaml spells it.
	hist = append(hist, history.Point{Source: "doc.txt", Date: "2025-12", Hardware: "Apple M3 Ultra (128GB)",
		Model: "Qwen3-30B-A3B", DType: "float16", Series: "v2.6", Batch: 1, Metric: "decode_tok_s", Value: 9, Unit: "tok/s"})
	bytes := func(model, dtype string) (int64, bool) {
		if strings.EqualFold(model, "Qwen3-30B-A3B") && dtype == "float16" {
			return 6_552_000_000, true // 819 GB/s / 6.552 GB = 125 tok/s
		}
		return 0, false
	}
	runs := []RunData{testRun(8, "Apple M3 Ultra", 48, 48, time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC), map[int]float64{1: 7.2})}
	named, _, err := BuildFrom(runs, Options{History: hist, ModelBytes: bytes})
	if err != nil {
		t.Fatal(err)
	}
	var h *Named
	for i := range named {
		if named[i].Name == NameHistory {
			h = &named[i]
		}
	}
	if h == nil {
		t.Fatalf("no history chart among %d charts", len(named))
	}
	checkChart(t, h.Chart, "M3 Ultra roofline (819 GB/s)", "M3 Ultra: 125 tok/s", "memory-bandwidth rooflines (batch 1):")
	keep(t, h.Chart, "history-rooflines")
	svg, _ := h.Chart.SVG()
	if n := bytes2count(svg, "roofline (819 GB/s)"); n != 1 {
		t.Errorf("%d M3 Ultra roofline legend entries, want 1 (two spellings, one machine)", n)
	}
	if !strings.Contains(strings.Join(h.Notes, " "), "Apple M3 Ultra: 819 GB/s over 6.55 GB = 125 tok/s") {
		t.Errorf("notes do not explain the roofline: %q", h.Notes)
	}
	// Without model bytes, or with only unknown hardware: no line, no error.
	for name, opts := range map[string]Options{
		"no bytes":         {History: hist},
		"unknown hardware": {History: testHistory()[:5], ModelBytes: bytes},
	} {
		named, _, err := BuildFrom(runs, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, n := range named {
			svg, _ := n.Chart.SVG()
			if n.Name == NameHistory && bytes2count(svg, "roofline (") > 0 {
				t.Errorf("%s: history chart draws a roofline", name)
			}
		}
	}
}

func bytes2count(b []byte, s string) int { return strings.Count(string(b), html.EscapeString(s)) }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func testHistory() []history.Point {
	p := func(date, hw, series string, batch int, v float64, q string) history.Point {
		return history.Point{Source: "doc.txt", Section: "s", Date: date, Hardware: hw, Model: "Qwen3-30B-A3B",
			Series: series, Batch: batch, Metric: "tok_s", Value: v, Unit: "tok/s", Qualifier: q}
	}
	pts := []history.Point{
		p("2024-12-10", "M-series Mac", "Initial", 0, 0.3, ""),
		p("2024-12-11", "M-series Mac", "Chunked bmm", 0, 4.2, ""),
		p("2024-12-11", "M-series Mac", "Chunked bmm", 0, 4.2, ""), // stated again in another section
		p("2024-12-11", "M-series Mac", "index_select", 0, 10, ">="),
		p("2025-12", "M-series Mac", "Metal V1.5", 1, 5.1, ""),
		p("unknown", "Apple M3 Ultra", "Metal V1.5", 1, 6.7, ""),
		p("unknown", "Apple M3 Ultra", "Metal V1.5", 16, 32.8, ""),
	}
	r := p("2024-12-11", "M-series Mac", "KV cache opt", 0, 6.8, "range")
	r.Params = map[string]string{"max": "7.0"}
	pts = append(pts, r)
	// Not throughput measurements: never plotted.
	tgt := p("2024-12-11", "M-series Mac", "Target", 0, 50, ">=")
	tgt.Metric = "tok_s_target"
	return append(pts, tgt)
}

// testRun is a run of qwen3-30b-a3b with a batch-scaling entry.
func testRun(id int64, hw string, layers, total int, at time.Time, tokS map[int]float64) RunData {
	r := RunData{Run: results.Run{ID: id, Backend: "metal", TimingMode: results.TimingThroughput, StartedAt: at,
		Machine: results.Machine{CPUModel: hw, GPUName: hw}}}
	for b, v := range tokS {
		var samples []results.Sample
		for rep := range 7 {
			samples = append(samples, results.Sample{Rep: rep, Metric: "decode_tok_s", Value: v * (1 + 0.01*float64(rep-3)), Unit: "tok/s"})
		}
		r.Cases = append(r.Cases, CaseData{
			Case: results.Case{ID: id*100 + int64(b), RunID: id, Name: fmt.Sprintf("batch-scaling/batch=%d", b), Kind: results.CaseModel,
				Status: results.CaseDone, LayersRun: layers, LayersTotal: total,
				Params: map[string]string{"model": "qwen3-30b-a3b", "batch": fmt.Sprint(b), "prompt_len": "32"}},
			Stats: stats.ByMetric(samples),
		})
	}
	return r
}

func TestLabels(t *testing.T) {
	got := labels([][]part{
		{{"run", "run 1"}, {"model", "m"}, {"entry", "a"}},
		{{"run", "run 1"}, {"model", "m"}, {"entry", "b"}},
	}, "run")
	want := []string{"run 1, a", "run 1, b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("labels = %q, want %q", got, want)
	}
}

func TestSaveWritesBoth(t *testing.T) {
	c, err := ThroughputVsBatch(BatchData{Series: []Series{{Label: "x", Points: []Point{noCI(1, 1), noCI(2, 2)}}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sub")
	if err := c.Save(dir, "chart"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"chart.png", "chart.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A run of the gpt2 preset meets the history's "GPT-2": its chart and
// timeline are GPT-2's, the run overlaid on the documented figure.
func TestHistoryModelGPT2(t *testing.T) {
	hist, err := history.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	run := testRun(9, "NVIDIA H100", 12, 12, time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), map[int]float64{1: 2000})
	for i := range run.Cases {
		run.Cases[i].Params["model"] = "gpt2"
	}
	if m := HistoryModel([]RunData{run}, hist); m != "GPT-2" {
		t.Fatalf("HistoryModel = %q, want GPT-2", m)
	}
	d := Timeline([]RunData{run}, hist, "GPT-2")
	doc, ran := 0, 0
	for _, s := range d.Series {
		for _, p := range s.Points {
			switch {
			case !s.Documented:
				ran++
			case p.Value == 42:
				doc++
			}
		}
	}
	if doc != 1 || ran == 0 {
		t.Fatalf("GPT-2 timeline: %d documented 42 tok/s points, %d run points: %+v", doc, ran, d.Series)
	}
}

// Runs of a model the history does not document get no history chart, not
// another model's.
func TestHistoryModelOnlyTheRunsModel(t *testing.T) {
	hist := []history.Point{{Source: "kb.md", Date: "2024-12-10", Model: "Qwen3-30B-A3B", Metric: "tok_s", Value: 6.7, Unit: "tok/s", Batch: 1}}
	run := RunData{Cases: []CaseData{{Case: results.Case{Kind: results.CaseModel, Params: map[string]string{"model": "qwen3-moe-mini"}}}}}
	if m := HistoryModel([]RunData{run}, hist); m != "" {
		t.Errorf("HistoryModel = %q for qwen3-moe-mini runs, want none", m)
	}
	if _, err := HistoryTimeline(Timeline([]RunData{run}, hist, "")); err != ErrNoData {
		t.Errorf("history chart for an undocumented model: %v, want ErrNoData", err)
	}
	if m := HistoryModel(nil, hist); m != "Qwen3-30B-A3B" {
		t.Errorf("HistoryModel without runs = %q", m)
	}
}

func mustDate(t *testing.T, s string) time.Time {
	t.Helper()
	d, ok := parseDate(s)
	if !ok {
		t.Fatalf("parseDate(%q) failed", s)
	}
	return d
}

func svgOf(t *testing.T, c *Chart) string {
	t.Helper()
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A chart with no value it can draw is left out with why; the others are
// still built.
func TestBuildLeavesOutUndrawableChart(t *testing.T) {
	at := time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		tokS       map[int]float64
		throughput bool   // the throughput chart is built
		leftOut    string // "": nothing left out
	}{
		{"every value drawable", map[int]float64{1: 7, 2: 12}, true, ""},
		{"one case not finite", map[int]float64{1: math.Inf(1), 2: 12}, true, ""},
		{"no case drawable", map[int]float64{1: math.Inf(1), 2: math.NaN()}, false,
			"chart throughput-vs-batch is left out: no value can be drawn: all 2 are negative, not finite or over 1e+300"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := []RunData{testRun(8, "Apple M3 Ultra", 48, 48, at, tc.tokS)}
			named, leftOut, err := BuildFrom(runs, Options{History: testHistory()})
			if err != nil {
				t.Fatal(err)
			}
			built := map[string]bool{}
			for _, n := range named {
				built[n.Name] = true
			}
			if built[NameThroughput] != tc.throughput || !built[NameHistory] {
				t.Errorf("charts built %v; want throughput %v and history", keys(built), tc.throughput)
			}
			got := strings.Join(leftOut, "\n")
			if tc.leftOut == "" && got != "" || !strings.Contains(got, tc.leftOut) {
				t.Errorf("left out %q, want %q", got, tc.leftOut)
			}
		})
	}
}

// TestBatchAxisLabelsDoNotOverlap draws many batch sizes: every size keeps
// its tick, and the labels drawn never overlap one another.
func TestBatchAxisLabelsDoNotOverlap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs     []float64
		chunk  bool
		labels []string // labels that must stay
	}{
		{"60 sizes, log axis", seq(1, 60), false, []string{"1", "2", "4", "8"}},
		{"40 sizes, linear axis", seq(101, 140), false, []string{"101"}},
		{"few sizes", []float64{1, 2, 4, 8, 16}, false, []string{"1", "2", "4", "8", "16"}},
		{"chunk sizes 1 to 2^20", []float64{1, 1 << 20}, true, []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Series
			s.Label = "run 1, cpu"
			for _, x := range tc.xs {
				s.Points = append(s.Points, noCI(x, 10*x))
			}
			var c *Chart
			var err error
			if tc.chunk {
				c, err = MoEChunkCurve(ChunkData{Series: []Series{s}})
			} else {
				c, err = ThroughputVsBatch(BatchData{Series: []Series{s}})
			}
			if err != nil {
				t.Fatal(err)
			}
			checkChart(t, c)
			keep(t, c, "axis-"+strings.ReplaceAll(tc.name, " ", "-"))
			// The labels as drawn: positions on the data area of the canvas
			// the chart is drawn on.
			w, h, legendW := c.size()
			vc := vgsvg.New(w, h)
			c.draw(vc)
			pad := vg.Points(6)
			dc := draw.New(vc)
			da := c.plot.DataCanvas(draw.Crop(dc, pad, -(legendW + pad), pad, -pad))
			ticks := c.plot.X.Tick.Marker.Ticks(c.plot.X.Min, c.plot.X.Max)
			if len(ticks) < len(tc.xs) && !tc.chunk {
				t.Errorf("%d ticks for %d batch sizes: every size keeps its tick", len(ticks), len(tc.xs))
			}
			sty := c.plot.X.Tick.Label
			lastRight := vg.Length(math.Inf(-1))
			var labels []string
			for _, tk := range ticks {
				if tk.Label == "" {
					continue
				}
				x := da.X(c.plot.X.Norm(tk.Value))
				half := sty.Width(tk.Label) / 2
				if x-half < lastRight {
					t.Errorf("label %q at %.1fpt overlaps the label before it (which ends at %.1fpt)", tk.Label, x-half, lastRight)
				}
				lastRight = x + half
				labels = append(labels, tk.Label)
			}
			for _, want := range tc.labels {
				if !slices.Contains(labels, want) {
					t.Errorf("labels %v lack %q", labels, want)
				}
			}
		})
	}
}

func seq(lo, hi float64) []float64 {
	var xs []float64
	for x := lo; x <= hi; x++ {
		xs = append(xs, x)
	}
	return xs
}

// TestCINote checks the legend's word on error bars against the intervals
// the points have: a 95% CI of zero width (every repetition the same) is an
// interval, not too few repetitions.
func TestCINote(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		points  [][3]float64 // y, lo, hi
		want    string
		notWant string
	}{
		{"drawn", [][3]float64{{10, 9, 11}, {20, 20, 20}}, "error bars: 95% CI of the median", "too few"},
		{"zero width", [][3]float64{{10, 10, 10}, {20, 20, 20}}, "has zero width", "too few"},
		{"zero width and too few", [][3]float64{{10, 10, 10}, {20, nan, nan}}, "of zero width", "error bars: 95% CI of the median"},
		{"too few", [][3]float64{{10, nan, nan}, {20, nan, nan}}, "too few repetitions", "zero width"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Series
			s.Label = "run 1, cpu"
			var bars []RooflineBar
			for i, p := range tc.points {
				s.Points = append(s.Points, pt(float64(int(1)<<i), p[0], p[1], p[2]))
				bars = append(bars, RooflineBar{Label: fmt.Sprintf("decode/batch=%d", 1<<i), Group: "run 1", Value: p[0] / 40, Lo: p[1] / 40, Hi: p[2] / 40})
			}
			c1, err := ThroughputVsBatch(BatchData{Series: []Series{s}})
			if err != nil {
				t.Fatal(err)
			}
			c2, err := RooflineFraction(RooflineData{Bars: bars})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*Chart{c1, c2} {
				svg := string(must(c.SVG()))
				if !strings.Contains(svg, tc.want) {
					t.Errorf("%s: legend lacks %q", c.Title, tc.want)
				}
				if strings.Contains(svg, tc.notWant) {
					t.Errorf("%s: legend says %q", c.Title, tc.notWant)
				}
			}
		})
	}
}

// TestHistoryTimelineZero draws figures of 0 tok/s: on a linear axis they
// are drawn at 0; a log axis has no place for them, and the legend says how
// many it left out, never a series gone without a word.
func TestHistoryTimelineZero(t *testing.T) {
	tp := func(date string, v float64) TimelinePoint {
		return TimelinePoint{Date: date, Value: v, Lo: math.NaN(), Hi: math.NaN()}
	}
	for _, tc := range []struct {
		name    string
		values  []float64 // of the other series
		want    []string
		notWant []string
	}{
		{"log axis", []float64{0.5, 40}, []string{"1 figure of 0 not drawn"}, []string{"stalled (M3)"}},
		{"linear axis", []float64{5, 10}, []string{"stalled (M3)"}, []string{"not drawn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := TimelineData{Model: "Qwen3-30B-A3B", Series: []TimelineSeries{
				{Label: "stalled (M3)", Hardware: "M3", Documented: true, Points: []TimelinePoint{tp("2025-01-01", 0)}},
				{Label: "working (M3)", Hardware: "M3", Documented: true,
					Points: []TimelinePoint{tp("2025-02-01", tc.values[0]), tp("2025-03-01", tc.values[1])}},
			}}
			c, err := HistoryTimeline(d)
			if err != nil {
				t.Fatal(err)
			}
			checkChart(t, c, "working (M3)")
			svg := string(must(c.SVG()))
			for _, w := range tc.want {
				if !strings.Contains(svg, w) {
					t.Errorf("chart lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(svg, w) {
					t.Errorf("chart has %q", w)
				}
			}
		})
	}
}

// A documented range from 0 (0–35 tok/s) is drawn on either axis: on a
// linear one from 0, on a log one, which has no 0, up from the axis floor
// with an arrow there and a legend line saying so; its figure of 0 is not
// counted among those left out.
func TestHistoryRangeFromZero(t *testing.T) {
	tp := func(date string, v, lo, hi float64) TimelinePoint {
		return TimelinePoint{Date: date, Value: v, Lo: lo, Hi: hi, Qualifier: "range"}
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		values  []float64 // of the other series
		want    []string
		notWant []string
	}{
		{"log axis", []float64{0.5, 40}, []string{"1 range reaches down to 0: drawn from", "the axis floor (a log axis has no 0)", "up to 35 (M3)"}, []string{"not drawn"}},
		{"linear axis", []float64{5, 40}, []string{"up to 35 (M3)"}, []string{"not drawn", "axis floor"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svg := func(lo, hi float64) string {
				d := TimelineData{Model: "Qwen3-30B-A3B", Series: []TimelineSeries{
					{Label: "up to 35 (M3)", Hardware: "M3", Documented: true, Points: []TimelinePoint{tp("2025-01-01", 0, lo, hi)}},
					{Label: "working (M3)", Hardware: "M3", Documented: true,
						Points: []TimelinePoint{tp("2025-02-01", tc.values[0], nan, nan), tp("2025-03-01", tc.values[1], nan, nan)}},
				}}
				c, err := HistoryTimeline(d)
				if err != nil {
					t.Fatal(err)
				}
				return string(must(c.SVG()))
			}
			got := svg(0, 35)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("chart lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("chart has %q", w)
				}
			}
			// The range's bar and caps are shapes a figure of 0 alone lacks.
			if with, without := strings.Count(got, "<path"), strings.Count(svg(nan, nan), "<path"); with < without+3 {
				t.Errorf("the range drew %d shapes more than the figure alone, want its bar and caps", with-without)
			}
		})
	}
}

// TestManySeriesStayAtTheirTicks draws many runs of the same batch sizes:
// the sideways spread that keeps equal points apart leaves every point
// inside the axes and nearer its own batch size's tick than any other.
func TestManySeriesStayAtTheirTicks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches []float64
		chunk   bool
	}{
		{"24 runs, log axis", []float64{1, 2, 4, 8}, false},
		{"24 runs, linear axis", []float64{1, 2, 3}, false},
		{"24 runs, one batch size", []float64{4}, false},
		{"24 runs, chunk sizes", []float64{8, 256}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []Series
			for r := range 24 {
				s := Series{Label: fmt.Sprintf("run %d, cpu", r+1)}
				for _, b := range tc.batches {
					s.Points = append(s.Points, noCI(b, 10*b+float64(r)))
				}
				ss = append(ss, s)
			}
			var c *Chart
			var err error
			if tc.chunk {
				c, err = MoEChunkCurve(ChunkData{Series: ss})
			} else {
				c, err = ThroughputVsBatch(BatchData{Series: ss})
			}
			if err != nil {
				t.Fatal(err)
			}
			keep(t, c, "many-series-"+strings.ReplaceAll(tc.name, " ", "-"))
			tx := func(x float64) float64 { return x }
			if tc.chunk || tc.batches[len(tc.batches)-1]/tc.batches[0] >= 3.9 {
				tx = math.Log2
			}
			at := map[float64]int{}
			for _, b := range c.plot.GlyphBoxes(c.plot) {
				if b.Size().X < vg.Points(4) {
					continue // a line's points (as wide as the line), not a marker
				}
				x := c.plot.X.Min + b.X*(c.plot.X.Max-c.plot.X.Min)
				nearest := tc.batches[0]
				for _, bs := range tc.batches {
					if math.Abs(tx(bs)-x) < math.Abs(tx(nearest)-x) {
						nearest = bs
					}
				}
				at[nearest]++
			}
			for _, b := range tc.batches {
				if at[b] != len(ss) {
					t.Errorf("batch %g: %d points inside the axes and nearest its tick, want %d (all: %v)", b, at[b], len(ss), at)
				}
			}
		})
	}
}
