package safetensors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// This file reads a header's JSON in place: checked whole by encoding/json's
// scanner, which allocates nothing, then walked member by member, so that
// only what the tensors and __metadata__ hold is allocated.

// headerObject is the header's JSON object, checked to be valid JSON, with
// the spaces around it cut.
func headerObject(hdr []byte) ([]byte, error) {
	i := skipSpace(hdr, 0)
	if i == len(hdr) || hdr[i] != '{' {
		if json.Valid(hdr) {
			return nil, fmt.Errorf("header is not a JSON object")
		}
		return nil, syntaxError(hdr)
	}
	end := closeOf(hdr, i)
	if end < 0 || !json.Valid(hdr[i:end]) {
		return nil, syntaxError(hdr[i:])
	}
	// Writers pad the header with spaces; anything else after the object is junk.
	if rest := bytes.Trim(hdr[end:], " \t\r\n"); len(rest) != 0 {
		return nil, fmt.Errorf("header has %d bytes of trailing data after the JSON object", len(rest))
	}
	return hdr[i:end], nil
}

// syntaxError words encoding/json's error for data that is not valid
// JSON: the scan that finds it stops at the fault and decodes nothing.
func syntaxError(data []byte) error {
	var v struct{}
	if err := json.Unmarshal(data, &v); err != nil {
		err = jsonerr.Explain(err, data)
		if strings.HasPrefix(err.Error(), "not valid JSON") {
			return fmt.Errorf("header is %w", err)
		}
		return fmt.Errorf("header is not valid JSON: %w", err)
	}
	return fmt.Errorf("header is not valid JSON")
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// closeOf is the index just past the bracket that closes the list or object
// opening at data[i], or -1 where data ends first.
func closeOf(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			if i = jsonlen.StringEnd(data, i+1) - 1; i < 0 {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// valueEnd is the index just past the value starting at data[i], in valid
// JSON.
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return jsonlen.StringEnd(data, i+1)
	case '{', '[':
		return closeOf(data, i)
	}
	for i < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i])) {
		i++
	}
	return i
}

// members yields each key (quoted) and value of obj, a valid JSON object.
func members(obj []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, value []byte) bool) {
		i := skipSpace(obj, 1)
		for i < len(obj) && obj[i] == '"' {
			end := jsonlen.StringEnd(obj, i+1)
			key := obj[i:end]
			i = skipSpace(obj, skipSpace(obj, end)+1) // past the colon
			end = valueEnd(obj, i)
			if !yield(key, obj[i:end]) {
				return
			}
			i = skipSpace(obj, end)
			if obj[i] != ',' {
				return
			}
			i = skipSpace(obj, i+1)
		}
	}
}

// unquote is the text of q, a valid JSON string with its quotes, read as
// encoding/json reads it (a lone surrogate becomes U+FFFD).
func unquote(q []byte) string {
	s := q[1 : len(q)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r := hex4(s[i+1:])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hex4(s[i+3:])
				}
				if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
					r = d
					i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			b.WriteRune(r)
		default: // '"', '\\' and '/' stand for themselves
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// hex4 is the value of the four hex digits s starts with (valid JSON
// guarantees them).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			r = r<<4 | rune(c-'a'+10)
		}
	}
	return r
}

// readMetadata reads __metadata__'s value (valid JSON): null or an object
// of strings, a key given twice keeping its last (a map in the library).
func readMetadata(raw []byte) (map[string]string, error) {
	if raw[0] != '{' {
		var meta map[string]string
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, jsonerr.ExplainAt(err, raw, "__metadata__")
		}
		return meta, nil
	}
	meta := make(map[string]string, jsonlen.Members(raw))
	for k, v := range members(raw) {
		switch v[0] {
		case '"':
			meta[unquote(k)] = unquote(v)
		case 'n':
			// The safetensors library reads __metadata__ as a map of
			// strings (HashMap<String, String>), and refuses a null.
			return nil, fmt.Errorf("__metadata__[%s] is null, want a string", clip.Quote(unquote(k)))
		default:
			var s string
			return nil, jsonerr.ExplainAt(json.Unmarshal(v, &s), v, "__metadata__")
		}
	}
	return meta, nil
}

// dtypeNames holds each dtype's name, so that an entry's is looked up
// rather than copied.
var dtypeNames = func() map[string]string {
	m := make(map[string]string, len(dtypeSizes))
	for k := range dtypeSizes {
		m[k] = k
	}
	return m
}()

// plainEntry reads a tensor's entry (valid JSON) in the form writers give
// it: an object of "dtype", a known dtype, and "shape" and "data_offsets",
// lists of whole numbers not below 0 that fit the buffers, each once, and
// other keys skipped. Anything else reports false, for encoding/json to
// read and word its error.
func plainEntry(raw []byte, shapeBuf, offBuf *[MaxRank + 1]int64) (dtype string, shape, offs []int64, ok bool) {
	if raw[0] != '{' {
		return "", nil, nil, false
	}
	var haveShape, haveOffs bool
	for k, v := range members(raw) {
		switch string(k) {
		case `"dtype"`:
			if dtype != "" || v[0] != '"' {
				return "", nil, nil, false
			}
			if dtype = dtypeNames[string(v[1:len(v)-1])]; dtype == "" {
				return "", nil, nil, false
			}
		case `"shape"`:
			if haveShape {
				return "", nil, nil, false
			}
			if shape, ok = wholeNumbers(v, shapeBuf[:0]); !ok {
				return "", nil, nil, false
			}
			haveShape = true
		case `"data_offsets"`:
			if haveOffs {
				return "", nil, nil, false
			}
			if offs, ok = wholeNumbers(v, offBuf[:0]); !ok {
				return "", nil, nil, false
			}
			haveOffs = true
		default:
			// encoding/json skips a field it has no place for, but matches
			// the three in any case (as bytes.EqualFold does) and unescaped:
			// a key that may be one of them is left to it.
			name := k[1 : len(k)-1]
			if bytes.IndexByte(name, '\\') >= 0 || bytes.EqualFold(name, []byte("dtype")) ||
				bytes.EqualFold(name, []byte("shape")) || bytes.EqualFold(name, []byte("data_offsets")) {
				return "", nil, nil, false
			}
		}
	}
	return dtype, shape, offs, dtype != "" && haveShape && haveOffs
}

// entryFields is raw, a tensor's entry (valid JSON), with every key but
// "dtype", "shape" and "data_offsets" made spaces, so that encoding/json,
// which matches a field in any case, reads only what the safetensors
// library reads: its TensorInfo (serde-derived) matches the three as
// spelled, skips other keys, and refuses one of them given twice, named here.
func entryFields(raw []byte) ([]byte, string) {
	out := raw
	if raw[0] != '{' {
		return raw, "" // not an object: encoding/json says so
	}
	var seen [3]bool
	for k := range members(raw) {
		i := slices.Index([]string{"dtype", "shape", "data_offsets"}, unquote(k))
		if i >= 0 {
			if seen[i] {
				return nil, unquote(k)
			}
			seen[i] = true
			continue
		}
		if &out[0] == &raw[0] {
			out = bytes.Clone(raw)
		}
		at := cap(raw) - cap(k) // k's offset in raw
		for j := at + 1; j < at+len(k)-1; j++ {
			out[j] = ' '
		}
	}
	return out, ""
}

// wholeNumbers appends the numbers of the list v (valid JSON) to buf,
// reporting false for anything but digits or past buf's capacity.
func wholeNumbers(v []byte, buf []int64) ([]int64, bool) {
	if v[0] != '[' {
		return nil, false
	}
	for i := skipSpace(v, 1); v[i] != ']'; {
		var n int64
		start := i
		for ; v[i] >= '0' && v[i] <= '9'; i++ {
			d := int64(v[i] - '0')
			if n > (1<<63-1-d)/10 {
				return nil, false
			}
			n = n*10 + d
		}
		if i == start || len(buf) == cap(buf) {
			return nil, false
		}
		buf = append(buf, n)
		if i = skipSpace(v, i); v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return buf, true
}
