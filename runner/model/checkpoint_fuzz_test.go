package model

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checkpoint fuzzers change real fixtures where their structure lives
// (a GGUF file's header, an MLX folder's config.json and safetensors
// header), or cut them short, and open them as a run does: the result is
// an error that names the file, or a model whose every tensor reads. Never
// a panic, a hang or a huge allocation.

// patchAt copies patch (at most 64 bytes) into b at off modulo limit and
// cuts cut modulo len(b) bytes off its end.
func patchAt(b []byte, limit int, off uint32, patch []byte, cut uint32) []byte {
	b = append([]byte(nil), b...)
	limit = min(limit, len(b))
	if len(patch) > 64 {
		patch = patch[:64]
	}
	copy(b[int(off)%limit:limit], patch)
	if cut > 0 {
		b = b[:len(b)-int(cut)%len(b)]
	}
	return b
}

// openEvery reads path as openAll does: an error must name path.
func openEvery(t *testing.T, path string) {
	start := time.Now()
	if err := openAll(path); err != nil && !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q does not name %s", err, path)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
}

func FuzzOpenGGUF(f *testing.F) {
	const fixture = "../testdata/gguf/qwen3_moe-q4_k_m.gguf"
	src, err := os.ReadFile(fixture)
	if err != nil {
		f.Fatal(err)
	}
	// The header (metadata and tensor infos) is the fixture's first few KB.
	const header = 16 << 10
	f.Add(uint32(0), []byte{}, uint32(0))
	f.Add(uint32(4), []byte{9, 0, 0, 0}, uint32(0))             // version
	f.Add(uint32(8), []byte{0xff, 0xff, 0xff, 0x7f}, uint32(0)) // tensor count
	f.Add(uint32(0), []byte{}, uint32(4096))                    // cut short
	if i := strings.Index(string(src), "qwen3moe.expert_count"); i > 0 {
		f.Add(uint32(i+len("qwen3moe.expert_count")+4), []byte{0, 0, 0, 0}, uint32(0))
	}
	if i := strings.Index(string(src), "blk.0.ffn_gate_exps.weight"); i > 0 {
		f.Add(uint32(i+len("blk.0.ffn_gate_exps.weight")), []byte{4, 0, 0, 0}, uint32(0)) // dims
	}
	f.Fuzz(func(t *testing.T, off uint32, patch []byte, cut uint32) {
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(p, patchAt(src, header, off, patch, cut), 0o644); err != nil {
			t.Fatal(err)
		}
		openEvery(t, p)
	})
}

// FuzzOpenMLX damages one of three mlx-lm folders: Qwen3-MoE at 4 bits
// (switch_mlp stacks, an 8-bit router), the same in mxfp4 (U8 exponents,
// transcoded), and GPT-2 (model. names, packed positions).
func FuzzOpenMLX(f *testing.F) {
	fixtures := []string{"../testdata/mlx/qwen3_moe-q4", "../testdata/mlx/qwen3_moe-mxfp4", "../testdata/mlx/gpt2-q4",
		"../testdata/mlx/qwen3_moe-nvfp4", "../testdata/mlx/qwen3_moe-mxfp8"}
	var cfgs, sts [][]byte
	var headers []int
	for _, fx := range fixtures {
		cfg, err := os.ReadFile(filepath.Join(fx, "config.json"))
		if err != nil {
			f.Fatal(err)
		}
		st, err := os.ReadFile(filepath.Join(fx, "model.safetensors"))
		if err != nil {
			f.Fatal(err)
		}
		cfgs, sts, headers = append(cfgs, cfg), append(sts, st), append(headers, 8+int(binary.LittleEndian.Uint64(st)))
	}
	for i := range fixtures {
		cfg, st := string(cfgs[i]), string(sts[i])
		fx := uint8(i)
		f.Add(fx, false, uint32(0), []byte{}, uint32(0))
		f.Add(fx, false, uint32(strings.Index(cfg, `"bits"`)), []byte(`"bits": 3,`), uint32(0))
		f.Add(fx, false, uint32(strings.Index(cfg, `"group_size"`)), []byte(`"group_size": 48,`), uint32(0))
		f.Add(fx, true, uint32(strings.Index(st, `"shape"`)), []byte(`"shape":[1,`), uint32(0))
		f.Add(fx, true, uint32(0), []byte{}, uint32(1000))
	}
	f.Add(uint8(1), false, uint32(strings.Index(string(cfgs[1]), `"mxfp4"`)), []byte(`"mxfp8"`), uint32(0))
	f.Add(uint8(1), true, uint32(strings.Index(string(sts[1]), `"U8"`)), []byte(`"U16"`), uint32(0))
	// One floating-point mode's tensors read as another's.
	f.Add(uint8(3), false, uint32(strings.Index(string(cfgs[3]), `"nvfp4"`)), []byte(`"mxfp8"`), uint32(0))
	f.Add(uint8(4), false, uint32(strings.Index(string(cfgs[4]), `"mxfp8"`)), []byte(`"nvfp4"`), uint32(0))
	f.Fuzz(func(t *testing.T, fx uint8, tensors bool, off uint32, patch []byte, cut uint32) {
		i := int(fx) % len(fixtures)
		dir := t.TempDir()
		c, s := cfgs[i], sts[i]
		if tensors {
			s = patchAt(s, headers[i], off, patch, cut)
		} else {
			c = patchAt(c, len(c), off, patch, cut)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), c, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), s, 0o644); err != nil {
			t.Fatal(err)
		}
		openEvery(t, dir)
	})
}

// FuzzOpenGGUFRoPE: FuzzOpenGGUF's patches on a file whose RoPE is scaled
// (llama3's rope_freqs tensor), so the scaling's metadata and tensor are
// what gets damaged.
func FuzzOpenGGUFRoPE(f *testing.F) {
	src, err := os.ReadFile("../testdata/gguf/llama-rope-llama3.gguf")
	if err != nil {
		f.Fatal(err)
	}
	const header = 16 << 10
	f.Add(uint32(0), []byte{}, uint32(0))
	for _, key := range []string{"rope_freqs.weight", "llama.rope.dimension_count", "llama.rope.freq_base"} {
		if i := strings.Index(string(src), key); i > 0 {
			f.Add(uint32(i+len(key)), []byte{2, 0, 0, 0}, uint32(0))
			f.Add(uint32(i+len(key)+4), []byte{0, 0, 0xc0, 0x7f}, uint32(0)) // a NaN
		}
	}
	f.Fuzz(func(t *testing.T, off uint32, patch []byte, cut uint32) {
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := os.WriteFile(p, patchAt(src, header, off, patch, cut), 0o644); err != nil {
			t.Fatal(err)
		}
		openEvery(t, p)
	})
}
