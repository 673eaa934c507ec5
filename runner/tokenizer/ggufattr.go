package tokenizer

import (
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/runner/gguf"
)

// tokenAttr is llama.cpp's llama_token_attr: what a GGUF token is, from its
// tokenizer.ggml.token_type and then the loader's own rules by its text.
type tokenAttr uint16

const (
	attrUnknown tokenAttr = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrLStrip
	attrRStrip
)

// cut says whether llama.cpp cuts the token out of a text before anything
// else (its special-token cache); special, whether decoding that skips
// special tokens leaves it out; silent, whether it decodes to nothing.
func (a tokenAttr) cut() bool     { return a&(attrControl|attrUserDefined|attrUnknown) != 0 }
func (a tokenAttr) special() bool { return a&(attrControl|attrUnknown) != 0 }
func (a tokenAttr) silent() bool {
	return a&(attrControl|attrUnknown|attrUserDefined|attrNormal|attrByte) == 0
}

// Texts llama.cpp's loader (llama_vocab::impl::load) makes control tokens
// whatever their type: the tokens that end a generation, and for each
// fill-in-the-middle kind whose id key the file lacks, the token it finds
// that kind by (ggufFIM).
var (
	llamaEOGTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
		"<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
	llamaFIMTexts = []struct {
		keys  []string // the id keys naming it (the older name too)
		texts []string
		eog   bool // whether llama.cpp ends a generation at it
	}{
		{[]string{"fim_pre", "prefix"}, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}, false},
		{[]string{"fim_suf", "suffix"}, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}, false},
		{[]string{"fim_mid", "middle"}, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}, false},
		{[]string{"fim_pad"}, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}, true},
		{[]string{"fim_rep"}, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
		{[]string{"fim_sep"}, []string{"<|file_sep|>"}, true},
	}
)

// fimToken is the token llama.cpp's loader takes for one fill-in-the-middle
// kind: id (-1 for none), and whether it found it by its text.
type fimToken struct {
	id     int32
	byText bool
}

// ggufFIM is each llamaFIMTexts kind's token as llama.cpp's loader leaves
// it: the id its key names within the vocabulary (the older key winning,
// read last), else the token found by text. Of two texts of one kind
// llama.cpp takes the first its hash map visits, an order its C++ library
// decides; the highest id is taken, which both libc++ and libstdc++ mostly
// visit first (docs/tokenizer.md, "GGUF files").
func ggufFIM(f *gguf.File, texts []string) []fimToken {
	out := make([]fimToken, len(llamaFIMTexts))
	kinds := map[string]int{}
	for k, fim := range llamaFIMTexts {
		out[k].id = -1
		for _, key := range fim.keys {
			if id, ok, err := ggufID(f, "tokenizer.ggml."+key+"_token_id"); err == nil && ok && id < int64(len(texts)) {
				out[k].id = int32(id)
			}
		}
		if out[k].id < 0 {
			for _, s := range fim.texts {
				kinds[s] = k
			}
		}
	}
	for id, s := range texts {
		if k, ok := kinds[s]; ok {
			out[k] = fimToken{int32(id), true}
		}
	}
	return out
}

// GGUFEndOfGeneration completes the ids a GGUF file's metadata names as
// ending a generation (its eos, eot, eom and fill-in-the-middle keys) as
// llama.cpp's loader does: the fill-in-the-middle pad, repeat and separator
// tokens it finds by text where f names none (ggufFIM, the rule that makes
// them control tokens), then the tokens whose text ends a turn
// (llamaEOGTexts) in id order, less gpt-oss's <|end|> where <|return|> and
// <|call|> (or <|calls|> and <|flush|>) end one too, and less </s> beside
// Gemma 4's <|tool_response>.
func GGUFEndOfGeneration(f *gguf.File, named []int32, tokens []string) []int32 {
	eog := slices.Clone(named)
	add := func(id int32) {
		if !slices.Contains(eog, id) {
			eog = append(eog, id)
		}
	}
	for k, fim := range ggufFIM(f, tokens) {
		if llamaFIMTexts[k].eog && fim.id >= 0 {
			add(fim.id)
		}
	}
	byText := map[string]int32{}
	for id, text := range tokens {
		if slices.Contains(llamaEOGTexts, text) {
			byText[text] = int32(id)
			add(int32(id))
		}
	}
	ends := func(text string) bool { _, ok := byText[text]; return ok }
	drop := func(text string) {
		if id, ok := byText[text]; ok {
			eog = slices.DeleteFunc(eog, func(e int32) bool { return e == id })
		}
	}
	if gptOSSMessageEnd(ends) {
		drop("<|end|>")
	}
	if ends("<|tool_response>") {
		drop("</s>")
	}
	return eog
}

// gptOSSMessageEnd reports whether a vocabulary (has: whether it holds a
// text) is gpt-oss's, whose <|end|> ends a message and not the generation.
// llama.cpp's test: <|end|> beside <|return|> or <|flush|>, and beside
// <|call|> or <|calls|>. GGUFEndOfGeneration and ggufAttrs ask it alike,
// so the set a generation stops at and the tokens decoding keeps agree.
func gptOSSMessageEnd(has func(string) bool) bool {
	return has("<|end|>") && (has("<|call|>") || has("<|calls|>")) && (has("<|return|>") || has("<|flush|>"))
}

// ggufAttrs are the tokens' attributes as llama.cpp's loader leaves them,
// in its order: the types; control for the fill-in-the-middle tokens found
// by text and the ends of a generation; gpt-oss's <|channel|>, <|message|>,
// <|start|> and <|constrain|> user-defined, and its <|end|> where
// <|return|> and <|call|> (or <|calls|> and <|flush|>) end a generation;
// Gemma 4's </s> normal beside <|tool_response>; and the whitespace a token
// strips around it for the models named (Phi-3's every cut token but <unk>,
// <s> and <|endoftext|>, a Jina or ModernBERT mask).
func ggufAttrs(f *gguf.File, texts []string, types []float64) []tokenAttr {
	byType := map[float64]tokenAttr{ggufNormal: attrNormal, ggufUnknown: attrUnknown, ggufControl: attrControl,
		ggufUserDefined: attrUserDefined, ggufUnused: attrUnused, ggufByte: attrByte}
	attrs := make([]tokenAttr, len(texts))
	ids := make(map[string]int, len(texts))
	for i, s := range texts {
		attrs[i] = byType[types[i]] // 0, undefined: none
		ids[s] = i
	}
	set := func(text string, f func(*tokenAttr)) {
		if i, ok := ids[text]; ok {
			f(&attrs[i])
		}
	}
	control := func(a *tokenAttr) { *a |= attrControl }
	for _, fim := range ggufFIM(f, texts) {
		if fim.byText {
			control(&attrs[fim.id])
		}
	}
	for _, s := range llamaEOGTexts {
		set(s, control)
	}
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		set(s, func(a *tokenAttr) { *a = attrUserDefined })
	}
	has := func(s string) bool { _, ok := ids[s]; return ok }
	if gptOSSMessageEnd(has) {
		set("<|end|>", func(a *tokenAttr) { *a = attrUserDefined })
	}
	if has("<|tool_response>") {
		set("</s>", func(a *tokenAttr) { *a = attrNormal })
	}

	name := strings.ToLower(ggufString(f, "general.name"))
	pre, arch := ggufString(f, "tokenizer.ggml.pre"), ggufString(f, "general.architecture")
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		set("<mask>", func(a *tokenAttr) { *a |= attrLStrip })
	case containsAny(name, "phi-3", "phi3"):
		for i := range attrs {
			if attrs[i].cut() {
				attrs[i] |= attrRStrip
			}
		}
		set("</s>", func(a *tokenAttr) { *a |= attrRStrip })
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			set(s, func(a *tokenAttr) { *a &^= attrRStrip })
		}
	case containsAny(name, "modern-bert"):
		set("[MASK]", func(a *tokenAttr) { *a |= attrLStrip })
	}
	return attrs
}

// ggufString is a string key's value, "" where absent or not a string.
func ggufString(f *gguf.File, key string) string {
	if v, ok := f.KV[key]; ok && v.Type == gguf.String {
		return v.Str
	}
	return ""
}
