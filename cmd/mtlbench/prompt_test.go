package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/gguftest"
	"github.com/mtlbench/mtlbench/runner/tokenizer"
)

// generate --prompt encodes the text with the tokenizer, runs what
// --tokens with those ids runs, and decodes the new tokens.
func TestGeneratePrompt(t *testing.T) {
	tokDir := filepath.Join("..", "..", "runner", "tokenizer", "testdata", "llama")
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	const text = "Hello, world! 123"
	ids, err := tok.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != 1 {
		t.Fatalf("the llama fixture's encoding starts with %d, want <s> (1)", ids[0])
	}
	common := []string{"generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "-n", "6", "--json"}
	type out struct {
		Prompt []int32 `json:"prompt"`
		Tokens []int32 `json:"tokens"`
		Text   *string `json:"text"`
	}
	run := func(args ...string) out {
		t.Helper()
		stdout, stderr, err := mtl(t, append(slices.Clone(common), args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	byText := run("--prompt", text, "--tokenizer", tokDir)
	var idList []string
	for _, id := range ids {
		idList = append(idList, strconv.Itoa(int(id)))
	}
	byIDs := run("--tokens", strings.Join(idList, ","))
	if !slices.Equal(byText.Prompt, ids) {
		t.Errorf("prompt ids %v, want the tokenizer's %v", byText.Prompt, ids)
	}
	if !slices.Equal(byText.Tokens, byIDs.Tokens) {
		t.Errorf("tokens %v from --prompt, %v from --tokens", byText.Tokens, byIDs.Tokens)
	}
	// (the fixture's 512 ids are fewer than the preset's 8192: an id past
	// them is shown as [id N], TestGenerateUnnamedIDsShown)
	want, _, _ := tok.DecodeShowing(byText.Tokens, true, func(id int32) string { return fmt.Sprintf("[id %d]", id) })
	if byText.Text == nil || *byText.Text != want || byIDs.Text != nil {
		t.Errorf("text %v, want %q (and none without a tokenizer: %v)", byText.Text, want, byIDs.Text)
	}

	// A checkpoint folder's own tokenizer.json is found without the flag;
	// bad flags say what is wrong.
	dir := t.TempDir()
	data, _ := os.ReadFile(filepath.Join(tokDir, "tokenizer.json"))
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
	ck := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "runner", "testdata", "hf", "llama", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ck, f), data, 0o644)
	}
	// (one of no more tokens than the fixture's 512: the llama tokenizer's
	// 700 would be another model's)
	os.WriteFile(filepath.Join(ck, "tokenizer.json"), []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`), 0o644)
	stdout, stderr, err := mtl(t, "generate", "-m", ck, "--backend", "cpu", "-n", "3", "--prompt", "abba", "--json")
	var own out
	if err != nil || json.Unmarshal([]byte(stdout), &own) != nil || own.Text == nil || !slices.Equal(own.Prompt, []int32{2, 1, 0}) {
		t.Errorf("a checkpoint's own tokenizer: %v %s\n%s", err, stdout, stderr)
	}
	// A .gguf file's own tokenizer (tokenizer.ggml.*, as llama.cpp's
	// converter wrote it) is used without the flag, and as --tokenizer.
	gg := filepath.Join("..", "..", "runner", "testdata", "gguf", "llamacpp-qwen3-q8_0.gguf")
	ggTok, err := tokenizer.Load(gg)
	if err != nil {
		t.Fatal(err)
	}
	ggIDs, _ := ggTok.Encode(text, true)
	for _, args := range [][]string{{"-m", gg}, {"-m", "qwen3-moe-mini", "--layers", "1", "--tokenizer", gg}} {
		stdout, stderr, err := mtl(t, append([]string{"generate", "--backend", "cpu", "-n", "3", "--json", "--prompt", text}, args...)...)
		var o out
		if err != nil || json.Unmarshal([]byte(stdout), &o) != nil || o.Text == nil || !slices.Equal(o.Prompt, ggIDs) {
			t.Errorf("%v: %v %s (want prompt %v)\n%s", args, err, stdout, ggIDs, stderr)
		}
	}
	noTok := filepath.Join("..", "..", "runner", "testdata", "gguf", "llama-q8_0.gguf")
	if _, _, err := mtl(t, "generate", "-m", noTok, "--backend", "cpu", "-n", "2", "--tokens", "1,2"); err != nil {
		t.Errorf("--tokens with a .gguf file that carries no tokenizer: %v", err)
	}
	if _, _, err := mtl(t, "generate", "-m", noTok, "--backend", "cpu", "-n", "2", "--prompt", "hi"); err == nil ||
		!strings.Contains(err.Error(), "carries no tokenizer (no tokenizer.ggml.model)") {
		t.Errorf("--prompt with a .gguf file that carries no tokenizer: %v", err)
	}
	// A tokenizer of another model: its ids run past this one's vocabulary.
	bigTok := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(bigTok, []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "<big>": 9000}, "merges": []}, "added_tokens": [{"id": 9000, "content": "<big>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt", "a<big>", "--tokenizer", bigTok}, "the tokenizer gives ids up to 9000, past qwen3-moe-mini's vocabulary of 8192 tokens: it is another model's tokenizer"},
		// and so whatever ids this prompt gives
		{[]string{"--prompt", "a", "--tokenizer", bigTok}, "the tokenizer gives ids up to 9000, past qwen3-moe-mini's vocabulary of 8192 tokens: it is another model's tokenizer"},
		{[]string{"--prompt", "hi"}, "--prompt needs a tokenizer: qwen3-moe-mini is a preset, with none"},
		{[]string{"--prompt", "hi", "--tokens", "1"}, "give the prompt as --tokens (ids) or --prompt (text), one of them"},
		{nil, "give the prompt as --tokens (ids) or --prompt (text), one of them"},
		{[]string{"--prompt", "hi", "--tokenizer", t.TempDir()}, "--tokenizer: "},
		{[]string{"--prompt", "", "--tokenizer", filepath.Join("..", "..", "runner", "tokenizer", "testdata", "qwen2")}, `--prompt "" encodes to no tokens`},
		{[]string{"--prompt", "bad \xff", "--tokenizer", dir}, "--prompt: the text is not valid UTF-8"},
	} {
		_, _, err := mtl(t, append(slices.Clone(common), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// generate --tokens runs without a tokenizer, but says why no text follows
// the ids when the checkpoint's own could not be read; a preset has none
// to say anything about.
func TestGenerateTokensNotesTheTokenizer(t *testing.T) {
	_, stderr, err := mtl(t, "generate", "-m", filepath.Join("..", "..", "runner", "testdata", "gguf", "llama-q8_0.gguf"), "--tokens", "1,2,3", "-n", "1")
	if err != nil || !strings.Contains(stderr, "note: the checkpoint's tokenizer was not read") || !strings.Contains(stderr, "no tokenizer.ggml.model") {
		t.Errorf("GGUF without a tokenizer: %v\n%s", err, stderr)
	}
	_, stderr, err = mtl(t, "generate", "-m", "qwen3-moe-mini", "--layers", "1", "--tokens", "1,2,3", "-n", "1")
	if err != nil || strings.Contains(stderr, "tokenizer") {
		t.Errorf("preset: %v\n%s", err, stderr)
	}
}

// A checkpoint that does not open is reported as itself, not as a
// tokenizer it could not give: with --prompt (no advice to pass
// --tokenizer or --tokens) and with --tokens (no note that the tokens
// will not be decoded).
func TestBrokenCheckpointBeforeTokenizer(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "runner", "testdata", "gguf", "llamacpp-qwen3-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.gguf")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3", "model.safetensors")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", cut, "--prompt", "Hello"}, "is cut short"},
		{[]string{"--model", cut, "--tokens", "1,2"}, "is cut short"},
		{[]string{"--model", weights, "--tokens", "5,17"}, "is a safetensors weights file, not a checkpoint"},
		// a folder not there is no preset without a tokenizer
		{[]string{"--model", filepath.Join(dir, "Qwen3-0.6B-4bit"), "--prompt", "The capital of France is"}, "is neither a preset"},
	} {
		_, stderr, err := mtl(t, append([]string{"generate", "--backend", "cpu", "-n", "2"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "tokenizer") ||
			strings.Contains(stderr, "note:") {
			t.Errorf("%v: err=%v stderr=%q, want only the checkpoint's error (%q)", c.args, err, stderr, c.want)
		}
	}
}

// A folder that is not the checkpoint the user meant is named for what it
// holds: a tokenizer.json that is a folder, a GGUF file without a config.
func TestGenerateFolderMistakes(t *testing.T) {
	fixture, _ := filepath.Abs(filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3"))
	gguf, _ := filepath.Abs(filepath.Join("..", "..", "runner", "testdata", "gguf", "llama-q8_0.gguf"))
	tokDir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		os.Symlink(filepath.Join(fixture, f), filepath.Join(tokDir, f))
	}
	os.Mkdir(filepath.Join(tokDir, "tokenizer.json"), 0o755)
	ggDir := t.TempDir()
	os.Symlink(gguf, filepath.Join(ggDir, "llama-q8_0.gguf"))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", tokDir, "--prompt", "hi"}, filepath.Join(tokDir, "tokenizer.json") + " is a folder, not a tokenizer.json"},
		{[]string{"-m", ggDir, "--tokens", "1"}, "model folder " + ggDir + " has no config.json; it holds llama-q8_0.gguf: give the file itself, " + filepath.Join(ggDir, "llama-q8_0.gguf")},
		{[]string{"-m", t.TempDir(), "--tokens", "1"}, "has no config.json"},
	} {
		_, _, err := mtl(t, append([]string{"generate", "--backend", "cpu", "-n", "1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// A checkpoint folder with a tekken.json and no tokenizer.json (as some
// Mistral releases ship) encodes --prompt with it: <s> first, the text's
// ids after the special tokens; with neither file --prompt says which it
// looked for.
func TestGenerateTekkenPrompt(t *testing.T) {
	ck := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "runner", "testdata", "hf", "llama", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ck, f), data, 0o644)
	}
	_, _, err := mtl(t, "generate", "-m", ck, "--backend", "cpu", "-n", "2", "--prompt", "ab")
	if err == nil || !strings.Contains(err.Error(), "has no tokenizer.json or tekken.json") {
		t.Errorf("no tokenizer: %v", err)
	}
	// The 256 bytes, then "ab", after v3's 20 special tokens: 277 ids,
	// within the fixture model's 512.
	var vocab []map[string]any
	for i := range 256 {
		vocab = append(vocab, map[string]any{"rank": i, "token_bytes": base64.StdEncoding.EncodeToString([]byte{byte(i)}), "token_str": nil})
	}
	vocab = append(vocab, map[string]any{"rank": 256, "token_bytes": base64.StdEncoding.EncodeToString([]byte("ab")), "token_str": "ab"})
	data, _ := json.Marshal(map[string]any{
		"config": map[string]any{"pattern": `[^\r\n\p{L}\p{N}]?\p{L}+|\s+`, "num_vocab_tokens": 257, "default_vocab_size": 277,
			"default_num_special_tokens": 20, "version": "v3"},
		"vocab": vocab,
	})
	os.WriteFile(filepath.Join(ck, "tekken.json"), data, 0o644)
	stdout, stderr, err := mtl(t, "generate", "-m", ck, "--backend", "cpu", "-n", "3", "--prompt", "ab ba", "--json")
	var o struct {
		Prompt []int32 `json:"prompt"`
		Text   *string `json:"text"`
	}
	// <s>, ab (256+20), " b" (32+20, 98+20), a (97+20)
	if err != nil || json.Unmarshal([]byte(stdout), &o) != nil || o.Text == nil || !slices.Equal(o.Prompt, []int32{1, 276, 52, 118, 117}) {
		t.Errorf("a checkpoint's tekken.json: %v %s\n%s", err, stdout, stderr)
	}
	stdout, _, err = mtl(t, "models", ck)
	if err != nil || !strings.Contains(stdout, "Tekken byte-level BPE (tekken.json v3), 277 tokens") {
		t.Errorf("models: %v\n%s", err, stdout)
	}
}

// Where the checkpoint names no end-of-sequence token, its own tokenizer
// file's (a tekken.json's </s>) ends a generation; --tokenizer's does not,
// nor does one the checkpoint's config overrides.
func TestStopTokens(t *testing.T) {
	tok, err := tokenizer.Load(filepath.Join("..", "..", "runner", "tokenizer", "testdata", "tekken"))
	if err != nil {
		t.Fatal(err)
	}
	hf, err := tokenizer.Load(filepath.Join("..", "..", "runner", "tokenizer", "testdata", "llama"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		named []int32
		tok   *tokenizer.Tokenizer
		own   bool
		want  []int32
	}{
		{nil, tok, true, []int32{2}},
		{[]int32{7}, tok, true, []int32{7}},
		{nil, tok, false, nil},
		{nil, hf, true, nil},
		{nil, nil, true, nil},
	} {
		if got := stopTokens(c.named, c.tok, c.own); !slices.Equal(got, c.want) {
			t.Errorf("stopTokens(%v, own %v): %v, want %v", c.named, c.own, got, c.want)
		}
	}
}

// A tokenizer with fewer ids than the model's vocabulary runs (a padded
// embedding table is no fault), but a new token's id it has no text for is
// shown in the text as [id N] and said once on stderr, not dropped unseen.
func TestGenerateUnnamedIDsShown(t *testing.T) {
	small := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(small, []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`), 0o644)
	tok, err := tokenizer.Load(small)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "-n", "6", "--prompt", "abba", "--tokenizer", small}
	for _, c := range []struct {
		name string
		json bool
	}{{"text", false}, {"json", true}} {
		t.Run(c.name, func(t *testing.T) {
			args := slices.Clone(common)
			if c.json {
				args = append(args, "--json")
			}
			stdout, stderr, err := mtl(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var toks []int32
			var text string
			if c.json {
				var o struct {
					Tokens []int32 `json:"tokens"`
					Text   *string `json:"text"`
				}
				if err := json.Unmarshal([]byte(stdout), &o); err != nil || o.Text == nil {
					t.Fatalf("%v: %s", err, stdout)
				}
				toks, text = o.Tokens, *o.Text
			} else {
				lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
				if len(lines) != 2 {
					t.Fatalf("want the ids and the text, got %q", stdout)
				}
				for _, f := range strings.Fields(strings.NewReplacer(",", " ", "[", " ", "]", " ").Replace(lines[0])) {
					id, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("ids line %q: %v", lines[0], err)
					}
					toks = append(toks, int32(id))
				}
				text = lines[1]
			}
			var want strings.Builder
			var unnamed []string
			for _, id := range toks {
				if tok.Names(id) {
					s, _ := tok.Decode([]int32{id}, true)
					want.WriteString(s)
					continue
				}
				fmt.Fprintf(&want, "[id %d]", id)
				if s := strconv.Itoa(int(id)); !slices.Contains(unnamed, s) {
					unnamed = append(unnamed, s)
				}
			}
			if len(unnamed) == 0 {
				t.Fatalf("the new tokens %v all lie in the 3-token vocabulary: the case does not test anything", toks)
			}
			if text != want.String() {
				t.Errorf("text %q, want %q", text, want.String())
			}
			if n := strings.Count(stderr, "warning: the tokenizer (3 ids) has no text for"); n != 1 {
				t.Errorf("the warning is given %d times, want once:\n%s", n, stderr)
			}
			if !strings.Contains(stderr, unnamed[0]) || !strings.Contains(stderr, "qwen3-moe-mini's vocabulary has 8192") {
				t.Errorf("the warning does not name id %s and the model's vocabulary:\n%s", unnamed[0], stderr)
			}
		})
	}
}

// New tokens a tokenizer has no text for are told apart: ids past its
// vocabulary ask whether it is the model's (naming --tokenizer only where
// it gave the tokenizer), ids within it are tokens it decodes to nothing
// (a GGUF file's unused ones, ids a tokenizer.json skips), which say
// nothing of whose it is.
func TestUnnamedWarning(t *testing.T) {
	for _, c := range []struct {
		name    string
		unnamed []int32
		given   bool
		want    string
	}{
		{"past, --tokenizer", []int32{9, 12}, true,
			"warning: the tokenizer (8 ids) has no text for ids 9 and 12 of the new tokens, shown as [id 9]: m's vocabulary has 16; is --tokenizer this model's?"},
		{"past, the model's own", []int32{9}, false,
			"warning: the tokenizer (8 ids) has no text for id 9 of the new tokens, shown as [id 9]: m's vocabulary has 16; is the tokenizer this model's?"},
		{"within", []int32{5, 3}, false,
			"warning: ids 5 and 3 of the new tokens, shown as [id 5], lie within the tokenizer's 8 ids but it has no text for them (unused or padding tokens, or ids its vocabulary skips)"},
		{"both", []int32{5, 9}, true,
			"warning: id 5 of the new tokens, shown as [id 5], lies within the tokenizer's 8 ids but it has no text for it (unused or padding tokens, or ids its vocabulary skips); " +
				"the tokenizer (8 ids) has no text for id 9 of the new tokens, shown as [id 9]: m's vocabulary has 16; is --tokenizer this model's?"},
	} {
		if got := unnamedWarning(8, c.unnamed, "m", 16, c.given); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// End to end: a tokenizer.json as large as the model's vocabulary that
	// skips most ids.
	gap := filepath.Join(t.TempDir(), "tokenizer.json")
	os.WriteFile(gap, []byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "z": 8191}, "merges": ["a b"]}}`), 0o644)
	_, stderr, err := mtl(t, "generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "-n", "6", "--prompt", "abba", "--tokenizer", gap)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "lie within the tokenizer's 8192 ids but it has no text for them") || strings.Contains(stderr, "this model's?") {
		t.Errorf("ids within the tokenizer's vocabulary, warned as:\n%s", stderr)
	}
}

// A GGUF tokenizer with no tokenizer.ggml.pre is warned of, naming the file
// and the key, as llama.cpp warns of it; the run goes on with llama.cpp's
// "default" split.
func TestGenerateWarnsNoPre(t *testing.T) {
	data, err := gguftest.Bytes(gguftest.KV{Key: "tokenizer.ggml.model", Value: "gpt2"},
		gguftest.KV{Key: "tokenizer.ggml.tokens", Value: []string{"a", "b", "ab"}},
		gguftest.KV{Key: "tokenizer.ggml.merges", Value: []string{"a b"}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "nopre.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := mtl(t, "generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "-n", "1", "--prompt", "ab", "--tokenizer", p)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := "mtlbench: warning: " + p + ": no tokenizer.ggml.pre: the text is split by llama.cpp's \"default\" pre-tokenizer"; !strings.Contains(stderr, want) {
		t.Errorf("stderr:\n%s\nwant %s", stderr, want)
	}
}

// A tekken.json pattern that leaves text between its matches drops it, as
// mistral-common does, and generate says so; the published pattern, which
// covers every character, says nothing.
func TestGenerateWarnsTekkenDropped(t *testing.T) {
	var vocab []map[string]any
	for i := range 256 {
		vocab = append(vocab, map[string]any{"rank": i, "token_bytes": base64.StdEncoding.EncodeToString([]byte{byte(i)}), "token_str": nil})
	}
	for _, c := range []struct {
		pattern, warn string
	}{
		{`\p{L}+`, `mtlbench: warning: --prompt: the tokenizer's tekken.json config.pattern leaves 3 characters of the text between its matches, which are dropped as mistral-common drops them (the first: "12 ")`},
		{`.`, ""},
	} {
		data, err := json.Marshal(map[string]any{
			"config": map[string]any{"pattern": c.pattern, "num_vocab_tokens": 256, "default_vocab_size": 276, "default_num_special_tokens": 20, "version": "v3"},
			"vocab":  vocab,
		})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "tekken.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := mtl(t, "generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "-n", "1", "--prompt", "ab12 c", "--tokenizer", p)
		switch {
		case err != nil:
			t.Errorf("pattern %s: %v\n%s", c.pattern, err, stderr)
		case c.warn == "" && strings.Contains(stderr, "dropped"):
			t.Errorf("pattern %s: stderr:\n%s\nwant no warning", c.pattern, stderr)
		case c.warn != "" && !strings.Contains(stderr, c.warn):
			t.Errorf("pattern %s: stderr:\n%s\nwant %s", c.pattern, stderr, c.warn)
		}
	}
}
