package metrics

import (
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	for m, want := range map[string]Direction{
		"decode_tok_s": HigherIsBetter, "request_per_s": HigherIsBetter, "goodput_per_s": HigherIsBetter, "output_tok_s": HigherIsBetter, "gb_s": HigherIsBetter, "achieved_gb_s": HigherIsBetter,
		"gflop_s": HigherIsBetter, "roofline_frac": HigherIsBetter, "ttft_ms": LowerIsBetter, "itl_p99_ms": LowerIsBetter,
		"us_per_call": LowerIsBetter, "step_ms": LowerIsBetter, "peak_rss_bytes": LowerIsBetter,
		"bytes_per_step": Informational, "preemptions": Informational, "profile_overhead_pct": Informational, "mystery": Informational,
	} {
		if got := Of(m); got != want {
			t.Errorf("%s: %v, want %v", m, got, want)
		}
	}
}

func TestCheckThreshold(t *testing.T) {
	for _, c := range []struct{ metric, err string }{
		{"decode_tok_s", ""},
		{"ttft_ms", ""},
		{"us_per_call", ""},
		{"peak_rss_bytes", ""},
		{"total_tok_s", ""}, // vLLM's, through import
		{"decode_toks", `no case records a metric "decode_toks"`},
		{"decod_tok_s", `no case records a metric "decod_tok_s"`}, // a direction by its suffix, but never recorded
		{"bytes_per_step", "bytes_per_step is informational"},
		{"encode_frac", "encode_frac is informational"},
	} {
		err := CheckThreshold(c.metric)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", c.metric, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.metric, err, c.err)
		}
	}
	for _, m := range Gated() {
		if Of(m) == Informational {
			t.Errorf("gated metric %s has no direction", m)
		}
	}
}

// A threshold a gate could never pass is refused: 100% or more of a
// higher-is-better metric, which falls by at most all of it. A
// lower-is-better one may grow past 100%.
func TestCheckThresholdSize(t *testing.T) {
	for _, c := range []struct {
		metric string
		t      float64
		err    string
	}{
		{"decode_tok_s", 0, ""},
		{"decode_tok_s", 0.05, ""},
		{"decode_tok_s", 0.999, ""},
		{"decode_tok_s", 1, "decode_tok_s falls by at most 100% (to 0), so a threshold of 100% would pass every run: write less than 100%"},
		{"goodput_per_s", 5, "goodput_per_s falls by at most 100% (to 0), so a threshold of 500% would pass every run"},
		{"roofline_frac", 1.5, "a threshold of 150% would pass every run"},
		{"ttft_ms", 5, ""},
		{"us_per_call", 1, ""},
	} {
		err := CheckThresholdSize(c.metric, c.t)
		if c.err == "" {
			if err != nil {
				t.Errorf("%s %g: %v", c.metric, c.t, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s %g: error %v, want %q", c.metric, c.t, err, c.err)
		}
	}
}

// A sample's unit must be the one its metric's name says.
func TestCheckUnit(t *testing.T) {
	for _, c := range []struct {
		metric, unit string
		ok           bool
	}{
		{"decode_tok_s", "tok/s", true},
		{"decode_tok_s", "", true},
		{"decode_tok_s", "ms", false},
		{"ttft_ms", "ms", true},
		{"ttft_ms", "s", false},
		{"us_per_call", "us", true},
		{"us_per_call", "ms", false},
		{"achieved_gb_s", "GB/s", true},
		{"bytes_per_step", "B", true},
		{"roofline_frac", "ratio", true},
		{"peak_rss_bytes", "B", true},
		{"peak_rss_bytes", "MiB", false},
		{"peak_memory_bytes", "GB", false},
		{"request_per_s", "req/s", true},
		{"goodput_per_s", "tok/s", false},
		{"roofline_frac", "%", false},
	} {
		if err := CheckUnit(c.metric, c.unit); (err == nil) != c.ok {
			t.Errorf("CheckUnit(%q, %q) = %v", c.metric, c.unit, err)
		}
	}
}
