package model

import (
	"github.com/mtlbench/mtlbench/internal/clip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/gguftest"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// A GGUF metadata string an error echoes (here the architecture; the rope
// scaling's type and the tokenizer's keys by the same rule) is quoted cut to its first characters, its length said:
// a value of megabytes is not copied into the message.
func TestGGUFLongValuesClipped(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	clipped := `"` + strings.Repeat("x", clip.Most-3) + `..." (1048576 characters)`
	for _, c := range []struct {
		name string
		kvs  []gguftest.KV
		want string
	}{
		{"architecture", []gguftest.KV{{Key: "general.architecture", Value: long}}, "architecture " + clipped + " is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, err := gguftest.Bytes(c.kvs...)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err = Open(Spec{Model: p})
			checkClipped(t, err, c.want)
		})
	}
}

// A config.json string an error echoes is quoted by the same rule.
func TestConfigLongValuesClipped(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	clipped := `"` + strings.Repeat("x", clip.Most-3) + `..." (1048576 characters)`
	for _, c := range []struct{ json, want string }{
		{`{"model_type": "` + long + `"}`, "model_type " + clipped + " is none of"},
		{`{"architectures": ["` + long + `"]}`, "unknown architecture " + clipped},
		{`{"model_type": "llama", "hidden_act": "` + long + `"}`, "hidden_act " + clipped + " is not supported"},
		{`{"model_type": "gpt2", "activation_function": "` + long + `"}`, "activation_function " + clipped + " is not supported"},
	} {
		_, err := ParseHFConfig("config.json", []byte(c.json))
		checkClipped(t, err, c.want)
	}
}

// A quantization module key of megabytes is quoted by the same rule where a
// value under it is of the wrong type, as where it is named otherwise.
func TestQuantKeyClipped(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	want := `config.json: quantization["` + strings.Repeat("x", clip.Most-3) + `..." (1048576 characters)].bits is a JSON string ("8"), want a whole number`
	_, err := parseMLXQuant("config.json", []byte(`{"quantization": {"group_size": 64, "bits": 4, "`+long+`": {"bits": "8"}}}`))
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		s := ""
		if err != nil {
			s = err.Error()
		}
		t.Errorf("error of %d bytes: %.300s, want %s", len(s), s, want)
	}
}

// checkClipped holds err to an error of at most 2000 bytes holding want.
func checkClipped(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 2000 {
		s := ""
		if err != nil {
			s = err.Error()
		}
		t.Errorf("error of %d bytes: %.300s, want one holding %s", len(s), s, want)
	}
}

// An error about an expert stack of an mlx-lm folder names its tensors
// whole: cut to their first characters they lose which of the weight,
// scales and biases, or which projection, is meant.
func TestPackedTensorNamedWhole(t *testing.T) {
	const stack = "model.layers.0.mlp.switch_mlp.up_proj."
	set := func(name, dtype string) func([]safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			out := ts[:0]
			for _, w := range ts {
				switch {
				case w.Name != name:
				case dtype == "":
					continue // dropped
				default:
					w.DType = dtype
				}
				out = append(out, w)
			}
			return out
		}
	}
	for _, c := range []struct {
		name string
		edit func([]safetensors.WriteTensor) []safetensors.WriteTensor
		want []string
	}{
		{"biases missing", set(stack+"biases", ""), []string{`"` + stack + `weight"`, `"` + stack + `biases"`}},
		{"scales of an integer dtype", set(stack+"scales", "I16"), []string{`"` + stack + `scales" has dtype I16`}},
		{"biases of another dtype", set(stack+"biases", "F16"), []string{`"` + stack + `biases" is F16`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := mlxCopyOf(t, "../testdata/mlx/qwen3_moe-q4", nil, c.edit)
			err := openAll(dir)
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to hold %s", err, w)
				}
			}
		})
	}
}
