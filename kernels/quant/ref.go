package quant

import "github.com/mtlbench/mtlbench/kernels"

// MatMul is the reference GEMM on a packed weight: out[m][n] = x[m][k]·wᵀ
// (+ bias when not nil), each row dequantized and summed in float64.
func MatMul(out, x, bias []float32, w *Matrix, m int) {
	row := make([]float32, w.K)
	for n := 0; n < w.Rows; n++ {
		w.Row(n, row)
		for i := 0; i < m; i++ {
			xi := x[i*w.K : (i+1)*w.K]
			var s float64
			for j, v := range row {
				s += float64(v) * float64(xi[j])
			}
			if bias != nil {
				s += float64(bias[n])
			}
			out[i*w.Rows+n] = float32(s)
		}
	}
}

// Gather is the reference embedding on a packed table: row ids[i] of w,
// dequantized, into out[i].
func Gather(out []float32, w *Matrix, ids []int32) {
	for i, id := range ids {
		w.Row(int(id), out[i*w.K:(i+1)*w.K])
	}
}

// Experts are one MoE block's packed experts, stacked as mlx-lm's
// switch_mlp and GGUF's *_exps tensors store them: Gate and Up
// [experts][inter][hidden], Down [experts][hidden][inter].
type Experts struct {
	Gate, Up, Down *Matrix
	Count          int
}

// MoE is the reference sparse expert block on packed experts: route with
// the router (packed, or float32 [experts][hidden] when router is nil), run
// each token's top-k SwiGLU experts, sum weighted by the routing weights.
func MoE(out, x []float32, router *Matrix, routerF32 []float32, ex Experts, topK int, normTopK bool, hidden, inter int) {
	tokens := len(x) / hidden
	logits := make([]float32, tokens*ex.Count)
	if router != nil {
		MatMul(logits, x, nil, router, tokens)
	} else {
		kernels.MatMul(logits, x, routerF32, nil, tokens, ex.Count, hidden)
	}
	ids, ws := kernels.Route(logits, ex.Count, topK, normTopK)
	g, u, y := make([]float32, inter), make([]float32, inter), make([]float32, hidden)
	for t := 0; t < tokens; t++ {
		acc := make([]float64, hidden)
		xt := x[t*hidden : (t+1)*hidden]
		for j := 0; j < topK; j++ {
			e := int(ids[t*topK+j])
			MatMul(g, xt, nil, ex.Gate.Expert(e, ex.Count), 1)
			MatMul(u, xt, nil, ex.Up.Expert(e, ex.Count), 1)
			kernels.SiLUMul(g, g, u)
			MatMul(y, g, nil, ex.Down.Expert(e, ex.Count), 1)
			for i, v := range y {
				acc[i] += float64(ws[t*topK+j]) * float64(v)
			}
		}
		for i, v := range acc {
			out[t*hidden+i] = float32(v)
		}
	}
}
