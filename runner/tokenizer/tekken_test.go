package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/envconfig"
)

// tekkenCases are tiktoken's encodings and mistral-common's decodings of
// test strings, as tools/fixtures/make_tekken_fixtures.mjs writes them
// (testdata/tekken/README.md).
type tekkenCases struct {
	MistralCommon []struct {
		Text string  `json:"text"`
		IDs  []int32 `json:"ids"`
	} `json:"mistral_common"`
	Cases   []encodeCase `json:"cases"`
	Decodes []struct {
		IDs            []int32 `json:"ids"`
		Decoded        string  `json:"decoded"`
		DecodedSpecial string  `json:"decoded_special"`
	} `json:"decodes"`
}

func readTekkenCases(t *testing.T, name string) tekkenCases {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tekken", name))
	if err != nil {
		t.Fatal(err)
	}
	var c tekkenCases
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Cases) < 20 || len(c.Decodes) < 6 {
		t.Fatalf("%s: %d cases and %d decodings, want 20 and 6", name, len(c.Cases), len(c.Decodes))
	}
	return c
}

func checkTekkenCases(t *testing.T, tok *Tokenizer, c tekkenCases) {
	t.Helper()
	for _, tc := range c.Cases {
		got, err := tok.Encode(tc.Text, true)
		if err != nil || !slices.Equal(got, tc.IDs) {
			t.Errorf("%q:\n got %v, %v\nwant %v", tc.Text, got, err, tc.IDs)
		}
	}
	check := func(ids []int32, decoded, decodedSpecial string) {
		t.Helper()
		for _, d := range []struct {
			skip bool
			want string
		}{{true, decoded}, {false, decodedSpecial}} {
			if got, err := tok.Decode(ids, d.skip); err != nil || got != d.want {
				t.Errorf("decode %v (skip special %v): %q, %v; want %q", ids, d.skip, got, err, d.want)
			}
		}
	}
	for _, tc := range c.Cases {
		check(tc.IDs, tc.Decoded, tc.DecodedSpecial)
	}
	for _, tc := range c.Decodes {
		check(tc.IDs, tc.Decoded, tc.DecodedSpecial)
	}
}

// A folder with a tekken.json and no tokenizer.json: the fixture is the
// first ranks of the real tekken_240718 vocabulary, and the ids are
// tiktoken's (the library mistral-common encodes with) over the same ranks.
func TestTekkenMatchesTiktoken(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "tekken"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Describe(); got != "Tekken byte-level BPE (tekken.json v3), 2400 tokens" {
		t.Errorf("Describe: %q", got)
	}
	if got := tok.EndOfGeneration(); !slices.Equal(got, []int32{2}) {
		t.Errorf("EndOfGeneration: %v, want [2] (</s>)", got)
	}
	checkTekkenCases(t, tok, readTekkenCases(t, "tiktoken.json"))
	// Without BOS the text's ids alone; a prompt that is <s> as text is
	// that text's tokens, not id 1.
	if got, err := tok.Encode("<s>", false); err != nil || slices.Contains(got, 1) || len(got) < 2 {
		t.Errorf("<s> as text: %v, %v", got, err)
	}
	// The 100 listed ranks past default_vocab_size are cut: a token among
	// them is spelled from the kept ones.
	var f struct {
		Vocab []struct {
			TokenStr *string `json:"token_str"`
		} `json:"vocab"`
	}
	data, err := os.ReadFile(filepath.Join("testdata", "tekken", "tekken.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &f); err != nil || len(f.Vocab) != 1500 {
		t.Fatalf("%d entries, %v", len(f.Vocab), err)
	}
	cut := 0
	for r := 1400; r < 1500; r++ {
		s := f.Vocab[r].TokenStr
		if s == nil || len(*s) < 3 || strings.TrimLeft(*s, " abcdefghijklmnopqrstuvwxyz") != "" {
			continue
		}
		cut++
		if got, err := tok.Encode(*s, false); err != nil || len(got) < 2 || slices.Max(got) >= 2400 {
			t.Errorf("%q, rank %d, past the cut: %v, %v", *s, r, got, err)
		}
	}
	if cut < 10 {
		t.Errorf("%d words among the cut ranks, want 10", cut)
	}
}

// The special tokens listed in the file (version v7 and later) are the
// ids before the vocabulary: a v13 file with [THINK] and [/THINK] among
// them, BOS and EOS by their text, the rest <SPECIAL_i>.
func TestTekkenSpecialTokensList(t *testing.T) {
	var f map[string]any
	data, err := os.ReadFile(filepath.Join("testdata", "tekken", "tekken.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	var specials []map[string]any
	// As v13 files list them: [THINK] and [/THINK] at 35 and 36, the
	// ranks before them that name nothing as <SPECIAL_i>. The ids the
	// fixture's cases use are the v3 list's, so they hold.
	list := slices.Clone(tekkenV3Specials)
	for i := len(list); i < 35; i++ {
		list = append(list, fmt.Sprintf("<SPECIAL_%d>", i))
	}
	for i, s := range append(list, "[THINK]", "[/THINK]") {
		specials = append(specials, map[string]any{"rank": i, "token_str": s, "is_control": true})
	}
	f["special_tokens"] = specials
	f["config"].(map[string]any)["version"] = "v13"
	tok := parseMap(t, f)
	if tok.kind != "Tekken byte-level BPE (tekken.json v13)" {
		t.Errorf("kind: %q", tok.kind)
	}
	checkTekkenCases(t, tok, readTekkenCases(t, "tiktoken.json"))
	if got, _ := tok.Decode([]int32{35, 1072, 36, 999}, false); got != "[THINK]H[/THINK]<SPECIAL_999>" {
		t.Errorf("decode with specials kept: %q", got)
	}

	// <s> and </s> elsewhere: BOS and EOS follow their text.
	specials[1]["token_str"], specials[5]["token_str"] = "[AVAILABLE_TOOLS]", "<s>"
	specials[2]["token_str"], specials[6]["token_str"] = "[/AVAILABLE_TOOLS]", "</s>"
	tok = parseMap(t, f)
	if got, err := tok.Encode("a", true); err != nil || !slices.Equal(got, []int32{5, 1097}) {
		t.Errorf("BOS at 5: %v, %v", got, err)
	}
	if got := tok.EndOfGeneration(); !slices.Equal(got, []int32{6}) {
		t.Errorf("EndOfGeneration: %v, want [6]", got)
	}
	// No <s> and no </s>: no BOS, nothing ends a generation.
	specials[5]["token_str"], specials[6]["token_str"] = "[X]", "[Y]"
	tok = parseMap(t, f)
	if got, err := tok.Encode("a", true); err != nil || !slices.Equal(got, []int32{1097}) {
		t.Errorf("no BOS: %v, %v", got, err)
	}
	if got := tok.EndOfGeneration(); got != nil {
		t.Errorf("EndOfGeneration: %v, want none", got)
	}
}

func parseMap(t *testing.T, f map[string]any) *Tokenizer {
	t.Helper()
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ParseTekken(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The whole tekken_240718 vocabulary, where MTLBENCH_TEKKEN_240718 names a
// copy (make_tekken_fixtures.mjs writes one, from the ranks an npm package
// ships): ids mistral-common's own tests expect from it, and tiktoken's for
// the fixture's texts.
func TestTekkenFullVocabulary(t *testing.T) {
	p := envconfig.Get("MTLBENCH_TEKKEN_240718")
	if p == "" {
		t.Skip("MTLBENCH_TEKKEN_240718 names no tekken_240718.json")
	}
	tok, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	c := readTekkenCases(t, "full-240718.json")
	if len(c.MistralCommon) == 0 {
		t.Fatal("no mistral-common cases")
	}
	for _, tc := range c.MistralCommon {
		if got, err := tok.Encode(tc.Text, false); err != nil || !slices.Equal(got, tc.IDs) {
			t.Errorf("mistral-common's %q: %v, %v; want %v", tc.Text, got, err, tc.IDs)
		}
	}
	checkTekkenCases(t, tok, c)
}

// tekkenFile is a tekken.json of the 256 bytes and the extra tokens after
// them, split by Tekken's own pattern, with 20 special tokens (v3's).
func tekkenFile(extra ...string) map[string]any {
	var vocab []map[string]any
	for i := range 256 {
		vocab = append(vocab, map[string]any{"rank": i, "token_bytes": base64.StdEncoding.EncodeToString([]byte{byte(i)}), "token_str": nil})
	}
	for i, s := range extra {
		vocab = append(vocab, map[string]any{"rank": 256 + i, "token_bytes": base64.StdEncoding.EncodeToString([]byte(s)), "token_str": s})
	}
	return map[string]any{
		"config": map[string]any{"pattern": tekkenSplit, "num_vocab_tokens": len(vocab), "default_vocab_size": len(vocab) + 20,
			"default_num_special_tokens": 20, "version": "v3"},
		"vocab": vocab,
	}
}

// Merge orders worked out by hand on small vocabularies (20 special
// tokens, so byte b is id b+20 and extra token k is id 276+k).
func TestTekkenHandChecked(t *testing.T) {
	const n = 20
	b := func(s string) []int32 {
		var ids []int32
		for i := 0; i < len(s); i++ {
			ids = append(ids, int32(s[i])+n)
		}
		return ids
	}
	for _, tc := range []struct {
		name  string
		extra []string
		text  string
		want  []int32
	}{
		// "abcd": of ab (257), bc (256) and cd (258), bc has the lowest
		// rank and merges first; then a+bc and bc+d are not tokens, so
		// a, bc, d. Merging in listing order (ab, then cd) would give ab, cd.
		{"lowest rank first", []string{"bc", "ab", "cd"}, "abcd", []int32{'a' + n, 256 + n, 'd' + n}},
		// "aaa": both pairs are aa (256); the leftmost merges, then aa+a
		// is not a token: aa, a.
		{"leftmost among equals", []string{"aa"}, "aaa", []int32{256 + n, 'a' + n}},
		// "xabc": bc (256) merges first, then a+bc is the token abc (258):
		// tiktoken ranks a join by the bytes it makes, whichever pair it
		// joins (ab, c or a, bc).
		{"join by bytes", []string{"bc", "ab", "abc"}, "xabc", append(b("x"), 258+n)},
		// wxy is a token no merge reaches (no wx, no xy): a piece that is a
		// token whole is that token, as tiktoken looks it up before merging.
		{"whole piece", []string{"wxy"}, "wxy", []int32{256 + n}},
		{"whole piece only", []string{"wxy"}, "wxyz", b("wxyz")},
		// é is the bytes C3 A9, a token; è (C3 A8) is not: its two bytes.
		{"bytes", []string{"\xc3\xa9"}, "éè", append([]int32{256 + n}, b("è")...)},
		// The pattern splits before merging: " abCD" is the pieces " ab"
		// and "CD" (an upper-case run after lower case starts a piece), so
		// b and C never meet though bC (256) ranks first: " a" (257), b,
		// then CD, a token whole (258).
		{"split first", []string{"bC", " a", "CD"}, " abCD", []int32{257 + n, 'b' + n, 258 + n}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := parseMap(t, tekkenFile(tc.extra...))
			got, err := tok.Encode(tc.text, true)
			want := append([]int32{1}, tc.want...)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%q: %v, %v; want %v", tc.text, got, err, want)
			}
			if s, err := tok.Decode(got, true); err != nil || s != tc.text {
				t.Errorf("decode: %q, %v", s, err)
			}
		})
	}
}

// A pattern that does not cover the whole text encodes its matches alone,
// as tiktoken's encode does (find_iter over the text): what lies between
// them is dropped, where HF's Isolated split would keep it as a piece. The
// published pattern covers every character (TestTekkenMatchesTiktoken).
func TestTekkenPatternGaps(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name, pattern, text string
		want                []int32
		dropped             []string // what Dropped says, for a warning
	}{
		{"digits not covered", `\p{L}+| `, "ab12 cd", []int32{'a' + n, 'b' + n, ' ' + n, 'c' + n, 'd' + n}, []string{"12"}},
		{"a gap at each end", `b+`, "abba", []int32{'b' + n, 'b' + n}, []string{"a", "a"}},
		{"nothing matched", `z`, "abc", nil, []string{"abc"}},
		{"the whole text covered", `.`, "ab", []int32{'a' + n, 'b' + n}, nil},
	} {
		f := tekkenFile()
		f["config"].(map[string]any)["pattern"] = tc.pattern
		tok := parseMap(t, f)
		got, err := tok.Encode(tc.text, false)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: pattern %q over %q: %v, %v; want %v", tc.name, tc.pattern, tc.text, got, err, tc.want)
		}
		if d, err := tok.Dropped(tc.text); err != nil || !slices.Equal(d, tc.dropped) {
			t.Errorf("%s: Dropped(%q) = %q, %v; want %q", tc.name, tc.text, d, err, tc.dropped)
		}
	}
	// The published pattern, and a tokenizer of another kind, drop nothing.
	if d, err := parseMap(t, tekkenFile()).Dropped("ab12 cd\n\t é 🙂"); err != nil || d != nil {
		t.Errorf("the published pattern drops %q, %v", d, err)
	}
	if d, err := (&Tokenizer{}).Dropped("ab"); err != nil || d != nil {
		t.Errorf("another tokenizer drops %q, %v", d, err)
	}
}

// tiktokenMerge is tiktoken's BPE as its definition reads: merge the
// adjacent pair whose joined bytes have the lowest rank, leftmost among
// equals, until no join is a token.
func tiktokenMerge(t *Tokenizer, piece string) []string {
	return definitionMerge(piece, func(a, b string) (int, bool) {
		r, ok := t.pieceRanks[a+b]
		return r, ok
	})
}

// The heap-ordered merges give the definition's pieces on random strings
// of the fixture's most common bytes.
func TestTekkenMergesMatchDefinition(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "tekken"))
	if err != nil {
		t.Fatal(err)
	}
	alphabet := []byte(" etaoinshrdlcu\n\t.,'")
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 400 {
		n := 1 + rng.IntN(30)
		if trial%100 == 0 {
			n = 2000
		}
		var b []byte
		for range n {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		piece := byteLevel(b)
		if got, want := tok.merge(piece), tiktokenMerge(tok, piece); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %q\nwant %q", b, got, want)
		}
	}
}

// Which file a folder's tokenizer is: tokenizer.json where there is one,
// else tekken.json; a file is read as a tekken.json by its name or its
// shape.
func TestTekkenLoad(t *testing.T) {
	tekken, err := os.ReadFile(filepath.Join("testdata", "tekken", "tekken.json"))
	if err != nil {
		t.Fatal(err)
	}
	hf, err := os.ReadFile(filepath.Join("testdata", "gpt2", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := Load(dir); !errors.Is(err, ErrNoTokenizer) || !contains(err.Error(), "no tokenizer.json or tekken.json") {
		t.Errorf("an empty folder: %v", err)
	}
	write("tekken.json", tekken)
	if FileIn(dir) != filepath.Join(dir, "tekken.json") {
		t.Errorf("FileIn: %q", FileIn(dir))
	}
	if tok, err := Load(dir); err != nil || !strings.HasPrefix(tok.Describe(), "Tekken") {
		t.Errorf("a folder with tekken.json: %v", err)
	}
	write("tokenizer.json", hf)
	if tok, err := Load(dir); err != nil || !strings.HasPrefix(tok.Describe(), "BPE (tokenizer.json)") {
		t.Errorf("a folder with both: %v, want tokenizer.json's", err)
	}
	// By shape: a config and no model.
	if tok, err := Load(write("mistral.json", tekken)); err != nil || !tok.tekken {
		t.Errorf("a tekken.json by another name: %v", err)
	}
	// By name, mistral-common's rule: a tokenizer.json named so is not one.
	if _, err := Load(write("tekken_240911.json", hf)); err == nil || !contains(err.Error(), "not a tekken.json: no config") {
		t.Errorf("a tokenizer.json named tekken: %v", err)
	}
}

// A file mistral-common would refuse, or this reader could not follow, is
// refused at load, naming the file and the entry.
func TestTekkenBadInput(t *testing.T) {
	edit := func(f func(m map[string]any)) string {
		m := tekkenFile("ab", "cd")
		f(m)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	cfg := func(key string, v any) string {
		return edit(func(m map[string]any) {
			if v == nil {
				delete(m["config"].(map[string]any), key)
			} else {
				m["config"].(map[string]any)[key] = v
			}
		})
	}
	entry := func(i int, key string, v any) string {
		return edit(func(m map[string]any) {
			e := m["vocab"].([]map[string]any)[i]
			if v == nil {
				delete(e, key)
			} else {
				e[key] = v
			}
		})
	}
	specials := func(list ...any) string {
		return edit(func(m map[string]any) {
			var l []map[string]any
			for i := 0; i < len(list); i += 2 {
				l = append(l, map[string]any{"rank": list[i], "token_str": list[i+1], "is_control": true})
			}
			m["special_tokens"] = l
		})
	}
	for _, tc := range []struct{ name, json, want string }{
		{"not json", `{"config": `, "not a tekken.json: not valid JSON"},
		{"not UTF-8", "{\"config\": {\"pattern\": \"\xff\"}}", "not a tekken.json: not UTF-8 text at line 1, column 25: byte 0xff begins no UTF-8 character"},
		{"vocab an object", `{"config": {}, "vocab": {}}`, "not a tekken.json: vocab is a JSON object, want a list"},
		{"rank a string", entry(3, "rank", "3"), `not a tekken.json: vocab[3].rank is a JSON string ("3"), want a whole number`},
		{"special rank a string", edit(func(m map[string]any) {
			m["special_tokens"] = []any{map[string]any{"rank": 0, "token_str": "<unk>"}, map[string]any{"rank": 1, "token_str": 5}}
		}), "not a tekken.json: special_tokens[1].token_str is a JSON number, want a string"},
		{"no config", `{"vocab": []}`, "not a tekken.json: no config"},
		{"no version", cfg("version", nil), "config.version is missing (mistral-common reads v1, v2, v3, v7, v11, v13, v15)"},
		{"unknown version", cfg("version", "v4"), `config.version "v4" is not a version mistral-common reads`},
		{"no special tokens after v7", cfg("version", "v11"), "special_tokens is missing, which mistral-common requires of a file of version v11"},
		{"no vocab size", cfg("default_vocab_size", nil), "config.default_vocab_size is missing"},
		{"no special count", cfg("default_num_special_tokens", nil), "config.default_num_special_tokens is missing"},
		{"huge vocab size", cfg("default_vocab_size", 1<<40), "config.default_vocab_size is 1099511627776, outside 0..2097152"},
		{"vocab size past the list", cfg("default_vocab_size", 279), "config.default_vocab_size 279 is 20 special tokens and 259 vocabulary tokens, but vocab lists 258"},
		{"fewer than the bytes", cfg("default_vocab_size", 200), "leaves 180 vocabulary tokens after the 20 special ones, fewer than the 256 single bytes"},
		{"v3 specials past the count", edit(func(m map[string]any) {
			m["config"].(map[string]any)["default_num_special_tokens"] = 10
			m["config"].(map[string]any)["default_vocab_size"] = 268
		}), "20 special tokens, more than config.default_num_special_tokens 10"},
		{"no pattern", cfg("pattern", nil), "config.pattern is missing or empty"},
		{"bad pattern", cfg("pattern", "(a"), `config.pattern: regex "(a": error parsing regexp`},
		{"rank skipped", entry(257, "rank", 258), "vocab[257] has rank 258: the ranks must run 0, 1, 2, ... in the list's order"},
		{"no rank", entry(256, "rank", nil), "vocab[256]: rank and token_bytes are required"},
		{"no bytes", entry(256, "token_bytes", nil), "vocab[256]: rank and token_bytes are required"},
		{"bad base64", entry(257, "token_bytes", "Y2Q*"), `vocab[257]: token_bytes "Y2Q*" is not base64`},
		{"bytes out of order", entry(65, "token_bytes", "Qg=="), "vocab[65]: token_bytes \"Qg==\", where the first 256 ranks are the single bytes in order (rank 65 is the byte 0x41)"},
		{"bytes twice", entry(257, "token_bytes", "YWI="), `vocab[257]: token_bytes "YWI=" is also vocab[256]'s`},
		{"special rank", specials(0, "<unk>", 2, "<s>"), `special_tokens[1] "<s>" has rank 2: the ranks must run 0, 1, 2`},
		{"special text twice", specials(0, "<s>", 1, "<s>"), `special token 1 "<s>" is also special token 0`},
		{"special like a filler", specials(0, "<SPECIAL_5>"), `special token 5 "<SPECIAL_5>" is also special token 0`},
		{"special without text", specials(0, nil), "special_tokens[0]: rank and token_str are required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tekken.json")
			if err := os.WriteFile(p, []byte(tc.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.HasPrefix(err.Error(), p+": ") || !contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s: ...%s...", err, p, tc.want)
			}
		})
	}
	// Entries past default_vocab_size are not read, as mistral-common cuts
	// them before it looks at them.
	tok := parseMap(t, func() map[string]any {
		m := tekkenFile("ab", "cd")
		m["vocab"].([]map[string]any)[257]["token_bytes"] = "not base64!"
		m["config"].(map[string]any)["default_vocab_size"] = 277
		return m
	}())
	if got, err := tok.Encode("cd", false); err != nil || !slices.Equal(got, []int32{'c' + 20, 'd' + 20}) {
		t.Errorf("a cut entry: %v, %v", got, err)
	}
}
