package jsonerr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// Dup is what a file's own reader does with a key one object gives twice
// (docs/architecture.md, "Where input is checked").
type Dup int

const (
	// LastWins keeps the key's last value, whole: Python's json
	// (transformers' config.json, generation_config.json and index),
	// serde_json into a map, and HF tokenizers' hand-written visitors.
	LastWins Dup = iota
	// Refuse refuses the file: serde's derived structs ("duplicate field").
	Refuse
)

// Dedup gives data the meaning rule says its repeated keys have. Each
// member whose key its object gives again later is blanked (its bytes made
// spaces, its newlines kept), so that encoding/json, which would merge an
// object given twice into one and match either copy, reads the last copy
// whole; offsets into the result are offsets into data, so errors about it
// name data's lines and columns. rule is asked about each key given twice,
// with the key path of its object ("" for the top level, else as
// "model.vocab" or "added_tokens[3]"); where it says Refuse, the error names
// the key and both places. nil rule: LastWins everywhere. data that is not
// valid JSON comes back as it is, for the decoder to word its fault.
func Dedup(data []byte, rule func(path, key string) Dup) ([]byte, error) {
	if !json.Valid(data) {
		return data, nil
	}
	return dedup(data, rule)
}

// Once refuses data where an object gives a key twice, naming the key and
// both places: mtlbench's own formats (an export line, a peer run, a
// tuned-config file) give each key once, so one given twice is an edit,
// whose last value encoding/json would take without a word.
func Once(data []byte) error {
	_, err := Dedup(data, func(string, string) Dup { return Refuse })
	return err
}

// dedup is Dedup of data known to be valid JSON.
func dedup(data []byte, rule func(path, key string) Dup) ([]byte, error) {
	d := deduper{data: data, rule: rule}
	if _, err := d.value(skipSpace(data, 0)); err != nil {
		return nil, err
	}
	if d.out == nil {
		return data, nil
	}
	return d.out, nil
}

type deduper struct {
	data, out []byte
	rule      func(path, key string) Dup
	path      []pathElem // of the value being walked
	// ms holds the members of the objects being walked, each object's
	// above its parent's, and order is repeats' scratch: a vocabulary of
	// 150,000 keys grows them once, not once an object.
	ms    []member
	order []int
}

type pathElem struct {
	key []byte // an object's member (unescaped), or
	idx int    // a list's element where key is ""
	obj bool
}

func (d *deduper) pathString() string {
	var b bytes.Buffer
	for _, e := range d.path {
		switch {
		case !e.obj:
			fmt.Fprintf(&b, "[%d]", e.idx)
		case b.Len() > 0:
			b.WriteString(".")
			b.Write(e.key)
		default:
			b.Write(e.key)
		}
	}
	return b.String()
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// member is one key and value of an object: key is the key's text,
// unescaped, and start where its quote opens (the member runs to the next
// one's start).
type member struct {
	key   []byte
	start int
}

// value walks the value starting at data[i] (valid JSON) and returns the
// index just past it.
func (d *deduper) value(i int) (int, error) {
	switch d.data[i] {
	case '"':
		return jsonlen.StringEnd(d.data, i+1), nil
	case '[':
		i = skipSpace(d.data, i+1)
		for n := 0; d.data[i] != ']'; n++ {
			d.path = append(d.path, pathElem{idx: n})
			end, err := d.value(i)
			d.path = d.path[:len(d.path)-1]
			if err != nil {
				return 0, err
			}
			if i = skipSpace(d.data, end); d.data[i] == ',' {
				i = skipSpace(d.data, i+1)
			}
		}
		return i + 1, nil
	case '{':
		return d.object(i)
	}
	return scalarEnd(d.data, i), nil
}

// scalarEnd is the index just past the number or literal at data[i].
func scalarEnd(data []byte, i int) int {
	for ; i < len(data); i++ {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}

func (d *deduper) object(i int) (int, error) {
	base := len(d.ms)
	defer func() { d.ms = d.ms[:base] }()
	i = skipSpace(d.data, i+1)
	for d.data[i] == '"' {
		end := jsonlen.StringEnd(d.data, i+1)
		key := d.data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = unescape(key)
		}
		d.ms = append(d.ms, member{key: key, start: i})
		d.path = append(d.path, pathElem{key: key, obj: true})
		end, err := d.value(skipSpace(d.data, skipSpace(d.data, end)+1))
		d.path = d.path[:len(d.path)-1]
		if err != nil {
			return 0, err
		}
		if i = skipSpace(d.data, end); d.data[i] == ',' {
			i = skipSpace(d.data, i+1)
		}
	}
	if len(d.ms)-base > 1 {
		if err := d.repeats(d.ms[base:]); err != nil {
			return 0, err
		}
	}
	return i + 1, nil
}

// repeats applies the rule to the keys ms (one object's, in the file's
// order) gives more than once.
func (d *deduper) repeats(ms []member) error {
	if cap(d.order) < len(ms) {
		d.order = make([]int, len(ms))
	}
	order := d.order[:len(ms)]
	for i := range order {
		order[i] = i
	}
	// Stable, so that equal keys stay in the file's order.
	slices.SortStableFunc(order, func(a, b int) int { return bytes.Compare(ms[a].key, ms[b].key) })
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && bytes.Equal(ms[order[j]].key, ms[order[i]].key) {
			j++
		}
		if j-i > 1 {
			first, second := ms[order[i]], ms[order[i+1]]
			path, key := d.pathString(), string(first.key)
			if d.rule != nil && d.rule(path, key) == Refuse {
				at := path
				if at == "" {
					at = "the top level"
				}
				return fmt.Errorf("key %s is given twice in %s (%s and %s)",
					strconv.Quote(key), at, where(d.data, int64(first.start)+1), where(d.data, int64(second.start)+1))
			}
			if d.out == nil {
				d.out = bytes.Clone(d.data)
			}
			for _, k := range order[i : j-1] {
				// k is not the object's last member: a later one has its key.
				for p := ms[k].start; p < ms[k+1].start; p++ {
					if d.out[p] != '\n' {
						d.out[p] = ' '
					}
				}
			}
		}
		i = j
	}
	return nil
}

// keyText is the text of the JSON string d[i:end] (valid JSON, quotes
// included), as encoding/json reads it.
func keyText(d []byte, i, end int) string {
	s := d[i+1 : end-1]
	if bytes.IndexByte(s, '\\') >= 0 {
		return string(unescape(s))
	}
	return string(s)
}

// unescape is the text of a JSON string's escaped contents s (valid JSON),
// as encoding/json reads it: half a surrogate pair alone is U+FFFD.
func unescape(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hexRune(s[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2, _ = hexRune(s[i+3 : i+7])
				}
				if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
					r, i = p, i+6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\' and '/' stand for themselves
			out = append(out, s[i])
		}
	}
	return out
}
