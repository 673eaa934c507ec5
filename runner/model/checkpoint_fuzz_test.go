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

func FuzzOpenMLX(f *testing.F) {
	const fixture = "../testdata/mlx/qwen3_moe-q4"
	cfg, err := os.ReadFile(filepath.Join(fixture, "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	st, err := os.ReadFile(filepath.Join(fixture, "model.safetensors"))
	if err != nil {
		f.Fatal(err)
	}
	header := 8 + int(binary.LittleEndian.Uint64(st))
	f.Add(false, uint32(0), []byte{}, uint32(0))
	f.Add(false, uint32(strings.Index(string(cfg), `"bits"`)), []byte(`"bits": 3,`), uint32(0))
	f.Add(false, uint32(strings.Index(string(cfg), `"group_size"`)), []byte(`"group_size": 48,`), uint32(0))
	f.Add(true, uint32(strings.Index(string(st), `"shape"`)), []byte(`"shape":[1,`), uint32(0))
	f.Add(true, uint32(0), []byte{}, uint32(1000))
	f.Fuzz(func(t *testing.T, tensors bool, off uint32, patch []byte, cut uint32) {
		dir := t.TempDir()
		c, s := cfg, st
		if tensors {
			s = patchAt(st, header, off, patch, cut)
		} else {
			c = patchAt(cfg, len(cfg), off, patch, cut)
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
