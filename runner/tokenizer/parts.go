package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"golang.org/x/text/unicode/norm"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
)

// part is the "type" of a normalizer, pre-tokenizer, post-processor or
// decoder object, with the object for its own fields.
type part struct {
	Type string `json:"type"`
	raw  json.RawMessage
	path string // where in its section: "" for the section's one object, "normalizers[1]" in a Sequence
	// untagged: Type is the kind HF reads the object as by its fields,
	// as it had no "type" HF knows (untaggedNormalizer).
	untagged bool
}

// decode reads the part's own fields into v; a wrong JSON type is named by
// its key, as the rest of the file's errors are (internal/jsonerr). The
// reader of the section puts the part's path before every error of it
// (partErr).
//
// A field of v tagged required:"true", at any depth, must be in the object
// and not null: HF's serde definitions give those no default, and HF
// refuses a file lacking one where Go would read a zero value.
func (p part) decode(v any) error {
	if err := jsonerr.Unmarshal(p.raw, v); err != nil {
		return explain(err, p.raw, "")
	}
	if at, name := missingField(reflect.TypeOf(v), p.raw); name != "" {
		if at != "" {
			return fmt.Errorf("%s has no %q at %s: HF tokenizers requires it", p.Type, name, at)
		}
		return fmt.Errorf("%s has no %q: HF tokenizers requires it", p.Type, name)
	}
	return nil
}

// missingField is the first field tagged required that raw, read as t,
// lacks or holds null: its name, and the path of the object that lacks it
// (single[1].Sequence, "" for raw itself); name is "" if none is missing.
func missingField(t reflect.Type, raw json.RawMessage) (at, name string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var keys map[string]json.RawMessage
		if json.Unmarshal(raw, &keys) != nil {
			return "", ""
		}
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || key == "" || key == "-" {
				continue
			}
			v, ok := keys[key]
			if !ok || string(v) == "null" {
				if f.Tag.Get("required") == "true" {
					return "", key
				}
				continue
			}
			if at, name := missingField(f.Type, v); name != "" {
				if at != "" && at[0] != '[' {
					at = "." + at
				}
				return key + at, name
			}
		}
	case reflect.Slice, reflect.Array, reflect.Map:
		if !holdsStruct(t.Elem()) {
			return "", ""
		}
		var items map[string]json.RawMessage
		var list []json.RawMessage
		if t.Kind() == reflect.Map {
			if json.Unmarshal(raw, &items) != nil {
				return "", ""
			}
		} else if json.Unmarshal(raw, &list) != nil {
			return "", ""
		}
		for i, it := range list {
			if at, name := missingField(t.Elem(), it); name != "" {
				return fmt.Sprintf("[%d]", i) + dotted(at), name
			}
		}
		for _, k := range slices.Sorted(maps.Keys(items)) {
			if at, name := missingField(t.Elem(), items[k]); name != "" {
				return fmt.Sprintf("[%q]", k) + dotted(at), name
			}
		}
	}
	return "", ""
}

// dotted puts a dot before a path that goes on with a field's name.
func dotted(at string) string {
	if at == "" || at[0] == '[' {
		return at
	}
	return "." + at
}

// holdsStruct reports whether values of t can hold a struct, whose
// required fields missingField checks.
func holdsStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		return true
	case reflect.Slice, reflect.Array, reflect.Map:
		return holdsStruct(t.Elem())
	}
	return false
}

// explain words a JSON error at path inside a section; the part's own
// value (path "") is "it", not the file.
func explain(err error, raw json.RawMessage, path string) error {
	var te *json.UnmarshalTypeError
	if path == "" && errors.As(err, &te) && te.Field == "" {
		return fmt.Errorf("it is a JSON %s, want an object", te.Value)
	}
	return jsonerr.ExplainAt(err, raw, path)
}

// partErr puts a Sequence member's place before an error of it
// (pretokenizers[1]: ...); the section's one object needs none.
func partErr(p part, err error) error {
	if err != nil && p.path != "" {
		return fmt.Errorf("%s: %w", p.path, err)
	}
	return err
}

// maxNesting bounds Sequences in Sequences: the files HF writes nest one
// or two deep, and each level is read again by the one above.
const maxNesting = 16

// readParts reads raw (null, one object, or a Sequence of them under key)
// as the list of its members in order.
func readParts(raw json.RawMessage, key string) ([]part, error) {
	return readPartsAt(raw, key, "", 0, nil)
}

// readPartsAt is readParts of the part at path; untagged, where set, names
// the kind of a part as HF reads one without a "type" it knows.
func readPartsAt(raw json.RawMessage, key, path string, depth int, untagged func(part) string) ([]part, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("Sequence nested deeper than %d", maxNesting)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	p := part{raw: raw, path: path}
	if err := p.decode(&p); err != nil {
		return nil, partErr(p, err)
	}
	if untagged != nil {
		if t := untagged(p); t != "" {
			p.Type, p.untagged = t, true
		}
	}
	if p.Type != "Sequence" {
		return []part{p}, nil
	}
	var seq map[string]json.RawMessage
	var members []json.RawMessage
	if err := p.decode(&seq); err != nil {
		return nil, partErr(p, err)
	}
	at := key
	if path != "" {
		at = path + "." + key
	}
	// HF reads the list as a Vec, not an Option: null is refused as
	// missing is, not read as an empty Sequence.
	if seq[key] == nil || string(bytes.TrimSpace(seq[key])) == "null" {
		return nil, fmt.Errorf("a Sequence without %s (missing or null; HF tokenizers requires a list)", at)
	}
	if err := json.Unmarshal(seq[key], &members); err != nil {
		return nil, explain(err, seq[key], at)
	}
	var out []part
	for i, r := range members {
		ps, err := readPartsAt(r, key, fmt.Sprintf("%s[%d]", at, i), depth+1, untagged)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// pattern is a Replace's or Split's {"String": s} or {"Regex": r}.
type pattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// matchTimeout bounds one regex match: tokenizer patterns are linear, so a
// match that runs this long is a hostile pattern, refused, not a hang.
var matchTimeout = 2 * time.Second

// linearForms are regexes tokenizer files hold that regexp2's backtracking
// takes quadratic time on, each with a form that finds the same matches in
// linear time (TestLinearForms fuzzes each against its original).
var linearForms = map[string]string{
	// DeepSeek LLM's \s+$, tried at each space of a run that does not end
	// the text, scans the rest of the run: n²/2 steps. Any match of it runs
	// to the text's end (\n being \s too), so its one match starts where
	// the last run of whitespace does, where no \s comes before: the
	// lookbehind keeps that match and fails at once inside a run.
	`\s+$`: `(?<!\s)\s+$`,
}

// maxRegex bounds a pattern's regex: compiled, a regex takes about fifty
// times its bytes, and tokenizers' patterns are a few hundred bytes.
const maxRegex = 1 << 16

func (p pattern) compile() (*regexp2.Regexp, string, error) {
	switch {
	case p.String != nil && p.Regex != nil:
		// HF's pattern is an enum: a map of exactly one of them.
		return nil, "", fmt.Errorf("pattern names both String and Regex: want one")
	case p.String != nil:
		return nil, *p.String, nil
	case p.Regex != nil:
		if len(*p.Regex) > maxRegex {
			return nil, "", fmt.Errorf("regex %s is %d bytes, more than the %d a tokenizer's pattern may take", clip.Quote(*p.Regex), len(*p.Regex), maxRegex)
		}
		src := *p.Regex
		if l, ok := linearForms[src]; ok {
			src = l
		}
		re, err := regexp2.Compile(src, regexp2.None)
		if err != nil {
			return nil, "", fmt.Errorf("regex %s: %v", clip.Quote(*p.Regex), err)
		}
		re.MatchTimeout = matchTimeout
		return re, "", nil
	}
	return nil, "", fmt.Errorf("pattern names neither String nor Regex")
}

// compileSplit is a Split's pattern as HF compiles it: a String is the
// regex matching it literally (an empty one matches at every character).
func (p pattern) compileSplit() (*regexp2.Regexp, error) {
	re, lit, err := p.compile()
	if err != nil || re != nil {
		return re, err
	}
	re, err = regexp2.Compile(regexp2.Escape(lit), regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("pattern %s: %v", clip.Quote(lit), err)
	}
	re.MatchTimeout = matchTimeout
	return re, nil
}

// stretch is a part of a text and whether the pattern matched it.
type stretch struct {
	lo, hi int // byte offsets
	match  bool
}

// matchSegments cuts s as HF's Pattern::find_matches cuts it: the matches
// and the stretches between them, in order, covering s. An empty match is
// kept, as Oniguruma's find_iter gives it (one right where the last match
// ended is skipped), since it still cuts the text around it. Past deadline
// it stops with an error: a pattern that is quick on each match can still
// be quadratic in the text.
func matchSegments(re *regexp2.Regexp, s string, deadline time.Time) ([]stretch, error) {
	if s == "" {
		return nil, nil
	}
	runes := []rune(s)
	// Rune index to byte offset.
	at := make([]int, len(runes)+1)
	for i, r := range runes {
		at[i+1] = at[i] + utf8.RuneLen(r)
	}
	var out []stretch
	prev, lastEnd := 0, -1
	m, err := re.FindRunesMatch(runes)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		lo, hi := m.Index, m.Index+m.Length
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("regex %q: %w", re.String(), errBudget)
		}
		if lo == hi && hi == lastEnd {
			continue
		}
		if at[lo] > prev {
			out = append(out, stretch{prev, at[lo], false})
		}
		out = append(out, stretch{at[lo], at[hi], true})
		prev, lastEnd = at[hi], hi
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "match timeout") {
			// regexp2's error quotes the whole text, which can be
			// megabytes: the text's length says enough.
			return nil, fmt.Errorf("regex %q: one match ran past %v in a piece of %d characters", re.String(), re.MatchTimeout, len(runes))
		}
		return nil, fmt.Errorf("regex %q: %v", re.String(), err)
	}
	if prev < len(s) {
		out = append(out, stretch{prev, len(s), false})
	}
	return out, nil
}

// replace is a Replace normalizer's or decoder's literal substitution, the
// one form both take here.
type replace struct{ from, to string }

func (r replace) apply(s string) string { return strings.ReplaceAll(s, r.from, r.to) }

func readReplace(p part) (replace, error) {
	var v struct {
		Pattern pattern `json:"pattern" required:"true"`
		Content string  `json:"content" required:"true"`
	}
	if err := p.decode(&v); err != nil {
		return replace{}, err
	}
	re, lit, err := v.Pattern.compile()
	if err != nil {
		return replace{}, err
	}
	if re != nil {
		return replace{}, fmt.Errorf("Replace by a regex is not supported")
	}
	if lit == "" {
		return replace{}, fmt.Errorf("Replace of an empty pattern is not supported")
	}
	return replace{lit, v.Content}, nil
}

// grown is what r makes of s, or an error when that is past limit bytes,
// found before the text is built.
func (r replace) grown(s string, limit int) (string, error) {
	if d := len(r.to) - len(r.from); d > 0 {
		if n := len(s) + strings.Count(s, r.from)*d; n > limit {
			return "", fmt.Errorf("Replace %s with %s: %w", clip.Quote(r.from), clip.Quote(r.to), errGrowth)
		}
	}
	return r.apply(s), nil
}

// rawShort is a JSON value's text for an error, cut to its first bytes
// where it is long.
func rawShort(raw json.RawMessage) string {
	const most = 40
	if len(raw) <= most {
		return string(raw)
	}
	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(string(raw[:most-3]), ""), len(raw))
}

// normalizer rewrites a stretch of text; limit is the most bytes it may
// grow it to.
type normalizer interface {
	apply(s string, limit int) (string, error)
}

// normFunc is a normalizer of bounded growth (Unicode normalization forms
// expand a character at most 18 times; lowercasing, Prepend a little).
type normFunc func(string) string

func (f normFunc) apply(s string, _ int) (string, error) { return f(s), nil }

// lowercase is Rust's char::to_lowercase over s (HF's Lowercase): Go's
// unicode.ToLower but for İ, the one character whose lowercase is two.
func lowercase(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "\u0130", "i\u0307"))
}

type replaceNorm struct{ replace }

func (r replaceNorm) apply(s string, limit int) (string, error) { return r.grown(s, limit) }

func readNormalizers(raw json.RawMessage) (out []normalizer, err error) {
	parts, err := readPartsAt(raw, "normalizers", "", 0, untaggedNormalizer)
	if err != nil {
		return nil, err
	}
	var cur part // the part being read, named in its errors
	defer func() { err = partErr(cur, err) }()
	for _, p := range parts {
		cur = p
		switch p.Type {
		case "NFC":
			out = append(out, normFunc(normForm(norm.NFC)))
		case "NFD":
			out = append(out, normFunc(normForm(norm.NFD)))
		case "NFKC":
			out = append(out, normFunc(normForm(norm.NFKC)))
		case "NFKD":
			out = append(out, normFunc(normForm(norm.NFKD)))
		case "Lowercase":
			out = append(out, normFunc(lowercase))
		case "Prepend":
			var v struct {
				Prepend string `json:"prepend" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			out = append(out, normFunc(func(s string) string {
				if s == "" {
					return s
				}
				return v.Prepend + s
			}))
		case "Replace":
			r, err := readReplace(p)
			if err != nil {
				return nil, err
			}
			out = append(out, replaceNorm{r})
		default:
			const supported = "(NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Sequence)"
			switch {
			case p.untagged:
				return nil, fmt.Errorf("it has no \"type\" HF tokenizers knows, and HF reads it by its fields as a %s, which is not supported %s", p.Type, supported)
			case p.Type == "":
				return nil, fmt.Errorf("it has no \"type\", and its fields are none of the normalizers HF tokenizers reads without one (BertNormalizer, Strip, Sequence, Precompiled, Replace, Prepend)")
			}
			return nil, fmt.Errorf("%s is not supported %s", clip.Quote(p.Type), supported)
		}
	}
	return out, nil
}

// normalizerTags are the "type" names HF's NormalizerWrapper reads as tags
// (its EnumType, tokenizers/src/normalizers/mod.rs): BertNormalizer's is
// "Bert", though HF writes "BertNormalizer".
var normalizerTags = map[string]bool{"Bert": true, "Strip": true, "StripAccents": true, "NFC": true, "NFD": true, "NFKC": true,
	"NFKD": true, "Sequence": true, "Lowercase": true, "Nmt": true, "Precompiled": true, "Replace": true, "Prepend": true, "ByteLevel": true}

// untaggedNormalizer is the kind HF's NormalizerWrapper reads a normalizer
// as whose "type" is missing or none of its tags, "" where it reads none:
// the first of its untagged fallback's kinds whose deserializer takes the
// object. Those are BertNormalizer (clean_text, handle_chinese_chars and
// lowercase, strip_accents a bool or left out), Strip (strip_left and
// strip_right), Sequence (a list of normalizers), Precompiled
// (precompiled_charsmap), Replace (a pattern and content) and Prepend
// (prepend); the others' deserializers require their "type". Fields of
// another kind are ignored, as serde ignores them. A Sequence is told by
// its list alone: one whose members HF cannot read, and which has another
// kind's fields too, HF reads as that kind, where it is refused here.
func untaggedNormalizer(p part) string {
	if normalizerTags[p.Type] {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p.raw, &m) != nil {
		return ""
	}
	// serde takes null for no field of these kinds but strip_accents.
	isIn := func(m map[string]json.RawMessage, key string, v any) bool {
		r, ok := m[key]
		return ok && string(r) != "null" && json.Unmarshal(r, v) == nil
	}
	is := func(key string, v any) bool { return isIn(m, key, v) }
	var b bool
	var s string
	var list []json.RawMessage
	stripAccents := true
	if r, ok := m["strip_accents"]; ok && string(r) != "null" {
		stripAccents = json.Unmarshal(r, &b) == nil
	}
	// A pattern is serde's enum: an object of one key, String or Regex.
	var pat map[string]json.RawMessage
	patternOK := is("pattern", &pat) && len(pat) == 1 && (isIn(pat, "String", &s) || isIn(pat, "Regex", &s))
	switch {
	case is("clean_text", &b) && is("handle_chinese_chars", &b) && is("lowercase", &b) && stripAccents:
		return "BertNormalizer"
	case is("strip_left", &b) && is("strip_right", &b):
		return "Strip"
	case is("normalizers", &list):
		return "Sequence"
	case is("precompiled_charsmap", &s):
		return "Precompiled"
	case patternOK && is("content", &s):
		return "Replace"
	case is("prepend", &s):
		return "Prepend"
	}
	return ""
}

// preTokenizer splits pieces further.
type preTokenizer interface {
	split(pieces []string, at pass) ([]string, error)
}

// pass is what a pre-tokenizer is told of the text it splits: whether it is
// the input's first (no added token before it), which Metaspace's
// prepend_scheme reads, and when the encoding's time is up.
type pass struct {
	first    bool
	deadline time.Time
}

// splitBehavior is HF's SplitDelimiterBehavior: what a Split does with
// the stretches its pattern matched.
type splitBehavior int

const (
	isolated           splitBehavior = iota // every stretch a piece
	removed                                 // the matches go, the rest are pieces
	mergedWithPrevious                      // a match joins the stretch before it
	mergedWithNext                          // a match joins the stretch after it
	contiguous                              // adjacent matches, and adjacent non-matches, are one piece
)

var splitBehaviors = map[string]splitBehavior{
	"Isolated": isolated, "Removed": removed, "MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext": mergedWithNext, "Contiguous": contiguous,
}

type splitPre struct {
	re       *regexp2.Regexp // a String pattern is its escaped regex, as HF compiles it
	behavior splitBehavior
	invert   bool
}

func (p splitPre) split(pieces []string, at pass) ([]string, error) {
	var out []string
	for _, s := range pieces {
		segs, err := matchSegments(p.re, s, at.deadline)
		if err != nil {
			return nil, err
		}
		if p.invert {
			for i := range segs {
				segs[i].match = !segs[i].match
			}
		}
		for _, g := range p.behavior.apply(segs) {
			// Empty pieces (an empty match's) are dropped, as HF's
			// PreTokenizedString::split drops them.
			if !g.match && g.hi > g.lo {
				out = append(out, s[g.lo:g.hi])
			}
		}
	}
	return out, nil
}

// apply folds the segments into pieces as HF's NormalizedString::split
// does, each fold read from its source; a piece whose match is true is
// removed.
func (b splitBehavior) apply(segs []stretch) []stretch {
	var acc []stretch
	prevMatch := false
	switch b {
	case isolated:
		for _, g := range segs {
			acc = append(acc, stretch{g.lo, g.hi, false})
		}
	case removed:
		acc = segs
	case contiguous:
		for _, g := range segs {
			if g.match == prevMatch && len(acc) > 0 {
				acc[len(acc)-1].hi = g.hi
			} else {
				acc = append(acc, stretch{g.lo, g.hi, false})
			}
			prevMatch = g.match
		}
	case mergedWithPrevious:
		for _, g := range segs {
			if g.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].hi = g.hi
			} else {
				acc = append(acc, stretch{g.lo, g.hi, false})
			}
			prevMatch = g.match
		}
	case mergedWithNext:
		// HF folds from the end and reverses the result.
		for i := len(segs) - 1; i >= 0; i-- {
			g := segs[i]
			if g.match && !prevMatch && len(acc) > 0 {
				acc[len(acc)-1].lo = g.lo
			} else {
				acc = append(acc, stretch{g.lo, g.hi, false})
			}
			prevMatch = g.match
		}
		slices.Reverse(acc)
	}
	return acc
}

// gpt2Split is GPT-2's pre-tokenizing regex, which ByteLevel applies with
// use_regex.
const gpt2Split = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteLevelFields are a ByteLevel pre-tokenizer's, post-processor's or
// decoder's fields (one struct in HF, which requires the first two of all
// three); trim_offsets moves offsets only, which are not kept here.
type byteLevelFields struct {
	AddPrefixSpace bool  `json:"add_prefix_space" required:"true"`
	TrimOffsets    bool  `json:"trim_offsets" required:"true"`
	UseRegex       *bool `json:"use_regex"`
}

type byteLevelPre struct {
	prefixSpace bool
	regex       *splitPre
}

func (p byteLevelPre) split(pieces []string, at pass) ([]string, error) {
	if p.prefixSpace {
		// Every piece it is given, as HF's ByteLevel does after a Split.
		spaced := make([]string, len(pieces))
		for i, s := range pieces {
			if !strings.HasPrefix(s, " ") {
				s = " " + s
			}
			spaced[i] = s
		}
		pieces = spaced
	}
	if p.regex != nil {
		var err error
		if pieces, err = p.regex.split(pieces, at); err != nil {
			return nil, err
		}
	}
	out := make([]string, len(pieces))
	for i, s := range pieces {
		var b strings.Builder
		for j := 0; j < len(s); j++ {
			b.WriteRune(byteChar[s[j]])
		}
		out[i] = b.String()
	}
	return out, nil
}

// metaspaceFields are a Metaspace pre-tokenizer's or decoder's fields,
// one struct in HF, read by its one deserializer.
type metaspaceFields struct {
	Replacement    string  `json:"replacement" required:"true"`
	PrependScheme  *string `json:"prepend_scheme"`
	AddPrefixSpace *bool   `json:"add_prefix_space"` // before prepend_scheme
	Split          *bool   `json:"split"`
}

// read checks the fields as HF's Metaspace deserializer does: the
// replacement one character (a Rust char), prepend_scheme always (its
// default), first or never, and add_prefix_space false only beside never.
func (v metaspaceFields) read() (repl rune, scheme string, err error) {
	repl, n := utf8.DecodeRuneInString(v.Replacement)
	if n == 0 || n != len(v.Replacement) {
		return 0, "", fmt.Errorf("Metaspace replacement %s: want one character", clip.Quote(v.Replacement))
	}
	scheme = "always"
	if v.PrependScheme != nil {
		scheme = *v.PrependScheme
	}
	if scheme != "always" && scheme != "first" && scheme != "never" {
		return 0, "", fmt.Errorf("Metaspace prepend_scheme %s: want always, first or never", clip.Quote(scheme))
	}
	if v.AddPrefixSpace != nil && !*v.AddPrefixSpace && scheme != "never" {
		return 0, "", fmt.Errorf("Metaspace add_prefix_space false with prepend_scheme %s: HF tokenizers refuses it (false goes with never)", scheme)
	}
	return repl, scheme, nil
}

type metaspacePre struct {
	repl   string
	scheme string // always, first, never
	each   bool   // split: each replacement starts a piece
}

func (p metaspacePre) split(pieces []string, at pass) ([]string, error) {
	first := at.first
	var out []string
	for i, s := range pieces {
		s = strings.ReplaceAll(s, " ", p.repl)
		if (p.scheme == "always" || p.scheme == "first" && first && i == 0) && !strings.HasPrefix(s, p.repl) {
			s = p.repl + s
		}
		if !p.each {
			out = append(out, s)
			continue
		}
		// Each replacement starts a piece (MergedWithNext).
		start := 0
		for j := 1; j < len(s); j++ {
			if strings.HasPrefix(s[j:], p.repl) {
				out = append(out, s[start:j])
				start = j
			}
		}
		out = append(out, s[start:])
	}
	return out, nil
}

type digitsPre struct{ individual bool }

func (p digitsPre) split(pieces []string, _ pass) ([]string, error) {
	var out []string
	for _, s := range pieces {
		start, inDigits := 0, false
		for i, r := range s {
			// Rust's char::is_numeric, HF's test: any number (N), not
			// only decimal digits (Nd): ², ½ and Ⅻ split too.
			d := unicode.IsNumber(r)
			if i > start && (d != inDigits || d && p.individual) {
				out = append(out, s[start:i])
				start = i
			}
			inDigits = d
		}
		if start < len(s) {
			out = append(out, s[start:])
		}
	}
	return out, nil
}

func readPreTokenizers(raw json.RawMessage) (out []preTokenizer, err error) {
	parts, err := readParts(raw, "pretokenizers")
	if err != nil {
		return nil, err
	}
	var cur part // the part being read, named in its errors
	defer func() { err = partErr(cur, err) }()
	for _, p := range parts {
		cur = p
		switch p.Type {
		case "Split":
			var v struct {
				Pattern  pattern `json:"pattern" required:"true"`
				Behavior string  `json:"behavior" required:"true"`
				Invert   bool    `json:"invert" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			re, err := v.Pattern.compileSplit()
			if err != nil {
				return nil, err
			}
			b, ok := splitBehaviors[v.Behavior]
			if !ok {
				return nil, fmt.Errorf("Split behavior %s is not one of HF's (Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous)", clip.Quote(v.Behavior))
			}
			out = append(out, splitPre{re: re, behavior: b, invert: v.Invert})
		case "ByteLevel":
			var v byteLevelFields
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			b := byteLevelPre{prefixSpace: v.AddPrefixSpace}
			if v.UseRegex == nil || *v.UseRegex {
				re := regexp2.MustCompile(gpt2Split, regexp2.None)
				re.MatchTimeout = matchTimeout
				b.regex = &splitPre{re: re}
			}
			out = append(out, b)
		case "Metaspace":
			var v metaspaceFields
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			repl, scheme, err := v.read()
			if err != nil {
				return nil, err
			}
			m := metaspacePre{repl: string(repl), scheme: scheme, each: v.Split == nil || *v.Split}
			out = append(out, m)
		case "Digits":
			var v struct {
				Individual bool `json:"individual_digits" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			out = append(out, digitsPre{v.Individual})
		default:
			if p.Type == "" {
				// Every kind of PreTokenizerWrapper requires its "type",
				// so its untagged fallback takes no object.
				return nil, errors.New(`it has no "type": HF tokenizers reads no pre-tokenizer without one`)
			}
			return nil, fmt.Errorf("%s is not supported (Split, ByteLevel, Metaspace, Digits, Sequence)", clip.Quote(p.Type))
		}
	}
	return out, nil
}

// templatePiece is a TemplateProcessing template's item, HF's Piece: one
// of a special token and the text ("A" or "B"), each with its type id.
type templatePiece struct {
	SpecialToken *struct {
		ID     string `json:"id" required:"true"`
		TypeID uint32 `json:"type_id" required:"true"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id" required:"true"`
		TypeID uint32 `json:"type_id" required:"true"`
	} `json:"Sequence"`
}

// readPostProcessor reads the special tokens a single text gets before and
// after it.
func (t *Tokenizer) readPostProcessor(raw json.RawMessage) (prefix, suffix []int32, err error) {
	parts, err := readParts(raw, "processors")
	if err != nil {
		return nil, nil, err
	}
	var cur part // the part being read, named in its errors
	defer func() { err = partErr(cur, err) }()
	idOf := func(tok string, id *int) (int32, error) {
		if id != nil {
			if _, ok := t.pieces[int32(*id)]; !ok || *id < 0 || *id >= MaxVocab {
				return 0, fmt.Errorf("special token %s has id %d, outside the vocabulary", clip.Quote(tok), *id)
			}
			return int32(*id), nil
		}
		v, ok := t.vocab[tok]
		if !ok {
			return 0, fmt.Errorf("special token %s is not in the vocabulary", clip.Quote(tok))
		}
		return v, nil
	}
	for _, p := range parts {
		cur = p
		switch p.Type {
		case "ByteLevel":
			if err := p.decode(&byteLevelFields{}); err != nil {
				return nil, nil, err
			}
		case "TemplateProcessing":
			var v struct {
				Single        []templatePiece `json:"single" required:"true"`
				Pair          []templatePiece `json:"pair" required:"true"` // the template of two texts, not used
				SpecialTokens map[string]struct {
					ID     string   `json:"id" required:"true"`
					IDs    []int    `json:"ids" required:"true"`
					Tokens []string `json:"tokens" required:"true"`
				} `json:"special_tokens" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, nil, err
			}
			for k, it := range slices.Concat(v.Single, v.Pair) {
				key, i := "single", k
				if k >= len(v.Single) {
					key, i = "pair", k-len(v.Single)
				}
				if (it.SpecialToken == nil) == (it.Sequence == nil) {
					return nil, nil, fmt.Errorf("TemplateProcessing %s[%d]: want one of SpecialToken and Sequence", key, i)
				}
				// HF's Sequence is an enum of A and B, the two texts.
				if it.Sequence != nil && it.Sequence.ID != "A" && it.Sequence.ID != "B" {
					return nil, nil, fmt.Errorf("TemplateProcessing %s[%d]: Sequence id %s, want A or B", key, i, clip.Quote(it.Sequence.ID))
				}
			}
			seen := false
			for _, it := range v.Single {
				switch {
				case it.Sequence != nil:
					if seen {
						return nil, nil, fmt.Errorf("TemplateProcessing: the text appears twice in the single template")
					}
					seen = true
				case it.SpecialToken != nil:
					st, ok := v.SpecialTokens[it.SpecialToken.ID]
					if !ok {
						return nil, nil, fmt.Errorf("TemplateProcessing: special token %s has no ids", clip.Quote(it.SpecialToken.ID))
					}
					for _, id := range st.IDs {
						if _, ok := t.pieces[int32(id)]; !ok || id < 0 || id >= MaxVocab {
							return nil, nil, fmt.Errorf("TemplateProcessing: special token %s has id %d, outside the vocabulary", clip.Quote(it.SpecialToken.ID), id)
						}
						if seen {
							suffix = append(suffix, int32(id))
						} else {
							prefix = append(prefix, int32(id))
						}
					}
				}
			}
		case "RobertaProcessing", "BertProcessing":
			// HF reads cls and sep as a serde tuple (String, u32): a list
			// of exactly two, so one of any other length is refused as
			// HF refuses it, not cut to two.
			var v struct {
				Sep []json.RawMessage `json:"sep" required:"true"`
				Cls []json.RawMessage `json:"cls" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, nil, err
			}
			for i, tk := range [][]json.RawMessage{v.Cls, v.Sep} {
				key := [...]string{"cls", "sep"}[i]
				if len(tk) != 2 {
					return nil, nil, fmt.Errorf("%s %s is a list of %d, want [token, id]", p.Type, key, len(tk))
				}
				var tok string
				var id int
				if json.Unmarshal(tk[0], &tok) != nil || json.Unmarshal(tk[1], &id) != nil {
					return nil, nil, fmt.Errorf("%s %s is [%s, %s], want [token, id]", p.Type, key, rawShort(tk[0]), rawShort(tk[1]))
				}
				x, err := idOf(tok, &id)
				if err != nil {
					return nil, nil, err
				}
				if i == 0 {
					prefix = append(prefix, x)
				} else {
					suffix = append(suffix, x)
				}
			}
		default:
			return nil, nil, fmt.Errorf("%s is not supported (TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)", clip.Quote(p.Type))
		}
	}
	return prefix, suffix, nil
}

type decoder interface{ apply([]string) []string }

type decFunc func([]string) []string

func (f decFunc) apply(t []string) []string { return f(t) }

func perToken(f func(i int, s string) string) decFunc {
	return func(toks []string) []string {
		out := make([]string, len(toks))
		for i, s := range toks {
			out[i] = f(i, s)
		}
		return out
	}
}

func readDecoders(raw json.RawMessage) (out []decoder, err error) {
	parts, err := readParts(raw, "decoders")
	if err != nil {
		return nil, err
	}
	var cur part // the part being read, named in its errors
	defer func() { err = partErr(cur, err) }()
	if parts == nil {
		// No decoder: HF joins the tokens with spaces.
		return []decoder{decFunc(func(t []string) []string { return []string{strings.Join(t, " ")} })}, nil
	}
	for _, p := range parts {
		cur = p
		switch p.Type {
		case "ByteLevel":
			if err := p.decode(&byteLevelFields{}); err != nil {
				return nil, err
			}
			out = append(out, decFunc(byteLevelDecode))
		case "ByteFallback":
			out = append(out, decFunc(byteFallbackDecode))
		case "Fuse":
			out = append(out, decFunc(func(t []string) []string { return []string{strings.Join(t, "")} }))
		case "Replace":
			r, err := readReplace(p)
			if err != nil {
				return nil, err
			}
			out = append(out, perToken(func(_ int, s string) string { return r.apply(s) }))
		case "Strip":
			var v struct {
				Content string `json:"content" required:"true"`
				Start   uint   `json:"start" required:"true"` // HF's usize: a negative count is refused
				Stop    uint   `json:"stop" required:"true"`
			}
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			c, n := utf8.DecodeRuneInString(v.Content)
			if n == 0 || n != len(v.Content) {
				return nil, fmt.Errorf("Strip content %s: want one character", clip.Quote(v.Content))
			}
			out = append(out, perToken(func(_ int, s string) string {
				r := []rune(s)
				lo, hi := 0, len(r)
				for uint(lo) < v.Start && lo < hi && r[lo] == c {
					lo++
				}
				for k := uint(0); k < v.Stop && hi > lo && r[hi-1] == c; k++ {
					hi--
				}
				return string(r[lo:hi])
			}))
		case "Metaspace":
			var v metaspaceFields
			if err := p.decode(&v); err != nil {
				return nil, err
			}
			repl, scheme, err := v.read()
			if err != nil {
				return nil, err
			}
			// The first token loses its replacements, others read as spaces.
			out = append(out, perToken(func(i int, s string) string {
				var b strings.Builder
				for _, r := range s {
					switch {
					case r != repl:
						b.WriteRune(r)
					case i > 0 || scheme == "never":
						b.WriteByte(' ')
					}
				}
				return b.String()
			}))
		default:
			return nil, fmt.Errorf("%s is not supported (ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace, Sequence)", clip.Quote(p.Type))
		}
	}
	return out, nil
}

// byteChar is GPT-2's byte-level alphabet: printable Latin-1 bytes stand
// for themselves, the others for the characters from U+0100 on, in order.
var byteChar, charByte = func() ([256]rune, map[rune]byte) {
	var bc [256]rune
	cb := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			bc[b] = rune(b)
		} else {
			bc[b] = rune(256 + n)
			n++
		}
		cb[bc[b]] = byte(b)
	}
	return bc, cb
}()

// byteLevelDecode maps each token's characters back to bytes (a token with
// a character outside the alphabet, an added token say, keeps its own
// bytes) and reads them as UTF-8, invalid bytes as U+FFFD.
func byteLevelDecode(toks []string) []string {
	var buf []byte
	for _, t := range toks {
		var bs []byte
		ok := true
		for _, r := range t {
			b, in := charByte[r]
			if !in {
				ok = false
				break
			}
			bs = append(bs, b)
		}
		if !ok {
			bs = []byte(t)
		}
		buf = append(buf, bs...)
	}
	return []string{lossyUTF8(buf)}
}

// lossyUTF8 reads b as UTF-8 as Rust's String::from_utf8_lossy does (HF's
// ByteLevel decoder): each maximal part of a sequence that cannot be
// completed, or a byte no sequence starts with, becomes one U+FFFD, so
// two broken characters are two, not one as strings.ToValidUTF8 has it.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	for len(b) > 0 {
		if r, n := utf8.DecodeRune(b); r != utf8.RuneError || n > 1 {
			sb.Write(b[:n])
			b = b[n:]
			continue
		}
		// The bytes after the first that still continue a valid sequence:
		// the second's range depends on the first (no overlong forms,
		// surrogates or values past U+10FFFF), the others are 80..BF.
		lo, hi, need := byte(0x80), byte(0xBF), 0
		switch c := b[0]; {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			lo, need = 0xA0, 2
		case c == 0xED:
			hi, need = 0x9F, 2
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			lo, need = 0x90, 3
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			hi, need = 0x8F, 3
		}
		n := 1
		for ; n <= need && n < len(b) && b[n] >= lo && b[n] <= hi; n++ {
			lo, hi = 0x80, 0xBF
		}
		sb.WriteString("\uFFFD")
		b = b[n:]
	}
	return sb.String()
}

// fallbackByte reads a <0xXX> token's byte as HF's ByteFallback decoder
// does (u8::from_str_radix of the two characters: hex digits of either
// case, or a sign and one digit); any other token is text.
func fallbackByte(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(t[3:5], "+"), 16, 8)
	return byte(v), err == nil
}

// byteFallbackDecode turns runs of <0xXX> tokens into their bytes' text, or
// a U+FFFD a byte where they are not valid UTF-8.
func byteFallbackDecode(toks []string) []string {
	var out []string
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := fallbackByte(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}
