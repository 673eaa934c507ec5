//go:build linux

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
)

// The MoE block of steps of a few tokens, its router GEMV and routing in
// one launch (moe_router_route), against kernels.MoE and against the same
// step with the router and the routing apart (MoEParams.Unfused): outputs
// within 1e-4, the same count of experts touched, one launch fewer. The
// shapes cross its bounds: 2 and 16 tokens (17 takes the unfused path),
// hidden sizes of one and of several 512-value chunks and one that ends
// inside a chunk, expert counts that fill its last block or not, up to 256,
// bf16 and f16 routers, and each dispatch strategy's slots.
func TestRouterRouteMatchesReference(t *testing.T) {
	b := gpu(t)
	type shape struct{ T, E, K, H int }
	cases := []struct {
		shape
		dt    bridge.DType
		strat bridge.MoEParams
		fused bool
	}{
		{shape{2, 32, 4, 512}, bridge.BF16, bridge.MoEParams{Strategy: bridge.MoEGrouped}, true},
		{shape{16, 128, 8, 2048}, bridge.BF16, bridge.MoEParams{Strategy: bridge.MoEGrouped}, true},
		{shape{7, 256, 8, 1000}, bridge.F16, bridge.MoEParams{Strategy: bridge.MoEGrouped}, true},
		{shape{5, 60, 6, 520}, bridge.BF16, bridge.MoEParams{Strategy: bridge.MoEChunked, ChunkSize: 7}, true},
		{shape{9, 40, 2, 256}, bridge.F16, bridge.MoEParams{Strategy: bridge.MoELoop}, true},
		{shape{17, 64, 4, 512}, bridge.BF16, bridge.MoEParams{Strategy: bridge.MoEGrouped}, false},
	}
	const I = 32
	for _, c := range cases {
		T, E, K, H := c.T, c.E, c.K, c.H
		t.Run(fmt.Sprintf("%s_T%d_E%d_K%d_H%d_%v", c.dt, T, E, K, H, c.strat.Strategy), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(T*E), uint64(H)))
			round, bytes := bf16Round, bf16Bytes
			if c.dt == bridge.F16 {
				round, bytes = f16Round, f16Bytes
			}
			router := round(randn(r, E*H, 0.5))
			w := &bridge.MoEWeights{Router: upload(t, b, c.dt, bytes(router), E, H), TopK: K, NormTopK: true, Hidden: H, Inter: I}
			experts := make([]kernels.Expert, E)
			for e := range experts {
				x := kernels.Expert{Gate: round(randn(r, I*H, 0.06)), Up: round(randn(r, I*H, 0.06)), Down: round(randn(r, H*I, 0.09))}
				experts[e] = x
				w.Gate = append(w.Gate, upload(t, b, c.dt, bytes(x.Gate), I, H))
				w.Up = append(w.Up, upload(t, b, c.dt, bytes(x.Up), I, H))
				w.Down = append(w.Down, upload(t, b, c.dt, bytes(x.Down), H, I))
			}
			x := randn(r, T*H, 1)
			want := make([]float32, T*H)
			kernels.MoE(want, x, router, experts, K, true, H, I)
			xt := upload(t, b, bridge.F32, f32Bytes(x), T, H)
			run := func(unfused bool) ([]float32, []int, int) {
				out := upload(t, b, bridge.F32, f32Bytes(make([]float32, T*H)), T, H)
				meta := &bridge.StepMeta{NumTokens: T, NumSeqs: T, MaxQueryLen: 1, MaxSeqLen: 1, NumDecodeTokens: T,
					Positions: make([]int32, T), SlotMapping: make([]int32, T), BlockTable: make([]int32, T), MaxBlocks: 1,
					BlockSize: 16}
				for i := 0; i <= T; i++ {
					meta.QueryStartLoc = append(meta.QueryStartLoc, int32(i))
					if i < T {
						meta.SeqLens = append(meta.SeqLens, 1)
						meta.BlockTable[i] = int32(i)
					}
				}
				if err := b.BeginStep(meta, make([]int32, T), false); err != nil {
					t.Fatal(err)
				}
				p := c.strat
				p.Unfused = unfused
				b.MoE(out, xt, w, p)
				st, err := b.EndStep()
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, T*H)
				if err := b.Read(out, got); err != nil {
					t.Fatal(err)
				}
				return got, st.ExpertsTouched, b.LastStepLaunches()
			}
			got, touched, n := run(false)
			plain, plainTouched, plainN := run(true)
			e, ep := relErr(got, want), relErr(plain, want)
			t.Logf("relative error %.2g (unfused %.2g), experts touched %v, %d launches (unfused %d)", e, ep, touched, n, plainN)
			if e > 1e-4 || ep > 1e-4 {
				t.Errorf("relative error %.3g, unfused %.3g: want at most 1e-4", e, ep)
			}
			if fmt.Sprint(touched) != fmt.Sprint(plainTouched) {
				t.Errorf("experts touched %v, unfused %v", touched, plainTouched)
			}
			if wantN := plainN - 1; c.fused && n != wantN || !c.fused && n != plainN {
				t.Errorf("%d launches against %d unfused (fused path: %v)", n, plainN, c.fused)
			}
		})
	}
}

// Affine widths the kernels do not take (mlx-community's 2-, 3-, 5- and
// 6-bit checkpoints) run widened to 4 or 8 bits, exactly: the same tokens
// as the CPU, which runs them as stored, and logits within 1e-4.
func TestNarrowAffineRunsWidened(t *testing.T) {
	b := gpu(t)
	for _, c := range []struct {
		preset                   string
		layers, bits, routerBits int
		runs                     int // the width the GPU runs
	}{
		{"qwen3-moe-mini", 0, 6, 3, 8},
		{"qwen3-moe-mini", 2, 5, 2, 8},
		{"tinyllama-1.1b", 2, 3, 0, 4},
		{"tinyllama-1.1b", 2, 2, 0, 4},
	} {
		t.Run(fmt.Sprintf("%s-%dbit", c.preset, c.bits), func(t *testing.T) {
			enginetest.NarrowAffineMatchesCPU(t, b, c.preset, c.layers, c.bits, c.routerBits, c.runs, 1e-4)
		})
	}
}
