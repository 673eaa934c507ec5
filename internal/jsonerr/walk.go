package jsonerr

import (
	"reflect"
	"strconv"

	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// typeVisitor is what a walk of JSON text as decoded into a type
// (walkTyped) does with what it meets: Exact, Python and Serde make a key
// spelled otherwise than its field's name none (exacter), Unknown finds a
// key that names no field (unknownVisitor).
type typeVisitor interface {
	// opaque says whether a value read into t is read whole, not walked.
	opaque(t reflect.Type) bool
	// field is the type the value of the key at d[i:end] (quoted) of an
	// object read into a struct of fields is read into (nil: none), or an
	// error that ends the walk; path is its key path where the walk keeps
	// them.
	field(i, end int, fields map[string]reflect.Type, path string) (reflect.Type, error)
	// leaf is met with each value at d[i:end] read whole, read into t (nil:
	// dropped).
	leaf(i, end int, t reflect.Type)
}

// walkTyped walks the value at d[i] (valid JSON) as encoding/json decodes
// it into t, at key path path ("cases[0].operands[1]", kept only with
// paths), and returns the index just past it: an array read into a slice
// or array element by element, an object read into a struct or map value
// by value, each as its own type; anything else is read whole (a string,
// number or literal, or a value read as any, a RawMessage or what v calls
// opaque).
func walkTyped(d []byte, i int, t reflect.Type, path string, paths bool, v typeVisitor) (int, error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t != nil && v.opaque(t):
	case d[i] == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		i = skipSpace(d, i+1)
		for n := 0; d[i] != ']'; n++ {
			var at string
			if paths {
				at = path + "[" + strconv.Itoa(n) + "]"
			}
			end, err := walkTyped(d, i, t.Elem(), at, paths, v)
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
			var at string
			if paths {
				if at = keyText(d, i, end); path != "" {
					at = path + "." + at
				}
			}
			elem := reflect.Type(nil)
			if t.Kind() == reflect.Map {
				elem = t.Elem()
			} else {
				var err error
				if elem, err = v.field(i, end, fields, at); err != nil {
					return 0, err
				}
			}
			i = skipSpace(d, skipSpace(d, end)+1) // past the colon
			end, err := walkTyped(d, i, elem, at, paths, v)
			if err != nil {
				return 0, err
			}
			if i = skipSpace(d, end); d[i] == ',' {
				i = skipSpace(d, i+1)
			}
		}
		return i + 1, nil
	}
	end := skipValue(d, i)
	v.leaf(i, end, t)
	return end, nil
}
