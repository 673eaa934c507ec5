package metal_test

import (
	"fmt"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// madeCounter is the emulator, counting the buffers it makes.
type madeCounter struct {
	*emu.Device
	made int
}

func (d *madeCounter) NewBuffer(n int) (mtl.Buffer, error) {
	d.made++
	return d.Device.NewBuffer(n)
}

// Each repetition of a benchmark runs an engine of its own on weights the
// source caches (runner/bench). From the second engine on, its weights are
// the tensors the first engine got (with its experts packed once, or
// dequantized once where a file packs them in part), its KV
// cache and workspaces buffers the engine before it released, taken back
// from the backend's pool and cleared: no new buffer, and the same tokens.
func TestEnginesReuseTheirBuffers(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, c := range []struct {
		name string
		spec model.Spec
	}{
		{"f32", model.Spec{Model: "qwen3-moe-mini", Seed: 5, Layers: 2}},
		{"q4", model.Spec{Model: "qwen3-moe-mini", Quant: "q4", Seed: 5, Layers: 2}},
		// experts packed in part, run in f32 (model.Config.ExpertsInF32)
		{"q4-partial", model.Spec{Model: "../../runner/testdata/mlx/qwen3_moe-q4-partial"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := &madeCounter{Device: emu.New(emu.Options{})}
			be, err := metal.New(dev, metal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			cfg, opened, err := model.Open(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Close()
			src := model.NewCached(opened)
			var reqs []engine.Request
			for i := range 2 {
				reqs = append(reqs, engine.Request{ID: i, Prompt: []int32{int32(7 + i), 100, int32(3 * i), 5}, MaxNewTokens: 6})
			}
			var first string
			for i := range 3 {
				before := dev.made
				e, err := engine.New(be, cfg, src, engine.Options{})
				if err != nil {
					t.Fatal(err)
				}
				out, err := e.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				e.Close()
				var toks [][]int32
				for _, o := range out {
					toks = append(toks, o.Tokens)
				}
				got := fmt.Sprint(toks)
				t.Logf("engine %d: %d buffers made, tokens %s", i, dev.made-before, got)
				switch {
				case i == 0:
					first = got
				case got != first:
					t.Errorf("engine %d: tokens %s, the first engine's %s", i, got, first)
				case dev.made != before:
					t.Errorf("engine %d made %d buffers, want all of them from the pool", i, dev.made-before)
				}
			}
		})
	}
}
