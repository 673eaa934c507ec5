package metal_test

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// minGEMVBytesPerLoad is the least a decode GEMV's lanes may load a time
// on average (docs/metal-kernels.md, "Bytes per load, by lane": at least 12
// for every decode GEMV). Weights and staged activations go 16 bytes a
// load; one weight element a lane, as the GEMVs once read, is 2.
const minGEMVBytesPerLoad = 12

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
		be := newEmu(t, metal.Tuning{})
		dt := c.dt
		e := openEngine(t, be, model.Spec{Model: "qwen3-moe-mini", Seed: 7, DType: &dt, Layers: 2},
			engine.Options{KVTokens: 256, Synchronous: true, NoFusion: c.noFusion})
		for r := range c.batch {
			if err := e.Add(engine.Request{ID: r, Prompt: []int32{int32(11 + r), 502, int32(300 + r)}, MaxNewTokens: 4}); err != nil {
				t.Fatal(err)
			}
		}
		for step := range 2 { // the prompt, then a decode step
			if _, err := e.Step(); err != nil {
				t.Fatalf("%v batch %d, step %d: %v", c.dt, c.batch, step, err)
			}
		}
		ds, ok := be.LastStepCost()
		if !ok {
			t.Fatalf("%v batch %d: the decode step was not witnessed", c.dt, c.batch)
		}
		gemvs := 0
		for _, k := range mtl.SumByKernel(ds) {
			if !strings.HasPrefix(k.Kernel, "matvec") && !strings.HasPrefix(k.Kernel, "moe_mv") {
				continue
			}
			gemvs++
			t.Logf("%v batch %d, fusion off %v: %s %.1f B/load, %.1f lanes/load", c.dt, c.batch, c.noFusion, k.Kernel,
				k.BytesPerLoad(), k.LanesPerLoad())
			if got := k.BytesPerLoad(); got < minGEMVBytesPerLoad {
				t.Errorf("%v batch %d, fusion off %v: %s loads %.1f bytes a lane, want at least %d", c.dt, c.batch, c.noFusion,
					k.Kernel, got, minGEMVBytesPerLoad)
			}
		}
		if gemvs < 2 {
			t.Errorf("%v batch %d: %d GEMV kernels in the decode step, want the dense and the expert ones", c.dt, c.batch, gemvs)
		}
		e.Close()
		be.Close()
	}
}
