package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// A checkpoint's float dtype (what `auto` gives its KV cache) is its float
// weights', as its config.json states it: never its packed matrices' scales
// (the mlx fixtures keep an f32 model's 8-bit router scales in bf16).
func TestCheckpointFloatDType(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "*", "*"))
	checked := 0
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			continue
		}
		var cfg struct {
			DType      string `json:"dtype"`
			TorchDType string `json:"torch_dtype"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		stated := cfg.DType
		if stated == "" {
			stated = cfg.TorchDType
		}
		want, ok := map[string]bridge.DType{"float32": bridge.F32, "float16": bridge.F16, "bfloat16": bridge.BF16}[stated]
		if !ok {
			continue
		}
		c, err := OpenCheckpoint(dir, nil)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if got := c.DType(); got != want {
			t.Errorf("%s: dtype %v, its config.json says %s", filepath.Base(dir), got, stated)
		}
		c.Close()
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d checkpoints state their dtype", checked)
	}
}

// A float dtype asked of a checkpoint whose every matrix is packed would
// change nothing: refused, naming the file; where float matrices remain it
// converts them.
func TestFloatDTypeOfPackedCheckpoint(t *testing.T) {
	bf := bridge.BF16
	for _, tc := range []struct {
		path    string
		refused bool
	}{
		{filepath.Join("..", "testdata", "gguf", "llama-q4_0.gguf"), true},
		{filepath.Join("..", "testdata", "mlx", "llama-q4"), true},
		{filepath.Join("..", "testdata", "hf", "llama"), false},
	} {
		_, src, err := Open(Spec{Model: tc.path, DType: &bf})
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), tc.path+": every matrix is packed") {
				t.Errorf("%s: %v", tc.path, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		src.Close()
	}
}

// A folder's float dtype (what `auto` gives its KV cache, and the fit
// check's weight bytes) is that of the matrices its model reads, as they are
// stored: a tensor it never reads (a tied LM head, a stray one) or a norm
// (read as f32 whatever it is stored in) does not make an f32 model bf16.
func TestFloatDTypeOfTensorsRead(t *testing.T) {
	// toBF16 rewrites the named tensors' f32 values as bf16 (their high
	// halves).
	toBF16 := func(names ...string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, w := range ts {
				if !slices.Contains(names, w.Name) {
					continue
				}
				ts[i].DType, ts[i].Data = "BF16", bf16(w.Data)
			}
			return ts
		}
	}
	stray := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return append(ts, safetensors.WriteTensor{Name: "model.aaa.weight", DType: "BF16", Shape: []int{2, 2}, Data: make([]byte, 8)})
	}
	tie := func(c map[string]any) { c["tie_word_embeddings"] = true }
	const llama = "../testdata/hf/llama"
	for _, c := range []struct {
		name   string
		config func(map[string]any)
		edit   func([]safetensors.WriteTensor) []safetensors.WriteTensor
		want   bridge.DType
	}{
		{"as stored", nil, nil, bridge.F32},
		{"a stray bf16 tensor", nil, stray, bridge.F32},
		{"a tied head in bf16", tie, toBF16("lm_head.weight"), bridge.F32},
		{"a norm in bf16", nil, toBF16("model.norm.weight"), bridge.F32},
		{"the head read in bf16", nil, toBF16("lm_head.weight"), bridge.BF16},
		{"a layer's matrix in bf16", nil, toBF16("model.layers.1.mlp.down_proj.weight"), bridge.BF16},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := llama
			if c.config != nil || c.edit != nil {
				dir = rewriteFolder(t, llama, c.config, c.edit, nil)
			}
			_, src, err := Open(Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if got := src.DType(); got != c.want {
				t.Errorf("dtype %v, want %v", got, c.want)
			}
		})
	}
}

// A GGUF file's float dtype follows the same rule: a norm stored in bf16
// (read as f32) does not make a packed model's bf16, nor an f32 model's.
func TestGGUFFloatDTypeOfMatrices(t *testing.T) {
	for _, c := range []struct {
		file, bf16 string
		want       bridge.DType
	}{
		{"llama-q8_0.gguf", "", bridge.F16},
		{"llama-q8_0.gguf", "output_norm.weight", bridge.F16},
		{"mixtral-f32.gguf", "", bridge.F32},
		{"mixtral-f32.gguf", "output_norm.weight", bridge.F32},
		{"mixtral-f32.gguf", "output.weight", bridge.BF16},
	} {
		t.Run(c.file+"/"+c.bf16, func(t *testing.T) {
			p := filepath.Join("..", "testdata", "gguf", c.file)
			if c.bf16 != "" {
				p = ggufWithBF16(t, p, c.bf16)
			}
			_, src, err := OpenGGUF(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			if got := src.DType(); got != c.want {
				t.Errorf("dtype %v, want %v", got, c.want)
			}
		})
	}
}

// A checkpoint kept as stored loads each matrix in the dtype its file
// holds it in; the weights' figure (the fit check's, `mtlbench models`')
// is the bytes so loaded, an F32 matrix beside bf16 ones (a head kept in
// f32, one shard in another dtype) at its four bytes a value, not at the
// two of the dtype the first half-precision matrix sets
// (docs/architecture.md, "The KV cache").
func TestWeightBytesAsLoaded(t *testing.T) {
	// toBF16 rewrites the tensors keep picks (f32) as bf16, their high
	// halves.
	toBF16 := func(keep func(name string) bool) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, w := range ts {
				if w.DType != "F32" || !keep(w.Name) {
					continue
				}
				ts[i].DType, ts[i].Data = "BF16", bf16(w.Data)
			}
			return ts
		}
	}
	named := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	but := func(names ...string) func(string) bool {
		return func(n string) bool { return !slices.Contains(names, n) }
	}
	for _, c := range []struct {
		name, from string
		edit       func([]safetensors.WriteTensor) []safetensors.WriteTensor
	}{
		{"llama as stored", "../testdata/hf/llama", nil},
		{"llama all bf16", "../testdata/hf/llama", toBF16(but())},
		{"llama head in bf16", "../testdata/hf/llama", toBF16(named("lm_head.weight"))},
		{"llama all bf16 but the head", "../testdata/hf/llama", toBF16(but("lm_head.weight"))},
		{"llama layer 1 in f32", "../testdata/hf/llama", toBF16(func(n string) bool { return !strings.HasPrefix(n, "model.layers.1.") })},
		{"qwen3-moe routers in f32", "../testdata/hf/qwen3_moe", toBF16(func(n string) bool { return !strings.HasSuffix(n, "mlp.gate.weight") })},
		{"gpt2 c_fc in bf16", "../testdata/hf/gpt2", toBF16(func(n string) bool { return strings.HasSuffix(n, "mlp.c_fc.weight") })},
		{"mlx llama-q4 as stored", "../testdata/mlx/llama-q4", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.from
			if c.edit != nil {
				dir = rewriteFolder(t, c.from, nil, c.edit, nil)
			}
			cfg, src, err := Open(Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			var loaded int64
			for _, s := range cfg.Tensors() {
				if p, ok, err := src.(PackedSource).Packed(s); err != nil {
					t.Fatal(err)
				} else if ok {
					loaded += int64(len(p.Data) + len(p.Scales) + len(p.Biases))
					continue
				}
				_, b, err := src.Tensor(s)
				if err != nil {
					t.Fatal(err)
				}
				loaded += int64(len(b))
			}
			if got := cfg.WeightBytes(src.DType()); got != loaded {
				t.Errorf("weights counted at %d bytes (matrices in %v), loaded in %d", got, src.DType(), loaded)
			}
		})
	}
}

// A MoE layer's experts must be of one packed format a projection, gate
// and up in the same one, and its float experts kept as stored of one
// dtype, all three projections: the Metal and CUDA expert kernels read
// them so and refused such a layer only at its first step, naming no
// tensor. It is refused as the model opens, naming two of its tensors;
// asked for one dtype, float experts are converted to it and the model
// opens.
func TestExpertsOfOneFormat(t *testing.T) {
	toBF16 := func(keep func(name string) bool) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, w := range ts {
				if w.DType == "F32" && !keep(w.Name) {
					ts[i].DType, ts[i].Data = "BF16", bf16(w.Data)
				}
			}
			return ts
		}
	}
	folder := func(from string, keep func(string) bool) func(t *testing.T) string {
		return func(t *testing.T) string { return rewriteFolder(t, from, nil, toBF16(keep), nil) }
	}
	// unstacked is mlx's Qwen3-MoE fixture with its switch_mlp stacks cut
	// into a tensor an expert; eight: with layer 0's expert 1 up
	// projection at 8 bits (its config saying so).
	unstacked := func(eight bool) func(t *testing.T) string {
		const up1 = "model.layers.0.mlp.experts.1.up_proj"
		config := func(c map[string]any) {
			for _, k := range []string{"quantization", "quantization_config"} {
				c[k].(map[string]any)[up1] = map[string]any{"group_size": 64, "bits": 8}
			}
		}
		edit := func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			var out []safetensors.WriteTensor
			for _, w := range ts {
				pre, rest, ok := strings.Cut(w.Name, ".switch_mlp.")
				if !ok {
					out = append(out, w)
					continue
				}
				n := w.Shape[0]
				per := len(w.Data) / n
				for e := range n {
					x := safetensors.WriteTensor{Name: fmt.Sprintf("%s.experts.%d.%s", pre, e, rest), DType: w.DType, Shape: w.Shape[1:], Data: w.Data[e*per : (e+1)*per]}
					if eight && x.Name == up1+".weight" {
						x.Shape = []int{x.Shape[0], 2 * x.Shape[1]}
						x.Data = make([]byte, 2*len(x.Data))
					}
					out = append(out, x)
				}
			}
			return out
		}
		return func(t *testing.T) string {
			if !eight {
				config = nil
			}
			return rewriteFolder(t, "../testdata/mlx/qwen3_moe-q4", config, edit, nil)
		}
	}
	for _, c := range []struct {
		name string
		make func(t *testing.T) string
		want []string // the error's words; none: it opens
	}{
		{"qwen3-moe all bf16", folder("../testdata/hf/qwen3_moe", func(string) bool { return false }), nil},
		{"qwen3-moe router in f32", folder("../testdata/hf/qwen3_moe", func(n string) bool { return strings.HasSuffix(n, "mlp.gate.weight") }), nil},
		{"qwen3-moe one expert's up in f32", folder("../testdata/hf/qwen3_moe", func(n string) bool { return n == "model.layers.0.mlp.experts.1.up_proj.weight" }),
			[]string{"experts of layer 0 differ in dtype", `"model.layers.0.mlp.experts.0.gate_proj.weight" is bf16`, `"model.layers.0.mlp.experts.1.up_proj.weight" f32`}},
		{"qwen3-moe down projections in f32", folder("../testdata/hf/qwen3_moe", func(n string) bool { return strings.HasSuffix(n, "down_proj.weight") }),
			[]string{"experts of layer 0 differ in dtype", `"model.layers.0.mlp.experts.0.down_proj.weight" f32`}},
		{"mixtral expert 0 in f32", folder("../testdata/hf/mixtral", func(n string) bool { return strings.Contains(n, ".experts.0.") }),
			[]string{"experts of layer 0 differ in dtype", `"model.layers.0.block_sparse_moe.experts.0.w1.weight" is f32`, `"model.layers.0.block_sparse_moe.experts.1.w1.weight" bf16`}},
		{"gguf mixtral as stored", func(*testing.T) string { return "../testdata/gguf/mixtral-f32.gguf" }, nil},
		{"gguf mixtral down stack in bf16", func(t *testing.T) string {
			return ggufWithBF16(t, "../testdata/gguf/mixtral-f32.gguf", "blk.1.ffn_down_exps.weight")
		}, []string{"experts of layer 1 differ in dtype", `"blk.1.ffn_gate_exps.weight" is F32`, `"blk.1.ffn_down_exps.weight" BF16`}},
		{"gguf gate and up stacks packed differently", func(t *testing.T) string {
			b, err := os.ReadFile("../testdata/gguf/qwen3_moe-q8_0.gguf")
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(p, retype(t, b, "blk.0.ffn_up_exps.weight", gguf.Q4_0), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}, []string{"experts of layer 0 differ in format", `"blk.0.ffn_gate_exps.weight" is Q8_0`, `"blk.0.ffn_up_exps.weight" Q4_0`}},
		{"mlx experts a tensor each", unstacked(false), nil},
		{"mlx expert 1's up at 8 bits", unstacked(true),
			[]string{"experts of layer 0 differ in format", `"model.layers.0.mlp.experts.0.gate_proj.weight" is affine 4-bit, group 64, bf16 scales`, `"model.layers.0.mlp.experts.1.up_proj.weight" affine 8-bit, group 64, bf16 scales`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.make(t)
			_, src, err := Open(Spec{Model: p})
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				src.Close()
				return
			}
			if err == nil {
				src.Close()
				t.Fatalf("opened, want an error saying %q", c.want)
			}
			for _, w := range append(c.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			// Asked for one dtype, float experts are converted to it.
			if strings.Contains(c.want[0], "differ in dtype") {
				bf := bridge.BF16
				_, src, err = Open(Spec{Model: p, DType: &bf})
				if err != nil {
					t.Fatalf("in bf16: %v", err)
				}
				src.Close()
			}
		})
	}
}

// bf16 is f32's little-endian values cut to bfloat16 (their high halves).
func bf16(f32 []byte) []byte {
	half := make([]byte, len(f32)/2)
	for j := range len(f32) / 4 {
		copy(half[2*j:], f32[4*j+2:4*j+4])
	}
	return half
}

// ggufWithBF16 is a copy of the GGUF file src with its F32 tensor name
// stored as bf16.
func ggufWithBF16(t *testing.T, src, name string) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor(name)
	if !ok || ti.Type != gguf.F32 {
		t.Fatalf("%s is %v in %s, want an F32 tensor", name, ti.Type, src)
	}
	half := bf16(f.Bytes(ti))
	f.Close()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, retypeData(t, b, name, gguf.BF16, half), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
