package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// A finite weight that a float dtype asked of a checkpoint cannot hold (an
// f32 value past f16's 65504) is refused as the tensor converts, naming the
// tensor, its value and the dtypes: loaded, it would run as an infinity and
// the model's NaN logits would be blamed on a checkpoint whose weights are
// all finite. A dtype that holds it loads the same file.
func TestConvertedWeightOutOfRange(t *testing.T) {
	const name, big = "model.layers.0.mlp.down_proj.weight", float32(1e6)
	folder := func(t *testing.T) string {
		return rewriteFolder(t, "../testdata/hf/llama", nil, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, w := range ts {
				if w.Name == name {
					ts[i].Data = bytes.Clone(w.Data)
					binary.LittleEndian.PutUint32(ts[i].Data[4*5:], math.Float32bits(big))
				}
			}
			return ts
		}, nil)
	}
	const ggufName = "blk.0.ffn_down_exps.weight"
	ggufFile := func(t *testing.T) string {
		src := filepath.Join("..", "testdata", "gguf", "mixtral-f32.gguf")
		f, err := gguf.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		ti, ok := f.Tensor(ggufName)
		if !ok || ti.Type != gguf.F32 {
			t.Fatalf("%s is %v in %s, want an F32 tensor", ggufName, ti.Type, src)
		}
		tensor := bytes.Clone(f.Bytes(ti))
		f.Close()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		at := bytes.Index(b, tensor)
		if at < 0 {
			t.Fatalf("%s's bytes not found in %s", ggufName, src)
		}
		binary.LittleEndian.PutUint32(b[at+4*5:], math.Float32bits(-big))
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f16, bf16, f32 := bridge.F16, bridge.BF16, bridge.F32
	for _, c := range []struct {
		name   string
		make   func(t *testing.T) string
		tensor string
		dtype  *bridge.DType
		want   string // "" loads
	}{
		{"folder as f16", folder, name, &f16, `tensor "` + name + `" holds 1e+06, beyond f16's range`},
		{"folder as bf16", folder, name, &bf16, ""},
		{"folder as f32", folder, name, &f32, ""},
		{"folder as stored", folder, name, nil, ""},
		{"gguf as f16", ggufFile, "model.layers.0.mlp.experts.0.down_proj.weight", &f16, `tensor "` + ggufName + `" holds -1e+06, beyond f16's range`},
		{"gguf as bf16", ggufFile, "model.layers.0.mlp.experts.0.down_proj.weight", &bf16, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.make(t)
			cfg, src, err := Open(Spec{Model: p, DType: c.dtype})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var spec TensorSpec
			for _, s := range cfg.Tensors() {
				if s.Name == c.tensor {
					spec = s
				}
			}
			if spec.Name == "" {
				t.Fatalf("the model has no tensor %s", c.tensor)
			}
			_, _, err = src.Tensor(spec)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p)):
				t.Errorf("err = %v, want one naming %s and %q", err, p, c.want)
			}
		})
	}
}
