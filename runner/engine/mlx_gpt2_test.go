package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// mlx-lm's GPT-2 in floats (mlx_lm.convert without -q): the HF fixture's
// tensors under "model." instead of "transformer.", its Conv1D weights
// transposed to [out, in] and the attention's mask buffers gone, as mlx-lm's
// sanitize saves them. The same weights, so transformers' logits on the HF
// folder are the reference.
func TestMLXLayoutGPT2(t *testing.T) {
	src := filepath.Join(fixtureDir, "gpt2")
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var ts []safetensors.WriteTensor
	for _, name := range ck.Names() {
		data, info, err := ck.Bytes(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias") {
			continue
		}
		w := safetensors.WriteTensor{Name: "model." + strings.TrimPrefix(name, model.GPT2Prefix), DType: info.DType,
			Shape: info.Shape, Data: data}
		for _, conv := range []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"} {
			if strings.HasSuffix(name, conv) {
				if info.DType != "F32" {
					t.Fatalf("%s is %s; the fixture's weights are F32", name, info.DType)
				}
				in, out := info.Shape[0], info.Shape[1]
				w.Shape, w.Data = []int{out, in}, make([]byte, len(data))
				for i := range in {
					for o := range out {
						copy(w.Data[4*(o*in+i):4*(o*in+i)+4], data[4*(i*out+o):4*(i*out+o)+4])
					}
				}
			}
		}
		ts = append(ts, w)
	}
	dir := t.TempDir()
	conf, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "mlx"}); err != nil {
		t.Fatal(err)
	}
	cfg, s, err := model.Open(model.Spec{Model: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := New(cpu.New(cpu.Options{}), cfg, s, Options{KVTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	checkAgainstReference(t, e, loadReference(t, "gpt2"), 1e-4)
}
