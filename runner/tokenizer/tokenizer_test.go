package tokenizer

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/mtlbench/mtlbench/internal/clip"
)

// testdata holds tokenizer.json files in the shapes checkpoints ship,
// trained by HF tokenizers, with its own encodings and decodings of test
// strings (tools/fixtures/make_tokenizer_fixtures.py): ids and text must
// match it exactly.
func TestMatchesHFTokenizers(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "*", "expected.json"))
	if len(dirs) < 7 {
		t.Fatalf("%d fixtures, want 7", len(dirs))
	}
	for _, exp := range dirs {
		dir := filepath.Dir(exp)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			tok, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(exp)
			if err != nil {
				t.Fatal(err)
			}
			var want struct {
				Cases []encodeCase `json:"cases"`
			}
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			for _, c := range want.Cases {
				got, err := tok.Encode(c.Text, true)
				if err != nil {
					t.Errorf("%q: %v", c.Text, err)
					continue
				}
				if c.IDs == nil {
					c.IDs = []int32{}
				}
				if got == nil {
					got = []int32{}
				}
				if !slices.Equal(got, c.IDs) {
					t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
				}
				for _, d := range []struct {
					skip bool
					want string
				}{{true, c.Decoded}, {false, c.DecodedSpecial}} {
					text, err := tok.Decode(c.IDs, d.skip)
					if err != nil || text != d.want {
						t.Errorf("decode %v (skip special %v): %q, %v; want %q", c.IDs, d.skip, text, err, d.want)
					}
				}
			}
		})
	}
}

// Files the tokenizer cannot follow are refused at load, naming what; text
// and ids it cannot take are errors, never a panic.
func TestBadInput(t *testing.T) {
	base := `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}%s}`
	for _, tc := range []struct {
		name, json, want string
	}{
		{"not json", `{"model": `, "not a tokenizer.json"},
		// HF tokenizers refuses it ("stream did not contain valid UTF-8").
		{"not UTF-8", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\xff\": 0}}}", "not a tokenizer.json: not UTF-8 text at line 1, column 39: byte 0xff begins no UTF-8 character"},
		{"a list", `[]`, "not a tokenizer.json: the file is a JSON array, want an object"},
		{"type a number", `{"model": {"type": 5}}`, "not a tokenizer.json: model.type is a JSON number, want a string"},
		{"merges an object", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": {"a": 1}}}`, "model.merges is a JSON object, want a list"},
		{"unigram", `{"model": {"type": "Unigram", "vocab": []}}`, `model type "Unigram" is not supported (BPE)`},
		{"id out of range", `{"model": {"type": "BPE", "vocab": {"a": -1}}}`, `model.vocab: token "a" has id -1`},
		{"empty Replace", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": {"type": "Replace", "pattern": {"String": ""}, "content": "x"}}`, "Replace of an empty pattern is not supported"},
		{"deep Sequence", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": ` + strings.Repeat(`{"type": "Sequence", "normalizers": [`, 40) + `{"type": "NFC"}` + strings.Repeat(`]}`, 40) + `}`, "Sequence nested deeper than 16"},
		{"Bert cls past the vocabulary", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "post_processor": {"type": "BertProcessing", "sep": ["a", 0], "cls": ["x", 2147483655]}}`, `special token "x" has id 2147483655, outside the vocabulary`},
		{"huge id", `{"model": {"type": "BPE", "vocab": {"a": 4000000000}}}`, `outside 0..2097151`},
		{"merge form", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}}`, `model.merges[0] "ab": want two pieces separated by one space`},
		{"merge pair", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}}`, `model.merges[0]: want "a b" or [a, b]`},
		// HF's BPE refuses a merge of or into a piece its vocab lacks
		// (MergeTokenOutOfVocabulary); the model's vocab, not added tokens.
		{"merge into a piece not in the vocabulary", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "<unk>": 2}, "merges": ["a b"], "unk_token": "<unk>"}}`, `model.merges[0] "a b": "ab" is not in model.vocab`},
		{"merge of a piece not in the vocabulary", `{"model": {"type": "BPE", "vocab": {"a": 0, "ac": 1}, "merges": [["a", "c"]]}}`, `model.merges[0] "a c": "c" is not in model.vocab`},
		{"merge of an added token", `{"model": {"type": "BPE", "vocab": {"a": 0, "<x>a": 1}, "merges": ["<x> a"]}, "added_tokens": [` + added(2, "<x>", false, false) + `]}`, `model.merges[0] "<x> a": "<x>" is not in model.vocab`},
		{"unk", `{"model": {"type": "BPE", "vocab": {"a": 0}, "unk_token": "<unk>"}}`, `model.unk_token "<unk>" is not in model.vocab`},
		// HF's BPE model looks unk_token up in model.vocab alone: tokenizers
		// 0.23.2 encodes "b" here as "Unk token `<unk>` not found in the
		// vocabulary", where <unk> as id 1 was given before.
		{"unk only an added token", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}, "added_tokens": [` + added(1, "<unk>", true, false) + `]}`, `model.unk_token "<unk>" is not in model.vocab (an added token of that text does not serve`},
		{"dropout", `{"model": {"type": "BPE", "vocab": {"a": 0}, "dropout": 0.1}}`, "model.dropout 0.1"},
		{"suffix", `{"model": {"type": "BPE", "vocab": {"a": 0}, "end_of_word_suffix": "</w>"}}`, `model.end_of_word_suffix "</w>" is not supported`},
		{"normalizer", fmtBase(base, `, "normalizer": {"type": "BertNormalizer"}`), `normalizer: "BertNormalizer" is not supported`},
		{"pre-tokenizer", fmtBase(base, `, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}]}`), `pre_tokenizer: pretokenizers[0]: "Whitespace" is not supported`},
		{"bad regex", fmtBase(base, `, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated", "invert": false}`), `pre_tokenizer: regex "(a"`},
		{"behavior", fmtBase(base, `, "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Merged", "invert": false}`), `pre_tokenizer: Split behavior "Merged" is not one of HF's (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous)`},
		{"sequence", fmtBase(base, `, "decoder": {"type": "Sequence", "decoders": 3}`), "decoder: decoders is a JSON number, want a list"},
		// HF's pattern is an enum: one of String and Regex (tokenizers 0.23.2 refuses both, and neither).
		{"both patterns", fmtBase(base, `, "pre_tokenizer": {"type": "Split", "pattern": {"String": "a", "Regex": "b"}, "behavior": "Isolated", "invert": false}`), "pre_tokenizer: pattern names both String and Regex: want one"},
		{"both Replace patterns", fmtBase(base, `, "normalizer": {"type": "Replace", "pattern": {"Regex": "b", "String": "a"}, "content": ""}`), "normalizer: pattern names both String and Regex: want one"},
		{"no pattern", fmtBase(base, `, "decoder": {"type": "Replace", "pattern": {}, "content": ""}`), "decoder: pattern names neither String nor Regex"},
		// A wrong type inside a part names the part's place and its key.
		{"prepend", fmtBase(base, `, "normalizer": {"type": "Prepend", "prepend": 5}`), "normalizer: prepend is a JSON number, want a string"},
		{"member's key", fmtBase(base, `, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Prepend", "prepend": 5}]}`), "normalizer: normalizers[1]: prepend is a JSON number, want a string"},
		{"member not an object", fmtBase(base, `, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, 5]}`), "normalizer: normalizers[1]: it is a JSON number, want an object"},
		{"part not an object", fmtBase(base, `, "normalizer": 5`), "normalizer: it is a JSON number, want an object"},
		{"no members", fmtBase(base, `, "normalizer": {"type": "Sequence"}`), "normalizer: a Sequence without normalizers"},
		{"nested pattern", fmtBase(base, `, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": 7}, "behavior": "Isolated"}]}`), "pre_tokenizer: pretokenizers[0]: pattern.Regex is a JSON number, want a string"},
		{"decoder content", fmtBase(base, `, "decoder": {"type": "Sequence", "decoders": [{"type": "Strip", "content": 1, "start": 1, "stop": 0}]}`), "decoder: decoders[0]: content is a JSON number, want a string"},
		{"template", fmtBase(base, `, "post_processor": {"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": "x"}]}`), `post_processor: processors[0]: single is a JSON string ("x"), want a list`},
		{"template id", fmtBase(base, `, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [99], "tokens": ["<s>"]}}}`), `special token "<s>" has id 99, outside the vocabulary`},
		// Which piece an id shared by two decodes to would be a map's order.
		{"two pieces, one id", `{"model": {"type": "BPE", "vocab": {"c": 1, "b": 0, "a": 0}}}`, `model.vocab: "a" and "b" both have id 0`},
		// HF gives an added token the id its text has, else the next after
		// the vocab's count; a file saying otherwise is refused.
		{"added token on another's id", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}, "added_tokens": [` + added(1, "<x>", true, false) + `]}`, `added_tokens[0] "<x>" has id 1, where HF tokenizers gives it 2`},
		{"added token the vocab has at another id", `{"model": {"type": "BPE", "vocab": {"a": 0, "<x>": 1}}, "added_tokens": [` + added(5, "<x>", false, false) + `]}`, `added_tokens[0] "<x>" has id 5, where HF tokenizers gives it 1`},
		{"added token past a gap in the vocab", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}}, "added_tokens": [` + added(3, "<x>", false, false) + `]}`, `added_tokens[0] "<x>" has id 3, where HF tokenizers gives it 2`},
		{"added token twice", `{"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [` + added(1, "<x>", false, false) + `, ` + added(2, "<x>", false, false) + `]}`, `added_tokens[1] "<x>" has id 2, where HF tokenizers gives it 1`},
		{"empty added token of a negative id", `{"model": {"type": "BPE", "vocab": {}}, "added_tokens": [` + added(-1, "", false, false) + `]}`, `added_tokens[0] (empty) has id -1, not a u32`},
	} {
		_, err := Parse([]byte(tc.json))
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Sparse ids cost what the file holds, not a table up to the largest.
	sparse, err := Parse([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 2000000}, "merges": []}}`))
	if err != nil || sparse.VocabSize() != 2000001 || mustDecode(t, sparse, 2000000, 0) != "b a" {
		t.Errorf("sparse ids: %v", err)
	}
	tok, err := Load(filepath.Join("testdata", "qwen2"))
	if err != nil {
		t.Fatal(err)
	}
	// Where the first bad byte is: a long prompt said only "not valid UTF-8".
	for _, tc := range []struct{ text, want string }{
		{"bad \xff byte", "the text is not valid UTF-8: byte 0xff at byte offset 4 (character 5) begins no UTF-8 character"},
		{"\xc3", "the text is not valid UTF-8: byte 0xc3 at byte offset 0 (character 1) begins no UTF-8 character"},
		{"é\xc3\xa9x\xe2\x82", "the text is not valid UTF-8: byte 0xe2 at byte offset 5 (character 4) begins no UTF-8 character"},
	} {
		if _, err := tok.Encode(tc.text, true); err == nil || err.Error() != tc.want {
			t.Errorf("invalid UTF-8 %q: %v, want %q", tc.text, err, tc.want)
		}
	}
	// Ids past the vocabulary (a padded embedding table's) are left out.
	if got, err := tok.Decode([]int32{40, 1 << 20, -1, 41}, true); err != nil || got != mustDecode(t, tok, 40, 41) {
		t.Errorf("ids past the vocabulary: %q, %v", got, err)
	}
	if _, err := Load(t.TempDir()); err == nil || !contains(err.Error(), "no tokenizer.json") {
		t.Errorf("no file: %v", err)
	}
}

// Small files that differ from the fixtures in one way HF reads its own
// way; the ids are HF tokenizers' by its source, as each case says.
func TestHFEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, json, text string
		want             []int32
	}{
		// BpeBuilder::build collects the merges into a map, so "a b"
		// listed again at rank 2 ranks after "b c" (1): a, bc.
		{"a merge listed twice", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}, "merges": ["a b", "b c", "a b"]}}`, "abc", []int32{0, 4}},
		// Added tokens on the ids HF gives them: the vocab's own where it
		// has the text (Llama's <s>), the next after it otherwise, one id
		// for a text listed twice.
		{"added tokens", `{"model": {"type": "BPE", "vocab": {"<s>": 0, "a": 1}}, "added_tokens": [` + added(0, "<s>", true, false) + `, ` + added(2, "<x>", false, false) + `, ` + added(3, "<y>", false, false) + `, ` + added(2, "<x>", true, false) + `]}`, "<s>a<y><x>", []int32{0, 1, 3, 2}},
		// Digits splits at char::is_numeric: every number character.
		{"Digits at a superscript", `{"model": {"type": "BPE", "vocab": {"x": 0, "²": 1, "x²": 2}, "merges": ["x ²"]}, "pre_tokenizer": {"type": "Digits", "individual_digits": false}}`, "x²", []int32{0, 1}},
		{"Digits at each number character", `{"model": {"type": "BPE", "vocab": {"1": 0, "½": 1, "Ⅻ": 2, "½Ⅻ": 3}, "merges": ["½ Ⅻ"]}, "pre_tokenizer": {"type": "Digits", "individual_digits": true}}`, "1½Ⅻ", []int32{0, 1, 2}},
		// Rust lowercases İ to i and a combining dot above, Go to i.
		{"Lowercase of İ", `{"model": {"type": "BPE", "vocab": {"i": 0, "\u0307": 1, "x": 2}, "merges": []}, "normalizer": {"type": "Lowercase"}}`, "İX", []int32{0, 1, 2}},
		// A normalized added token is found in the normalized text by its
		// normalized text (AddedVocabulary::extract_and_normalize): Llama's
		// Prepend makes "<x>" "▁<x>", which "▁a<x>" does not hold, so it
		// is only found at the start.
		{"normalized added token inside", llamaNorm(added(5, "<x>", false, true)), "a<x>", []int32{0, 1, 2, 3, 4}},
		{"normalized added token at the start", llamaNorm(added(5, "<x>", false, true)), "<x>a", []int32{5, 1}},
		{"added token as written", llamaNorm(added(5, "<x>", false, false)), "a<x>", []int32{0, 1, 5}},
		{"normalized added token, lowercased", `{"model": {"type": "BPE", "vocab": {"h": 0, "e": 1, "l": 2, "o": 3}, "merges": []}, "normalizer": {"type": "Lowercase"}, "added_tokens": [` + added(4, "Hello", false, true) + `]}`, "HELLO", []int32{4}},
		// Tokens as written are cut from the raw text first, the
		// normalized ones from what is left: "bc" before "ab".
		{"added tokens as written first", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []}, "added_tokens": [` + added(3, "ab", false, true) + `, ` + added(4, "bc", false, false) + `]}`, "abc", []int32{0, 4}},
		// HF finds added tokens leftmost-longest (an Aho-Corasick automaton,
		// MatchKind::LeftmostLongest): "xa" at 0, not the longer "abc" as
		// llama.cpp's order for a GGUF file would.
		{"added tokens leftmost-longest", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "x": 3}, "merges": []}, "added_tokens": [` + added(4, "abc", false, false) + `, ` + added(5, "xa", false, false) + `]}`, "xabc", []int32{5, 1, 2}},
		{"a merge listed once", `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4}, "merges": ["a b", "b c"]}}`, "abc", []int32{3, 2}},
	} {
		tok, err := Parse([]byte(tc.json))
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
	}
}

// llamaNorm is a tokenizer.json with Llama 2's normalizer (a ▁ before
// the text, spaces as ▁) and the added token given.
func llamaNorm(added string) string {
	return `{"model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "<": 2, "x": 3, ">": 4}, "merges": []}, "added_tokens": [` + added + `],
		"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}}`
}

func mustDecode(t *testing.T, tok *Tokenizer, ids ...int32) string {
	t.Helper()
	s, err := tok.Decode(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fmtBase(base, extra string) string { return fmt.Sprintf(base, extra) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// FuzzParse checks that no tokenizer.json or tekken.json panics at load
// or while it encodes and decodes text.
func FuzzParse(f *testing.F) {
	addSeeds(f, filepath.Join("testdata", "*", "tokenizer.json"))
	if tekken, err := json.Marshal(tekkenFile("ab", "cd", " t", "he")); err == nil {
		f.Add(tekken, "the abcd <s>é 🙂")
	}
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "<0x62>": 1}, "merges": [], "byte_fallback": true}, "decoder": {"type": "ByteFallback"}}`), "ab")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		if tok, err := Parse(data); err == nil {
			roundTrip(tok, text)
		}
	})
}

// addSeeds adds every file the pattern matches, with a text of spaces,
// digits, special tokens and emoji, to a fuzz target's corpus.
func addSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(pattern)
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data, "Hello  world 123 <s>ok</s> 🙂")
		}
	}
}

// roundTrip encodes text and decodes what it gives, for the fuzz targets:
// an error is an answer, a panic is not.
func roundTrip(tok *Tokenizer, text string) {
	if ids, err := tok.Encode(text, true); err == nil {
		tok.Decode(ids, false)
	}
}

// naiveMerge is BPE as its definition reads: merge the lowest-ranked
// adjacent pair, leftmost among equals, until none is left.
func naiveMerge(t *Tokenizer, piece string) []string {
	return definitionMerge(piece, func(a, b string) (int, bool) {
		r, ok := t.ranks[[2]string{a, b}]
		return r, ok
	})
}

// definitionMerge starts from the piece's characters and joins the
// adjacent pair rank gives the lowest rank, leftmost among equals, until
// rank knows no pair.
func definitionMerge(piece string, rank func(a, b string) (int, bool)) []string {
	var syms []string
	for _, r := range piece {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if r, ok := rank(syms[i], syms[i+1]); ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] += syms[at+1]
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// The heap-ordered merges give the definition's pieces on random strings
// of each fixture's own characters, long ones included (a Llama-style file
// tokenizes a whole prompt as one piece).
func TestMergesMatchDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"gpt2", "llama", "qwen2"} {
		tok, err := Load(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var alphabet []string
		for piece := range tok.vocab {
			if utf8.RuneCountInString(piece) == 1 {
				alphabet = append(alphabet, piece)
			}
		}
		slices.Sort(alphabet)
		for trial := range 300 {
			n := 1 + rng.IntN(40)
			if trial%50 == 0 {
				n = 3000
			}
			var b strings.Builder
			for range n {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			piece := b.String()
			if got, want := tok.merge(piece), naiveMerge(tok, piece); !slices.Equal(got, want) {
				t.Fatalf("%s: %q:\n got %q\nwant %q", name, piece, got, want)
			}
		}
	}
}

// Text that would grow without bound, or take quadratic time in a
// pattern that is quick on each match, is an error, not an out-of-memory
// crash or a hang.
func TestEncodeBounds(t *testing.T) {
	grow := `{"model": {"type": "BPE", "vocab": {"l": 0}}, "normalizer": {"type": "Sequence", "normalizers": [` +
		strings.TrimSuffix(strings.Repeat(`{"type": "Replace", "pattern": {"String": "l"}, "content": "llllllllll"},`, 12), ",") + `]}}`
	tok, err := Parse([]byte(grow))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.Encode("Hello world lll", true); err == nil || !strings.Contains(err.Error(), "grow the text past 64 times") {
		t.Errorf("a Replace chain: %v", err)
	}
	slow := `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a*b|a"}, "behavior": "Isolated", "invert": false}}`
	if tok, err = Parse([]byte(slow)); err != nil {
		t.Fatal(err)
	}
	defer func(b time.Duration) { encodeBudget = b }(encodeBudget)
	encodeBudget = time.Second
	start := time.Now()
	_, err = tok.Encode(strings.Repeat("a", 100000), true)
	if err == nil || !strings.Contains(err.Error(), "ran past its time budget") || time.Since(start) > 3*encodeBudget {
		t.Errorf("a quadratic split: %v after %v", err, time.Since(start))
	}
	// One match past its timeout is named by the regex and the piece's
	// length, not with the piece, which regexp2's own error quotes whole.
	defer func(d time.Duration) { matchTimeout = d }(matchTimeout)
	matchTimeout = 100 * time.Millisecond
	hostile := `{"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a|aa)*c"}, "behavior": "Isolated", "invert": false}}`
	if tok, err = Parse([]byte(hostile)); err != nil {
		t.Fatal(err)
	}
	_, err = tok.Encode(strings.Repeat("a", 5000), true)
	if want := `regex "(a|aa)*c": one match ran past 100ms in a piece of 5000 characters`; err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 200 {
		t.Errorf("a match past its timeout: %.300v, want %q", err, want)
	}
}

// A tokenizer path that is a FIFO (in a folder, or named .gguf) is refused
// by what it is, not read: a read would wait for a writer.
func TestLoadSpecialFile(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "m.gguf"} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, filepath.Join(dir, "m.gguf")} {
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Load(%s): %v", p, err)
		}
	}
}

// A long piece is quoted in an error by its start and its length.
func TestQuoteShort(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a", `"a"`},
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", 40) + `"`},
		{strings.Repeat("a", 1000), `"` + strings.Repeat("a", clip.Most-3) + `..." (1000 characters)`},
	} {
		if got := clip.Quote(c.in); got != c.want {
			t.Errorf("clip.Quote(%d runes) = %s, want %s", len([]rune(c.in)), got, c.want)
		}
	}
}

// Bytes that are not UTF-8 decode as HF's decoders give them: ByteLevel
// reads the bytes as Rust's String::from_utf8_lossy does, a U+FFFD for
// each maximal part of a sequence that cannot be completed; ByteFallback a
// U+FFFD a byte of a run that is not UTF-8, and <0xXX> read as
// u8::from_str_radix reads XX.
func TestDecodeInvalidUTF8(t *testing.T) {
	gpt2, err := Load(filepath.Join("testdata", "gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	const r = "\uFFFD"
	for _, tc := range []struct{ in, want string }{
		{"\xf0\x9f\x98\x80", "😀"},
		{"\xff\xff", r + r},
		{"\xe4\xb8\xe4\xb8", r + r}, // two characters cut short
		{"a\xe4\xb8", "a" + r},
		{"\xf0\x9f\x98", r},
		{"\xf0\x9f\x98A", r + "A"},
		{"\xc0\x80", r + r},         // an overlong lead starts nothing
		{"\xe0\x80\x80", r + r + r}, // E0 takes A0..BF second
		{"\xed\xa0\x80", r + r + r}, // a surrogate
		{"\xf4\x90\x80\x80", r + r + r + r},
		{"\x80", r},
		{"\xf5\xe4\xb8\xadx", r + "中x"},
	} {
		var ids []int32
		for i := 0; i < len(tc.in); i++ {
			id, ok := gpt2.vocab[string(byteChar[tc.in[i]])]
			if !ok {
				t.Fatalf("the gpt2 fixture has no token for byte %#x", tc.in[i])
			}
			ids = append(ids, id)
		}
		got, err := gpt2.Decode(ids, true)
		if err != nil || got != tc.want || !utf8.ValidString(got) {
			t.Errorf("ByteLevel %q: %q (%v), want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"<0x41>", "<0x4a>", "<0x+F>"}, "AJ\x0f"},
		{[]string{"<0xE4>", "<0xB8>", "x"}, r + r + "x"},
		{[]string{"<0x0G>", "<0x41>"}, "<0x0G>A"},
		{[]string{"<0x 1>", "<0x-1>", "<0x41>"}, "<0x 1><0x-1>A"},
	} {
		if got := strings.Join(byteFallbackDecode(tc.in), ""); got != tc.want {
			t.Errorf("ByteFallback %q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// checkEncodes checks that a tokenizer loaded (err: how it failed to)
// encodes text, with its special tokens, to want.
func checkEncodes(t *testing.T, name string, tok *Tokenizer, err error, text string, want []int32) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	got, err := tok.Encode(text, true)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("%s: %q encodes as %v, %v; want %v", name, text, got, err, want)
	}
}

// added is one of tokenizer.json's added_tokens, every field written as
// HF tokenizers writes it.
func added(id int, content string, special, normalized bool) string {
	c, _ := json.Marshal(content)
	return fmt.Sprintf(`{"id": %d, "content": %s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": %t, "special": %t}`,
		id, c, normalized, special)
}

// Added tokens as HF's AddedVocabulary takes them from a file: each case's
// ids and decoding are what its source gives, as the case says.
func TestHFAddedTokens(t *testing.T) {
	vocab := `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "added_tokens": [%s]}`
	for _, tc := range []struct {
		name, json, text string
		want             []int32
		decode           []int32 // decoded skipping special tokens
		text2            string
	}{
		// add_tokens skips an empty token: it takes no id, so the next one
		// takes the id after the vocab, and its own id (a vocab token's
		// here) decodes as that token, not as a special one.
		{"an empty token is skipped", fmt.Sprintf(vocab, added(2, "", true, false)+", "+added(2, "<x>", true, false)),
			"a<x>", []int32{0, 2}, []int32{2, 1}, "b"},
		// A text listed again takes the later listing's normalized (HF's
		// add_tokens replaces the token at its id), so under Llama's
		// normalizer <x> is only found as ▁<x>; its special mark stays.
		{"a token listed again, normalized", llamaNorm(added(5, "<x>", true, false) + ", " + added(5, "<x>", false, true)),
			"a<x>", []int32{0, 1, 2, 3, 4}, []int32{1}, "a"},
		{"a token listed again, as written", llamaNorm(added(5, "<x>", true, true) + ", " + added(5, "<x>", false, false)),
			"a<x>", []int32{0, 1, 5}, []int32{1}, "a"},
		// HF decodes a token added as normalized as its normalized text
		// (normalized_cache): under Llama's normalizer <x> is ▁<x>, and a
		// special one is then not skipped, ▁<x> being no special token.
		{"a normalized token decodes as normalized", llamaNorm(added(5, "<x>", false, true)), "a", []int32{0, 1}, []int32{1, 5}, "a ▁<x>"},
		{"a normalized special token is kept", llamaNorm(added(5, "<x>", true, true)), "a", []int32{0, 1}, []int32{1, 5}, "a ▁<x>"},
		{"as it is once listed otherwise", llamaNorm(added(5, "<x>", true, true) + ", " + added(5, "<x>", true, false)), "a", []int32{0, 1}, []int32{1, 5}, "a ▁<x>"},
		{"a special token as written is skipped", llamaNorm(added(5, "<x>", true, false)), "a", []int32{0, 1}, []int32{1, 5}, "a"},
		{"an empty token on a vocab id", fmt.Sprintf(vocab, added(1, "", true, false)), "ab", []int32{0, 1}, []int32{1, 0}, "b a"},
	} {
		tok, err := Parse([]byte(tc.json))
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
		if err == nil {
			if got := mustDecode(t, tok, tc.decode...); got != tc.text2 {
				t.Errorf("%s: %v decodes as %q, want %q", tc.name, tc.decode, got, tc.text2)
			}
		}
	}
}

// Added tokens' single_word, lstrip and rstrip, as HF's
// AddedVocabulary::find_matches takes them (tokenizers/src/tokenizer/
// added_vocabulary.rs), worked out by hand from its rules, each case naming
// the one it holds to. Each file's model spells every character of the
// texts as its own token (no merges), so what is left between added
// tokens shows character by character; want is the tokens' texts.
func TestHFAddedTokenOptions(t *testing.T) {
	// tok is one of added_tokens: its content and the options set
	// ("lstrip rstrip single_word normalized special"), the rest false.
	type tok struct{ content, opts string }
	const (
		none  = ""
		llama = `{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}`
		lower = `{"type": "Lowercase"}`
	)
	s := tok{"<s>", "lstrip special"}
	phi3 := []tok{{"<|user|>", "rstrip special"}, {"<|end|>", "rstrip special"}, {"<|assistant|>", "rstrip special"}}
	end := tok{"<|end|>", "rstrip special"}
	m := tok{"<m>", "single_word"}
	mStrip := tok{"<m>", "single_word lstrip rstrip"}
	for _, tc := range []struct {
		name  string
		norm  string
		added []tok
		text  string
		want  []string
	}{
		// lstrip: the match starts where the whitespace (\s) that runs up
		// to it starts (space_leftmost_at_end, "\s*$"), Llama/Mistral's
		// <s> under Llama 2's normalizer: "Hi", <s>, " there" (which the
		// normalizer makes ▁▁there), not "Hi " (▁Hi▁), <s>.
		{"lstrip takes the space before", llama, []tok{s}, "Hi <s> there", []string{"▁", "H", "i", "<s>", "▁", "▁", "t", "h", "e", "r", "e"}},
		{"without lstrip", llama, []tok{{"<s>", "special"}}, "Hi <s> there", []string{"▁", "H", "i", "▁", "<s>", "▁", "▁", "t", "h", "e", "r", "e"}},
		// \s is Unicode's White_Space: tabs and U+3000 are, U+200B (a
		// format character) is not.
		{"lstrip takes a run of whitespace", none, []tok{s}, "a\u200b \t\u3000<s>", []string{"a", "\u200b", "<s>"}},
		{"lstrip at the start", none, []tok{s}, "  <s>a", []string{"<s>", "a"}},
		{"lstrip takes nothing after", none, []tok{s}, "<s> a", []string{"<s>", " ", "a"}},
		// rstrip: the match ends where the whitespace after it ends
		// (space_rightmost_at_start, "^\s*"), Phi-3's chat tokens: the
		// newlines after them go, so "Hi" alone is normalized (▁Hi).
		{"rstrip takes the newline after", llama, phi3, "<|user|>\nHi<|end|>\n<|assistant|>", []string{"<|user|>", "▁", "H", "i", "<|end|>", "<|assistant|>"}},
		{"rstrip takes nothing before", none, []tok{end}, "a <|end|> b", []string{"a", " ", "<|end|>", "b"}},
		{"rstrip takes U+00A0 and U+2000", none, []tok{end}, "<|end|>\u00a0\u2000b", []string{"<|end|>", "b"}},
		// The trie's search goes on after the match as found
		// (leftmost_find_iter resumes at mat.end()), not after what rstrip
		// took: an added "\n" is found again inside it, and the text after
		// the last match (start_offset, moved back to its end) is tokenized
		// again, the space rstrip took with it.
		{"rstrip's whitespace searched again", none, []tok{end, {"\n", "special"}}, "<|end|>\n\nb", []string{"<|end|>", "\n", "\n", "b"}},
		{"rstrip's whitespace tokenized again", none, []tok{end, {"\n", "special"}}, "<|end|>\n\n b", []string{"<|end|>", "\n", "\n", " ", "b"}},
		// lstrip starts a match no earlier than the end of the match
		// before (start = max(newstart, start_offset)): the second and
		// third "\n" lie in what the first took with rstrip, so lstrip
		// makes them empty, and PreTokenizedString::split leaves out a
		// split of no text, its token with it.
		{"a match lstrip makes empty", none, []tok{{"\n", "lstrip rstrip"}}, "a\n\n\n", []string{"a", "\n"}},
		{"after it, text again", none, []tok{{"\n", "lstrip rstrip"}}, "a\n\n\na", []string{"a", "\n", "a"}},
		// single_word: a match is dropped where a word character (\w)
		// ends the text before it (ends_with_word, "\w$") or starts the
		// text after it (starts_with_word, "^\w"); the start and end of
		// the text are boundaries.
		{"single_word between spaces", none, []tok{m}, "a <m> b", []string{"a", " ", "<m>", " ", "b"}},
		{"single_word alone", none, []tok{m}, "<m>", []string{"<m>"}},
		{"single_word after a letter", none, []tok{m}, "a<m> b", []string{"a", "<", "m", ">", " ", "b"}},
		{"single_word before a letter", none, []tok{m}, "a <m>b", []string{"a", " ", "<", "m", ">", "b"}},
		{"single_word between punctuation", none, []tok{m}, "-<m>,😀<m>", []string{"-", "<m>", ",", "😀", "<m>"}},
		// \w is Alphabetic, marks, decimal digits, connector punctuation
		// and Join_Control (UTS #18 Annex C, regex-syntax's perl_word).
		{"single_word after _", none, []tok{m}, "_<m>", []string{"_", "<", "m", ">"}},
		{"single_word after a combining mark", none, []tok{m}, "e\u0301<m>", []string{"e", "\u0301", "<", "m", ">"}},
		{"single_word after an Arabic-Indic digit", none, []tok{m}, "٣<m>", []string{"٣", "<", "m", ">"}},
		{"single_word after a letter number", none, []tok{m}, "Ⅻ<m>", []string{"Ⅻ", "<", "m", ">"}},
		{"single_word after U+200D", none, []tok{m}, "\u200d<m>", []string{"\u200d", "<", "m", ">"}},
		// ² is a number (No) but no decimal digit: no word character.
		{"single_word after a superscript", none, []tok{m}, "²<m>", []string{"²", "<m>"}},
		// A dropped match still hides what is inside it: the search goes on
		// after it, so "m>" in "<m>" is not found; alone it is.
		{"a dropped match hides the tokens inside", none, []tok{m, {"m>", ""}}, "a<m>", []string{"a", "<", "m", ">"}},
		{"a token found alone", none, []tok{m, {"m>", ""}}, "am>", []string{"a", "m>"}},
		// HF's test_single_word_is_correct, its Lowercase left out.
		{"HF's single_word test", none, []tok{m}, "<m> My name <m> A<m> <m>ony <m>",
			append(append([]string{"<m>"}, chars(" My name ")...), append(append([]string{"<m>"}, chars(" A<m> <m>ony ")...), "<m>")...)},
		// HF's test_lstrip_unicode_space: single_word sees the match as
		// found, before lstrip and rstrip widen it; lstrip stops at the
		// end of the match before (start_offset), which took the tab.
		{"single_word, lstrip and rstrip", none, []tok{mStrip}, "Hi <m> there\t<m>\t<m>\u2000", []string{"H", "i", "<m>", "t", "h", "e", "r", "e", "<m>", "<m>"}},
		// Normalized tokens are found in the normalized text, and widen over
		// its whitespace. HF's options_use_cases: under Lowercase, "my"
		// takes the spaces either side of it, "ony" in "anthony" is no
		// single word.
		{"HF's options test", lower, []tok{{"my", "lstrip rstrip normalized"}, {"name", "normalized"}, {"ony", "single_word normalized"}, {"[CLS]", "special"}, {"[SEP]", "special"}},
			"[CLS] My name is Anthony [SEP]", append(append([]string{"[CLS]", "my", "name"}, chars(" is anthony ")...), "[SEP]")},
		// Under Llama 2's normalizer a normalized <x> is ▁<x>, and the
		// spaces before it are ▁, which is no whitespace: lstrip takes
		// nothing. Not normalized, it takes both spaces from the raw text.
		{"normalized lstrip under Llama's normalizer", llama, []tok{{"<x>", "lstrip normalized"}}, "a  <x>", []string{"▁", "a", "▁", "<x>"}},
		{"raw lstrip under Llama's normalizer", llama, []tok{{"<x>", "lstrip"}}, "a  <x>", []string{"▁", "a", "<x>"}},
		// ...and single_word sees the normalized text: ▁<x> after "a" is
		// inside a word.
		{"normalized single_word under Llama's normalizer", llama, []tok{{"<x>", "single_word normalized"}}, "a <x>", []string{"▁", "a", "▁", "<", "x", ">"}},
		{"normalized single_word at the start", llama, []tok{{"<x>", "single_word normalized"}}, "<x> a", []string{"<x>", "▁", "a"}},
		// A text listed again is matched as its last listing says (HF's
		// add_tokens puts the later AddedToken in its id's place).
		{"listed again with lstrip", none, []tok{{"<s>", "special"}, s}, "a <s>", []string{"a", "<s>"}},
		{"listed again without lstrip", none, []tok{s, {"<s>", "special"}}, "a <s>", []string{"a", " ", "<s>"}},
	} {
		// The model's vocab: ▁ and every character of the text, by first use.
		vocab := map[string]int{}
		for _, r := range "▁" + tc.text {
			if _, ok := vocab[string(r)]; !ok {
				vocab[string(r)] = len(vocab)
			}
		}
		var list []string
		next := len(vocab)
		seen := map[string]int{}
		for _, a := range tc.added {
			id, ok := vocab[a.content]
			if !ok {
				if id, ok = seen[a.content]; !ok {
					id = next
					next++
				}
			}
			seen[a.content] = id
			has := func(o string) bool { return slices.Contains(strings.Fields(a.opts), o) }
			c, _ := json.Marshal(a.content)
			list = append(list, fmt.Sprintf(`{"id": %d, "content": %s, "single_word": %t, "lstrip": %t, "rstrip": %t, "normalized": %t, "special": %t}`,
				id, c, has("single_word"), has("lstrip"), has("rstrip"), has("normalized"), has("special")))
		}
		v, _ := json.Marshal(vocab)
		file := fmt.Sprintf(`{"model": {"type": "BPE", "vocab": %s, "merges": []}, "added_tokens": [%s]`, v, strings.Join(list, ", "))
		if tc.norm != "" {
			file += `, "normalizer": ` + tc.norm
		}
		tk, err := Parse([]byte(file + "}"))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var want []int32
		for _, p := range tc.want {
			id, ok := tk.vocab[p]
			if !ok {
				t.Fatalf("%s: %q is no token", tc.name, p)
			}
			want = append(want, id)
		}
		checkEncodes(t, tc.name, tk, nil, tc.text, want)
	}
}

// Where lstrip would start a match after its end, HF's find_matches gives
// a split from start to stop that Rust cannot slice, and panics
// ("AddedVocabulary bad split"): here the text is refused, saying so.
func TestHFAddedTokenBadSplit(t *testing.T) {
	tk, err := Parse([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "\t": 1, " ": 2}, "merges": []}, "added_tokens": [` +
		`{"id": 3, "content": "<A>", "single_word": false, "lstrip": false, "rstrip": true, "normalized": false, "special": true}, ` +
		`{"id": 1, "content": "\t", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// <A> takes " \t " with rstrip; the tab at 4 to 5 is then started at 6.
	if ids, err := tk.Encode("<A> \t a", true); err == nil || !contains(err.Error(), "AddedVocabulary bad split") {
		t.Errorf("<A> \\t: %v, %v; want HF's bad split", ids, err)
	}
	// A tab not inside what <A> took is taken as usual.
	checkEncodes(t, "tab after text", tk, nil, "<A> a \t", []int32{3, 0, 1})
}

// An added token model.vocab lacks is no piece of HF's BPE model, which
// knows model.vocab alone: where single_word drops its match, the model
// spells its text by byte fallback, <unk> or its characters, whole words
// under ignore_merges too, and never gives the added id (each case's ids
// those of tokenizers 0.23.2, its npm package).
func TestAddedTokenNotInModel(t *testing.T) {
	const (
		fallback = `{"model": {"type": "BPE", "vocab": {"<0xF0>": 0, "<0x9F>": 1, "<0x98>": 2, "<0x80>": 3, "a": 4}, "merges": [], "byte_fallback": true}, ` +
			`"added_tokens": [{"id": 5, "content": "😀", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false}]}`
		unk = `{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1}, "merges": [], "unk_token": "<unk>"}, ` +
			`"added_tokens": [{"id": 2, "content": "😀", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false}]}`
		ignoreMerges = `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "1": 2}, "merges": [], "ignore_merges": true}, ` +
			`"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\d"}, "behavior": "Removed", "invert": false}, ` +
			`"added_tokens": [{"id": 3, "content": "ab", "single_word": true, "lstrip": false, "rstrip": false, "normalized": false, "special": false}]}`
	)
	for _, tc := range []struct {
		name, file, text string
		want             []int32
	}{
		{"dropped match, byte fallback", fallback, "a😀a", []int32{4, 0, 1, 2, 3, 4}},
		{"dropped match at the end, byte fallback", fallback, "a😀", []int32{4, 0, 1, 2, 3}},
		{"match kept", fallback, "😀", []int32{5}},
		{"match kept before a space", fallback, "😀 a", []int32{5, 4}},
		{"dropped match, unk", unk, "a😀", []int32{1, 0}},
		{"match kept, unk after", unk, "😀 a", []int32{2, 0, 1}},
		{"dropped match, whole word under ignore_merges", ignoreMerges, "1ab", []int32{0, 1}},
		{"dropped match between digits", ignoreMerges, "1ab1", []int32{0, 1}},
		{"match kept, ignore_merges", ignoreMerges, "ab", []int32{3}},
	} {
		tk, err := Parse([]byte(tc.file))
		checkEncodes(t, tc.name, tk, err, tc.text, tc.want)
	}
}

// Two added tokens whose normalized texts are one are matched as the
// first listed: HF tokenizers 0.23 builds its matcher from a hash map of
// its added tokens, and gives either from one process to the next.
func TestNormalizedAddedTokensOneText(t *testing.T) {
	const file = `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "NFKC"}, "added_tokens": [%s, %s]}`
	lig := `{"id": 1, "content": "ﬁ", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}`
	fi := `{"id": 2, "content": "fi", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}`
	for _, tc := range []struct {
		name, first, second, text string
		want                      []int32
	}{
		{"ligature first, ligature", lig, fi, "ﬁa", []int32{1, 0}},
		{"ligature first, letters", lig, fi, "fia", []int32{1, 0}},
		{"letters first, ligature", strings.Replace(fi, `"id": 2`, `"id": 1`, 1), strings.Replace(lig, `"id": 1`, `"id": 2`, 1), "ﬁa", []int32{1, 0}},
	} {
		tk, err := Parse([]byte(fmt.Sprintf(file, tc.first, tc.second)))
		checkEncodes(t, tc.name, tk, err, tc.text, tc.want)
	}
}

// An added token the normalizers make empty is loaded, as HF loads it:
// never found in a text, and decoded as that empty text (each case's ids
// and texts those of tokenizers 0.23.2, its npm package).
func TestAddedTokenNormalizedEmpty(t *testing.T) {
	file := `{"model": {"type": "BPE", "vocab": {"a": 0, "x": 1}, "merges": []}, ` +
		`"normalizer": {"type": "Replace", "pattern": {"String": "y"}, "content": ""}, ` +
		`"added_tokens": [` + added(2, "y", true, true) + `, ` + added(3, "<s>", true, false) + `]}`
	tk, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		want []int32
	}{
		{"aya", []int32{0, 0}},
		{"y", nil},
		{"ya<s>y", []int32{0, 3}},
	} {
		checkEncodes(t, tc.text, tk, nil, tc.text, tc.want)
	}
	for _, tc := range []struct {
		ids  []int32
		skip bool
		want string
	}{
		// Without a decoder HF joins the tokens' texts with spaces.
		{[]int32{2, 0}, false, " a"},
		{[]int32{0, 2, 0}, true, "a  a"},
		{[]int32{2}, false, ""},
		{[]int32{3, 2}, false, "<s> "},
		{[]int32{3, 2}, true, ""},
	} {
		if got, err := tk.Decode(tc.ids, tc.skip); err != nil || got != tc.want {
			t.Errorf("decode %v (skip %t) = %q, %v; want %q", tc.ids, tc.skip, got, err, tc.want)
		}
	}
}

// chars is s's characters, each a string.
func chars(s string) []string {
	var out []string
	for _, r := range s {
		out = append(out, string(r))
	}
	return out
}

// A checkpoint's tokenizer_config.json does not change what surrounds a
// prompt: transformers 5 drops its add_bos_token and add_eos_token when a
// tokenizer.json is there (PreTrainedTokenizerBase._from_pretrained), and
// TokenizersBackend keeps the file's post-processor, so the BOS and EOS are
// the post-processor's, as here (docs/tokenizer.md, "Where a prompt starts
// with BOS").
func TestTokenizerConfigAddBOSIgnored(t *testing.T) {
	const vocab = `"model": {"type": "BPE", "vocab": {"<s>": 0, "</s>": 1, "a": 2}, "merges": []}, "added_tokens": [` +
		`{"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}, ` +
		`{"id": 1, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]`
	const template = `"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], ` +
		`"pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}`
	for _, tc := range []struct {
		name, post, config string
		want               []int32
	}{
		{"the template's BOS kept", template, `{"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>"}`, []int32{0, 2}},
		{"no BOS added", `"post_processor": null`, `{"add_bos_token": true, "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>"}`, []int32{2}},
		{"a config that is no JSON", template, `{"add_bos_token": tru`, []int32{0, 2}},
	} {
		dir := t.TempDir()
		for name, data := range map[string]string{"tokenizer.json": "{" + vocab + ", " + tc.post + "}", "tokenizer_config.json": tc.config} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := Load(dir)
		checkEncodes(t, tc.name, tok, err, "a", tc.want)
	}
}

// HF reads every field of an added token as required (AddedTokenWithId,
// AddedToken: no serde defaults), so a file lacking one, or giving it as
// null, is refused, naming the file, the token and the field.
func TestAddedTokenFieldsRequired(t *testing.T) {
	full := map[string]any{"id": 2, "content": "<x>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
	for _, field := range []string{"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"} {
		for _, null := range []bool{false, true} {
			tokJSON := maps.Clone(full)
			delete(tokJSON, field)
			if null {
				tokJSON[field] = nil
			}
			data, _ := json.Marshal(map[string]any{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0, "b": 1}, "merges": []string{}},
				"added_tokens": []any{tokJSON}})
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`added_tokens[0] "<x>": %q is missing or null`, field)
			if field == "content" {
				want = `added_tokens[0]: "content" is missing or null`
			}
			_, err := Load(path)
			if err == nil || !contains(err.Error(), want) || !contains(err.Error(), path) {
				t.Errorf("%s (null %t): %v, want an error naming %s and saying %q", field, null, err, path, want)
			}
		}
	}
}

// encodeCase is a text of a fixture's expected.json with the ids its
// reference tokenizer gives and their decodings, special tokens left out
// and kept.
type encodeCase struct {
	Text           string  `json:"text"`
	IDs            []int32 `json:"ids"`
	Decoded        string  `json:"decoded"`
	DecodedSpecial string  `json:"decoded_special"`
}

// A normalizer with no "type" HF knows is read as HF's NormalizerWrapper
// reads it (tokenizers/src/normalizers/mod.rs): as the first of
// BertNormalizer, Strip, Sequence, Precompiled, Replace and Prepend whose
// fields it has, other fields ignored; the rest require their "type". A
// pre-tokenizer's kinds all require theirs (PreTokenizerWrapper), so one
// without is refused, as HF refuses it.
func TestUntaggedNormalizer(t *testing.T) {
	const (
		prepend = `{"prepend": "▁"}`
		replace = `{"pattern": {"String": " "}, "content": "▁"}`
	)
	for _, tc := range []struct {
		name, norm, pre string
		want            []int32 // "a b" with the text's ids: ▁ 0, a 1, b 2, space 3, x 4
		err             string
	}{
		{"Prepend", prepend, "", []int32{0, 1, 3, 2}, ""},
		{"Replace", replace, "", []int32{1, 0, 2}, ""},
		// Llama 2's normalizer, written without its tags.
		{"Sequence", `{"normalizers": [` + prepend + `, ` + replace + `]}`, "", []int32{0, 1, 0, 2}, ""},
		{"untagged in a tagged Sequence", `{"type": "Sequence", "normalizers": [` + replace + `]}`, "", []int32{1, 0, 2}, ""},
		// Replace is tried before Prepend: the prepend is ignored.
		{"Replace before Prepend", `{"prepend": "x", "pattern": {"String": " "}, "content": "▁"}`, "", []int32{1, 0, 2}, ""},
		// A pattern of two keys is no ReplacePattern: Prepend then.
		{"a pattern that is none", `{"prepend": "x", "pattern": {"String": " ", "Regex": " "}, "content": "▁"}`, "", []int32{4, 1, 3, 2}, ""},
		// A "type" that is none of HF's tags is read by the fields too.
		{"an unknown type", `{"type": "Prefix", "prepend": "x"}`, "", []int32{4, 1, 3, 2}, ""},
		// BertNormalizer wants three bools: a string is not one.
		{"not quite BertNormalizer", `{"clean_text": "yes", "handle_chinese_chars": true, "lowercase": true, "prepend": "x"}`, "", []int32{4, 1, 3, 2}, ""},
		{"strip_accents not a bool", `{"clean_text": true, "handle_chinese_chars": true, "lowercase": false, "strip_accents": "no", "prepend": "x"}`, "", []int32{4, 1, 3, 2}, ""},
		{"a pattern of null", `{"prepend": "x", "pattern": {"String": null}, "content": "▁"}`, "", []int32{4, 1, 3, 2}, ""},
		{"BertNormalizer", `{"clean_text": true, "handle_chinese_chars": true, "lowercase": false, "strip_accents": null, "prepend": "x"}`, "", nil,
			`normalizer: it has no "type" HF tokenizers knows, and HF reads it by its fields as a BertNormalizer, which is not supported`},
		{"Strip", `{"strip_left": true, "strip_right": false}`, "", nil, "as a Strip, which is not supported"},
		{"Precompiled", `{"precompiled_charsmap": "AAAA"}`, "", nil, "as a Precompiled, which is not supported"},
		{"a member none", `{"normalizers": [` + prepend + `, {"lowercase": true}]}`, "", nil,
			`normalizer: normalizers[1]: it has no "type", and its fields are none of the normalizers HF tokenizers reads without one`},
		{"a tag without its fields", `{"type": "NFKC", "prepend": "x"}`, "", []int32{1, 3, 2}, ""},
		{"no pre-tokenizer without a type", "", `{"replacement": "▁", "prepend_scheme": "always", "split": false}`, nil,
			`pre_tokenizer: it has no "type": HF tokenizers reads no pre-tokenizer without one`},
	} {
		file := `{"model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "b": 2, " ": 3, "x": 4}, "merges": []}`
		if tc.norm != "" {
			file += `, "normalizer": ` + tc.norm
		}
		if tc.pre != "" {
			file += `, "pre_tokenizer": ` + tc.pre
		}
		tok, err := Parse([]byte(file + "}"))
		if tc.err != "" {
			if err == nil || !contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		checkEncodes(t, tc.name, tok, err, "a b", tc.want)
	}
}

// A model with no "type" is read as HF tokenizers' ModelWrapper reads it
// (tokenizers/src/models/mod.rs): the first kind whose deserializer takes
// it, BPE first, which takes an object with a vocab and merges. One that
// is not BPE is refused, saying why.
func TestUntaggedModel(t *testing.T) {
	const vocab = `"vocab": {"a": 0, "b": 1, "ab": 2}`
	for _, tc := range []struct {
		name, model string
		want        []int32
		err         string
	}{
		{"merges as strings", `{` + vocab + `, "merges": ["a b"]}`, []int32{2, 0}, ""},
		{"merges as pairs", `{` + vocab + `, "merges": [["a", "b"]]}`, []int32{2, 0}, ""},
		{"no merges listed", `{` + vocab + `, "merges": []}`, []int32{0, 1, 0}, ""},
		{"BPE's fields", `{"dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false, ` + vocab + `, "merges": ["a b"]}`, []int32{2, 0}, ""},
		{"tagged", `{"type": "BPE", ` + vocab + `, "merges": ["a b"]}`, []int32{2, 0}, ""},
		{"vocab alone", `{` + vocab + `}`, nil, `model has no "type" and no vocab and merges`},
		{"merges null", `{` + vocab + `, "merges": null}`, nil, `model has no "type" and no vocab and merges`},
		{"WordPiece", `{` + vocab + `, "unk_token": "a", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100}`, nil, `model has no "type"`},
		{"Unigram", `{"vocab": [["a", -1.0]], "unk_id": 0}`, nil, `model has no "type"`},
		{"empty", `{}`, nil, `model has no "type"`},
		{"not an object", `5`, nil, "model is a JSON number, want an object"},
		{"null", `null`, nil, "it has no model"},
		{"type null", `{"type": null, ` + vocab + `, "merges": []}`, nil, `model type "" is not supported`},
		{"left out", ``, nil, "it has no model"},
	} {
		file := `{"model": ` + tc.model + `}`
		if tc.model == "" {
			file = `{}`
		}
		tok, err := Parse([]byte(file))
		if tc.err != "" {
			if err == nil || !contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		checkEncodes(t, tc.name, tok, err, "aba", tc.want)
	}
}

// Merges written as "a b" strings are read as HF's
// convert_merges_to_hashmap reads them (tokenizers/src/models/bpe/model.rs):
// a "#version" line (merges.txt's first) is skipped, and each other line
// is split at every space into exactly two pieces. Pairs are taken as
// they are.
func TestLegacyMerges(t *testing.T) {
	const vocab = `"vocab": {"a": 0, "b": 1, "ab": 2, "b c": 3, "ab c": 4, "c": 5, " b": 6, "a b": 7}`
	for _, tc := range []struct {
		name, merges string
		want         []int32
		err          string
	}{
		{"version line", `["#version: 0.2", "a b"]`, []int32{2, 0}, ""},
		{"version line alone", `["#version: 0.2 - Trained by huggingface/tokenizers"]`, []int32{0, 1, 0}, ""},
		{"version line later", `["a b", "#version: 0.2"]`, []int32{2, 0}, ""},
		{"a pair is not skipped", `[["#version:", "0.2"]]`, nil, `"#version:" is not in model.vocab`},
		{"three pieces", `["a b c"]`, nil, `model.merges[0] "a b c": want two pieces separated by one space`},
		{"two spaces", `["a  b"]`, nil, `model.merges[0] "a  b": want two pieces separated by one space`},
		{"pieces with spaces as a pair", `[["ab", " c"]]`, nil, `" c" is not in model.vocab`},
	} {
		tok, err := Parse([]byte(`{"model": {"type": "BPE", ` + vocab + `, "merges": ` + tc.merges + `}}`))
		if tc.err != "" {
			if err == nil || !contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		checkEncodes(t, tc.name, tok, err, "aba", tc.want)
	}
}

// A Split cuts as HF's NormalizedString::split does with each of its five
// behaviors, inverted or not: an empty match (of b*, a|, or an empty
// String) still cuts the text around it, and one right where a match
// ended is skipped, as Oniguruma's find_iter skips it. Each case's pieces
// are tokenizers 0.23.2's (its npm package).
func TestSplitBehaviors(t *testing.T) {
	for _, tc := range []struct {
		pattern, behavior string
		invert            bool
		text              string
		want              []string
	}{
		{`{"String": "-"}`, "Isolated", false, "the-final--countdown", []string{"the", "-", "final", "-", "-", "countdown"}},
		{`{"String": "-"}`, "Isolated", true, "the-final--countdown", []string{"the", "-", "final", "-", "-", "countdown"}},
		{`{"String": "-"}`, "Removed", false, "the-final--countdown", []string{"the", "final", "countdown"}},
		{`{"String": "-"}`, "Removed", true, "the-final--countdown", []string{"-", "-", "-"}},
		{`{"String": "-"}`, "Contiguous", false, "the-final--countdown", []string{"the", "-", "final", "--", "countdown"}},
		{`{"String": "-"}`, "Contiguous", true, "the-final--countdown", []string{"the", "-", "final", "--", "countdown"}},
		{`{"String": "-"}`, "MergedWithPrevious", false, "the-final--countdown", []string{"the-", "final-", "-", "countdown"}},
		{`{"String": "-"}`, "MergedWithPrevious", true, "the-final--countdown", []string{"the", "-final", "-", "-countdown"}},
		{`{"String": "-"}`, "MergedWithNext", false, "the-final--countdown", []string{"the", "-final", "-", "-countdown"}},
		{`{"String": "-"}`, "MergedWithNext", true, "the-final--countdown", []string{"the-", "final-", "-", "countdown"}},
		{`{"Regex": "(?:\\r?\\n)+"}`, "Isolated", false, "a\r\nb\n\nc\n", []string{"a", "\r\n", "b", "\n\n", "c", "\n"}},
		{`{"Regex": "(?:\\r?\\n)+"}`, "Removed", false, "a\r\nb\n\nc\n", []string{"a", "b", "c"}},
		{`{"Regex": "(?:\\r?\\n)+"}`, "Contiguous", false, "a\r\nb\n\nc\n", []string{"a", "\r\n", "b", "\n\n", "c", "\n"}},
		{`{"Regex": "(?:\\r?\\n)+"}`, "MergedWithPrevious", false, "a\r\nb\n\nc\n", []string{"a\r\n", "b\n\n", "c\n"}},
		{`{"Regex": "(?:\\r?\\n)+"}`, "MergedWithNext", false, "a\r\nb\n\nc\n", []string{"a", "\r\nb", "\n\nc", "\n"}},
		{`{"Regex": "b*"}`, "Isolated", false, "xaybbz", []string{"x", "a", "y", "bb", "z"}},
		{`{"Regex": "b*"}`, "Removed", false, "xaybbz", []string{"x", "a", "y", "z"}},
		{`{"Regex": "b*"}`, "Contiguous", false, "xaybbz", []string{"x", "a", "y", "bb", "z"}},
		{`{"Regex": "b*"}`, "MergedWithPrevious", false, "xaybbz", []string{"x", "a", "ybb", "z"}},
		{`{"Regex": "b*"}`, "MergedWithNext", false, "xaybbz", []string{"x", "a", "y", "bbz"}},
		{`{"Regex": "a|"}`, "Isolated", false, "aab", []string{"a", "a", "b"}},
		{`{"Regex": "a|"}`, "Removed", false, "aab", []string{"b"}},
		{`{"Regex": "a|"}`, "Contiguous", false, "aab", []string{"aa", "b"}},
		{`{"Regex": "a|"}`, "MergedWithPrevious", false, "aab", []string{"a", "a", "b"}},
		{`{"Regex": "a|"}`, "MergedWithNext", false, "aab", []string{"a", "ab"}},
		{`{"String": ""}`, "Isolated", false, "xay", []string{"x", "a", "y"}},
		{`{"String": ""}`, "Removed", false, "xay", []string{"x", "a", "y"}},
		{`{"String": ""}`, "Contiguous", false, "xay", []string{"x", "a", "y"}},
		{`{"String": ""}`, "MergedWithPrevious", false, "xay", []string{"x", "a", "y"}},
		{`{"String": ""}`, "MergedWithNext", false, "xay", []string{"x", "a", "y"}},
	} {
		pre, err := readPreTokenizers(json.RawMessage(fmt.Sprintf(`{"type": "Split", "pattern": %s, "behavior": %q, "invert": %v}`, tc.pattern, tc.behavior, tc.invert)))
		if err != nil {
			t.Errorf("%s %s: %v", tc.pattern, tc.behavior, err)
			continue
		}
		got, err := pre[0].split([]string{tc.text}, pass{first: true, deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %s (invert %v) splits %q as %q, HF tokenizers as %q", tc.pattern, tc.behavior, tc.invert, tc.text, got, tc.want)
		}
	}
}

// A normalizer, pre-tokenizer, post-processor or decoder lacking a field
// HF's serde definition requires (one without #[serde(default)] or Option)
// is refused, as HF refuses the file, naming the part and the field; a
// field HF defaults may be left out. Each case checked against tokenizers
// 0.23.2 (its npm package).
func TestPartFieldsRequired(t *testing.T) {
	const model = `{"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []}, `
	const template = `"single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}`
	checkParts(t, model, []partCase{
		{"normalizer", `{"type": "Prepend"}`, `normalizer: Prepend has no "prepend"`},
		{"normalizer", `{"type": "Prepend", "prepend": null}`, `normalizer: Prepend has no "prepend"`},
		{"normalizer", `{"type": "Replace", "content": "x"}`, `normalizer: Replace has no "pattern"`},
		{"normalizer", `{"type": "Replace", "pattern": {"String": "a"}}`, `normalizer: Replace has no "content"`},
		{"normalizer", `{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Prepend"}]}`, `normalizer: normalizers[1]: Prepend has no "prepend"`},
		{"pre_tokenizer", `{"type": "Split", "behavior": "Isolated", "invert": false}`, `pre_tokenizer: Split has no "pattern"`},
		{"pre_tokenizer", `{"type": "Split", "pattern": {"String": " "}, "invert": false}`, `pre_tokenizer: Split has no "behavior"`},
		{"pre_tokenizer", `{"type": "Split", "pattern": {"String": " "}, "behavior": "Isolated"}`, `pre_tokenizer: Split has no "invert"`},
		{"pre_tokenizer", `{"type": "ByteLevel", "trim_offsets": true}`, `pre_tokenizer: ByteLevel has no "add_prefix_space"`},
		{"pre_tokenizer", `{"type": "ByteLevel", "add_prefix_space": false}`, `pre_tokenizer: ByteLevel has no "trim_offsets"`},
		{"pre_tokenizer", `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true}`, ""},
		{"pre_tokenizer", `{"type": "Metaspace", "prepend_scheme": "always"}`, `pre_tokenizer: Metaspace has no "replacement"`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁"}`, ""},
		{"pre_tokenizer", `{"type": "Digits"}`, `pre_tokenizer: Digits has no "individual_digits"`},
		{"post_processor", `{"type": "TemplateProcessing", "pair": [], "special_tokens": {}}`, `post_processor: TemplateProcessing has no "single"`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "special_tokens": {}}`, `post_processor: TemplateProcessing has no "pair"`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "pair": []}`, `post_processor: TemplateProcessing has no "special_tokens"`},
		{"post_processor", `{"type": "TemplateProcessing", ` + template + `}`, ""},
		{"post_processor", `{"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A"}}], "pair": [], "special_tokens": {}}`, `post_processor: TemplateProcessing has no "type_id" at single[0].Sequence`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "pair": [{"SpecialToken": {"type_id": 0}}], "special_tokens": {}}`, `post_processor: TemplateProcessing has no "id" at pair[0].SpecialToken`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1]}}}`, `post_processor: TemplateProcessing has no "tokens" at special_tokens["<s>"]`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {"<s>": {"ids": [1], "tokens": ["<s>"]}}}`, `post_processor: TemplateProcessing has no "id" at special_tokens["<s>"]`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [{}], "pair": [], "special_tokens": {}}`, `post_processor: TemplateProcessing single[0]: want one of SpecialToken and Sequence`},
		{"post_processor", `{"type": "TemplateProcessing", "single": [], "pair": [{"Sequence": {"id": "A", "type_id": 0}, "SpecialToken": {"id": "<s>", "type_id": 0}}], "special_tokens": {}}`, `post_processor: TemplateProcessing pair[0]: want one of SpecialToken and Sequence`},
		{"post_processor", `{"type": "ByteLevel", "add_prefix_space": false}`, `post_processor: ByteLevel has no "trim_offsets"`},
		{"post_processor", `{"type": "RobertaProcessing", "sep": ["<s>", 1]}`, `post_processor: RobertaProcessing has no "cls"`},
		{"post_processor", `{"type": "RobertaProcessing", "sep": ["<s>", 1], "cls": ["<s>", 1]}`, ""},
		{"post_processor", `{"type": "BertProcessing", "cls": ["<s>", 1]}`, `post_processor: BertProcessing has no "sep"`},
		{"post_processor", `{"type": "Sequence", "processors": [{"type": "BertProcessing", "cls": ["<s>", 1]}]}`, `post_processor: processors[0]: BertProcessing has no "sep"`},
		{"decoder", `{"type": "ByteLevel"}`, `decoder: ByteLevel has no "add_prefix_space"`},
		{"decoder", `{"type": "Replace", "pattern": {"String": "▁"}}`, `decoder: Replace has no "content"`},
		{"decoder", `{"type": "Strip", "content": " ", "start": 1}`, `decoder: Strip has no "stop"`},
		{"decoder", `{"type": "Strip", "start": 1, "stop": 0}`, `decoder: Strip has no "content"`},
		{"decoder", `{"type": "Metaspace"}`, `decoder: Metaspace has no "replacement"`},
		{"decoder", `{"type": "Strip", "content": " ", "start": -1, "stop": 0}`, `decoder: start is -1, want a whole number not below 0`},
		{"decoder", `{"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Strip", "content": " ", "stop": 0}]}`, `decoder: decoders[1]: Strip has no "start"`},
	})
}

// Each of linearForms finds the same matches as the regex it stands for,
// on 200,000 random texts of whitespace of several kinds (newlines among
// them, last or not), letters, digits and punctuation; and DeepSeek LLM's
// split takes a long run of spaces before a digit in linear time, where
// \s+$ took about a second for 10,000 and ran past its match timeout at 30,000.
func TestLinearForms(t *testing.T) {
	alphabet := []rune{' ', ' ', '\t', '\n', '\r', '\u3000', '\u00a0', 'a', 'Z', '1', '!', '中'}
	rng := rand.New(rand.NewPCG(1, 2))
	for orig, lin := range linearForms {
		a, b := regexp2.MustCompile(orig, regexp2.None), regexp2.MustCompile(lin, regexp2.None)
		matches := func(re *regexp2.Regexp, s []rune) [][2]int {
			var out [][2]int
			m, err := re.FindRunesMatch(s)
			for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
				out = append(out, [2]int{m.Index, m.Length})
			}
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		for range 200000 {
			s := make([]rune, rng.IntN(12))
			for i := range s {
				s[i] = alphabet[rng.IntN(len(alphabet))]
			}
			if got, want := matches(b, s), matches(a, s); !slices.Equal(got, want) {
				t.Fatalf("%s finds %v in %q, %s %v", lin, got, string(s), orig, want)
			}
		}
	}
	tok, err := preTokenizerOnly(t, "deepseek-llm")
	if err != nil {
		t.Fatal(err)
	}
	// CPU time: the linear form takes some 30 ms of it, the quadratic one
	// seconds; wall time on a loaded machine took 950 ms of the linear.
	spaces := strings.Repeat(" ", 30000)
	start := cpuTime()
	if got, want := preSplit(t, tok, spaces+"1"), []string{spaces, "1"}; !slices.Equal(got, want) {
		t.Errorf("deepseek-llm splits 30,000 spaces and a digit into %d pieces, want 2", len(got))
	}
	if d := cpuTime() - start; d > time.Second {
		t.Errorf("deepseek-llm took %v of CPU time to split 30,000 spaces and a digit", d)
	}
}

var started = time.Now()

// wallTime is the time since the tests started.
func wallTime() time.Duration { return time.Since(started) }

// A Metaspace pre-tokenizer or decoder (one struct in HF) is read as HF's
// deserializer reads it: its replacement one character, prepend_scheme
// always, first or never (always where absent), and add_prefix_space
// false, from files written before prepend_scheme, refused beside any
// scheme but never. Each case checked against tokenizers 0.23.2 (its npm
// package).
func TestMetaspaceFields(t *testing.T) {
	const model = `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, `
	checkParts(t, model, []partCase{
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁"}`, ""},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "ab"}`, `pre_tokenizer: Metaspace replacement "ab": want one character`},
		{"decoder", `{"type": "Metaspace", "replacement": "ab"}`, `decoder: Metaspace replacement "ab": want one character`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": ""}`, `pre_tokenizer: Metaspace replacement "": want one character`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": ""}`, `pre_tokenizer: Metaspace prepend_scheme "": want always, first or never`},
		{"decoder", `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}`, `decoder: Metaspace prepend_scheme "sometimes": want always, first or never`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}`, `pre_tokenizer: Metaspace add_prefix_space false with prepend_scheme always`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false, "prepend_scheme": "first"}`, `pre_tokenizer: Metaspace add_prefix_space false with prepend_scheme first`},
		{"decoder", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false}`, `decoder: Metaspace add_prefix_space false with prepend_scheme always`},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": false, "prepend_scheme": "never"}`, ""},
		{"pre_tokenizer", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": true, "prepend_scheme": "never"}`, ""},
		{"decoder", `{"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}`, ""},
	})
}

// RobertaProcessing's and BertProcessing's cls and sep are HF's serde
// tuple (String, u32): a list of exactly a token and an id. A longer or
// shorter list, or another type, is refused as HF refuses the file, naming
// the field. Each case checked against tokenizers 0.23.2 (its npm package).
func TestProcessingPairs(t *testing.T) {
	const model = `{"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1, "</s>": 2}, "merges": []}, "post_processor": `
	for _, typ := range []string{"RobertaProcessing", "BertProcessing"} {
		for _, tc := range []struct {
			name, fields, want string // want "" where HF reads it
		}{
			{"pairs", `"sep": ["</s>", 2], "cls": ["<s>", 1]`, ""},
			{"sep of three", `"sep": ["</s>", 2, "x"], "cls": ["<s>", 1]`, typ + ` sep is a list of 3, want [token, id]`},
			{"cls of three", `"sep": ["</s>", 2], "cls": ["<s>", 1, 5]`, typ + ` cls is a list of 3, want [token, id]`},
			{"sep of three ending in null", `"sep": ["</s>", 2, null], "cls": ["<s>", 1]`, typ + ` sep is a list of 3, want [token, id]`},
			{"sep of one", `"sep": ["</s>"], "cls": ["<s>", 1]`, typ + ` sep is a list of 1, want [token, id]`},
			{"empty sep", `"sep": [], "cls": ["<s>", 1]`, typ + ` sep is a list of 0, want [token, id]`},
			{"sep an object", `"sep": {"0": "</s>", "1": 2}, "cls": ["<s>", 1]`, `sep is a JSON object, want a list`},
			{"id and token swapped", `"sep": [2, "</s>"], "cls": ["<s>", 1]`, typ + ` sep is [2, "</s>"], want [token, id]`},
			{"fractional id", `"sep": ["</s>", 2.0], "cls": ["<s>", 1]`, typ + ` sep is ["</s>", 2.0], want [token, id]`},
			{"negative id", `"sep": ["</s>", -2], "cls": ["<s>", 1]`, `special token "</s>" has id -2, outside the vocabulary`},
		} {
			_, err := Parse([]byte(model + `{"type": "` + typ + `", ` + tc.fields + `}}`))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s %s: %v, HF reads it", typ, tc.name, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s %s: %v, want %q", typ, tc.name, err, tc.want)
			}
		}
	}
}

// A Sequence's list of parts given as null is refused, as HF tokenizers
// refuses it (a Vec, not an Option), not read as an empty Sequence. Each
// case checked against tokenizers 0.23.2 (its npm package).
func TestSequenceListNull(t *testing.T) {
	const model = `{"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []}, `
	checkParts(t, model, []partCase{
		{"normalizer", `{"type": "Sequence", "normalizers": null}`, `normalizer: a Sequence without normalizers`},
		{"pre_tokenizer", `{"type": "Sequence", "pretokenizers": null}`, `pre_tokenizer: a Sequence without pretokenizers`},
		{"post_processor", `{"type": "Sequence", "processors": null}`, `post_processor: a Sequence without processors`},
		{"decoder", `{"type": "Sequence", "decoders": null}`, `decoder: a Sequence without decoders`},
		{"decoder", `{"type": "Sequence", "decoders": [{"type": "Sequence", "decoders": null}]}`, `a Sequence without decoders[0].decoders`},
		{"normalizer", `{"type": "Sequence", "normalizers": []}`, ""},
	})
}

// A TemplateProcessing item's Sequence id is HF's enum Sequence, A or B:
// any other is refused, as HF refuses the file, naming the item. Each case
// checked against tokenizers 0.23.2 (its npm package).
func TestTemplateSequenceIDs(t *testing.T) {
	const model = `{"model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1}, "merges": []}, "post_processor": {"type": "TemplateProcessing", `
	for _, tc := range []struct {
		single, pair, want string // want "" where HF reads it
	}{
		{`[{"Sequence": {"id": "A", "type_id": 0}}]`, `[]`, ""},
		{`[{"Sequence": {"id": "B", "type_id": 0}}]`, `[]`, ""},
		{`[{"Sequence": {"id": "C", "type_id": 0}}]`, `[]`, `TemplateProcessing single[0]: Sequence id "C", want A or B`},
		{`[{"Sequence": {"id": "a", "type_id": 0}}]`, `[]`, `TemplateProcessing single[0]: Sequence id "a", want A or B`},
		{`[{"Sequence": {"id": "", "type_id": 0}}]`, `[]`, `TemplateProcessing single[0]: Sequence id "", want A or B`},
		{`[{"Sequence": {"id": "A", "type_id": 0}}]`, `[{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "C", "type_id": 1}}]`, `TemplateProcessing pair[1]: Sequence id "C", want A or B`},
	} {
		_, err := Parse([]byte(model + `"single": ` + tc.single + `, "pair": ` + tc.pair + `, "special_tokens": {}}}`))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v, HF reads it", tc.single, tc.pair, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.single, tc.pair, err, tc.want)
		}
	}
}

// The top level of a tokenizer.json is read as HF tokenizers reads it: a
// key none of its nine (matched as spelled, not in another case) is
// refused, as is a version other than "1.0" and added_tokens of null.
// Each case checked against tokenizers 0.23.2 (its npm package).
func TestTopLevelKeys(t *testing.T) {
	const model = `"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}`
	for _, tc := range []struct {
		json, want string // want "" where HF reads it
	}{
		{`{` + model + `, "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null}`, ""},
		{`{"mod\u0065l": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, ""},
		{`{` + model + `, "foo": null}`, `not a tokenizer.json: key "foo" is none of HF tokenizers' (version, truncation, padding, added_tokens, normalizer, pre_tokenizer, model, post_processor, decoder)`},
		{`{"foo": 1, ` + model + `}`, `key "foo" is none of HF tokenizers'`},
		{`{"Model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, `key "Model" is none of HF tokenizers'`},
		{`{` + model + `, "version": "2.0"}`, `not a tokenizer.json: version "2.0": HF tokenizers reads "1.0" only`},
		{`{` + model + `, "version": ""}`, `version "": HF tokenizers reads "1.0" only`},
		{`{` + model + `, "version": 1.0}`, `not a tokenizer.json: version is a JSON number, want a string`},
		{`{` + model + `, "version": null}`, `not a tokenizer.json: version is null, want a string`},
		{`{` + model + `, "added_tokens": null}`, `not a tokenizer.json: added_tokens is null, want a list`},
	} {
		_, err := Parse([]byte(tc.json))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, HF reads it", tc.json, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}

// partCase is a part of a tokenizer.json (a normalizer, pre-tokenizer,
// post-processor or decoder) and the error it gives, "" where HF reads it.
type partCase struct{ section, part, want string }

// checkParts parses model (a tokenizer.json's opening, up to its model)
// with each case's part under its section.
func checkParts(t *testing.T, model string, cases []partCase) {
	t.Helper()
	for _, tc := range cases {
		_, err := Parse([]byte(model + `"` + tc.section + `": ` + tc.part + `}`))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v, HF reads it", tc.section, tc.part, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.section, tc.part, err, tc.want)
		}
	}
}

// HF's NFC, NFD, NFKC and NFKD order a run of combining marks whole, however
// long, and insert nothing; x/text's norm, keeping to the Stream-Safe Text
// Format, puts a U+034F after 30 and orders the pieces apart (each case's
// output tokenizers 0.23.2's, its npm package's normalizeString).
func TestNormalizeLongMarkRuns(t *testing.T) {
	r := strings.Repeat
	for _, tc := range []struct {
		name, in             string
		nfc, nfd, nfkc, nfkd string
	}{
		{"31 acutes", "e" + r("\u0301", 31), "\u00e9" + r("\u0301", 30), "e" + r("\u0301", 31), "\u00e9" + r("\u0301", 30), "e" + r("\u0301", 31)},
		{"32 marks ordered whole", "a" + r("\u0316\u0301", 16), "\u00e1" + r("\u0316", 16) + r("\u0301", 15), "a" + r("\u0316", 16) + r("\u0301", 16), "\u00e1" + r("\u0316", 16) + r("\u0301", 15), "a" + r("\u0316", 16) + r("\u0301", 16)},
		{"marks with no starter", r("\u0301", 32) + "e", r("\u0301", 32) + "e", r("\u0301", 32) + "e", r("\u0301", 32) + "e", r("\u0301", 32) + "e"},
		{"the last mark first", "A" + r("\u0300", 31) + "\u0316", "\u00c0\u0316" + r("\u0300", 30), "A\u0316" + r("\u0300", 31), "\u00c0\u0316" + r("\u0300", 30), "A\u0316" + r("\u0300", 31)},
		{"compatibility and Hangul", "\ufb01" + r("\u0308", 31) + " \u1100\u1161\u11a8", "\ufb01" + r("\u0308", 31) + " \uac01", "\ufb01" + r("\u0308", 31) + " \u1100\u1161\u11a8", "f\u00ef" + r("\u0308", 30) + " \uac01", "fi" + r("\u0308", 31) + " \u1100\u1161\u11a8"},
		{"short runs", "e\u0301 \u1100\u1161", "\u00e9 \uac00", "e\u0301 \u1100\u1161", "\u00e9 \uac00", "e\u0301 \u1100\u1161"},
	} {
		for _, f := range []struct{ form, want string }{{"NFC", tc.nfc}, {"NFD", tc.nfd}, {"NFKC", tc.nfkc}, {"NFKD", tc.nfkd}} {
			norms, err := readNormalizers([]byte(`{"type": "` + f.form + `"}`))
			if err != nil {
				t.Fatal(err)
			}
			got, err := norms[0].apply(tc.in, 1<<20)
			if err != nil || got != f.want {
				t.Errorf("%s, %s: %+q, %v; want %+q", tc.name, f.form, got, err, f.want)
			}
		}
	}
}

// A file's truncation and padding are not applied to a prompt, as
// transformers turns them off for a call that asks for neither; HF
// tokenizers' own encode gives [1 598 306 393 0 0 0 0] and [1 390 300 0 0
// 0 0 0] here (tokenizers 0.23.2, its npm package).
func TestTruncationPaddingNotApplied(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "llama", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	f["truncation"] = map[string]any{"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0}
	f["padding"] = map[string]any{"strategy": map[string]any{"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": nil, "pad_id": 0, "pad_type_id": 0, "pad_token": "<unk>"}
	data, _ = json.Marshal(f)
	tk, err := Parse(data)
	for _, tc := range []struct {
		text string
		want []int32
	}{
		{"Hello world, this is long", []int32{1, 598, 306, 393, 360, 303, 295, 353, 311, 299, 300, 352, 300, 352, 303, 381, 298}},
		{"Hi", []int32{1, 390, 300}},
	} {
		checkEncodes(t, tc.text, tk, err, tc.text, tc.want)
	}
}
