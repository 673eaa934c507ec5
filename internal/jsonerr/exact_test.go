package jsonerr

import (
	"fmt"
	"testing"
)

// A struct's field takes the key spelled as its name alone: one of other
// case or folding names no field, as in Python's json readers and serde,
// and a map's keys are kept as given.
func TestUnmarshalKeysAsSpelled(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"hidden_size": 64, "Hidden_Size": 32}`, "64 0 map[] []"},
		{`{"HIDDEN_SIZE": 32}`, "0 0 map[] []"},
		{`{"Hidden_Size": 32, "hidden_size": 64}`, "64 0 map[] []"},
		{`{"hidden_\u0073ize": 64}`, "64 0 map[] []"}, // an escape is the same key
		{`{"quantization": {"Bits": 8}}`, "0 0 map[] []"},
		{`{"quantization": {"bits": 8, "BITS": 4}}`, "0 8 map[] []"},
		{`{"__metadata__": {"Format": "pt"}}`, "0 0 map[Format:pt] []"},
		{`{"ſhape": [1], "shape": [2]}`, "0 0 map[] [2]"},
		{`{"model": {"TYPE": "BPE"}, "x": [{"Hidden_Size": 1}]}`, "0 0 map[] []"},
	} {
		var v config
		if err := Unmarshal([]byte(c.in), &v); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		got := fmt.Sprint(v.Hidden, v.Quant.Bits, v.Meta, v.Shape)
		if v.Model.Type != "" {
			got += " type " + v.Model.Type
		}
		if got != c.want {
			t.Errorf("%s: read %s, want %s", c.in, got, c.want)
		}
	}
}
