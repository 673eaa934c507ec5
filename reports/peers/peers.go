// Package peers converts other engines' benchmark output into runs the
// results store keeps beside mtlbench's own: llama-bench's JSON and JSONL
// (-o json, -o jsonl), vLLM's `bench serve` and `bench latency` result JSON,
// mlx_lm.benchmark's printed trials, and mtlbench's own peer-run JSON
// (tools/peers). Each tool's parameters are mapped onto the keys
// `mtlbench bench` gives its cases (model/bench/batch=B/gen_len=N/prompt_len=P),
// so `compare` pairs a peer's figures with mtlbench's case by case.
// docs/peers.md shows the commands on a Mac.
package peers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// Formats peers reads, as --from names them.
const (
	FormatMtlbench    = "mtlbench"
	FormatLlamaBench  = "llama-bench"
	FormatVLLMServe   = "vllm-serve"
	FormatVLLMLatency = "vllm-latency"
	FormatMLX         = "mlx-lm"
)

// Formats lists them in the order they are documented.
var Formats = []string{FormatLlamaBench, FormatVLLMServe, FormatVLLMLatency, FormatMLX, FormatMtlbench}

// Case is one peer case, keyed as mtlbench keys its own.
type Case struct {
	Key, Name, Kind        string
	Params                 map[string]string
	LayersRun, LayersTotal int
	Samples                []results.Sample
}

// Run is one peer run: one engine, one model, one machine.
type Run struct {
	Tool, ToolVersion string
	SuiteName         string
	Backend           string
	TimingMode        string
	StartedAt         time.Time
	// EndedAt is when the run ended, where the file says (mtlbench's own
	// peer format); zero where the tool does not record it.
	EndedAt time.Time
	Machine results.Machine
	// HasMachine tells that the file described its machine; otherwise the
	// caller fills in the machine it runs on.
	HasMachine bool
	Notes      string
	Cases      []Case
	// Warnings are what the file held that the run could not keep (a
	// start time in a form the tool does not write), for the importer to
	// say.
	Warnings []string
}

// Options are what a format does not record itself.
type Options struct {
	// Model is the mtlbench model name to record (a preset, say), so that
	// the case's model parameter reads as mtlbench's does; "" keeps the
	// tool's own name.
	Model string
	// Batch, PromptLen and GenLen are the workload of formats that do not
	// write it (vLLM's bench latency: --batch-size, --input-len,
	// --output-len); 0 means the tool's default.
	Batch, PromptLen, GenLen int
	// RangeRatio and SLO are a vLLM serving run's --random-range-ratio and
	// --goodput, which its result file does not record, as the suites'
	// range_ratio and slo spell them (suites.Canonical); "" for none.
	RangeRatio, SLO string
}

// benchKey is the key `mtlbench bench` gives a case: the kind, the group
// and every matrix parameter sorted by name, less those at their default,
// by the suites' own rule (suites.Key).
func benchKey(params map[string]string) string {
	vals := map[string]string{}
	for k, v := range params {
		if k != "model" && k != "dtype" && !strings.HasPrefix(k, "peer_") {
			vals[k] = v
		}
	}
	return suites.Key(suites.KindModel, "bench", vals)
}

// benchName is the label `mtlbench bench` gives a case.
func benchName(params map[string]string) string {
	name := "bench"
	for _, k := range []string{"batch", "prompt_len", "gen_len", "depth", "arrival", "ramp_up", "requests"} {
		if v, ok := params[k]; ok {
			name += "/" + k + "=" + v
		}
	}
	return name
}

// newCase builds a bench-keyed case from the workload and extra labels.
func newCase(batch, prompt, gen int, labels map[string]string) Case {
	p := map[string]string{"batch": strconv.Itoa(batch), "prompt_len": strconv.Itoa(prompt), "gen_len": strconv.Itoa(gen)}
	for k, v := range labels {
		if v != "" {
			p[k] = v
		}
	}
	return Case{Key: benchKey(p), Name: benchName(p), Kind: results.CaseModel, Params: p}
}

// Bounds on what a peer's text output may hold: a line longer than any
// tool prints, a trial number past any run's repetitions.
const (
	maxPeerLine = 16 << 20
	maxPeerReps = 1 << 20
)

// scanError is a text output's read error at line, in its terms.
func scanError(line int, err error, tool string) error {
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("line %d: longer than %d bytes, which %s does not print", line, maxPeerLine, tool)
	}
	return fmt.Errorf("line %d: %w", line, err)
}

func (c *Case) add(rep int, metric string, v float64, unit string) {
	c.Samples = append(c.Samples, results.Sample{Rep: rep, Metric: metric, Value: v, Unit: unit})
}

// pythonJSON rewrites the number literals Python's json module writes and
// JSON lacks (NaN, Infinity, -Infinity: a metric of no requests, a rate of
// inf) as null, "inf" and "-inf", outside strings, so vLLM's files parse;
// a figure there is then no figure, as a null is, and a list of figures
// reads them as pointers to tell.
func pythonJSON(data []byte) []byte {
	var out []byte // nil until a literal is found
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		var lit, repl string
		switch {
		case c == '"':
			inString = true
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			lit, repl = "NaN", "null"
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			lit, repl = "-Infinity", `"-inf"`
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			lit, repl = "Infinity", `"inf"`
		}
		if lit == "" {
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if out == nil {
			out = append([]byte{}, data[:i]...)
		}
		out = append(out, repl...)
		i += len(lit) - 1
	}
	if out == nil {
		return data
	}
	return out
}

// plainText is data as UTF-8 without a byte-order mark: Windows tools
// (PowerShell's Out-File, Notepad) write a tool's output with a UTF-8 BOM,
// or as UTF-16 with one (Windows PowerShell's `>`), which no parser here
// reads.
func plainText(data []byte) ([]byte, error) {
	var big bool
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		return data[3:], nil
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		big = true
	default:
		return data, nil
	}
	data = data[2:]
	if len(data)%2 != 0 {
		return nil, fmt.Errorf("UTF-16 text of an odd number of bytes: cut short")
	}
	u := make([]uint16, len(data)/2)
	for i := range u {
		if big {
			u[i] = uint16(data[2*i])<<8 | uint16(data[2*i+1])
		} else {
			u[i] = uint16(data[2*i+1])<<8 | uint16(data[2*i])
		}
	}
	return []byte(string(utf16.Decode(u))), nil
}

// ErrUnknownFormat is what Detect's error wraps when data is of no shape
// it knows, where naming the format (peer import --from) may help; its
// other errors say what to run instead, or that no format reads the file.
var ErrUnknownFormat = errors.New("the format was not recognised")

// unknownFormat is an error of Detect's that is ErrUnknownFormat, in its
// own words.
type unknownFormat struct{ error }

func (unknownFormat) Is(target error) bool { return target == ErrUnknownFormat }

// cutShort is Detect's error for a file t that ends inside its first JSON
// value, an array or an object alike: said where it stops, in jsonerr's
// one wording, not as a first line that is no JSON.
func cutShort(t []byte) error {
	return fmt.Errorf("line %d: %s; copy the whole file, or run the tool again", 1+bytes.Count(t, []byte("\n")), jsonerr.CutShort)
}

// Detect names the format of data: the first one whose shape it has.
func Detect(data []byte) (string, error) {
	data, err := plainText(data)
	if err != nil {
		return "", err
	}
	t := bytes.TrimSpace(pythonJSON(data))
	if len(t) == 0 {
		return "", fmt.Errorf("empty file")
	}
	if t[0] == '{' || t[0] == '[' {
		var probe map[string]json.RawMessage
		first := t
		if t[0] == '[' {
			var arr []map[string]json.RawMessage
			if err := json.Unmarshal(t, &arr); err != nil {
				// llama-bench's array of a run stopped midway: its reader
				// says so.
				var se *json.SyntaxError
				if errors.As(err, &se) && se.Offset >= int64(len(t)) && bytes.Contains(t, []byte(`"n_prompt"`)) && bytes.Contains(t, []byte(`"samples_ts"`)) {
					return FormatLlamaBench, nil
				}
				if jsonerr.IsCutShort(err, t) {
					return "", cutShort(t)
				}
				return "", jsonerr.Explain(err, t)
			}
			if len(arr) == 0 {
				return "", fmt.Errorf("an empty JSON array")
			}
			probe = arr[0]
		} else if err := json.Unmarshal(first, &probe); err != nil {
			// JSON values one after another (JSONL; results appended to one
			// file, each as its tool prints it, over lines or not): the
			// first says whose, as each format's reader reads them.
			if derr := json.NewDecoder(bytes.NewReader(t)).Decode(&probe); derr != nil {
				// A tool's result whose file stops before the value ends
				// (a copy that stopped): said where it stops, not as a
				// first line that is no JSON.
				if jsonerr.IsCutShort(derr, t) {
					return "", cutShort(t)
				}
				line, _, _ := bytes.Cut(t, []byte("\n"))
				if lerr := json.Unmarshal(line, &probe); lerr != nil {
					derr = lerr
				}
				return "", fmt.Errorf("not JSON or JSONL: %w", jsonerr.Explain(derr, line))
			}
		}
		has := func(k string) bool { _, ok := probe[k]; return ok }
		switch {
		case has("format"):
			return FormatMtlbench, nil
		case has("avg_ts") || has("samples_ts") || (has("n_prompt") && has("n_gen")):
			return FormatLlamaBench, nil
		case has("latencies") && has("avg_latency"):
			return FormatVLLMLatency, nil
		// A pooling endpoint's run (embeddings) has no output figures, only
		// its input counts and request throughput.
		case has("output_throughput") || has("mean_ttft_ms") || has("total_output_tokens") ||
			has("completed") && has("total_input_tokens") && has("request_throughput"):
			return FormatVLLMServe, nil
		case has("benchmark") && has("metric"):
			// vLLM's PyTorch-format copy of a run: its reader names the
			// result file to import.
			if recs, ok := vllmPyTorchRecords(t); ok {
				return vllmPyTorchFormat(recs), nil
			}
		}
		return "", unknownFormat{errors.New("JSON of no known tool (want llama-bench -o json/jsonl, vllm bench serve --save-result, vllm bench latency --output-json, or an mtlbench peer run)")}
	}
	if bytes.Contains(t, []byte("prompt_tps=")) && bytes.Contains(t, []byte("generation_tps=")) {
		return FormatMLX, nil
	}
	if err := llamaBenchText(t); err != nil {
		return "", err
	}
	return "", unknownFormat{errors.New("no known tool's output (want JSON, JSONL or mlx_lm.benchmark's printed trials)")}
}

// Parse converts one file of the named format; name is used in errors.
func Parse(format, name string, data []byte, o Options) ([]*Run, error) {
	data, err := plainText(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var runs []*Run
	if format == FormatVLLMServe || format == FormatVLLMLatency {
		data = pythonJSON(data) // vLLM writes its files with Python's json
		if recs, ok := vllmPyTorchRecords(data); ok {
			return nil, fmt.Errorf("%s: %s: %w", name, format, vllmPyTorchRefusal(name, recs))
		}
	}
	switch format {
	case FormatLlamaBench:
		runs, err = parseLlamaBench(data, o)
	case FormatVLLMServe:
		runs, err = parseVLLMServe(data, o)
	case FormatVLLMLatency:
		runs, err = parseVLLMLatency(data, o)
	case FormatMLX:
		runs, err = parseMLX(data, o)
	case FormatMtlbench:
		runs, err = parseMtlbench(data)
	default:
		return nil, fmt.Errorf("unknown peer format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, format, err)
	}
	for _, r := range runs {
		if len(r.Cases) == 0 {
			what := ""
			if format == FormatMLX {
				// A text of no trials: what mlx_lm.benchmark prints, said.
				what = ` (mlx_lm.benchmark prints a "Timing with prompt_tokens=P, generation_tokens=N, batch_size=B." line and its "Trial N:" lines; none is here)`
			}
			return nil, fmt.Errorf("%s: %s: no case could be read%s", name, format, what)
		}
		// Sizes within the suites' bounds (a peer's prefill-only test has
		// no generated tokens): a case of batch=0 or a prompt of 2^62
		// tokens pairs with nothing mtlbench measures.
		for _, c := range r.Cases {
			for _, p := range []string{suites.ParamBatch, suites.ParamPromptLen, suites.ParamGenLen, suites.ParamRequests} {
				v, ok := c.Params[p]
				if !ok {
					continue
				}
				least := 0
				if p == suites.ParamBatch || p == suites.ParamRequests {
					least = 1
				}
				if n, err := strconv.Atoi(v); err != nil || n < least || n > suites.MaxTokens {
					return nil, fmt.Errorf("%s: %s: case %q: %s %s is outside %d to %d", name, format, c.Name, p, v, least, suites.MaxTokens)
				}
			}
		}
		if r.TimingMode == "" {
			r.TimingMode = results.TimingThroughput
		}
		if r.SuiteName == "" {
			r.SuiteName = "bench"
		}
		if err := checkSamples(r); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, format, err)
		}
	}
	return runs, nil
}

// checkSamples holds a peer's figures to the rule the store keeps
// (results.CheckSample), before anything is stored.
func checkSamples(r *Run) error {
	for _, c := range r.Cases {
		if len(c.Samples) == 0 {
			return fmt.Errorf("case %q: no figure could be read", c.Name)
		}
		for j, s := range c.Samples {
			if err := results.CheckSample(s); err != nil {
				return fmt.Errorf("case %q sample %d: %w", c.Name, j, err)
			}
		}
	}
	return nil
}

// modelName is o.Model, else the tool's name for the model.
func (o Options) modelName(tool string) string {
	if o.Model != "" {
		return o.Model
	}
	return tool
}
