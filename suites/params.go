package suites

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"gopkg.in/yaml.v3"
)

// Case kinds.
const (
	KindModel  = "model"
	KindKernel = "kernel"
)

type kindSet uint8

const (
	forModel kindSet = 1 << iota
	forKernel
	forBoth = forModel | forKernel
)

func (k kindSet) has(kind string) bool {
	switch kind {
	case KindModel:
		return k&forModel != 0
	case KindKernel:
		return k&forKernel != 0
	}
	return k != 0 // suite params: valid if any kind takes it
}

// paramSpec describes one known parameter. Parameters shared by both kinds
// have the same meaning and constraint in each, so one table suffices.
type paramSpec struct {
	kinds  kindSet
	isInt  bool
	min    int64    // ints: smallest allowed value
	auto   bool     // ints: 0 asks for an automatic choice
	max    int64    // ints: largest allowed value, if set
	step   int64    // ints: allowed values are multiples of it, if set
	oneOf  []int64  // ints: the only allowed values, if set
	enum   []string // strings: the only allowed values, if set
	syntax func(string) (msg, hint string)
	// outside says why a value not in enum is refused, where a plainer
	// word than "unknown" is due; "" for an unknown value.
	outside func(string) (msg, hint string)
	// key spells a valid value one way in case names and keys, where the
	// value has several spellings; nil: the value as written, escaped.
	key func(string) string
}

// Bounds on a model case's sizes, far past any model's context and any
// machine's memory, so sums and products of them cannot overflow: a value
// past them is a typo, refused where it is written.
const (
	maxTokens   = 1 << 24 // prompt_len, gen_len, depth, kv_blocks, prefill_budget
	maxSeqs     = 1 << 16 // batch, max_seqs
	maxRequests = 1 << 20
	// MaxRepetitions bounds a suite's repetitions and warmup (and bench's
	// -r and --warmup, which set them): days of runs of the smallest case.
	MaxRepetitions = 10000
	// MaxTokens is maxTokens for flags that set a token count outside a
	// suite (generate --max-new-tokens).
	MaxTokens = maxTokens
)

// params are the parameters a suite may set: the model cases' own, and
// the ops' (kernels/ops declares their rules), some of which model cases
// take too.
var params = func() map[string]paramSpec {
	m := map[string]paramSpec{
		ParamBatch:         {kinds: forModel, isInt: true, min: 1, max: maxSeqs},
		ParamPromptLen:     {kinds: forModel, isInt: true, min: 1, max: maxTokens},
		ParamDepth:         {kinds: forModel, isInt: true, min: 0, max: maxTokens},
		ParamGenLen:        {kinds: forModel, isInt: true, min: 1, max: maxTokens},
		ParamRequests:      {kinds: forModel, isInt: true, min: 1, max: maxRequests},
		ParamArrival:       {kinds: forModel, syntax: checkArrival, key: arrivalKey},
		ParamSLO:           {kinds: forModel, syntax: checkSLO, key: sloKey},
		ParamRangeRatio:    {kinds: forModel, syntax: checkRangeRatio, key: rangeRatioKey},
		ParamKVBlocks:      {kinds: forModel, isInt: true, min: 0, max: maxTokens, auto: true},
		ParamPrefillBudget: {kinds: forModel, isInt: true, min: 1, max: maxTokens},
		ParamMaxSeqs:       {kinds: forModel, isInt: true, min: 1, max: maxSeqs},
		ParamSampling:      {kinds: forModel, syntax: checkSampling, key: samplingKey},
		ParamLayers:        {kinds: forModel, isInt: true, min: 1},
		ParamSteps:         {kinds: forModel, enum: []string{"overlapped", "synchronous"}},
		ParamFusion:        {kinds: forModel, enum: []string{"on", "off"}},
		ParamKVDType:       {kinds: forModel, enum: []string{"auto", "f32", "f16", "bf16"}},
		ParamWitnessGPU:    {kinds: forBoth, syntax: checkWitnessGPU, key: applegpu.Key},
	}
	m[ParamOp] = paramSpec{kinds: forKernel, enum: timedOps(), outside: untimedOp}
	shared := map[ops.Param]bool{ops.BlockSize: true, ops.MoEStrategyParam: true, ops.MoEChunk: true, ops.Threads: true, ops.Variant: true}
	for name, o := range ops.Specs {
		s := paramSpec{kinds: forKernel}
		if shared[name] {
			s.kinds = forBoth
		}
		switch o.Kind {
		case ops.IntKind:
			s.isInt, s.min, s.max, s.step = true, int64(o.Min), int64(o.Max), int64(o.Step)
			s.auto = strings.Contains(o.Doc, "0 = auto")
			for _, v := range o.OneOf {
				s.oneOf = append(s.oneOf, int64(v))
			}
		case ops.EnumKind:
			s.enum = o.Values
		}
		m[string(name)] = s
	}
	return m
}()

// paramNames returns the sorted names of the parameters kind takes ("" for
// all), for did-you-mean hints.
func paramNames(kind string) []string {
	var out []string
	for name, s := range params {
		if s.kinds.has(kind) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// ParamKinds reports which case kinds take the named parameter, for tools
// that list or document parameters; nil if the name is unknown.
func ParamKinds(name string) []string {
	s, ok := params[name]
	if !ok {
		return nil
	}
	var out []string
	if s.kinds&forModel != 0 {
		out = append(out, KindModel)
	}
	if s.kinds&forKernel != 0 {
		out = append(out, KindKernel)
	}
	return out
}

// makeValue turns a scalar node into a Value. The YAML tag, not the text,
// decides whether it is a number, so "8" (quoted) stays a string.
func makeValue(n *yaml.Node, p Pos) (v Value, isInt bool) {
	v = Value{Raw: n.Value, Pos: p}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			v.Int, v.Float, v.IsNum = i, float64(i), true
			return v, true
		}
		// Too big for int64: keep it as a float so it is still a number.
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil {
			v.Float, v.IsNum = f, true
		}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil {
			v.Float, v.IsNum = f, true
			if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
				v.Int = int64(f)
			}
		}
	}
	return v, false
}

// describe names what a node is, for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n = resolve(n); n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Style&yaml.TaggedStyle != 0 {
			// An explicit tag (!!float 4) makes the value what it says,
			// whatever its text: said, so "got 4" is not a riddle.
			plain := *n
			plain.Style &^= yaml.TaggedStyle
			return describe(&plain) + " (tagged " + n.ShortTag() + ")"
		}
		switch n.ShortTag() {
		case "!!null":
			return "nothing (null)"
		case "!!str":
			// YAML reads a plain number past float64's range as a string.
			if _, err := strconv.ParseFloat(n.Value, 64); n.Style == 0 && errors.Is(err, strconv.ErrRange) {
				return fmt.Sprintf("%s, a number past float64's range", n.Value)
			}
			return fmt.Sprintf("string %q", n.Value)
		}
		return show(n.Value)
	}
	return "an unsupported YAML node"
}

// textHint says how to write a value YAML read as text where an integer
// ("int") or a boolean ("bool") is wanted: a quoted number ("8", "true") or
// a YAML 1.1 boolean (yes, off), which YAML 1.2, as read here, takes as text.
func textHint(n *yaml.Node, want string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || strings.ContainsAny(n.Value, "\n\r") {
		return ""
	}
	v := n.Value
	quoted := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0
	switch want {
	case "int":
		var doc yaml.Node
		if quoted && yaml.Unmarshal([]byte(v), &doc) == nil && len(doc.Content) == 1 && doc.Content[0].ShortTag() == "!!int" {
			return "quoted, it is text: write " + v + " without quotes"
		}
	case "bool":
		if quoted && (v == "true" || v == "false") {
			return "quoted, it is text: write " + v + " without quotes"
		}
		switch strings.ToLower(v) {
		case "yes", "y", "on":
			return "YAML 1.2 reads " + v + " as text: write true"
		case "no", "n", "off":
			return "YAML 1.2 reads " + v + " as text: write false"
		}
	}
	return ""
}

// show prints a value from the file as is when it is a plain token and
// quoted otherwise, so a message stays on one line whatever the input.
func show(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// checkParam validates a scalar parameter value against its spec. The
// caller has already checked that the name is known and allowed here.
func checkParam(name string, spec paramSpec, n *yaml.Node, v Value, isInt bool) (msg, hint string) {
	if n.Kind != yaml.ScalarNode {
		return fmt.Sprintf("%s must be a single value, got %s", name, describe(n)), "put lists under matrix:"
	}
	tag := n.ShortTag()
	if spec.isInt {
		if why := LeadingZero(n.Value); why != "" && plain(n) {
			return fmt.Sprintf("%s %s", name, why), ""
		}
		if !isInt {
			// YAML tags an integer past uint64 a float: it is still an
			// integer, out of range (as parser.int says of one). One the
			// file tags itself (!!float 4) is what it says.
			if (v.IsNum && tag == "!!int") || (plain(n) && n.Style&yaml.TaggedStyle == 0 && decimalRE.MatchString(n.Value)) {
				return fmt.Sprintf("%s is out of range: %s", name, show(n.Value)), ""
			}
			return fmt.Sprintf("%s must be an integer, got %s", name, describe(n)), textHint(n, "int")
		}
		if spec.oneOf != nil {
			for _, ok := range spec.oneOf {
				if v.Int == ok {
					return "", ""
				}
			}
			return fmt.Sprintf("%s must be one of %s, got %d", name, joinInts(spec.oneOf), v.Int), ""
		}
		if v.Int < spec.min {
			if spec.auto {
				return fmt.Sprintf("%s must be >= 0 (0 = auto), got %d", name, v.Int), ""
			}
			return fmt.Sprintf("%s must be >= %d, got %d", name, spec.min, v.Int), ""
		}
		if spec.max > 0 && v.Int > spec.max {
			return fmt.Sprintf("%s must be from %d to %d, got %d", name, spec.min, spec.max, v.Int), ""
		}
		if spec.step > 1 && v.Int%spec.step != 0 {
			return fmt.Sprintf("%s must be a multiple of %d, got %d", name, spec.step, v.Int), ""
		}
		return "", ""
	}
	if tag == "!!null" || tag == "!!bool" || tag == "!!map" || tag == "!!seq" {
		// A word list says which words, not YAML's type.
		if spec.enum != nil {
			return fmt.Sprintf("%s must be one of %s, got %s", name, strings.Join(spec.enum, ", "), describe(n)), ""
		}
		return fmt.Sprintf("%s must be a string, got %s", name, describe(n)), ""
	}
	if v.Raw == "" {
		return fmt.Sprintf("%s must not be empty", name), ""
	}
	// A value is a part of its case's key and is printed on one line of a
	// table, a csv row and a benchfmt line: the store's export and import
	// refuse a control character in it (results.CheckLine, docs/data.md).
	if !utf8.ValidString(v.Raw) {
		return fmt.Sprintf("%s %q is not UTF-8 text", name, v.Raw), ""
	}
	if i := strings.IndexFunc(v.Raw, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(v.Raw[i:])
		return fmt.Sprintf("%s %q holds the control character %U", name, v.Raw, r), "a value is one line of text"
	}
	if spec.enum != nil {
		for _, ok := range spec.enum {
			if v.Raw == ok {
				return "", ""
			}
		}
		if spec.outside != nil {
			if msg, hint := spec.outside(v.Raw); msg != "" {
				return msg, hint
			}
		}
		hint = didYouMean(v.Raw, spec.enum)
		if hint == "" {
			hint = "one of " + strings.Join(spec.enum, ", ")
		}
		return fmt.Sprintf("unknown %s %q", name, v.Raw), hint
	}
	if spec.syntax != nil {
		return spec.syntax(v.Raw)
	}
	return "", ""
}

// timedOps are the ops a kernel case may name: those timed on their own.
// One that is not (its Cost is nil: kv_write, which backends fuse into
// attention) runs on no backend, so run would refuse it after validate.
func timedOps() []string {
	var names []string
	for _, id := range ops.IDs() {
		if o, _ := ops.Lookup(id); o.Cost != nil {
			names = append(names, string(id))
		}
	}
	return names
}

// untimedOp says why op, an op of kernels/ops that is not timed on its
// own, is no kernel case's op; "" for a name that is no op.
func untimedOp(op string) (msg, hint string) {
	o, ok := ops.Lookup(ops.ID(op))
	if !ok || o.Cost != nil {
		return "", ""
	}
	return fmt.Sprintf("op %s is not timed on its own (%s)", op, o.Doc), "a kernel case times one of " + strings.Join(timedOps(), ", ")
}

func joinInts(xs []int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ", ")
}

// Arrival is an arrival value read (docs/suites.md, "Serving load").
type Arrival struct {
	// Stagger is "stagger:N": one new request every N steps. With no Rate
	// either, every request is there at step 0 ("all").
	Stagger int
	// Rate is requests a second arriving on the wall clock: "poisson:R",
	// or "gamma:R:B".
	Rate float64
	// Burstiness is the gamma gaps' shape, vLLM's --burstiness: 1 is a
	// Poisson process, below 1 the requests come in bursts, above 1 more
	// evenly. The mean gap is 1/Rate either way.
	Burstiness float64
}

// ParseArrival reads "all", "stagger:N", "poisson:R" or "gamma:R:B".
func ParseArrival(s string) (Arrival, error) {
	if s == "all" {
		return Arrival{}, nil
	}
	if rest, ok := strings.CutPrefix(s, "stagger:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 {
			return Arrival{}, fmt.Errorf("stagger step must be an integer >= 1")
		}
		return Arrival{Stagger: n}, nil
	}
	if rest, ok := strings.CutPrefix(s, "poisson:"); ok {
		r, err := ParseRate(rest)
		return Arrival{Rate: r, Burstiness: 1}, err
	}
	if rest, ok := strings.CutPrefix(s, "gamma:"); ok {
		rs, bs, ok := strings.Cut(rest, ":")
		if !ok {
			return Arrival{}, fmt.Errorf("want gamma:R:B, a rate and a burstiness")
		}
		r, err := ParseRate(rs)
		if err != nil {
			return Arrival{}, err
		}
		b, err := ParseBurstiness(bs)
		return Arrival{Rate: r, Burstiness: b}, err
	}
	return Arrival{}, errNotArrival
}

var errNotArrival = errors.New("not an arrival")

// String spells the arrival as case keys do: numbers one way, and a gamma
// arrival of burstiness 1 as the Poisson one it is, so the two are one case.
func (a Arrival) String() string {
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch {
	case a.Rate > 0 && a.Burstiness != 1:
		return "gamma:" + g(a.Rate) + ":" + g(a.Burstiness)
	case a.Rate > 0:
		return "poisson:" + g(a.Rate)
	case a.Stagger > 0:
		return "stagger:" + strconv.Itoa(a.Stagger)
	}
	return "all"
}

// checkArrival accepts what ParseArrival reads.
func checkArrival(s string) (string, string) {
	const hint = `want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000)`
	if _, err := ParseArrival(s); err == errNotArrival {
		return fmt.Sprintf("bad arrival %q", s), hint
	} else if err != nil {
		return fmt.Sprintf("bad arrival %q: %v", s, err), hint
	}
	return "", ""
}

// The request rates an arrival takes: below one request in 1000 s a case
// of a few requests would run for hours, and above a million a second
// every request arrives within the first step anyway. Burstiness past
// those bounds is every request at once, or a clock.
const (
	minRate       = 1e-3
	maxRate       = 1e6
	minBurstiness = 1e-3
	maxBurstiness = 1e3
)

// ParseRate reads an arrival's rate in requests a second.
func ParseRate(s string) (float64, error) {
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(r) {
		return 0, fmt.Errorf("rate %q is not a number", s)
	}
	if r < minRate || r > maxRate {
		return 0, fmt.Errorf("rate %g requests a second is outside %g to %g", r, minRate, float64(maxRate))
	}
	return r, nil
}

// ParseBurstiness reads a gamma arrival's burstiness.
func ParseBurstiness(s string) (float64, error) {
	b, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(b) {
		return 0, fmt.Errorf("burstiness %q is not a number", s)
	}
	if b < minBurstiness || b > maxBurstiness {
		return 0, fmt.Errorf("burstiness %g is outside %g to %g", b, minBurstiness, float64(maxBurstiness))
	}
	return b, nil
}

// arrivalKey spells an arrival one way (poisson:4.0 and poisson:4 are one
// case, and gamma:4:1 with them); "" keeps the value as written.
func arrivalKey(s string) string {
	if a, err := ParseArrival(s); err == nil {
		return a.String()
	}
	return ""
}

// parseRangeRatio reads a range_ratio: a number from 0 up to, not
// including, 1 (at 1 a length could be 0).
func parseRangeRatio(s string) (float64, error) {
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(r) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if r < 0 || r >= 1 {
		return 0, fmt.Errorf("%g is outside [0, 1)", r)
	}
	return r, nil
}

func checkRangeRatio(s string) (string, string) {
	if _, err := parseRangeRatio(s); err != nil {
		return fmt.Sprintf("bad range_ratio: %v", err), "each request's lengths are drawn from prompt_len and gen_len times 1-r to 1+r"
	}
	return "", ""
}

func rangeRatioKey(s string) string {
	if r, err := parseRangeRatio(s); err == nil {
		return strconv.FormatFloat(r, 'g', -1, 64)
	}
	return ""
}

// sloTargets are the latencies an slo may bound, as vLLM's --goodput names
// them: a request meets the objective when each it names is at most its
// bound.
var sloTargets = []string{"ttft", "tpot", "e2el"}

// checkSLO accepts "ttft:MS[,tpot:MS][,e2el:MS]" in any order, each at
// most once, each bound a positive number of milliseconds.
func checkSLO(s string) (string, string) {
	const hint = `want "ttft:MS,tpot:MS,e2el:MS" (any of the three, milliseconds > 0)`
	if _, err := ParseSLO(s); err != nil {
		return fmt.Sprintf("bad slo %q: %v", s, err), hint
	}
	return "", ""
}

// ParseSLO reads an slo value into its bounds in milliseconds, keyed by
// target (ttft, tpot, e2el).
func ParseSLO(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, part := range pairs(s) {
		key, val, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%q is not target:milliseconds", part)
		}
		if !slices.Contains(sloTargets, key) {
			return nil, fmt.Errorf("unknown target %q (ttft, tpot, e2el)", key)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s given twice", key)
		}
		ms, err := strconv.ParseFloat(val, 64)
		if err != nil || !(ms > 0) || math.IsInf(ms, 0) {
			return nil, fmt.Errorf("%s bound %q must be a number of milliseconds > 0", key, val)
		}
		out[key] = ms
	}
	return out, nil
}

// pairs splits a comma list of key:value items (a sampling, an slo), each
// read without the spaces around it or around its colon, as a range
// string's items are (internal/listarg): "ttft: 500, tpot:50" is
// "ttft:500,tpot:50".
func pairs(s string) []string {
	items := strings.Split(s, ",")
	for i, it := range items {
		items[i] = strings.TrimSpace(it)
		if k, v, ok := strings.Cut(items[i], ":"); ok {
			items[i] = strings.TrimSpace(k) + ":" + strings.TrimSpace(v)
		}
	}
	return items
}

// sloKey spells an slo one way: its targets in ttft, tpot, e2el order,
// each bound as the shortest decimal.
func sloKey(s string) string {
	m, err := ParseSLO(s)
	if err != nil {
		return ""
	}
	var parts []string
	for _, t := range sloTargets {
		if ms, ok := m[t]; ok {
			parts = append(parts, t+":"+strconv.FormatFloat(ms, 'g', -1, 64))
		}
	}
	return strings.Join(parts, ",")
}

// Canonical checks value as CheckValue does and returns it spelt as case
// keys spell it (poisson:4.0 as poisson:4), for keys made outside a suite
// (peer imports) to match a suite's.
func Canonical(name, value string) (string, error) {
	if err := CheckValue(name, value); err != nil {
		return "", err
	}
	n := overrideNode(value)
	v, _ := makeValue(n, Pos{})
	return canon(name, v), nil
}

// KeyText is value spelt as case keys spell parameter name's values
// (integers in decimal, an arrival or slo one way, free text %XX-escaped),
// unchecked: for a value recorded with a case, which names it beside its
// key (benchfmt). A parameter no suite knows keeps its text, escaped.
func KeyText(name, value string) string {
	// A scalar whatever the text: a recorded value is never a list or a map.
	v, _ := makeValue(&yaml.Node{Kind: yaml.ScalarNode, Value: value}, Pos{})
	return canon(name, v)
}

// CheckValue checks one value of a parameter given elsewhere than in a
// suite (a flag) by the rule the suite's value obeys; unlike CheckOverride
// it takes no list and its message names no --set.
func CheckValue(name, value string) error {
	spec, ok := params[name]
	if !ok {
		return fmt.Errorf("unknown parameter %q", name)
	}
	n := overrideNode(value) // read as YAML: 8 is a number, as in a file
	if msg := tagError(n); msg != "" {
		return errors.New(msg)
	}
	v, isInt := makeValue(n, Pos{})
	msg, hint := checkParam(name, spec, n, v, isInt)
	switch {
	case msg == "":
		return nil
	case hint != "":
		return fmt.Errorf("%s (%s)", msg, hint)
	}
	return errors.New(msg)
}

// checkWitnessGPU accepts an Apple GPU of applegpu's table: a chip ("M2
// Pro", "Apple M4 Max"), or one bin of it ("M4 Max 32-core").
func checkWitnessGPU(s string) (string, string) {
	if _, ok := applegpu.Lookup(s); ok {
		return "", ""
	}
	chips := applegpu.Chips()
	chip, _ := applegpu.ChipOf(s)
	if bins := applegpu.Bins(chip); chip != "" && len(bins) > 0 {
		var cores []string
		for _, b := range bins {
			cores = append(cores, fmt.Sprintf("%q", fmt.Sprintf("%s %d-core", b.Chip, b.Cores)))
		}
		return fmt.Sprintf("no bin of the %s in the GPU table matches %q", bins[0].Chip, s), "one of " + strings.Join(cores, ", ") + ", or the chip alone for its largest bin"
	}
	hint := didYouMean(s, chips)
	if hint == "" {
		hint = "one of " + strings.Join(chips, ", ") + `; a core count picks a bin ("M4 Max 32-core")`
	}
	return fmt.Sprintf("unknown Apple GPU %q", s), hint
}

// checkSampling accepts what ParseSampling reads.
func checkSampling(s string) (string, string) {
	if _, err := ParseSampling(s); err != nil {
		return "bad " + err.Error(), "want " + SamplingSyntax
	}
	return "", ""
}

// canon is a parameter value as written into keys and names: integers in
// decimal whatever their spelling (0x10, 1_000), everything else as written.
func canon(name string, v Value) string {
	spec, ok := params[name]
	if ok && spec.isInt && v.IsNum && v.Float == float64(v.Int) {
		return strconv.FormatInt(v.Int, 10)
	}
	if ok && spec.key != nil {
		if k := spec.key(v.Raw); k != "" {
			return escapeKey(k)
		}
	}
	return escapeKey(v.Raw)
}

// escapeKey keeps a free-text value (variant names) from adding separators,
// spaces or control characters to a key: they become %XX, as in URLs.
func escapeKey(s string) string {
	plain := func(r rune) bool {
		return r != '%' && r != '/' && r != '=' && r != utf8.RuneError && unicode.IsPrint(r) && !unicode.IsSpace(r)
	}
	if strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if plain(r) {
			b.WriteRune(r)
			continue
		}
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], r)
		for _, c := range buf[:n] {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// plain reports whether scalar n was written unquoted: only then is it a
// number.
func plain(n *yaml.Node) bool {
	return n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
}
