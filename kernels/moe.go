package kernels

// Expert holds one SwiGLU expert's weights as torch Linear layouts:
// Gate and Up are [inter][hidden], Down is [hidden][inter].
type Expert struct {
	Gate, Up, Down []float32
}

// Route turns router logits (one row of num_experts per token) into the
// chosen experts and their weights: softmax, top-k, and renormalisation of
// the k weights when normTopK is set (Qwen3-MoE's norm_topk_prob).
func Route(logits []float32, numExperts, topK int, normTopK bool) (ids []int32, weights []float32) {
	tokens := len(logits) / numExperts
	ids = make([]int32, 0, tokens*topK)
	weights = make([]float32, 0, tokens*topK)
	p := make([]float32, numExperts)
	for t := 0; t < tokens; t++ {
		copy(p, logits[t*numExperts:(t+1)*numExperts])
		Softmax(p)
		idx, vals := TopK(p, topK)
		var sum float32
		for _, v := range vals {
			sum += v
		}
		for i := range idx {
			ids = append(ids, int32(idx[i]))
			w := vals[i]
			if normTopK {
				w /= sum
			}
			weights = append(weights, w)
		}
	}
	return ids, weights
}

// SwiGLU applies one dense SwiGLU MLP to the rows of x.
func SwiGLU(out, x []float32, e Expert, hidden, inter int) {
	m := len(x) / hidden
	g := make([]float32, m*inter)
	u := make([]float32, m*inter)
	MatMul(g, x, e.Gate, nil, m, inter, hidden)
	MatMul(u, x, e.Up, nil, m, inter, hidden)
	SiLUMul(g, g, u)
	MatMul(out, g, e.Down, nil, m, hidden, inter)
}

// MoE runs a sparse mixture-of-experts block token by token: route, run the
// chosen experts, sum their outputs weighted by the routing weights.
func MoE(out, x, router []float32, experts []Expert, topK int, normTopK bool, hidden, inter int) {
	n := len(experts)
	tokens := len(x) / hidden
	logits := make([]float32, tokens*n)
	MatMul(logits, x, router, nil, tokens, n, hidden)
	ids, ws := Route(logits, n, topK, normTopK)
	y := make([]float32, hidden)
	for t := 0; t < tokens; t++ {
		acc := make([]float64, hidden)
		for j := 0; j < topK; j++ {
			SwiGLU(y, x[t*hidden:(t+1)*hidden], experts[ids[t*topK+j]], hidden, inter)
			for i := range y {
				acc[i] += float64(ws[t*topK+j]) * float64(y[i])
			}
		}
		for i := range acc {
			out[t*hidden+i] = float32(acc[i])
		}
	}
}
