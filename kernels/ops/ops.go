// Package ops declares every op of the engine once: its name, its typed
// parameters, its reference implementation in package kernels, its cost
// model and, per backend, its tuning space. Suites, kbench, the tuner, the
// roofline and the backends' tuning code all read these declarations
// instead of repeating names as strings.
//
// Adding an op: an ID constant and its entry in decls (decl.go); a tuning
// space, if a backend tunes it, in its Tuning map (tuning.go).
package ops

import (
	"fmt"
	"slices"
	"sort"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// ID names an op. Its string form is the name suites and stored results
// use, so it must never change for an existing op.
type ID string

// The ops.
const (
	PagedAttentionDecode  ID = "paged_attention_decode"
	PagedAttentionPrefill ID = "paged_attention_prefill"
	KVWrite               ID = "kv_write"
	RMSNorm               ID = "rms_norm"
	AddRMSNorm            ID = "add_rms_norm"
	RoPE                  ID = "rope"
	SiLUMul               ID = "silu_mul"
	MatMul                ID = "matmul"
	MoE                   ID = "moe"
	Argmax                ID = "argmax"
	Embedding             ID = "embedding"
	LayerNorm             ID = "layer_norm"
	AddLayerNorm          ID = "add_layer_norm"
	GELU                  ID = "gelu_tanh"
	PositionEmbedding     ID = "position_embedding"
	// The ops on packed weights (kernels/quant): the weight dtype is a
	// packed format (QuantDTypes).
	QMatMul    ID = "qmatmul"
	QMoE       ID = "qmoe"
	QEmbedding ID = "qembedding"
)

// Backend names a backend that declares tuning spaces.
type Backend string

// The backends with tuning spaces.
const (
	CPU   Backend = "cpu"
	CUDA  Backend = "cuda"
	Metal Backend = "metal"
)

// DType is a weight or activation element type, as suites write it.
type DType string

// The element types an op's tensors may hold.
const (
	F32  DType = "f32"
	F16  DType = "f16"
	BF16 DType = "bf16"
)

// The packed weight formats (kernels/quant): MLX affine at 2, 3, 4, 5, 6
// and 8 bits (group 64, bf16 scales and biases) and GGUF's block types.
const (
	Q4   DType = "q4"
	Q8   DType = "q8"
	Q2   DType = "q2"
	Q3   DType = "q3"
	Q5   DType = "q5"
	Q6   DType = "q6"
	Q8_0 DType = "q8_0"
	Q4_0 DType = "q4_0"
	Q4_K DType = "q4_k"
	Q6_K DType = "q6_k"
	Q5_K DType = "q5_k"
	Q3_K DType = "q3_k"
	// IQ4_XS and IQ4_NL are GGUF's non-linear 4-bit formats (kernels on
	// Metal; transcoded on CUDA and the CPU).
	IQ4_XS DType = "iq4_xs"
	IQ4_NL DType = "iq4_nl"
	// MXFP4 is GGUF's E2M1 codes with an E8M0 exponent per 32 (mlx's mxfp4
	// too: kernels on Metal; transcoded on CUDA and the CPU).
	MXFP4 DType = "mxfp4"
	// NVFP4 and MXFP8 are mlx's E2M1 codes with an E4M3 scale per 16, and
	// E4M3 values with an E8M0 exponent per 32 (kernels on every backend).
	NVFP4 DType = "nvfp4"
	MXFP8 DType = "mxfp8"
	Q2_K  DType = "q2_k"

	IQ2_XXS DType = "iq2_xxs"
	IQ2_XS  DType = "iq2_xs"
	IQ2_S   DType = "iq2_s"
	IQ3_XXS DType = "iq3_xxs"
	IQ3_S   DType = "iq3_s"
	IQ1_S   DType = "iq1_s"
	IQ1_M   DType = "iq1_m"
)

// affineDTypes are the MLX affine dtypes' bit widths.
var affineDTypes = map[DType]int{Q2: 2, Q3: 3, Q4: 4, Q5: 5, Q6: 6, Q8: 8}

// blockDTypes are the dtypes of the formats with no bit width or group to
// give (GGUF's blocks, and mlx's nvfp4 and mxfp8 rows), by their packing.
var blockDTypes = map[DType]quant.Type{Q8_0: quant.Q8_0, Q4_0: quant.Q4_0, Q2_K: quant.Q2_K, Q3_K: quant.Q3_K,
	Q4_K: quant.Q4_K, Q5_K: quant.Q5_K, Q6_K: quant.Q6_K, IQ4_XS: quant.IQ4_XS, IQ4_NL: quant.IQ4_NL, MXFP4: quant.MXFP4,
	NVFP4: quant.NVFP4, MXFP8: quant.MXFP8,
	IQ2_XXS: quant.IQ2_XXS, IQ2_XS: quant.IQ2_XS, IQ2_S: quant.IQ2_S, IQ3_XXS: quant.IQ3_XXS, IQ3_S: quant.IQ3_S,
	IQ1_S: quant.IQ1_S, IQ1_M: quant.IQ1_M}

// DTypes are the dtypes a case may give, in the order messages list them.
var DTypes = []DType{F32, F16, BF16}

// QuantDTypes are the packed formats a case of a packed-weight op may give.
var QuantDTypes = []DType{Q4, Q8, Q2, Q3, Q5, Q6, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS, IQ4_NL, MXFP4, NVFP4, MXFP8, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M}

// Size is the bytes of one element (a packed format: rounded up; use
// Bytes for its exact size).
func (d DType) Size() int64 {
	if _, ok := d.Quant(); ok {
		return 1
	}
	if d == F16 || d == BF16 {
		return 2
	}
	return 4
}

// Quant is a packed format's packing; ok false for a float dtype.
func (d DType) Quant() (quant.Spec, bool) {
	if b, ok := affineDTypes[d]; ok {
		return quant.Spec{Type: quant.Affine, Bits: b, Group: 64, Scale: quant.BF16}, true
	}
	if t, ok := blockDTypes[d]; ok {
		return quant.Spec{Type: t}, true
	}
	return quant.Spec{}, false
}

// PackedDType is the packed dtype whose kernels run s (affine of any group
// and scale dtype as the dtype of its bit width, q4 for 4 bits, GGUF's
// types as themselves); ok false for a format no GPU kernel runs.
func PackedDType(s quant.Spec) (DType, bool) {
	name := quant.KernelName(s)
	for _, d := range QuantDTypes {
		if q, _ := d.Quant(); name != "" && quant.KernelName(q) == name {
			return d, true
		}
	}
	return "", false
}

// Bytes is what reading rows of k values, n values in all, moves in d:
// packed values with their scales and biases for a packed format, not the
// padding a row is stored with (quant.Spec.ReadBytes).
func (d DType) Bytes(n, k int64) int64 {
	if q, ok := d.Quant(); ok {
		return q.ReadBytes(n, int(k))
	}
	return n * d.Size()
}

// MoEStrategy is how an MoE block dispatches tokens to experts.
type MoEStrategy string

// The MoE dispatch strategies (bridge.MoEStrategy holds the same names).
const (
	MoELoop    MoEStrategy = "loop"
	MoEChunked MoEStrategy = "chunked"
	MoEGrouped MoEStrategy = "grouped"
)

// MoEStrategies are the strategies in the order messages list them.
var MoEStrategies = []MoEStrategy{MoELoop, MoEChunked, MoEGrouped}

// Cost is the compulsory traffic and arithmetic of one call: every input
// read once, every output written once (for MoE only the experts the
// tokens route to); a multiply and an add count as two FLOPs.
type Cost struct {
	Read, Written, FLOPs int64
}

// Bytes is the traffic both ways.
func (c Cost) Bytes() int64 { return c.Read + c.Written }

// Types are the element types a cost depends on: activations (the
// backend's) and weights (the case's dtype).
type Types struct{ Act, Weight DType }

// Use is an op's use of a parameter: its default for this op, and another
// name the op also accepts for it (width may be spelt hidden).
type Use struct {
	Param   Param
	Default int    // int parameters
	Value   string // enum parameters' default
	Alias   Param
}

// Op is the declaration of one op.
type Op struct {
	ID  ID
	Doc string
	// Params are the parameters a kernel case of the op reads, with the
	// op's defaults.
	Params []Use
	// Reference is the pure-Go oracle in package kernels that a backend's
	// result is checked against (a func value; nil when the op has none of
	// its own, e.g. argmax checks by value).
	Reference any
	// Cost is the op's traffic and arithmetic at a resolved shape (Resolve);
	// nil when the op is not timed on its own.
	Cost func(s Shape, t Types) Cost
	// Tuning is the op's tuning space per backend, nil where the backend
	// tunes nothing.
	Tuning map[Backend]*Space
}

// Use returns the op's use of parameter p.
func (o *Op) Use(p Param) (Use, bool) {
	for _, u := range o.Params {
		if u.Param == p {
			return u, true
		}
	}
	return Use{}, false
}

// OwnName is the name the op reads parameter p under: an alias (matmul's
// tokens) is its own parameter by another name (m); any other p is itself.
// Suites, --set and tune's --shape all read names through it.
func (o *Op) OwnName(p Param) Param {
	for _, u := range o.Params {
		if u.Alias != "" && u.Alias == p {
			return u.Param
		}
	}
	return p
}

// Resolve is the op's integer parameters of a: each given value (or its
// alias), else the op's default.
func (o *Op) Resolve(a Args) Shape {
	s := Shape{}
	for _, u := range o.Params {
		if Specs[u.Param].Kind != IntKind {
			continue
		}
		s[u.Param] = a.IntOr(u.Param, u.Alias, u.Default)
	}
	return s
}

// Estimate is the cost of a call with a's parameters on activations act.
func (o *Op) Estimate(a Args, act DType) Cost {
	if o.Cost == nil {
		return Cost{}
	}
	return o.Cost(o.Resolve(a), Types{Act: act, Weight: o.WeightDType(a)})
}

// WeightDType is a's dtype, or the op's default.
func (o *Op) WeightDType(a Args) DType {
	if a.DType != "" {
		return a.DType
	}
	if u, ok := o.Use(DTypeParam); ok {
		return DType(u.Value)
	}
	return BF16
}

// Strategy is a's MoE strategy, or the op's default.
func (o *Op) Strategy(a Args) MoEStrategy {
	if a.MoEStrategy != "" {
		return a.MoEStrategy
	}
	if u, ok := o.Use(MoEStrategyParam); ok {
		return MoEStrategy(u.Value)
	}
	return MoEGrouped
}

// All are the ops in declaration order.
func All() []*Op { return decls }

// IDs are the op names in declaration order, for messages and enums.
func IDs() []ID {
	out := make([]ID, len(decls))
	for i, o := range decls {
		out[i] = o.ID
	}
	return out
}

// Lookup returns the op called id.
func Lookup(id ID) (*Op, bool) {
	i := slices.IndexFunc(decls, func(o *Op) bool { return o.ID == id })
	if i < 0 {
		return nil, false
	}
	return decls[i], true
}

// Spaces are the tuning spaces backend declares, in op declaration order.
func Spaces(b Backend) []*Space {
	var out []*Space
	for _, o := range decls {
		if s := o.Tuning[b]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// Args are a kernel case's typed parameters: the op, its integer
// parameters as given (absent ones take the op's defaults) and its enums.
type Args struct {
	Op          ID
	Ints        Shape
	DType       DType       // weights; "" = the op's default
	MoEStrategy MoEStrategy // "" = the op's default
	Variant     string      // a label only
}

// Int is parameter p as given, ok false when absent.
func (a Args) Int(p Param) (int, bool) {
	v, ok := a.Ints[p]
	return v, ok
}

// IntOr is parameter p, or its alias, or def.
func (a Args) IntOr(p, alias Param, def int) int {
	if v, ok := a.Ints[p]; ok {
		return v
	}
	if v, ok := a.Ints[alias]; ok && alias != "" {
		return v
	}
	return def
}

// Names is every parameter name a holds, sorted, for labels.
func (a Args) Names() []Param {
	var out []Param
	for p := range a.Ints {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func init() {
	for _, o := range decls {
		for b, s := range o.Tuning {
			s.Backend, s.Op = b, o.ID
		}
		for _, u := range o.Params {
			if _, ok := Specs[u.Param]; !ok {
				panic(fmt.Sprintf("ops: %s uses undeclared parameter %q", o.ID, u.Param))
			}
		}
	}
}
