package quanttest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
)

// LongContextRoPE runs be's RoPE at the positions a scaled RoPE lets a
// request reach (docs/architecture.md, "Rotary embeddings"): Qwen3's yarn
// of factor 4 over 32768 positions, which runs 131072, at positions about
// the original context, its max_position_embeddings of 40960 and the last
// one, with and without QK-norm, against kernels.RoPE with the yarn
// frequencies; the attention factor the engine folds into the attention's
// scale is checked against transformers' 0.1·ln(factor) + 1. Each value
// is held to tol (absolute: the inputs are of unit size).
func LongContextRoPE(t *testing.T, be bridge.Backend, tol float64) {
	t.Helper()
	const theta, heads, kvHeads, headDim = 1e6, 4, 2, 128
	sc := kernels.RoPEScaling{Type: "yarn", Factor: 4, OriginalMax: 32768, BetaFast: 32, BetaSlow: 1, Attention: 1 + 0.1*math.Log(4)}
	if err := sc.Check(); err != nil {
		t.Fatal(err)
	}
	if got, want := sc.LogitScale(), math.Pow(0.1*math.Log(4)+1, 2); got != want {
		t.Errorf("yarn's logit scale %g, want %g", got, want)
	}
	rot := kernels.Rotary{Theta: theta, Freqs: sc.Scaled(headDim, theta)}.Keyed(headDim)
	pos := []int32{0, 1, 32767, 32768, 40959, 40960, 65537, 98303, 131070, 131071}
	r := rand.New(rand.NewPCG(9, 9))
	for _, qkNorm := range []bool{false, true} {
		t.Run(fmt.Sprintf("qk_norm=%v", qkNorm), func(t *testing.T) {
			q, k := randn(r, len(pos)*heads*headDim), randn(r, len(pos)*kvHeads*headDim)
			qw, kw := randn(r, headDim), randn(r, headDim)
			want := [2][]float32{append([]float32(nil), q...), append([]float32(nil), k...)}
			if qkNorm {
				kernels.RMSNorm(want[0], want[0], qw, headDim, 1e-6)
				kernels.RMSNorm(want[1], want[1], kw, headDim, 1e-6)
			}
			kernels.RoPE(want[0], pos, heads, headDim, rot)
			kernels.RoPE(want[1], pos, kvHeads, headDim, rot)
			got, err := runRoPE(be, q, k, qw, kw, qkNorm, pos, heads, kvHeads, headDim, rot)
			if err != nil {
				t.Fatal(err)
			}
			for i, name := range []string{"q", "k"} {
				if d := kernels.MaxAbsDiff(got[i], want[i]); d > tol || math.IsNaN(d) {
					t.Errorf("%s at positions %v: max abs error %.3g, want at most %.3g", name, pos, d, tol)
				}
			}
		})
	}
}

// runRoPE uploads q and k (and the QK-norm weights), rotates them on be at
// pos and reads them back.
func runRoPE(be bridge.Backend, q, k, qw, kw []float32, qkNorm bool, pos []int32, heads, kvHeads, headDim int, rot kernels.Rotary) ([2][]float32, error) {
	var out [2][]float32
	var ts []bridge.Tensor
	defer func() {
		for _, t := range ts {
			be.Free(t)
		}
	}()
	load := func(v []float32, shape ...int) (bridge.Tensor, error) {
		t, err := be.Weight(bridge.F32, shape, F32Bytes(slices.Clone(v)))
		if err == nil {
			ts = append(ts, t)
		}
		return t, err
	}
	qt, err := load(q, len(pos), heads*headDim)
	if err != nil {
		return out, err
	}
	kt, err := load(k, len(pos), kvHeads*headDim)
	if err != nil {
		return out, err
	}
	var qn, kn bridge.Tensor
	if qkNorm {
		if qn, err = load(qw, headDim); err != nil {
			return out, err
		}
		if kn, err = load(kw, headDim); err != nil {
			return out, err
		}
	}
	// A decode step: each position the one new token of its own sequence.
	meta := &bridge.StepMeta{NumTokens: len(pos), NumSeqs: len(pos), Positions: pos,
		SlotMapping: make([]int32, len(pos)), QueryStartLoc: make([]int32, len(pos)+1), SeqLens: make([]int32, len(pos))}
	for i, p := range pos {
		meta.SlotMapping[i], meta.QueryStartLoc[i+1], meta.SeqLens[i] = int32(i), int32(i+1), p+1
	}
	if err := be.BeginStep(meta, make([]int32, len(pos)), false); err != nil {
		return out, err
	}
	be.RoPE(qt, kt, qn, kn, heads, kvHeads, headDim, rot, 1e-6)
	if _, err := be.EndStep(); err != nil {
		return out, err
	}
	out = [2][]float32{make([]float32, len(q)), make([]float32, len(k))}
	if err := be.Read(qt, out[0]); err != nil {
		return out, err
	}
	return out, be.Read(kt, out[1])
}
