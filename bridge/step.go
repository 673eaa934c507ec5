package bridge

import "github.com/mtlbench/mtlbench/kernels"

// A step is an ordered list of ops over tensors (the buffers they name),
// built by the engine from the model and handed to the backend whole, so a
// backend can look ahead and fuse. docs/architecture.md describes the model.

// At says where an op sits in the model: profile mode attributes its time to
// (Layer, Component, Name).
type At struct {
	Layer     int // -1 outside the layers (embedding, final norm, LM head)
	Component string
	Name      string
}

// Op is one op of a step. The concrete types below are the whole set; a
// backend runs each through the method of the same name.
type Op interface {
	where() *At
}

func (a *At) where() *At { return a }

// Where returns the op's position in the model.
func Where(op Op) At { return *op.where() }

// EmbeddingOp gathers table rows for the step's tokens.
type EmbeddingOp struct {
	At
	Out, Table Tensor
}

// GatherRowsOp copies the step's LogitRows of X into Out.
type GatherRowsOp struct {
	At
	Out, X Tensor
}

// RMSNormOp is Out = RMSNorm(X)·W.
type RMSNormOp struct {
	At
	Out, X, W Tensor
	Eps       float32
}

// AddRMSNormOp is Residual += X, then Out = RMSNorm(Residual)·W.
type AddRMSNormOp struct {
	At
	Out, Residual, X, W Tensor
	Eps                 float32
}

// MatMulOp is Out = X·Wᵀ (+ Bias, which may be nil).
type MatMulOp struct {
	At
	Out, X, W, Bias Tensor
}

// RoPEOp rotates Q and K in place (neox style), after QK-norm when QNorm and
// KNorm are set.
type RoPEOp struct {
	At
	Q, K, QNorm, KNorm      Tensor
	Heads, KVHeads, HeadDim int
	Rotary                  kernels.Rotary
	Eps                     float32
}

// AttentionOp writes K and V into the cache, then runs causal paged
// attention of Q over each sequence's cached context.
type AttentionOp struct {
	At
	Out, Q, K, V            Tensor
	Cache                   KVCache
	Heads, KVHeads, HeadDim int
	Scale                   float32
	// Window is the layer's sliding window (0: none): the query at
	// position p attends to the keys at p-Window < j <= p (kernels.
	// PagedAttention). The cache keeps every position either way.
	Window int
	// Operand is the model's weight dtype: a backend whose prefill
	// attention runs on matrix units may round Q, K, V and the softmax
	// weights to a half type when it is one; F32 keeps attention in f32.
	Operand DType
}

// SiLUMulOp is Out = silu(Gate)·Up.
type SiLUMulOp struct {
	At
	Out, Gate, Up Tensor
}

// AddOp is Out = A + B.
type AddOp struct {
	At
	Out, A, B Tensor
}

// MoEOp runs a sparse expert block: route, dispatch, combine.
type MoEOp struct {
	At
	Out, X Tensor
	W      *MoEWeights
	Params MoEParams
}

// LayerNormOp is Out = LayerNorm(X)·W + B (GPT-2).
type LayerNormOp struct {
	At
	Out, X, W, B Tensor
	Eps          float32
}

// AddLayerNormOp is Residual += X, then Out = LayerNorm(Residual)·W + B.
type AddLayerNormOp struct {
	At
	Out, Residual, X, W, B Tensor
	Eps                    float32
}

// GELUOp is Out = gelu(X) with the tanh approximation (Out may be X).
type GELUOp struct {
	At
	Out, X Tensor
}

// PositionEmbeddingOp adds to each row of X the row of Table at its
// token's position: learned absolute position embeddings.
type PositionEmbeddingOp struct {
	At
	X, Table Tensor
}

// QMatMulOp is MatMulOp with a packed W (QuantBackend).
type QMatMulOp struct {
	At
	Out, X, W, Bias Tensor
}

// QEmbeddingOp is EmbeddingOp with a packed Table.
type QEmbeddingOp struct {
	At
	Out, Table Tensor
}

// QMoEOp is MoEOp with packed experts.
type QMoEOp struct {
	At
	Out, X Tensor
	W      *MoEWeights
	Params MoEParams
}

// NoToken is ArgmaxOp's index for a row with no number above -inf. A step
// queued from those indices on the device (AsyncStepper.BeginStepFrom)
// embeds it as a token out of range, which every backend's embedding
// refuses without a read; its result is not used.
const NoToken = -1

// ArgmaxOp writes each row's largest logit's index into Out (I32), as
// kernels.Argmax picks it: -1 (NoToken) for a row with no number above
// -inf, every logit NaN or -inf, which is how a step sampled on the device
// tells the engine its logits were not finite without their being read.
type ArgmaxOp struct {
	At
	Out, Logits Tensor
}

// Pattern is one entry of a backend's fusion table: Try looks at the step's
// ops from the current one on and, when the first ones match, records the
// fused work and returns how many ops it took (at least one, at most span;
// the ops past span are there to look further ahead, as ReadLater does).
// next, when not nil, stands in for the op after those: the part of it the
// fused kernel left to do. Try returns 0 and records nothing when the ops
// do not match.
type Pattern struct {
	Name string
	Doc  string
	Try  func(ops []Op, span int) (n int, next Op)
	// Always marks how the backend runs these ops in any case (one launch
	// for matmuls of one input), kept when fusion is off.
	Always bool
}

// Fuser is implemented by backends with a fusion table, tried in order at
// each op; the first match wins.
type Fuser interface {
	Fusions() []Pattern
}

// KeepPatterns is the patterns of table that names names, in the table's
// order: what a backend's SetFusions keeps (tests measure one pattern at a
// time). It is never nil, so a backend whose nil table means "not built
// yet" keeps no pattern, not the whole table, when no name matches.
func KeepPatterns(table []Pattern, names []string) []Pattern {
	keep := []Pattern{}
	for _, p := range table {
		for _, n := range names {
			if p.Name == n {
				keep = append(keep, p)
			}
		}
	}
	return keep
}

// Runner hands steps' ops to a backend; its scratch copy of the list, where
// a fusion leaves a stand-in op, is kept across steps.
type Runner struct {
	ops []Op
}

// Run hands a step's ops to be, between BeginStep and EndStep. The
// backend's fusion table is tried at each op first (without fuse, only its
// Always entries). In profile mode a
// fused run never spans ops of different positions, so each keeps its time.
func (r *Runner) Run(be Backend, ops []Op, fuse, profile bool) {
	var table []Pattern
	if f, ok := be.(Fuser); ok {
		table = f.Fusions()
	}
	own := false // ops is r.ops, which stand-ins may be written into
	var last At
	for i := 0; i < len(ops); {
		op := ops[i]
		if at := op.where(); i == 0 || *at != last {
			be.Mark(at.Layer, at.Component, at.Name)
			last = *at
		}
		n := 0
		var stand Op
		if len(table) > 0 {
			rest := ops[i:]
			span := len(rest)
			if profile {
				span = samePosition(rest)
			}
			for _, p := range table {
				if !fuse && !p.Always {
					continue
				}
				if n, stand = p.Try(rest, span); n > 0 {
					break
				}
			}
		}
		if n == 0 {
			Exec(be, op)
			n = 1
		}
		if stand != nil && i+n < len(ops) {
			if !own {
				r.ops = append(r.ops[:0], ops...)
				ops, own = r.ops, true
			}
			ops[i+n] = stand
		}
		i += n
	}
	if own {
		clear(r.ops) // drop references to the step's tensors
	}
}

// samePosition is how many ops from ops[0] on share its position.
func samePosition(ops []Op) int {
	at := ops[0].where()
	n := 1
	for n < len(ops) && *ops[n].where() == *at {
		n++
	}
	return n
}

// ReadLater reports whether an op of ops reads t before one overwrites it:
// whether a fused kernel that leaves t unwritten would leave it stale.
func ReadLater(ops []Op, t Tensor) bool {
	for _, op := range ops {
		if Reads(op, t) {
			return true
		}
		if Writes(op, t) {
			return false
		}
	}
	return false
}

// Reads reports whether op reads tensor t.
func Reads(op Op, t Tensor) bool {
	if t == nil {
		return false
	}
	switch o := op.(type) {
	case *EmbeddingOp:
		return o.Table == t
	case *GatherRowsOp:
		return o.X == t
	case *RMSNormOp:
		return o.X == t || o.W == t
	case *AddRMSNormOp:
		return o.Residual == t || o.X == t || o.W == t
	case *MatMulOp:
		return o.X == t || o.W == t || o.Bias == t
	case *RoPEOp:
		return o.Q == t || o.K == t || o.QNorm == t || o.KNorm == t
	case *AttentionOp:
		return o.Q == t || o.K == t || o.V == t || o.Cache.K == t || o.Cache.V == t
	case *SiLUMulOp:
		return o.Gate == t || o.Up == t
	case *AddOp:
		return o.A == t || o.B == t
	case *MoEOp:
		return o.X == t
	case *ArgmaxOp:
		return o.Logits == t
	case *LayerNormOp:
		return o.X == t || o.W == t || o.B == t
	case *AddLayerNormOp:
		return o.Residual == t || o.X == t || o.W == t || o.B == t
	case *GELUOp:
		return o.X == t
	case *PositionEmbeddingOp:
		return o.X == t || o.Table == t
	case *QMatMulOp:
		return o.X == t || o.W == t || o.Bias == t
	case *QEmbeddingOp:
		return o.Table == t
	case *QMoEOp:
		return o.X == t
	}
	return true // an op this function does not know: assume it reads
}

// Writes reports whether op writes tensor t.
func Writes(op Op, t Tensor) bool {
	if t == nil {
		return false
	}
	switch o := op.(type) {
	case *EmbeddingOp:
		return o.Out == t
	case *GatherRowsOp:
		return o.Out == t
	case *RMSNormOp:
		return o.Out == t
	case *AddRMSNormOp:
		return o.Out == t || o.Residual == t
	case *MatMulOp:
		return o.Out == t
	case *RoPEOp:
		return o.Q == t || o.K == t
	case *AttentionOp:
		return o.Out == t || o.Cache.K == t || o.Cache.V == t
	case *SiLUMulOp:
		return o.Out == t
	case *AddOp:
		return o.Out == t
	case *MoEOp:
		return o.Out == t
	case *ArgmaxOp:
		return o.Out == t
	case *LayerNormOp:
		return o.Out == t
	case *AddLayerNormOp:
		return o.Out == t || o.Residual == t
	case *GELUOp:
		return o.Out == t
	case *PositionEmbeddingOp:
		return o.X == t
	case *QMatMulOp:
		return o.Out == t
	case *QEmbeddingOp:
		return o.Out == t
	case *QMoEOp:
		return o.Out == t
	}
	return false
}

// Exec runs one op, unfused, through the backend method of its name.
func Exec(be Backend, op Op) {
	switch o := op.(type) {
	case *EmbeddingOp:
		be.Embedding(o.Out, o.Table)
	case *GatherRowsOp:
		be.GatherRows(o.Out, o.X)
	case *RMSNormOp:
		be.RMSNorm(o.Out, o.X, o.W, o.Eps)
	case *AddRMSNormOp:
		be.AddRMSNorm(o.Out, o.Residual, o.X, o.W, o.Eps)
	case *MatMulOp:
		be.MatMul(o.Out, o.X, o.W, o.Bias)
	case *RoPEOp:
		be.RoPE(o.Q, o.K, o.QNorm, o.KNorm, o.Heads, o.KVHeads, o.HeadDim, o.Rotary, o.Eps)
	case *AttentionOp:
		be.Attention(o.Out, o.Q, o.K, o.V, o.Cache, o.Heads, o.KVHeads, o.HeadDim, o.Scale, o.Window)
	case *SiLUMulOp:
		be.SiLUMul(o.Out, o.Gate, o.Up)
	case *AddOp:
		be.Add(o.Out, o.A, o.B)
	case *MoEOp:
		be.MoE(o.Out, o.X, o.W, o.Params)
	case *ArgmaxOp:
		be.Argmax(o.Out, o.Logits)
	case *LayerNormOp:
		be.LayerNorm(o.Out, o.X, o.W, o.B, o.Eps)
	case *AddLayerNormOp:
		be.AddLayerNorm(o.Out, o.Residual, o.X, o.W, o.B, o.Eps)
	case *GELUOp:
		be.GELU(o.Out, o.X)
	case *PositionEmbeddingOp:
		be.PositionEmbedding(o.X, o.Table)
	case *QMatMulOp:
		be.(QuantBackend).QMatMul(o.Out, o.X, o.W, o.Bias)
	case *QEmbeddingOp:
		be.(QuantBackend).QEmbedding(o.Out, o.Table)
	case *QMoEOp:
		be.(QuantBackend).QMoE(o.Out, o.X, o.W, o.Params)
	default:
		panic("bridge: unknown op type")
	}
}
