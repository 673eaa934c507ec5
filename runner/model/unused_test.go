package model

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/readfile/kindtest"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// A GGUF file holding tensors its metadata's model does not read is
// refused, naming them, as llama.cpp refuses it: here a block_count one
// short of the layers the file holds.
func TestGGUFUnusedTensors(t *testing.T) {
	data, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("llama.block_count")
	i := bytes.Index(data, key)
	if i < 0 {
		t.Fatal("no llama.block_count")
	}
	v := i + len(key) + 4 // past the key and its value type (u32)
	n := binary.LittleEndian.Uint32(data[v:])
	if n < 2 {
		t.Fatalf("the fixture has %d layers", n)
	}
	binary.LittleEndian.PutUint32(data[v:], n-1)
	p := filepath.Join(t.TempDir(), "short.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(Spec{Model: p})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "none of the llama model") ||
		!strings.Contains(err.Error(), "blk.1.") || !strings.Contains(err.Error(), "block_count") {
		t.Errorf("%v, want the layer's tensors named", err)
	}
}

// A checkpoint folder whose config says fewer layers than its weights hold
// is refused, for HF and mlx-lm's layouts (GPT-2's h.N too).
func TestCheckpointLayersPast(t *testing.T) {
	for _, fx := range []string{"../testdata/hf/llama", "../testdata/hf/gpt2", "../testdata/mlx/qwen3_moe-q4", "../testdata/mlx/gpt2-q4"} {
		dir := copyFolder(t, fx, func(name string, data []byte) []byte {
			if name == "config.json" {
				for _, k := range []string{`"num_hidden_layers": 2`, `"n_layer": 2`} {
					data = bytes.Replace(data, []byte(k), []byte(k[:len(k)-1]+"1"), 1)
				}
			}
			return data
		})
		_, _, err := Open(Spec{Model: dir})
		if err == nil || !strings.Contains(err.Error(), "the weights hold 2 layers, but config.json says 1") {
			t.Errorf("%s with one layer in its config: %v", fx, err)
		}
	}
}

// copyFolder copies the checkpoint folder src into a temporary folder,
// each file's bytes through edit, and returns the copy.
func copyFolder(t *testing.T, src string, edit func(name string, data []byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), edit(e.Name(), data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A checkpoint holding attention biases its model does not read is
// refused, naming the bias: Qwen2's under a Llama config, attention_bias
// turned off, an o_proj bias under Qwen2 (whose o takes none), and biases
// under Mistral, whose attention takes none whatever attention_bias says.
func TestCheckpointBiasesUnasked(t *testing.T) {
	rename := func(from, to string) func([]byte) []byte {
		return func(data []byte) []byte {
			data = bytes.ReplaceAll(data, []byte(from+"ForCausalLM"), []byte(to+"ForCausalLM"))
			return bytes.ReplaceAll(data, []byte(`"`+strings.ToLower(from)+`"`), []byte(`"`+strings.ToLower(to)+`"`))
		}
	}
	for _, c := range []struct {
		name, fx string
		config   func([]byte) []byte
		want     string
	}{
		{"qwen2 as llama", "../testdata/hf/qwen2", rename("Qwen2", "Llama"),
			"self_attn.q_proj.bias, but config.json has no attention_bias: true"},
		{"attention_bias off", "../testdata/hf/llama_bias", func(data []byte) []byte {
			return bytes.Replace(data, []byte(`"attention_bias": true`), []byte(`"attention_bias": false`), 1)
		}, "self_attn.q_proj.bias, but config.json has no attention_bias: true"},
		{"mlx, attention_bias off", "../testdata/mlx/llama_bias-q4", func(data []byte) []byte {
			return bytes.Replace(data, []byte(`"attention_bias": true`), []byte(`"attention_bias": false`), 1)
		}, "self_attn.q_proj.bias, but config.json has no attention_bias: true"},
		{"o bias as qwen2", "../testdata/hf/llama_bias", rename("Llama", "Qwen2"),
			"self_attn.o_proj.bias, but Qwen2ForCausalLM's o_proj takes no bias"},
		{"biases as mistral", "../testdata/hf/llama_bias", rename("Llama", "Mistral"),
			"self_attn.q_proj.bias, but MistralForCausalLM's q_proj takes no bias"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFolder(t, c.fx, func(name string, data []byte) []byte {
				if name == "config.json" {
					data = c.config(data)
				}
				return data
			})
			_, _, err := Open(Spec{Model: dir})
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}

// A GGUF file's rope scaling as llama.cpp's loader reads it: with no
// rope.scaling.type the factor is linear's. rope_freqs.weight, which only
// the llama loader reads, is refused under another architecture.
func TestGGUFRopeAsLlamaCpp(t *testing.T) {
	patched := func(src string, edit func(head []byte)) string {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		// The metadata comes before the first tensor's info.
		end := bytes.Index(data, []byte("token_embd"))
		if end < 0 {
			t.Fatal("no token_embd")
		}
		edit(data[:end])
		p := filepath.Join(t.TempDir(), filepath.Base(src))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want, src, err := Open(Spec{Model: "../testdata/gguf/llama-rope-linear.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	untyped := patched("../testdata/gguf/llama-rope-linear.gguf", func(h []byte) {
		copy(h[bytes.Index(h, []byte("llama.rope.scaling.type")):], "llama.rope.scaling.typX")
	})
	got, src, err := Open(Spec{Model: untyped})
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	if want.RopeScaling == nil || fmt.Sprint(got.RopeScaling) != fmt.Sprint(want.RopeScaling) {
		t.Errorf("no rope.scaling.type: scaling %+v, want linear's %+v", got.RopeScaling, want.RopeScaling)
	}

	if _, src, err := Open(Spec{Model: "../testdata/gguf/llama-rope-llama3.gguf"}); err != nil {
		t.Fatal(err)
	} else {
		src.Close()
	}
	qwen2 := patched("../testdata/gguf/llama-rope-llama3.gguf", func(h []byte) {
		copy(h, bytes.ReplaceAll(h, []byte("llama."), []byte("qwen2.")))
		i := bytes.Index(h, []byte("general.architecture"))
		copy(h[i:], bytes.Replace(h[i:], []byte("llama"), []byte("qwen2"), 1))
	})
	if _, _, err := Open(Spec{Model: qwen2}); err == nil || !strings.Contains(err.Error(), "rope_freqs.weight") {
		t.Errorf("rope_freqs.weight in a qwen2 file: %v", err)
	}
}

// A GGUF file opens whatever its name, as llama.cpp opens it; a path that
// is missing, a folder without a config, or a file of another kind, is
// named as such.
func TestModelPaths(t *testing.T) {
	data, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, other := filepath.Join(dir, "model.bin"), filepath.Join(dir, "notes.txt")
	os.WriteFile(bin, data, 0o644)
	os.WriteFile(other, []byte("GGU"), 0o644)
	if _, src, err := Open(Spec{Model: bin}); err != nil {
		t.Errorf("GGUF named .bin: %v", err)
	} else {
		src.Close()
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for p, want := range map[string]string{other: "is a file but not a GGUF file", filepath.Join(dir, "nope"): "nor a path that exists",
		empty: "model folder " + empty + " has no config.json (a Hugging Face or mlx-lm checkpoint folder holds one)"} {
		_, _, err := Open(Spec{Model: p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", p, err, want)
		}
		// Go's operation names are not the user's words.
		if err != nil && strings.Contains(err.Error(), "stat ") {
			t.Errorf("%s: %v names Go's stat", p, err)
		}
	}
}

// The keys llama.cpp's loaders require are required here too: a file
// without its context length or its norms' epsilon is refused, naming it.
func TestGGUFRequiredKeys(t *testing.T) {
	for key, want := range map[string]string{
		"llama.context_length":                   "missing llama.context_length",
		"llama.attention.layer_norm_rms_epsilon": "llama.attention.layer_norm_rms_epsilon is missing",
	} {
		data, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(data, []byte(key))
		if i < 0 {
			t.Fatalf("no %s", key)
		}
		data[i+len(key)-1] = 'X'
		p := filepath.Join(t.TempDir(), "m.gguf")
		os.WriteFile(p, data, 0o644)
		if _, _, err := Open(Spec{Model: p}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without %s: %v, want %q", key, err, want)
		}
	}
}

// A head count of 0 is the error, not the key length derived from it.
func TestGGUFHeadCountZero(t *testing.T) {
	data, err := os.ReadFile("../testdata/gguf/llama-q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("llama.attention.head_count\x04\x00\x00\x00") // a u32
	i := bytes.Index(data, key)
	if i < 0 {
		t.Fatal("no llama.attention.head_count")
	}
	binary.LittleEndian.PutUint32(data[i+len(key):], 0)
	p := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(p, data, 0o644)
	_, _, err = Open(Spec{Model: p})
	if err == nil || !strings.Contains(err.Error(), "llama.attention.head_count is 0") || strings.Contains(err.Error(), "key_length") {
		t.Errorf("head count 0: %v", err)
	}
}

// A file of another kind given for a model (the results database, a suite,
// a checkpoint's weights or config.json) is named for what it is and for
// the command that takes it, an input error; a file of no known kind is
// only not a GGUF file, and an empty one empty.
func TestModelPathOfAnotherKind(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string { return kindtest.Write(t, dir, name, data) }
	db := write("results.db", kindtest.Bytes(readfile.SQLite))
	suite := write("mine.yaml", []byte("name: s\nmodel: {preset: p}\ncases:\n  - name: c\n"))
	unnamed := write("mine", []byte("name: s\nmodel: {preset: p}\ncases:\n  - name: c\n"))
	notes := write("notes.txt", []byte("GGU"))
	empty := write("model.bin", nil)
	ckpt, _ := filepath.Abs(filepath.Join("..", "testdata", "hf", "qwen3"))
	for _, tc := range []struct {
		name, path, want string
	}{
		{"results database", db, `model "` + db + `" is an SQLite database, not a checkpoint (mtlbench keeps its results in one: list its runs with ` + "`mtlbench runs --db " + db + "`, or report them with `mtlbench report --db " + db + "`)"},
		{"suite", suite, `model "` + suite + `" is a suite, not a checkpoint (run it with ` + "`mtlbench run " + suite + "`)"},
		{"suite of any name", unnamed, `model "` + unnamed + `" is a suite, not a checkpoint`},
		{"safetensors", filepath.Join(ckpt, "model.safetensors"), `is a safetensors weights file, not a checkpoint (a checkpoint is the folder that holds it and its config.json: benchmark it with ` + "`mtlbench bench -m " + ckpt + "`"},
		{"config.json", filepath.Join(ckpt, "config.json"), `is a file of a checkpoint folder, not a checkpoint (a checkpoint is the folder that holds it and its config.json: benchmark it with ` + "`mtlbench bench -m " + ckpt + "`"},
		{"another file", notes, `model "` + notes + `" is a file but not a GGUF file (it does not open with GGUF's magic)`},
		// An empty file was said to lack GGUF's magic: it lacks everything.
		{"empty file", empty, `model "` + empty + `" is an empty file, not a checkpoint (give a checkpoint folder (config.json and safetensors) or a GGUF file; an empty one is often a download or copy that failed)`},
	} {
		_, _, err := Open(Spec{Model: tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to hold %q", tc.name, err, tc.want)
			continue
		}
		if !errors.Is(err, readfile.ErrNotAFile) {
			t.Errorf("%s: %v is not an input error (readfile.ErrNotAFile)", tc.name, err)
		}
	}
}

// A built-in suite's name given for a model says how to run the suite; a
// name close to a preset says which, and a path says neither.
func TestModelNameOfABuiltInSuite(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"ci", "(ci is a built-in suite: run it with `mtlbench run ci`)"},
		{"serving.yaml", "(serving.yaml is a built-in suite: run it with `mtlbench run serving`)"},
		{"tinyllama", `(did you mean "tinyllama-1.1b"?)`},
		{"no-such-model", "nor a path that exists (a checkpoint folder or a .gguf file)"},
	} {
		_, _, err := Open(Spec{Model: tc.name})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to hold %q", tc.name, err, tc.want)
		}
		if err != nil && tc.name == "no-such-model" && strings.Contains(err.Error(), "built-in suite") {
			t.Errorf("%s: %v names a built-in suite", tc.name, err)
		}
	}
	if _, _, err := Open(Spec{Model: "./ci"}); err == nil || strings.Contains(err.Error(), "built-in suite") {
		t.Errorf("./ci: %v, want only that no such path exists", err)
	}
}

// A checkpoint folder holding its config.json and no weights says that
// weights can be drawn for it, naming how; the weights' error stays
// matchable.
func TestConfigAloneNamesSynthetic(t *testing.T) {
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join("..", "testdata", "hf", "qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(Spec{Model: dir})
	const want = "no .safetensors files (and no model.safetensors.index.json): the folder holds the model's configuration alone (seeded weights of its architecture run with bench's --synthetic, a suite's weights: synthetic)"
	if err == nil || err.Error() != dir+": "+want {
		t.Fatalf("err = %v\nwant %s: %s", err, dir, want)
	}
	if !errors.Is(err, safetensors.ErrNoWeights) {
		t.Errorf("%v is not safetensors.ErrNoWeights", err)
	}
	// With --synthetic the same folder runs.
	if _, _, err := Open(Spec{Model: dir, Synthetic: true, Layers: 1}); err != nil {
		t.Errorf("synthetic: %v", err)
	}
}

// A folder whose config.json sits beside weights of another format (a hub
// repository of PyTorch pickles, a GGUF repository that ships the config
// too) is not taken for a configuration alone: the error names the file
// and, for a GGUF file, the path to give instead; with --synthetic the
// folder runs as a configuration alone does.
func TestWeightsOfAnotherFormatNamed(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("..", "testdata", "hf", "qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files []string
		want  string // after "DIR: no .safetensors files (and no model.safetensors.index.json): "
	}{
		{[]string{"pytorch_model.bin"}, "its weights are pytorch_model.bin, in PyTorch's pickle format, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{[]string{"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin", "pytorch_model.bin.index.json", "training_args.bin"}, "its weights are pytorch_model-00001-of-00002.bin, in PyTorch's pickle format, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{[]string{"consolidated.00.pth", "params.json"}, "its weights are consolidated.00.pth, in PyTorch's pickle format, as Mistral's and Meta's own tools save it, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{[]string{"tf_model.h5"}, "its weights are tf_model.h5, in TensorFlow's format, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{[]string{"weights.npz"}, "its weights are weights.npz, in NumPy's format, as early mlx-examples conversions saved it, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{[]string{"Qwen3-0.6B-Q8_0.gguf", "pytorch_model.bin"}, "it holds Qwen3-0.6B-Q8_0.gguf: give the file itself, DIR/Qwen3-0.6B-Q8_0.gguf"},
		// A repository of a model's quantizations: the folder does not say
		// which to run, so none is named as if it were its one file; one
		// split file's parts are one file, opened by its first.
		{[]string{"Qwen3-0.6B-BF16.gguf", "Qwen3-0.6B-Q4_K_M.gguf", "Qwen3-0.6B-Q8_0.gguf"},
			"it holds 3 GGUF files (Qwen3-0.6B-BF16.gguf, Qwen3-0.6B-Q4_K_M.gguf and Qwen3-0.6B-Q8_0.gguf): give the one to run itself, such as DIR/Qwen3-0.6B-BF16.gguf"},
		{[]string{"a.gguf", "b.gguf", "c.gguf", "d.gguf", "e.gguf"}, "it holds 5 GGUF files (a.gguf, b.gguf, c.gguf and 2 more): give the one to run itself, such as DIR/a.gguf"},
		{[]string{"Q-00001-of-00002.gguf", "Q-00002-of-00002.gguf"}, "it holds Q-00001-of-00002.gguf: give the file itself, DIR/Q-00001-of-00002.gguf"},
		{[]string{"Q-00001-of-00002.gguf", "Q-00002-of-00002.gguf", "R-00001-of-00002.gguf"},
			"it holds 3 GGUF files (Q-00001-of-00002.gguf, Q-00002-of-00002.gguf and R-00001-of-00002.gguf): give the one to run itself, such as DIR/Q-00001-of-00002.gguf"},
		// Files no loader takes for weights leave it a configuration alone.
		{[]string{"training_args.bin", "tokenizer.json"}, "the folder holds the model's configuration alone (seeded weights of its architecture run with bench's --synthetic, a suite's weights: synthetic)"},
	} {
		dir := t.TempDir()
		for _, f := range append([]string{"config.json"}, tc.files...) {
			data := []byte("x")
			if f == "config.json" {
				data = cfg
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := dir + ": no .safetensors files (and no model.safetensors.index.json): " + strings.ReplaceAll(tc.want, "DIR", dir)
		_, _, err := Open(Spec{Model: dir})
		if err == nil || err.Error() != want {
			t.Errorf("%v:\n got %v\nwant %s", tc.files, err, want)
		}
		if !errors.Is(err, safetensors.ErrNoWeights) {
			t.Errorf("%v: %v is not safetensors.ErrNoWeights", tc.files, err)
		}
		if _, _, err := Open(Spec{Model: dir, Synthetic: true, Layers: 1}); err != nil {
			t.Errorf("%v: synthetic: %v", tc.files, err)
		}
	}
}

// A Mistral repository downloaded in Mistral's own format alone (params.json
// and consolidated weights, no config.json) is named as what it is, not as
// a folder missing its config.
func TestMistralOwnFormatNamed(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  string // after "model folder DIR has no config.json"
	}{
		{[]string{"params.json", "consolidated.safetensors", "tekken.json"}, "; it holds params.json, Mistral's own checkpoint format (mistral_inference's, with consolidated weights), which transformers does not read: mtlbench reads a Hugging Face folder (config.json and model*.safetensors, which Mistral's repositories hold beside it) or a GGUF file"},
		// safetensors alone are weights without their configuration
		// (TestFolderWithoutConfigNamed), not an empty folder
		{[]string{"consolidated.safetensors"}, "; it holds consolidated.safetensors, but not the config.json that says what model its tensors make (a Hugging Face or mlx-lm checkpoint folder holds one beside its weights: fetch the repository's into DIR)"},
	} {
		dir := t.TempDir()
		for _, f := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := "model folder " + dir + " has no config.json" + strings.ReplaceAll(tc.want, "DIR", dir)
		if _, _, err := Open(Spec{Model: dir}); err == nil || err.Error() != want {
			t.Errorf("%v:\n got %v\nwant %s", tc.files, err, want)
		}
	}
}

// A model folder without config.json is named for what it holds that is
// close to a checkpoint, by the one rule that names a folder of weights
// mtlbench does not read (folderHolds): safetensors without their
// configuration, weights of another format, a GGUF file, or a suite's
// name or files (bench -m x.yaml, where x.yaml is a folder); a folder of
// none of them says what a checkpoint folder holds.
func TestFolderWithoutConfigNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string // the folder's name
		files []string
		dirs  []string
		want  string // after "model folder DIR has no config.json"
	}{
		{"ck", []string{"model.safetensors", "tokenizer.json"}, nil,
			"; it holds model.safetensors, but not the config.json that says what model its tensors make (a Hugging Face or mlx-lm checkpoint folder holds one beside its weights: fetch the repository's into DIR)"},
		{"ck", []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}, nil,
			"; it holds 2 safetensors files (model-00001-of-00002.safetensors, ...), but not the config.json that says what model its tensors make (a Hugging Face or mlx-lm checkpoint folder holds one beside its weights: fetch the repository's into DIR)"},
		{"ck", []string{"pytorch_model.bin"}, nil,
			"; its weights are pytorch_model.bin, in PyTorch's pickle format, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)"},
		{"ck", []string{"m.gguf", "model.safetensors"}, nil, "; it holds m.gguf: give the file itself, DIR/m.gguf"},
		{"dir.yaml", nil, nil, "; it is named like a suite file (.yaml), but is a folder, and a suite is a file (`mtlbench run FILE`)"},
		{"dir.yml", []string{"ci.yaml"}, nil,
			"; it is named like a suite file (.yml), but is a folder, and a suite is a file (`mtlbench run FILE`); it holds the suite ci.yaml: run it with `mtlbench run DIR/ci.yaml`"},
		{"mine", []string{"a.yaml", "b.YML", "notes.txt"}, []string{"c.yaml"},
			"; it holds 2 suites (a.yaml, ...): `mtlbench suites list DIR` lists them, `mtlbench run DIR/a.yaml` runs one"},
		// a folder named x.yaml is no suite, and lists as none
		{"mine", nil, []string{"c.yaml"}, " (a Hugging Face or mlx-lm checkpoint folder holds one)"},
		{"empty", nil, nil, " (a Hugging Face or mlx-lm checkpoint folder holds one)"},
		// a folder of checkpoints, given for one of them, said only that
		// it had no config.json
		{"models", []string{"llama/config.json", "gpt2/config.json"}, []string{"llama", "gpt2"},
			"; it holds 2 checkpoint folders (gpt2, ...): give one of them, such as DIR/gpt2"},
		{"models", []string{"llama/config.json", "llama/model.safetensors"}, []string{"llama", "notes"},
			"; it holds the checkpoint folder DIR/llama: give it"},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		for _, d := range append([]string{""}, tc.dirs...) {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range tc.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := "model folder " + dir + " has no config.json" + strings.ReplaceAll(tc.want, "DIR", dir)
		if _, _, err := Open(Spec{Model: dir}); err == nil || err.Error() != want {
			t.Errorf("%s %v:\n got %v\nwant %s", tc.name, tc.files, err, want)
		}
	}
}

// A checkpoint folder is named as its folder, but for a snapshot of a
// Hugging Face cache, named by its commit, which is named as its
// repository; "." is the folder it names. Runs record the name as the
// case's model.
func TestCheckpointName(t *testing.T) {
	cfg, err := os.ReadFile(filepath.Join("..", "testdata", "hf", "qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	const rev = "c1899de289a04d12100db370d81485cdf75e47ca"
	for _, tc := range []struct{ dir, want string }{
		{"Qwen3-0.6B", "Qwen3-0.6B"},
		{"hub/models--Qwen--Qwen3-0.6B/snapshots/" + rev, "Qwen3-0.6B"},
		{"hub/models--mlx-community--Qwen3-0.6B-4bit/snapshots/" + rev, "Qwen3-0.6B-4bit"},
		{"hub/models--gpt2/snapshots/" + rev, "gpt2"},
		// Not a cache's layout: the folder's own name.
		{"mine/snapshots/" + rev, rev},
		{"hub/models--/snapshots/" + rev, rev},
		{"hub/datasets--a--b/snapshots/" + rev, rev},
	} {
		root := t.TempDir()
		dir := filepath.Join(root, filepath.FromSlash(tc.dir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != tc.want {
			t.Errorf("%s: named %q, want %q", tc.dir, c.Name, tc.want)
		}
		if tc.dir == "Qwen3-0.6B" {
			t.Chdir(dir)
			c, err := LoadDir(".")
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tc.want {
				t.Errorf(".: named %q, want %q", c.Name, tc.want)
			}
		}
	}
}

// A Hugging Face cache's folder of a repository, given for its snapshot,
// is refused naming the snapshot to give: the one refs/main names, else its
// one snapshot, else where its snapshots are.
func TestHubRepositoryFolderNamesItsSnapshot(t *testing.T) {
	const a, b = "c1899de289a04d12100db370d81485cdf75e47ca", "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		snapshots []string
		main      string // refs/main ("" for none)
		want      string // after "model folder DIR has no config.json"
	}{
		{[]string{a, b}, b, "; it is a Hugging Face cache's folder of a repository, whose files are in its snapshots: give DIR/snapshots/" + b},
		{[]string{a}, "", "; it is a Hugging Face cache's folder of a repository, whose files are in its snapshots: give DIR/snapshots/" + a},
		{[]string{a, b}, "", "; it is a Hugging Face cache's folder of a repository, whose files are in its snapshots: give one of its snapshots, DIR/snapshots/REVISION"},
		// refs/main naming a snapshot the cache lacks is not taken.
		{[]string{a}, b, "; it is a Hugging Face cache's folder of a repository, whose files are in its snapshots: give DIR/snapshots/" + a},
		{nil, "", " (a Hugging Face or mlx-lm checkpoint folder holds one)"},
	} {
		dir := filepath.Join(t.TempDir(), "models--Qwen--Qwen3-0.6B")
		if err := os.MkdirAll(filepath.Join(dir, "snapshots"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range tc.snapshots {
			if err := os.MkdirAll(filepath.Join(dir, "snapshots", s), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if tc.main != "" {
			if err := os.MkdirAll(filepath.Join(dir, "refs"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "refs", "main"), []byte(tc.main), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := "model folder " + dir + " has no config.json" + strings.ReplaceAll(tc.want, "DIR", dir)
		if _, _, err := Open(Spec{Model: dir}); err == nil || err.Error() != want {
			t.Errorf("%v, refs/main %q:\n got %v\nwant %s", tc.snapshots, tc.main, err, want)
		}
	}
}

// The tensors a GGUF file's model does not read are counted in words
// that agree with the count: one tensor is, two tensors are.
func TestGGUFUnusedCount(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"blk.1.a"}, "m.gguf: 1 tensor is none of the llama model its metadata describes (blk.1.a)"},
		{[]string{"blk.1.a", "blk.1.b"}, "m.gguf: 2 tensors are none of the llama model its metadata describes (blk.1.a, blk.1.b)"},
		{[]string{"a", "b", "c", "d", "e", "f"}, "m.gguf: 6 tensors are none of the llama model its metadata describes (a, b, c, d and 2 more)"},
	} {
		f := &gguf.File{Path: "m.gguf", KV: map[string]gguf.Value{"general.architecture": {Type: gguf.String, Str: "llama"}}}
		for _, n := range tc.names {
			f.Tensors = append(f.Tensors, gguf.TensorInfo{Name: n})
		}
		if err := ggufUnused(f, map[string]bool{}); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%d unread tensors: %v, want %q", len(tc.names), err, tc.want)
		}
	}
}
