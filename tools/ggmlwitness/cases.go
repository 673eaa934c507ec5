package main

import (
	"fmt"

	"github.com/mtlbench/mtlbench/kernels/ops"
)

// opCase is one op at one shape, as a kernel case of mtlbench gives it.
type opCase struct {
	name  string // the table's op
	shape string // the table's shape
	args  ops.Args
}

func (c *config) cases() []opCase {
	var out []opCase
	for _, o := range c.ops {
		switch o {
		case "rms_norm":
			out = append(out, opCase{"rms_norm", fmt.Sprintf("1x%d", c.width),
				ops.Args{Op: ops.RMSNorm, Ints: ops.Shape{ops.Tokens: 1, ops.Width: c.width}}})
		case "q4_0", "q8_0", "q4_k":
			out = append(out, opCase{"gemv " + o, fmt.Sprintf("1x%d by %dx%d", c.k, c.n, c.k),
				ops.Args{Op: ops.QMatMul, DType: ops.DType(o), Ints: ops.Shape{ops.M: 1, ops.N: c.n, ops.K: c.k}}})
		case "attention":
			for _, ctx := range c.contexts {
				out = append(out, opCase{"decode attention f16", fmt.Sprintf("ctx %d, %d/%d heads of %d", ctx, c.heads[0], c.heads[1], c.heads[2]),
					ops.Args{Op: ops.PagedAttentionDecode, DType: ops.F16, Ints: ops.Shape{ops.Seqs: 1, ops.Context: ctx,
						ops.NumHeads: c.heads[0], ops.NumKVHeads: c.heads[1], ops.HeadSize: c.heads[2]}}})
			}
		}
	}
	return out
}
