package suites

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/reqlen"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"gopkg.in/yaml.v3"
)

// The model cases' parameter names; kernel cases' are the ops' (ops.Specs).
const (
	ParamBatch     = "batch"
	ParamPromptLen = "prompt_len"
	ParamDepth     = "depth"
	ParamGenLen    = "gen_len"
	ParamRequests  = "requests"
	ParamArrival   = "arrival"
	// ParamRangeRatio spreads each request's prompt and output lengths
	// around prompt_len and gen_len (vLLM's --random-range-ratio).
	ParamRangeRatio = "range_ratio"
	// ParamSLO bounds a request's latencies (ttft, tpot, e2el, in ms) for
	// goodput: the requests a second that meet every bound.
	ParamSLO           = "slo"
	ParamKVBlocks      = "kv_blocks"
	ParamPrefillBudget = "prefill_budget"
	ParamMaxSeqs       = "max_seqs"
	ParamSampling      = "sampling"
	ParamLayers        = "layers"
	ParamSteps         = "steps"
	ParamFusion        = "fusion"
	ParamKVDType       = "kv_dtype"
	// ParamWitnessGPU is the Apple GPU the Metal emulator's cost witness
	// reads its counts against (docs/metal-kernels.md); both kinds take it.
	ParamWitnessGPU = "witness_gpu"
	ParamOp         = "op"
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
	Stagger int
	// Rate, when positive, is a poisson or gamma arrival's requests a
	// second: the requests arrive on the wall clock instead of by step,
	// the gaps' shape Burstiness (1: Poisson).
	Rate, Burstiness float64
	// SLO bounds each request's latencies in ms by target (ttft, tpot,
	// e2el), for goodput; nil when the case sets none.
	SLO map[string]float64
	// RangeRatio, when positive, draws each request's prompt and output
	// lengths from LenBounds of PromptLen and GenLen instead of taking them
	// as they are.
	RangeRatio    float64
	KVBlocks      int // 0: sized from the workload
	PrefillBudget int // tokens per step, decode tokens first, 0: no limit
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

// MaxLens are the longest prompt and output a request of the case may have.
func (m ModelParams) MaxLens() (prompt, gen int) {
	_, prompt = LenBounds(m.PromptLen, m.RangeRatio, 0)
	_, gen = LenBounds(m.GenLen, m.RangeRatio, 1)
	return prompt, gen
}

// decodes is whether a request of the case generates two tokens or more,
// recording the decode metrics: with a range_ratio, one the run draws from
// the suite model's seed (reqlen.Draw), not one the range merely allows.
func (m ModelParams) decodes(seed uint64) bool {
	lo, hi := reqlen.Bounds(m.GenLen, m.RangeRatio, 1)
	if lo > 1 || hi <= 1 {
		return lo > 1
	}
	// Stopped at the first that decodes: most cases find one at once.
	found := false
	reqlen.Each(m.Requests, m.PromptLen, m.GenLen, m.RangeRatio, seed, func(_, g int) bool {
		found = g > 1
		return !found
	})
	return found
}

// LenBounds are the lengths a request draws from around n at range ratio
// r (reqlen.Bounds, which the runner draws from).
func LenBounds(n int, r float64, least int) (lo, hi int) { return reqlen.Bounds(n, r, least) }

// PosOf is where parameter name was written for c (the case's own position
// when it was not), for errors a runner finds later.
func (c Case) PosOf(name string) Pos {
	if v, ok := c.Params[name]; ok {
		return v.Pos
	}
	return c.Pos
}

// WitnessGPU is the case's witness_gpu as written, "" when it sets none
// (the witness then reads its counts against the M3 Ultra).
func (c Case) WitnessGPU() string { return c.Params[ParamWitnessGPU].Raw }

// Recorded are the case's parameters for the results store: as written,
// but an integer as the key spells it (0x10 is 16), so that rows group by
// the value and not by its spelling.
func (c Case) Recorded() map[string]string {
	out := make(map[string]string, len(c.Params))
	for k, v := range c.Params {
		out[k] = v.Raw
		if spec, ok := params[k]; ok && spec.isInt && v.IsNum && v.Float == float64(v.Int) {
			out[k] = strconv.FormatInt(v.Int, 10)
		}
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
		a, _ := ParseArrival(v.Raw)
		m.Stagger, m.Rate, m.Burstiness = a.Stagger, a.Rate, a.Burstiness
	}
	if v, ok := ps[ParamSLO]; ok {
		m.SLO, _ = ParseSLO(v.Raw)
	}
	if v, ok := ps[ParamRangeRatio]; ok {
		m.RangeRatio, _ = parseRangeRatio(v.Raw)
	}
	if v, ok := ps[ParamSampling]; ok {
		m.Sampling, _ = ParseSampling(v.Raw)
	}
	m.Synchronous = ps[ParamSteps].Raw == "synchronous"
	s, hasS := ps[string(ops.MoEStrategyParam)]
	k, hasK := ps[string(ops.MoEChunk)]
	if hasS || hasK {
		m.MoEStrategy, m.MoEChunk = ops.MoEGrouped, 64
		if hasK { // a chunk size alone asks for the chunked dispatch
			m.MoEStrategy = ops.MoEChunked
		}
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

func decodeKernel(op ops.ID, ps map[string]Value) ops.Args {
	a := ops.Args{Op: op, Ints: ops.Shape{}}
	for name, v := range ps {
		p := ops.Param(name)
		switch p {
		case ops.DTypeParam:
			a.DType = ops.DType(v.Raw)
		case ops.MoEStrategyParam:
			a.MoEStrategy = ops.MoEStrategy(v.Raw)
		case ops.MoEChunk:
			if v.IsNum {
				a.Ints[p] = int(v.Int)
			}
			if _, set := ps[string(ops.MoEStrategyParam)]; !set { // as for model cases
				a.MoEStrategy = ops.MoEChunked
			}
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
// value obeys: the value is read as YAML, so 8 is a number and "8" text, a
// [1, 2] list sweeps a parameter, and top-level settings (repetitions,
// warmup, timing, ...) take what their keys in a file take.
func CheckOverride(name, value string) error {
	probe := &Suite{Positions: map[string]Pos{}}
	return probe.Override(map[string]string{name: value})
}

// overrideNode reads a --set value as YAML: a scalar, a list or a map.
func overrideNode(value string) *yaml.Node {
	var doc yaml.Node
	if value != "" && yaml.Unmarshal([]byte(value), &doc) == nil && len(doc.Content) == 1 {
		n := doc.Content[0]
		// A map only where the text is one ("{a: 1}" or "a: 1"); a
		// sampling value such as temperature:0.7,top_k:40 is a scalar.
		return n
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
}

// Override applies `--set` settings through the suite parser's own rules.
// A top-level setting (backend, timing, repetitions, warmup, interleave,
// cooldown) replaces the suite's. A parameter given one value is set in
// every case of a kind that takes it, keeping the case keys: an override
// stands for a change to the code or its defaults, which the gate must
// compare case by case against runs made without it. A parameter given a
// list ([1, 2]) sweeps it: each case that takes it becomes one case per
// value, named and keyed by it, as a matrix would.
func (s *Suite) Override(set map[string]string) error {
	p := &parser{file: "--set", s: s, budget: maxWork}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	// The strategy first: it decides which cases read a moe_chunk set
	// beside it.
	if i, j := slices.Index(names, string(ops.MoEChunk)), slices.Index(names, string(ops.MoEStrategyParam)); i >= 0 && j >= 0 && i < j {
		names[i], names[j] = names[j], names[i]
	}
	type param struct {
		name string
		vals []Value
		list bool // a list or a range: a sweep, even of one value
	}
	var overrides []param
	for _, name := range names {
		value := set[name]
		n := overrideNode(value)
		where := fmt.Sprintf("--set %s=%s", name, value)
		if msg := tagError(n); msg != "" {
			return fmt.Errorf("%s: %s", where, msg)
		}
		// An empty value is most often a variable left unset: said so in
		// one wording, where each check said it its own way ("must be an
		// integer, got string \"\"", "must not be empty", "unknown backend").
		if _, known := params[name]; strings.TrimSpace(value) == "" && (known || slices.Contains(settingKeys, name)) {
			return fmt.Errorf("%s: an empty value (give one, or leave the --set out; a variable left unset?)", where)
		}
		if slices.Contains(settingKeys, name) {
			before := len(p.errs.list)
			p.setting(name, n)
			if len(p.errs.list) > before {
				e := p.errs.list[before]
				msg := e.Msg
				if e.Hint != "" {
					msg += " (" + e.Hint + ")"
				}
				return fmt.Errorf("%s: %s", where, msg)
			}
			// Errors about the setting (a backend that will not open) name
			// the --set, not the suite's line it replaced.
			if s.Positions == nil {
				s.Positions = map[string]Pos{}
			}
			s.Positions[name] = Pos{File: where}
			continue
		}
		if name == ParamOp {
			return fmt.Errorf("%s: op cannot be overridden (it names the case)", where)
		}
		spec, ok := params[name]
		if key, isModel := strings.CutPrefix(name, "model."); isModel || !ok && slices.Contains(modelKeys, name) {
			// The model section is loaded once for every case: a --set
			// would not reach it, and a near parameter's name misleads.
			if !isModel {
				key = name
			}
			if p, ok := params[key]; ok && p.kinds.has(KindModel) {
				return fmt.Errorf("%s: the model section is not overridden; --set %s=%s sets every model case's %s", where, key, value, key)
			}
			if slices.Contains(modelKeys, key) {
				how := "write it in the suite"
				if f := benchModelFlags[key]; f != "" {
					how += ", or give bench's " + f
				}
				return fmt.Errorf("%s: %s is a key of the suite's model section, which --set does not change (%s)", where, key, how)
			}
		}
		if !ok {
			hint := ""
			all := append(paramNames(""), settingKeys...)
			if h := didYouMean(name, all); h != "" {
				hint = " (" + h + ")"
			}
			return fmt.Errorf("%s: unknown parameter or setting %q%s", where, name, hint)
		}
		if spec.isInt {
			// Ranges, as a matrix list takes them (1-16*2, [1-4, 16]).
			before := len(p.errs.list)
			var ok bool
			if n, ok = p.expandRanges(name, name, spec, n); !ok {
				e := p.errs.list[before]
				msg := e.Msg
				if e.Hint != "" {
					msg += " (" + e.Hint + ")"
				}
				return fmt.Errorf("%s: %s", where, msg)
			}
		}
		items := []*yaml.Node{n}
		if n.Kind == yaml.SequenceNode {
			if len(n.Content) == 0 {
				return fmt.Errorf("%s: an empty list sweeps nothing", where)
			}
			items = n.Content
		}
		var vals []Value
		seen := map[string]bool{}
		for _, it := range items {
			// An alias is its anchor's value ([&a 1, *a] is 1 twice).
			if it = resolve(it); it.Kind != yaml.ScalarNode {
				if n.Kind == yaml.SequenceNode {
					return fmt.Errorf("%s: %s takes a list of single values, but an item is %s", where, name, describe(it))
				}
				return fmt.Errorf("%s: %s takes a value or a list of values, not %s", where, name, describe(it))
			}
			v, isInt := makeValue(it, Pos{File: "--set"})
			if msg, hint := checkParam(name, spec, it, v, isInt); msg != "" {
				if hint != "" {
					msg += " (" + hint + ")"
				}
				return fmt.Errorf("%s: %s", where, msg)
			}
			if len(items) == 1 && n.Kind != yaml.SequenceNode {
				v.Raw = value // as typed: recorded with the run
			}
			// As a matrix refuses it: two cases of one key.
			c := canon(name, v)
			if seen[c] {
				return fmt.Errorf("%s: duplicate value %s in the list", where, c)
			}
			seen[c] = true
			vals = append(vals, v)
		}
		if n.Kind != yaml.SequenceNode {
			vals = vals[:1:1]
		} else {
			vals = slices.Clip(vals)
		}
		overrides = append(overrides, param{name, vals, n.Kind == yaml.SequenceNode})
	}
	cases := s.Cases
	for _, pr := range overrides {
		// An alias --set beside its op's own name leaves that op's cases to
		// the own name, as the suite's params do (docs/suites.md), so the
		// outcome does not hang on which name sorts last.
		readsHere := func(c Case) bool {
			if !reads(c, pr.name) {
				return false
			}
			own := ownName(c, pr.name)
			_, shadowed := set[own]
			return own == pr.name || !shadowed
		}
		// An override no case reads would be recorded as if it had
		// changed what ran.
		// (CheckOverride's probe has no cases: it checks the value alone.)
		if len(cases) > 0 && !slices.ContainsFunc(cases, readsHere) {
			// The user asked for both: say which of their --set took it.
			if st, ok := set[string(ops.MoEStrategyParam)]; ok && pr.name == string(ops.MoEChunk) {
				return fmt.Errorf("--set %s=%s: no case of suite %s reads %s beside --set %s=%s: it sizes the chunks of moe_strategy chunked (give one of the two)",
					pr.name, set[pr.name], s.Name, pr.name, ops.MoEStrategyParam, st)
			}
			if i := slices.IndexFunc(cases, func(c Case) bool { return reads(c, pr.name) }); i >= 0 {
				c := cases[i]
				own := ownName(c, pr.name)
				return fmt.Errorf("--set %s=%s: no case of suite %s reads %s beside --set %s=%s: %s reads %s as %s (give one of the two)",
					pr.name, set[pr.name], s.Name, pr.name, own, set[own], c.Op, pr.name, own)
			}
			return fmt.Errorf("--set %s=%s: no case of suite %s takes %s (%s)", pr.name, set[pr.name], s.Name, pr.name, takers(pr.name))
		}
		sweep := len(pr.vals) > 1 || pr.list
		// Counted before a case is made, as a matrix is: a long list over
		// many cases would take all memory before a limit after the fact.
		if sweep {
			if n := sweptCount(cases, pr.name, len(pr.vals), readsHere); n > MaxCases {
				return fmt.Errorf("--set %s=%s: the sweep makes %d cases, over the limit of %d (%d values; shorten the list)", pr.name, abbrev(set[pr.name]), n, MaxCases, len(pr.vals))
			}
		}
		var out []Case
		seen := map[string]bool{}
		for _, c := range cases {
			// A case that does not read it keeps its own work and key.
			if !readsHere(c) {
				out = append(out, c)
				continue
			}
			// An alias sets its op's own parameter (expand filed the case's
			// value under that name).
			name := ownName(c, pr.name)
			if sweep {
				// Cases that differ only in the swept parameter (a matrix
				// over it) become one set of swept cases.
				k := ownKey(c, name)
				if seen[k] {
					continue
				}
				seen[k] = true
				c.Name = dropSegment(dropSegment(c.Name, pr.name), name)
			}
			for _, v := range pr.vals {
				nc := c
				nc.Params, nc.from = maps.Clone(c.Params), maps.Clone(c.from)
				// Errors about the value name the --set, not the case it
				// replaced a value of.
				v.Pos = Pos{File: fmt.Sprintf("--set %s=%s", pr.name, set[pr.name])}
				nc.Params[name] = v
				if nc.from == nil {
					nc.from = map[string]int{}
				}
				nc.from[name] = fromSet
				// The suite's defaults as the case now reads them: a
				// moe_strategy of loop takes the suite's moe_chunk away.
				p.settle(&nc, s.defaults)
				if sweep {
					// A case per value, as a matrix makes them.
					nc.Name = c.Name + "/" + name + "=" + canon(name, v)
					nc.Key = caseKey(nc)
				}
				p.crossCheck(nc, nc.from)
				nc.decode()
				out = append(out, nc)
			}
		}
		cases = out
	}
	if err := p.errs.err(); err != nil {
		return fmt.Errorf("--set: %w", err)
	}
	// What the cases record now: --set gen_len=1 takes every decode step
	// away, and with it what a threshold on decode_tok_s would compare.
	if len(s.Thresholds) > 0 && len(overrides) > 0 {
		var args []string
		for _, pr := range overrides {
			args = append(args, fmt.Sprintf("--set %s=%s", pr.name, set[pr.name]))
		}
		tp := &parser{file: "--set", s: &Suite{Cases: cases, Thresholds: s.Thresholds, Model: s.Model}, thresholdAt: map[string]Pos{}}
		for name := range s.Thresholds {
			tp.thresholdAt[name] = Pos{File: fmt.Sprintf("%s (the threshold at %s)", strings.Join(args, " "), s.Positions["thresholds."+name])}
		}
		tp.thresholdsRecorded()
		if err := tp.errs.err(); err != nil {
			return err
		}
	}
	s.Cases = cases
	return nil
}

// sweptCount is how many cases sweeping parameter name over n values
// makes of cases, as Override makes them: one per value of each set of
// cases that differ only in name, and the cases that do not read it
// (reads: whether a case reads the override).
func sweptCount(cases []Case, name string, n int, reads func(Case) bool) int {
	total := 0
	seen := map[string]bool{}
	for _, c := range cases {
		if !reads(c) {
			total++
			continue
		}
		if k := ownKey(c, ownName(c, name)); !seen[k] {
			seen[k] = true
			total += n
		}
	}
	return total
}

// abbrev shortens a long --set value for a message: its length is the
// problem, not its text.
func abbrev(value string) string {
	const most = 40
	if len(value) <= most {
		return value
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(value[cut]) {
		cut--
	}
	return value[:cut] + "..."
}

// reads reports whether case c, as its parameters stand, reads parameter
// name: what takes says, less a moe_chunk beside a moe_strategy other than
// chunked, which has no chunks for it to size.
func reads(c Case, name string) bool {
	if name == string(ops.MoEChunk) {
		if s, ok := c.Params[string(ops.MoEStrategyParam)]; ok && s.Raw != string(ops.MoEChunked) {
			return false
		}
	}
	return takes(c, name)
}

// takes reports whether case c reads parameter name: a model case every
// model parameter, a kernel case its op's own (ops.Op.Params, aliases
// included) and those every kernel case takes, op among them.
func takes(c Case, name string) bool {
	if !params[name].kinds.has(c.Kind) {
		return false
	}
	if c.Kind != KindKernel {
		return true
	}
	switch name {
	case ParamOp, string(ops.Threads), string(ops.Variant), ParamWitnessGPU:
		return true
	}
	o, ok := ops.Lookup(c.Op)
	return ok && slices.ContainsFunc(o.Params, func(u ops.Use) bool {
		return string(u.Param) == name || string(u.Alias) == name
	})
}

// takers says which cases read parameter name, for the error of an
// override none reads.
func takers(name string) string {
	var kinds []string
	if params[name].kinds.has(KindModel) {
		kinds = append(kinds, "model cases")
	}
	if params[name].kinds.has(KindKernel) {
		var opsTaking []string
		for _, id := range ops.IDs() {
			if takes(Case{Kind: KindKernel, Op: id}, name) {
				opsTaking = append(opsTaking, string(id))
			}
		}
		if len(opsTaking) > 0 {
			kinds = append(kinds, "kernel cases of "+strings.Join(opsTaking, ", "))
		}
	}
	if len(kinds) == 0 {
		return "no case takes it"
	}
	if name == string(ops.MoEChunk) {
		return "it is read by " + strings.Join(kinds, " and ") + " whose moe_strategy is chunked or unset"
	}
	return "it is read by " + strings.Join(kinds, " and ")
}

// dropSegment removes "/name=..." from a case name (a matrix value the
// sweep replaces).
func dropSegment(caseName, name string) string {
	parts := strings.Split(caseName, "/")
	out := parts[:1]
	for _, part := range parts[1:] {
		if !strings.HasPrefix(part, name+"=") {
			out = append(out, part)
		}
	}
	return strings.Join(out, "/")
}
