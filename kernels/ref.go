// Package kernels holds the kernel sources of the GPU backends and a pure-Go
// reference of every op of the backend contract. The reference is the oracle
// all backends are tested against: simple loops, f32 storage, accumulation in
// float64 where a sum is long, no cleverness.
package kernels

import "math"

// Gather copies rows of table (rows of dim elements) picked by ids into out.
func Gather(out, table []float32, ids []int32, dim int) {
	for i, id := range ids {
		copy(out[i*dim:(i+1)*dim], table[int(id)*dim:(int(id)+1)*dim])
	}
}

// RMSNorm normalises each row of x (rows of dim elements) and scales by w.
func RMSNorm(out, x, w []float32, dim int, eps float32) {
	for r := 0; r < len(x)/dim; r++ {
		row := x[r*dim : (r+1)*dim]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(dim)+float64(eps))
		for i, v := range row {
			out[r*dim+i] = float32(float64(v)*inv) * w[i]
		}
	}
}

// AddRMSNorm adds x into residual, then writes RMSNorm(residual)*w to out:
// the pre-norm transformer's "residual add, then next norm" pair.
func AddRMSNorm(out, residual, x, w []float32, dim int, eps float32) {
	Add(residual, residual, x)
	RMSNorm(out, residual, w, dim, eps)
}

// MatMul computes out[m,n] = x[m,k] · w[n,k]ᵀ + bias[n] (bias may be nil):
// the layout of torch.nn.Linear weights.
func MatMul(out, x, w, bias []float32, m, n, k int) {
	for i := 0; i < m; i++ {
		xr := x[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			wr := w[j*k : (j+1)*k]
			var s float64
			for kk := range xr {
				s += float64(xr[kk]) * float64(wr[kk])
			}
			if bias != nil {
				s += float64(bias[j])
			}
			out[i*n+j] = float32(s)
		}
	}
}

// RoPE rotates x in place, neox style (the two halves of each head form the
// pairs). x holds len(positions) tokens of heads*headDim elements.
func RoPE(x []float32, positions []int32, heads, headDim int, rot Rotary) {
	inv := rot.InvFreq(headDim)
	half := headDim / 2
	for t, p := range positions {
		for h := 0; h < heads; h++ {
			v := x[(t*heads+h)*headDim : (t*heads+h+1)*headDim]
			for i := 0; i < half; i++ {
				ang := float64(float32(p) * inv[i])
				c, s := float32(math.Cos(ang)), float32(math.Sin(ang))
				a, b := v[i], v[i+half]
				v[i] = a*c - b*s
				v[i+half] = b*c + a*s
			}
		}
	}
}

// SiLU is x·sigmoid(x).
func SiLU(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// SiLUMul writes silu(gate)*up: the SwiGLU activation.
func SiLUMul(out, gate, up []float32) {
	for i := range out {
		out[i] = SiLU(gate[i]) * up[i]
	}
}

// Add writes a+b to out (out may alias a or b).
func Add(out, a, b []float32) {
	for i := range out {
		out[i] = a[i] + b[i]
	}
}

// Softmax normalises x in place.
func Softmax(x []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		x[i] = float32(e)
		s += e
	}
	for i := range x {
		x[i] = float32(float64(x[i]) / s)
	}
}

// TopK returns the indices and values of the k largest entries, largest
// first; ties go to the lower index, as torch.topk does on CPU.
func TopK(x []float32, k int) ([]int, []float32) {
	idx := make([]int, 0, k)
	vals := make([]float32, 0, k)
	taken := make([]bool, len(x))
	for range k {
		best := -1
		for i, v := range x {
			if !taken[i] && (best < 0 || v > x[best]) {
				best = i
			}
		}
		taken[best] = true
		idx = append(idx, best)
		vals = append(vals, x[best])
	}
	return idx, vals
}

// Argmax returns the index of the largest entry (the first on ties), or -1
// where no entry is a number above -inf (every one NaN or -inf): logits no
// token can be drawn from, as a NaN reaching a step's last norm leaves them.
// NaN and -inf never win. Every backend's ArgmaxOp follows it, so a step
// sampled on the device says its logits were not finite at no cost: the
// argmax reads each logit anyway (bridge.ArgmaxOp).
func Argmax(x []float32) int {
	best := -1
	for i, v := range x {
		if v > float32(math.Inf(-1)) && (best < 0 || v > x[best]) {
			best = i
		}
	}
	return best
}

// LayerNorm normalises each row of x (rows of dim elements) to zero mean
// and unit variance (the biased variance, as torch.nn.LayerNorm), then
// scales by w and adds b.
func LayerNorm(out, x, w, b []float32, dim int, eps float32) {
	for r := 0; r < len(x)/dim; r++ {
		row := x[r*dim : (r+1)*dim]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mean := s / float64(dim)
		var ss float64
		for _, v := range row {
			d := float64(v) - mean
			ss += d * d
		}
		inv := 1 / math.Sqrt(ss/float64(dim)+float64(eps))
		for i, v := range row {
			out[r*dim+i] = float32((float64(v)-mean)*inv)*w[i] + b[i]
		}
	}
}

// AddLayerNorm adds x into residual, then writes LayerNorm(residual) to
// out: GPT-2's "residual add, then next LayerNorm" pair.
func AddLayerNorm(out, residual, x, w, b []float32, dim int, eps float32) {
	Add(residual, residual, x)
	LayerNorm(out, residual, w, b, dim, eps)
}

// GELUTanh is GELU with the tanh approximation (GPT-2's "gelu_new"):
// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELUTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

// GELU writes GELUTanh of each element of x to out (out may alias x).
func GELU(out, x []float32) {
	for i, v := range x {
		out[i] = GELUTanh(v)
	}
}

// AddPositions adds row positions[t] of table (rows of dim elements) to
// row t of x: learned absolute position embeddings.
func AddPositions(x, table []float32, positions []int32, dim int) {
	for t, p := range positions {
		row, pe := x[t*dim:(t+1)*dim], table[int(p)*dim:(int(p)+1)*dim]
		for i := range row {
			row[i] += pe[i]
		}
	}
}
