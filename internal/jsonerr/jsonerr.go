// Package jsonerr words the errors of encoding/json in the terms of the
// file being read: the key path, the JSON value found and the value wanted,
// or where the text stops being JSON, never Go's types.
package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// Explain returns err in the file's terms when it is a wrong JSON type or a
// syntax error, and err unchanged otherwise. data is the text that was
// decoded (offsets are into it); with nil data a value is not quoted and a
// place is a byte offset rather than a line and column.
func Explain(err error, data []byte) error {
	return ExplainAt(err, data, "")
}

// ExplainFile is Explain for data that is a whole file (config.json, a
// tokenizer.json): a value of the wrong type is placed too, by the line
// and column it starts at, as a syntax error is.
func ExplainFile(err error, data []byte) error {
	e := Explain(err, data)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && e != err {
		if at := valueStart(data, te.Offset, te.Value); at >= 0 {
			return fmt.Errorf("%w (%s)", e, where(data, int64(at)+1))
		}
	}
	return e
}

// valueStart is where the value of JSON type value that encoding/json
// stopped at off starts in data (just past a scalar, just inside a list or
// an object), or -1 where data does not hold it there.
func valueStart(data []byte, off int64, value string) int {
	if off <= 0 || off > int64(len(data)) {
		return -1
	}
	end := int(off)
	switch kind, _, _ := strings.Cut(value, " "); kind {
	case "object", "array":
		if c := data[end-1]; c == '{' || c == '[' {
			return end - 1
		}
	case "string":
		if data[end-1] != '"' {
			return -1
		}
		for i := end - 2; i >= 0; i-- {
			if data[i] == '"' && !escaped(data, i) {
				return i
			}
		}
	case "number", "bool":
		i := end
		for i > 0 && strings.IndexByte("+-.0123456789eEtruefals", data[i-1]) >= 0 {
			i--
		}
		if i < end {
			return i
		}
	}
	return -1
}

// ExplainLine is Explain for data that is one line of a larger file (a
// JSONL record), whose caller names the line: a place is its column alone,
// so a message gives one line number, the file's.
func ExplainLine(err error, data []byte) error {
	// A line that ends inside its value is not a text cut short: a JSON
	// file of many lines read as lines (an export) ends each so, and its
	// caller, which knows whether more follows, words it.
	var se *json.SyntaxError
	if errors.As(err, &se) && bytes.IndexByte(data, '\n') < 0 && se.Offset >= 0 && se.Offset <= int64(len(data)) {
		// NaN or Infinity, as Python's json writes them: named by its key,
		// as Explain names it in a file of lines.
		if lit, start := nonFinite(data, se.Offset); lit != "" {
			at := keyPath(data[:start])
			if at == "" {
				at = "the line"
			}
			return fmt.Errorf("%s is %s (column %d): a float that is not finite, which JSON has no number for; want a finite number",
				at, lit, utf8.RuneCount(data[:start])+1)
		}
		col := utf8.RuneCount(data[:se.Offset])
		return fmt.Errorf("not valid JSON at column %d: %s", col, se.Error())
	}
	return Explain(err, data)
}

// ExplainAt is Explain for data that is the value at path of a larger file
// (quantization.bits): the fields it names are under path.
func ExplainAt(err error, data []byte, path string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		t := *te
		if data != nil && t.Field != "" {
			if at := valueStart(data, t.Offset, t.Value); at >= 0 {
				t.Field = fileKeys(t.Field, keyPath(data[:at]))
			}
		}
		switch {
		case path != "" && t.Field != "":
			t.Field = path + "." + t.Field
		case path != "":
			t.Field = path
		}
		return typeError(&t, data)
	}
	in := ""
	if path != "" {
		in = " in " + path
	}
	if IsCutShort(err, data) {
		return fmt.Errorf("not valid JSON%s: %s", in, CutShort)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		if lit, start := nonFinite(data, se.Offset); lit != "" {
			at := keyPath(data[:start])
			switch {
			case path != "" && at != "" && at[0] != '[':
				at = path + "." + at
			case path != "":
				at = path + at
			case at == "":
				at = "the file"
			}
			return fmt.Errorf("%s is %s (%s): a float that is not finite, which JSON has no number for; want a finite number",
				at, lit, where(data, int64(start)+1))
		}
		if se.Offset <= int64(len(bom)) && bytes.HasPrefix(data, bom) {
			// Python's json (transformers reads config.json as UTF-8 text,
			// not utf-8-sig) and serde_json refuse the mark too.
			return fmt.Errorf("not valid JSON%s: the text starts with a byte order mark (EF BB BF), which a JSON file does not hold: save it without one", in)
		}
		// encoding/json's own bound, which it words as a bad character:
		// the '[' or '{' it stops on is where the nesting passes it.
		if strings.HasSuffix(se.Error(), "exceeded max depth") {
			return fmt.Errorf("not valid JSON%s %s: lists and objects nest deeper than %d levels, past what any JSON reader of model files takes", in, where(data, se.Offset), goDepth)
		}
		return fmt.Errorf("not valid JSON%s %s: %s", in, where(data, se.Offset), se.Error())
	}
	return err
}

// goDepth is encoding/json's deepest nesting (its scanner's maxNestingDepth).
const goDepth = 10000

// CutShort is how every reader words a text that ends inside a JSON value
// (a copy that stopped, a run interrupted): one wording whether the value
// is an object or an array, and whichever decoder read it (IsCutShort).
const CutShort = "the text ends inside a value: cut short"

// IsCutShort reports whether err, from decoding data, is the text ending
// inside a value: a Decoder's io.ErrUnexpectedEOF, or Unmarshal's syntax
// error at the text's end ("unexpected end of JSON input").
func IsCutShort(err error, data []byte) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var se *json.SyntaxError
	return errors.As(err, &se) && data != nil && se.Offset >= int64(len(bytes.TrimRight(data, " \t\r\n"))) &&
		se.Error() == "unexpected end of JSON input"
}

// bom is UTF-8's byte order mark, which some editors put at a file's start.
var bom = []byte("\xef\xbb\xbf")

func typeError(te *json.UnmarshalTypeError, data []byte) error {
	found := "a JSON " + te.Value
	if num, ok := strings.CutPrefix(te.Value, "number "); ok {
		switch kind := te.Type.Kind(); {
		case kind >= reflect.Uint && kind <= reflect.Uint64 && strings.HasPrefix(num, "-") && !strings.ContainsAny(num, ".eE"):
			// A count or an id: "beyond the 64-bit whole numbers" would
			// not say that the sign is what is wrong.
			return fmt.Errorf("%s is %s, want a whole number not below 0", field(te), num)
		case isInt(kind) && !strings.ContainsAny(num, ".eE"):
			return fmt.Errorf("%s is %s, beyond the %d-bit whole numbers it is read as", field(te), num, te.Type.Bits())
		case kind == reflect.Float32 || kind == reflect.Float64:
			return fmt.Errorf("%s is %s, beyond a %d-bit float's range", field(te), num, te.Type.Bits())
		}
	} else if lit := literal(data, te.Offset, te.Value); lit != "" {
		found += " (" + lit + ")"
	}
	if te.Field == "" {
		return fmt.Errorf("the file is %s, want %s", found, want(te.Type))
	}
	return fmt.Errorf("%s is %s, want %s", te.Field, found, want(te.Type))
}

func field(te *json.UnmarshalTypeError) string {
	if te.Field == "" {
		return "the file"
	}
	return te.Field
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func want(t reflect.Type) string {
	switch k := t.Kind(); {
	case isInt(k):
		return "a whole number"
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	case k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.Slice || k == reflect.Array:
		return "a list"
	case k == reflect.Map || k == reflect.Struct:
		return "an object"
	case k == reflect.Pointer:
		return want(t.Elem())
	}
	return "another JSON value"
}

// literal is the JSON text of the string or bool value that ends at off,
// shortened to a quote's length, or "" when data does not hold it there.
func literal(data []byte, off int64, value string) string {
	if off <= 0 || off > int64(len(data)) {
		return ""
	}
	end := int(off)
	var start int
	switch value {
	case "string":
		if data[end-1] != '"' {
			return ""
		}
		start = -1
		for i := end - 2; i >= 0; i-- {
			if data[i] == '"' && !escaped(data, i) {
				start = i
				break
			}
		}
		if start < 0 {
			return ""
		}
	case "bool":
		start = bytes.LastIndexAny(data[:end], " \t\r\n:,[") + 1
	default:
		return ""
	}
	s := string(data[start:end])
	if utf8.RuneCountInString(s) > 40 {
		r := []rune(s)
		s = string(r[:37]) + `..."`
	}
	return s
}

// escaped reports whether the quote at i follows an odd run of backslashes.
func escaped(data []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

// where is "at line L, column C" of data for a byte offset, or "at byte N"
// without data.
func where(data []byte, off int64) string {
	if data == nil || off < 0 || off > int64(len(data)) {
		return "at byte " + strconv.FormatInt(off, 10)
	}
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return fmt.Sprintf("at line %d, column %d", line, col)
}

// IsNonFinite reports whether err is a syntax error that stopped on a
// NaN, Infinity or -Infinity, which Python's json reads as a float.
func IsNonFinite(err error, data []byte) bool {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return false
	}
	lit, _ := nonFinite(data, se.Offset)
	return lit != ""
}

// nonFinite is the literal Python's json writes for a float that is not
// finite (NaN, Infinity, -Infinity) where a syntax error at off stopped on
// one, and where it starts in data; "" for any other error.
func nonFinite(data []byte, off int64) (string, int) {
	if off < 1 || off > int64(len(data)) {
		return "", 0
	}
	i := int(off) - 1
	if i > 0 && data[i-1] == '-' {
		i--
	}
	for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
		if bytes.HasPrefix(data[i:], []byte(lit)) {
			return lit, i
		}
	}
	return "", 0
}

// fileKeys is field (encoding/json's path of the value, a.b.c) less the
// parts that are no key of path, the value's key path in the file: the Go
// name of an embedded struct, which encoding/json puts in the path too.
func fileKeys(field, path string) string {
	keys := map[string]bool{}
	for _, k := range strings.Split(path, ".") {
		k, _, _ = strings.Cut(k, "[")
		keys[k] = true
	}
	var out []string
	for _, k := range strings.Split(field, ".") {
		if keys[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return field
	}
	return strings.Join(out, ".")
}

// keyPath is the key path (a.b[2].c) of the value that starts where the
// JSON text prefix ends, "" at the top level.
func keyPath(prefix []byte) string {
	type frame struct {
		obj, wantKey bool
		key          string
		idx          int
	}
	var stack []frame
	ended := func() { // a value ended: the next is a key, or the next element
		if n := len(stack); n > 0 {
			if stack[n-1].obj {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(prefix))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, wantKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim('}'), json.Delim(']'):
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			ended()
		default:
			if n := len(stack); n > 0 && stack[n-1].wantKey {
				s, _ := tok.(string)
				stack[n-1].key, stack[n-1].wantKey = s, false
				continue
			}
			ended()
		}
	}
	var b strings.Builder
	for _, f := range stack {
		switch {
		case !f.obj:
			fmt.Fprintf(&b, "[%d]", f.idx)
		case b.Len() > 0:
			b.WriteString("." + clip.Key(f.key))
		default:
			b.WriteString(clip.Key(f.key))
		}
	}
	return b.String()
}

// UTF8 refuses data that is not UTF-8 text, naming where its first byte
// that begins no UTF-8 character is: encoding/json reads such bytes as
// U+FFFD without a word, where Python's json (transformers) and HF
// tokenizers (serde_json) refuse the file.
func UTF8(data []byte) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		off += n
	}
	// where counts the characters through off, as a syntax error's offset
	// does: the bad byte is a column of its own.
	return fmt.Errorf("not UTF-8 text %s: byte %#02x begins no UTF-8 character, and a JSON file is UTF-8", where(data, int64(off)+1), data[off])
}

// LoneSurrogate refuses data holding a \u escape of a UTF-16 surrogate
// that is not half of a pair (\ud800 alone), naming where it is: serde_json
// (HF tokenizers, the safetensors library) refuses such a string, as it
// stands for no character, where encoding/json reads it as U+FFFD without
// a word. Python's json keeps it, so files it reads are not checked.
func LoneSurrogate(data []byte) error {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(`\u`))
		if j < 0 {
			return nil
		}
		i += j
		if escaped(data, i) || i+6 > len(data) {
			i += 2 // a literal backslash before a u, or text cut short
			continue
		}
		r, ok := hexRune(data[i+2 : i+6])
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r <= 0xdbff && i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u':
			if low, ok := hexRune(data[i+8 : i+12]); ok && low >= 0xdc00 && low <= 0xdfff {
				i += 12
				continue
			}
			fallthrough
		default:
			return fmt.Errorf("a string holds %s, half of a UTF-16 surrogate pair without its other half, %s: it stands for no character",
				data[i:i+6], where(data, int64(i)+1))
		}
		i += 6
	}
}

// hexRune is the value of four hex digits.
func hexRune(h []byte) (rune, bool) {
	n, err := strconv.ParseUint(string(h), 16, 16)
	return rune(n), err == nil
}

// SerdeDepth is the deepest nesting of lists and objects serde_json reads
// (its recursion limit, 128, reached by the 128th): HF tokenizers and the
// safetensors library refuse a file nested deeper, anywhere in it.
const SerdeDepth = 127

// Nesting refuses data whose lists and objects nest deeper than limit,
// naming where the first one past it opens. data that is not valid JSON
// is left to the decoder, which words its fault.
func Nesting(data []byte, limit int) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := jsonlen.StringEnd(data, i+1)
			if end == 0 {
				return nil
			}
			i = end - 1
		case '[', '{':
			if depth++; depth > limit {
				return fmt.Errorf("lists and objects nest deeper than %d levels %s", limit, where(data, int64(i)+1))
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

// KeyAt says where the value of the top-level key of the object data is
// ("at line 3, column 18"), the last of a key given twice as Python's json
// reads it; "" when data is no JSON object or lacks the key.
func KeyAt(data []byte, key string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	at := ""
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := t.(string)
		// The value starts after the colon and any space past the key.
		off := dec.InputOffset()
		for off < int64(len(data)) && strings.IndexByte(": \t\r\n", data[off]) >= 0 {
			off++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return ""
		}
		if k == key {
			at = where(data, off+1)
		}
	}
	return at
}
