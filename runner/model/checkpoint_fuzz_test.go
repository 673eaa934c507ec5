package model

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/runner/safetensors"
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

// FuzzOpenHF damages a float checkpoint folder as transformers shards it:
// its config.json, either shard's safetensors header, or the index that
// maps the tensors to the shards, for a dense model (Llama), experts
// under Mixtral's names, Qwen3-MoE's with a dense layer, and GPT-2
// (Conv1D weights, learned positions).
func FuzzOpenHF(f *testing.F) {
	archs := []string{"llama", "mixtral", "qwen3_moe", "gpt2"}
	type folder struct {
		files   [4][]byte // config.json, the two shards, the index
		headers [4]int    // the part of each that fuzzing patches
	}
	names := [4]string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", safetensors.IndexName}
	var folders []folder
	for _, arch := range archs {
		dir := filepath.Join(fixtures, arch)
		var fo folder
		var err error
		if fo.files[0], err = os.ReadFile(filepath.Join(dir, "config.json")); err != nil {
			f.Fatal(err)
		}
		st, err := safetensors.Open(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			f.Fatal(err)
		}
		var shards [2][]safetensors.WriteTensor
		wm := map[string]string{}
		for i, info := range st.Tensors() {
			b, _ := st.Bytes(info.Name)
			shards[i%2] = append(shards[i%2], safetensors.WriteTensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: append([]byte(nil), b...)})
			wm[info.Name] = names[1+i%2]
		}
		st.Close()
		tmp := f.TempDir()
		for i, ts := range shards {
			p := filepath.Join(tmp, names[1+i])
			if err := safetensors.Write(p, ts, map[string]string{"format": "pt"}); err != nil {
				f.Fatal(err)
			}
			if fo.files[1+i], err = os.ReadFile(p); err != nil {
				f.Fatal(err)
			}
		}
		if fo.files[3], err = json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": wm}); err != nil {
			f.Fatal(err)
		}
		for i, b := range fo.files {
			fo.headers[i] = len(b)
			if i == 1 || i == 2 {
				fo.headers[i] = 8 + int(binary.LittleEndian.Uint64(b))
			}
		}
		folders = append(folders, fo)
	}
	for i, fo := range folders {
		fx := uint8(i)
		f.Add(fx, uint8(0), uint32(0), []byte{}, uint32(0))
		f.Add(fx, uint8(0), uint32(strings.Index(string(fo.files[0]), `"num_hidden_layers"`)), []byte(`"num_hidden_layers": 1,`), uint32(0))
		f.Add(fx, uint8(0), uint32(strings.Index(string(fo.files[0]), `"tie_word_embeddings"`)), []byte(`"tie_word_embeddings": true ,`), uint32(0))
		f.Add(fx, uint8(1), uint32(strings.Index(string(fo.files[1]), `"shape"`)), []byte(`"shape":[1,`), uint32(0))
		f.Add(fx, uint8(2), uint32(strings.Index(string(fo.files[2]), `"data_offsets"`)), []byte(`"data_offsets":[0,`), uint32(0))
		f.Add(fx, uint8(2), uint32(0), []byte{}, uint32(1000))
		f.Add(fx, uint8(3), uint32(strings.Index(string(fo.files[3]), `00002-of`)), []byte(`00001-of`), uint32(0))
		f.Add(fx, uint8(3), uint32(strings.Index(string(fo.files[3]), `"weight_map"`)), []byte(`"weight_map": {}, "x":`), uint32(0))
	}
	f.Fuzz(func(t *testing.T, fx, which uint8, off uint32, patch []byte, cut uint32) {
		fo := folders[int(fx)%len(folders)]
		w := int(which) % len(names)
		dir := t.TempDir()
		for i, b := range fo.files {
			if i == w {
				b = patchAt(b, fo.headers[i], off, patch, cut)
			}
			if err := os.WriteFile(filepath.Join(dir, names[i]), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		openEvery(t, dir)
	})
}
