package jsonerr

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"github.com/mtlbench/mtlbench/internal/jsonlen"
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
	_, err := unknownIn(data, skipSpace(data, 0), t, "")
	return err
}

// unknownIn walks the value at d[i] (valid JSON) as decoded into t, at key
// path path, and returns the index just past it.
func unknownIn(d []byte, i int, t reflect.Type, path string) (int, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)) {
		return skipValue(d, i), nil
	}
	switch {
	case d[i] == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		i = skipSpace(d, i+1)
		for n := 0; d[i] != ']'; n++ {
			end, err := unknownIn(d, i, t.Elem(), path+"["+strconv.Itoa(n)+"]")
			if err != nil {
				return 0, err
			}
			if i = skipSpace(d, end); d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		return i + 1, nil
	case d[i] == '{' && t != nil && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		var fields map[string]reflect.Type
		if t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		i = skipSpace(d, i+1)
		for d[i] == '"' {
			end := jsonlen.StringEnd(d, i+1)
			key := keyText(d, i, end)
			at := key
			if path != "" {
				at = path + "." + key
			}
			var elem reflect.Type
			if t.Kind() == reflect.Map {
				elem = t.Elem()
			} else if elem = fields[key]; elem == nil {
				// encoding/json matches a key of other case too
				for name, ft := range fields {
					if bytes.EqualFold([]byte(name), []byte(key)) {
						elem = ft
						break
					}
				}
				if elem == nil {
					return 0, &UnknownFieldError{Path: at, Key: key, Known: slices.Sorted(maps.Keys(fields))}
				}
			}
			i = skipSpace(d, skipSpace(d, end)+1) // past the colon
			end, err := unknownIn(d, i, elem, at)
			if err != nil {
				return 0, err
			}
			if i = skipSpace(d, end); d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		return i + 1, nil
	}
	return skipValue(d, i), nil
}
