package tokenizer

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/internal/gguftest"
	"github.com/mtlbench/mtlbench/runner/gguf"
)

type ggufCase struct {
	Text           string  `json:"text"`
	IDs            []int32 `json:"ids"`
	Decoded        string  `json:"decoded"`
	DecodedSpecial *string `json:"decoded_special"`
}

func readGGUFCases(t *testing.T, path string) []ggufCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Cases []ggufCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return want.Cases
}

func checkGGUFCases(t *testing.T, tok *Tokenizer, cases []ggufCase) {
	t.Helper()
	for _, c := range cases {
		got, err := tok.Encode(c.Text, true)
		if err != nil {
			t.Errorf("%q: %v", c.Text, err)
			continue
		}
		if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
			t.Errorf("%q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if text, _ := tok.Decode(c.IDs, true); text != c.Decoded {
			t.Errorf("decode %v: %q, want %q", c.IDs, text, c.Decoded)
		}
		if c.DecodedSpecial != nil {
			if text, _ := tok.Decode(c.IDs, false); text != *c.DecodedSpecial {
				t.Errorf("decode %v keeping special tokens: %q, want %q", c.IDs, text, *c.DecodedSpecial)
			}
		}
	}
}

// testdata/gguf holds vocabulary-only GGUF files as llama.cpp's converter
// writes them, with the ids and text of their tokenizers' own
// implementations (tools/fixtures/make_gguf_tokenizer_fixtures.py):
// sentencepiece for the "llama" vocabularies (with and without the space
// prefix), HF tokenizers for the byte-level ones (GPT-2's, Qwen2's and
// Llama 3's splits, the last with ignore_merges).
func TestMatchesGGUFOracles(t *testing.T) {
	for _, name := range []string{"spm", "spm-no-prefix", "gpt2", "qwen2", "llama3"} {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(filepath.Join("testdata", "gguf", name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			checkGGUFCases(t, tok, readGGUFCases(t, filepath.Join("testdata", "gguf", name+".json")))
		})
	}
}

// A checkpoint that llama.cpp's own converter wrote: its vocabulary, read
// back by HF tokenizers as the byte-level BPE it was converted from, is the
// oracle.
func TestLlamaCppConvertedVocabulary(t *testing.T) {
	path := filepath.Join("..", "testdata", "gguf", "llamacpp-qwen3-q8_0.gguf")
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	checkGGUFCases(t, tok, readGGUFCases(t, filepath.Join("testdata", "gguf", "llamacpp.json")))
	// The converter's padding tokens decode to nothing, as in llama.cpp.
	if s, _ := tok.Decode([]int32{'a' - 33, 509}, false); s != "a" {
		t.Errorf("[PAD509] decodes as part of %q", s)
	}
}

// A split GGUF file's tokenizer is its first part's metadata, whichever
// part names the file (tools/fixtures/make_split_fixtures.py).
func TestSplitGGUFTokenizer(t *testing.T) {
	parts, _ := filepath.Glob(filepath.Join("..", "testdata", "gguf", "split", "*-of-*.gguf"))
	if len(parts) == 0 {
		t.Fatal("no split GGUF fixtures")
	}
	for _, p := range parts {
		stem := filepath.Base(p)
		whole, err := Load(filepath.Join("..", "testdata", "gguf", stem[:strings.LastIndex(stem, "-of-")-len("-00001")]+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := Load(p)
		if err != nil {
			t.Fatalf("%s: %v", stem, err)
		}
		for _, text := range []string{"Hello, world! 123", " héllo\n\tthere"} {
			got, err1 := tok.Encode(text, true)
			want, err2 := whole.Encode(text, true)
			if err1 != nil || err2 != nil || !slices.Equal(got, want) {
				t.Errorf("%s: %q encodes as %v (%v), the whole file's %v (%v)", stem, text, got, err1, want, err2)
			}
		}
	}
}

// kv is one metadata entry of a test GGUF file (gguftest.KV's).
type kv struct {
	key   string
	value any
}

// ggufFile writes a GGUF file of metadata only.
func ggufFile(t *testing.T, entries ...kv) string {
	t.Helper()
	var kvs []gguftest.KV
	for _, e := range entries {
		kvs = append(kvs, gguftest.KV{Key: e.key, Value: e.value})
	}
	data, err := gguftest.Bytes(kvs...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vocab.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// byteLevelVocab is GPT-2's byte alphabet as tokens 0-255, then extra.
func byteLevelVocab(extra ...string) []string {
	v := make([]string, 0, 256+len(extra))
	for b := 0; b < 256; b++ {
		v = append(v, string(byteChar[b]))
	}
	return append(v, extra...)
}

// Every pre-tokenizer name read compiles, and the groups split text as
// their patterns say: the default's four regexes one after the other,
// Tekken's and GPT-4o's case-aware words, digits alone or in threes; each
// later group beside the one it differs from, on a text where they part;
// and the DeepSeek chains on texts that take each of their regexes (the
// pieces worked out by hand; TestGGUFPreSplitsMatchHF holds them to HF).
func TestGGUFPreTokenizers(t *testing.T) {
	hello := "HelloWorld's 1234"
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"default", hello, []string{"HelloWorld", "'", "s", " ", "123", "4"}},
		{"gpt-2", hello, []string{"HelloWorld", "'s", " 1234"}},
		{"llama-bpe", hello, []string{"HelloWorld", "'s", " ", "123", "4"}},
		{"qwen2", hello, []string{"HelloWorld", "'s", " ", "1", "2", "3", "4"}},
		{"tekken", hello, []string{"Hello", "World", "'s", " ", "1", "2", "3", "4"}},
		{"gpt-4o", hello, []string{"Hello", "World's", " ", "123", "4"}},
		{"starcoder", hello, []string{"HelloWorld", "'s", " ", "1", "2", "3", "4"}},
		// A combining mark stays in its word.
		{"qwen35", "cafe\u0301's 12", []string{"cafe\u0301", "'s", " ", "1", "2"}},
		{"qwen2", "cafe\u0301's 12", []string{"cafe", "\u0301'", "s", " ", "1", "2"}},
		// Digits are cut out first, so spaces before them are one piece.
		{"minicpm5", "a  1234", []string{"a", "  ", "123", "4"}},
		{"llama-bpe", "a  1234", []string{"a", " ", " ", "123", "4"}},
		// No English contractions: a Turkish suffix stays whole.
		{"ufakzeka", "Ankara'dan 12", []string{"Ankara", "'dan", " ", "1", "2"}},
		{"qwen2", "Ankara'dan 12", []string{"Ankara", "'d", "an", " ", "1", "2"}},
		{"bailingmoe", "HelloWorld'S  \n\n!?\n12", []string{"HelloWorld", "'S", "  \n\n", "!?\n", "1", "2"}},
		// Words joined by single spaces are one piece.
		{"exaone-moe", "Hello world's 12", []string{"Hello world", "'s", " ", "1", "2"}},
		// Seven spaces: four, two, and the one before the word.
		{"jais-2", "a       b", []string{"a", "    ", "  ", " b"}},
		// Lines first: the spaces ending one are not the newline's.
		{"laguna", "a  \nb", []string{"a", "  ", "\n", "b"}},
		// Line breaks join the line after them (MergedWithNext), as in
		// the model's tokenizer.json: \r\n is one piece, not two.
		{"laguna", "a\r\nb", []string{"a", "\r\n", "b"}},
		{"laguna", "x;\r\n\r\n  y\n", []string{"x", ";", "\r\n\r\n", " ", " y", "\n"}},
		{"qwen2", "a  \nb", []string{"a", "  \n", "b"}},
		// A backtick is punctuation, and digits are not split from the
		// space before them.
		{"falcon", "`! 12", []string{"`!", " 12"}},
		{"default", "`! 12", []string{"`", "!", " ", "12"}},
		{"bloom", "Hello, world! 12", []string{"Hello", ",", " world", "!", " 12"}},
		{"viking", "Hello, world! 12", []string{"Hello", ",", " world", "!", " ", "1", "2"}},
		// DeepSeek LLM's letters are the cased scripts' (not CJK), and the
		// punctuation class after them holds A-Z and a-z, so it cuts a
		// word at its first letter past ASCII; each digit is a piece, as
		// tokenizer.json's Digits makes it (llama.cpp's \p{N}+ keeps 1234).
		{"deepseek-llm", "Hello, world!\n1234 café 我想apple", []string{"Hello", ",", " world", "!", "\n", "1", "2", "3", "4", " caf", "é", " ", "我想", "apple"}},
		// Letters run into \p{L} across scripts; CJK after a space is then
		// cut from it.
		{"deepseek-coder", "Hello, world!\n1234 café 我想apple", []string{"Hello", ",", " world", "!", "\n", "1", "2", "3", "4", " café", " ", "我想", "apple"}},
		// Trailing whitespace is a piece of its own (\s+$), the emoji left
		// before it; fullwidth punctuation is punctuation.
		{"deepseek-llm", "Straße αβγ， 😀  ", []string{"Stra", "ß", "e", " αβγ", "，", " 😀", "  "}},
		// Each of \r and \n alone; Thai and Hangul are in the CJK class
		// (U+0800 to U+4E00, U+AC00 to U+D7FF), the space between them not.
		{"deepseek-llm", "a\r\n한국어 ไทย", []string{"a", "\r", "\n", "한국어", " ", "ไทย"}},
		// Symbols are not punctuation: they stay with the digit after
		// them until Digits cuts it off.
		{"deepseek-coder", "x+=1; // ok\t\n", []string{"x", "+=", "1", ";", " //", " ok", "\t", "\n"}},
		// Digits in threes, ideographs and kana cut out first; one ASCII
		// punctuation mark takes the ASCII letters after it; punctuation
		// takes the newlines after it.
		{"deepseek-v3", "I'm 12345 años,\n\n漢字カナ x.Net", []string{"I", "'m", " ", "123", "45", " años", ",\n\n", "漢字カナ", " x", ".Net"}},
		// A letter run takes one character before it that is no letter,
		// punctuation or symbol (the tab), and its combining marks.
		{"deepseek-v3", "a\tcafe\u0301 $$ 1.5", []string{"a", "\tcafe\u0301", " $$", " ", "1", ".", "5"}},
		{"joyai-llm", "I'm 12345 años,\n\n漢字カナ x.Net", []string{"I", "'m", " ", "123", "45", " años", ",\n\n", "漢字カナ", " x", ".Net"}},
		// Spark: each digit, and each newline, a piece of its own.
		{"spark2_5", "I'm 12345 años,\n\n漢字カナ x.Net", []string{"I", "'m", " ", "1", "2", "3", "4", "5", " años", ",", "\n", "\n", "漢字カナ", " x", ".Net"}},
	} {
		tok, err := preTokenizerOnly(t, tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := preSplit(t, tok, tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s splits %q as %q, want %q", tc.name, tc.text, got, tc.want)
		}
	}
	for _, name := range PreTokenizersRead() {
		if _, err := preTokenizerOnly(t, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// preTokenizerOnly is a vocabulary of the 256 bytes, no merges, under
// tokenizer.ggml.pre name.
func preTokenizerOnly(t *testing.T, name string) (*Tokenizer, error) {
	t.Helper()
	return Load(ggufFile(t, kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", name},
		kv{"tokenizer.ggml.tokens", byteLevelVocab()}, kv{"tokenizer.ggml.merges", []string{}}))
}

// preSplit is the pieces tok's pre-tokenizer cuts text into, as text (its
// ByteLevel step's characters read back as the bytes they stand for).
func preSplit(t *testing.T, tok *Tokenizer, text string) []string {
	t.Helper()
	pieces := []string{text}
	var err error
	for _, p := range tok.preTok {
		if pieces, err = p.split(pieces, pass{first: true, deadline: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	var plain []string
	for _, p := range pieces {
		var b []byte
		for _, r := range p {
			b = append(b, charByte[r])
		}
		plain = append(plain, string(b))
	}
	return plain
}

// The DeepSeek pre-tokenizers split as HF tokenizers splits with the
// models' own tokenizer.json chains (testdata/gguf/pre-splits.json, written
// by tools/fixtures/make_gguf_pre_fixtures.mjs with HF tokenizers' Node
// binding): each name is read as that chain's Split regexes and Digits,
// and every text of the cased scripts, CJK, kana, Hangul and Thai, each
// kind of space and newline, punctuation, symbols, digits of other
// scripts, marks and letters past U+FFFF splits into HF's pieces.
func TestGGUFPreSplitsMatchHF(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "gguf", "pre-splits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Texts []string `json:"texts"`
		Pres  map[string]struct {
			Chain []struct {
				Type    string `json:"type"`
				Pattern struct {
					Regex string `json:"Regex"`
				} `json:"pattern"`
				Behavior   string `json:"behavior"`
				Invert     bool   `json:"invert"`
				Individual bool   `json:"individual_digits"`
			} `json:"pre_tokenizer"`
			Pieces [][]string `json:"pieces"`
		} `json:"pres"`
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Pres) != 4 || len(want.Texts) < 100 {
		t.Fatalf("%d pre-tokenizers, %d texts", len(want.Pres), len(want.Texts))
	}
	// tokenizer.json has some carriage returns and newlines in its regexes
	// as the characters themselves, where the constants have \r and \n:
	// the same regex to Oniguruma and regexp2.
	escapeCRLF := strings.NewReplacer("\r", `\r`, "\n", `\n`)
	for name, hf := range want.Pres {
		var regexes []string
		var behaviors map[int]string
		digits := false
		for i, p := range hf.Chain {
			switch {
			case p.Type == "Split" && !p.Invert && !digits:
				if p.Behavior != "Isolated" {
					if behaviors == nil {
						behaviors = map[int]string{}
					}
					behaviors[len(regexes)] = p.Behavior
				}
				regexes = append(regexes, escapeCRLF.Replace(p.Pattern.Regex))
			case p.Type == "Digits" && p.Individual && i == len(hf.Chain)-1:
				digits = true
			default:
				t.Fatalf("%s: step %d %+v is not a Split before a closing Digits", name, i, p)
			}
		}
		if got := ggufPres[name]; !slices.Equal(got.regexes, regexes) || !maps.Equal(got.behaviors, behaviors) || got.digits != digits {
			t.Errorf("%s is read as %q %v (digits %v), tokenizer.json's chain is %q %v (digits %v)", name, got.regexes, got.behaviors, got.digits, regexes, behaviors, digits)
			continue
		}
		tok, err := preTokenizerOnly(t, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(hf.Pieces) != len(want.Texts) {
			t.Fatalf("%s: %d splits for %d texts", name, len(hf.Pieces), len(want.Texts))
		}
		for i, text := range want.Texts {
			if got := preSplit(t, tok, text); !slices.Equal(got, hf.Pieces[i]) && len(got)+len(hf.Pieces[i]) > 0 {
				t.Errorf("%s splits %q as %q, HF tokenizers as %q", name, text, got, hf.Pieces[i])
			}
		}
	}
}

// The split decides which merges can apply: where tokenizer.json ends in
// Digits, a merge of two digits never does (llama.cpp's deepseek-llm
// regex \p{N}+ would let "1 2" merge), and DeepSeek-V3's runs of three
// digits do merge.
func TestGGUFPreTokenizerIDs(t *testing.T) {
	sp := string(byteChar[' '])
	vocab := byteLevelVocab("12", "ab", sp+"ab") // 256, 257, 258
	merges := []string{"1 2", "a b", sp + " ab"}
	for _, tc := range []struct {
		pre, text string
		want      []int32
	}{
		{"gpt-2", "ab 12", []int32{257, ' ', 256}},
		{"deepseek-llm", "ab 12", []int32{257, ' ', '1', '2'}},
		{"deepseek-llm", " ab12", []int32{258, '1', '2'}},
		{"deepseek-coder", " ab12", []int32{258, '1', '2'}},
		{"deepseek-v3", "ab 12", []int32{257, ' ', 256}},
		{"spark2_5", "ab 12", []int32{257, ' ', '1', '2'}},
	} {
		tok, err := Load(ggufFile(t, kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", tc.pre},
			kv{"tokenizer.ggml.tokens", vocab}, kv{"tokenizer.ggml.merges", merges}))
		checkEncodes(t, tc.pre, tok, err, tc.text, tc.want)
	}
}

// Every tokenizer.ggml.pre name llama.cpp's loader maps is read or refused
// by name: a name for a split implemented here as another group's is read
// as that group, and one whose split is not implemented is refused naming
// the name and the file.
func TestGGUFPreNames(t *testing.T) {
	// llama_vocab::impl::load's names, in its order.
	llamaCpp := []string{"default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
		"lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "falcon", "mpt",
		"starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
		"modern-bert", "jais-2", "gemma4", "granite-embed-multi-311m", "sarvam-moe", "jina-v1-en", "jina-v2-code",
		"roberta-bpe", "whitespace", "refact", "command-r", "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "qwen35",
		"stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe", "viking", "jais", "tekken", "smollm",
		"codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4", "exaone-moe", "chameleon", "minerva-7b", "megrez",
		"gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe",
		"trillion", "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan", "hunyuan-dense",
		"hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna", "minimax-m2", "solar-open", "mellum2"}
	for _, name := range llamaCpp {
		_, read := ggufPres[name]
		_, refused := ggufPresRefused[name]
		if read == refused {
			t.Errorf("%s: read %v, refused %v", name, read, refused)
		}
	}
	if n := len(ggufPres) + len(ggufPresRefused); n != len(llamaCpp) {
		t.Errorf("%d names read or refused, llama.cpp maps %d", n, len(llamaCpp))
	}
	for _, tc := range []struct{ name, as string }{
		{"jina-v5-nano", "llama-bpe"}, {"modern-bert", "gpt-2"}, {"jina-v1-en", "gpt-2"}, {"jina-v2-code", "gpt-2"},
		{"roberta-bpe", "gpt-2"}, {"f2llmv2", "qwen2"}, {"solar-open", "qwen2"}, {"grok-2", "qwen2"}, {"mellum2", "starcoder"},
		{"kanana2", "gpt-4o"}, {"talkie", "gpt-4o"}, {"minimax-m2", "gpt-4o"}, {"bailingmoe2", "bailingmoe"},
		{"llada-moe", "bailingmoe"}, {"poro-chat", "bloom"}, {"gpt3-finnish", "bloom"}, {"joyai-llm", "deepseek-v3"},
	} {
		if got, want := ggufPres[tc.name], ggufPres[tc.as]; !slices.Equal(got.regexes, want.regexes) || !maps.Equal(got.behaviors, want.behaviors) ||
			got.digits != want.digits || got.ignoreMerges != want.ignoreMerges || got.addBOS != want.addBOS {
			t.Errorf("%s is read as %+v, want %s's %+v", tc.name, got, tc.as, want)
		}
	}
	for name := range ggufPresRefused {
		path := ggufFile(t, kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", name},
			kv{"tokenizer.ggml.tokens", byteLevelVocab()}, kv{"tokenizer.ggml.merges", []string{}})
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("tokenizer.ggml.pre %q is llama.cpp's, but its split is not implemented here (", name)) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// What a prompt gets around it follows llama.cpp: BOS for "llama" files and
// the Llama 3 and Tekken groups, none for GPT-2's, unless the file's own
// add_bos_token/add_eos_token say otherwise; a file that names no
// pre-tokenizer takes the default.
func TestGGUFSpecialTokens(t *testing.T) {
	spm := []string{"<unk>", "<s>", "</s>", "▁a", "a", "▁"}
	spmTypes := []int32{ggufUnknown, ggufControl, ggufControl, ggufNormal, ggufNormal, ggufNormal}
	spmScores := []float32{0, 0, 0, -1, -2, -3}
	bl := byteLevelVocab("<|begin|>", "<|end|>", "ab", "abc")
	blTypes := make([]int32, len(bl))
	for i := range blTypes {
		blTypes[i] = ggufNormal
	}
	blTypes[256], blTypes[257] = ggufControl, ggufControl
	byteLevel := func(pre string, extra ...kv) []kv {
		e := []kv{{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.tokens", bl}, {"tokenizer.ggml.token_type", blTypes},
			{"tokenizer.ggml.merges", []string{"a b"}}, {"tokenizer.ggml.bos_token_id", uint32(256)}, {"tokenizer.ggml.eos_token_id", uint32(257)}}
		if pre != "" {
			e = append(e, kv{"tokenizer.ggml.pre", pre})
		}
		return append(e, extra...)
	}
	for _, tc := range []struct {
		name string
		kvs  []kv
		text string
		want []int32
	}{
		{"spm", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", spm}, {"tokenizer.ggml.token_type", spmTypes},
			{"tokenizer.ggml.scores", spmScores}}, "a a", []int32{1, 3, 3}},
		{"spm without the prefix, with EOS", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", spm},
			{"tokenizer.ggml.token_type", spmTypes}, {"tokenizer.ggml.scores", spmScores},
			{"tokenizer.ggml.add_space_prefix", false}, {"tokenizer.ggml.add_eos_token", true}}, "a a", []int32{1, 4, 3, 2}},
		{"spm, control tokens in the text", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", spm},
			{"tokenizer.ggml.token_type", spmTypes}, {"tokenizer.ggml.scores", spmScores}}, "<s>a</s>", []int32{1, 1, 3, 2}},
		{"gpt-2", byteLevel("gpt-2"), "ab", []int32{258}},
		{"gpt-2 merges", byteLevel("gpt-2"), "abc", []int32{258, 'c'}},
		{"llama-bpe adds BOS", byteLevel("llama-bpe"), "ab<|end|>", []int32{256, 258, 257}},
		{"llama-bpe takes a whole word in the vocabulary", byteLevel("llama-bpe"), "abc", []int32{256, 259}},
		{"llama-bpe told not to", byteLevel("llama-bpe", kv{"tokenizer.ggml.add_bos_token", false}), "ab", []int32{258}},
		{"no pre-tokenizer named", byteLevel(""), "ab", []int32{258}},
	} {
		tok, err := Load(ggufFile(t, tc.kvs...))
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
	}
}

// A GGUF file whose tokenizer cannot be read is refused, naming the key
// and the file, never a panic.
func TestGGUFBadInput(t *testing.T) {
	tokens := kv{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"}}
	spm := kv{"tokenizer.ggml.model", "llama"}
	gpt2 := kv{"tokenizer.ggml.model", "gpt2"}
	for _, tc := range []struct {
		name string
		kvs  []kv
		want string
	}{
		{"no tokenizer", []kv{{"general.architecture", "llama"}}, "carries no tokenizer (no tokenizer.ggml.model)"},
		{"model not a string", []kv{{"tokenizer.ggml.model", uint32(1)}}, "tokenizer.ggml.model is a u32, want a string"},
		{"no vocabulary", []kv{{"tokenizer.ggml.model", "none"}}, `tokenizer.ggml.model "none": the file carries no tokenizer`},
		{"unknown model", []kv{{"tokenizer.ggml.model", "t5"}, tokens}, `tokenizer.ggml.model "t5" is not supported`},
		{"no tokens", []kv{spm}, "no metadata tokenizer.ggml.tokens"},
		{"tokens of numbers", []kv{spm, {"tokenizer.ggml.tokens", []int32{1, 2}}}, "tokenizer.ggml.tokens is an array of i32, want string"},
		{"empty vocabulary", []kv{spm, {"tokenizer.ggml.tokens", []string{}}}, "holds 0 tokens"},
		{"types short", []kv{spm, tokens, {"tokenizer.ggml.token_type", []int32{1}}}, "holds 1 types for 4 tokens"},
		{"types of strings", []kv{spm, tokens, {"tokenizer.ggml.token_type", []string{"a"}}}, "token_type is an array of string, want i32"},
		{"token type past the types", []kv{spm, tokens, {"tokenizer.ggml.token_type", []int32{1, 3, 3, 99}}}, `token_type[3] (token "a") is 99, not a token type (0 to 6)`},
		{"token types as floats", []kv{spm, tokens, {"tokenizer.ggml.token_type", []float32{1, 3, 3, 1}}}, "token_type is an array of f32, want i32"},
		{"unk of the wrong type", []kv{spm, tokens, {"tokenizer.ggml.unknown_token_id", "x"}}, "unknown_token_id is a string, want u32"},
		{"negative bos", []kv{spm, tokens, {"tokenizer.ggml.bos_token_id", int32(-1)}}, "bos_token_id is -1, not a token id"},
		{"scores short", []kv{spm, tokens, {"tokenizer.ggml.scores", []float32{0}}}, "holds 1 scores for 4 tokens"},
		{"NaN score", []kv{spm, tokens, {"tokenizer.ggml.scores", []float32{0, 0, 0, float32(math.NaN())}}}, `scores[3] (token "a") is NaN`},
		{"bos past the vocabulary", []kv{spm, tokens, {"tokenizer.ggml.bos_token_id", uint32(9)}}, "bos_token_id 9 is outside the vocabulary of 4 tokens"},
		{"bos of the wrong type", []kv{spm, tokens, {"tokenizer.ggml.bos_token_id", "x"}}, "bos_token_id is a string, want u32"},
		{"add_bos not a bool", []kv{spm, tokens, {"tokenizer.ggml.add_bos_token", uint32(1)}}, "add_bos_token is a u32, want a bool"},
		{"unk past the vocabulary", []kv{spm, tokens, {"tokenizer.ggml.unknown_token_id", uint32(4)}}, "unknown_token_id 4 is outside"},
		{"no merges", []kv{gpt2, tokens, {"tokenizer.ggml.pre", "gpt-2"}}, "no metadata tokenizer.ggml.merges"},
		{"merge without a space", []kv{gpt2, tokens, {"tokenizer.ggml.merges", []string{"ab"}}}, `merges[0] "ab": want two pieces`},
		// The merged piece would have no id and be dropped from the text.
		{"merge into a piece not in the vocabulary", []kv{gpt2, tokens, {"tokenizer.ggml.merges", []string{"a a"}}}, `tokenizer.ggml.merges[0] "a a": "aa" is not in tokenizer.ggml.tokens`},
		{"merge of a piece not in the vocabulary", []kv{gpt2, tokens, {"tokenizer.ggml.merges", []string{"b a"}}}, `tokenizer.ggml.merges[0] "b a": "b" is not in tokenizer.ggml.tokens`},
		// llama.cpp refuses a token listed twice (the text would have two
		// ids), an empty one named as another is named included.
		{"a token twice", []kv{spm, {"tokenizer.ggml.tokens", []string{"<unk>", "a", "b", "a"}}}, `tokenizer.ggml.tokens[3] "a" is also token 1`},
		{"an empty token named as another", []kv{spm, {"tokenizer.ggml.tokens", []string{"[EMPTY_1]", ""}}}, `tokenizer.ggml.tokens[1] "[EMPTY_1]" is also token 0`},
		{"unknown pre-tokenizer", []kv{gpt2, tokens, {"tokenizer.ggml.pre", "nope"}, {"tokenizer.ggml.merges", []string{}}},
			`tokenizer.ggml.pre "nope" is not supported (`},
	} {
		path := ggufFile(t, tc.kvs...)
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", tc.name, err, path, tc.want)
		}
	}
}

// No GGUF file or text makes the tokenizer panic or hang.
func FuzzFromGGUF(f *testing.F) {
	addSeeds(f, filepath.Join("testdata", "gguf", "*.gguf"))
	// One file, rewritten for each input (a worker runs them one at a
	// time): a directory made and removed for each cost more than the load.
	path := filepath.Join(f.TempDir(), "f.gguf")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if tok, err := Load(path); err == nil {
			roundTrip(tok, text)
		}
	})
}

// A file named .gguf that is not one says so, not that it is bad JSON.
func TestGGUFByName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.gguf")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "too short for a GGUF header") {
		t.Errorf("an empty .gguf file: %v", err)
	}
}

// Many added tokens cost a few lookups a position, not one a token: a
// vocabulary of 50,000 user-defined tokens encodes a long text at once.
func TestManyAddedTokens(t *testing.T) {
	tokens := byteLevelVocab()
	types := make([]int32, 256, 256+50000)
	for i := range types {
		types[i] = ggufNormal
	}
	for i := 0; i < 50000; i++ {
		tokens = append(tokens, fmt.Sprintf("<tok%d>", i))
		types = append(types, ggufUserDefined)
	}
	tok, err := Load(ggufFile(t, kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", "gpt-2"}, kv{"tokenizer.ggml.tokens", tokens},
		kv{"tokenizer.ggml.token_type", types}, kv{"tokenizer.ggml.merges", []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("<tok7><tok49999>x<to", 20000)
	ids, err := tok.Encode(text, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 20000*6 || ids[0] != 256+7 || ids[1] != 256+49999 || ids[2] != 'x' {
		t.Errorf("%d ids, first %v", len(ids), ids[:6])
	}
}

// A GGUF vocabulary's control and user-defined tokens are cut from a text
// as llama.cpp's tokenizer_st_partition cuts them: each token in turn, by
// length in bytes (longest first, ties in id order),
// wherever it is found in what the tokens before it left. Where two
// overlap, that is not HF's leftmost-longest.
func TestGGUFPartition(t *testing.T) {
	// 18 tokens of mixed lengths: ties stay in id order past the 16 that
	// std::sort orders by insertion.
	lens := []int{4, 5, 6, 3, 3, 6, 5, 4, 4, 6, 6, 6, 4, 4, 4, 6, 3, 3}
	many := make([]string, len(lens))
	for i, n := range lens {
		many[i] = fmt.Sprintf("~%0*d", n-1, i)
	}
	many[3], many[4] = "aXb", "Xbc"
	for _, tc := range []struct {
		name  string
		extra []string // tokens 256 on, user-defined
		text  string
		want  []int32
	}{
		// Leftmost-longest takes "xa" at 0; llama.cpp takes the longer
		// "abc" first, wherever it is.
		{"a longer token overlapping one before it", []string{"abc", "xa"}, "xabc", []int32{'x', 256}},
		{"the same, the shorter one first", []string{"xa", "abc"}, "xabc", []int32{'x', 257}},
		// Length in bytes: "bé" (3) before "ab" (2).
		{"length in bytes", []string{"ab", "bé"}, "abé", []int32{'a', 257}},
		// One length: the lower id first.
		{"one length, the lower id first", []string{"Xbc", "aXb"}, "aXbc", []int32{'a', 256}},
		{"one length, the lower id first, at the start", []string{"aXb", "Xbc"}, "aXbc", []int32{256, 'c'}},
		{"one length among many, the lower id first", many, "aXbc", []int32{256 + 3, 'c'}},
		// A token is searched for again after its own match, so not where
		// it overlaps it; a shorter one then in what is left.
		{"a token's overlapping places, and one inside it", []string{"aba", "ba"}, "ababab", []int32{256, 257, 'b'}},
		{"overlapping places of one token", []string{"aa"}, "aaa", []int32{256, 'a'}},
	} {
		types := make([]int32, 256+len(tc.extra))
		for i := range types {
			types[i] = ggufNormal
			if i >= 256 {
				types[i] = ggufUserDefined
			}
		}
		tok, err := Load(ggufFile(t, kv{"tokenizer.ggml.model", "gpt2"}, kv{"tokenizer.ggml.pre", "gpt-2"},
			kv{"tokenizer.ggml.tokens", byteLevelVocab(tc.extra...)}, kv{"tokenizer.ggml.token_type", types},
			kv{"tokenizer.ggml.merges", []string{}}))
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
	}
}

// A character a "llama" vocabulary lacks is spelled as llama.cpp's
// SentencePiece tokenizer spells it, byte by byte: each byte's <0xXX>
// token, else the token that is the byte alone; never <unk>. A byte with
// neither fails llama.cpp (byte_to_token throws), and is an error here.
func TestGGUFByteFallback(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "▁", "a", "<0xC3>", "\xa9", "<0x62>"}
	types := []int32{ggufUnknown, ggufControl, ggufControl, ggufNormal, ggufNormal, ggufByte, ggufNormal, ggufByte}
	tok, err := Load(ggufFile(t, kv{"tokenizer.ggml.model", "llama"}, kv{"tokenizer.ggml.tokens", tokens}, kv{"tokenizer.ggml.token_type", types}))
	for _, tc := range []struct {
		name, text string
		want       []int32
	}{
		{"every byte's <0xXX>", "ab", []int32{1, 3, 4, 7}},
		{"<0xC3>, then the byte A9 alone", "aé", []int32{1, 3, 4, 5, 6}},
	} {
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
	}
	if err != nil {
		return
	}
	// ß is C3 9F: the vocabulary has no token for 9F at all.
	if ids, err := tok.Encode("aß", true); err == nil || !strings.Contains(err.Error(), `"ß", which the vocabulary has no token for, nor <0x9F> or the byte alone for its byte 0x9F`) {
		t.Errorf("a byte the vocabulary cannot spell: %v, %v", ids, err)
	}
	// A vocabulary without ▁ cannot spell a space: the bytes named are
	// ▁'s, which the message says.
	tok, err = Load(ggufFile(t, kv{"tokenizer.ggml.model", "llama"}, kv{"tokenizer.ggml.tokens", tokens[4:]}, kv{"tokenizer.ggml.token_type", types[4:]}))
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := tok.Encode("a a", false); err == nil || !strings.Contains(err.Error(), `the text holds " " (its spaces as SentencePiece's ▁, U+2581, bytes E2 96 81), which the vocabulary has no token for, nor <0xE2>`) {
		t.Errorf("a space the vocabulary cannot spell: %v, %v", ids, err)
	}
}

// llama.cpp's loader changes some tokens' types by their text before it
// cuts special tokens out of a text and decodes (llama_vocab::impl::load):
// tokens that end a generation, and fill-in-the-middle ones the file names
// no id for, become control tokens; gpt-oss's <|channel|> and its <|end|>
// (beside <|return|> and <|call|>) user-defined ones, kept in decoding;
// Gemma 4's </s> (beside <|tool_response>) a normal one; a type 0 token
// decodes to nothing; and Phi-3's tokens take the whitespace after them,
// a Jina mask the whitespace before it.
func TestGGUFTokenAttributes(t *testing.T) {
	byteLevel := func(extra []string, types []int32, more ...kv) []kv {
		pre := kv{"tokenizer.ggml.pre", "gpt-2"}
		if len(more) > 0 && more[0].key == pre.key {
			pre, more = more[0], more[1:]
		}
		all := make([]int32, 256, 256+len(types))
		for i := range all {
			all[i] = ggufNormal
		}
		return append([]kv{{"tokenizer.ggml.model", "gpt2"}, pre, {"tokenizer.ggml.tokens", byteLevelVocab(extra...)},
			{"tokenizer.ggml.token_type", append(all, types...)}, {"tokenizer.ggml.merges", []string{}}}, more...)
	}
	spm := func(more ...kv) []kv {
		return append([]kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a", "<|user|>"}},
			{"tokenizer.ggml.token_type", []int32{ggufUnknown, ggufControl, ggufControl, ggufNormal, ggufNormal, ggufNormal, ggufControl}},
			{"tokenizer.ggml.scores", []float32{0, 0, 0, -3, -2, -1, 0}}}, more...)
	}
	N, C := int32(ggufNormal), int32(ggufControl)
	harmony := []string{"<|return|>", "<|call|>", "<|end|>", "<|channel|>"}
	for _, tc := range []struct {
		name   string
		kvs    []kv
		text   string
		want   []int32
		decode string // the ids' text, special tokens skipped
	}{
		{"an end of turn typed normal is a control token", byteLevel([]string{"<|im_end|>"}, []int32{N}), "a<|im_end|>", []int32{'a', 256}, "a"},
		{"a fill-in-the-middle token the file names no id for", byteLevel([]string{"<|fim_prefix|>"}, []int32{N}), "<|fim_prefix|>a", []int32{256, 'a'}, "a"},
		{"one the file names another id for stays normal", byteLevel([]string{"<|fim_prefix|>", "<PRE>"}, []int32{N, C},
			kv{"tokenizer.ggml.fim_pre_token_id", uint32(257)}), "<|fim_prefix|>", []int32{'<', '|', 'f', 'i', 'm', '_', 'p', 'r', 'e', 'f', 'i', 'x', '|', '>'}, "<|fim_prefix|>"},
		// Of two texts of one kind llama.cpp makes one control, the later
		// id whichever text it is (ggufFIM); the other stays normal.
		{"of two fill-in-the-middle texts, the later id", byteLevel([]string{"<|fim_prefix|>", "<fim-prefix>"}, []int32{N, N}),
			"<|fim_prefix|><fim-prefix>", append(textBytes("<|fim_prefix|>"), 257), "<|fim_prefix|>"},
		{"whichever text it is", byteLevel([]string{"<fim-prefix>", "<|fim_prefix|>"}, []int32{N, N}),
			"<fim-prefix><|fim_prefix|>", append(textBytes("<fim-prefix>"), 257), "<fim-prefix>"},
		{"gpt-oss's channel is user-defined", byteLevel(harmony, []int32{C, C, C, C}), "<|channel|>a<|end|><|call|>", []int32{259, 'a', 258, 257}, "<|channel|>a<|end|>"},
		{"its end a control token without <|call|>", byteLevel([]string{"<|return|>", "<|end|>"}, []int32{C, C}), "a<|end|>", []int32{'a', 257}, "a"},
		{"Gemma 4's </s> is text", byteLevel([]string{"<|tool_response>", "</s>"}, []int32{C, C}), "</s>", []int32{'<', '/', 's', '>'}, "</s>"},
		{"Phi-3's tokens take the whitespace after them", spm(kv{"general.name", "Phi-3-mini-4k-instruct"}), "<|user|> \n a</s> a", []int32{1, 6, 5, 2, 5}, "a a"},
		{"but not <s>", spm(kv{"general.name", "Phi-3-mini-4k-instruct"}), "<s> a", []int32{1, 1, 3, 5}, " a"},
		{"another model's do not", spm(), "<|user|> a", []int32{1, 6, 3, 5}, " a"},
		{"a Jina mask takes the whitespace before it", byteLevel([]string{"<mask>"}, []int32{C}, kv{"tokenizer.ggml.pre", "jina-v2-es"}), "a \t<mask>", []int32{'a', 256}, "a"},
	} {
		tok, err := Load(ggufFile(t, tc.kvs...))
		checkEncodes(t, tc.name, tok, err, tc.text, tc.want)
		if err != nil {
			continue
		}
		if got := mustDecode(t, tok, tc.want...); got != tc.decode {
			t.Errorf("%s: %v decodes as %q, want %q", tc.name, tc.want, got, tc.decode)
		}
	}
	// A token of type 0 is found in text like any other, and decodes to
	// nothing, as llama.cpp's token_to_piece gives it.
	tok, err := Load(ggufFile(t, byteLevel([]string{"xy"}, []int32{0})...))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustDecode(t, tok, 'a', 256); got != "a" {
		t.Errorf("a type 0 token: %q, want %q", got, "a")
	}
}

// textBytes is a text's ids in byteLevelVocab, one a byte.
func textBytes(s string) []int32 {
	var ids []int32
	for _, b := range []byte(s) {
		ids = append(ids, int32(b))
	}
	return ids
}

// The fill-in-the-middle pad, repeat and separator tokens llama.cpp finds
// by text end a generation, and are the ones it makes control: of two
// texts of one kind the later id, none where the file names the kind's id
// within the vocabulary; prefix, suffix and middle are control and do not
// end one.
func TestGGUFFIMEndOfGeneration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extra   []string
		more    []kv
		eog     []int32
		control []int32 // of the extra tokens, all typed normal
	}{
		{"a pad found by text", []string{"[PAD]"}, nil, []int32{256}, []int32{256}},
		{"of two pads, the later", []string{"<|fim_pad|>", "<PAD>", "<|file_sep|>"}, nil, []int32{257, 258}, []int32{257, 258}},
		{"of two repeats, the later", []string{"<|repo_name|>", "<|fim_repo|>"}, nil, []int32{257}, []int32{257}},
		{"the key's id instead", []string{"<|fim_pad|>", "<PAD>"}, []kv{{"tokenizer.ggml.fim_pad_token_id", uint32(256)}}, []int32{256}, nil},
		{"a key past the vocabulary is not read", []string{"<|fim_pad|>"}, []kv{{"tokenizer.ggml.fim_pad_token_id", uint32(9999)}}, []int32{256}, []int32{256}},
		{"prefix, suffix and middle, the later prefix", []string{"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<PRE>"}, nil, nil, []int32{257, 258, 259}},
		{"the older prefix key", []string{"<|fim_prefix|>"}, []kv{{"tokenizer.ggml.prefix_token_id", uint32(0)}}, nil, nil},
	} {
		vocab := byteLevelVocab(tc.extra...)
		types := make([]int32, len(vocab))
		for i := range types {
			types[i] = ggufNormal
		}
		path := ggufFile(t, append([]kv{{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "gpt-2"}, {"tokenizer.ggml.tokens", vocab},
			{"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.merges", []string{}}}, tc.more...)...)
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		eog := GGUFEndOfGeneration(f, nil, vocab)
		f.Close()
		if !slices.Equal(eog, tc.eog) {
			t.Errorf("%s: ends at %v, want %v", tc.name, eog, tc.eog)
		}
		tok, err := Load(path)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var control []int32
		for id := int32(256); id < int32(len(vocab)); id++ {
			if tok.special[id] {
				control = append(control, id)
			}
		}
		if !slices.Equal(control, tc.control) {
			t.Errorf("%s: control tokens %v, want %v", tc.name, control, tc.control)
		}
	}
}

// A byte-level GGUF vocabulary with no tokenizer.ggml.pre is split by
// llama.cpp's "default", as llama.cpp splits it, and says so in a note
// naming the file and the key, where llama.cpp warns; one that names its
// pre-tokenizer, and a SentencePiece one (no pre-tokenizer), say nothing.
func TestGGUFNoPreNote(t *testing.T) {
	tokens := kv{"tokenizer.ggml.tokens", []string{"a", "b", "ab"}}
	merges := kv{"tokenizer.ggml.merges", []string{"a b"}}
	for _, tc := range []struct {
		name string
		kvs  []kv
		note bool
	}{
		{"gpt2 without pre", []kv{{"tokenizer.ggml.model", "gpt2"}, tokens, merges}, true},
		{"gpt2 with pre", []kv{{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "default"}, tokens, merges}, false},
		{"llama", []kv{{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"}}}, false},
	} {
		path := ggufFile(t, tc.kvs...)
		tok, err := Load(path)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		notes := tok.Notes()
		switch {
		case !tc.note && len(notes) > 0:
			t.Errorf("%s: notes %q, want none", tc.name, notes)
		case tc.note && (len(notes) != 1 || !strings.HasPrefix(notes[0], path+": no tokenizer.ggml.pre: the text is split by llama.cpp's \"default\" pre-tokenizer")):
			t.Errorf("%s: notes %q, want one naming %s and tokenizer.ggml.pre", tc.name, notes, path)
		}
	}
}
