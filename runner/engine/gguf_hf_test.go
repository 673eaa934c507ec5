package engine

import (
	"encoding/binary"
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// hfToGGUF is llama.cpp's convert_hf_to_gguf tensor naming for the dense
// architectures (written out here, apart from the loader's own mapping, so
// the two check each other).
func hfToGGUF(name string) (string, bool) {
	switch name {
	case "model.embed_tokens.weight":
		return "token_embd.weight", true
	case "model.norm.weight":
		return "output_norm.weight", true
	case "lm_head.weight":
		return "output.weight", true
	}
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, "model.layers.%d.%s", &l, &rest); n != 2 {
		return "", false
	}
	g, ok := map[string]string{
		"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
		"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
		"self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
		"self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
		"self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
		"mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
	}[rest]
	return fmt.Sprintf("blk.%d.%s", l, g), ok
}

// writeGGUF writes a GGUF v3 file of arch's metadata and the checkpoint's
// tensors, as gguf-py's GGUFWriter lays one out: header, key/values, tensor
// infos (dimensions innermost first), data aligned to 32. With q8 the
// matrices are Q8_0 (quant.PackQ8_0), else F32; deq writes the matrices as
// the F32 values Q8_0 gives back, the float twin of a q8 file.
func writeGGUF(t *testing.T, path, arch string, cfg *model.Config, src model.Source, q8, deq bool) {
	t.Helper()
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	const tU32, tF32, tString = 4, 6, 8
	type kv struct {
		key string
		typ uint32
		v   any
	}
	kvs := []kv{
		{"general.architecture", tString, arch},
		{arch + ".embedding_length", tU32, cfg.Hidden},
		{arch + ".block_count", tU32, cfg.Layers},
		{arch + ".feed_forward_length", tU32, cfg.Inter},
		{arch + ".attention.head_count", tU32, cfg.Heads},
		{arch + ".attention.head_count_kv", tU32, cfg.KVHeads},
		{arch + ".attention.key_length", tU32, cfg.HeadDim},
		{arch + ".attention.value_length", tU32, cfg.HeadDim},
		{arch + ".context_length", tU32, cfg.MaxPos},
		{arch + ".attention.layer_norm_rms_epsilon", tF32, float64(cfg.Eps)},
		{arch + ".rope.freq_base", tF32, cfg.RopeTheta},
	}
	type tensor struct {
		name string
		dims []int
		typ  uint32
		data []byte
	}
	var ts []tensor
	for _, s := range cfg.Tensors() {
		name, ok := hfToGGUF(s.Name)
		if !ok {
			t.Fatalf("no GGUF name for %s", s.Name)
		}
		dt, data, err := src.Tensor(s)
		if err != nil {
			t.Fatal(err)
		}
		if dt != bridge.F32 {
			t.Fatalf("%s is %v: the fixture's tensors are f32", s.Name, dt)
		}
		typ := uint32(0) // F32
		if (q8 || deq) && s.Matrix {
			w := make([]float32, len(data)/4)
			for i := range w {
				w[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
			m := quant.PackQ8_0(w, s.Shape[0], s.Shape[1])
			if q8 {
				typ, data = 8, m.Data // Q8_0
			} else {
				data = make([]byte, 0, len(data))
				for _, v := range m.Dequantize() {
					data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
				}
			}
		}
		ts = append(ts, tensor{name, s.Shape, typ, data})
	}
	b = append(b, "GGUF"...)
	u32(3)
	u64(uint64(len(ts)))
	u64(uint64(len(kvs)))
	for _, k := range kvs {
		str(k.key)
		u32(k.typ)
		switch v := k.v.(type) {
		case string:
			str(v)
		case int:
			u32(uint32(v))
		case float64:
			u32(math.Float32bits(float32(v)))
		}
	}
	const align = 32
	off := 0
	for _, x := range ts {
		str(x.name)
		u32(uint32(len(x.dims)))
		for i := len(x.dims) - 1; i >= 0; i-- {
			u64(uint64(x.dims[i]))
		}
		u32(x.typ)
		u64(uint64(off))
		off += (len(x.data) + align - 1) / align * align
	}
	for len(b)%align != 0 {
		b = append(b, 0)
	}
	for _, x := range ts {
		b = append(b, x.data...)
		for len(b)%align != 0 {
			b = append(b, 0)
		}
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The qwen2 (q/k/v biases, a tied LM head) and qwen3 (QK-norm, a head size
// apart from hidden/heads) fixtures written as GGUF files open with the
// configuration their metadata gives and match transformers' logits and
// greedy tokens on the same weights, within 1e-4 as the checkpoints do.
func TestGGUFDenseArchitecturesMatchTransformers(t *testing.T) {
	for _, c := range []struct{ hf, arch string }{{"qwen2", "qwen2"}, {"qwen3", "qwen3"}} {
		t.Run(c.arch, func(t *testing.T) {
			dir := filepath.Join("../testdata/hf", c.hf)
			hcfg, hsrc, err := model.Open(model.Spec{Model: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer hsrc.Close()
			path := filepath.Join(t.TempDir(), c.arch+".gguf")
			writeGGUF(t, path, c.arch, hcfg, hsrc, false, false)
			cfg, src, err := model.Open(model.Spec{Model: path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			for _, f := range []struct {
				what      string
				got, want any
			}{{"architecture", cfg.Architecture, hcfg.Architecture}, {"tied LM head", cfg.TieEmbed, hcfg.TieEmbed},
				{"q/k/v biases", cfg.QKVBias, hcfg.QKVBias}, {"QK-norm", cfg.QKNorm, hcfg.QKNorm}, {"head size", cfg.HeadDim, hcfg.HeadDim},
				{"rope theta", cfg.RopeTheta, hcfg.RopeTheta}, {"vocab", cfg.Vocab, hcfg.Vocab}} {
				if fmt.Sprint(f.got) != fmt.Sprint(f.want) {
					t.Errorf("%s: GGUF %v, checkpoint %v", f.what, f.got, f.want)
				}
			}
			e, err := New(cpu.New(cpu.Options{}), cfg, src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstReference(t, e, loadReference(t, c.hf), 1e-4)
		})
	}
}

// The same fixtures with every matrix Q8_0 (a tied one embedding and LM
// head at once) run packed and give the logits of their float twin, the
// Q8_0 values written as F32.
func TestGGUFDenseArchitecturesQ8_0(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			hcfg, hsrc, err := model.Open(model.Spec{Model: filepath.Join("../testdata/hf", arch)})
			if err != nil {
				t.Fatal(err)
			}
			defer hsrc.Close()
			var logits [2][]float32
			for i, q8 := range []bool{true, false} {
				path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%v.gguf", arch, q8))
				writeGGUF(t, path, arch, hcfg, hsrc, q8, !q8)
				cfg, src, err := model.Open(model.Spec{Model: path})
				if err != nil {
					t.Fatal(err)
				}
				if _, packed := cfg.Quant.For("model.layers.0.self_attn.q_proj.weight"); packed != q8 {
					t.Fatalf("q8 %v: q_proj packed %v", q8, packed)
				}
				e, err := New(cpu.New(cpu.Options{}), cfg, src, Options{})
				if err != nil {
					t.Fatal(err)
				}
				out, err := e.Generate([]Request{{ID: 1, Prompt: []int32{3, 141, 59, 265, 358, 97, 93, 238}, MaxNewTokens: 4, WantLogits: true}})
				src.Close()
				if err != nil {
					t.Fatal(err)
				}
				logits[i] = out[0].Logits
			}
			d := kernels.MaxAbsDiff(logits[0], logits[1])
			t.Logf("Q8_0 against its float twin: logits max abs difference %.2g", d)
			if d > 1e-4 {
				t.Errorf("Q8_0 logits %.3g off the float twin's", d)
			}
		})
	}
}
