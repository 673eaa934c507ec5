package roofline

import (
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/reports/history"
)

func TestMachine(t *testing.T) {
	for _, c := range []struct {
		hardware string
		chip     string // "" = not in the table
		cores    int
		gbs      float64
	}{
		// As the shipped history spells its machines.
		{"Apple M3 Ultra (128GB)", "M3 Ultra", 80, 819},
		{"Apple M3 Ultra", "M3 Ultra", 80, 819},
		{"M-series Mac", "", 0, 0},
		{"unknown", "", 0, 0},
		{"", "", 0, 0},
		// Other spellings a document or an import may use.
		{"apple m3 ultra", "M3 Ultra", 80, 819},
		{"M3-Ultra", "M3 Ultra", 80, 819},
		{"Mac Studio (M2 Ultra, 192 GB)", "M2 Ultra", 76, 800},
		{"MacBook Pro M4Pro", "M4 Pro", 20, 273},
		{"Apple M3 Max (30-core GPU)", "M3 Max", 30, 300},
		{"Apple M3 Max, 16-core CPU, 40-core GPU, 128GB", "M3 Max", 40, 400},
		{"M3 Max 16-core CPU", "M3 Max", 40, 400},
		{"M4 Max with 32 GPU cores", "M4 Max", 32, 410},
		{"Apple M1", "M1", 8, 68.25},
		{"M3 Max 31-core GPU", "", 0, 0},
		{"Apple M9 Ultra", "", 0, 0},
		{"M30 accelerator", "", 0, 0},
		{"NVIDIA H100 80GB HBM3", "", 0, 0},
		{"AMD EPYC 7B13", "", 0, 0},
	} {
		g, ok := Machine(c.hardware)
		if c.chip == "" {
			if ok {
				t.Errorf("Machine(%q) = %+v, want none", c.hardware, g)
			}
			continue
		}
		if !ok || g.Chip != c.chip || g.Cores != c.cores || g.BandwidthGBs != c.gbs {
			t.Errorf("Machine(%q) = %s/%d at %v GB/s (%v), want %s/%d at %v GB/s",
				c.hardware, g.Chip, g.Cores, g.BandwidthGBs, ok, c.chip, c.cores, c.gbs)
		}
	}
}

func TestFraction(t *testing.T) {
	ultra, _ := applegpu.Lookup("M3 Ultra")
	m1, _ := applegpu.Lookup("M1")
	for _, c := range []struct {
		name   string
		tokS   float64
		g      applegpu.GPU
		bytes  int64
		roof   float64
		frac   float64
		wantOK bool
	}{
		{"819 GB/s over 8.19 GB: 100 tok/s", 25, ultra, 8_190_000_000, 100, 0.25, true},
		{"at the roofline", 100, ultra, 8_190_000_000, 100, 1, true},
		{"above it (caches)", 150, ultra, 8_190_000_000, 100, 1.5, true},
		{"M1's derived 68.25 GB/s", 34.125, m1, 1_000_000_000, 68.25, 0.5, true},
		{"no bytes", 10, ultra, 0, 0, 0, false},
		{"no machine", 10, applegpu.GPU{}, 1 << 30, 0, 0, false},
		{"zero figure", 0, ultra, 1 << 30, ultra.BytesPerSecond() / (1 << 30), 0, false},
		{"NaN figure", math.NaN(), ultra, 1 << 30, ultra.BytesPerSecond() / (1 << 30), 0, false},
	} {
		if got := TokS(c.g, c.bytes); math.Abs(got-c.roof) > 1e-9*max(1, c.roof) {
			t.Errorf("%s: TokS = %v, want %v", c.name, got, c.roof)
		}
		f, ok := Fraction(c.tokS, c.g, c.bytes)
		if ok != c.wantOK || math.Abs(f-c.frac) > 1e-12 {
			t.Errorf("%s: Fraction = %v, %v; want %v, %v", c.name, f, ok, c.frac, c.wantOK)
		}
	}
}

// testBytes knows one model in f16 only, as cmd's presets would.
func testBytes(model, dtype string) (int64, bool) {
	if model == "Big-MoE" && dtype == "float16" {
		return 8_190_000_000, true
	}
	return 0, false
}

func TestOf(t *testing.T) {
	p := func(hw, metric string, batch int, dtype string, v float64) history.Point {
		return history.Point{Hardware: hw, Model: "Big-MoE", DType: dtype, Metric: metric, Batch: batch, Value: v}
	}
	for _, c := range []struct {
		name  string
		p     history.Point
		frac  float64
		label string // "" = no fraction
	}{
		{"batch 1 decode", p("Apple M3 Ultra (128GB)", "decode_tok_s", 1, "float16", 10), 0.1, "M3 Ultra roofline (819 GB/s)"},
		{"batch not stated", p("Apple M3 Ultra", "tok_s", 0, "float16", 50), 0.5, "M3 Ultra roofline (819 GB/s)"},
		{"a documented limit", p("Apple M3 Ultra", "tok_s_limit", 0, "float16", 30), 0.3, "M3 Ultra roofline (819 GB/s)"},
		{"batch 16 aggregate", p("Apple M3 Ultra", "tok_s", 16, "float16", 32.8), 0, ""},
		{"prefill", p("Apple M3 Ultra", "prefill_tok_s", 1, "float16", 70), 0, ""},
		{"unknown hardware", p("M-series Mac", "tok_s", 1, "float16", 10), 0, ""},
		{"dtype not stated", p("Apple M3 Ultra", "tok_s", 1, "", 10), 0, ""},
		{"model not known", history.Point{Hardware: "Apple M3 Ultra", Model: "GPT-2", DType: "float16", Metric: "tok_s", Value: 42}, 0, ""},
	} {
		f, l, ok := Of(c.p, testBytes)
		if ok != (c.label != "") || math.Abs(f-c.frac) > 1e-12 || (ok && l.Label() != c.label) {
			t.Errorf("%s: Of = %v, %q, %v; want %v, %q", c.name, f, l.Label(), ok, c.frac, c.label)
		}
	}
	if _, _, ok := Of(p("Apple M3 Ultra", "tok_s", 1, "float16", 10), nil); ok {
		t.Error("Of with no ModelBytes gave a fraction")
	}
}

func TestDocumented(t *testing.T) {
	hist := []history.Point{
		{Hardware: "Apple M3 Ultra", Model: "Big-MoE", DType: "float16", Metric: "tok_s", Batch: 1, Value: 6.7},
		{Hardware: "Apple M3 Ultra (128GB)", Model: "big-moe", DType: "float16", Metric: "tok_s", Batch: 16, Value: 32.8},
		{Hardware: "M-series Mac", Model: "Big-MoE", DType: "float16", Metric: "tok_s", Value: 4.2},
		{Hardware: "Apple M2 Max", Model: "Big-MoE", DType: "float16", Metric: "prefill_tok_s", Value: 70},
		{Hardware: "Apple M4 Max", Model: "Other", DType: "float16", Metric: "tok_s", Value: 70},
	}
	lines := Documented(hist, "Big-MoE", testBytes)
	if len(lines) != 1 || lines[0].Label() != "M3 Ultra roofline (819 GB/s)" || math.Abs(lines[0].TokS-100) > 1e-9 {
		t.Errorf("Documented = %+v, want one M3 Ultra line at 100 tok/s", lines)
	}
}
