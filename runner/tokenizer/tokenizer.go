// Package tokenizer turns text into a checkpoint's token ids and back, as
// the checkpoint's tokenizer.json (HF tokenizers' file) says: BPE over
// byte-level pieces (GPT-2, Qwen2, Llama 3) or SentencePiece pieces with
// byte fallback (Llama 2, TinyLlama, Mistral), with the normalizers,
// pre-tokenizers, post-processors and decoders those files use. A file
// asking for anything else is refused at load, naming it (docs/tokenizer.md).
package tokenizer

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/mapfile"
	"github.com/mtlbench/mtlbench/suites"
)

// Tokenizer encodes and decodes text for one checkpoint.
type Tokenizer struct {
	vocab map[string]int32 // model.vocab and the added tokens
	// addedOnly are the added tokens' texts model.vocab lacks. HF's BPE
	// model knows model.vocab alone, so a piece with such a text (a
	// single_word match dropped, a character only an added token holds)
	// is spelled as the model spells it, not given the added id.
	addedOnly map[string]bool
	// pieces are the tokens by id: a map, as a file's ids need not be
	// dense and a table sized by its largest would be its to choose.
	pieces map[int32]string
	size   int // one past the largest id
	ranks  map[[2]string]int
	// pieceRanks, when set, rank a pair by the piece it joins into
	// (SentencePiece's scores in a GGUF file) instead of by ranks.
	pieceRanks map[string]int
	unk        int32 // -1: none
	// byteFallback spells a piece the vocabulary lacks as its bytes'
	// <0xXX> tokens; fuseUnk makes a run of unknown pieces one <unk>.
	byteFallback, fuseUnk, ignoreMerges bool
	// llamaBytes spells a piece the vocabulary lacks as llama.cpp's
	// SentencePiece tokenizer does (llamaByteIDs), for a GGUF "llama" file.
	llamaBytes bool

	addedIx addedIndex // the added tokens, to find in the raw text
	// addedNorm are the added tokens marked normalized, by their
	// normalized text: HF finds them in the normalized text, after those.
	addedNorm addedIndex
	// partition, for a GGUF vocabulary, finds its special tokens instead
	// of addedIx, as llama.cpp finds them.
	partition *llamaPartition
	special   map[int32]bool
	// decodeAs, for a tokenizer.json, are the added tokens ever listed as
	// normalized whose normalized text differs: HF decodes them as that
	// text, and skips one as special only where that text is a special
	// token's (specialText).
	decodeAs    map[int32]string
	specialText map[string]bool
	normalize   []normalizer
	preTok      []preTokenizer
	prefix      []int32 // the post-processor's tokens before and after the text
	suffix      []int32
	decode      []decoder
	kind        string // what Describe says it is
	// tekkenSpecials, for a tekken.json, are the special tokens' texts by
	// id (ids 0 to len-1), decoded as mistral-common decodes them
	// (decodeTekken); eog are the ids its file says end a generation.
	tekken         bool
	tekkenSpecials []string
	tekkenSplit    *regexp2.Regexp // config.pattern, for Dropped
	eog            []int32
	// notes are what the file left to a default that may not be the
	// model's (Notes).
	notes []string
}

// Notes are what the tokenizer's file left unsaid and was read by a
// default that may not be the model's own, each naming the file and the
// key, for the commands that encode text to warn of (generate): a GGUF
// file with no tokenizer.ggml.pre, which llama.cpp warns of too. nil
// otherwise.
func (t *Tokenizer) Notes() []string { return t.notes }

// Describe says what the tokenizer is and where it came from, for
// mtlbench models: "BPE (tokenizer.json), 151669 tokens".
func (t *Tokenizer) Describe() string {
	return fmt.Sprintf("%s, %d tokens", t.kind, t.size)
}

// addedToken is a token found in the text before the model sees it: its
// text (normalized, for one HF matches in the normalized text), its id,
// and how HF's AddedVocabulary::find_matches takes it (addedOpts).
type addedToken struct {
	content string
	id      int32
	addedOpts
}

// addedOpts are an added token's single_word, lstrip and rstrip, as HF's
// find_matches reads them (tokenizers/src/tokenizer/added_vocabulary.rs):
// single_word drops a match with a word character (Rust regex's \w)
// touching either end; lstrip and rstrip widen a match over the
// whitespace (\s) before or after it (splitAdded).
type addedOpts struct {
	singleWord, lstrip, rstrip bool
}

// EndOfGeneration are the ids the tokenizer's own file says end a
// generation: a tekken.json's </s> (mistral-common's eos_id). A
// tokenizer.json or a GGUF file names none here: the checkpoint's
// config.json or GGUF metadata does.
func (t *Tokenizer) EndOfGeneration() []int32 { return slices.Clone(t.eog) }

// ErrNoTokenizer is what Load's error wraps when the checkpoint has no
// tokenizer at all, as opposed to one it cannot read.
var ErrNoTokenizer = errors.New("no tokenizer")

// FileIn is the tokenizer file a checkpoint folder holds, as Load reads
// it: its tokenizer.json, else its tekken.json (Mistral's own format, which
// some Mistral checkpoints ship alone), else "".
func FileIn(dir string) string {
	for _, name := range []string{"tokenizer.json", "tekken.json"} {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	return ""
}

// Accepted says what Load reads, for the errors and help of every option
// that names a tokenizer (generate --tokenizer).
const Accepted = "a tokenizer.json or tekken.json, a folder holding one, or a .gguf file carrying one"

// Load reads a checkpoint folder's tokenizer (FileIn), or the file itself
// when path is one: a tokenizer.json, a tekken.json (a file whose name
// holds "tekken" and ends in .json, as mistral-common tells them, or one
// shaped as one), or a GGUF file's tokenizer (FromGGUF). A file of another
// kind (the results database, a model's weights, a suite) or an empty one
// is named for what it is, an input error (readfile.ErrNotAFile), not
// reported as JSON that does not parse.
func Load(path string) (*Tokenizer, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		p := FileIn(path)
		if p == "" {
			return nil, fmt.Errorf("%s: %w (the folder holds no tokenizer.json or tekken.json)", path, ErrNoTokenizer)
		}
		path = p
	}
	// A FIFO or device would block the reads below.
	if err := mapfile.CheckRegular(path); err != nil {
		return nil, err
	}
	// Told by its first bytes before it is read: a model's weights are
	// past a tokenizer's bound.
	switch k := readfile.KindOf(readfile.Head(path)); k {
	case readfile.SQLite, readfile.Safetensors:
		return nil, notATokenizer(path, k.String())
	}
	if isGGUF(path) || strings.EqualFold(filepath.Ext(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := FromGGUF(f)
		if errors.Is(err, ErrNoTokenizer) {
			return nil, fmt.Errorf("%s (a GGUF model file): %w", path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	data, err := readfile.Read(path, readfile.Tokenizer, "a tokenizer")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, notATokenizer(path, "an empty file")
	}
	parse := Parse
	if isTekkenName(path) {
		parse = ParseTekken
	}
	t, err := parse(data)
	if err != nil {
		// Asked only of a file that failed: a suite is YAML, which a
		// large tokenizer.json is too.
		if suites.IsSuite(path) {
			return nil, notATokenizer(path, "a suite")
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// notATokenizer says that the file at path is what (a kind of file, "an
// SQLite database"), not a tokenizer, naming its folder's tokenizer where
// it has one (the weights beside it, say).
func notATokenizer(path, what string) error {
	msg := fmt.Sprintf("%s: %s, not a tokenizer", path, what)
	if p := FileIn(filepath.Dir(path)); p != "" && p != path {
		msg += fmt.Sprintf(" (the tokenizer beside it is %s)", p)
	}
	return readfile.NotA(msg)
}

// isTekkenName says whether a file's name is a tekken.json's, by
// mistral-common's rule (is_tekken): it holds "tekken" and ends in .json.
func isTekkenName(path string) bool {
	name := filepath.Base(path)
	return strings.Contains(name, "tekken") && filepath.Ext(name) == ".json"
}

// isGGUF says whether the file at path starts with GGUF's magic.
func isGGUF(path string) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	var magic [4]byte
	n, _ := fh.Read(magic[:])
	return n == 4 && string(magic[:]) == "GGUF"
}

type fileJSON struct {
	Model struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Dropout                 *float64        `json:"dropout"`
	} `json:"model"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

// addedTokenJSON is one of added_tokens. HF reads each field as required
// (AddedTokenWithId and AddedToken take no serde defaults): one missing or
// null is refused, as HF refuses the file.
type addedTokenJSON struct {
	ID         *int    `json:"id"`
	Content    *string `json:"content"`
	SingleWord *bool   `json:"single_word"`
	LStrip     *bool   `json:"lstrip"`
	RStrip     *bool   `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    *bool   `json:"special"`
}

// addedTokenFields is one of added_tokens, every field given.
type addedTokenFields struct {
	ID                                              int
	Content                                         string
	SingleWord, LStrip, RStrip, Normalized, Special bool
}

// fields is the token's fields, or an error naming the first one missing,
// in the order HF's deserializer looks for them.
func (a addedTokenJSON) fields(i int) (addedTokenFields, error) {
	where := fmt.Sprintf("added_tokens[%d]", i)
	if a.Content != nil {
		where += " " + clip.Quote(*a.Content)
	}
	missing := func(name string) (addedTokenFields, error) {
		return addedTokenFields{}, fmt.Errorf("%s: %q is missing or null (HF tokenizers requires all of an added token's fields: id, content, single_word, lstrip, rstrip, normalized, special)", where, name)
	}
	var f addedTokenFields
	if a.ID == nil {
		return missing("id")
	}
	if a.Content == nil {
		return missing("content")
	}
	f.ID, f.Content = *a.ID, *a.Content
	for _, b := range []struct {
		name string
		v    *bool
		dst  *bool
	}{{"single_word", a.SingleWord, &f.SingleWord}, {"lstrip", a.LStrip, &f.LStrip}, {"rstrip", a.RStrip, &f.RStrip},
		{"normalized", a.Normalized, &f.Normalized}, {"special", a.Special, &f.Special}} {
		if b.v == nil {
			return missing(b.name)
		}
		*b.dst = *b.v
	}
	return f, nil
}

// MaxVocab bounds the ids a file may give, and a GGUF file's tokens (which
// the model reads for its end-of-generation tokens too): past
// it a hostile file could ask for tables of any size. The largest
// vocabularies published hold about 262,000 tokens.
const MaxVocab = 1 << 21

// maxMerges bounds a tokenizer.json's merges and a GGUF file's. Converted SentencePiece
// vocabularies list about two merges a token (Llama's 61,249 for 32,000).
const maxMerges = 4 * MaxVocab

// listLimit is a list or map of a tokenizer file, its entries and the
// most it may hold.
type listLimit struct {
	name    string
	n, most int
}

// checkLengths refuses a list or map longer than its bound before it is
// decoded: decoded, each entry costs dozens of times its bytes, so a file
// of a few hundred MB would take gigabytes before any entry was checked.
func checkLengths(lists ...listLimit) error {
	for _, l := range lists {
		if l.n > l.most {
			return fmt.Errorf("%s holds %d entries, more than the %d a tokenizer may hold", l.name, l.n, l.most)
		}
	}
	return nil
}

// encodeBudget bounds the time one Encode may take: a pattern quick on each
// match can still be quadratic in a long text.
var encodeBudget = 10 * time.Second

var (
	errBudget = errors.New("tokenizing ran past its time budget: the text is too long for the tokenizer's patterns")
	errGrowth = errors.New("the normalizers grow the text past 64 times its length")
)

// tokenizerDup is what HF tokenizers (serde_json) does with a key that the
// object at path gives twice: its serde-derived structs (an added token,
// truncation, padding, a post-processor and its special tokens' entries,
// and the model's type, read through an untagged enum) refuse the file;
// a template's special_tokens, a map, in a Sequence too, keeps the last;
// its hand-written visitors (the top level, the BPE model), its maps and
// the normalizers, pre-tokenizers and decoders keep the last value.
func tokenizerDup(path, key string) jsonerr.Dup {
	under := func(p string) bool {
		return path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")
	}
	switch {
	case path == "model" && key == "type",
		strings.HasPrefix(path, "added_tokens["),
		under("truncation"), under("padding"),
		under("post_processor") && !strings.HasSuffix(path, ".special_tokens"):
		return jsonerr.Refuse
	}
	return jsonerr.LastWins
}

// Parse reads a tokenizer.json's bytes, or a tekken.json's (ParseTekken):
// a file with a config and no model.
func Parse(data []byte) (*Tokenizer, error) {
	if err := jsonerr.UTF8(data); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	// The model's type first: another type's vocab has another shape.
	// The lists are counted in place, before anything copies them.
	if err := checkLengths(listLimit{"model.vocab", jsonlen.Most(data, "model", "vocab"), MaxVocab},
		listLimit{"model.merges", jsonlen.Most(data, "model", "merges"), maxMerges},
		listLimit{"added_tokens", jsonlen.Most(data, "added_tokens"), MaxVocab}); err != nil {
		return nil, err
	}
	var head struct {
		Model  json.RawMessage `json:"model"`
		Config json.RawMessage `json:"config"`
	}
	// Only the two parts are taken here, before the file is read as HF
	// reads it: a key of other case is refused below (checkTopLevel).
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", jsonerr.ExplainFile(err, data))
	}
	noModel := len(head.Model) == 0 || string(head.Model) == "null"
	if noModel && head.Config != nil {
		return ParseTekken(data)
	}
	if err := checkTopLevel(data); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	if noModel {
		// TokenizerBuilder::build refuses a tokenizer with no model.
		return nil, errors.New("not a tokenizer.json: it has no model (HF tokenizers requires one)")
	}
	typ, terr := modelType(head.Model)
	if terr != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", terr)
	}
	if typ != "BPE" {
		return nil, fmt.Errorf("model type %s is not supported (BPE)", clip.Quote(typ))
	}
	if err := cmp.Or(jsonerr.LoneSurrogate(data), jsonerr.Nesting(data, jsonerr.SerdeDepth)); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w (HF tokenizers refuses it)", err)
	}
	var f fileJSON
	text, err := jsonerr.Serde(data, tokenizerDup, &f)
	if err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w: HF tokenizers refuses a field given twice there", err)
	}
	if err := json.Unmarshal(text, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", jsonerr.ExplainFile(err, data))
	}
	m := f.Model
	for name, v := range map[string]*string{"continuing_subword_prefix": m.ContinuingSubwordPrefix, "end_of_word_suffix": m.EndOfWordSuffix} {
		if v != nil && *v != "" {
			return nil, fmt.Errorf("model.%s %s is not supported", name, clip.Quote(*v))
		}
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("model.dropout %g: a tokenizer that drops merges at random gives other ids each time", *m.Dropout)
	}
	t := &Tokenizer{vocab: map[string]int32{}, ranks: map[[2]string]int{}, unk: -1, special: map[int32]bool{},
		decodeAs: map[int32]string{}, specialText: map[string]bool{},
		byteFallback: m.ByteFallback, fuseUnk: m.FuseUnk, ignoreMerges: m.IgnoreMerges, kind: "BPE (tokenizer.json)"}
	maxID := -1
	put := func(piece string, id int, where string) error {
		if id < 0 || id >= MaxVocab {
			return fmt.Errorf("%s: token %s has id %d, outside 0..%d", where, clip.Quote(piece), id, MaxVocab-1)
		}
		t.vocab[piece] = int32(id)
		maxID = max(maxID, id)
		return nil
	}
	for piece, id := range m.Vocab {
		if err := put(piece, id, "model.vocab"); err != nil {
			return nil, err
		}
	}
	if err := uniqueIDs(m.Vocab); err != nil {
		return nil, err
	}
	// A text listed again keeps its id and its special mark, but is matched
	// as its last listing's normalized, single_word, lstrip and rstrip say:
	// HF's add_tokens puts each listing in its id's place, and builds its
	// matchers from what is there.
	var texts []addedToken // each text once, in the file's order
	normalized, everNormalized := map[string]bool{}, map[string]bool{}
	opts := map[string]addedOpts{}
	// HF gives an added token the id its text already has, else the next
	// after the vocab's count (not its largest id) and the tokens added
	// before it; the file's id is only checked against that.
	next := len(m.Vocab)
	for i, raw := range f.AddedTokens {
		a, err := raw.fields(i)
		if err != nil {
			return nil, err
		}
		if a.Content == "" {
			// HF's AddedVocabulary::add_tokens skips an empty token: it
			// takes no id, and the next token gets the id it would have.
			if a.ID < 0 || int64(a.ID) > math.MaxUint32 {
				return nil, fmt.Errorf("added_tokens[%d] (empty) has id %d, not a u32 as HF tokenizers reads it", i, a.ID)
			}
			continue
		}
		hf, known := t.vocab[a.Content]
		if !known {
			hf = int32(next)
			next++
			if t.addedOnly == nil {
				t.addedOnly = map[string]bool{}
			}
			t.addedOnly[a.Content] = true
		}
		if int(hf) != a.ID {
			why := "the text's id in model.vocab or an added token before it"
			if !known {
				why = fmt.Sprintf("the next after the vocab's %d tokens and the added tokens before it", len(m.Vocab))
			}
			return nil, fmt.Errorf("added_tokens[%d] %s has id %d, where HF tokenizers gives it %d (%s): the file's ids disagree", i, clip.Quote(a.Content), a.ID, hf, why)
		}
		if err := put(a.Content, a.ID, fmt.Sprintf("added_tokens[%d]", i)); err != nil {
			return nil, err
		}
		if _, again := normalized[a.Content]; !again {
			texts = append(texts, addedToken{content: a.Content, id: int32(a.ID)})
		}
		normalized[a.Content] = a.Normalized
		opts[a.Content] = addedOpts{singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		everNormalized[a.Content] = everNormalized[a.Content] || a.Normalized
		if a.Special {
			t.special[int32(a.ID)] = true
			t.specialText[a.Content] = true
		}
	}
	var added, normed []addedToken
	for _, a := range texts {
		a.addedOpts = opts[a.content]
		if normalized[a.content] {
			normed = append(normed, a)
		} else {
			added = append(added, a)
		}
	}
	t.addedIx = newAddedIndex(added)
	t.pieces, t.size = make(map[int32]string, len(t.vocab)), maxID+1
	for piece, id := range t.vocab {
		t.pieces[id] = piece
	}
	if m.UnkToken != nil {
		// HF's BPE model looks its unk_token up in model.vocab alone, and
		// fails on a text that needs it where only an added token has it.
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token %s is not in model.vocab (an added token of that text does not serve: HF's BPE model fails on a text that needs it)", clip.Quote(*m.UnkToken))
		}
		t.unk = int32(id)
	}
	if err := t.readMerges(m.Merges, m.Vocab); err != nil {
		return nil, err
	}
	if t.normalize, err = readNormalizers(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	// What the normalizers make of the added tokens' texts is kept, each
	// may grow 64 times: all together they are held to addedBudget.
	left := addedBudget
	norm := func(s string) (string, error) {
		limit := min(64*len(s)+1<<16, left)
		n, err := t.normalizedWithin(s, limit)
		if errors.Is(err, errGrowth) && limit == left {
			return "", fmt.Errorf("the normalizers make the added tokens' texts more than %d MiB together", addedBudget>>20)
		}
		left -= len(n)
		return n, err
	}
	// A normalized added token is found by what the normalizers make of
	// its text, as HF finds it: Llama's Prepend makes "<x>" "▁<x>".
	// One the normalizers make empty is never found, as HF's matcher finds
	// no empty match; its id still decodes, as that empty text.
	found := normed[:0]
	for _, a := range normed {
		if a.content, err = norm(a.content); err != nil {
			return nil, fmt.Errorf("added token %s: %w", clip.Quote(t.pieces[a.id]), err)
		}
		if a.content != "" {
			found = append(found, a)
		}
	}
	t.addedNorm = newAddedIndex(found)
	// HF keeps the normalized text of a token added as normalized, by its
	// id, and decodes the id as that text (AddedVocabulary's
	// normalized_cache, simple_id_to_token), even once listed otherwise.
	for _, a := range texts {
		if !everNormalized[a.content] {
			continue
		}
		n, err := norm(a.content)
		if err != nil {
			return nil, fmt.Errorf("added token %s: %w", clip.Quote(a.content), err)
		}
		if n != a.content {
			t.decodeAs[a.id] = n
		}
	}
	if t.preTok, err = readPreTokenizers(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if t.prefix, t.suffix, err = t.readPostProcessor(f.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if t.decode, err = readDecoders(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	return t, nil
}

// modelType is the kind of model a tokenizer.json's model is, as HF
// tokenizers' ModelWrapper reads it (tokenizers/src/models/mod.rs): its
// "type" where it has one, else, as files written before the tag were, the
// first of BPE, WordPiece, WordLevel and Unigram whose deserializer takes
// it. BPE's takes an object holding a vocab and merges and fails without
// either (models/bpe/serialization.rs), so such an object is BPE; one
// without is another kind, none of which is read here.
func modelType(raw json.RawMessage) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", jsonerr.ExplainAt(err, raw, "model")
	}
	if t, ok := m["type"]; ok {
		var typ string
		if err := json.Unmarshal(t, &typ); err != nil {
			return "", jsonerr.ExplainAt(err, t, "model.type")
		}
		return typ, nil
	}
	has := func(k string) bool { v, ok := m[k]; return ok && string(v) != "null" }
	if has("vocab") && has("merges") {
		return "BPE", nil
	}
	return "", errors.New(`model has no "type" and no vocab and merges: HF tokenizers reads an untagged model as the first of BPE (a vocab and merges), WordPiece, WordLevel and Unigram that fits it, and only BPE is supported`)
}

// uniqueIDs refuses a vocab giving two pieces one id: which of them the id
// decodes to would be a map's order, in HF as here.
func uniqueIDs(vocab map[string]int) error {
	byID := make(map[int][]string, len(vocab))
	clash := -1
	for piece, id := range vocab {
		byID[id] = append(byID[id], piece)
		if len(byID[id]) > 1 && (clash < 0 || id < clash) {
			clash = id
		}
	}
	if clash < 0 {
		return nil
	}
	ps := byID[clash]
	slices.Sort(ps) // the same error each time
	return fmt.Errorf("model.vocab: %s and %s both have id %d", clip.Quote(ps[0]), clip.Quote(ps[1]), clash)
}

// readMerges reads the merges in either spelling HF writes: "a b" strings
// (older files) or [a, b] pairs. As in HF's BPE, both pieces and the one
// they join into must be in the model's vocabulary: a merge into a piece
// it lacks would give <unk> or nothing where HF refuses the file.
func (t *Tokenizer) readMerges(raw json.RawMessage, vocab map[string]int) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return jsonerr.ExplainAt(err, raw, "model.merges")
	}
	for i, it := range items {
		var pair [2]string
		var s string
		var arr []string
		switch {
		case json.Unmarshal(it, &s) == nil:
			// HF's convert_merges_to_hashmap (tokenizers/src/models/bpe/
			// model.rs) skips a "#version" line, as merges.txt starts with
			// one, and splits the others at every space into two pieces.
			if strings.HasPrefix(s, "#version") {
				continue
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return fmt.Errorf("model.merges[%d] %s: want two pieces separated by one space", i, clip.Quote(s))
			}
			pair = [2]string{parts[0], parts[1]}
		case json.Unmarshal(it, &arr) == nil && len(arr) == 2:
			pair = [2]string{arr[0], arr[1]}
		default:
			return fmt.Errorf("model.merges[%d]: want \"a b\" or [a, b], got %s", i, it)
		}
		for _, p := range []string{pair[0], pair[1], pair[0] + pair[1]} {
			if _, ok := vocab[p]; !ok {
				return fmt.Errorf("model.merges[%d] %s: %s is not in model.vocab", i, clip.Quote(pair[0]+" "+pair[1]), clip.Quote(p))
			}
		}
		// HF collects the merges into a map: a pair listed twice keeps its
		// later rank.
		t.ranks[pair] = i
	}
	return nil
}

// notUTF8 says where text's first byte that begins no UTF-8 character is,
// as a file's decoding error does (internal/jsonerr.UTF8): a long prompt
// said only that it was not UTF-8 somewhere.
func notUTF8(text string) error {
	off, chars := 0, 0
	for off < len(text) {
		r, n := utf8.DecodeRuneInString(text[off:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		off += n
		chars++
	}
	return fmt.Errorf("the text is not valid UTF-8: byte %#02x at byte offset %d (character %d) begins no UTF-8 character", text[off], off, chars+1)
}

// VocabSize is one past the largest id the tokenizer gives.
func (t *Tokenizer) VocabSize() int { return t.size }

// Encode turns text into ids, with the post-processor's special tokens
// (Llama's <s>) around them when special is set, as HF's encode does by
// default.
func (t *Tokenizer) Encode(text string, special bool) ([]int32, error) {
	if !utf8.ValidString(text) {
		return nil, notUTF8(text)
	}
	at := pass{first: true, deadline: time.Now().Add(encodeBudget)}
	var ids []int32
	if special {
		ids = append(ids, t.prefix...)
	}
	// Added tokens as written are found in the raw text, normalized ones
	// in the normalized text of what is left (HF's AddedVocabulary).
	var raw []segment
	var err error
	if t.partition != nil {
		raw, err = t.partition.split(text, at.deadline)
	} else {
		raw, err = splitAdded(t.addedIx, text, at.deadline)
	}
	if err != nil {
		return nil, err
	}
	var segs []segment
	for _, seg := range raw {
		if seg.added >= 0 {
			segs = append(segs, seg)
			continue
		}
		s, err := t.normalized(seg.text)
		if err != nil {
			return nil, err
		}
		parts, err := splitAdded(t.addedNorm, s, at.deadline)
		if err != nil {
			return nil, err
		}
		segs = append(segs, parts...)
	}
	for _, seg := range segs {
		if seg.added >= 0 {
			ids = append(ids, seg.added)
			at.first = false
			continue
		}
		pieces := []string{seg.text}
		for _, p := range t.preTok {
			if pieces, err = p.split(pieces, at); err != nil {
				return nil, err
			}
		}
		at.first = false
		for _, p := range pieces {
			if ids, err = t.bpe(ids, p); err != nil {
				return nil, err
			}
		}
		if time.Now().After(at.deadline) {
			return nil, errBudget
		}
	}
	if special {
		ids = append(ids, t.suffix...)
	}
	return ids, nil
}

// normalized is s after the normalizers, or an error where they would grow
// it without bound.
func (t *Tokenizer) normalized(s string) (string, error) {
	return t.normalizedWithin(s, 64*len(s)+1<<16)
}

// addedBudget bounds the bytes the normalizers make of a file's added
// tokens, all together: tokens are short, and a text may grow 64 times
// (one of 40 MB would take 2.5 GB).
const addedBudget = 64 << 20

// normalizedWithin is normalized growing s to at most limit bytes.
func (t *Tokenizer) normalizedWithin(s string, limit int) (string, error) {
	var err error
	for i, n := range t.normalize {
		if s, err = n.apply(s, limit); err != nil {
			return "", fmt.Errorf("normalizer %d: %w", i, err)
		}
		if len(s) > limit {
			return "", fmt.Errorf("normalizer %d: %w", i, errGrowth)
		}
	}
	return s, nil
}

type segment struct {
	text  string
	added int32 // -1: text to tokenize
}

// addedIndex finds added tokens in text: by their first byte, then by
// each length such tokens have, longest first, so a position costs a few
// map lookups however many added tokens there are.
type addedIndex map[byte]*addedBucket

type addedBucket struct {
	lens []int // distinct lengths, longest first
	toks map[string]addedToken
}

func newAddedIndex(added []addedToken) addedIndex {
	ix := addedIndex{}
	for _, a := range added {
		b := ix[a.content[0]]
		if b == nil {
			b = &addedBucket{toks: map[string]addedToken{}}
			ix[a.content[0]] = b
		}
		if _, dup := b.toks[a.content]; dup {
			continue // the first listed keeps the text, as before
		}
		b.toks[a.content] = a
		if !slices.Contains(b.lens, len(a.content)) {
			b.lens = append(b.lens, len(a.content))
		}
	}
	for _, b := range ix {
		slices.SortFunc(b.lens, func(x, y int) int { return y - x })
	}
	return ix
}

// longest is the longest added token at the start of s.
func (ix addedIndex) longest(s string) (addedToken, bool) {
	b := ix[s[0]]
	if b == nil {
		return addedToken{}, false
	}
	for _, n := range b.lens {
		if n <= len(s) {
			if a, ok := b.toks[s[:n]]; ok {
				return a, true
			}
		}
	}
	return addedToken{}, false
}

// splitAdded cuts text at the added tokens of ix, which are their own ids
// whatever surrounds them, as HF's AddedVocabulary::find_matches cuts it
// (tokenizers/src/tokenizer/added_vocabulary.rs):
//
//   - the matches are its trie's leftmost-longest ones, without overlap:
//     the search goes on after each as found, whatever is made of it, so a
//     match single_word drops still hides the tokens inside it, and one
//     rstrip widens leaves the whitespace it took to be searched again;
//   - a single_word token is dropped where a word character (Rust regex's
//     Unicode \w, wordChar) comes right before or after it;
//   - lstrip takes in the whitespace (\s, Unicode White_Space) that runs up
//     to the match, but none before the end of the match before it (Rust's
//     start_offset); rstrip the whitespace after it. A match that lstrip so
//     makes empty (whitespace the match before took with rstrip) is left
//     out, as HF leaves out a split of no text; one it would make end
//     before it starts is an error, where HF panics;
//   - the text from the end of the match before (start_offset, which a
//     later match found inside a widened one moves back) up to the match's
//     start is text to tokenize, and so is the text after the last.
func splitAdded(ix addedIndex, text string, deadline time.Time) ([]segment, error) {
	var out []segment
	done := 0 // Rust's start_offset: where the last match taken ended
	for i, steps := 0, 0; i < len(text); steps++ {
		if steps&4095 == 4095 && time.Now().After(deadline) {
			return nil, errBudget
		}
		a, ok := ix.longest(text[i:])
		if !ok {
			_, n := utf8.DecodeRuneInString(text[i:])
			i += n
			continue
		}
		start, stop := i, i+len(a.content)
		i = stop // the search goes on after the match as found
		if a.singleWord {
			before, _ := utf8.DecodeLastRuneInString(text[:start])
			after, _ := utf8.DecodeRuneInString(text[stop:])
			if start > 0 && wordChar(before) || stop < len(text) && wordChar(after) {
				continue
			}
		}
		if a.lstrip {
			start = max(len(strings.TrimRightFunc(text[:start], spaceChar)), done)
		}
		if a.rstrip {
			stop = len(text) - len(strings.TrimLeftFunc(text[stop:], spaceChar))
		}
		if start > stop {
			// Rust's slice of the text from start to stop fails, and
			// split_with_indices panics: "AddedVocabulary bad split".
			return nil, fmt.Errorf("added token %s with lstrip lies inside the whitespace that the token before it took with rstrip: HF tokenizers fails on this text (AddedVocabulary bad split)", clip.Quote(a.content))
		}
		if done < start {
			out = append(out, segment{text[done:start], -1})
		}
		if start < stop {
			// A match lstrip made empty is a split of no text, which
			// PreTokenizedString::split leaves out, its token with it.
			out = append(out, segment{added: a.id})
		}
		done = stop
	}
	if done < len(text) {
		out = append(out, segment{text[done:], -1})
	}
	return out, nil
}

// spaceChar is Rust regex's Unicode \s, the whitespace HF's lstrip and
// rstrip take: the White_Space property (tabs, newlines, U+00A0, U+2000,
// U+3000, ...).
func spaceChar(r rune) bool { return unicode.Is(unicode.White_Space, r) }

// wordChar is Rust regex's Unicode \w, which HF's single_word tests
// either side of a match with: Alphabetic (letters, letter numbers such as
// Ⅻ, Other_Alphabetic), marks, decimal digits, connector punctuation (_)
// and Join_Control (U+200C, U+200D), as UTS #18 Annex C defines it.
func wordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.In(r, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

// bpe appends the ids of one pre-tokenized piece: its characters merged by
// rank, lowest first and leftmost among equals, as HF's BPE merges them.
// A heap of candidate pairs keeps it O(n log n): without a pre-tokenizer
// (Llama's files) a whole prompt is one piece.
func (t *Tokenizer) bpe(ids []int32, piece string) ([]int32, error) {
	if t.ignoreMerges {
		if id, ok := t.modelID(piece); ok {
			return append(ids, id), nil
		}
	}
	unkRun := false
	for _, s := range t.merge(piece) {
		if id, ok := t.modelID(s); ok {
			ids, unkRun = append(ids, id), false
			continue
		}
		if t.llamaBytes {
			var err error
			if ids, err = t.llamaByteIDs(ids, s); err != nil {
				return nil, err
			}
			continue
		}
		if t.byteFallback {
			if bs, ok := t.byteIDs(s); ok {
				ids, unkRun = append(ids, bs...), false
				continue
			}
		}
		if t.unk >= 0 && !(t.fuseUnk && unkRun) {
			ids = append(ids, t.unk)
		}
		unkRun = t.unk >= 0
	}
	return ids, nil
}

// modelID is the id the BPE model gives piece: its model.vocab id, never
// an added token's (addedOnly).
func (t *Tokenizer) modelID(piece string) (int32, bool) {
	if t.addedOnly[piece] {
		return 0, false
	}
	id, ok := t.vocab[piece]
	return id, ok
}

// merge is a piece's symbols after every merge the ranks allow.
func (t *Tokenizer) merge(piece string) []string {
	type sym struct {
		s          string
		prev, next int
		dead       bool
	}
	var syms []sym
	for _, r := range piece {
		syms = append(syms, sym{s: string(r), prev: len(syms) - 1, next: len(syms) + 1})
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	h := &pairHeap{}
	push := func(i int) {
		if j := syms[i].next; j >= 0 {
			if r, ok := t.rank(syms[i].s, syms[j].s); ok {
				heap.Push(h, pair{rank: r, pos: i, left: syms[i].s, right: syms[j].s})
			}
		}
	}
	for i := range syms {
		push(i)
	}
	for h.Len() > 0 {
		m := heap.Pop(h).(pair)
		i := m.pos
		j := syms[i].next
		// A pair whose symbols have merged since is stale.
		if syms[i].dead || j < 0 || syms[i].s != m.left || syms[j].s != m.right {
			continue
		}
		syms[i].s += syms[j].s
		syms[j].dead = true
		syms[i].next = syms[j].next
		if n := syms[j].next; n >= 0 {
			syms[n].prev = i
		}
		if p := syms[i].prev; p >= 0 {
			push(p)
		}
		push(i)
	}
	var merged []string
	for i := 0; len(syms) > 0 && i >= 0; i = syms[i].next {
		merged = append(merged, syms[i].s)
	}
	return merged
}

// rank is the merge rank of the pair a, b, lower first.
func (t *Tokenizer) rank(a, b string) (int, bool) {
	if t.pieceRanks != nil {
		r, ok := t.pieceRanks[a+b]
		return r, ok
	}
	r, ok := t.ranks[[2]string{a, b}]
	return r, ok
}

// pair is a candidate merge of the symbols at pos and after it.
type pair struct {
	rank, pos   int
	left, right string
}

// pairHeap orders candidate merges by rank, then position.
type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	return h[i].rank < h[j].rank || h[i].rank == h[j].rank && h[i].pos < h[j].pos
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// llamaByteIDs appends the ids llama.cpp's SentencePiece tokenizer spells
// a piece the vocabulary lacks in: each byte's <0xXX> token, else the token
// that is that byte alone. It never gives <unk>; a byte with neither is an
// error, where llama.cpp fails (its byte_to_token throws).
func (t *Tokenizer) llamaByteIDs(ids []int32, s string) ([]int32, error) {
	for i := 0; i < len(s); i++ {
		id, ok := t.vocab[fmt.Sprintf("<0x%02X>", s[i])]
		if !ok {
			id, ok = t.vocab[s[i:i+1]]
		}
		if !ok {
			// The text's spaces are SentencePiece's ▁ here, whose bytes
			// the message would otherwise name without a word of it.
			space := ""
			if strings.Contains(s, "▁") {
				space = " (its spaces as SentencePiece's ▁, U+2581, bytes E2 96 81)"
			}
			return nil, fmt.Errorf("the text holds %s%s, which the vocabulary has no token for, nor <0x%02X> or the byte alone for its byte 0x%02X: llama.cpp fails on it", clip.Quote(strings.ReplaceAll(s, "▁", " ")), space, s[i], s[i])
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// byteIDs spells s as its bytes' <0xXX> tokens, if the vocabulary has all.
func (t *Tokenizer) byteIDs(s string) ([]int32, bool) {
	out := make([]int32, 0, len(s))
	for i := 0; i < len(s); i++ {
		id, ok := t.modelID(fmt.Sprintf("<0x%02X>", s[i]))
		if !ok {
			return nil, false
		}
		out = append(out, id)
	}
	return out, true
}

// Decode turns ids back into text; skipSpecial leaves out the special
// tokens (<s>, <|endoftext|>), as HF's decode(skip_special_tokens=True).
// An id the vocabulary lacks is left out, as HF leaves it: a model's
// embedding table is often padded past its tokenizer's last id.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	if t.tekken {
		return t.decodeTekken(ids, skipSpecial), nil
	}
	var toks []string
	for _, id := range ids {
		piece, ok := t.pieces[id]
		if !ok {
			continue
		}
		special := t.special[id]
		if s, ok := t.decodeAs[id]; ok {
			piece, special = s, t.specialText[s]
		}
		if skipSpecial && special {
			continue
		}
		toks = append(toks, piece)
	}
	for _, d := range t.decode {
		toks = d.apply(toks)
	}
	return strings.Join(toks, ""), nil
}

// topLevelKeys are the keys HF tokenizers' TokenizerImpl deserializer
// reads (tokenizer/serialization.rs), matched as spelled.
var topLevelKeys = []string{"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "model", "post_processor", "decoder"}

// checkTopLevel refuses what HF refuses at a tokenizer.json's top level: a
// key it does not read (its deserializer then fails on the value, and
// encoding/json would match "Model" to model), a version other than the
// string "1.0", and added_tokens of null (a Vec, not an Option).
func checkTopLevel(data []byte) (err error) {
	jsonlen.Each(data, func(key string, v []byte) {
		if err != nil {
			return
		}
		null := string(bytes.TrimSpace(v)) == "null"
		switch {
		case !slices.Contains(topLevelKeys, key):
			err = fmt.Errorf("key %s is none of HF tokenizers' (%s)", clip.Quote(key), strings.Join(topLevelKeys, ", "))
		case key == "version" && null:
			err = errors.New("version is null, want a string")
		case key == "version":
			var s string
			if e := json.Unmarshal(v, &s); e != nil {
				err = jsonerr.ExplainAt(e, v, "version")
			} else if s != "1.0" {
				err = fmt.Errorf("version %s: HF tokenizers reads \"1.0\" only", clip.Quote(s))
			}
		case key == "added_tokens" && null:
			err = errors.New("added_tokens is null, want a list")
		}
	})
	return err
}

// Names reports whether the tokenizer has text for id. Decode leaves out
// an id it has none for, as HF does; a model's embedding table padded past
// the tokenizer's last id (Qwen2's, Qwen3's) can give one.
func (t *Tokenizer) Names(id int32) bool {
	if t.tekken && id >= 0 && int(id) < len(t.tekkenSpecials) {
		return true
	}
	_, ok := t.pieces[id]
	return ok
}

// DecodeShowing decodes as Decode does, but shows each id the tokenizer has
// no text for as placeholder(id) where it falls, instead of dropping it
// unseen; the runs of ids between are decoded each on its own. It returns
// the ids so shown, each once, in order.
func (t *Tokenizer) DecodeShowing(ids []int32, skipSpecial bool, placeholder func(int32) string) (string, []int32, error) {
	var sb strings.Builder
	var unnamed []int32
	start := 0
	flush := func(end int) error {
		if end > start {
			s, err := t.Decode(ids[start:end], skipSpecial)
			if err != nil {
				return err
			}
			sb.WriteString(s)
		}
		return nil
	}
	for i, id := range ids {
		if t.Names(id) {
			continue
		}
		if err := flush(i); err != nil {
			return "", nil, err
		}
		sb.WriteString(placeholder(id))
		if !slices.Contains(unnamed, id) {
			unnamed = append(unnamed, id)
		}
		start = i + 1
	}
	if err := flush(len(ids)); err != nil {
		return "", nil, err
	}
	return sb.String(), unnamed, nil
}
