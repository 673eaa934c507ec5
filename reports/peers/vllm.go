package peers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/suites"
)

// vllmServe is what `vllm bench serve --save-result` writes
// (vllm/benchmarks/serve.py): the run's settings, then its metrics; with
// --save-detailed also per-request arrays.
type vllmServe struct {
	Date           string          `json:"date"`
	Backend        string          `json:"backend"`
	EndpointType   string          `json:"endpoint_type"` // newer vLLM's name for backend
	Label          string          `json:"label"`
	ModelID        string          `json:"model_id"`
	NumPrompts     int             `json:"num_prompts"`
	RequestRate    json.RawMessage `json:"request_rate"` // a number or "inf"
	Burstiness     *float64        `json:"burstiness"`   // the arrivals' gamma shape: 1 is Poisson
	MaxConcurrency *int            `json:"max_concurrency"`
	// --ramp-up-strategy (linear, exponential) climbs the rate from start
	// to end requests a second over the run; request_rate is then "inf".
	RampUpStrategy *string         `json:"ramp_up_strategy"`
	RampUpStart    json.RawMessage `json:"ramp_up_start_rps"`
	RampUpEnd      json.RawMessage `json:"ramp_up_end_rps"`
	Completed      int             `json:"completed"`
	TotalInput     int             `json:"total_input_tokens"`
	TotalOutput    int             `json:"total_output_tokens"`
	Duration       float64         `json:"duration"`
	InputLens      []int           `json:"input_lens"`
	OutputLens     []int           `json:"output_lens"`
	TTFTs          []float64       `json:"ttfts"` // seconds
	// Metrics: mean_*, median_*, std_*, pNN_* of ttft, tpot, itl and e2el
	// in ms, and the throughputs; read by name below.
	raw map[string]json.RawMessage
}

// vllmServeMetrics maps vLLM's result keys onto mtlbench metrics. Every
// value is the run's one figure (a median over its requests), one sample.
var vllmServeMetrics = []struct{ key, metric, unit string }{
	{"output_throughput", "output_tok_s", "tok/s"},
	{"total_token_throughput", "total_tok_s", "tok/s"},
	{"request_throughput", "request_per_s", "req/s"},
	{"median_ttft_ms", "ttft_ms", "ms"},
	{"median_tpot_ms", "tpot_ms", "ms"},
	{"median_itl_ms", "itl_p50_ms", "ms"},
	{"p90_itl_ms", "itl_p90_ms", "ms"},
	{"p99_itl_ms", "itl_p99_ms", "ms"},
	{"p99_ttft_ms", "ttft_p99_ms", "ms"},
	{"p99_tpot_ms", "tpot_p99_ms", "ms"},
	{"median_e2el_ms", "e2el_ms", "ms"},
	{"p99_e2el_ms", "e2el_p99_ms", "ms"},
	{"request_goodput", "goodput_per_s", "req/s"}, // null unless --goodput was given
}

// parseVLLMServe reads a --save-result file: one result object, or with
// --append-result one a line, each run appended to the file (a sweep of
// --request-rate or --max-concurrency), each a run of its own.
func parseVLLMServe(data []byte, o Options) ([]*Run, error) {
	results, err := jsonValues(data)
	switch {
	case err != nil && len(results) > 0:
		// Results appended before this one read; this one is cut short
		// or is no JSON.
		return nil, fmt.Errorf("result %d: %w", len(results)+1, jsonerr.Explain(err, data))
	case err != nil || len(results) < 2:
		return parseVLLMServeResult(data, o) // one object, or an error in the file's terms
	}
	var runs []*Run
	for i, r := range results {
		rs, err := parseVLLMServeResult(r.raw, o)
		if err != nil {
			return nil, fmt.Errorf("result %d (line %d, --append-result): %w", i+1, r.line, err)
		}
		runs = append(runs, rs...)
	}
	return runs, nil
}

// jsonValue is one of several JSON values in a file, at its first line.
type jsonValue struct {
	raw  json.RawMessage
	line int
}

// jsonValues splits data into the JSON values it holds one after another
// (vLLM's --append-result writes one a line): those read, and an error
// where one is no JSON.
func jsonValues(data []byte) ([]jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var out []jsonValue
	for {
		start := int(dec.InputOffset())
		for start < len(data) && strings.ContainsRune(" \t\r\n", rune(data[start])) {
			start++
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return out, nil
		} else if err != nil {
			if jsonerr.IsCutShort(err, data) {
				err = fmt.Errorf("line %d: %s", 1+bytes.Count(data[:start], []byte("\n")), jsonerr.CutShort)
			}
			return out, err
		}
		out = append(out, jsonValue{raw, 1 + bytes.Count(data[:start], []byte("\n"))})
	}
}

// parseVLLMServeResult maps one serving run onto one case: batch is
// --max-concurrency (all prompts at once when unset), requests
// --num-prompts, prompt_len and gen_len the tokens per request (the
// dataset's --random-input-len and --random-output-len; o overrides).
func parseVLLMServeResult(data []byte, o Options) ([]*Run, error) {
	var v vllmServe
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("not vllm bench serve JSON: %w", jsonFieldError(err, data))
	}
	if err := json.Unmarshal(data, &v.raw); err != nil {
		return nil, err
	}
	if v.Completed <= 0 {
		return nil, fmt.Errorf("completed is %d: no request finished", v.Completed)
	}
	if v.NumPrompts < v.Completed {
		return nil, fmt.Errorf("num_prompts is %d, fewer than the %d completed", v.NumPrompts, v.Completed)
	}
	for _, n := range []struct {
		key  string
		vals []int
	}{{"total_input_tokens", []int{v.TotalInput}}, {"total_output_tokens", []int{v.TotalOutput}}, {"input_lens", v.InputLens}, {"output_lens", v.OutputLens}} {
		for _, x := range n.vals {
			if x < 0 {
				return nil, fmt.Errorf("%s holds %d, a negative count of tokens", n.key, x)
			}
		}
	}
	// The file names the API it served (openai, vllm), not the device: the
	// endpoint is kept as a label, the run's backend is vLLM's.
	endpoint := v.Backend
	if endpoint == "" {
		endpoint = v.EndpointType
	}
	if err := v.checkGenerated(endpoint); err != nil {
		return nil, err
	}
	arrival, err := vllmArrival(v.RequestRate, v.Burstiness)
	if err != nil {
		return nil, err
	}
	rampUp, err := vllmRampUp(v, arrival)
	if err != nil {
		return nil, err
	}
	batch := v.NumPrompts
	if v.MaxConcurrency != nil && *v.MaxConcurrency > 0 && *v.MaxConcurrency < batch {
		batch = *v.MaxConcurrency
	}
	if o.Batch > 0 {
		batch = o.Batch
	}
	prompt := perRequest(v.TotalInput, v.Completed, v.InputLens)
	gen := perRequest(v.TotalOutput, v.Completed, v.OutputLens)
	if o.PromptLen > 0 {
		prompt = o.PromptLen
	}
	if o.GenLen > 0 {
		gen = o.GenLen
	}
	if prompt < 1 || gen < 1 {
		return nil, fmt.Errorf("%d input and %d output tokens a request: give the lengths with --prompt-len and --gen-len", prompt, gen)
	}
	// Lengths drawn around vLLM's --random-input-len average to another
	// number: keyed by it, the case would pair with no bench case.
	if o.RangeRatio != "" && (o.PromptLen == 0 || o.GenLen == 0) {
		return nil, fmt.Errorf("--range-ratio %s: give the --random-input-len and --random-output-len vLLM ran with as --prompt-len and --gen-len (the file holds the lengths drawn, %d and %d on average)", o.RangeRatio, prompt, gen)
	}
	if batch > v.NumPrompts {
		return nil, fmt.Errorf("batch %d is more than the %d prompts: the batch was never full (suites refuse requests fewer than the batch)", batch, v.NumPrompts)
	}
	labels := map[string]string{"model": o.modelName(v.ModelID), "peer_model": v.ModelID, "peer_endpoint": endpoint,
		ParamRequestRate: strings.Trim(string(v.RequestRate), `"`)}
	// A serving case (a rate) records its requests always, as bench's do
	// (bench takes a rate only with --requests); its key leaves them out
	// where they are the batch, the default (suites.Key).
	if v.NumPrompts != batch || arrival != "" || rampUp != "" {
		labels["requests"] = strconv.Itoa(v.NumPrompts)
	}
	if arrival != "" {
		labels["arrival"] = arrival
	}
	// A ramp is no arrival mtlbench makes: its own key, so the run pairs
	// only with runs of the same ramp, never with a burst's cases.
	labels["ramp_up"] = rampUp
	labels["range_ratio"], labels["slo"] = o.RangeRatio, o.SLO // "" leaves them out
	c := newCase(batch, prompt, gen, labels)
	var notes, zero []string
	for _, m := range vllmServeMetrics {
		raw, ok := v.raw[m.key]
		if !ok {
			continue
		}
		var f *float64 // null (a goodput not asked for, or NaN) is no figure, not 0
		if err := json.Unmarshal(raw, &f); err != nil {
			// Python's Infinity, as pythonJSON spells it, is no figure either.
			var word string
			if json.Unmarshal(raw, &word) == nil && strings.EqualFold(strings.TrimLeft(word, "+-"), "inf") {
				continue
			}
			return nil, fmt.Errorf("%s is %s, not a number", m.key, strings.TrimSpace(string(raw)))
		}
		if f == nil || math.IsNaN(*f) || math.IsInf(*f, 0) {
			continue
		}
		// vLLM takes each latency statistic over its requests' list, or over
		// 0 where the list is empty (np.median(tpots or 0)): no request of
		// two tokens or more has a TPOT or an ITL. No latency is 0 ms.
		if m.unit == "ms" && *f == 0 {
			zero = append(zero, m.key)
			continue
		}
		// mtlbench keys goodput by its slo: without one it would pair with
		// nothing mtlbench measures.
		if m.key == "request_goodput" && o.SLO == "" {
			notes = append(notes, "request_goodput left out: give the --goodput bounds vLLM ran with as --slo")
			continue
		}
		c.add(0, m.metric, *f, m.unit)
	}
	if len(zero) > 0 {
		notes = append(notes, strings.Join(zero, ", ")+" left out: 0 ms is what vLLM writes where no request measured it (an output of one token, or no streaming)")
	}
	if len(c.Samples) == 0 {
		return nil, fmt.Errorf("no metric vLLM writes (output_throughput, median_ttft_ms...) is in the file")
	}
	run := &Run{Tool: "vllm bench serve", Backend: vllmBackend, Cases: []Case{c},
		Notes: fmt.Sprintf("vllm bench serve: %s, %d prompts, rate %s, max concurrency %d, %d completed in %.1f s",
			v.ModelID, v.NumPrompts, string(v.RequestRate), batch, v.Completed, v.Duration)}
	if rampUp != "" {
		run.Notes += "; rate ramped up (--ramp-up-strategy) " + rampUp
	}
	// vLLM's figures are of the requests that completed: a failed one
	// counts in neither its throughputs' tokens nor its latencies, so the
	// run measured less than the case says.
	if failed := v.NumPrompts - v.Completed; failed > 0 {
		w := fmt.Sprintf("%d of the %d requests failed: the figures are of the %d that completed", failed, v.NumPrompts, v.Completed)
		notes = append(notes, w)
		run.Warnings = append(run.Warnings, w)
	}
	for _, n := range notes {
		run.Notes += "; " + n
	}
	if t, err := time.ParseInLocation("20060102-150405", v.Date, time.Local); err == nil {
		run.StartedAt = t
	} else if v.Date != "" {
		run.Warnings = append(run.Warnings, fmt.Sprintf("date %q is not YYYYMMDD-HHMMSS as vllm bench serve writes it: the run is dated by the file's modification time (from standard input, by the import)", v.Date))
	}
	return []*Run{run}, nil
}

// checkGenerated says why a run that generated no token holds nothing
// mtlbench measures, whose cases all generate: a run of a pooling endpoint
// (vLLM's --backend openai-embeddings, any embeddings or rerank one) writes input
// counts, request throughput and end-to-end latency and no output count
// at all (vllm/benchmarks/serve.py, calculate_metrics_for_embeddings);
// a generation run whose requests returned no token writes 0. Lengths
// given as flags do not mend it: they key a run, they do not make tokens.
func (v vllmServe) checkGenerated(endpoint string) error {
	_, counted := v.raw["total_output_tokens"]
	_, rated := v.raw["output_throughput"]
	switch {
	case !counted && !rated && len(v.OutputLens) == 0:
		return fmt.Errorf("a run of a pooling endpoint (backend %q): its %d requests sent %d input tokens and generated none, and the file holds their request throughput and end-to-end latency, not a generation, which every mtlbench case measures; it cannot be imported",
			endpoint, v.Completed, v.TotalInput)
	case counted && v.TotalOutput == 0:
		return fmt.Errorf("total_output_tokens is 0: the %d completed requests generated no token, so the file holds no generation to compare with mtlbench's cases, which all generate; it cannot be imported",
			v.Completed)
	}
	return nil
}

// vllmArrival is the suites' arrival of a run at a finite --request-rate:
// poisson:R (burstiness 1, vLLM's default) or gamma:R:B, spelt as the
// suites spell it, so the case pairs with mtlbench's case of those
// arrivals; "" for every request at once (a rate of inf, or none). A rate
// or burstiness the suites would refuse is an error: keyed without it,
// the run would pair with cases of other arrivals.
func vllmArrival(rate json.RawMessage, burstiness *float64) (string, error) {
	var r float64
	var word string
	switch {
	case len(rate) == 0 || string(rate) == "null":
		return "", nil
	case json.Unmarshal(rate, &word) == nil && (word == "inf" || word == "Infinity"):
		return "", nil
	case json.Unmarshal(rate, &r) != nil:
		return "", fmt.Errorf("request_rate %s: want a number of requests a second or \"inf\"", rate)
	}
	b := 1.0
	if burstiness != nil {
		b = *burstiness
	}
	a, err := suites.ParseArrival("gamma:" + strconv.FormatFloat(r, 'g', -1, 64) + ":" + strconv.FormatFloat(b, 'g', -1, 64))
	if err != nil {
		return "", fmt.Errorf("request_rate %s, burstiness %g: %v", rate, b, err)
	}
	return a.String(), nil
}

// vllmRampUp is the key of a --ramp-up-strategy run's arrivals,
// STRATEGY:START:END (requests a second), with :B for gamma gaps of
// burstiness B; "" for a run without one. vLLM refuses a ramp beside a
// rate, so a file holding both, or a ramp it would not run, is an error.
func vllmRampUp(v vllmServe, arrival string) (string, error) {
	if v.RampUpStrategy == nil {
		return "", nil
	}
	st := *v.RampUpStrategy
	if st != "linear" && st != "exponential" {
		return "", fmt.Errorf("ramp_up_strategy %q: want linear or exponential, as vllm bench serve writes it", st)
	}
	if arrival != "" {
		return "", fmt.Errorf("request_rate %s and ramp_up_strategy %s: vllm bench serve runs one or the other", v.RequestRate, st)
	}
	key := st
	for _, r := range []struct {
		name string
		raw  json.RawMessage
	}{{"ramp_up_start_rps", v.RampUpStart}, {"ramp_up_end_rps", v.RampUpEnd}} {
		var f *float64
		if err := json.Unmarshal(r.raw, &f); err != nil || f == nil {
			what := strings.TrimSpace(string(r.raw))
			if len(r.raw) == 0 {
				what = "missing"
			} else if f == nil && err == nil {
				what = "null"
			}
			return "", fmt.Errorf("%s is %s: want a number of requests a second", r.name, what)
		}
		if !(*f >= 0) || math.IsInf(*f, 0) {
			return "", fmt.Errorf("%s %s: want a number of requests a second, 0 or more", r.name, strings.TrimSpace(string(r.raw)))
		}
		key += ":" + strconv.FormatFloat(*f, 'g', -1, 64)
	}
	if v.Burstiness != nil && *v.Burstiness != 1 {
		if _, err := suites.ParseBurstiness(strconv.FormatFloat(*v.Burstiness, 'g', -1, 64)); err != nil {
			return "", err
		}
		key += ":" + strconv.FormatFloat(*v.Burstiness, 'g', -1, 64)
	}
	return key, nil
}

// jsonFieldError says which field of the file has the wrong type, in the
// file's terms rather than Go's; a list where vLLM writes one object is
// named as such.
func jsonFieldError(err error, data []byte) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field == "" && te.Value == "array" {
		return fmt.Errorf("the file is a JSON array, want one result object as vLLM writes it")
	}
	return jsonerr.Explain(err, data)
}

// perRequest is tokens per request: the common length when the per-request
// list has one, else the mean rounded.
func perRequest(total, n int, lens []int) int {
	if len(lens) > 0 {
		same := true
		for _, l := range lens {
			same = same && l == lens[0]
		}
		if same {
			return lens[0]
		}
	}
	return int(math.Round(float64(total) / float64(n)))
}

// vllmLatency is what `vllm bench latency --output-json` writes
// (vllm/benchmarks/latency.py): the seconds each iteration took to run one
// batch of --batch-size prompts of --input-len tokens to --output-len
// tokens. The file does not record those three: o gives them, else vLLM's
// defaults (8, 32, 128).
type vllmLatency struct {
	AvgLatency float64            `json:"avg_latency"`
	Latencies  []*float64         `json:"latencies"` // null: NaN in the file
	Pct        map[string]float64 `json:"percentiles"`
}

func parseVLLMLatency(data []byte, o Options) ([]*Run, error) {
	var v vllmLatency
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("not vllm bench latency JSON: %w", jsonFieldError(err, data))
	}
	if len(v.Latencies) == 0 {
		return nil, fmt.Errorf("no latencies")
	}
	batch, prompt, gen := 8, 32, 128
	if o.Batch > 0 {
		batch = o.Batch
	}
	if o.PromptLen > 0 {
		prompt = o.PromptLen
	}
	if o.GenLen > 0 {
		gen = o.GenLen
	}
	c := newCase(batch, prompt, gen, map[string]string{"model": o.modelName("")})
	for i, lp := range v.Latencies {
		if lp == nil {
			return nil, fmt.Errorf("latency %d is NaN or null", i+1)
		}
		l := *lp
		if !(l > 0) || math.IsInf(l, 0) {
			return nil, fmt.Errorf("latency %d is %v seconds", i+1, l)
		}
		// The batch's generated tokens over its wall time, as mtlbench's
		// output_tok_s; and the wall time itself.
		c.add(i, "output_tok_s", float64(batch*gen)/l, "tok/s")
		c.add(i, "e2el_ms", l*1000, "ms")
	}
	return []*Run{{Tool: "vllm bench latency", Backend: vllmBackend, Cases: []Case{c},
		Notes: fmt.Sprintf("vllm bench latency: batch %d, input %d, output %d, %d iterations", batch, prompt, gen, len(v.Latencies))}}, nil
}

// ParamRequestRate labels a `vllm bench serve` import's case with the
// request rate its file records: a number, or inf for every request sent
// at once (docs/peers.md).
const ParamRequestRate = "peer_request_rate"

// vllmBackend is the backend a vLLM run records: its files name no device.
const vllmBackend = "vllm"

// vllmPyTorchRecord is one record of the PyTorch benchmark format that
// vLLM's benchmarks write beside their result file when
// SAVE_TO_PYTORCH_BENCHMARK_FORMAT is set, named after it with
// .pytorch.json (vllm/benchmarks/lib/utils.py,
// convert_to_pytorch_benchmark_format; serve.py and latency.py,
// save_to_pytorch_benchmark_format): a metric a record, the command's
// arguments in benchmark.extra_info.args.
type vllmPyTorchRecord struct {
	Benchmark struct {
		Name      string `json:"name"`
		ExtraInfo struct {
			Args map[string]json.RawMessage `json:"args"`
		} `json:"extra_info"`
	} `json:"benchmark"`
	Metric struct {
		Name string `json:"name"`
	} `json:"metric"`
}

// vllmPyTorchRecords reads data as that format; false for anything else.
func vllmPyTorchRecords(data []byte) ([]vllmPyTorchRecord, bool) {
	var recs []vllmPyTorchRecord
	if json.Unmarshal(data, &recs) != nil || len(recs) == 0 || recs[0].Benchmark.Name != "vLLM benchmark" || recs[0].Metric.Name == "" {
		return nil, false
	}
	return recs, true
}

// vllmPyTorchFormat is the command that wrote such a file: bench latency
// records its one metric, latency; bench serve its latency statistics.
func vllmPyTorchFormat(recs []vllmPyTorchRecord) string {
	if recs[0].Metric.Name == "latency" {
		return FormatVLLMLatency
	}
	return FormatVLLMServe
}

// vllmPyTorchRefusal says which file to import for a PyTorch-format file
// at path: the result file it was written beside holds the same run, and
// reading both would store it twice. vLLM names this one
// splitext(result)[0] + ".pytorch.json", the result file being
// --output-json's (latency) or --result-filename's, else a .json
// (serve); bench latency's arguments also give the workload its result
// file does not record.
func vllmPyTorchRefusal(path string, recs []vllmPyTorchRecord) error {
	args := recs[0].Benchmark.ExtraInfo.Args
	str := func(k string) string {
		var v string
		_ = json.Unmarshal(args[k], &v) // null or absent: ""
		return v
	}
	given := str("output_json")
	if given == "" {
		given = str("result_filename")
	}
	result := ""
	if stem, ok := strings.CutSuffix(path, ".pytorch.json"); ok {
		ext := ".json"
		if given != "" {
			ext = filepath.Ext(given)
		}
		result = stem + ext
	} else if given != "" {
		result = filepath.Join(filepath.Dir(path), filepath.Base(given))
	}
	cmd := "vllm bench serve"
	if vllmPyTorchFormat(recs) == FormatVLLMLatency {
		cmd = "vllm bench latency"
	}
	what := "the result file " + cmd + " wrote beside it"
	if result != "" {
		what = result + ", " + what
	}
	var flags []string
	if cmd == "vllm bench latency" {
		for _, f := range []struct{ arg, flag string }{{"batch_size", "--batch"}, {"input_len", "--prompt-len"}, {"output_len", "--gen-len"}} {
			var n int
			if json.Unmarshal(args[f.arg], &n) == nil && n > 0 {
				flags = append(flags, fmt.Sprintf("%s %d", f.flag, n))
			}
		}
	}
	if len(flags) > 0 {
		what += ", with " + strings.Join(flags, " ") + " as this file's arguments record"
	}
	return fmt.Errorf("vLLM's PyTorch benchmark format (%s's copy of its run, written when SAVE_TO_PYTORCH_BENCHMARK_FORMAT is set), which is not read, so that the run is not stored twice: import %s", cmd, what)
}
