package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

const mlxFixture = "../testdata/mlx/llama-q4"

// mlxCopy copies the MLX fixture into a temporary folder, with its config's
// quantization edited by q and its tensors by edit (nil: unchanged).
func mlxCopy(t *testing.T, q func(map[string]any), edit func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	return mlxCopyOf(t, mlxFixture, q, edit)
}

// mlxCopyOf is mlxCopy of the fixture folder from.
func mlxCopyOf(t *testing.T, from string, q func(map[string]any), edit func([]safetensors.WriteTensor) []safetensors.WriteTensor) string {
	t.Helper()
	var config func(map[string]any)
	if q != nil {
		config = func(conf map[string]any) {
			q(conf["quantization"].(map[string]any))
			delete(conf, "quantization_config")
		}
	}
	return rewriteFolder(t, from, config, edit, map[string]string{"format": "mlx"})
}

// rewriteFolder writes a copy of the fixture folder from in a temporary
// folder: its config.json as config edits it, its tensors as edit leaves
// them, under the safetensors metadata meta.
func rewriteFolder(t *testing.T, from string, config func(map[string]any), edit func([]safetensors.WriteTensor) []safetensors.WriteTensor, meta map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(from, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if config != nil {
		var conf map[string]any
		if err := json.Unmarshal(raw, &conf); err != nil {
			t.Fatal(err)
		}
		config(conf)
		raw, _ = json.Marshal(conf)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(from, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.WriteTensor
	for _, info := range f.Tensors() {
		b, _ := f.Bytes(info.Name)
		ts = append(ts, safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), b...)})
	}
	if edit != nil {
		ts = edit(ts)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, meta); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openAll opens dir and asks for every tensor, as the engine's load does.
func openAll(dir string) error {
	cfg, src, err := Open(Spec{Model: dir})
	if err != nil {
		return err
	}
	defer src.Close()
	if err := cfg.Rotary().Check(cfg.HeadDim); err != nil && !cfg.LearnedPositions() {
		return err
	}
	for _, s := range cfg.Tensors() {
		if _, ok, err := src.(PackedSource).Packed(s); err != nil {
			return err
		} else if !ok {
			if _, _, err := src.Tensor(s); err != nil {
				return err
			}
		}
	}
	return nil
}

func TestMLXCheckpointOpens(t *testing.T) {
	cfg, src, err := Open(Spec{Model: mlxFixture})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	q, ok := cfg.Quant.For("model.layers.0.self_attn.q_proj.weight")
	if !ok || q.Bits != 4 || q.Group != 64 {
		t.Fatalf("q_proj packing %v %v", q, ok)
	}
	if _, ok := cfg.Quant.For("model.norm.weight"); ok {
		t.Fatal("a norm is packed")
	}
	if err := openAll(mlxFixture); err != nil {
		t.Fatal(err)
	}
	// Memory: packed bytes + scales, not bf16.
	plain := *cfg
	plain.Quant = nil
	if w, f := cfg.WeightBytes(bridge.BF16), plain.WeightBytes(bridge.BF16); w <= 0 || 3*w > f {
		t.Fatalf("packed weights take %d bytes, bf16 %d", w, f)
	}
}

// TestBadMLXCheckpoints: each is refused before any work, with the file
// and the tensor or setting named.
func TestBadMLXCheckpoints(t *testing.T) {
	replace := func(name string, fn func(*safetensors.WriteTensor)) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i := range ts {
				if ts[i].Name == name {
					fn(&ts[i])
				}
			}
			return ts
		}
	}
	const q = "model.layers.0.self_attn.q_proj"
	const gate = "model.layers.0.mlp.switch_mlp.gate_proj"
	drop := func(names ...string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return slices.Contains(names, w.Name) })
		}
	}
	cases := []struct {
		name    string
		quant   func(map[string]any)
		edit    func([]safetensors.WriteTensor) []safetensors.WriteTensor
		want    []string
		fixture string // mlxFixture if empty
	}{
		{"bits", func(m map[string]any) { m["bits"] = 7 }, nil, []string{"config.json", "7 bits is not supported"}, ""},
		{"group", func(m map[string]any) { m["group_size"] = 48 }, nil, []string{"config.json", "group size 48"}, ""},
		{"mode", func(m map[string]any) { m["mode"] = "fp3" }, nil, []string{"config.json", `mode "fp3" is not one of mlx's`}, ""},
		{"nvfp4 group", func(m map[string]any) { m["mode"] = "nvfp4" }, nil, []string{"config.json", "nvfp4 takes groups of 16 values of 4 bits, not 64 of 4"}, ""},
		// A module in mode mxfp8 (group 32, 8 bits: its defaults) whose
		// tensors are affine ones.
		{"mxfp8 scales", func(m map[string]any) { m[q] = map[string]any{"mode": "mxfp8"} }, nil,
			[]string{"model.safetensors", q + ".scales", "mode mxfp8 keeps a U8 scale"}, ""},
		{"mxfp4 group", func(m map[string]any) { m["mode"] = "mxfp4" }, nil, []string{"config.json", "mxfp4 takes groups of 32 values of 4 bits, not 64 of 4"}, ""},
		{"mxfp4 scales", func(m map[string]any) { m["mode"] = "mxfp4"; m["group_size"] = 32; m["bits"] = 4 }, nil,
			[]string{"model.safetensors", ".scales", "mode mxfp4 keeps a U8 scale"}, ""},
		// A module's object leaves out its group size: to_quantized takes
		// affine's 64, not the top level's 128, and the stored scales
		// (groups of 128) do not fit.
		{"module defaults", func(m map[string]any) { m[q] = map[string]any{"bits": 8} }, nil,
			[]string{"model.safetensors", q + ".scales", "groups of 64"}, "../testdata/mlx/qwen3-q8"},
		{"module bits", func(m map[string]any) { m[q] = map[string]any{"bits": 5, "group_size": 96} }, nil, []string{q, "group size 96"}, ""},
		{"scales shape", nil, replace(q+".scales", func(w *safetensors.WriteTensor) {
			w.Shape = []int{w.Shape[0] * 2, w.Shape[1] / 2}
		}), []string{"model.safetensors", q + ".scales", "groups of 64"}, ""},
		{"weight dtype", nil, replace(q+".weight", func(w *safetensors.WriteTensor) { w.DType = "F32" }), []string{"model.safetensors", q + ".weight", "want U32"}, ""},
		{"packed shape", nil, replace(q+".weight", func(w *safetensors.WriteTensor) {
			w.Shape = []int{w.Shape[0] / 2, w.Shape[1] * 2}
		}), []string{"model.safetensors", q + ".weight", "shape"}, ""},
		{"no biases", nil, drop(q + ".biases"), []string{q + ".biases"}, ""},
		{"scale dtype", nil, replace(q+".scales", func(w *safetensors.WriteTensor) {
			w.DType = "U16"
		}), []string{"model.safetensors", q + ".scales"}, ""},
		{"config bits", func(m map[string]any) { m["bits"] = 3 }, nil, []string{"model.safetensors", "3-bit values"}, ""},
		{"no tensors", nil, func([]safetensors.WriteTensor) []safetensors.WriteTensor { return nil }, []string{"is missing"}, ""},
		// mlx-lm's GPT-2: its positions are packed too, checked as any
		// packed tensor though the engine takes them as floats.
		{"positions scales", nil, replace("model.wpe.scales", func(w *safetensors.WriteTensor) {
			w.Shape = []int{w.Shape[0] / 2, w.Shape[1] * 2}
		}), []string{"model.safetensors", "model.wpe.scales", "groups of 64"}, "../testdata/mlx/gpt2-q4"},
		{"c_attn shape", nil, replace("model.h.1.attn.c_attn.weight", func(w *safetensors.WriteTensor) {
			w.Shape = []int{w.Shape[1] * 8, w.Shape[0] / 8}
		}), []string{"model.safetensors", "model.h.1.attn.c_attn.weight", "shape"}, "../testdata/mlx/gpt2-q4"},
		{"experts without scales", nil, drop(gate+".scales", gate+".biases"),
			[]string{"model.safetensors", gate + ".weight", "U32", gate + ".scales"}, "../testdata/mlx/qwen3_moe-q4"},
		{"experts missing", nil, drop(gate+".weight", gate+".scales", gate+".biases"),
			[]string{"experts.0.gate_proj.weight", "is missing", gate + ".weight"}, "../testdata/mlx/qwen3_moe-q4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.fixture == "" {
				c.fixture = mlxFixture
			}
			// Refused as the checkpoint opens, before anything reads it.
			_, src, err := Open(Spec{Model: mlxCopyOf(t, c.fixture, c.quant, c.edit)})
			if err == nil {
				src.Close()
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestQuantPresets: every preset opens in every packed format, with memory
// below its bf16 figure, q4 below q4_k_m, and the MLX widths in order
// (q2 below q3 ... below q8).
func TestQuantPresets(t *testing.T) {
	for _, name := range PresetNames() {
		bf, _ := PresetFormat(name, Format{DType: bridge.BF16})
		prev := bf.WeightBytes(bridge.BF16)
		for _, f := range []string{"q8", "q8_0", "q4_k_m", "q4"} {
			c, err := PresetFormat(name, Format{DType: bridge.BF16, Quant: f})
			if err != nil {
				t.Fatal(err)
			}
			w := c.WeightBytes(bridge.BF16)
			if w >= bf.WeightBytes(bridge.BF16) {
				t.Errorf("%s %s: %d bytes, not below bf16's %d", name, f, w, bf.WeightBytes(bridge.BF16))
			}
			if f == "q4" && w >= prev {
				t.Errorf("%s q4: %d bytes, not below q4_k_m's %d", name, w, prev)
			}
			prev = w
		}
	}
	for _, name := range PresetNames() {
		prev := int64(0)
		for _, f := range []string{"q2", "q3", "q4", "q5", "q6", "q8"} {
			c, err := PresetFormat(name, Format{DType: bridge.BF16, Quant: f})
			if err != nil {
				t.Fatal(err)
			}
			if w := c.WeightBytes(bridge.BF16); w <= prev {
				t.Errorf("%s %s: %d bytes, not above the narrower width's %d", name, f, w, prev)
			} else {
				prev = w
			}
		}
	}
	// Q5_K_M is Q5_K (Q5_1, as it is transcoded, where 256 does not divide
	// a row), Q6_K as Q4_K_M keeps it: between Q4_K_M and Q8_0 in bytes,
	// and on a backend without Q5_K and 5-bit affine kernels at 8 bits
	// (RunOn).
	for _, name := range PresetNames() {
		var w [3]int64
		for i, f := range []string{"q4_k_m", "q5_k_m", "q8_0"} {
			c, err := PresetFormat(name, Format{DType: bridge.BF16, Quant: f})
			if err != nil {
				t.Fatal(err)
			}
			w[i] = c.WeightBytes(bridge.BF16)
		}
		if !(w[0] < w[1] && w[1] < w[2]) {
			t.Errorf("%s: q4_k_m, q5_k_m and q8_0 take %v bytes", name, w)
		}
		c, _ := PresetFormat(name, Format{DType: bridge.BF16, Quant: "q5_k_m"})
		wide := c.RunOn(eightBits{})
		for _, tn := range c.Tensors() {
			s, ok := c.Quant.For(tn.Name)
			if !ok || !tn.Matrix || s.Type == quant.Q6_K || s.Type == quant.Q8_0 {
				continue
			}
			k := tn.Shape[len(tn.Shape)-1]
			want := map[bool]quant.Spec{true: {Type: quant.Q5_K}, false: quant.Transcoders["Q5_1"].Into}[k%256 == 0]
			if s != want {
				t.Errorf("%s q5_k_m: %s (k %d) is %v, want %v", name, tn.Name, k, s, want)
			}
			if r, _ := wide.Quant.For(tn.Name); r.Type != quant.Affine || r.Bits != 8 || r.Group != 32 {
				t.Errorf("%s q5_k_m: %s runs as %v without Q5_K and 5-bit kernels", name, tn.Name, r)
			}
		}
	}
	for _, bad := range []string{"q7", "q1", "q16"} {
		if _, err := ParseFormat(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// TestBadGGUF: a GGUF fixture made wrong in one place is refused when it
// opens, with the file and the tensor named.
func TestBadGGUF(t *testing.T) {
	src, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	// info returns the offset of a tensor info's type field.
	typeField := func(b []byte, name string) int {
		i := strings.Index(string(b), name)
		if i < 0 {
			t.Fatalf("no %s in the fixture", name)
		}
		i += len(name)
		nd := int(b[i])
		return i + 4 + 8*nd
	}
	const q = "blk.0.attn_q.weight"
	cases := []struct {
		name string
		edit func([]byte) []byte
		want []string
	}{
		{"type", func(b []byte) []byte { b[typeField(b, q)] = 15; return b }, []string{q, "Q8_K", "does not read", "IQ4_NL"}},
		// ggml's newest types and the Arm layouts llama-quantize wrote in
		// 2024 are named, the latter with what to do instead.
		{"Q2_0", func(b []byte) []byte { b[typeField(b, q)] = 42; return b }, []string{q, "type Q2_0, which mtlbench does not read"}},
		{"Q4_0_4_4", func(b []byte) []byte { b[typeField(b, q)] = 31; return b }, []string{q, "Q4_0_4_4", "quantize the model again to Q4_0"}},
		{"IQ4_NL_4_4", func(b []byte) []byte { b[typeField(b, q)] = 36; return b }, []string{q, "IQ4_NL_4_4", "quantize the model again to IQ4_NL"}},
		{"cut short", func(b []byte) []byte { return b[:len(b)-1000] }, []string{"output.weight", "cut short"}},
		{"missing", func(b []byte) []byte {
			i := strings.Index(string(b), q)
			b[i+len("blk.0.attn_")] = 'x'
			return b
		}, []string{q, "missing"}},
		{"shape", func(b []byte) []byte {
			i := typeField(b, q) - 8 // the outer dimension
			b[i]++
			return b
		}, []string{"attn_q.weight", "shape"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			os.WriteFile(p, c.edit(append([]byte(nil), src...)), 0o644)
			openRefused(t, p, c.want...)
		})
	}
}

// A cached source widens a packed tensor once per width: engines made one
// after another share the copy, and it holds what Packed.Widen makes.
func TestCachedWidensOnce(t *testing.T) {
	cfg, src, err := Open(Spec{Model: "qwen3-moe-mini", Quant: "q4", Layers: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg.Quant.Default.Bits = 3 // the source reads the same scheme
	c := NewCached(src)
	var spec TensorSpec
	for _, s := range cfg.Tensors() {
		if s.Name == LayerPrefix(0)+"self_attn.q_proj.weight" {
			spec = s
		}
	}
	to := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: cfg.Quant.Default.Scale}
	a, _, err := c.PackedAs(spec, to)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := c.PackedAs(spec, to)
	if err != nil {
		t.Fatal(err)
	}
	if &a.Data[0] != &b.Data[0] || a.Spec != to {
		t.Errorf("widened twice: %v and %v, not one %v copy", a.Spec, b.Spec, to)
	}
	p, _, _ := c.Packed(spec)
	want, err := p.Convert(spec.Shape, to)
	if err != nil {
		t.Fatal(err)
	}
	// The source draws the widened form apart from Packed's (it keeps no
	// narrow copy: TestFormsHeldOnce), from the same seed.
	if !bytes.Equal(a.Data, want.Data) || !bytes.Equal(a.Scales, p.Scales) || !bytes.Equal(a.Biases, p.Biases) {
		t.Error("the cached widening differs from Packed.Convert's")
	}
	if _, _, err := c.PackedAs(spec, quant.Spec{Type: quant.Affine, Bits: 2, Group: 64, Scale: to.Scale}); err == nil {
		t.Error("narrowing to 2 bits: want an error")
	}
}

// A cached source converts a tensor to f32 once: engines made one after
// another over it get the same bytes, as the uncached conversion makes
// them, and a backend keying copies by host bytes copies them once.
func TestCachedConvertsToF32Once(t *testing.T) {
	cfg, src, err := Open(Spec{Model: "qwen3-moe-mini", Quant: "q4", Layers: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := NewCached(src)
	for _, name := range []string{LayerPrefix(0) + "mlp.experts.0.gate_proj.weight", LayerPrefix(0) + "input_layernorm.weight"} {
		var spec TensorSpec
		for _, s := range cfg.Tensors() {
			if s.Name == name {
				spec = s
			}
		}
		a, err := F32(c, spec)
		if err != nil {
			t.Fatal(err)
		}
		b, err := F32(c, spec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := F32(src, spec)
		if err != nil {
			t.Fatal(err)
		}
		if &a[0] != &b[0] {
			t.Errorf("%s: converted twice", name)
		}
		if !bytes.Equal(a, want) || int64(len(a)) != 4*spec.Elems() {
			t.Errorf("%s: the cached f32 bytes differ from the conversion's", name)
		}
	}
}

// eightBits are the rules of a backend with neither the Metal-only formats'
// kernels nor 5-bit affine ones.
type eightBits struct{}

func (eightBits) SupportsQuant(s quant.Spec) error {
	if quant.MetalOnly(s) || s.Type == quant.Affine && s.Bits == 5 {
		return fmt.Errorf("no %v kernels", s)
	}
	return nil
}

// A rope_freqs tensor of more factors than the heads take is refused by
// its length, before its values are copied: one as large as the file
// (sparse here, 64 MiB of factors never written) would take as much memory.
func TestGGUFRopeFreqsCountedFirst(t *testing.T) {
	b, err := os.ReadFile("../testdata/gguf/llama-rope-llama3.gguf")
	if err != nil {
		t.Fatal(err)
	}
	// rope_freqs.weight is the file's last tensor, its 16 factors its end.
	const n = 16 << 20
	binary.LittleEndian.PutUint64(b[after(t, b, "rope_freqs.weight")+4:], n)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, int64(len(b))-16*4+n*4); err != nil {
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	_, s, err := Open(Spec{Model: p})
	runtime.ReadMemStats(&m1)
	if s != nil {
		s.Close()
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > n {
		t.Errorf("opening it allocated %d bytes", alloc)
	}
	if want := `tensor "rope_freqs.weight" holds 16777216 rope frequency factors for heads of 32 (want 16)`; err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), p) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// A GGUF file's RoPE as this build cannot run it, or as no converter
// writes it, is refused with the file and what is wrong named.
func TestBadGGUFRoPE(t *testing.T) {
	after := func(b []byte, name string) int { return after(t, b, name) }
	cases := []struct {
		fixture string
		edit    func([]byte)
		want    string
		cut     int // bytes the edit takes from the data's end, so the file stays whole
	}{
		// key, then its u32 value type: the value follows.
		{"linear", func(b []byte) { copy(b[after(b, "rope.scaling.type")+4+8:], "LINEAR") }, `rope scaling "LINEAR" is not supported`, 0},
		{"linear", func(b []byte) {
			binary.LittleEndian.PutUint32(b[after(b, "rope.scaling.factor")+4:], math.Float32bits(0.5))
		}, "llama.rope.scaling: rope scaling factor 0.5 must be a number from 1 to", 0},
		{"linear", func(b []byte) { binary.LittleEndian.PutUint32(b[after(b, "rope.dimension_count")+4:], 16) }, "rope.dimension_count 16 is not the head size 32", 0},
		{"yarn", func(b []byte) { copy(b[after(b, "rope.scaling.type")+4+8:], "yarm") }, `rope scaling "yarm" is not supported`, 0},
		{"yarn", func(b []byte) {
			binary.LittleEndian.PutUint32(b[after(b, "rope.scaling.original_context_length")+4:], 0)
		}, "llama.rope.scaling.original_context_length is 0", 0},
		// name, u32 dims, then the first dimension.
		// rope_freqs.weight is the file's last tensor: a smaller one ends the
		// file sooner.
		{"llama3", func(b []byte) { binary.LittleEndian.PutUint64(b[after(b, "rope_freqs.weight")+4:], 8) }, "8 rope frequency factors for heads of 32 (want 16)", 32},
		{"llama3", func(b []byte) { binary.LittleEndian.PutUint32(b[after(b, "rope_freqs.weight")+4+8:], 1) }, `"rope_freqs.weight" is F16 of shape [16], not a 1-D F32 tensor`, 32},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			b, err := os.ReadFile("../testdata/gguf/llama-rope-" + c.fixture + ".gguf")
			if err != nil {
				t.Fatal(err)
			}
			c.edit(b)
			p := filepath.Join(t.TempDir(), "m.gguf")
			os.WriteFile(p, b[:len(b)-c.cut], 0o644)
			openRefused(t, p, c.want)
		})
	}
}

// Counts and sizes in a GGUF file's metadata are checked as the file
// states them, each error naming the key.
func TestBadGGUFMetadata(t *testing.T) {
	after := func(b []byte, name string) int { return after(t, b, name) }
	// keyAt is the offset of key's value type: past its length and name,
	// so that a key is not found inside a longer one.
	keyAt := func(b []byte, key string) int {
		return after(b, string(binary.LittleEndian.AppendUint64(nil, uint64(len(key))))+key)
	}
	u32 := func(key string, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[keyAt(b, key)+4:], v) }
	}
	cases := []struct {
		edit func([]byte)
		want string
	}{
		{u32("qwen3moe.block_count", math.MaxUint32), "qwen3moe.block_count = 4294967295 is out of range (0 to 2147483647)"},
		{u32("qwen3moe.attention.head_count", 0), "qwen3moe.attention.head_count is 0"},
		{u32("qwen3moe.attention.head_count_kv", 0), "qwen3moe.attention.head_count_kv is 0"},
		{u32("qwen3moe.expert_count", 0), "qwen3moe.expert_count is 0"},
		{u32("qwen3moe.expert_count", math.MaxUint32), "qwen3moe.expert_count = 4294967295 is out of range (0 to 2147483647)"},
		{func(b []byte) {
			i := keyAt(b, "qwen3moe.expert_count")
			binary.LittleEndian.PutUint32(b[i:], 5) // i32
			binary.LittleEndian.PutUint32(b[i+4:], uint32(0xfffffffc))
		}, "qwen3moe.expert_count = -4 is out of range"},
		// What the config's checks find is named by the file's keys.
		{u32("qwen3moe.attention.head_count_kv", 3), "qwen3moe.attention.head_count=4 is not a multiple of qwen3moe.attention.head_count_kv=3"},
		{u32("qwen3moe.expert_used_count", 9), "qwen3moe.expert_used_count=9 must be in 1..qwen3moe.expert_count=4"},
		{u32("qwen3moe.block_count", 5000), "qwen3moe.block_count=5000 is beyond what mtlbench runs"},
		{u32("qwen3moe.attention.key_length", 15), "qwen3moe.attention.value_length 64 differs from qwen3moe.attention.key_length 15"},
		{u32("qwen3moe.rope.freq_base", 0xff800000), "qwen3moe.rope.freq_base=-Inf must be a finite number > 0"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			b, err := os.ReadFile("../testdata/gguf/qwen3_moe-q4_0.gguf")
			if err != nil {
				t.Fatal(err)
			}
			c.edit(b)
			p := filepath.Join(t.TempDir(), "m.gguf")
			os.WriteFile(p, b, 0o644)
			openRefused(t, p, c.want)
			// Each key's error is said once.
			if _, _, err := Open(Spec{Model: p}); strings.Count(err.Error(), c.want) != 1 {
				t.Errorf("error %q says %q more than once", err, c.want)
			}
		})
	}
}

// after returns the offset just past name's last occurrence in b.
func after(t *testing.T, b []byte, name string) int {
	t.Helper()
	i := strings.LastIndex(string(b), name)
	if i < 0 {
		t.Fatalf("no %s in the fixture", name)
	}
	return i + len(name)
}

// retype gives tensor name of the GGUF file b the type typ, and moves the
// data of the tensors after it by the change in its size, so the file stays
// whole: its data every tensor's bytes and their padding (runner/gguf). b
// ends at its last tensor's padding, as gguf-py writes it.
func retype(t *testing.T, b []byte, name string, typ gguf.Type) []byte {
	t.Helper()
	return retypeData(t, b, name, typ, nil)
}

// retypeData is retype with the tensor's new bytes data; nil keeps as much
// of the old bytes as fit, zeros after them.
func retypeData(t *testing.T, b []byte, name string, typ gguf.Type, data []byte) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "retype.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	up := func(n uint64) uint64 { return (n + f.Alignment - 1) / f.Alignment * f.Alignment }
	end := uint64(0)
	for _, ti := range f.Tensors {
		end = max(end, up(ti.Offset+ti.Size))
	}
	start := uint64(len(b)) - end
	info, ok := f.Tensor(name)
	vals, size, known := typ.Block()
	if !ok || !known {
		t.Fatalf("retype %s to %v", name, typ)
	}
	elems := uint64(1)
	for _, d := range info.Dims {
		elems *= d
	}
	size64 := elems / uint64(vals) * uint64(size)
	if data != nil && uint64(len(data)) != size64 {
		t.Fatalf("retype %s to %v: %d bytes, want %d", name, typ, len(data), size64)
	}
	old, now := up(info.Size), up(size64)
	// A tensor info is its name, its dimension count, its dimensions, its
	// type and its offset.
	field := func(n string) int {
		i := after(t, b, n)
		return i + 4 + 8*int(binary.LittleEndian.Uint32(b[i:]))
	}
	binary.LittleEndian.PutUint32(b[field(name):], uint32(typ))
	for _, ti := range f.Tensors {
		if ti.Offset > info.Offset {
			binary.LittleEndian.PutUint64(b[field(ti.Name)+4:], ti.Offset+now-old)
		}
	}
	at := start + info.Offset
	if data != nil {
		out := append(slices.Clone(b[:at]), data...)
		out = append(out, make([]byte, now-size64)...)
		return append(out, b[at+old:]...)
	}
	out := slices.Clone(b[:at+min(old, now)])
	out = append(out, make([]byte, now-min(old, now))...)
	return append(out, b[at+old:]...)
}

// openRefused opens the model at p and wants an error naming p and each of
// want.
func openRefused(t *testing.T, p string, want ...string) {
	t.Helper()
	_, s, err := Open(Spec{Model: p})
	if err == nil {
		s.Close()
		t.Fatal("no error")
	}
	for _, w := range append(want, p) {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not say %q", err, w)
		}
	}
}

// tinyGGUF is a GGUF v3 file of arch's metadata (kv, integers) and F32
// [8, 16] tensors named names, as gguf-py lays it out (data aligned to 32).
func tinyGGUF(t *testing.T, arch string, kv map[string]uint32, names ...string) string {
	t.Helper()
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	keys := slices.Sorted(maps.Keys(kv))
	b = append(b, "GGUF"...)
	u32(3)
	u64(uint64(len(names)))
	u64(uint64(len(keys) + 1))
	str("general.architecture")
	u32(8)
	str(arch)
	for _, k := range keys {
		str(k)
		u32(4)
		u32(kv[k])
	}
	for i, n := range names {
		str(n)
		u32(2)
		u64(8)
		u64(16)
		u32(0)
		u64(uint64(i * 8 * 16 * 4))
	}
	b = append(b, make([]byte, (32-len(b)%32)%32+len(names)*8*16*4)...)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// llama.cpp writes Mixtral as llama with experts: such a file opens as
// Mixtral (the mixtral fixture's logits, and those of the same file with
// its experts a tensor each, are checked in runner/engine); other
// architectures with experts are refused by name, as they open.
func TestGGUFLlamaWithExperts(t *testing.T) {
	cfg, s, err := Open(Spec{Model: "../testdata/gguf/mixtral-f32.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if cfg.Architecture != "MixtralForCausalLM" || cfg.NumExperts != 4 || cfg.TopK != 2 || cfg.MoEInter != 128 || !cfg.NormTopK ||
		!cfg.IsMoELayer(0) || !cfg.IsMoELayer(1) || cfg.QKNorm {
		t.Fatalf("config %+v", cfg)
	}
	// The same model as llama.cpp's converter wrote it before it stacked
	// the experts: a tensor each (blk.N.ffn_gate.E.weight).
	split, s, err := Open(Spec{Model: "../testdata/gguf/mixtral-split-q4_0.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if split.Architecture != cfg.Architecture || split.NumExperts != 4 || split.TopK != 2 || split.MoEInter != 128 {
		t.Fatalf("experts a tensor each: config %+v", split)
	}
	for _, c := range []struct {
		name string
		want *quant.Spec
	}{{"model.layers.1.mlp.experts.3.gate_proj.weight", &quant.Spec{Type: quant.Q4_0}},
		{"model.layers.1.mlp.experts.3.down_proj.weight", &quant.Spec{Type: quant.Q8_0}}} {
		if got, _ := split.Quant.For(c.name); got != *c.want {
			t.Errorf("%s runs as %v, want %v", c.name, got, *c.want)
		}
	}
	// Experts of one projection in a layer stored in two types: refused as
	// the file opens, both tensors named.
	b, err := os.ReadFile("../testdata/gguf/mixtral-split-q4_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	b = retype(t, b, "blk.1.ffn_down.2.weight", gguf.Q4_0) // Q8_0 -> Q4_0
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	openRefused(t, p, `the experts of layer 1 differ in format: "blk.1.ffn_down.0.weight" is Q8_0, "blk.1.ffn_down.2.weight" Q4_0`)
	moe := func(arch string) map[string]uint32 {
		return map[string]uint32{arch + ".embedding_length": 8, arch + ".block_count": 1, arch + ".feed_forward_length": 16,
			arch + ".attention.head_count": 2, arch + ".expert_count": 8, arch + ".expert_used_count": 2}
	}
	for _, c := range []struct {
		name, arch string
		tensors    []string
		want       string
	}{
		{"qwen2 with experts", "qwen2", []string{"token_embd.weight"}, "qwen2 with qwen2.expert_count 8 is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := tinyGGUF(t, c.arch, moe(c.arch), c.tensors...)
			openRefused(t, p, c.want)
		})
	}
}

// Every type read by transcoding is one the GGUF reader sizes as its
// transcoder does, and one the unsupported-type message names.
func TestGGUFTranscodedTypesRead(t *testing.T) {
	seen := 0
	for ty := gguf.Type(0); ty < 64; ty++ {
		tc, ok := quant.Transcoders[ty.String()]
		if !ok {
			continue
		}
		seen++
		if vals, bytes, ok := ty.Block(); !ok || vals != tc.Values || bytes != tc.Bytes {
			t.Errorf("%v: the reader's blocks are %d values in %d bytes (ok %v), the transcoder's %d in %d", ty, vals, bytes, ok, tc.Values, tc.Bytes)
		}
		if !strings.Contains(gguf.TypesRead(), " "+tc.Name) {
			t.Errorf("gguf.TypesRead() (%q) does not name %s", gguf.TypesRead(), tc.Name)
		}
	}
	if seen != len(quant.Transcoders) {
		t.Errorf("%d of %d transcoders have a GGUF type", seen, len(quant.Transcoders))
	}
}

// TestBadGPT2GGUF: a GPT-2 GGUF file needs its positions' row count, and
// its fused q/k/v as the metadata shapes it; each is refused by name.
func TestBadGPT2GGUF(t *testing.T) {
	const fixture = "../testdata/gguf/llamacpp-gpt2-q8_0.gguf"
	cfg, s, err := Open(Spec{Model: fixture})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !cfg.GPT2() || !cfg.TieEmbed || !cfg.QKVBias || cfg.MaxPos != 256 || cfg.Eps != 1e-5 {
		t.Fatalf("config %+v: want GPT-2, tied, q/k/v biases, 256 positions, eps 1e-5", cfg)
	}
	src, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	rename := func(from, to string) func([]byte) []byte {
		return func(b []byte) []byte {
			i := strings.Index(string(b), from)
			if i < 0 {
				t.Fatalf("no %s in the fixture", from)
			}
			copy(b[i:], to)
			return b
		}
	}
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want []string
	}{
		{"no context length", rename("gpt2.context_length", "gpt2.context_lengtX"), []string{"missing gpt2.context_length"}},
		{"no qkv", rename("blk.1.attn_qkv.weight", "blk.1.attn_qkx.weight"), []string{"blk.1.attn_qkv.weight", "missing", "transformer.h.1.attn.c_attn.weight"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "m.gguf")
			os.WriteFile(p, c.edit(append([]byte(nil), src...)), 0o644)
			openRefused(t, p, c.want...)
		})
	}
}

// mlx-lm's GPT-2 opens with its tensors under "model.", its matrices packed
// as stored ([out, in]) and its learned positions as floats.
func TestMLXGPT2(t *testing.T) {
	cfg, src, err := Open(Spec{Model: "../testdata/mlx/gpt2-q4"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if !cfg.GPT2() {
		t.Fatalf("architecture %s", cfg.Architecture)
	}
	for _, name := range []string{GPT2Embed, GPT2LayerPrefix(0) + "attn.c_attn.weight", GPT2LayerPrefix(1) + "mlp.c_proj.weight"} {
		if _, ok := cfg.Quant.For(name); !ok {
			t.Errorf("%s: not packed", name)
		}
	}
	if q, ok := cfg.Quant.For(GPT2Positions); ok {
		t.Errorf("positions packed as %v: the engine adds them as floats", q)
	}
	var pos TensorSpec
	for _, s := range cfg.Tensors() {
		if s.Name == GPT2Positions {
			pos = s
		}
	}
	dt, data, err := src.Tensor(pos)
	if err != nil || dt != bridge.F32 || len(data) != 4*pos.Shape[0]*pos.Shape[1] {
		t.Fatalf("positions: %v, %d bytes, %v", dt, len(data), err)
	}
}

// An mxfp4 folder lists its mxfp4 matrices with what they run as: as
// stored where MXFP4 has kernels (Metal, rules nil), else 40 bytes a group
// of 32 for the 17 stored (8-bit affine codes, f32 scales and biases); the
// router apart (affine 8-bit), a switch_mlp stack once.
func TestMLXFormats(t *testing.T) {
	_, src, err := Open(Spec{Model: "../testdata/mlx/qwen3_moe-mxfp4"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		rules bridge.QuantSupport
		runs  string
		ratio float64
	}{{nil, "", 1}, {eightBits{}, "affine 8-bit, group 32, f32 scales", 40.0 / 17}} {
		fs := src.(FormatLister).Formats(c.rules)
		got := map[string]FormatCount{}
		for _, f := range fs {
			got[f.Stored] = f
		}
		mx, ok := got["mxfp4"]
		// 2 layers: q, k, v, o and three expert stacks; the embedding and LM head.
		if !ok || mx.Tensors != 16 || mx.RunsAs != c.runs {
			t.Fatalf("formats %+v: want 16 mxfp4 tensors run as %q", fs, c.runs)
		}
		if r := float64(mx.RunBytes) / float64(mx.FileBytes); c.runs != "" && math.Abs(r-c.ratio) > 0.01 {
			t.Errorf("mxfp4 runs at %.3f× its stored bytes, want %.3f", r, c.ratio)
		}
		if r, ok := got["affine 8-bit, group 64, bf16 scales"]; !ok || r.Tensors != 2 {
			t.Errorf("formats %+v: want the 2 routers at affine 8 bits", fs)
		}
	}
}

// mlx's nvfp4 and mxfp8 folders are listed by mode and laid out as NVFP4
// and MXFP8 rows: the file's values and scales, each row padded to 16
// bytes.
func TestMLXFPFolders(t *testing.T) {
	for _, c := range []struct {
		mode string
		spec quant.Spec
	}{{"nvfp4", quant.Spec{Type: quant.NVFP4}}, {"mxfp8", quant.Spec{Type: quant.MXFP8}}} {
		t.Run(c.mode, func(t *testing.T) {
			cfg, src, err := Open(Spec{Model: "../testdata/mlx/qwen3_moe-" + c.mode})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			fs := src.(FormatLister).Formats(nil)
			var got *FormatCount
			for i := range fs {
				if fs[i].Stored == c.mode {
					got = &fs[i]
				}
			}
			if got == nil || got.Tensors != 16 || got.RunsAs != "" {
				t.Fatalf("formats %+v: want 16 %s tensors run as stored", fs, c.mode)
			}
			var laid, rows int64
			for _, tn := range cfg.Tensors() {
				s, ok := cfg.Quant.For(tn.Name)
				if !ok || !tn.Matrix {
					continue
				}
				p, packed, err := src.(PackedSource).Packed(tn)
				if err != nil || !packed {
					t.Fatalf("%s: packed %v, %v", tn.Name, packed, err)
				}
				if p.Spec != s {
					t.Fatalf("%s: read as %v, the scheme says %v", tn.Name, p.Spec, s)
				}
				if p.Spec == c.spec {
					laid += int64(len(p.Data))
					rows += int64(tn.Shape[0])
				}
			}
			// Each row its values and scales, padded to 16 bytes.
			if laid < got.FileBytes || laid >= got.FileBytes+16*rows {
				t.Errorf("%s matrices laid out in %d bytes, the file holds %d in %d rows", c.mode, laid, got.FileBytes, rows)
			}
		})
	}
}

// mlx-lm's quantize_activations (its QQLinear products) is refused by
// name as the folder opens; false is read as absent.
func TestMLXQuantizedActivations(t *testing.T) {
	for _, on := range []bool{true, false} {
		dir := t.TempDir()
		from := "../testdata/mlx/qwen3-nvfp4"
		raw, err := os.ReadFile(filepath.Join(from, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var conf map[string]any
		json.Unmarshal(raw, &conf)
		conf["quantize_activations"] = on
		raw, _ = json.Marshal(conf)
		os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644)
		st, err := os.ReadFile(filepath.Join(from, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "model.safetensors"), st, 0o644)
		_, src, err := Open(Spec{Model: dir})
		if on {
			if err == nil || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), "quantize_activations") {
				t.Errorf("quantize_activations true: got %v, want an error naming config.json and the key", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("quantize_activations false: %v", err)
		}
		src.Close()
	}
}

// A layer whose experts a file packs in part is counted as the engine
// loads it, in f32 (ExpertsInF32), with a packed router beside them
// (RouterInF32); a file that packs them all is counted packed. A router
// the file stores in F32 is counted so (QuantScheme.F32).
func TestPartlyPackedExpertsCountedInF32(t *testing.T) {
	for _, tc := range []struct {
		path                       string
		experts, router, routerF32 bool
	}{
		// gate and up packed, down (64 wide, groups of 128) in floats,
		// the router at 8 bits
		{"../testdata/mlx/qwen3_moe-q4-partial", true, true, false},
		// gate and up in F16 (rows of 48), down in Q8_0, the router in F32
		{"../testdata/gguf/llamacpp-qwen3_moe-partial-q8_0.gguf", true, false, true},
		{"../testdata/mlx/qwen3_moe-q4", false, false, false},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			cfg, src, err := Open(Spec{Model: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for l := range cfg.Layers {
				if got := cfg.ExpertsInF32(l); got != tc.experts {
					t.Errorf("layer %d: ExpertsInF32 %v, want %v", l, got, tc.experts)
				}
				if got := cfg.RouterInF32(l); got != tc.router {
					t.Errorf("layer %d: RouterInF32 %v, want %v", l, got, tc.router)
				}
			}
			for _, s := range cfg.Tensors() {
				if !isExpertTensor(s.Name) && !strings.HasSuffix(s.Name, "mlp.gate.weight") {
					continue
				}
				q, packed := cfg.Quant.For(s.Name)
				want := s.Elems() * int64(bridge.BF16.Size())
				f32 := tc.experts
				if !isExpertTensor(s.Name) {
					f32 = tc.router || tc.routerF32
				}
				switch {
				case f32:
					want = s.Elems() * 4
				case packed:
					want = q.Bytes(s.Elems(), s.Shape[len(s.Shape)-1])
				}
				if got := cfg.TensorBytes(s, bridge.BF16); got != want {
					t.Errorf("%s: %d bytes, want %d", s.Name, got, want)
				}
			}
		})
	}
}

// A GGUF Q5_K tensor asked for in a form of the CPU and CUDA (PackedAs,
// 8-bit affine groups) is transcoded straight into it: one copy, not the
// 5-bit form and then a widening of it, holding the values of the tensor as
// stored (which Packed hands out mapped, as Metal runs it); the engines
// over a Cached source share it.
func TestGGUFPackedAsWritesOneForm(t *testing.T) {
	cfg, src, err := OpenGGUF("../testdata/gguf/qwen3_moe-q5_k_m.gguf", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var spec TensorSpec
	for _, s := range cfg.Tensors() {
		if q, ok := cfg.Quant.For(s.Name); ok && q.Type == quant.Q5_K && len(s.Shape) == 2 {
			spec = s
			break
		}
	}
	if spec.Name == "" {
		t.Fatal("no tensor of the file reads as Q5_K")
	}
	wide := quant.Spec{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F32}
	c := NewCached(src)
	p, ok, err := c.PackedAs(spec, wide)
	if err != nil || !ok || p.Spec != wide {
		t.Fatalf("PackedAs: %v, %v, %v", p.Spec, ok, err)
	}
	if q, _, _ := c.PackedAs(spec, wide); &q.Data[0] != &p.Data[0] {
		t.Error("a second PackedAs made another copy")
	}
	n, _, err := src.Packed(spec)
	if err != nil || n.Spec != (quant.Spec{Type: quant.Q5_K}) {
		t.Fatalf("Packed: %v, %v", n.Spec, err)
	}
	if len(src.transcoded) != 1 {
		t.Errorf("%d forms transcoded for one tensor: %v", len(src.transcoded), slices.Collect(maps.Keys(src.transcoded)))
	}
	rows, k := spec.Shape[0], spec.Shape[1]
	a := (&quant.Matrix{Spec: wide, Rows: rows, K: k, Data: p.Data, Scales: p.Scales, Biases: p.Biases}).Dequantize()
	b := (&quant.Matrix{Spec: n.Spec, Rows: rows, K: k, Data: n.Data}).Dequantize()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d: %g at 8 bits, %g as Q5_K", i, a[i], b[i])
		}
	}
}

// A matrix a backend runs in another form than its source holds (affine 2,
// 3, 5 and 6 bits widened to 4 or 8; a Metal-only type transcoded, as the
// CPU runs them) is held in that form only, in the source's own memory:
// Memory counts it, and the narrower values it was made from are not kept
// beside it (a synthetic draw freed, a checkpoint's file pages given back).
// Before, the form sat on the Go heap beside the draw: a q2 preset on the
// CPU held 1.55 times the weights the fit check counted, q5 1.65.
func TestFormsHeldOnce(t *testing.T) {
	narrowMLX := mlxCopy(t, func(q map[string]any) { q["bits"] = 3 }, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i, w := range ts {
			if w.DType == "U32" { // 4-bit words of each row: 3-bit ones
				w.Shape = []int{w.Shape[0], w.Shape[1] * 3 / 4}
				w.Data = make([]byte, 4*w.Shape[0]*w.Shape[1])
				for j := range w.Data {
					w.Data[j] = byte(j * 37)
				}
				ts[i] = w
			}
		}
		return ts
	})
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"q2 preset", Spec{Model: "qwen3-moe-mini", Quant: "q2", Layers: 1, Seed: 1}},
		{"q5 preset", Spec{Model: "qwen3-moe-mini", Quant: "q5", Layers: 1, Seed: 1}},
		{"q5_k_m preset", Spec{Model: "qwen3-moe-mini", Quant: "q5_k_m", Layers: 1, Seed: 1}},
		{"3-bit mlx folder", Spec{Model: narrowMLX}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, src, err := Open(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ck, _ := src.(*Checkpoint)
			inFile := func(b []byte) bool { return ck != nil && ck.ck.Mapped(b) }
			run := cfg.RunOn(cpu.QuantRules{})
			var made, forms int64 // bytes the source made for what runs; of them, widened or transcoded
			for _, s := range run.Tensors() {
				to, ok := run.Quant.For(s.Name)
				if !ok || !s.Matrix {
					continue
				}
				p, ok, err := PackedAs(src, s, to)
				if err != nil || !ok || p.Spec != to {
					t.Fatalf("%s: %v, %v, %v", s.Name, p.Spec, ok, err)
				}
				if !src.(MappedSource).Mapped(p.Data) {
					t.Fatalf("%s: its %v values lie in no memory the source holds", s.Name, to)
				}
				if stored, _ := cfg.Quant.For(s.Name); stored != to {
					forms++
				}
				for _, b := range [][]byte{p.Data, p.Scales, p.Biases} {
					if !inFile(b) {
						made += int64(len(b))
					}
				}
			}
			if forms == 0 {
				t.Fatal("no matrix runs in another form")
			}
			var held int64
			for _, m := range Memory(src) {
				if !inFile(m) {
					held += int64(len(m))
				}
			}
			if held != made {
				t.Errorf("the source holds %d bytes beside its files; want the %d of what runs (%d matrices in another form)", held, made, forms)
			}
		})
	}
}

// A qwen3moe file without expert_feed_forward_length, which llama.cpp's
// loader reads as optional, takes the experts' width from their stacked
// tensor; one whose key and tensors disagree is refused.
func TestGGUFExpertWidth(t *testing.T) {
	const key = "qwen3moe.expert_feed_forward_length"
	want, err := ggufConfigOf(t, "../testdata/gguf/qwen3_moe-q4_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func([]byte)
		err  string
	}{
		{"key absent", func(b []byte) { b[after(t, b, key)-1] = 'X' }, ""},
		{"key disagrees", func(b []byte) {
			binary.LittleEndian.PutUint32(b[after(t, b, key)+4:], uint32(want.MoEInter*2))
		}, "ffn_gate_exps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile("../testdata/gguf/qwen3_moe-q4_0.gguf")
			if err != nil {
				t.Fatal(err)
			}
			c.edit(b)
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.err != "" {
				openRefused(t, p, c.err)
				return
			}
			cfg, src, err := OpenGGUF(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			src.Close()
			if cfg.MoEInter != want.MoEInter {
				t.Errorf("experts' width %d, want %d", cfg.MoEInter, want.MoEInter)
			}
		})
	}
}

// ggufConfigOf is the config of the GGUF file at path.
func ggufConfigOf(t *testing.T, path string) (*Config, error) {
	cfg, src, err := OpenGGUF(path, nil)
	if err == nil {
		src.Close()
	}
	return cfg, err
}

// general.architecture names the model a GGUF file holds: one left out,
// or of a type other than a string, is refused saying which, and one
// naming an architecture mtlbench does not run names it.
func TestGGUFArchitectureKey(t *testing.T) {
	// file is a GGUF v3 header of no tensors and the one key given (none:
	// no key), its value of type typ.
	file := func(t *testing.T, key string, typ uint32, value []byte) string {
		var b []byte
		b = append(b, "GGUF"...)
		b = binary.LittleEndian.AppendUint32(b, 3)
		b = binary.LittleEndian.AppendUint64(b, 0)
		if key == "" {
			b = binary.LittleEndian.AppendUint64(b, 0)
		} else {
			b = binary.LittleEndian.AppendUint64(b, 1)
			b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
			b = append(b, key...)
			b = binary.LittleEndian.AppendUint32(b, typ)
			b = append(b, value...)
		}
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	str := func(s string) []byte { return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...) }
	for _, c := range []struct {
		name, key string
		typ       uint32
		value     []byte
		want      string
	}{
		{"left out", "", 0, nil, "no general.architecture in the metadata"},
		{"a u32", "general.architecture", 4, binary.LittleEndian.AppendUint32(nil, 7), "general.architecture is a u32, want a string"},
		{"a bool", "general.architecture", 7, []byte{1}, "general.architecture is a bool, want a string"},
		{"unknown", "general.architecture", 8, str("falcon"), `architecture "falcon" is not supported`},
	} {
		t.Run(c.name, func(t *testing.T) {
			openRefused(t, file(t, c.key, c.typ, c.value), c.want)
		})
	}
}
