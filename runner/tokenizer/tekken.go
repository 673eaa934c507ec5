package tokenizer

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// A tekken.json is Mistral's tokenizer file (mistral-common's Tekkenizer,
// src/mistral_common/tokens/tokenizers/tekken.py): tiktoken's byte-level
// BPE over a list of byte strings by rank, after a split by config.pattern,
// with default_num_special_tokens special tokens before them. It is read as
// mistral-common reads it (docs/tokenizer.md, "tekken.json"):
//
//   - the ids 0 to N-1 are the special tokens, N being
//     config.default_num_special_tokens: special_tokens[i] is id i, and ids
//     past the list are <SPECIAL_i>; a file of version v7 or earlier without
//     the list has mistral-common's 20 of v3 (<unk>, <s>, </s>, [INST], ...);
//   - vocab entry of rank r is id r + N; only the first
//     config.default_vocab_size - N entries are kept, and their ranks must
//     be 0, 1, 2, ... with the first 256 the single bytes in order;
//   - a text is split by the pattern, text between its matches dropped, as
//     tiktoken drops it, and each piece is its own token where
//     the vocabulary holds it whole, else its bytes merged pair by pair, the
//     adjacent pair whose join has the lowest rank first (leftmost among
//     equals), as tiktoken encodes;
//   - special tokens are never read from the text: "<s>" in a prompt is
//     text, as mistral-common's encode takes it;
//   - decoding reads each run of ids between special tokens as UTF-8 on its
//     own (a U+FFFD for each broken character), and writes a special token
//     as its text or, skipping special tokens, as nothing.

// tekkenVersions are mistral-common's TokenizerVersion values: a file of
// another version is refused, as mistral-common refuses it.
var tekkenVersions = []string{"v1", "v2", "v3", "v7", "v11", "v13", "v15"}

// tekkenV3Specials are mistral-common's DEPRECATED_SPECIAL_TOKENS: the
// special tokens of a file of version v7 or earlier that lists none.
var tekkenV3Specials = []string{"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
	"[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]",
	"[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"}

type tekkenJSON struct {
	Config *struct {
		Pattern          *string `json:"pattern"`
		DefaultVocabSize *int64  `json:"default_vocab_size"`
		NumSpecial       *int64  `json:"default_num_special_tokens"`
		Version          *string `json:"version"`
	} `json:"config"`
	Vocab []tekkenTokenJSON `json:"vocab"`
	// Absent or null: the v3 list, where the version allows it.
	SpecialTokens *[]tekkenSpecialJSON `json:"special_tokens"`
}

type tekkenTokenJSON struct {
	Rank       *int64  `json:"rank"`
	TokenBytes *string `json:"token_bytes"`
}

type tekkenSpecialJSON struct {
	Rank     *int64  `json:"rank"`
	TokenStr *string `json:"token_str"`
}

// tekkenJSONError words a JSON error in the file's terms; a wrong type in
// an entry of vocab or special_tokens names the entry, which
// encoding/json's own error does not.
func tekkenJSONError(err error, data []byte) error {
	var te *json.UnmarshalTypeError
	var lists struct {
		Vocab         []json.RawMessage `json:"vocab"`
		SpecialTokens []json.RawMessage `json:"special_tokens"`
	}
	if !errors.As(err, &te) || json.Unmarshal(data, &lists) != nil {
		return jsonerr.ExplainFile(err, data)
	}
	for i, raw := range lists.Vocab {
		if e := json.Unmarshal(raw, new(tekkenTokenJSON)); e != nil {
			return jsonerr.ExplainAt(e, raw, fmt.Sprintf("vocab[%d]", i))
		}
	}
	for i, raw := range lists.SpecialTokens {
		if e := json.Unmarshal(raw, new(tekkenSpecialJSON)); e != nil {
			return jsonerr.ExplainAt(e, raw, fmt.Sprintf("special_tokens[%d]", i))
		}
	}
	return jsonerr.ExplainFile(err, data)
}

// tekkenVersionAfter7 says whether version (one of tekkenVersions) is past
// v7, where mistral-common requires the special_tokens list.
func tekkenVersionAfter7(version string) bool {
	return slices.Index(tekkenVersions, version) > slices.Index(tekkenVersions, "v7")
}

// ParseTekken reads a tekken.json's bytes.
func ParseTekken(data []byte) (*Tokenizer, error) {
	if err := jsonerr.UTF8(data); err != nil {
		return nil, fmt.Errorf("not a tekken.json: %w", err)
	}
	if err := checkLengths(listLimit{"vocab", jsonlen.Most(data, "vocab"), MaxVocab},
		listLimit{"special_tokens", jsonlen.Most(data, "special_tokens"), MaxVocab}); err != nil {
		return nil, err
	}
	// mistral-common reads the file with Python's json (jsonerr.Python): a
	// key given twice keeps its last value whole (encoding/json would merge
	// two objects), and a NaN in a key nothing reads is a float.
	var f tekkenJSON
	text := jsonerr.Python(data, &f)
	if err := json.Unmarshal(text, &f); err != nil {
		return nil, fmt.Errorf("not a tekken.json: %w", tekkenJSONError(err, text))
	}
	c := f.Config
	if c == nil {
		return nil, fmt.Errorf("not a tekken.json: no config")
	}
	if c.Version == nil {
		return nil, fmt.Errorf("config.version is missing (mistral-common reads %s)", strings.Join(tekkenVersions, ", "))
	}
	version := *c.Version
	if !slices.Contains(tekkenVersions, version) {
		return nil, fmt.Errorf("config.version %s is not a version mistral-common reads (%s)", clip.Quote(version), strings.Join(tekkenVersions, ", "))
	}
	for _, k := range []struct {
		name string
		v    *int64
	}{{"default_vocab_size", c.DefaultVocabSize}, {"default_num_special_tokens", c.NumSpecial}} {
		if k.v == nil {
			return nil, fmt.Errorf("config.%s is missing", k.name)
		}
		if *k.v < 0 || *k.v > MaxVocab {
			return nil, fmt.Errorf("config.%s is %d, outside 0..%d", k.name, *k.v, MaxVocab)
		}
	}
	if c.Pattern == nil || *c.Pattern == "" {
		return nil, fmt.Errorf("config.pattern is missing or empty")
	}
	split, _, err := (pattern{Regex: c.Pattern}).compile()
	if err != nil {
		return nil, fmt.Errorf("config.pattern: %w", err)
	}
	n, size := int(*c.NumSpecial), int(*c.DefaultVocabSize)
	inner := size - n // the vocabulary tokens kept
	switch {
	case inner < 256:
		return nil, fmt.Errorf("config.default_vocab_size %d leaves %d vocabulary tokens after the %d special ones, fewer than the 256 single bytes every text needs", size, inner, n)
	case inner > len(f.Vocab):
		return nil, fmt.Errorf("config.default_vocab_size %d is %d special tokens and %d vocabulary tokens, but vocab lists %d", size, n, inner, len(f.Vocab))
	}

	specials, err := tekkenSpecials(f, version, n)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{vocab: make(map[string]int32, inner), pieces: make(map[int32]string, inner),
		pieceRanks: make(map[string]int, inner), size: size, unk: -1, special: map[int32]bool{},
		ignoreMerges: true, tekken: true, tekkenSpecials: specials, tekkenSplit: split, kind: "Tekken byte-level BPE (tekken.json " + version + ")"}
	for i := range specials {
		t.special[int32(i)] = true
	}
	for r, e := range f.Vocab[:inner] {
		where := func() string { return fmt.Sprintf("vocab[%d]", r) }
		if e.Rank == nil || e.TokenBytes == nil {
			return nil, fmt.Errorf("%s: rank and token_bytes are required", where())
		}
		if *e.Rank != int64(r) {
			return nil, fmt.Errorf("%s has rank %d: the ranks must run 0, 1, 2, ... in the list's order", where(), *e.Rank)
		}
		b, err := base64.StdEncoding.DecodeString(*e.TokenBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: token_bytes %s is not base64: %v", where(), clip.Quote(*e.TokenBytes), err)
		}
		if r < 256 && (len(b) != 1 || b[0] != byte(r)) {
			return nil, fmt.Errorf("%s: token_bytes %s, where the first 256 ranks are the single bytes in order (rank %d is the byte 0x%02X)", where(), clip.Quote(*e.TokenBytes), r, r)
		}
		piece := byteLevel(b)
		if prev, dup := t.pieceRanks[piece]; dup {
			return nil, fmt.Errorf("%s: token_bytes %s is also vocab[%d]'s", where(), clip.Quote(*e.TokenBytes), prev)
		}
		id := int32(r + n)
		t.pieceRanks[piece], t.vocab[piece], t.pieces[id] = r, id, piece
	}
	// tiktoken encodes the pattern's matches alone (find_iter over the
	// text): text a pattern does not cover is dropped, not a piece as HF's
	// Isolated keeps it. The matches inverted and the rest removed is that.
	parts := []any{
		map[string]any{"type": "Split", "pattern": map[string]string{"Regex": *c.Pattern}, "behavior": "Removed", "invert": true},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
	}
	if t.preTok, err = readPreTokenizers(sequence("pretokenizers", parts)); err != nil {
		return nil, fmt.Errorf("config.pattern: %w", err)
	}
	if t.decode, err = readDecoders(json.RawMessage(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false}`)); err != nil {
		return nil, err
	}
	// mistral-common's bos_id and eos_id are these texts' ids; a prompt
	// starts with <s>, as its encode(text, bos=True) does.
	if id := slices.Index(specials, "<s>"); id >= 0 {
		t.prefix = []int32{int32(id)}
	}
	if id := slices.Index(specials, "</s>"); id >= 0 {
		t.eog = []int32{int32(id)}
	}
	return t, nil
}

// tekkenSpecials are the special tokens' texts by id: the file's list (or
// the v3 list), then <SPECIAL_i> up to n, each text once.
func tekkenSpecials(f tekkenJSON, version string, n int) ([]string, error) {
	var specials []string
	if f.SpecialTokens == nil {
		if tekkenVersionAfter7(version) {
			return nil, fmt.Errorf("special_tokens is missing, which mistral-common requires of a file of version %s (after v7)", version)
		}
		specials = slices.Clone(tekkenV3Specials)
	} else {
		for i, s := range *f.SpecialTokens {
			where := fmt.Sprintf("special_tokens[%d]", i)
			if s.Rank == nil || s.TokenStr == nil {
				return nil, fmt.Errorf("%s: rank and token_str are required", where)
			}
			if *s.Rank != int64(i) {
				return nil, fmt.Errorf("%s %s has rank %d: the ranks must run 0, 1, 2, ... in the list's order", where, clip.Quote(*s.TokenStr), *s.Rank)
			}
			specials = append(specials, *s.TokenStr)
		}
	}
	if len(specials) > n {
		return nil, fmt.Errorf("%d special tokens, more than config.default_num_special_tokens %d", len(specials), n)
	}
	for i := len(specials); i < n; i++ {
		specials = append(specials, fmt.Sprintf("<SPECIAL_%d>", i))
	}
	seen := make(map[string]int, n)
	for i, s := range specials {
		if j, dup := seen[s]; dup {
			return nil, fmt.Errorf("special token %d %s is also special token %d: each special token's text is one token's", i, clip.Quote(s), j)
		}
		seen[s] = i
	}
	return specials, nil
}

// byteLevel spells bytes in GPT-2's byte-level alphabet, the form the
// byte-level pre-tokenizer gives a text's pieces in.
func byteLevel(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteChar[c])
	}
	return sb.String()
}

// decodeTekken decodes as mistral-common's Tekkenizer.decode: each run of
// ids between special tokens read as UTF-8 on its own, a special token as
// its text unless skipSpecial. An id past the vocabulary is left out, as
// Decode leaves it out.
func (t *Tokenizer) decodeTekken(ids []int32, skipSpecial bool) string {
	var sb strings.Builder
	var run []string
	flush := func() {
		if len(run) > 0 {
			sb.WriteString(strings.Join(byteLevelDecode(run), ""))
			run = run[:0]
		}
	}
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.tekkenSpecials) {
			flush()
			if !skipSpecial {
				sb.WriteString(t.tekkenSpecials[id])
			}
			continue
		}
		if piece, ok := t.pieces[id]; ok {
			run = append(run, piece)
		}
	}
	flush()
	return sb.String()
}

// Dropped is the text a tekken.json's config.pattern leaves between its
// matches in text, stretch by stretch, which Encode drops as tiktoken
// drops it (mistral-common's encode loses it too): for the commands that
// encode a prompt to warn of. nil where the pattern covers the text, as
// every published one does, and for every other kind of tokenizer.
func (t *Tokenizer) Dropped(text string) ([]string, error) {
	if t.tekkenSplit == nil {
		return nil, nil
	}
	segs, err := matchSegments(t.tekkenSplit, text, time.Now().Add(encodeBudget))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range segs {
		if !g.match && g.hi > g.lo {
			out = append(out, text[g.lo:g.hi])
		}
	}
	return out, nil
}
