package kbench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// maxDim bounds any one size so products of a few stay far from overflow;
// the memory check catches what is merely too big.
const maxDim = 1 << 30

// params reads a case's typed parameters with the op's declared defaults,
// collecting every problem so the user fixes a case in one go. The suite
// parser applies the same rules (ops.Specs), but Args may be built by hand
// (the tuner, tests), so Prepare checks again.
type params struct {
	op    *ops.Op
	a     ops.Args
	shape ops.Shape // every integer read, for the cost model
	errs  []error
}

func (p *params) fail(name ops.Param, value, format string, args ...any) {
	p.errs = append(p.errs, &ParamError{Param: string(name), Value: value, Msg: fmt.Sprintf(format, args...)})
}

func (p *params) err() error { return errors.Join(p.errs...) }

// int returns the positive integer parameter name (or its declared alias),
// or the op's default when neither is set.
func (p *params) int(name ops.Param) int {
	u, _ := p.op.Use(name)
	v := u.Default
	given := name
	x, ok := p.a.Int(name)
	y, aliased := p.a.Int(u.Alias)
	aliased = aliased && u.Alias != ""
	switch {
	case ok && aliased:
		// Which of the two was meant cannot be told (suites file an alias
		// under the op's own name; Args built by hand may hold both).
		p.fail(u.Alias, strconv.Itoa(y), "is %s by another name, given too (%s=%d): give one", name, name, x)
		v = x
	case ok:
		v = x
	case aliased:
		v, given = y, u.Alias
	default:
		given = ""
	}
	if given != "" {
		switch {
		case v < 1:
			p.fail(given, strconv.Itoa(v), "must be positive")
			v = u.Default
		case v > maxDim:
			p.fail(given, strconv.Itoa(v), "must be at most %d", maxDim)
			v = u.Default
		}
	}
	spec := ops.Specs[name]
	switch {
	case spec.OneOf != nil && !slices.Contains(spec.OneOf, v):
		p.fail(name, strconv.Itoa(v), "supported %s are %s", strings.ReplaceAll(string(name), "_", " ")+"s", joinInts(spec.OneOf))
		v = u.Default
	case spec.Max > 0 && v > spec.Max:
		p.fail(name, strconv.Itoa(v), "must be at most %d", spec.Max)
		v = u.Default
	case spec.Step > 1 && v%spec.Step != 0:
		p.fail(name, strconv.Itoa(v), "must be a multiple of %d", spec.Step)
		v = u.Default
	}
	if p.shape == nil {
		p.shape = ops.Shape{}
	}
	p.shape[name] = v
	return v
}

// count is a non-negative integer the op takes as a label (0 = auto).
func (p *params) count(name ops.Param) int {
	v, _ := p.a.Int(name)
	if v < 0 {
		p.fail(name, strconv.Itoa(v), "must be >= 0")
		return 0
	}
	return v
}

// flag is a 0-or-1 parameter (bias), 0 when absent; the cost model reads
// it as a count.
func (p *params) flag(name ops.Param) bool {
	v, _ := p.a.Int(name)
	if v != 0 && v != 1 {
		p.fail(name, strconv.Itoa(v), "must be 0 or 1")
		v = 0
	}
	if p.shape == nil {
		p.shape = ops.Shape{}
	}
	p.shape[name] = v
	return v == 1
}

// heads reads and checks the attention head layout shared by attention and
// RoPE: GQA needs whole groups of query heads per KV head.
func (p *params) heads() (h, kvh, d int) {
	h, kvh = p.int(ops.NumHeads), p.int(ops.NumKVHeads)
	d = p.int(ops.HeadSize)
	if h%kvh != 0 {
		p.fail(ops.NumHeads, strconv.Itoa(h), "must be a multiple of num_kv_heads=%d", kvh)
	}
	return h, kvh, d
}

// dtype is the weight dtype of matmul, MoE and embedding cases.
func (p *params) dtype() bridge.DType {
	s := p.op.WeightDType(p.a)
	if slices.Contains(ops.DTypes, s) {
		if dt, err := bridge.ParseDType(string(s)); err == nil {
			return dt
		}
	}
	if _, packed := s.Quant(); packed && (p.op.ID == ops.MatMul || p.op.ID == ops.MoE) {
		packedOp := map[ops.ID]ops.ID{ops.MatMul: ops.QMatMul, ops.MoE: ops.QMoE}[p.op.ID]
		p.fail(ops.DTypeParam, string(s), "supported dtypes are f32, f16, bf16 (packed weights: op %s)", packedOp)
		return bridge.BF16
	}
	p.fail(ops.DTypeParam, string(s), "supported dtypes are f32, f16, bf16")
	return bridge.BF16
}

func (p *params) moeStrategy() bridge.MoEStrategy {
	s := p.op.Strategy(p.a)
	if slices.Contains(ops.MoEStrategies, s) {
		return bridge.MoEStrategy(s)
	}
	p.fail(ops.MoEStrategyParam, string(s), "supported strategies are loop, chunked, grouped")
	return bridge.MoEGrouped
}

// checkExperts asks a backend whose kernels take only some shapes
// (bridge.ShapeChecker) about a MoE case's experts and top-k before
// anything is allocated: past the backend's limit the case is skipped with
// its reason, under the parameter that crosses it, where the step would
// otherwise fail after its weights were drawn.
func (b *Bench) checkExperts(E, K int) error {
	sc, ok := b.be.(bridge.ShapeChecker)
	if !ok {
		return nil
	}
	if err := sc.CheckShape(bridge.ModelShape{Experts: E, TopK: 1}); err != nil {
		return unsupported(fmt.Sprintf("%s=%d: %v", ops.Experts, E, err))
	}
	if err := sc.CheckShape(bridge.ModelShape{Experts: E, TopK: K}); err != nil {
		return unsupported(fmt.Sprintf("%s=%d: %v", ops.TopK, K, err))
	}
	return nil
}

// cost sets the call's bytes and FLOPs from the op's declared cost model at
// the shape read so far, with weights of dtype w.
func (b *Bench) cost(p *params, w bridge.DType) {
	c := p.op.Cost(p.shape, ops.Types{Act: opsDType(b.act), Weight: opsDType(w)})
	b.bytes, b.flops = c.Bytes(), c.FLOPs
}

func opsDType(d bridge.DType) ops.DType { return ops.DType(d.String()) }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func joinIDs(xs []ops.ID) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
