package suites

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/kernels/ops"
	"gopkg.in/yaml.v3"
)

// The model cases' parameter names; kernel cases' are the ops' (ops.Specs).
const (
	ParamBatch         = "batch"
	ParamPromptLen     = "prompt_len"
	ParamDepth         = "depth"
	ParamGenLen        = "gen_len"
	ParamRequests      = "requests"
	ParamArrival       = "arrival"
	ParamKVBlocks      = "kv_blocks"
	ParamPrefillBudget = "prefill_budget"
	ParamMaxSeqs       = "max_seqs"
	ParamSampling      = "sampling"
	ParamLayers        = "layers"
	ParamSteps         = "steps"
	ParamFusion        = "fusion"
	ParamKVDType       = "kv_dtype"
	ParamOp            = "op"
)

// ModelParams are a model case's parameters, decoded and with defaults
// applied: what the runner and the tuner read instead of the file's values.
type ModelParams struct {
	Batch     int // concurrent requests (default 1)
	PromptLen int // default 128
	// Depth is context each request holds before its prompt (llama-bench's
	// -d): its prompt is Depth+PromptLen tokens, of which the steps that
	// start at or after Depth are the measured prefill (default 0).
	Depth    int
	GenLen   int // default 32
	Requests int // default Batch
	// Stagger is the arrival: 0 for every request at step 0 ("all"), N
	// for one new request every N steps ("stagger:N").
	Stagger       int
	KVBlocks      int // 0: sized from the workload
	PrefillBudget int // tokens per prefill step, 0: no limit
	MaxSeqs       int // default Batch
	Sampling      Sampling
	Layers        int  // 0: the suite model's depth
	Synchronous   bool // steps: synchronous (default overlapped)
	BlockSize     int  // KV block size, default 16
	// MoEStrategy and MoEChunk are zero unless the case sets either: then
	// the engine looks its dispatch up in the tuned configs.
	MoEStrategy ops.MoEStrategy
	MoEChunk    int
	Threads     int    // 0: the backend's default
	Variant     string // a label only
	// Fusion lets the backend fuse ops (fusion: on, the default); off
	// measures what fusion buys.
	Fusion bool
	// KVDType is the KV cache's dtype: auto (the default: the model's where
	// the backend reads it), f32, f16 or bf16.
	KVDType string
}

// Sampling is a decoded sampling parameter; a zero Temperature is greedy.
type Sampling struct {
	Temperature float64
	TopK        int     // 0: no limit
	TopP        float64 // 0: no limit
}

// PosOf is where parameter name was written for c (the case's own position
// when it was not), for errors a runner finds later.
func (c Case) PosOf(name string) Pos {
	if v, ok := c.Params[name]; ok {
		return v.Pos
	}
	return c.Pos
}

// Recorded are the case's parameters as written, for the results store.
func (c Case) Recorded() map[string]string {
	out := make(map[string]string, len(c.Params))
	for k, v := range c.Params {
		out[k] = v.Raw
	}
	return out
}

// decode fills c.Model or c.Kernel from c.Params, which checkParam has
// already validated value by value.
func (c *Case) decode() {
	if c.Kind == KindKernel {
		c.Kernel = decodeKernel(c.Op, c.Params)
		return
	}
	c.Model = decodeModel(c.Params)
}

func decodeModel(ps map[string]Value) ModelParams {
	m := ModelParams{Batch: 1, PromptLen: 128, GenLen: 32, BlockSize: 16, Fusion: true}
	ints := map[string]*int{
		ParamBatch: &m.Batch, ParamPromptLen: &m.PromptLen, ParamGenLen: &m.GenLen, ParamDepth: &m.Depth,
		ParamKVBlocks: &m.KVBlocks, ParamPrefillBudget: &m.PrefillBudget, ParamLayers: &m.Layers,
		string(ops.BlockSize): &m.BlockSize, string(ops.Threads): &m.Threads,
	}
	for name, dst := range ints {
		if v, ok := ps[name]; ok && v.IsNum {
			*dst = int(v.Int)
		}
	}
	m.Requests, m.MaxSeqs = m.Batch, m.Batch
	if v, ok := ps[ParamRequests]; ok && v.IsNum {
		m.Requests = int(v.Int)
	}
	if v, ok := ps[ParamMaxSeqs]; ok && v.IsNum {
		m.MaxSeqs = int(v.Int)
	}
	if v, ok := ps[ParamArrival]; ok {
		if rest, ok := strings.CutPrefix(v.Raw, "stagger:"); ok {
			m.Stagger, _ = strconv.Atoi(rest)
		}
	}
	if v, ok := ps[ParamSampling]; ok {
		m.Sampling = decodeSampling(v.Raw)
	}
	m.Synchronous = ps[ParamSteps].Raw == "synchronous"
	s, hasS := ps[string(ops.MoEStrategyParam)]
	k, hasK := ps[string(ops.MoEChunk)]
	if hasS || hasK {
		m.MoEStrategy, m.MoEChunk = ops.MoEGrouped, 64
		if hasS {
			m.MoEStrategy = ops.MoEStrategy(s.Raw)
		}
		if hasK && k.IsNum {
			m.MoEChunk = int(k.Int)
		}
	}
	m.Variant = ps[string(ops.Variant)].Raw
	if v, ok := ps[ParamFusion]; ok {
		m.Fusion = v.Raw == "on"
	}
	m.KVDType = "auto"
	if v, ok := ps[ParamKVDType]; ok {
		m.KVDType = v.Raw
	}
	return m
}

// decodeSampling reads a value checkSampling accepted.
func decodeSampling(s string) Sampling {
	var out Sampling
	if s == "greedy" {
		return out
	}
	for i, part := range strings.Split(s, ",") {
		key, val, _ := strings.Cut(part, ":")
		switch {
		case i == 0:
			out.Temperature, _ = strconv.ParseFloat(val, 64)
		case key == "top_k":
			out.TopK, _ = strconv.Atoi(val)
		case key == "top_p":
			out.TopP, _ = strconv.ParseFloat(val, 64)
		}
	}
	return out
}

func decodeKernel(op ops.ID, ps map[string]Value) ops.Args {
	a := ops.Args{Op: op, Ints: ops.Shape{}}
	for name, v := range ps {
		p := ops.Param(name)
		switch p {
		case ops.DTypeParam:
			a.DType = ops.DType(v.Raw)
		case ops.MoEStrategyParam:
			a.MoEStrategy = ops.MoEStrategy(v.Raw)
		case ops.Variant:
			a.Variant = v.Raw
		default:
			if spec, ok := ops.Specs[p]; ok && spec.Kind == ops.IntKind && v.IsNum {
				a.Ints[p] = int(v.Int)
			}
		}
	}
	return a
}

// CheckOverride validates a --set name=value by the rules a suite file's
// value obeys: the value is read as YAML, so 8 is a number and "8" text.
func CheckOverride(name, value string) error {
	if name == ParamOp {
		return fmt.Errorf("op cannot be overridden (it names the case)")
	}
	spec, ok := params[name]
	if !ok {
		hint := ""
		if s := didYouMean(name, paramNames("")); s != "" {
			hint = " (" + s + ")"
		}
		return fmt.Errorf("unknown parameter %q%s", name, hint)
	}
	n, v, isInt := overrideValue(value)
	if msg, hint := checkParam(name, spec, n, v, isInt); msg != "" {
		if hint != "" {
			msg += " (" + hint + ")"
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func overrideValue(value string) (*yaml.Node, Value, bool) {
	var doc yaml.Node
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
	if value != "" && yaml.Unmarshal([]byte(value), &doc) == nil && len(doc.Content) == 1 {
		n = doc.Content[0]
	}
	v, isInt := makeValue(n, Pos{})
	return n, v, isInt
}

// Override sets every case of a kind that takes them to the given values
// (checked first with CheckOverride) and decodes the cases again. The case
// keys stay as the suite defines them: an override stands for a change to
// the code or its defaults, which the gate must compare case by case
// against runs made without it.
func (s *Suite) Override(set map[string]string) error {
	for name, value := range set {
		if err := CheckOverride(name, value); err != nil {
			return fmt.Errorf("--set %s=%s: %w", name, value, err)
		}
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		merged := make(map[string]Value, len(c.Params)+len(set))
		for k, v := range c.Params {
			merged[k] = v
		}
		for name, value := range set {
			if !params[name].kinds.has(c.Kind) {
				continue
			}
			_, v, _ := overrideValue(value)
			v.Raw, v.Pos = value, c.Pos
			merged[name] = v
		}
		c.Params = merged
		c.decode()
	}
	return nil
}
