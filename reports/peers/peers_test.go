package peers

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/metrics"
)

// The samples in testdata are written in each tool's documented output
// format (llama.cpp's tools/llama-bench/README.md, vLLM's
// vllm/benchmarks/serve.py and latency.py, mlx-lm's mlx_lm/benchmark.py).
func TestDetectAndParse(t *testing.T) {
	for _, tc := range []struct {
		file, format string
		opts         Options
		runs         int
		keys         []string
		metric       string
		first        float64
	}{
		{"llama-bench.json", FormatLlamaBench, Options{}, 1,
			[]string{"model/bench/batch=1/gen_len=8/prompt_len=16", "model/bench/batch=1/depth=16/gen_len=0/prompt_len=16", "model/bench/batch=1/gen_len=8/prompt_len=0"},
			"prefill_tok_s", 9512.4},
		{"llama-bench.jsonl", FormatLlamaBench, Options{}, 2, []string{"model/bench/batch=1/gen_len=8/prompt_len=16"}, "prefill_tok_s", 8400},
		{"vllm-serve.json", FormatVLLMServe, Options{}, 1, []string{"model/bench/batch=2/gen_len=8/prompt_len=16"}, "output_tok_s", 390.24},
		// At --request-rate 4 (Poisson) with --goodput: the case mtlbench's
		// arrival "poisson:4" makes, and its goodput.
		{"vllm-serve-rate.json", FormatVLLMServe, Options{}, 1, []string{"model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6"}, "goodput_per_s", 3.5},
		{"vllm-latency.json", FormatVLLMLatency, Options{Batch: 2, PromptLen: 16, GenLen: 8}, 1,
			[]string{"model/bench/batch=2/gen_len=8/prompt_len=16"}, "output_tok_s", 16 / 0.0412},
		{"vllm-latency.json", FormatVLLMLatency, Options{}, 1, []string{"model/bench/batch=8/gen_len=128/prompt_len=32"}, "output_tok_s", 8 * 128 / 0.0412},
		{"mlx-benchmark.txt", FormatMLX, Options{}, 1,
			[]string{"model/bench/batch=1/gen_len=8/prompt_len=16", "model/bench/batch=2/gen_len=8/prompt_len=16"}, "prefill_tok_s", 1523.411},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Detect(data)
		if err != nil || f != tc.format {
			t.Errorf("%s: Detect = %q, %v; want %s", tc.file, f, err, tc.format)
			continue
		}
		runs, err := Parse(f, tc.file, data, tc.opts)
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if len(runs) != tc.runs {
			t.Errorf("%s: %d runs, want %d", tc.file, len(runs), tc.runs)
			continue
		}
		var keys []string
		for _, c := range runs[0].Cases {
			keys = append(keys, c.Key)
		}
		if strings.Join(keys, " ") != strings.Join(tc.keys, " ") {
			t.Errorf("%s: keys\n%v\nwant\n%v", tc.file, keys, tc.keys)
		}
		for _, r := range runs {
			for _, c := range r.Cases {
				for _, s := range c.Samples {
					// Suites may gate only what metrics.Recorded lists.
					if !slices.Contains(metrics.Recorded, s.Metric) {
						t.Errorf("%s: %s is imported, but metrics.Recorded does not list it", tc.file, s.Metric)
					}
				}
			}
		}
		got := -1.0
		for _, s := range runs[0].Cases[0].Samples {
			if s.Metric == tc.metric && s.Rep == 0 {
				got = s.Value
			}
		}
		if d := got - tc.first; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: first %s = %v, want %v", tc.file, tc.metric, got, tc.first)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		format, data, want string
	}{
		{FormatLlamaBench, `[{"n_prompt": 1}]`, "no n_prompt or n_gen"},
		{FormatLlamaBench, "{\"n_prompt\": 1, \"n_gen\": 0}\nnot json\n", "line 2"},
		{FormatVLLMServe, `{"completed": 0}`, "no request finished"},
		{FormatVLLMLatency, `{"avg_latency": 1, "latencies": [0.1, -1]}`, "latency 2"},
		{FormatMLX, "Trial 1:  prompt_tps=1, generation_tps=2, peak_memory=3\n", "before any \"Timing with\""},
		{FormatMtlbench, `{"format": "other"}`, `want "mtlbench-peer-run/1"`},
		// A figure no rate can be is refused as the store would refuse it.
		{FormatMLX, "Timing with prompt_tokens=16, generation_tokens=8, batch_size=1.\nTrial 1:  prompt_tps=-1e308, generation_tps=2, peak_memory=3\n",
			`f: mlx-lm: case "bench/batch=1/prompt_len=16/gen_len=8" sample 0: prefill_tok_s rep 0: value -1e+308 is negative, and a rate cannot be`},
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "samples_ts": [20, -3]}]`, "decode_tok_s rep 1: value -3 is negative"},
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "n_depth": -5, "samples_ts": [20]}]`, "n_depth -5: token counts cannot be negative"},
		{"xml", `{}`, `unknown peer format "xml"`},
	} {
		_, err := Parse(tc.format, "f", []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.format, tc.data, err, tc.want)
		}
	}
	if _, err := Detect([]byte("hello")); err == nil {
		t.Error("Detect accepted text of no tool")
	}
}

func TestQuantOf(t *testing.T) {
	for in, want := range map[string]string{
		"qwen2 7B Q4_K - Medium": "Q4_K - Medium",
		"llama 7B mostly Q4_0":   "Q4_0",
		"qwen3moe 30B.A3B BF16":  "BF16",
		"unknown":                "unknown",
	} {
		if got := quantOf(in); got != want {
			t.Errorf("quantOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// A finite rate of Poisson or gamma arrivals is an arrival mtlbench makes,
// keyed as its suites key it.
func TestVLLMArrival(t *testing.T) {
	one, two, half, zero := 1.0, 2.0, 0.5, 0.0
	for _, tc := range []struct {
		rate       string
		burstiness *float64
		want       string
	}{
		{"4.0", &one, "poisson:4"},
		{"0.5", nil, "poisson:0.5"}, // files before --burstiness
		{"4", &two, "gamma:4:2"},
		{"8.0", &half, "gamma:8:0.5"},
		{"8", &zero, ""},    // vLLM refuses it too
		{`"inf"`, &one, ""}, // every request at once
		{"0", &one, ""},
		{"null", nil, ""},
	} {
		if got := vllmArrival([]byte(tc.rate), tc.burstiness); got != tc.want {
			t.Errorf("rate %s: %q, want %q", tc.rate, got, tc.want)
		}
	}
}
