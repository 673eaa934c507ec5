package model

import (
	"path/filepath"
	"strings"
	"testing"
)

// A model name that is neither a preset nor a path says which preset it is
// close to, as a mistyped suite key does; a path, or a name near none of
// them, gets no guess.
func TestUnknownModelSuggestsPreset(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "qwen3-moe-mni")
	for _, tc := range []struct{ name, want string }{
		{"qwen3-moe-mni", `(did you mean "qwen3-moe-mini"?)`},
		{"TinyLlama-1.1B", `(did you mean "tinyllama-1.1b"?)`},
		{"tinyllama", `(did you mean "tinyllama-1.1b"?)`},
		{"gtp2", `(did you mean "gpt2"?)`},
		{"nope", ""},
		{missing, ""},
		{"qwen3-moe-mni.gguf", ""},
	} {
		_, _, err := Open(Spec{Model: tc.name})
		if err == nil || !strings.Contains(err.Error(), "is neither a preset") {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.Contains(err.Error(), "did you mean"); got != (tc.want != "") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
