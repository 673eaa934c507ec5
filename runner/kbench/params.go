package kbench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/suites"
)

// What the ops support. The suite parser checks the same lists, but a Case
// may be built by hand, so Prepare checks again.
var (
	headSizes  = []int{32, 64, 96, 128}
	blockSizes = []int{8, 16, 32}
)

// maxDim bounds any one size so products of a few stay far from overflow;
// the memory check catches what is merely too big.
const maxDim = 1 << 30

// params reads a case's parameters, collecting every problem so the user
// fixes a case in one go.
type params struct {
	c    suites.Case
	errs []error
}

func (p *params) fail(name, value, format string, args ...any) {
	p.errs = append(p.errs, &ParamError{Param: name, Value: value, Msg: fmt.Sprintf(format, args...)})
}

func (p *params) err() error { return errors.Join(p.errs...) }

// int returns the positive integer parameter name (the first of names that
// is set, so width may also be spelt hidden), or def when none is.
func (p *params) int(def int, names ...string) int {
	for _, name := range names {
		v, ok := p.c.Params[name]
		if !ok {
			continue
		}
		switch {
		case !v.IsNum || v.Float != float64(v.Int):
			p.fail(name, v.Raw, "must be an integer")
		case v.Int < 1:
			p.fail(name, v.Raw, "must be positive")
		case v.Int > maxDim:
			p.fail(name, v.Raw, "must be at most %d", maxDim)
		default:
			return int(v.Int)
		}
		return def
	}
	return def
}

// oneOf returns an integer parameter restricted to the values ok.
func (p *params) oneOf(name string, def int, ok []int, what string) int {
	n := p.int(def, name)
	for _, o := range ok {
		if n == o {
			return n
		}
	}
	p.fail(name, strconv.Itoa(n), "supported %s are %s", what, joinInts(ok))
	return def
}

// heads reads and checks the attention head layout shared by attention and
// RoPE: GQA needs whole groups of query heads per KV head.
func (p *params) heads() (h, kvh, d int) {
	h, kvh = p.int(32, "num_heads"), p.int(8, "num_kv_heads")
	d = p.oneOf("head_size", 128, headSizes, "head sizes")
	if h%kvh != 0 {
		p.fail("num_heads", strconv.Itoa(h), "must be a multiple of num_kv_heads=%d", kvh)
	}
	return h, kvh, d
}

// dtype is the weight dtype of matmul, MoE and embedding cases.
func (p *params) dtype() bridge.DType {
	s := p.c.String("dtype", "bf16")
	switch s {
	case "f32":
		return bridge.F32
	case "f16":
		return bridge.F16
	case "bf16":
		return bridge.BF16
	}
	p.fail("dtype", s, "supported dtypes are f32, f16, bf16")
	return bridge.BF16
}

func (p *params) moeStrategy() bridge.MoEStrategy {
	s := bridge.MoEStrategy(p.c.String("moe_strategy", string(bridge.MoEGrouped)))
	switch s {
	case bridge.MoELoop, bridge.MoEChunked, bridge.MoEGrouped:
		return s
	}
	p.fail("moe_strategy", string(s), "supported strategies are loop, chunked, grouped")
	return bridge.MoEGrouped
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func joinStrings(xs []string) string { return strings.Join(xs, ", ") }
