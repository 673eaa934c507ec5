package peers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

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
			[]string{"model/bench/gen_len=8/prompt_len=16", "model/bench/depth=16/gen_len=8/prompt_len=16", "model/bench/gen_len=8/prompt_len=0"},
			"prefill_tok_s", 16e9 / 1682015},
		{"llama-bench.jsonl", FormatLlamaBench, Options{}, 2, []string{"model/bench/gen_len=8/prompt_len=16"}, "prefill_tok_s", 16e9 / 1904761},
		// A --n-cpu-moe 0,48 sweep: a setting this reader has no field
		// for makes two runs, not one of pooled samples.
		{"llama-bench-ncmoe.json", FormatLlamaBench, Options{}, 2, []string{"model/bench/gen_len=128/prompt_len=512"}, "prefill_tok_s", 1000},
		{"vllm-serve.json", FormatVLLMServe, Options{}, 1, []string{"model/bench/batch=2/gen_len=8/prompt_len=16"}, "output_tok_s", 390.24},
		// At --request-rate 4 (Poisson) with --goodput: the case mtlbench's
		// arrival "poisson:4" makes, and its goodput under the slo given.
		{"vllm-serve-rate.json", FormatVLLMServe, Options{SLO: "ttft:500"}, 1, []string{"model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6/slo=ttft:500"}, "goodput_per_s", 3.5},
		// Without the slo, the goodput is left out (-1: no sample): it
		// would pair with nothing mtlbench measures.
		{"vllm-serve-rate.json", FormatVLLMServe, Options{}, 1, []string{"model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6"}, "goodput_per_s", -1},
		{"vllm-latency.json", FormatVLLMLatency, Options{Batch: 2, PromptLen: 16, GenLen: 8}, 1,
			[]string{"model/bench/batch=2/gen_len=8/prompt_len=16"}, "output_tok_s", 16 / 0.0412},
		{"vllm-latency.json", FormatVLLMLatency, Options{}, 1, []string{"model/bench/batch=8/gen_len=128/prompt_len=32"}, "output_tok_s", 8 * 128 / 0.0412},
		{"mlx-benchmark.txt", FormatMLX, Options{}, 1,
			[]string{"model/bench/gen_len=8/prompt_len=16", "model/bench/batch=2/gen_len=8/prompt_len=16"}, "prefill_tok_s", 1523.411},
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

// mlxTiming1 is an mlx_lm.benchmark case's first line.
const mlxTiming1 = "Timing with prompt_tokens=16, generation_tokens=8, batch_size=1.\n"

// The runs of a sweep over a setting say which value each ran with, and
// none pools the other's samples.
func TestLlamaBenchSweepRuns(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-ncmoe.json"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Parse(FormatLlamaBench, "ncmoe", data, Options{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	for i, want := range []struct {
		ncmoe          string
		decode, prefil float64
	}{{"0", 60, 1000}, {"48", 12, 300}} {
		c := runs[i].Cases[0]
		if c.Params["peer_n_cpu_moe"] != want.ncmoe || !strings.Contains(runs[i].Notes, "n_cpu_moe "+want.ncmoe) {
			t.Errorf("run %d: peer_n_cpu_moe %q, notes %q", i, c.Params["peer_n_cpu_moe"], runs[i].Notes)
		}
		for _, s := range c.Samples {
			if s.Metric == "decode_tok_s" && s.Value != want.decode || s.Metric == "prefill_tok_s" && s.Value != want.prefil {
				t.Errorf("run %d (n_cpu_moe %s): %s %v", i, want.ncmoe, s.Metric, s.Value)
			}
		}
	}
}

// One llama-bench file of several models (-m a.gguf -m b.gguf) is a run
// per model; --model names one model, so it would give them all one name
// and compare would pool them: refused, naming the models.
func TestLlamaBenchModels(t *testing.T) {
	row := `{"model_filename": %q, "model_type": %q, "n_prompt": 0, "n_gen": 8, "samples_ts": [20, 21]}`
	a := fmt.Sprintf(row, "models/qwen3-8b-Q4_K_M.gguf", "qwen3 8B Q4_K - Medium")
	b := fmt.Sprintf(row, "models/llama-3.2-1b-Q8_0.gguf", "llama 1B Q8_0")
	for _, c := range []struct {
		name, data, model string
		want              string // "error: ..." or the runs' model names
	}{
		{"one model", "[" + a + "]", "qwen3-8b", "qwen3-8b"},
		{"two models, their own names", "[" + a + "," + b + "]", "", "qwen3 8B Q4_K - Medium,llama 1B Q8_0"},
		{"two models, one --model", "[" + a + "," + b + "]", "qwen3-8b",
			"error: --model qwen3-8b names one model, but the file holds 2: models/qwen3-8b-Q4_K_M.gguf (qwen3 8B Q4_K - Medium), models/llama-3.2-1b-Q8_0.gguf (llama 1B Q8_0)"},
	} {
		runs, err := Parse(FormatLlamaBench, "f", []byte(c.data), Options{Model: c.model})
		if w, isErr := strings.CutPrefix(c.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, w)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var names []string
		for _, r := range runs {
			names = append(names, r.Cases[0].Params["model"])
		}
		if got := strings.Join(names, ","); got != c.want {
			t.Errorf("%s: models %s, want %s", c.name, got, c.want)
		}
	}
}

// TestErrorWording: an error gives one line, the file's, with a column
// where it helps; a case with no trials is named by its line.
func TestErrorWording(t *testing.T) {
	row := `{"n_prompt": 0, "n_gen": 8, "samples_ts": [20, 21]}`
	for _, c := range []struct {
		name, format, data string
		want               string
		not                []string
	}{
		{"a JSONL line cut short", FormatLlamaBench, row + "\n" + row[:30] + "\n",
			`line 2: the line ends (after 30 bytes) before its result does: llama-bench writes each result's line whole, so the file was cut short mid-line`, []string{"line 1"}},
		{"a JSONL line with a stray character", FormatLlamaBench, row + "\n" + row + "\n" + `{"n_prompt": 0,, "n_gen": 8}` + "\n",
			`line 3: not llama-bench -o jsonl: not valid JSON at column 16: invalid character ','`, []string{"line 1"}},
		{"an mlx case with no trials", FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=1, generation_tps=2\n\n" +
			"Timing with prompt_tokens=32, generation_tokens=8, batch_size=1.\n",
			`line 4: case bench/batch=1/prompt_len=32/gen_len=8 has no trials`, nil},
	} {
		_, err := Parse(c.format, "f", []byte(c.data), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
			continue
		}
		for _, n := range c.not {
			if strings.Contains(err.Error(), n) {
				t.Errorf("%s: %q says %q too", c.name, err, n)
			}
		}
	}
	// Detect's errors that say what to run, or that no flag mends, are not
	// ErrUnknownFormat, whose callers suggest --from.
	for _, c := range []struct {
		data    string
		unknown bool
	}{
		{`{"tool": "other"}`, true},
		{"some text\n", true},
		{"| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: | ---: |\n", false},
		{"", false},
		{`[{"n_prompt": 0,`, false},
	} {
		_, err := Detect([]byte(c.data))
		if err == nil || errors.Is(err, ErrUnknownFormat) != c.unknown {
			t.Errorf("Detect(%.30q): %v; want ErrUnknownFormat %v", c.data, err, c.unknown)
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
		{FormatVLLMServe, `[{"completed": 4}]`, "the file is a JSON array, want one result object as vLLM writes it"},
		{FormatVLLMServe, `{"completed": 4.5}`, "completed is a JSON number 4.5, want a whole number"},
		{FormatVLLMServe, `{"completed": 4, "num_prompts": 4, "total_input_tokens": 64, "total_output_tokens": 32, "median_ttft_ms": "48.0"}`, `median_ttft_ms is "48.0", not a number`},
		{FormatVLLMServe, `{"completed": 4, "num_prompts": 4, "total_input_tokens": 64, "total_output_tokens": 32, "output_throughput": [60.0]}`, `output_throughput is [60.0], not a number`},
		{FormatVLLMLatency, `{"avg_latency": 1, "latencies": [0.1, -1]}`, "latency 2"},
		{FormatMLX, "Trial 1:  prompt_tps=1, generation_tps=2, peak_memory=3\n", "before any \"Timing with\""},
		{FormatMtlbench, `{"format": "other"}`, `want "mtlbench-peer-run/1"`},
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "cases": [{"samples": [{"value": "fast"}]}]}`, `not a peer run: cases.samples.value is a JSON string ("fast"), want a number`},
		// A field the format does not have is refused, not dropped, as
		// import refuses one in an export line.
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "cases": [{"name": "d", "samples": [{"rep": 0, "metric": "decode_tok_s", "vlaue": 10, "unit": "tok/s"}]}]}`,
			`f: mtlbench: unknown field cases[0].samples[0].vlaue (did you mean "value"?): a peer run of format "mtlbench-peer-run/1" has no such field`},
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "machine": {"gpu": "H100"}, "cases": []}`, `unknown field machine.gpu`},
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "kind": "suite", "cases": []}`, `kind "suite": a peer run is of kind "peer"`},
		// A figure that is not there is not read as 0.
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "cases": [{"name": "d", "samples": [{"rep": 0, "metric": "decode_tok_s", "value": null, "unit": "tok/s"}]}]}`,
			`case 0 "d" sample 0 has null for its value (cases.samples.value)`},
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "cases": [{"name": "d", "samples": [{"rep": 0, "metric": "decode_tok_s", "unit": "tok/s"}]}]}`,
			`case 0 "d" sample 0 has no value (cases.samples.value)`},
		{FormatMtlbench, `{"format": "mtlbench-peer-run/1", "cases": [{"name": "d", "samples": [{"rep": 0, "metric": "decode_tok_s", "value": 10, "value": 1000, "unit": "tok/s"}]}]}`,
			`key "value" is given twice in cases[0].samples[0] (at line 1, column 108 and at line 1, column 121): a peer run gives each key once`},
		// A figure no rate can be is refused as the store would refuse it.
		{FormatMLX, "Timing with prompt_tokens=16, generation_tokens=8, batch_size=1.\nTrial 1:  prompt_tps=-1e308, generation_tps=2, peak_memory=3\n",
			`f: mlx-lm: case "bench/batch=1/prompt_len=16/gen_len=8" sample 0: prefill_tok_s rep 0: value -1e+308 is negative, and a rate cannot be`},
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "samples_ts": [20, -3]}]`, "result 1 (tg8): samples_ts[1] is -3: llama-bench times a test at more than 0 tokens a second"},
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "n_depth": -5, "samples_ts": [20]}]`, "n_depth -5: token counts cannot be negative"},
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "samples_ts": [20]}, {"n_prompt": 0, "n_gen": 0, "samples_ts": [20]}]`, "result 2: n_prompt and n_gen are both 0"},
		{"xml", `{}`, `unknown peer format "xml"`},
		// Types in the file's terms, at their result; llama-bench's other outputs named.
		{FormatLlamaBench, `[{"n_prompt": 0, "n_gen": 8, "samples_ts": [20]}, {"n_prompt": 0, "n_gen": 8, "samples_ts": ["fast"]}]`, `result 2: samples_ts is a JSON string ("fast"), want a number`},
		{FormatLlamaBench, "{\"n_prompt\": 0, \"n_gen\": \"8\"}\n", `line 1: n_gen is a JSON string ("8"), want a whole number`},
		{FormatLlamaBench, "| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: | ---: |\n", "llama-bench's markdown table (its default output) holds no samples: run it again with -o json"},
		{FormatLlamaBench, "{\n  \"date\": \"20250101\",\n  \"avg_latency\": 0.5\n}\n", "one JSON object over several lines: not llama-bench's -o json"},
		// Today's llama-bench right-aligns its test column.
		{FormatLlamaBench, "| model                          |       size |     params | backend    | ngl |            test |                  t/s |\n| --- | ---: | ---: | --- | --: | --------------: | -------------------: |\n", "llama-bench's markdown table (its default output) holds no samples: run it again with -o json"},
		{FormatLlamaBench, "build_commit,build_number,n_prompt,n_gen,avg_ts,stddev_ts\nabc,1,512,0,100,1\n", "llama-bench's -o csv: run it again with -o json"},
		{FormatLlamaBench, "CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n", "llama-bench's -o sql holds no samples: run it again with -o json"},
		// Older builds' table, named test.
		{FormatLlamaBench, "CREATE TABLE IF NOT EXISTS test (\n  build_commit TEXT,\n  cuda INTEGER,\n  n_prompt INTEGER,\n  n_gen INTEGER,\n  avg_ts REAL\n);\n\n", "llama-bench's -o sql holds no samples: run it again with -o json"},
		{FormatLlamaBench, "\xff\xfe{\x00[", "UTF-16 text of an odd number of bytes"},
		// A trial twice in one case, numbered 0, or past any run; a line
		// longer than any tool prints, by its number.
		{FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=1, generation_tps=2\nTrial 1:  prompt_tps=3\n",
			"line 3: Trial 1's prompt_tps again (line 2 has it) in the case of line 1"},
		{FormatMLX, mlxTiming1 + "Trial 0:  prompt_tps=1\n", "line 2: Trial 0 (trials count from 1 to 1048576)"},
		// a figure read whole, never its first digits
		{FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=1,234.567, generation_tps=2\n", `line 2: "234.567" is not key=number`},
		{FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=45.6x, generation_tps=2\n", `line 2: "prompt_tps=45.6x" is not key=number`},
		{FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=abc\n", `line 2: "prompt_tps=abc" is not key=number`},
		{FormatMLX, mlxTiming1 + "Trial 99999999999999999999:  prompt_tps=1\n", "line 2: Trial 99999999999999999999"},
		{FormatMLX, mlxTiming1 + "Trial 1:  prompt_tps=1\n" + strings.Repeat("x", 17<<20), "line 3: longer than 16777216 bytes"},
		{FormatLlamaBench, "{\"n_prompt\": 1, \"n_gen\": 0}\n" + strings.Repeat(" ", 17<<20) + "x", "line 2: longer than 16777216 bytes, which llama-bench does not print"},
	} {
		_, err := Parse(tc.format, "f", []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.format, tc.data, err, tc.want)
		}
	}
	if _, err := Detect([]byte("hello")); err == nil {
		t.Error("Detect accepted text of no tool")
	}
	// A result cut short inside its one JSON value says where it stops,
	// not that its first line is no JSON.
	for _, f := range []string{"vllm-serve.json", "llama-bench.jsonl"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		cut := data[:200]
		want := "line " + strconv.Itoa(1+bytes.Count(bytes.TrimSpace(cut), []byte("\n"))) + ": the text ends inside a value: cut short; copy the whole file"
		if _, err := Detect(cut); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Detect of %s cut short: %v, want %q", f, err, want)
		}
	}
	if _, err := Detect([]byte("| model | size | params | backend | threads | test | t/s |\n")); err == nil || !strings.Contains(err.Error(), "-o json") {
		t.Errorf("Detect of llama-bench's markdown: %v", err)
	}
	// A file cut short is said with where it stops, whichever tool wrote it,
	// in one wording whether its value is an array or an object
	// (TestDetectCutShortOneWording).
	if _, err := Detect([]byte("[\n  {\n    \"build_commit\": \"b4f2a1c9\",\n")); err == nil || !strings.Contains(err.Error(), "line 3: ") {
		t.Errorf("Detect of a JSON array cut short: %v", err)
	}
	// A start time in a form the tool does not write is said, not dropped.
	runs, err := Parse(FormatLlamaBench, "f", []byte(`[{"n_prompt": 0, "n_gen": 8, "samples_ts": [20], "test_time": "20/11/2026 09:15"}]`), Options{})
	if err != nil || len(runs) != 1 || len(runs[0].Warnings) != 1 || !strings.Contains(runs[0].Warnings[0], `test_time "20/11/2026 09:15" is not an RFC 3339 time`) {
		t.Errorf("an odd test_time: %v %+v", err, runs)
	}
}

func TestQuantOf(t *testing.T) {
	for in, want := range map[string]string{
		"qwen2 7B Q4_K - Medium": "q4_k_m",
		"llama 7B mostly Q4_0":   "q4_0",
		"qwen3moe 30B.A3B BF16":  "bf16",
		"llama 8B Q3_K - Small":  "q3_k_s",
		"qwen3moe ?B BF16":       "bf16", // a size llama.cpp does not name
		"gpt2 0.1B F16":          "f16",
		"unknown":                "unknown",
	} {
		if got := quantOf(in); got != want {
			t.Errorf("quantOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// A finite rate of Poisson or gamma arrivals is an arrival mtlbench makes,
// keyed as its suites key it; a rate or burstiness the suites refuse is an
// error, not a run keyed as if every request came at once.
func TestVLLMArrival(t *testing.T) {
	one, two, half, zero, neg := 1.0, 2.0, 0.5, 0.0, -1.0
	for _, tc := range []struct {
		rate       string
		burstiness *float64
		want       string // "error: ..." for an error holding it
	}{
		{"4.0", &one, "poisson:4"},
		{"0.5", nil, "poisson:0.5"}, // files before --burstiness
		{"4", &two, "gamma:4:2"},
		{"8.0", &half, "gamma:8:0.5"},
		{`"inf"`, &one, ""}, // every request at once
		{`"Infinity"`, nil, ""},
		{"null", nil, ""},
		{"8", &zero, "error: burstiness 0 is outside 0.001 to 1000"},
		{"8", &neg, "error: burstiness -1 is outside"},
		{"0", &one, "error: request_rate 0, burstiness 1: rate 0 requests a second is outside"},
		{"-4", nil, "error: rate -4 requests a second is outside"},
		{`"4"`, nil, `error: request_rate "4": want a number of requests a second or "inf"`},
		{`{}`, nil, `error: request_rate {}: want a number`},
	} {
		got, err := vllmArrival([]byte(tc.rate), tc.burstiness)
		if w, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("rate %s: %q, %v; want an error saying %q", tc.rate, got, err, w)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("rate %s: %q, %v; want %q", tc.rate, got, err, tc.want)
		}
	}
}

// Python's json writes NaN and Infinity, which JSON lacks: a vLLM file with
// them imports, its NaN figures left out; wrong types and counts are named.
func TestVLLMServeBadValues(t *testing.T) {
	base := `{"date": "20250101-120000", "backend": "vllm", "model_id": "m", "num_prompts": 8, "request_rate": %s,
"burstiness": 1.0, "max_concurrency": 4, "completed": 8, "total_input_tokens": %s, "total_output_tokens": 1024,
"duration": 2.0, "output_throughput": 512.0, "median_ttft_ms": NaN, "p99_ttft_ms": Infinity, "request_throughput": 4.0}`
	runs, err := Parse(FormatVLLMServe, "serve.json", []byte(fmt.Sprintf(base, "Infinity", "1024")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := runs[0].Cases[0]
	if c.Params["arrival"] != "" || c.Params["prompt_len"] != "128" {
		t.Errorf("params %v", c.Params)
	}
	for _, s := range c.Samples {
		if s.Metric == "ttft_ms" || s.Metric == "ttft_p99_ms" {
			t.Errorf("a NaN or infinite figure recorded: %v", s)
		}
	}
	if f, err := Detect([]byte(fmt.Sprintf(base, "4", "1024"))); err != nil || f != FormatVLLMServe {
		t.Errorf("Detect: %q, %v", f, err)
	}
	for _, tc := range []struct{ rate, input, want string }{
		{"4", "-16", "total_input_tokens holds -16, a negative count of tokens"},
		{"4", `"1024"`, `total_input_tokens is a JSON string ("1024"), want a whole number`},
		{"-4", "1024", "rate -4 requests a second is outside"},
	} {
		_, err := Parse(FormatVLLMServe, "serve.json", []byte(fmt.Sprintf(base, tc.rate, tc.input)), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "serve.json") {
			t.Errorf("rate %s, input %s: %v, want %q", tc.rate, tc.input, err, tc.want)
		}
	}
	if _, err := Parse(FormatVLLMServe, "serve.json", []byte(strings.Replace(fmt.Sprintf(base, "4", "1024"), `"num_prompts": 8`, `"num_prompts": 0`, 1)), Options{}); err == nil ||
		!strings.Contains(err.Error(), "num_prompts is 0, fewer than the 8 completed") {
		t.Errorf("num_prompts 0: %v", err)
	}
	// A string holding NaN is a string.
	if got := string(pythonJSON([]byte(`{"a": "NaN \" Infinity", "b": [NaN, -Infinity]}`))); got != `{"a": "NaN \" Infinity", "b": [null, "-inf"]}` {
		t.Errorf("pythonJSON: %s", got)
	}
}

// NaN is no measurement: a file holding one is refused where it stands, not
// stored as 0, and a case of no figure at all is refused too.
func TestNaNIsNoFigure(t *testing.T) {
	for _, tc := range []struct{ format, data, want string }{
		{FormatVLLMLatency, `{"avg_latency": 1.0, "latencies": [1.0, NaN], "percentiles": {}}`, "latency 2 is NaN or null"},
		{FormatLlamaBench, `[{"model_type": "m", "n_prompt": 512, "n_gen": 0, "n_batch": 1, "avg_ts": 100, "samples_ts": [NaN, 100]}]`, "[0].samples_ts[0] is NaN (at line 1, column 95): a float that is not finite"},
		{FormatLlamaBench, `[{"model_type": "m", "n_prompt": 512, "n_gen": 0, "n_batch": 1, "avg_ts": 0, "samples_ts": []}]`, "result 1 (pp512): samples_ns and samples_ts are empty and avg_ts 0: no repetition was timed (llama-bench -r 0)"},
	} {
		_, err := Parse(tc.format, "f.json", []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.format, tc.data, err, tc.want)
		}
	}
}

// A peer's sizes stay within the suites' bounds.
func TestPeerSizesBounded(t *testing.T) {
	data := `{"date": "20250101-120000", "backend": "vllm", "model_id": "m", "num_prompts": 8, "request_rate": "inf",
"max_concurrency": 4, "completed": 8, "total_input_tokens": 9223372036854775800, "total_output_tokens": 1024,
"duration": 2.0, "output_throughput": 512.0}`
	if _, err := Parse(FormatVLLMServe, "serve.json", []byte(data), Options{}); err == nil || !strings.Contains(err.Error(), "prompt_len 1152921504606846976 is outside 0 to 16777216") {
		t.Errorf("a prompt of 2^60 tokens: %v", err)
	}
}

// A vLLM serving run is keyed as bench keys its case, or refused: a rate
// records its requests even when they equal the batch, and keys them as a
// suite does, left out there as the default; lengths drawn around a range
// need the lengths vLLM was given; a batch above the prompts is never
// full.
func TestVLLMServeKeys(t *testing.T) {
	run := `{"backend": "vllm", "model_id": "m", "num_prompts": 4, "request_rate": %s, "max_concurrency": %d, "completed": 4,
"total_input_tokens": 66, "total_output_tokens": 30, "duration": 1.0, "output_throughput": 30.0}`
	runs, err := Parse(FormatVLLMServe, "s.json", []byte(fmt.Sprintf(run, "4", 4)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := runs[0].Cases[0]; c.Key != "model/bench/arrival=poisson:4/batch=4/gen_len=8/prompt_len=17" || c.Params["requests"] != "4" {
		t.Errorf("a serving run at a rate of requests equal to its batch: keyed %s, params %v", c.Key, c.Params)
	}
	for _, c := range []struct {
		rate string
		conc int
		o    Options
		want string
	}{
		{"4", 4, Options{RangeRatio: "0.5"}, "--range-ratio 0.5: give the --random-input-len and --random-output-len"},
		{"Infinity", 0, Options{Batch: 64}, "batch 64 is more than the 4 prompts"},
	} {
		if _, err := Parse(FormatVLLMServe, "s.json", []byte(fmt.Sprintf(run, c.rate, c.conc)), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// A run of --ramp-up-strategy records a rate of inf, but its requests
// arrive at a rate climbing from start to end: keyed by its ramp, never as
// every request at once (which would pair it with burst cases), and a ramp
// vLLM would not run is an error naming it.
func TestVLLMServeRampUp(t *testing.T) {
	run := `{"backend": "vllm", "model_id": "m", "num_prompts": 8, "request_rate": %s, "burstiness": %s, "max_concurrency": 8,
"completed": 8, "total_input_tokens": 64, "total_output_tokens": 32, "duration": 1.0, "output_throughput": 30.0%s}`
	ramp := func(strategy string, start, end any) string {
		return fmt.Sprintf(`, "ramp_up_strategy": %s, "ramp_up_start_rps": %v, "ramp_up_end_rps": %v`, strategy, start, end)
	}
	burst, err := Parse(FormatVLLMServe, "s.json", []byte(fmt.Sprintf(run, `"inf"`, "1.0", "")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, rate, burstiness, ramp string
		want                         string // the key's tail, or "error: ..."
	}{
		{"linear", `"inf"`, "1.0", ramp(`"linear"`, 1, 20), "/ramp_up=linear:1:20"},
		{"exponential, gamma gaps", "Infinity", "2.0", ramp(`"exponential"`, 2, 32), "/ramp_up=exponential:2:32:2"},
		{"no strategy", `"inf"`, "1.0", ramp("null", 1, 20), "/batch=8/gen_len=4/prompt_len=8"},
		{"unknown strategy", `"inf"`, "1.0", ramp(`"cubic"`, 1, 20), `error: ramp_up_strategy "cubic": want linear or exponential`},
		{"a rate too", "4.0", "1.0", ramp(`"linear"`, 1, 20), "error: request_rate 4.0 and ramp_up_strategy linear"},
		{"no end", `"inf"`, "1.0", ramp(`"linear"`, 1, "null"), "error: ramp_up_end_rps is null: want a number of requests a second"},
		{"negative start", `"inf"`, "1.0", ramp(`"linear"`, -1, 20), "error: ramp_up_start_rps -1: want a number of requests a second, 0 or more"},
	} {
		runs, err := Parse(FormatVLLMServe, "s.json", []byte(fmt.Sprintf(run, c.rate, c.burstiness, c.ramp)), Options{})
		if w, isErr := strings.CutPrefix(c.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, w)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		k := runs[0].Cases[0].Key
		if !strings.HasSuffix(k, c.want) {
			t.Errorf("%s: keyed %s, want it to end %s", c.name, k, c.want)
		}
		if strings.Contains(c.ramp, "null") == false && k == burst[0].Cases[0].Key {
			t.Errorf("%s: keyed %s, as a burst of every request at once", c.name, k)
		}
	}
}

// mtlbench's own peer format: a case's key must say what its params say
// (compare pairs by key), a file naming no machine ran on the importing
// one, and a start that is no time is said to be so.
func TestMtlbenchFormatChecks(t *testing.T) {
	file := func(machine, started, key string) []byte {
		return []byte(`{"format": "mtlbench-peer-run/1", "tool": "transformers", "suite_name": "decode", "backend": "cuda",` +
			machine + ` "started_at": "` + started + `", "cases": [{"key": "` + key + `", "name": "d", "kind": "model",` +
			` "params": {"batch": "1", "gen_len": "64", "prompt_len": "128"}, "samples": [{"rep": 0, "metric": "decode_tok_s", "value": 10, "unit": "tok/s"}]}]}`)
	}
	const good = "model/decode/batch=1/gen_len=64/prompt_len=128"
	if _, err := Parse(FormatMtlbench, "f", file("", "2025-03-01T12:00:00Z", "model/decode/batch=2/gen_len=999/prompt_len=5"), Options{}); err == nil ||
		!strings.Contains(err.Error(), "the key says batch=2, the params batch=1") {
		t.Errorf("a key that contradicts its params: %v", err)
	}
	runs, err := Parse(FormatMtlbench, "f", file("", "yesterday", good), Options{})
	if err != nil || runs[0].HasMachine || len(runs[0].Warnings) != 1 || !strings.Contains(runs[0].Warnings[0], `started_at "yesterday" is not an RFC 3339 time`) {
		t.Errorf("no machine, a bad start: %v %+v", err, runs)
	}
	runs, err = Parse(FormatMtlbench, "f", file(`"machine": {"hostname": "h100-a", "gpu_name": "NVIDIA H100"},`, "2025-03-01T12:00:00Z", good), Options{})
	if err != nil || !runs[0].HasMachine || runs[0].Machine.GPUName != "NVIDIA H100" {
		t.Errorf("a named machine: %v %+v", err, runs)
	}
}

// vLLM's files name the API served, not a device: the run's backend is
// vLLM, the endpoint a label, and the rate a label without JSON's quotes.
func TestVLLMLabels(t *testing.T) {
	for _, f := range []struct{ file, format string }{{"vllm-serve.json", FormatVLLMServe}, {"vllm-latency.json", FormatVLLMLatency}} {
		data, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		runs, err := Parse(f.format, f.file, data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if runs[0].Backend != "vllm" {
			t.Errorf("%s: backend %q", f.file, runs[0].Backend)
		}
		if r, ok := runs[0].Cases[0].Params["peer_request_rate"]; ok && strings.Contains(r, `"`) {
			t.Errorf("%s: peer_request_rate %s", f.file, r)
		}
	}
}

// vllm bench serve --append-result adds each run's result to the file, one
// JSON object a line (a sweep of rates in one file): each is a run, and a
// result cut short or wrong is named by its number and line.
func TestVLLMServeAppended(t *testing.T) {
	var lines []string
	for _, f := range []string{"vllm-serve.json", "vllm-serve-rate.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b.String())
	}
	appended := lines[0] + "\n" + lines[1] // vLLM writes no newline after the last
	// Results saved apart and joined (cat a.json b.json), as printed.
	var pretty []string
	for _, l := range lines {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(l), "", "  "); err != nil {
			t.Fatal(err)
		}
		pretty = append(pretty, b.String())
	}
	joined := pretty[0] + "\n" + pretty[1] + "\n"
	for _, tc := range []struct {
		name, data string
		keys       []string
		err        string
	}{
		{"two runs", appended, []string{"model/bench/batch=2/gen_len=8/prompt_len=16", "model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6"}, ""},
		{"CRLF", strings.ReplaceAll(appended, "\n", "\r\n") + "\r\n", []string{"model/bench/batch=2/gen_len=8/prompt_len=16", "model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6"}, ""},
		{"second cut short", lines[0] + "\n" + lines[1][:200], nil, "result 2: line 2: the text ends inside a value"},
		{"second wrong", lines[0] + "\n" + strings.Replace(lines[1], `"completed":6`, `"completed":0`, 1), nil, "result 2 (line 2, --append-result): completed is 0"},
		{"garbage after", lines[0] + "\nxyz", nil, "result 2: not valid JSON at line 2"},
		{"joined, over lines", joined, []string{"model/bench/batch=2/gen_len=8/prompt_len=16", "model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/requests=6"}, ""},
		{"joined, the second cut short", joined[:len(pretty[0])+200], nil, "result 2: line " + strconv.Itoa(2+strings.Count(pretty[0], "\n")) + ": the text ends inside a value: cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			format, err := Detect([]byte(tc.data))
			if err != nil || format != FormatVLLMServe {
				t.Fatalf("Detect: %q, %v", format, err)
			}
			runs, err := Parse(format, "serve.json", []byte(tc.data), Options{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range runs {
				for _, c := range r.Cases {
					keys = append(keys, c.Key)
				}
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys %q, want %q", keys, tc.keys)
			}
		})
	}
}

// mlx_lm.benchmark's "Timing with" line as each release printed it: 0.27
// ran one sequence and named no batch; 0.28 on name its batch_size.
func TestMLXTimingLines(t *testing.T) {
	trials := "Trial 1:  prompt_tps=1500.000, generation_tps=500.000, peak_memory=0.231\n" +
		"Trial 2:  prompt_tps=1510.000, generation_tps=505.000, peak_memory=0.231\n"
	for _, tc := range []struct{ name, timing, key string }{
		{"0.27", "Timing with prompt_tokens=512 and generation_tokens=128.", "model/bench/gen_len=128/prompt_len=512"},
		{"0.28", "Timing with prompt_tokens=512, generation_tokens=128, batch_size=4.", "model/bench/batch=4/gen_len=128/prompt_len=512"},
		{"0.31 total_time", "Timing with prompt_tokens=512, generation_tokens=128, batch_size=1.", "model/bench/gen_len=128/prompt_len=512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte("Running warmup..\n" + tc.timing + "\n" + strings.ReplaceAll(trials, "0.231\n", "0.231, total_time=1.234\n"))
			format, err := Detect(data)
			if err != nil || format != FormatMLX {
				t.Fatalf("Detect: %q, %v", format, err)
			}
			runs, err := Parse(format, "mlx.txt", data, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c := runs[0].Cases; len(c) != 1 || c[0].Key != tc.key || len(c[0].Samples) != 6 {
				t.Errorf("cases %+v, want one %s of 6 samples", c, tc.key)
			}
		})
	}
}

// A tool's output saved by Windows tools starts with a byte-order mark:
// UTF-8's (PowerShell's Out-File, Notepad) or UTF-16's (Windows
// PowerShell's >), in either byte order; each reads as the plain file.
func TestByteOrderMarks(t *testing.T) {
	encode := func(s string, big bool) []byte {
		out := []byte{0xFF, 0xFE}
		if big {
			out = []byte{0xFE, 0xFF}
		}
		for _, u := range utf16.Encode([]rune(s)) {
			if big {
				out = append(out, byte(u>>8), byte(u))
			} else {
				out = append(out, byte(u), byte(u>>8))
			}
		}
		return out
	}
	for _, f := range []struct{ file, format string }{{"llama-bench.json", FormatLlamaBench}, {"llama-bench.jsonl", FormatLlamaBench},
		{"vllm-serve.json", FormatVLLMServe}, {"vllm-latency.json", FormatVLLMLatency}, {"mlx-benchmark.txt", FormatMLX}} {
		data, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		want, err := Parse(f.format, f.file, data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		crlf := strings.ReplaceAll(string(data), "\n", "\r\n")
		for name, enc := range map[string][]byte{"utf-8 bom": append([]byte("\xef\xbb\xbf"), data...),
			"utf-16le crlf": encode(crlf, false), "utf-16be": encode(string(data), true)} {
			got, err := Detect(enc)
			if err != nil || got != f.format {
				t.Errorf("%s, %s: Detect %q, %v", f.file, name, got, err)
				continue
			}
			runs, err := Parse(got, f.file, enc, Options{})
			if err != nil || len(runs) != len(want) || len(runs[0].Cases) != len(want[0].Cases) || runs[0].Cases[0].Key != want[0].Cases[0].Key {
				t.Errorf("%s, %s: %v, %d runs, want %d", f.file, name, err, len(runs), len(want))
			}
		}
	}
}

// A run of one output token a request has no TPOT or ITL: vLLM writes 0 ms
// for the statistics of an empty list, which is no figure, and the run's
// notes say which were left out.
func TestVLLMServeZeroLatencies(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "vllm-serve-gen1.json"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Parse(FormatVLLMServe, "vllm-serve-gen1.json", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := runs[0].Cases[0]
	if c.Key != "model/bench/batch=4/gen_len=1/prompt_len=16" {
		t.Errorf("key %s", c.Key)
	}
	got := map[string]float64{}
	for _, s := range c.Samples {
		got[s.Metric] = s.Value
	}
	for _, m := range []string{"tpot_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms"} {
		if v, ok := got[m]; ok {
			t.Errorf("%s recorded as %v: vLLM measured none", m, v)
		}
	}
	if got["ttft_ms"] != 40.9 || got["e2el_ms"] != 41.2 || got["output_tok_s"] != 76.92 {
		t.Errorf("figures %v", got)
	}
	if !strings.Contains(runs[0].Notes, "median_tpot_ms, median_itl_ms, p99_itl_ms, p99_tpot_ms left out") {
		t.Errorf("notes %q", runs[0].Notes)
	}
}

// A serving run whose requests failed in part (vLLM's completed below
// num_prompts, failed beside it) measured fewer requests than its case
// says: it is read, with its per-request lengths of the completed ones,
// and a warning names the failures.
func TestVLLMServeFailedRequests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "vllm-serve-failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Parse(FormatVLLMServe, "vllm-serve-failed.json", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k := runs[0].Cases[0].Key; k != "model/bench/batch=4/gen_len=8/prompt_len=16" {
		t.Errorf("key %s", k)
	}
	want := "1 of the 4 requests failed: the figures are of the 3 that completed"
	if !slices.Contains(runs[0].Warnings, want) || !strings.Contains(runs[0].Notes, want) {
		t.Errorf("warnings %q, notes %q; want %q", runs[0].Warnings, runs[0].Notes, want)
	}
}

// llama-bench builds before its backends field (2023-24) wrote a flag a
// backend ("metal": true, "blas": true); a Metal run of one is a Metal run.
func TestLlamaBenchOldBackendFlags(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-old.json"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Parse(FormatLlamaBench, "llama-bench-old.json", data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Backend != "metal" {
		t.Fatalf("%d runs, backend %q; want one of metal", len(runs), runs[0].Backend)
	}
	c := runs[0].Cases[0]
	if c.Key != "model/bench/gen_len=128/prompt_len=512" || c.Params["dtype"] != "q4_0" {
		t.Errorf("key %s, dtype %q", c.Key, c.Params["dtype"])
	}
	var decode []float64
	for _, s := range c.Samples {
		if s.Metric == "decode_tok_s" {
			decode = append(decode, s.Value)
		}
	}
	if !slices.Equal(decode, []float64{128e9 / 2154305125, 128e9 / 2160768750, 128e9 / 2163162500}) {
		t.Errorf("decode %v", decode)
	}
	// No n_ubatch in the file: no label of 0 for it, nor a note.
	if v, ok := c.Params["peer_n_ubatch"]; ok || strings.Contains(runs[0].Notes, "n_ubatch") {
		t.Errorf("peer_n_ubatch %q, notes %q: the file has no n_ubatch", v, runs[0].Notes)
	}
	if c.Params["peer_n_batch"] != "512" || c.Params["peer_type_k"] != "f16" || c.Params["peer_threads"] != "8" {
		t.Errorf("params %v", c.Params)
	}
	for _, tc := range []struct{ flags, want string }{
		{`"cuda": false, "metal": false, "blas": true`, "blas"},
		{`"cuda": true, "metal": false, "blas": false`, "cuda"},
		{`"cuda": false, "metal": false`, "cpu"},
	} {
		row := `[{"model_type": "llama 7B mostly Q4_0", ` + tc.flags + `, "n_prompt": 512, "n_gen": 0, "samples_ts": [640.5]}]`
		runs, err := Parse(FormatLlamaBench, "old.json", []byte(row), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.flags, err)
		} else if runs[0].Backend != tc.want {
			t.Errorf("%s: backend %q, want %q", tc.flags, runs[0].Backend, tc.want)
		}
	}
}

// A llama-bench row holds its own figures or is refused where it stands,
// named by its line (-o jsonl) or place in the array (-o json) and its
// test: -r 0 writes empty samples beside an avg_ts of 0, and no test runs
// at 0 tokens a second, which would pull a median down.
func TestLlamaBenchRowSamples(t *testing.T) {
	row := `{"build_commit": "7f09a680", "build_number": 6900, "backends": "Metal,BLAS", "model_type": "qwen3moe 30B.A3B Q4_K - Medium", ` +
		`"n_prompt": %d, "n_gen": %d, "n_depth": %d, "test_time": "2026-11-20T09:15:02Z", "avg_ns": %s, "stddev_ns": 0, "avg_ts": %s, "stddev_ts": 0.000000, ` +
		`"samples_ns": [ %s ],"samples_ts": [ %s ]}`
	ok := fmt.Sprintf(row, 512, 0, 0, "250000000", "2048.000000", "250000000", "2048")
	for _, tc := range []struct{ data, want string }{
		{ok + "\n" + fmt.Sprintf(row, 0, 128, 4096, "0", "0.000000", " ", " ") + "\n", "line 2 (tg128 @ d4096): samples_ns and samples_ts are empty and avg_ts 0: no repetition was timed (llama-bench -r 0)"},
		{ok + "\n\n" + fmt.Sprintf(row, 512, 128, 0, "1", "0.000000", "0, 2", "0, 3.2e+11") + "\n", "line 3 (pp512+tg128): samples_ns[0] is 0"},
		// A file without samples_ns: its samples_ts are the figures.
		{"[" + ok + ",\n" + strings.Replace(fmt.Sprintf(row, 0, 128, 0, "1", "1", "", "64, -64"), `"samples_ns": [  ],`, "", 1) + "]", "result 2 (tg128): samples_ts[1] is -64"},
	} {
		_, err := Parse(FormatLlamaBench, "llama.jsonl", []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), "llama.jsonl: llama-bench: "+tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	// -r 1: one sample, a deviation of 0.
	runs, err := Parse(FormatLlamaBench, "llama.jsonl", []byte(ok+"\n"), Options{})
	if err != nil || len(runs[0].Cases) != 1 || len(runs[0].Cases[0].Samples) != 1 || runs[0].Cases[0].Samples[0].Value != 2048 {
		t.Errorf("-r 1: %v %+v", err, runs)
	}
}

// llama-bench -o json writes each result as it finishes and its closing ]
// last: the file of a run stopped midway is recognised, and refused
// saying so, at its last line.
func TestLlamaBenchStoppedArray(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-stopped.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Detect(data)
	if err != nil || f != FormatLlamaBench {
		t.Fatalf("Detect: %q, %v", f, err)
	}
	_, err = Parse(f, "llama.json", data, Options{})
	want := "llama.json: llama-bench: line 85: the file ends inside llama-bench's -o json array, before its closing ]: the run stopped before its end"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
	// Cut inside a value: the same.
	if _, err := Parse(f, "llama.json", data[:len(data)-40], Options{}); err == nil || !strings.Contains(err.Error(), "before its closing ]") {
		t.Errorf("cut inside a value: %v", err)
	}
}

// llama-bench -o jsonl as it prints it (-p 512 -n 128 -d 0,512 -r 3: each
// depth's pp then tg, the fields in its order, samples_ts at six
// significant digits): every figure lands in the case of its test, at the
// rate its samples_ns give.
func TestLlamaBenchDepthFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-depth.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Detect(data)
	if err != nil || f != FormatLlamaBench {
		t.Fatalf("Detect: %q, %v", f, err)
	}
	runs, err := Parse(f, "llama-bench-depth.jsonl", data, Options{Model: "qwen3-30b-a3b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs", len(runs))
	}
	r := runs[0]
	if r.Backend != "metal" || r.ToolVersion != "build 6900 (7f09a680)" || r.StartedAt.Format("2006-01-02T15:04:05Z07:00") != "2026-11-20T09:15:02Z" {
		t.Errorf("backend %q, version %q, start %v", r.Backend, r.ToolVersion, r.StartedAt)
	}
	got := map[string]string{}
	for _, c := range r.Cases {
		var b strings.Builder
		fmt.Fprintf(&b, "depth %s:", c.Params["peer_decode_depth"])
		for _, s := range c.Samples {
			fmt.Fprintf(&b, " %s[%d]=%g%s", s.Metric, s.Rep, s.Value, s.Unit)
		}
		got[c.Key] = b.String()
		if c.Params["model"] != "qwen3-30b-a3b" || c.Params["dtype"] != "q4_k_m" || c.Params["peer_model_file"] != "/Users/me/models/Qwen3-30B-A3B-Q4_K_M.gguf" {
			t.Errorf("%s: params %v", c.Key, c.Params)
		}
	}
	want := map[string]string{
		// pp512 with its decode after 512 tokens (tg128 @ d512).
		"model/bench/gen_len=128/prompt_len=512": "depth 512: prefill_tok_s[0]=2047.1436143175354tok/s prefill_tok_s[1]=2032.7055817086862tok/s prefill_tok_s[2]=2043.8112089273036tok/s " +
			"decode_tok_s[0]=62.744602080044835tok/s decode_tok_s[1]=62.60454215722691tok/s decode_tok_s[2]=62.70730333311397tok/s",
		// pp512 @ d512: bench -d 512's prompt; no tg128 @ d1024 was timed.
		"model/bench/depth=512/gen_len=128/prompt_len=512": "depth : prefill_tok_s[0]=1948.437130606812tok/s prefill_tok_s[1]=1946.0247385810328tok/s prefill_tok_s[2]=1950.5418252797817tok/s",
		// tg128 on an empty cache.
		"model/bench/gen_len=128/prompt_len=0": "depth 0: decode_tok_s[0]=64.47020538419395tok/s decode_tok_s[1]=64.31488836249062tok/s decode_tok_s[2]=64.4186784426185tok/s",
	}
	if len(got) != len(want) {
		t.Errorf("cases %v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s:\n got %s\nwant %s", k, got[k], w)
		}
	}
}

// llama-bench's other outputs as it prints them (its markdown table with
// "± " cells and the build footer, -o csv's quoted values under its whole
// header, -o sql) hold means, not repetitions: each is named, by Detect and
// by Parse, with what to run instead.
func TestLlamaBenchTextOutputs(t *testing.T) {
	md := "| model                          |       size |     params | backend    | ngl |            test |                  t/s |\n" +
		"| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |\n" +
		"| qwen3moe 30B.A3B Q4_K - Medium |  16.49 GiB |    30.53 B | Metal,BLAS |  99 |           pp512 |       2043.92 ± 5.71 |\n" +
		"| qwen3moe 30B.A3B Q4_K - Medium |  16.49 GiB |    30.53 B | Metal,BLAS |  99 |   tg128 @ d4096 |         41.22 ± 0.09 |\n\nbuild: 7f09a680 (6900)\n"
	csv := "build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type,model_size,model_n_params,n_batch,n_ubatch,n_threads,cpu_mask,cpu_strict,poll,type_k,type_v,n_gpu_layers,n_cpu_moe,split_mode,main_gpu,no_kv_offload,flash_attn,devices,tensor_split,tensor_buft_overrides,use_mmap,embeddings,no_op_offload,no_host,n_prompt,n_gen,n_depth,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts\n" +
		`"7f09a680","6900","Apple M3 Max","Apple M3 Max","Metal,BLAS","m.gguf","qwen3moe 30B.A3B Q4_K - Medium","17456009216","30532122624","2048","512","12","0x0","0","50","f16","f16","99","0","layer","0","0","0","auto","0.00","none","1","0","0","0","512","0","0","2026-11-20T09:15:02Z","250500000","707106","2043.920000","5.710000"` + "\n"
	sql := "CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  build_number INTEGER,\n  n_prompt INTEGER,\n  avg_ts REAL\n);\n\n" +
		"INSERT INTO llama_bench (build_commit, build_number, n_prompt, avg_ts) VALUES ('7f09a680', '6900', '512', '2043.920000');\n"
	for _, tc := range []struct{ data, want string }{
		{md, "llama-bench's markdown table (its default output) holds no samples: run it again with -o json"},
		{csv, "llama-bench's -o csv: run it again with -o json"},
		{sql, "llama-bench's -o sql holds no samples: run it again with -o json"},
	} {
		if _, err := Detect([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrUnknownFormat) {
			t.Errorf("Detect: %v, want %q", err, tc.want)
		}
		if _, err := Parse(FormatLlamaBench, "out.txt", []byte(tc.data), Options{}); err == nil || !strings.Contains(err.Error(), "out.txt: llama-bench: "+tc.want) {
			t.Errorf("Parse: %v, want %q", err, tc.want)
		}
	}
}

// Where char is signed (Apple arm64) llama-bench's JSON escape writes each
// byte of a non-ASCII character as "\ufffff" (\u%04x of a negative int, cut
// to 7 characters): "José" comes as "Jos\ufffff\ufffff". It reads, and a
// warning says the name lost those characters.
func TestLlamaBenchSignedCharEscape(t *testing.T) {
	row := `{"build_commit": "7f09a680", "build_number": 6900, "cpu_info": "Apple M3 Max", "gpu_info": "Apple M3 Max", "backends": "Metal,BLAS", ` +
		`"model_filename": "/Users/Jos\ufffff\ufffff/models/Qwen3-30B-A3B-Q4_K_M.gguf", "model_type": "qwen3moe 30B.A3B Q4_K - Medium", ` +
		`"n_prompt": 512, "n_gen": 0, "n_depth": 0, "test_time": "2026-11-20T09:15:02Z", "avg_ts": 2048.000000, "samples_ns": [ 250000000 ],"samples_ts": [ 2048 ]}` + "\n"
	runs, err := Parse(FormatLlamaBench, "llama.jsonl", []byte(row), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs[0].Warnings) != 1 || !strings.Contains(runs[0].Warnings[0], `model_filename "/Users/Jos\uffff`) ||
		!strings.Contains(runs[0].Warnings[0], `as \ufffff (its JSON escape of a signed char)`) {
		t.Errorf("warnings %q", runs[0].Warnings)
	}
	// An ASCII name: no warning.
	runs, err = Parse(FormatLlamaBench, "llama.jsonl", []byte(strings.ReplaceAll(row, `Jos\ufffff\ufffff`, "jose")), Options{})
	if err != nil || len(runs[0].Warnings) != 0 {
		t.Errorf("%v, warnings %q", err, runs[0].Warnings)
	}
}

// llama-bench writes each repetition twice: samples_ns, whole nanoseconds,
// and samples_ts, tokens a second derived from them and printed with six
// significant digits (tools/llama-bench/llama-bench.cpp, json_printer and
// jsonl_printer). A sample is the tokens the test ran (n_prompt + n_gen;
// a depth is not timed) over its samples_ns; samples_ts only where a file
// has no samples_ns.
func TestLlamaBenchSamplesFromNs(t *testing.T) {
	// -o json's row, as json_printer indents it.
	jsonRow := "[\n  {\n    \"build_commit\": \"7f09a680\",\n    \"build_number\": 6900,\n    \"backends\": \"Metal,BLAS\",\n" +
		"    \"model_type\": \"qwen3moe 30B.A3B Q4_K - Medium\",\n    \"n_gpu_layers\": 99,\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n    \"n_depth\": %d,\n" +
		"    \"test_time\": \"2026-11-20T09:15:02Z\",\n    \"avg_ns\": 0,\n    \"stddev_ns\": 0,\n    \"avg_ts\": 0.000000,\n    \"stddev_ts\": 0.000000,\n" +
		"%s  }\n]\n"
	// -o jsonl's line, as jsonl_printer writes it.
	jsonlRow := `{"build_commit": "7f09a680", "build_number": 6900, "backends": "Metal,BLAS", "model_type": "qwen3moe 30B.A3B Q4_K - Medium", "n_gpu_layers": 99, ` +
		`"n_prompt": %d, "n_gen": %d, "n_depth": %d, "test_time": "2026-11-20T09:15:02Z", "avg_ns": 0, "stddev_ns": 0, "avg_ts": 0.000000, "stddev_ts": 0.000000, %s}` + "\n"
	for _, tc := range []struct {
		name, format   string
		prompt, gen, d int
		samples        string // the row's samples fields, as the printer writes them
		metric         string
		want           []float64 // or nil for an error holding err
		err            string
	}{
		{"pp512, -o json", jsonRow, 512, 0, 0, "    \"samples_ns\": [ 250104583, 251881042 ],\n    \"samples_ts\": [ 2047.14, 2032.71 ]\n",
			"prefill_tok_s", []float64{512e9 / 250104583, 512e9 / 251881042}, ""},
		{"tg128, -o jsonl", jsonlRow, 0, 128, 0, `"samples_ns": [ 1985413250, 1990207917 ],"samples_ts": [ 64.4702, 64.3149 ]`,
			"decode_tok_s", []float64{128e9 / 1985413250, 128e9 / 1990207917}, ""},
		{"pp512+tg128 counts both", jsonlRow, 512, 128, 0, `"samples_ns": [ 12048512000 ],"samples_ts": [ 53.1185 ]`,
			"prompt_gen_tok_s", []float64{640e9 / 12048512000}, ""},
		{"a depth is not timed", jsonRow, 512, 0, 4096, "    \"samples_ns\": [ 262774709 ],\n    \"samples_ts\": [ 1948.44 ]\n",
			"prefill_tok_s", []float64{512e9 / 262774709}, ""},
		{"no samples_ns: samples_ts", jsonlRow, 0, 128, 0, `"samples_ts": [ 64.4702, 64.3149 ]`,
			"decode_tok_s", []float64{64.4702, 64.3149}, ""},
		{"a repetition of 0 ns", jsonlRow, 0, 128, 0, `"samples_ns": [ 0, 1990207917 ],"samples_ts": [ 0, 64.3149 ]`,
			"", nil, "line 1 (tg128): samples_ns[0] is 0"},
	} {
		data := fmt.Sprintf(tc.format, tc.prompt, tc.gen, tc.d, tc.samples)
		runs, err := Parse(FormatLlamaBench, "llama.json", []byte(data), Options{})
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got []float64
		for _, s := range runs[0].Cases[0].Samples {
			if s.Metric == tc.metric {
				got = append(got, s.Value)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %s %v, want %v", tc.name, tc.metric, got, tc.want)
		}
	}
}

// A run's backend is the one that ran the model's layers: the GPU backend
// llama-bench lists where it was given them (n_gpu_layers, -1 for all, on
// the devices named), the CPU where it was given none (-ngl 0, -dev none),
// whatever the build lists; -o json and -o jsonl alike, a sweep's runs
// each by their own.
func TestLlamaBenchBackendFollowsLayers(t *testing.T) {
	jsonlRow := `{"build_commit": "7f09a680", "build_number": 6900, "cpu_info": "Apple M3 Max", "gpu_info": "Apple M3 Max", %s, ` +
		`"model_filename": "m.gguf", "model_type": "qwen3moe 30B.A3B Q4_K - Medium", "n_threads": 12, %s, "n_prompt": 512, "n_gen": 0, "n_depth": 0, ` +
		`"test_time": "2026-11-20T09:15:02Z", "avg_ns": 250000000, "stddev_ns": 0, "avg_ts": 2048.000000, "stddev_ts": 0.000000, "samples_ns": [ 250000000 ],"samples_ts": [ 2048 ]}` + "\n"
	asJSON := func(lines string) string {
		rows := strings.Split(strings.TrimSpace(lines), "\n")
		return "[\n  " + strings.Join(rows, ",\n  ") + "\n]\n"
	}
	metal, cuda, old := `"backends": "Metal,BLAS"`, `"backends": "CUDA"`, `"cuda": false, "opencl": false, "metal": true, "gpu_blas": false, "blas": true`
	for _, tc := range []struct {
		name     string
		data     string
		backends []string // each run's
	}{
		{"-ngl 99", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 99`), []string{"metal"}},
		{"-ngl 0", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 0`), []string{"cpu"}},
		{"-ngl 0, -o json", asJSON(fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 0`)), []string{"cpu"}},
		{"-ngl -1: every layer", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": -1`), []string{"metal"}},
		{"-ngl 0 on CUDA", fmt.Sprintf(jsonlRow, cuda, `"n_gpu_layers": 0`), []string{"cpu"}},
		{"-dev none", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 99, "devices": "none"`), []string{"cpu"}},
		{"-dev Metal", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 99, "devices": "Metal"`), []string{"metal"}},
		{"an older build's flags, -ngl 0", asJSON(fmt.Sprintf(jsonlRow, old, `"n_gpu_layers": 0`)), []string{"cpu"}},
		{"an -ngl 0,99 sweep", fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 0`) + fmt.Sprintf(jsonlRow, metal, `"n_gpu_layers": 99`), []string{"cpu", "metal"}},
	} {
		runs, err := Parse(FormatLlamaBench, "llama.json", []byte(tc.data), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.Backend)
		}
		if !slices.Equal(got, tc.backends) {
			t.Errorf("%s: backends %v, want %v", tc.name, got, tc.backends)
		}
	}
}

// vLLM's bench latency and bench serve write, beside their result file and
// when SAVE_TO_PYTORCH_BENCHMARK_FORMAT is set, a copy of the run in the
// PyTorch benchmark format, named after it with .pytorch.json
// (vllm/benchmarks/lib/utils.py). It is recognised and refused, naming the
// result file to import (and for bench latency the workload its arguments
// record), whichever vLLM format --from names.
func TestVLLMPyTorchFormat(t *testing.T) {
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	lat, serve := read("vllm-latency.pytorch.json"), read("vllm-serve.pytorch.json")
	for _, tc := range []struct {
		name, path, data string
		format           string // Detect's
		from             string // the format Parse is given
		want             string
	}{
		{"bench latency", "vllm-latency.pytorch.json", lat, FormatVLLMLatency, FormatVLLMLatency,
			"import vllm-latency.json, the result file vllm bench latency wrote beside it, with --batch 2 --prompt-len 16 --gen-len 8 as this file's arguments record"},
		{"in a folder, --output-json not .json", filepath.Join("runs", "lat.pytorch.json"), strings.Replace(lat, `"output_json": "vllm-latency.json"`, `"output_json": "/tmp/lat.txt"`, 1),
			FormatVLLMLatency, FormatVLLMLatency, "import " + filepath.Join("runs", "lat.txt") + ", the result file"},
		{"bench serve", "vllm-serve.pytorch.json", serve, FormatVLLMServe, FormatVLLMServe,
			"import vllm-serve.json, the result file vllm bench serve wrote beside it"},
		{"bench serve, --from vllm-latency", "vllm-serve.pytorch.json", serve, FormatVLLMServe, FormatVLLMLatency,
			"import vllm-serve.json, the result file vllm bench serve wrote beside it"},
		{"bench serve's default name", "openai-infqps-concurrency2-Qwen3-MoE-mini-20261120-093012.pytorch.json",
			strings.ReplaceAll(serve, `"result_filename": "vllm-serve.json"`, `"result_filename": null`), FormatVLLMServe, FormatVLLMServe,
			"import openai-infqps-concurrency2-Qwen3-MoE-mini-20261120-093012.json, the result file"},
		{"renamed", filepath.Join("keep", "serve-copy.json"), serve, FormatVLLMServe, FormatVLLMServe,
			"import " + filepath.Join("keep", "vllm-serve.json") + ", the result file"},
	} {
		f, err := Detect([]byte(tc.data))
		if err != nil || f != tc.format {
			t.Errorf("%s: Detect %q, %v; want %s", tc.name, f, err, tc.format)
		}
		_, err = Parse(tc.from, tc.path, []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "PyTorch benchmark format") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A run that generated nothing holds nothing an mtlbench case measures:
// llama-bench -embd 1 timed embeddings (every token an output), a vLLM
// pooling endpoint's run (--backend openai-embeddings) writes no output
// count, a generation run whose requests returned no token writes 0. Each
// is refused saying what the file holds, never with a hint to give
// lengths, which would key it as a generation it was not.
func TestNoGenerationIsRefused(t *testing.T) {
	lbRow := `{"build_commit": "7f09a680", "build_number": 6900, "backends": "Metal,BLAS", "model_type": "qwen3 0.6B Q8_0", "n_gpu_layers": 99, ` +
		`"embeddings": %s, "n_prompt": %d, "n_gen": %d, "n_depth": 0, "test_time": "2026-11-20T09:15:02Z", "avg_ns": 250000000, "stddev_ns": 0, ` +
		`"avg_ts": 2048.000000, "stddev_ts": 0.000000, "samples_ns": [ 250000000 ],"samples_ts": [ 2048 ]}` + "\n"
	embd, err := os.ReadFile(filepath.Join("testdata", "vllm-serve-embeddings.json"))
	if err != nil {
		t.Fatal(err)
	}
	noTokens := strings.Replace(strings.Replace(read(t, "vllm-serve.json"), `"total_output_tokens": 16`, `"total_output_tokens": 0`, 1), `"output_throughput": 390.24`, `"output_throughput": 0.0`, 1)
	for _, tc := range []struct {
		name, data string
		format     string // Detect's
		o          Options
		want       string // "" for a file that imports
	}{
		{"llama-bench -embd 1 -n 0", fmt.Sprintf(lbRow, "true", 512, 0), FormatLlamaBench, Options{},
			"line 1 (pp512): embeddings is true (llama-bench -embd 1): the test timed the model computing an embedding for every token"},
		{"llama-bench -embd 1, -o json", "[" + fmt.Sprintf(lbRow, "false", 512, 0) + "," + fmt.Sprintf(lbRow, "true", 0, 128) + "]", FormatLlamaBench, Options{},
			"result 2 (tg128): embeddings is true (llama-bench -embd 1)"},
		{"llama-bench -embd 0", fmt.Sprintf(lbRow, "false", 512, 0), FormatLlamaBench, Options{}, ""},
		{"vllm bench serve, an embeddings endpoint", string(embd), FormatVLLMServe, Options{},
			`a run of a pooling endpoint (backend "openai-embeddings"): its 8 requests sent 4096 input tokens and generated none`},
		{"the same, lengths given", string(embd), FormatVLLMServe, Options{PromptLen: 512, GenLen: 128}, "a run of a pooling endpoint"},
		{"vllm bench serve, no token generated", noTokens, FormatVLLMServe, Options{GenLen: 8},
			"total_output_tokens is 0: the 2 completed requests generated no token"},
	} {
		f, err := Detect([]byte(tc.data))
		if err != nil || f != tc.format {
			t.Errorf("%s: Detect %q, %v; want %s", tc.name, f, err, tc.format)
			continue
		}
		_, err = Parse(f, "f.json", []byte(tc.data), tc.o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cannot be imported") || strings.Contains(err.Error(), "--gen-len")):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// read is a testdata file's text.
func read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// llama-bench runs every test at every depth and setting, and -o jsonl
// writes no end: a file that stops at a line's end, or a run whose test
// failed, is told by the tests its grid lacks, and said with where the
// file ends; a whole grid says nothing.
func TestLlamaBenchUnfinishedGrid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-depth.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	for _, tc := range []struct {
		name, data, want string
	}{
		{"whole", string(data), ""},
		{"cut after line 3", strings.Join(lines[:3], ""), "the results with the settings of line 1 lack tg128 @ d512, a test and depth the file's other results ran (the file ends at line 3)"},
		{"cut after line 1, at depth 0", lines[0], ""}, // one test: nothing to tell it by
		{"a test that failed", lines[0] + lines[2] + lines[3], "lack tg128, a test and depth"},
		{"a json array with a test left out", "[" + strings.Join([]string{lines[0], lines[1], lines[2]}, ",") + "]", "lack tg128 @ d512, a test and depth the file's other results ran (the file ends at result 3)"},
	} {
		runs, err := Parse(FormatLlamaBench, "f", []byte(tc.data), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var warned []string
		for _, r := range runs {
			warned = append(warned, r.Warnings...)
		}
		got := strings.Join(warned, "\n")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: warnings %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A -o jsonl file cut mid-line (llama-bench writes each line whole) is
// refused as cut short, naming the line; a line that is no JSON at all,
// or one cut short before others, is no llama-bench line.
func TestLlamaBenchJSONLCutMidLine(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama-bench-depth.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(string(data)), "\n")
	for _, tc := range []struct{ name, data, want string }{
		{"cut mid-line", lines[0] + lines[1] + lines[2][:200], "f: llama-bench: line 3: the line ends (after 200 bytes) before its result does: llama-bench writes each result's line whole, so the file was cut short mid-line"},
		{"cut mid-line, then a newline", lines[0] + lines[2][:200] + "\n\n", "line 2: the line ends (after 200 bytes) before its result does"},
		{"a short line before others", lines[0] + lines[2][:200] + "\n" + lines[3], "line 2: not llama-bench -o jsonl"},
	} {
		_, err := Parse(FormatLlamaBench, "f", []byte(tc.data), Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// mlx_lm.benchmark prints whole lines and an "Averages:" line once a
// case's trials end: a file whose last trial has no line end was cut
// mid-line, its last figure perhaps with it, and is refused; a case with
// no Averages line stopped (or was cut at a line end) and is read with a
// warning naming it; whole output says nothing.
func TestMLXCutShort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "mlx-benchmark.txt"))
	if err != nil {
		t.Fatal(err)
	}
	whole := string(data)
	trial2 := strings.Index(whole, "Trial 2:")
	lineEnd := trial2 + strings.Index(whole[trial2:], "\n") + 1
	for _, tc := range []struct {
		name, data, err, warning string
	}{
		{"whole", whole, "", ""},
		{"cut mid-line", whole[:trial2+25], `line 5, the last, has no line end: mlx_lm.benchmark prints whole lines, so the file was cut short mid-line`, ""},
		{"cut at a line end", whole[:lineEnd], "", `the case of line 3 has no "Averages:" line, which mlx_lm.benchmark prints once its trials end`},
	} {
		runs, err := Parse(FormatMLX, "f", []byte(tc.data), Options{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := strings.Join(runs[0].Warnings, "\n")
		if tc.warning == "" && got != "" || !strings.Contains(got, tc.warning) {
			t.Errorf("%s: warnings %q, want %q", tc.name, got, tc.warning)
		}
	}
}

// A file that ends inside its first JSON value is said in one wording,
// jsonerr's, whether that value is an array or an object: an array was
// "not valid JSON at line 1, column 9: unexpected end of JSON input", an
// object "the file ends inside its first JSON value". An array of
// llama-bench's own is its reader's to word (a run stopped midway).
func TestDetectCutShortOneWording(t *testing.T) {
	const want = ": the text ends inside a value: cut short; copy the whole file, or run the tool again"
	for _, tc := range []struct {
		name, data string
		line       int
	}{
		{"array", `[{"avg_latency": 1.5, "latencies": [1`, 1},
		{"object", `{"avg_latency": 1.5, "latencies": [1`, 1},
		{"array opened", "[", 1},
		{"object opened", "{", 1},
		{"array over lines", "[\n  {\n    \"completed\": 4,\n", 3},
		{"object over lines", "{\n  \"completed\": 4,\n", 2},
		{"array, then spaces", "[{\"completed\": 4}\n\n", 1},
	} {
		_, err := Detect([]byte(tc.data))
		if w := "line " + strconv.Itoa(tc.line) + want; err == nil || err.Error() != w {
			t.Errorf("%s: %v, want %q", tc.name, err, w)
		}
	}
}

// mtlbench's own peer format keys its cases as the suite it mirrors does,
// and the import keys them as a run of that suite keys them now: a value
// at its default written in the key (tools/peers/hf_decode.py's batch=1,
// prompt_len=128) is left out, as `run` leaves it, so the store, compare
// and show name the peer's case as they name mtlbench's
// (docs/suites.md, "A default written is a default left out").
func TestMtlbenchFormatKeysAsASuite(t *testing.T) {
	file := func(keys ...string) []byte {
		var cases []string
		for i, k := range keys {
			cases = append(cases, fmt.Sprintf(`{"key": %q, "name": "d%d", "kind": "model", "params": {"model": "m", "dtype": "bf16"},`+
				` "samples": [{"rep": 0, "metric": "decode_tok_s", "value": 10, "unit": "tok/s"}]}`, k, i))
		}
		return []byte(`{"format": "mtlbench-peer-run/1", "tool": "transformers", "suite_name": "decode", "backend": "cuda", "cases": [` +
			strings.Join(cases, ", ") + `]}`)
	}
	for _, tc := range []struct {
		name       string
		keys, want []string
	}{
		{"defaults written", []string{"model/decode/batch=1/gen_len=64/prompt_len=128", "model/decode/batch=16/gen_len=64/prompt_len=128"},
			[]string{"model/decode/gen_len=64", "model/decode/batch=16/gen_len=64"}},
		{"none written", []string{"model/decode/gen_len=64"}, []string{"model/decode/gen_len=64"}},
		// Two cases of one run are never pooled as one (suites.StoredKeys).
		{"two that would be one", []string{"model/decode/batch=1/gen_len=64", "model/decode/gen_len=64"},
			[]string{"model/decode/batch=1/gen_len=64", "model/decode/gen_len=64"}},
		{"not a suite's key", []string{"custom/decode/batch=1"}, []string{"custom/decode/batch=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := Parse(FormatMtlbench, "f", file(tc.keys...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range runs[0].Cases {
				got = append(got, c.Key)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("keys %v, want %v", got, tc.want)
			}
		})
	}
}
