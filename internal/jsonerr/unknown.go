package jsonerr

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"github.com/mtlbench/mtlbench/internal/suggest"
)

// UnknownFieldError is a key that names no field of the struct its object
// decodes into, which encoding/json drops without a word.
type UnknownFieldError struct {
	Path  string   // the key's path, "cases[0].operands[1].read_bytes"
	Key   string   // the key as given
	Known []string // the keys the object's struct has, sorted
}

func (e *UnknownFieldError) Error() string {
	msg := "unknown field " + e.Path
	if hint := suggest.DidYouMean(e.Key, e.Known); hint != "" {
		msg += " (" + hint + ")"
	}
	return msg
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// Unknown is the first key of data, in order, that encoding/json would drop
// decoding data into v (a key of an object read into a struct that has no
// field of that name, in any case), as an *UnknownFieldError; nil where
// every key is read, or data is not valid JSON (the decoder words that).
// Maps, values read as any or a RawMessage, and types that decode
// themselves take any key.
func Unknown(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil || !json.Valid(data) {
		return nil
	}
	_, err := walkTyped(data, skipSpace(data, 0), t, "", true, unknownVisitor{data})
	return err
}

// unknownVisitor finds the first key of its text that no field reads.
type unknownVisitor struct{ d []byte }

// opaque: a type that decodes itself takes any key.
func (unknownVisitor) opaque(t reflect.Type) bool {
	return t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)
}

// field is the field the key at d[i:end] is read into, as spelled or in
// another case as encoding/json matches it, or an *UnknownFieldError.
func (u unknownVisitor) field(i, end int, fields map[string]reflect.Type, path string) (reflect.Type, error) {
	key := keyText(u.d, i, end)
	if elem := fields[key]; elem != nil {
		return elem, nil
	}
	for name, ft := range fields {
		if bytes.EqualFold([]byte(name), []byte(key)) {
			return ft, nil
		}
	}
	return nil, &UnknownFieldError{Path: path, Key: key, Known: slices.Sorted(maps.Keys(fields))}
}

func (unknownVisitor) leaf(int, int, reflect.Type) {}
