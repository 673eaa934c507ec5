package model

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/gguftest"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// The GPT-2 fixture's config.json (transformers' spelling, n_* keys).
func TestGPT2Config(t *testing.T) {
	c, err := LoadDir(filepath.Join(fixtures, "gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.GPT2() || !c.LearnedPositions() || c.Hidden != 128 || c.Layers != 2 || c.Heads != 4 || c.KVHeads != 4 || c.HeadDim != 32 ||
		c.Inter != 512 || c.MaxPos != 256 || c.Eps != 1e-5 || !c.TieEmbed || !c.QKVBias || c.Vocab != 512 {
		t.Fatalf("config %+v", c)
	}
	// The hub's gpt2: no architectures in some copies, model_type only;
	// n_inner set.
	hub := `{"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
		"n_inner": 3000, "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new"}`
	c, err = ParseHFConfig("config.json", []byte(hub))
	if err != nil {
		t.Fatal(err)
	}
	if !c.GPT2() || c.Inter != 3000 || c.HeadDim != 64 {
		t.Fatalf("hub config %+v", c)
	}
	// GPT2Config's attribute_map: the common spellings of its sizes read
	// as n_embd, n_layer, n_head and n_positions.
	for _, alias := range []string{
		`{"model_type": "gpt2", "vocab_size": 50257, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "max_position_embeddings": 1024, "n_inner": 3000}`,
		`{"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "hidden_size": 768, "n_layer": 12, "num_hidden_layers": 12, "n_head": 12, "n_positions": 1024, "max_position_embeddings": 1024, "n_inner": 3000}`,
	} {
		a, err := ParseHFConfig("config.json", []byte(alias))
		if err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		if a.Hidden != c.Hidden || a.Layers != c.Layers || a.Heads != c.Heads || a.HeadDim != c.HeadDim || a.MaxPos != c.MaxPos || a.Inter != c.Inter {
			t.Errorf("%s: config %+v, want %+v", alias, a, c)
		}
	}
	p, _ := Preset("gpt2")
	if n := p.Params(); n < 124e6 || n > 125e6 {
		t.Errorf("gpt2 preset has %d parameters, want 124.4M", n)
	}
}

func TestGPT2ConfigErrors(t *testing.T) {
	base := `"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16`
	for _, c := range []struct{ json, want string }{
		{`{` + base + `, "activation_function": "gelu"}`, `activation_function "gelu" is not supported`},
		{`{` + base + `, "activation_function": "relu"}`, `activation_function "relu"`},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 3, "n_positions": 16}`, "not a multiple of n_head=3"},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": null}`, "n_positions is null (at line 1, column 113): want a whole number"},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "max_position_embeddings": 0}`, "config.json: n_positions is missing or 0: it must be positive"},
		// transformers builds GPT2MLP n_inner wide whenever it is not None.
		{`{` + base + `, "n_inner": 0}`, "config.json: n_inner=0 must be positive (leave it out, or null, for 4 × n_embd)"},
		{`{` + base + `, "activation_function": ""}`, `config.json: activation_function "" is not supported`},
		{`{` + base + `, "n_inner": -3}`, "config.json: n_inner=-3 must be positive"},
		{`{` + base + `, "scale_attn_by_inverse_layer_idx": true}`, "scale_attn_by_inverse_layer_idx"},
		{`{` + base + `, "hidden_size": 16}`, "n_embd=8 and hidden_size=16 disagree"},
		// n_inner and the head size follow from n_embd: only n_embd is named.
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 0, "n_layer": 1, "n_head": 2, "n_positions": 16}`,
			"config.json: n_embd is missing or 0: it must be positive"},
		{`{"architectures": ["GPT2LMHeadModel"], "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 0, "n_positions": 16}`,
			"config.json: n_head is missing or 0: it must be positive"},
	} {
		_, err := ParseHFConfig("config.json", []byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "config.json") {
			t.Errorf("%s: err = %v, want %q", c.json, err, c.want)
		}
		// An error names what is wrong alone, not what follows from it.
		if err != nil && strings.Contains(c.want, "missing or 0") && err.Error() != c.want {
			t.Errorf("%s: err = %v, want %q", c.json, err, c.want)
		}
	}
}

// f32At reads element i of little-endian f32 bytes.
func f32At(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }

// Conv1D weights come out [out, in]: element (o, i) of what the source
// hands out is element (i, o) of the stored tensor, in the stored dtype and
// converted; the hub's names without "transformer." load the same.
func TestGPT2Conv1DTransposed(t *testing.T) {
	dir := filepath.Join(fixtures, "gpt2")
	cfg, src, err := Open(Spec{Model: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	f, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for _, s := range cfg.Tensors() {
		if !s.Transposed {
			continue
		}
		n++
		_, got, err := src.Tensor(s)
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := f.Bytes(s.Name)
		out, in := s.Shape[0], s.Shape[1]
		for _, oi := range [][2]int{{0, 0}, {out - 1, 0}, {0, in - 1}, {out / 3, in / 2}, {out - 1, in - 1}} {
			if a, b := f32At(got, oi[0]*in+oi[1]), f32At(stored, oi[1]*out+oi[0]); a != b {
				t.Fatalf("%s (%d, %d): %v, stored %v", s.Name, oi[0], oi[1], a, b)
			}
		}
	}
	if n != 4*cfg.Layers {
		t.Fatalf("%d Conv1D tensors, want %d", n, 4*cfg.Layers)
	}

	// The hub's spelling, converted to bf16 on the way.
	hub := t.TempDir()
	var ts []safetensors.WriteTensor
	for _, ti := range f.Tensors() {
		b, _ := f.Bytes(ti.Name)
		ts = append(ts, safetensors.WriteTensor{Name: strings.TrimPrefix(ti.Name, GPT2Prefix), DType: ti.DType, Shape: ti.Shape,
			Data: append([]byte(nil), b...)})
	}
	if err := safetensors.Write(filepath.Join(hub, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(hub, "config.json"), data, 0o644)
	bf := bridge.BF16
	_, hsrc, err := Open(Spec{Model: hub, DType: &bf})
	if err != nil {
		t.Fatal(err)
	}
	defer hsrc.Close()
	matrices := 0
	for _, s := range cfg.Tensors() {
		dt, b, err := hsrc.Tensor(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]bridge.DType{true: bridge.BF16, false: bridge.F32}[s.Matrix]; dt != want || int64(len(b)) != s.Elems()*int64(dt.Size()) {
			t.Fatalf("%s: %v, %d bytes", s.Name, dt, len(b))
		}
		if s.Matrix {
			matrices++
		}
	}
	// One copy a converted matrix: a transpose is released once converted,
	// not held until Close beside the copy it became.
	if held := len(hsrc.(*Checkpoint).mem.frees); held != matrices {
		t.Errorf("the source holds %d allocations for %d converted matrices", held, matrices)
	}
}

// A Conv1D stored [out, in] (as a Linear would be) is refused with both
// shapes named.
func TestGPT2WrongLayout(t *testing.T) {
	dir := copyFixture(t, "gpt2")
	p := filepath.Join(dir, "model.safetensors")
	f, _ := safetensors.Open(p)
	var ts []safetensors.WriteTensor
	for _, ti := range f.Tensors() {
		b, _ := f.Bytes(ti.Name)
		shape := ti.Shape
		if ti.Name == "transformer.h.1.mlp.c_fc.weight" {
			shape = []int{shape[1], shape[0]}
		}
		ts = append(ts, safetensors.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: shape, Data: append([]byte(nil), b...)})
	}
	f.Close()
	if err := safetensors.Write(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	err := loadAll(dir)
	if err == nil || !strings.Contains(err.Error(), `"transformer.h.1.mlp.c_fc.weight" has shape [512 128], the config implies [128 512]`) {
		t.Fatalf("err = %v", err)
	}
}

// GPT-2's fused attention is heads × head size = hidden: a GGUF file states
// the three apart, and a file where they disagree is refused before the
// kernels read past a row.
func TestGPT2HeadsMakeHidden(t *testing.T) {
	cfg, src, err := Open(Spec{Model: filepath.Join("..", "testdata", "gguf", "llamacpp-gpt2-q8_0.gguf")})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	for name, edit := range map[string]func(c *Config){
		"heads that do not divide": func(c *Config) { c.Heads, c.KVHeads, c.HeadDim = 3, 3, c.Hidden/3 },
		"a smaller head size":      func(c *Config) { c.HeadDim /= 2 },
		"fewer key/value heads":    func(c *Config) { c.KVHeads = c.Heads / 2 },
	} {
		c := *cfg
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "as GPT-2's attention needs") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the file as written: %v", err)
	}
}

// One part of a split GGUF file without the others is named as such, not by
// a missing tensor.
func TestSplitGGUFPart(t *testing.T) {
	b, err := gguftest.Bytes(gguftest.KV{Key: "general.architecture", Value: "llama"},
		gguftest.KV{Key: "split.no", Value: uint16(0)}, gguftest.KV{Key: "split.count", Value: uint16(3)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m-00001-of-00003.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(Spec{Model: path}); err == nil || !strings.Contains(err.Error(), "m-00002-of-00003.gguf: part 2 of 3 of the split GGUF file is missing") {
		t.Errorf("a split part: %v", err)
	}
}

// A quantization_config of another tool names its method as the file
// spells it, a string or not.
func TestForeignQuantMethod(t *testing.T) {
	for _, method := range []string{`"gptq"`, `5`} {
		dir := t.TempDir()
		cfg := `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
			"num_attention_heads": 2, "intermediate_size": 8, "quantization_config": {"quant_method": ` + method + `}}`
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		want := `quant_method ` + strconv.Quote(strings.Trim(method, `"`)) + ` is not supported`
		if _, _, err := Open(Spec{Model: dir}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("quant_method %s: %v, want %q", method, err, want)
		}
	}
}

// A per-module entry of null in mlx-lm's quantization is neither false (left
// unquantized) nor a setting.
func TestMLXModuleNull(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
		"num_attention_heads": 2, "intermediate_size": 8, "quantization": {"group_size": 64, "bits": 4, "lm_head": null}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(Spec{Model: dir}); err == nil || !strings.Contains(err.Error(), `quantization["lm_head"] is null: want an object or a boolean`) {
		t.Errorf("a null module: %v", err)
	}
}
