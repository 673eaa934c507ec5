//go:build linux

package cuda_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// A KV cache in f16 or bf16 gives the CPU's logits for a CPU run keeping
// the same cache dtype (bridge/cpu writes it rounded to nearest even, as
// the CUDA kernels do). The rounding is the reference's too, so the bound is
// two units in the last place of the cache dtype, not the distance to an f32
// cache: a value the backends compute a float32 rounding apart lands on
// either side of a rounding boundary now and then, and is stored one unit
// apart (2^-11 relative in f16, 2^-8 in bf16). Dense and MoE presets, chunked
// prefill and decode.
func TestHalfCacheMatchesCPU(t *testing.T) {
	b := gpu(t)
	c := cpu.New(cpu.Options{})
	reqs := miniRequests(8192, 3, 40, 8)
	for _, preset := range []struct {
		name   string
		layers int
	}{{"tinyllama-1.1b", 2}, {"qwen3-moe-mini", 0}} {
		cfg, src, err := model.Open(model.Spec{Model: preset.name, Layers: preset.layers, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		run := func(be bridge.Backend, kv string) []engine.Output {
			e, err := engine.New(be, cfg, src, engine.Options{TokenBudget: 64, KVDType: kv})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			out, err := e.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		exact := run(c, "f32")
		for _, kv := range []struct {
			name string
			tol  float64
		}{{"f16", 0x1p-10}, {"bf16", 0x1p-7}} {
			g, want := run(b, kv.name), run(c, kv.name)
			for i := range reqs {
				diff := kernels.MaxAbsDiff(g[i].Logits, want[i].Logits)
				t.Logf("%s, %s cache, request %d: logits within %.2g of the CPU's with the same cache (%.2g of an f32 cache's)",
					preset.name, kv.name, i, diff, kernels.MaxAbsDiff(g[i].Logits, exact[i].Logits))
				if diff > kv.tol {
					t.Errorf("%s, %s cache, request %d: logits differ from the CPU's by %.3g > %.3g", preset.name, kv.name, i, diff, kv.tol)
				}
			}
		}
	}
}
