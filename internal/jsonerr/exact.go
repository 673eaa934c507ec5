package jsonerr

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// Unmarshal is json.Unmarshal matching a struct's fields by their keys as
// spelled: encoding/json also takes a key of other case ("Hidden_Size" for
// hidden_size, "ſhape" for shape), which Python's json readers (transformers,
// mlx-lm) and serde (HF tokenizers, safetensors) keep as a key of its own
// that names no field. Its errors are encoding/json's, at data's offsets.
func Unmarshal(data []byte, v any) error {
	return json.Unmarshal(Exact(data, v), v)
}

// Exact is data with every key that encoding/json would match to one of
// v's struct fields though spelled otherwise made spaces, so that it names
// no field; the result has data's length, lines and offsets (data itself
// where nothing changes). data that is not valid JSON comes back as it is.
func Exact(data []byte, v any) []byte {
	t := reflect.TypeOf(v)
	if t == nil || !json.Valid(data) {
		return data
	}
	e := exacter{data: data}
	e.value(skipSpace(data, 0), t)
	if e.out == nil {
		return data
	}
	return e.out
}

// exacter walks data (valid JSON) as decoded into a type. spots are the
// offsets of the non-finite floats Python made 0 in data, and orig the text
// they are spelled in (Python).
type exacter struct {
	data, out, orig []byte
	spots           []int
}

// Python is data as a Python json reader decodes it into v: a key given
// twice keeps its last value whole (Dedup), a key is a field as spelled
// (Exact), and a NaN, Infinity or -Infinity, which Python's json reads as
// a float, is made a 0 of its length where no field of v reads it (a key
// transformers keeps and the model never reads), so that encoding/json
// reads the file; where a field reads one it is kept, for the decoder's
// error to name (Explain). Offsets into the result are offsets into data.
func Python(data []byte, v any) []byte {
	text, spots := zeroNonFinite(data)
	if !json.Valid(text) {
		return data // the decoder words the fault
	}
	text, _ = dedup(text, nil) // LastWins refuses nothing
	t := reflect.TypeOf(v)
	if t == nil {
		return text
	}
	e := exacter{data: text, orig: data, spots: spots}
	e.value(skipSpace(text, 0), t)
	if e.out == nil {
		return text
	}
	return e.out
}

// Serde is data as a serde reader decodes it into v (HF tokenizers):
// Dedup with rule, whose error it returns, and Exact, in one pass over the
// text to check it is JSON (a file of megabytes), not one each.
func Serde(data []byte, rule func(path, key string) Dup, v any) ([]byte, error) {
	if !json.Valid(data) {
		return data, nil // the decoder words the fault
	}
	text, err := dedup(data, rule)
	if err != nil {
		return nil, err
	}
	t := reflect.TypeOf(v)
	if t == nil {
		return text, nil
	}
	e := exacter{data: text}
	e.value(skipSpace(text, 0), t)
	if e.out == nil {
		return text, nil
	}
	return e.out, nil
}

// zeroNonFinite is data with each NaN, Infinity and -Infinity outside its
// strings made a 0 followed by spaces, and where each was.
func zeroNonFinite(data []byte) ([]byte, []int) {
	out := data
	var spots []int
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			if i = jsonlen.StringEnd(data, i+1) - 1; i < 0 {
				return out, spots
			}
			continue
		case 'N', 'I', '-':
		default:
			continue
		}
		n := nonFiniteLen(data[i:])
		if n == 0 {
			continue
		}
		if len(spots) == 0 {
			out = bytes.Clone(data)
		}
		spots = append(spots, i)
		out[i] = '0'
		for j := i + 1; j < i+n; j++ {
			out[j] = ' '
		}
		i += n - 1
	}
	return out, spots
}

// nonFiniteLen is the length of the literal Python's json writes for a
// float that is not finite that b starts with, 0 for none.
func nonFiniteLen(b []byte) int {
	for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
		if bytes.HasPrefix(b, []byte(lit)) {
			return len(lit)
		}
	}
	return 0
}

// restore puts back the non-finite floats in [i, end), which a field reads.
func (e *exacter) restore(i, end int) {
	for _, s := range e.spots {
		if s < i || s >= end {
			continue
		}
		if e.out == nil {
			e.out = bytes.Clone(e.data)
		}
		copy(e.out[s:], e.orig[s:s+nonFiniteLen(e.orig[s:])])
	}
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// opaque: a RawMessage is read whole, its reader matching it later.
func (e *exacter) opaque(t reflect.Type) bool { return t == rawMessage }

// field makes the key at data[i:end] spaces where it is spelled otherwise
// than the field encoding/json would match it to, and walks no further
// into its value, which no field now reads.
func (e *exacter) field(i, end int, fields map[string]reflect.Type, _ string) (reflect.Type, error) {
	key := keyText(e.data, i, end)
	elem, exact := fields[key]
	if !exact && folds(fields, key) {
		if e.out == nil {
			e.out = bytes.Clone(e.data)
		}
		for j := i + 1; j < end-1; j++ {
			e.out[j] = ' '
		}
	}
	return elem, nil
}

// leaf puts back the non-finite floats of a value a field reads.
func (e *exacter) leaf(i, end int, t reflect.Type) {
	if t != nil && len(e.spots) > 0 {
		e.restore(i, end)
	}
}

// value walks the value at data[i] (valid JSON) as decoded into t.
func (e *exacter) value(i int, t reflect.Type) {
	walkTyped(e.data, i, t, "", false, e) // exacter.field returns no error
}

// skipValue is the index just past the value at data[i] (valid JSON).
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		return jsonlen.StringEnd(d, i+1)
	case '{', '[':
		depth := 0
		for ; i < len(d); i++ {
			switch d[i] {
			case '"':
				i = jsonlen.StringEnd(d, i+1) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	return scalarEnd(d, i)
}

func folds(fields map[string]reflect.Type, key string) bool {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return true
		}
	}
	return false
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the keys encoding/json decodes into t's fields (those of
// embedded structs too) to the fields' types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			continue // its fields are visible fields of t themselves
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
	fieldCache.Store(t, m)
	return m
}
