package metal_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// minGEMVBytesPerLoad is the least a decode GEMV's lanes may load a time
// on average (docs/metal-kernels.md, "Bytes per load, by lane": at least 12
// for every decode GEMV). Weights and staged activations go 16 bytes a
// load; one weight element a lane, as the GEMVs once read, is 2.
const minGEMVBytesPerLoad = 12

// minTileBytesPerLoad is the least the simdgroup_matrix tiles' lanes may
// load a time on average: they stage weights and activations 16 bytes a
// load ("The tiled GEMM"), beside the 4-byte row indices and routing
// weights of the MoE tiles; one element a thread, as they once staged, is
// at most 4.
const minTileBytesPerLoad = 8

// stepKernels runs qwen3-moe-mini (2 layers, dtype dt) on the emulator:
// batch requests of prompt tokens each, then, with decode, one decode step;
// it returns the witness of the last step, by kernel.
func stepKernels(t *testing.T, dt bridge.DType, batch, prompt int, decode, noFusion bool) []mtl.KernelStats {
	t.Helper()
	be := newEmu(t, metal.Tuning{})
	e := openEngine(t, be, model.Spec{Model: "qwen3-moe-mini", Seed: 7, DType: &dt, Layers: 2},
		engine.Options{KVTokens: 256, Synchronous: true, NoFusion: noFusion})
	defer e.Close()
	for r := range batch {
		p := make([]int32, prompt)
		for i := range p {
			p[i] = int32((7*i + 300*r + 11) % 8192)
		}
		if err := e.Add(engine.Request{ID: r, Prompt: p, MaxNewTokens: 4}); err != nil {
			t.Fatal(err)
		}
	}
	steps := 1
	if decode {
		steps = 2
	}
	for step := range steps {
		if _, err := e.Step(); err != nil {
			t.Fatalf("%v batch %d, step %d: %v", dt, batch, step, err)
		}
	}
	ds, ok := be.LastStepCost()
	if !ok {
		t.Fatalf("%v batch %d: the step was not witnessed", dt, batch)
	}
	return mtl.SumByKernel(ds)
}

// checkLoadWidth holds the kernels whose names start with one of prefixes
// to at least least bytes a load, and wants at least want of them.
func checkLoadWidth(t *testing.T, what string, ks []mtl.KernelStats, prefixes []string, least float64, want int) {
	t.Helper()
	n := 0
	for _, k := range ks {
		if !hasAnyPrefix(k.Kernel, prefixes) {
			continue
		}
		n++
		t.Logf("%s: %s %.1f B/load, %.1f lanes/load", what, k.Kernel, k.BytesPerLoad(), k.LanesPerLoad())
		if got := k.BytesPerLoad(); got < least {
			t.Errorf("%s: %s loads %.1f bytes a lane, want at least %g", what, k.Kernel, got, least)
		}
	}
	if n < want {
		t.Errorf("%s: %d of the kernels %v ran, want %d", what, n, prefixes, want)
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Every float GEMV of a decode step, as the backend runs it (fused with the
// norm before it, the expert GEMVs of one token and of a few grouped by
// expert, and unfused), streams its weights and activations 16 bytes a lane:
// traffic efficiency alone does not tell a GEMV that reads each byte once
// in 2-byte loads from one that reads it in 16-byte ones, which decode
// speed on Apple GPUs depends on.
func TestDecodeGEMVLoadWidth(t *testing.T) {
	for _, c := range []struct {
		dt       bridge.DType
		batch    int
		noFusion bool
	}{{bridge.BF16, 1, false}, {bridge.BF16, 4, false}, {bridge.BF16, 1, true}, {bridge.F16, 4, false}} {
		ks := stepKernels(t, c.dt, c.batch, 3, true, c.noFusion)
		what := fmt.Sprintf("%v decode, batch %d", c.dt, c.batch)
		if c.noFusion {
			what += ", fusion off"
		}
		checkLoadWidth(t, what, ks, []string{"matvec", "moe_mv"}, minGEMVBytesPerLoad, 2)
	}
}

// The prefill step's tiled GEMMs (the dense matmul and the MoE expert
// tiles) stage their weights and activations 16 bytes a thread.
func TestPrefillTileLoadWidth(t *testing.T) {
	ks := stepKernels(t, bridge.BF16, 1, 64, false, false)
	checkLoadWidth(t, "bf16 prefill of 64 tokens", ks, []string{"matmul_", "moe_mm_"}, minTileBytesPerLoad, 3)
}

// Decode attention reads its KV cache 4 elements a lane (docs/metal-kernels.md,
// "Decode attention's lane layout"): 8 bytes a load from an f16 or bf16
// cache, 16 from an f32 one, less the few narrow loads of the block table
// and the step's metadata. Heads of 32, 64 and 96 once read 1, 2 and 3
// elements a lane (2, 4 and 2 bytes a load from f16). The metadata and the
// partition's first 32 block numbers are read by one simdgroup a
// threadgroup and shared: read by every simdgroup (a lane, three lanes and
// a lane a block of its run), they kept 15.1-28.1 lanes a load busy in
// these cases. The cache write reads the token's key and value a vector a
// lane, where it read them an element at a time, by a simdgroup other than
// the one reading the metadata: the busiest simdgroup over 128 keys issued
// 17, 19 and 23 loads at heads of 32, 64 and 96. Over 513 keys the two
// partitions take 257 and 256, where they took 512 and 1 (19 and 35 loads
// at heads of 64 and 128).
func TestDecodeAttentionLoadWidth(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	for _, c := range []struct {
		head, kv, ctx int
		dt            ops.DType
		least, lanes  float64 // bytes a load, lanes a load
		crit          int64   // critical loads, at most
	}{
		{64, 4, 300, ops.F16, 6, 30, 0},
		{64, 4, 300, ops.BF16, 6, 30, 0},
		{64, 4, 300, ops.F32, 12, 30, 0},
		{32, 4, 300, ops.F16, 6, 30, 0},
		{96, 4, 300, ops.F16, 6, 23, 0},
		{128, 4, 300, ops.BF16, 6, 30, 0},
		{64, 4, 128, ops.F16, 6, 30, 12},
		{32, 4, 128, ops.F16, 6, 29, 12},
		{96, 4, 128, ops.F16, 6, 23, 16},
		{128, 8, 512, ops.F16, 6, 31, 24},
		{64, 4, 512, ops.F16, 6, 30, 14},
	} {
		name := fmt.Sprintf("head %d, %d kv heads, %v cache, context %d", c.head, c.kv, c.dt, c.ctx)
		w, _, _ := checkedWitness(t, be, ops.Args{Op: ops.PagedAttentionDecode, Ints: map[ops.Param]int{ops.Seqs: 1, ops.NumHeads: 32,
			ops.NumKVHeads: c.kv, ops.HeadSize: c.head, ops.BlockSize: 16, ops.Context: c.ctx}, DType: c.dt})
		checkLoadWidth(t, name, w.Kernels, []string{"paged_attention_d"}, c.least, 1)
		for _, k := range w.Kernels {
			if !strings.HasPrefix(k.Kernel, "paged_attention_d") {
				continue
			}
			t.Logf("%s: %s %d critical loads", name, k.Kernel, k.CriticalLoads)
			if k.LanesPerLoad() < c.lanes {
				t.Errorf("%s: %s keeps %.1f lanes a load busy, want at least %g", name, k.Kernel, k.LanesPerLoad(), c.lanes)
			}
			if c.crit > 0 && k.CriticalLoads > c.crit {
				t.Errorf("%s: %s's busiest simdgroup issues %d loads, want at most %d", name, k.Kernel, k.CriticalLoads, c.crit)
			}
		}
	}
}
