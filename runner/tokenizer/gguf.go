package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/runner/gguf"
)

// Token types in tokenizer.ggml.token_type (llama.cpp's llama_token_type).
const (
	ggufNormal      = 1
	ggufUnknown     = 2
	ggufControl     = 3
	ggufUserDefined = 4
	ggufUnused      = 5
	ggufByte        = 6
)

// ggufPre is what a tokenizer.ggml.pre name stands for in llama.cpp
// (src/llama-vocab.cpp): the regexes that split text before byte-level BPE,
// applied one after the other, each keeping the text between its matches;
// whether a whole piece found in the vocabulary skips the merges; and
// whether a prompt starts with BOS unless the file says otherwise.
type ggufPre struct {
	regexes []string
	// behaviors are the regexes' Split behaviors where the model's
	// tokenizer.json has one other than Isolated, by the regex's index.
	behaviors map[int]string
	// digits: after the regexes, HF's Digits with individual_digits, each
	// number character (Rust's char::is_numeric) a piece of its own, where
	// the model's tokenizer.json has that step and llama.cpp a regex.
	digits       bool
	ignoreMerges bool
	addBOS       bool
}

// The regexes are the ones the models' own tokenizer.json files hold (HF
// tokenizers is the oracle, docs/tokenizer.md); llama.cpp rewrites some of
// them for its regex engine to the same effect.
const (
	llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Split  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	tekkenSplit = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt4oSplit  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	seedSplit   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2SplitStrict is GPT-2's pattern without the trailing \s+: the
	// form llama.cpp's default and StarCoder groups apply.
	gpt2SplitStrict = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// qwen35Split is Qwen2's with combining marks (\p{M}) kept in words.
	qwen35Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// minicpm5Split follows a split into runs of up to three digits.
	minicpm5Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// ufakzekaSplit is Qwen2's without the English contractions, so a
	// Turkish suffix after an apostrophe stays one piece.
	ufakzekaSplit = `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// bailingSplit's possessive ?+ and ++ are atomic groups here, the form
	// regexp2 takes.
	bailingSplit = `'(?i:[sdmt]|ll|ve|re)|(?>[^\r\n\p{L}\p{N}]?)\p{L}+|\p{N}| ?(?>[^\s\p{L}\p{N}]+)[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`
	// exaoneMoESplit keeps words joined by single spaces in one piece.
	exaoneMoESplit = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`
	// jais2Split is Llama 3's with runs of whitespace cut in powers of two.
	jais2Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`
	// bloomSplit is BLOOM's words, each with the space before it; the
	// punctuation listed is left between them.
	bloomSplit = ` ?[^(\s|.,!?…。，、।۔،)]+`

	// DeepSeek LLM's tokenizer.json (also DeepSeek-Coder v1.5's and V2's)
	// spells its classes out character by character: the letters of the
	// cased scripts (Latin, Greek, Coptic, Cyrillic, Armenian, Georgian,
	// Cherokee, Glagolitic, Deseret, Osage, Old Hungarian, Warang Citi,
	// Adlam, fullwidth Latin, ...), one space before them; ASCII's and
	// fullwidth punctuation and symbols (A-Z and a-z with them: the range
	// is :-~), the curly quotes, 、。 and the ideographic space, one space
	// before them; CJK ideographs, the scripts from U+0800 to U+4E00
	// (Indic, Thai, kana, ...) and Hangul. They are written here by code
	// point: six of the letters (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126,
	// U+212A) are ones Unicode normalization replaces, and a normalized
	// copy is another class, or none (ranges turned backwards). As each
	// regex is applied to every piece the ones before it left, a letter
	// piece holding letters past ASCII is cut again by the punctuation
	// class at its ASCII letters ("café" is "caf", "é"), in HF tokenizers
	// and llama.cpp alike.
	deepseekLLMLetters = `\s?[A-Za-z` +
		"\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af" +
		"\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5" +
		"\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba" +
		"\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45" +
		"\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe" +
		"\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc" +
		"\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139" +
		"\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3" +
		"\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06" +
		"\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb" +
		"\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943" + `]+`
	deepseekLLMPunct = `\s?[!-/:-~` + "\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002" + `]+`
	deepseekCJK      = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
	// DeepSeek-V3's: runs of up to three digits and of CJK ideographs and
	// kana are cut out first; then one ASCII punctuation mark joins the
	// ASCII letters after it, a letter run (with its marks) takes the one
	// character before it that is no letter, punctuation, symbol or
	// newline, and punctuation and symbols run together.
	deepseekV3CJK   = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	deepseekV3Split = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// spark25Split is DeepSeek-V3's without its newline runs: punctuation
	// takes no newlines after it, and newlines are matched one at a time
	// where DeepSeek-V3 takes a run of them with the whitespace before.
	spark25Split = `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+`
)

var ggufPres = func() map[string]ggufPre {
	m := map[string]ggufPre{
		// Also what llama.cpp takes for a file that names no pre-tokenizer.
		"default": {regexes: []string{`[\p{P}\$\+<=>\^~\|]+`, gpt2SplitStrict, `\p{N}+`, `[0-9][0-9][0-9]`}},
		"tekken":  {regexes: []string{tekkenSplit}, ignoreMerges: true, addBOS: true},
	}
	group := func(p ggufPre, names ...string) {
		for _, n := range names {
			m[n] = p
		}
	}
	group(ggufPre{regexes: []string{llama3Split}, ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	group(ggufPre{regexes: []string{llama3Split}}, "dbrx", "smaug-bpe", "chatglm-bpe", "glm4")
	// jina-v1-en, jina-v2-code and roberta-bpe also set llama.cpp's add_sep,
	// which its BPE tokenize never reads.
	group(ggufPre{regexes: []string{gpt2Split}},
		"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert",
		"jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt", "olmo", "jais", "trillion", "granite-docling")
	// grok-2's tokenizer.json regex is Qwen2's.
	group(ggufPre{regexes: []string{qwen2Split}},
		"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2")
	group(ggufPre{regexes: []string{`\p{N}`, gpt2SplitStrict}},
		"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2")
	group(ggufPre{regexes: []string{gpt4oSplit}}, "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2")
	group(ggufPre{regexes: []string{seedSplit}}, "seed-coder")
	group(ggufPre{regexes: []string{qwen35Split}}, "qwen35")
	group(ggufPre{regexes: []string{`\p{N}{1,3}`, minicpm5Split}, ignoreMerges: true}, "minicpm5")
	group(ggufPre{regexes: []string{ufakzekaSplit}}, "ufakzeka")
	group(ggufPre{regexes: []string{bailingSplit}}, "bailingmoe", "bailingmoe2", "llada-moe")
	group(ggufPre{regexes: []string{exaoneMoESplit}}, "exaone-moe")
	group(ggufPre{regexes: []string{jais2Split}}, "jais-2")
	// Laguna's tokenizer.json first joins each run of line breaks to the
	// line after it (MergedWithNext), where llama.cpp splits lines with
	// `[^\n]+|[\n]+`, which parts a \r from its \n.
	group(ggufPre{regexes: []string{`(?:\r?\n)+`, qwen2Split}, behaviors: map[int]string{0: "MergedWithNext"}}, "laguna")
	group(ggufPre{regexes: []string{`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, gpt2SplitStrict, `[0-9][0-9][0-9]`}}, "falcon")
	group(ggufPre{regexes: []string{bloomSplit}}, "bloom", "poro-chat", "gpt3-finnish")
	group(ggufPre{regexes: []string{bloomSplit, `\p{N}`}}, "viking")
	// The DeepSeek splits are those of the models' tokenizer.json files
	// (docs/tokenizer.md says which; TestGGUFPreSplitsMatchHF), which
	// llama.cpp copies but for the last step: tokenizer.json's Digits, each
	// number character a piece, where llama.cpp has \p{N} (the same pieces)
	// or, for deepseek-llm, \p{N}+, which keeps a run of digits one piece,
	// so that a merge of two digits HF never applies would apply.
	//
	// `\s+$` splits alike whether $ is taken before every newline or only at
	// the end and before a last one (regexp2's): every piece it is given
	// holds a newline only alone, [\r\n] having cut each out first.
	group(ggufPre{regexes: []string{`[\r\n]`, deepseekLLMLetters, deepseekLLMPunct, `\s+$`, deepseekCJK}, digits: true}, "deepseek-llm")
	group(ggufPre{regexes: []string{`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, deepseekCJK}, digits: true}, "deepseek-coder")
	// joyai-llm names JoyAI-LLM-Flash's vocabulary, which llama.cpp took in
	// as DeepSeek-V3's split, and DeepSeek V4's GGUF files carry it;
	// DeepSeek V4's tokenizer.json splits as DeepSeek-V3's does.
	group(ggufPre{regexes: []string{`\p{N}{1,3}`, deepseekV3CJK, deepseekV3Split}}, "deepseek-v3", "joyai-llm")
	group(ggufPre{regexes: []string{`\p{N}{1,3}`, deepseekV3CJK, spark25Split}, digits: true}, "spark2_5")
	return m
}()

// ggufPresRefused are the tokenizer.ggml.pre names llama.cpp reads whose
// split is not implemented here, each with what it needs.
var ggufPresRefused = func() map[string]string {
	m := map[string]string{}
	group := func(why string, names ...string) {
		for _, n := range names {
			m[n] = why
		}
	}
	group("llama.cpp reads it with DeepSeek-V3's regexes, which are not checked here against the model's own tokenizer",
		"hunyuan-dense", "hy_v4")
	group("llama.cpp's script ranges and GPT-4o-style split, not checked here against the model's own tokenizer", "youtu")
	group("Chameleon's image and sentinel token splits", "chameleon")
	group("BPE over raw UTF-8, spaces as ▁ or dropped, not byte-level", "gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace")
	group("digits grouped in threes from the right, by lookahead", "tiny_aya", "cohere2moe", "superbpe")
	group("llama.cpp's own split code", "kimi-k2", "afmoe")
	group("llama.cpp's own rewrite of GPT-4o's split", "granite-embed-multi-97m")
	return m
}()

// PreTokenizersRead lists the tokenizer.ggml.pre names FromGGUF reads.
func PreTokenizersRead() []string {
	var names []string
	for n := range ggufPres {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FromGGUF reads the tokenizer a GGUF file carries in its metadata
// (tokenizer.ggml.*), as llama.cpp reads it: "llama" vocabularies are
// SentencePiece's BPE, merging the adjacent pair whose joined piece has the
// highest score; "gpt2" ones are byte-level BPE over tokenizer.ggml.merges,
// split first as tokenizer.ggml.pre names. Control, user-defined and
// unknown tokens are matched in the text, as llama.cpp matches them when it
// parses special tokens (docs/tokenizer.md, "GGUF files").
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, ok := f.KV["tokenizer.ggml.model"]
	if !ok {
		return nil, fmt.Errorf("the file carries %w (no tokenizer.ggml.model)", ErrNoTokenizer)
	}
	if model.Type != gguf.String {
		return nil, fmt.Errorf("tokenizer.ggml.model is a %s, want a string", model.Type)
	}
	switch model.Str {
	case "llama", "gpt2":
	case "none", "no_vocab":
		return nil, fmt.Errorf("tokenizer.ggml.model %s: the file carries %w", clip.Quote(model.Str), ErrNoTokenizer)
	default:
		return nil, fmt.Errorf("tokenizer.ggml.model %s is not supported (llama: SentencePiece BPE, gpt2: byte-level BPE)", clip.Quote(model.Str))
	}
	// The count before the strings: a file may claim millions of empty ones.
	if v := f.KV["tokenizer.ggml.tokens"]; v.Type == gguf.Array && (v.Len == 0 || v.Len > MaxVocab) {
		return nil, fmt.Errorf("tokenizer.ggml.tokens holds %d tokens (1 to %d)", v.Len, MaxVocab)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens", MaxVocab)
	if err != nil {
		return nil, err
	}
	types := make([]float64, len(tokens))
	for i := range types {
		types[i] = ggufNormal // llama.cpp's type for every token of a file without types
	}
	if v, ok := f.KV["tokenizer.ggml.token_type"]; ok {
		if v.Type == gguf.Array && v.Elem != gguf.I32 && v.Elem != gguf.U32 {
			return nil, fmt.Errorf("tokenizer.ggml.token_type is an array of %s, want i32", v.Elem)
		}
		// The length before the values: a float64 each, a long array
		// would take twice its bytes only to be refused.
		if v.Type == gguf.Array && v.Len != uint64(len(tokens)) {
			return nil, fmt.Errorf("tokenizer.ggml.token_type holds %d types for %d tokens", v.Len, len(tokens))
		}
		if types, err = f.Numbers("tokenizer.ggml.token_type", len(tokens)); err != nil {
			return nil, err
		}
		for i, ty := range types {
			if ty < 0 || ty > ggufByte {
				return nil, fmt.Errorf("tokenizer.ggml.token_type[%d] (token %s) is %g, not a token type (0 to %d)", i, clip.Quote(tokens[i]), ty, ggufByte)
			}
		}
	}
	t := &Tokenizer{vocab: make(map[string]int32, len(tokens)), pieces: make(map[int32]string, len(tokens)),
		size: len(tokens), ranks: map[[2]string]int{}, unk: -1, special: map[int32]bool{}}
	texts := make([]string, len(tokens))
	for i, tok := range tokens {
		if tok == "" {
			tok = fmt.Sprintf("[EMPTY_%d]", i) // as llama.cpp names an empty token
		}
		// Which id the text would be found as is not the file's to leave
		// open: llama.cpp refuses such a vocabulary.
		if j, dup := t.vocab[tok]; dup {
			return nil, fmt.Errorf("tokenizer.ggml.tokens[%d] %s is also token %d: a vocabulary holding a token twice is refused, as llama.cpp refuses it", i, clip.Quote(tok), j)
		}
		t.vocab[tok], t.pieces[int32(i)], texts[i] = int32(i), tok, tok
	}
	var cut []int32 // the tokens llama.cpp cuts out of a text first
	attrs := ggufAttrs(f, texts, types)
	for i, a := range attrs {
		if a.cut() {
			cut = append(cut, int32(i))
		}
		if a.special() {
			t.special[int32(i)] = true
		}
		if a.silent() {
			// The converter's padding ([PAD123], unused): llama.cpp decodes
			// it to nothing, and so does Decode an id it has no piece for.
			delete(t.pieces, int32(i))
		}
	}
	t.partition = newLlamaPartition(cut, t.pieces, attrs)

	// What a prompt gets around it: llama.cpp's defaults for the model and
	// pre-tokenizer, then the file's own keys.
	var pre ggufPre
	addBOS, addEOS := false, false
	bos, eos := int64(11), int64(11)
	if model.Str == "llama" {
		t.kind = "SentencePiece BPE (GGUF)"
		addBOS, bos, eos = true, 1, 2
		if err := t.readSentencePiece(f); err != nil {
			return nil, err
		}
	} else {
		if pre, err = t.readByteLevel(f); err != nil {
			return nil, err
		}
		addBOS = pre.addBOS
	}
	for key, dst := range map[string]*bool{"tokenizer.ggml.add_bos_token": &addBOS, "tokenizer.ggml.add_eos_token": &addEOS} {
		if *dst, err = ggufBool(f, key, *dst); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct {
		key  string
		id   *int64
		add  bool
		list *[]int32
	}{{"tokenizer.ggml.bos_token_id", &bos, addBOS, &t.prefix}, {"tokenizer.ggml.eos_token_id", &eos, addEOS, &t.suffix}} {
		if id, ok, err := ggufID(f, s.key); err != nil {
			return nil, err
		} else if ok {
			*s.id = id
		}
		if !s.add {
			continue
		}
		// llama.cpp would put its default in place of an id past the
		// vocabulary; a token the file did not mean is refused instead.
		if *s.id < 0 || *s.id >= int64(len(tokens)) {
			return nil, fmt.Errorf("%s %d is outside the vocabulary of %d tokens, and the file asks for it around every prompt", s.key, *s.id, len(tokens))
		}
		*s.list = []int32{int32(*s.id)}
	}
	return t, nil
}

// readSentencePiece sets up a "llama" vocabulary: spaces as ▁ (one before
// the text unless tokenizer.ggml.add_space_prefix is false), merges by the
// joined piece's score, bytes the vocabulary lacks as <0xXX> tokens.
func (t *Tokenizer) readSentencePiece(f *gguf.File) error {
	prefix, err := ggufBool(f, "tokenizer.ggml.add_space_prefix", true)
	if err != nil {
		return err
	}
	scores := make([]float64, t.size)
	if v, ok := f.KV["tokenizer.ggml.scores"]; ok {
		if v.Type == gguf.Array && v.Len != uint64(t.size) {
			return fmt.Errorf("tokenizer.ggml.scores holds %d scores for %d tokens", v.Len, t.size)
		}
		if scores, err = f.Numbers("tokenizer.ggml.scores", t.size); err != nil {
			return err
		}
	}
	// Ranks are the scores' order, highest first, equal scores one rank:
	// merge() then takes the best pair and the leftmost among equals, as
	// llama.cpp's SentencePiece tokenizer does.
	distinct := map[float64]bool{}
	for i, s := range scores {
		if math.IsNaN(s) {
			return fmt.Errorf("tokenizer.ggml.scores[%d] (token %s) is NaN", i, clip.Quote(t.pieces[int32(i)]))
		}
		distinct[s] = true
	}
	order := make([]float64, 0, len(distinct))
	for s := range distinct {
		order = append(order, s)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(order)))
	rankOf := make(map[float64]int, len(order))
	for r, s := range order {
		rankOf[s] = r
	}
	t.pieceRanks = make(map[string]int, t.size)
	for piece, id := range t.vocab {
		t.pieceRanks[piece] = rankOf[scores[id]]
	}
	t.llamaBytes = true
	if id, ok, err := ggufID(f, "tokenizer.ggml.unknown_token_id"); err != nil {
		return err
	} else if !ok {
		t.unk = 0 // llama.cpp's default for these files
	} else if id >= int64(t.size) {
		return fmt.Errorf("tokenizer.ggml.unknown_token_id %d is outside the vocabulary of %d tokens", id, t.size)
	} else {
		t.unk = int32(id)
	}
	norms := []any{map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": "▁"}}
	decs := []any{
		map[string]any{"type": "Replace", "pattern": map[string]string{"String": "▁"}, "content": " "},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
	}
	if prefix {
		norms = append([]any{map[string]any{"type": "Prepend", "prepend": "▁"}}, norms...)
		decs = append(decs, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	if t.normalize, err = readNormalizers(sequence("normalizers", norms)); err != nil {
		return err
	}
	t.decode, err = readDecoders(sequence("decoders", decs))
	return err
}

// readByteLevel sets up a "gpt2" vocabulary: its merges, and the split its
// pre-tokenizer name stands for before the bytes are mapped to GPT-2's
// alphabet.
func (t *Tokenizer) readByteLevel(f *gguf.File) (ggufPre, error) {
	name := "default"
	if v, ok := f.KV["tokenizer.ggml.pre"]; ok {
		if v.Type != gguf.String {
			return ggufPre{}, fmt.Errorf("tokenizer.ggml.pre is a %s, want a string", v.Type)
		}
		name = v.Str
	} else {
		// llama.cpp warns of it too ("missing pre-tokenizer type"): a
		// converter too old to know the model's split wrote the file.
		t.notes = append(t.notes, fmt.Sprintf("%s: no tokenizer.ggml.pre: the text is split by llama.cpp's \"default\" pre-tokenizer, as llama.cpp splits it, which may not be the model's own split (prompts may encode to other tokens than the model was trained on); converting the model again with a current llama.cpp names it", f.Path))
	}
	pre, ok := ggufPres[name]
	if why, known := ggufPresRefused[name]; !ok && known {
		return pre, fmt.Errorf("tokenizer.ggml.pre %s is llama.cpp's, but its split is not implemented here (%s)", clip.Quote(name), why)
	}
	if !ok {
		return pre, fmt.Errorf("tokenizer.ggml.pre %s is not supported (%s)", clip.Quote(name), strings.Join(PreTokenizersRead(), ", "))
	}
	merges, err := f.Strings("tokenizer.ggml.merges", maxMerges)
	if err != nil {
		return pre, err
	}
	for i, m := range merges {
		// The first piece may itself be a space: llama.cpp cuts at the
		// first space after the first byte.
		cut := strings.IndexByte(m[min(1, len(m)):], ' ')
		if cut < 0 {
			return pre, fmt.Errorf("tokenizer.ggml.merges[%d] %s: want two pieces separated by a space", i, clip.Quote(m))
		}
		cut += min(1, len(m))
		pair := [2]string{m[:cut], m[cut+1:]}
		// A merge into a piece the vocabulary lacks would give no id: the
		// converter writes only merges HF tokenizers accepted.
		for _, p := range []string{pair[0], pair[1], pair[0] + pair[1]} {
			if _, ok := t.vocab[p]; !ok {
				return pre, fmt.Errorf("tokenizer.ggml.merges[%d] %s: %s is not in tokenizer.ggml.tokens", i, clip.Quote(m), clip.Quote(p))
			}
		}
		if _, dup := t.ranks[pair]; !dup {
			t.ranks[pair] = i
		}
	}
	t.ignoreMerges = pre.ignoreMerges
	t.kind = "byte-level BPE, pre-tokenizer " + name + " (GGUF)"
	var parts []any
	for i, re := range pre.regexes {
		b := pre.behaviors[i]
		if b == "" {
			b = "Isolated"
		}
		parts = append(parts, map[string]any{"type": "Split", "pattern": map[string]string{"Regex": re}, "behavior": b, "invert": false})
	}
	if pre.digits {
		parts = append(parts, map[string]any{"type": "Digits", "individual_digits": true})
	}
	parts = append(parts, map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false})
	if t.preTok, err = readPreTokenizers(sequence("pretokenizers", parts)); err != nil {
		return pre, fmt.Errorf("tokenizer.ggml.pre %s: %w", clip.Quote(name), err)
	}
	t.decode, err = readDecoders(json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false}`))
	return pre, err
}

// sequence is a tokenizer.json Sequence of parts, for the readers of
// tokenizer.json's parts to build a GGUF file's pipeline from.
func sequence(key string, parts []any) json.RawMessage {
	b, err := json.Marshal(map[string]any{"type": "Sequence", key: parts})
	if err != nil {
		panic(err) // maps of strings, numbers and bools always marshal
	}
	return b
}

// ggufID reads a token id key, a u32 as the converter writes it.
func ggufID(f *gguf.File, key string) (int64, bool, error) {
	v, ok := f.KV[key]
	if !ok {
		return 0, false, nil
	}
	if v.Type != gguf.U32 && v.Type != gguf.I32 {
		return 0, false, fmt.Errorf("%s is a %s, want u32", key, v.Type)
	}
	if v.Int < 0 {
		return 0, false, fmt.Errorf("%s is %d, not a token id", key, v.Int)
	}
	return v.Int, true, nil
}

func ggufBool(f *gguf.File, key string, def bool) (bool, error) {
	v, ok := f.KV[key]
	if !ok {
		return def, nil
	}
	if v.Type != gguf.Bool {
		return false, fmt.Errorf("%s is a %s, want a bool", key, v.Type)
	}
	return v.Uint != 0, nil
}
