package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkpoint folder holding tensors its model does not read (a Qwen3
// folder whose config.json says Llama: its QK-norms) is said under models'
// table, and by generate, bench and run as one warning line before any
// work; the folder as it is says nothing.
const unreadFixture = "../../runner/testdata/hf/qwen3"

// qwen3AsLlama is a copy of the Qwen3 fixture whose config.json says Llama,
// which leaves its QK-norms unread; said checks that a command's stderr
// holds the one warning line naming them.
func qwen3AsLlama(t *testing.T) (dir string, said func(cmd, stderr string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "qwen3-as-llama")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(unreadFixture, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			data = bytes.ReplaceAll(data, []byte("Qwen3ForCausalLM"), []byte("LlamaForCausalLM"))
			data = bytes.ReplaceAll(data, []byte(`"qwen3"`), []byte(`"llama"`))
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	warning := "mtlbench: warning: " + dir + ": 4 tensors are not read, none of the LlamaForCausalLM model config.json describes " +
		"(model.layers.0.self_attn.k_norm.weight, model.layers.0.self_attn.q_norm.weight, model.layers.1.self_attn.k_norm.weight, model.layers.1.self_attn.q_norm.weight)"
	return dir, func(cmd, stderr string) {
		t.Helper()
		if n := strings.Count(stderr, "mtlbench: warning:"); n != 1 || !strings.Contains(stderr, warning) {
			t.Errorf("%s: %d warnings in\n%s\nwant one: %s", cmd, n, stderr, warning)
		}
	}
}

func TestUnreadTensors(t *testing.T) {
	const fixture = unreadFixture
	dir, said := qwen3AsLlama(t)
	warning := "mtlbench: warning: " + dir + ": "

	out, _, err := mtl(t, "models", "--backend", "cpu", dir)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models-unread", out)
	gen := []string{"generate", "--backend", "cpu", "--tokens", "1,2,3", "--max-new-tokens", "2"}
	_, stderr, err := mtl(t, append(gen, "--model", dir, "--against", "cpu")...)
	if err != nil {
		t.Fatalf("generate: %v\n%s", err, stderr)
	}
	said("generate", stderr)
	if w, ran := strings.Index(stderr, warning), strings.Index(stderr, " on cpu: "); ran < w {
		t.Errorf("generate warned after it ran:\n%s", stderr)
	}
	if _, stderr, err := mtl(t, append(gen, "--model", fixture)...); err != nil || strings.Contains(stderr, "warning") {
		t.Errorf("generate %s: %v\n%s", fixture, err, stderr)
	}

	work := t.TempDir()
	_, stderr, err = mtl(t, "bench", "-m", dir, "-b", "1", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0",
		"--backend", "cpu", "--threads", "1", "--db", filepath.Join(work, "b.db"), "-q")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	said("bench", stderr)

	// Two layer counts: two loads of the one folder, said once.
	suite := filepath.Join(work, "unread.yaml")
	text := "name: unread\nmodel: { path: " + dir + " }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n" +
		"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: one\n    kind: model\n    params: { layers: 1 }\n  - name: all\n    kind: model\n"
	if err := os.WriteFile(suite, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = mtl(t, "run", suite, "--db", filepath.Join(work, "r.db"), "-q")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	said("run", stderr)
}

// suites validate, ab (before its preflight runs either binary) and tune's
// suite buckets say the same one line as run, through model.WarnUnread;
// the folder as it is says nothing.
func TestUnreadTensorsSaidByChecks(t *testing.T) {
	isolate(t)
	dir, said := qwen3AsLlama(t)
	work := t.TempDir()
	suite := func(model string) string {
		p := filepath.Join(work, filepath.Base(model)+".yaml")
		text := "name: unread\nmodel: { path: " + model + " }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n" +
			"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: one\n    kind: model\n    params: { layers: 1 }\n  - name: all\n    kind: model\n"
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args func(suite string) []string
		ok   bool // the command succeeds
	}{
		{"suites validate", func(s string) []string { return []string{"suites", "validate", s} }, true},
		{"tune", func(s string) []string {
			return []string{"tune", s, "--kernel", "matmul", "--threads", "1", "--dry-run"}
		}, true},
		// No baseline binary: refused once the suite is checked, before
		// any binary runs.
		{"ab", func(s string) []string { return []string{"ab", s, "--baseline-bin", filepath.Join(work, "nowhere")} }, false},
	} {
		_, stderr, err := mtlTune(t, tc.args(suite(dir))...)
		if tc.ok && err != nil || !tc.ok && err == nil {
			t.Errorf("%s: %v\n%s", tc.name, err, stderr)
		}
		said(tc.name, stderr)
		abs, err := filepath.Abs(unreadFixture)
		if err != nil {
			t.Fatal(err)
		}
		if _, stderr, _ := mtlTune(t, tc.args(suite(abs))...); strings.Contains(stderr, "warning") {
			t.Errorf("%s of %s warned:\n%s", tc.name, abs, stderr)
		}
	}
}

// A generation_config.json that is no JSON is passed over, as transformers
// passes it over: generate says so in one warning line naming the file and
// the error before it runs, and models in a note under its table.
func TestUnreadableGenerationConfigWarns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "qwen3")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.Symlink(mustAbs(t, filepath.Join(unreadFixture, f)), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	gen := filepath.Join(dir, "generation_config.json")
	if err := os.WriteFile(gen, []byte(`{"eos_token_id": 7,}`), 0o644); err != nil {
		t.Fatal(err)
	}
	said := gen + ": not valid JSON at line 1, column 20"
	for _, args := range [][]string{
		{"generate", "--backend", "cpu", "--model", dir, "--tokens", "1,2,3", "--max-new-tokens", "2"},
		{"models", "--backend", "cpu", dir},
	} {
		out, stderr, err := mtl(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, stderr)
		}
		switch args[0] {
		case "generate":
			if n := strings.Count(stderr, "mtlbench: warning:"); n != 1 || !strings.Contains(stderr, "mtlbench: warning: "+said) {
				t.Errorf("generate: %d warnings in\n%s\nwant one naming %s", n, stderr, said)
			}
		case "models":
			if !strings.Contains(out, said) {
				t.Errorf("models: no note of %s in\n%s", said, out)
			}
		}
	}
}
