package jsonerr

import (
	"encoding/json"
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

// Python reads a file as Python's json does for a reader of v's fields: a
// NaN or an infinity a field does not read is no fault (Python reads it as
// a float and the reader never looks at it), one a field reads is left for
// the decoder to refuse by its key; repeats keep the last, keys as spelled.
func TestPython(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"hidden_size": 64, "initializer_range": NaN}`, "64 0 map[] [] 0"},
		{`{"x": [Infinity, {"y": -Infinity}], "hidden_size": 64, "z": "NaN"}`, "64 0 map[] [] 0"},
		{`{"rms_norm_eps": NaN, "rms_norm_eps": 1e-5}`, "0 0 map[] [] 1e-05"},
		{`{"RMS_Norm_Eps": NaN, "hidden_size": 1}`, "1 0 map[] [] 0"},
		{`{"quantization": {"bits": 4, "scale": NaN}}`, "0 4 map[] [] 0"},
		{`{"rms_norm_eps": NaN}`, "rms_norm_eps is NaN (at line 1, column 18): a float that is not finite, which JSON has no number for; want a finite number"},
		{"{\"shape\": [1,\n -Infinity]}", "shape[1] is -Infinity (at line 2, column 2): a float that is not finite, which JSON has no number for; want a finite number"},
		{`{"__metadata__": {"a": Infinity}}`, "__metadata__.a is Infinity (at line 1, column 24): a float that is not finite, which JSON has no number for; want a finite number"},
	} {
		data := []byte(c.in)
		var v config
		got := ""
		if err := json.Unmarshal(Python(data, &v), &v); err != nil {
			got = Explain(err, data).Error()
		} else {
			got = fmt.Sprint(v.Hidden, v.Quant.Bits, v.Meta, v.Shape, v.Eps)
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}
