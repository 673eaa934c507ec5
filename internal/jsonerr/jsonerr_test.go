package jsonerr

import (
	"encoding/json"
	"errors"
	"github.com/mtlbench/mtlbench/internal/clip"
	"io"
	"strings"
	"testing"
)

type quant struct {
	Bits int `json:"bits"`
}

// spelt is a struct of fields config takes in as its own (an embedded
// struct), whose Go name is no key.
type spelt struct {
	NEmbd int `json:"n_embd"`
}

type config struct {
	spelt
	Hidden int               `json:"hidden_size"`
	Quant  quant             `json:"quantization"`
	Meta   map[string]string `json:"__metadata__"`
	Shape  []int64           `json:"shape"`
	Layers uint32            `json:"num_layers"`
	Eps    float64           `json:"rms_norm_eps"`
	Tied   bool              `json:"tie_word_embeddings"`
	Archs  []string          `json:"architectures"`
	Model  struct {
		Type string `json:"type"`
	} `json:"model"`
}

func TestExplain(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"hidden_size": "64"}`, `hidden_size is a JSON string ("64"), want a whole number`},
		{`{"hidden_size": 96.5}`, `hidden_size is a JSON number 96.5, want a whole number`},
		{`{"quantization": {"bits": "4"}}`, `quantization.bits is a JSON string ("4"), want a whole number`},
		{`{"__metadata__": {"format": 5}}`, `__metadata__ is a JSON number, want a string`},
		{`{"shape": [1, 96.0]}`, `shape is a JSON number 96.0, want a whole number`},
		{`{"shape": [1180591620717411303424]}`, `shape is 1180591620717411303424, beyond the 64-bit whole numbers it is read as`},
		{`{"num_layers": -2}`, `num_layers is -2, want a whole number not below 0`},
		{`{"num_layers": 4294967296}`, `num_layers is 4294967296, beyond the 32-bit whole numbers it is read as`},
		{`{"rms_norm_eps": 1e999}`, `rms_norm_eps is 1e999, beyond a 64-bit float's range`},
		{`{"tie_word_embeddings": "false"}`, `tie_word_embeddings is a JSON string ("false"), want true or false`},
		{`{"architectures": "Qwen3ForCausalLM"}`, `architectures is a JSON string ("Qwen3ForCausalLM"), want a list`},
		{`{"hidden_size": true}`, `hidden_size is a JSON bool (true), want a whole number`},
		{`{"model": []}`, `model is a JSON array, want an object`},
		{`{"model": {"type": 5}}`, `model.type is a JSON number, want a string`},
		// An embedded struct's Go name, which encoding/json puts in the
		// path, is no key of the file.
		{`{"n_embd": true}`, `n_embd is a JSON bool (true), want a whole number`},
		{`{"model": {}, "n_embd": 8.5}`, `n_embd is a JSON number 8.5, want a whole number`},
		{`[]`, `the file is a JSON array, want an object`},
		{`{"hidden_size": "a \" quoted and much longer string than any quote needs"}`, `hidden_size is a JSON string ("a \" quoted and much longer string t..."), want a whole number`},
		{"{\n  \"hidden_size\": x}", `not valid JSON at line 2, column 18: invalid character 'x' looking for beginning of value`},
		// A byte order mark, which Python's json and serde_json refuse, is
		// named as what it is, not as a character 'ï'.
		{"\ufeff{\"hidden_size\": 64}", `not valid JSON: the text starts with a byte order mark (EF BB BF), which a JSON file does not hold: save it without one`},
		{"{\"hidden_size\": 64}\ufeff", `not valid JSON at line 1, column 20: invalid character 'ï' after top-level value`},
		// Python's json writes a float that is not finite as NaN or
		// Infinity, which JSON lacks: the key is named, with the place.
		{`{"rms_norm_eps": NaN}`, `rms_norm_eps is NaN (at line 1, column 18): a float that is not finite, which JSON has no number for; want a finite number`},
		{"{\"quantization\": {\"bits\": 4,\n \"scale\": -Infinity}}", `quantization.scale is -Infinity (at line 2, column 11): a float that is not finite, which JSON has no number for; want a finite number`},
		{`{"shape": [1, Infinity]}`, `shape[1] is Infinity (at line 1, column 15): a float that is not finite, which JSON has no number for; want a finite number`},
		{`[NaN]`, `[0] is NaN (at line 1, column 2): a float that is not finite, which JSON has no number for; want a finite number`},
		{`{"a": {"b": [1, {"c": 2}], "d": NaN}}`, `a.d is NaN (at line 1, column 33): a float that is not finite, which JSON has no number for; want a finite number`},
		// A key of the file's set in the path is cut as internal/clip cuts
		// it: a key of megabytes is not copied into the message.
		{`{"a": {"` + strings.Repeat("k", 1<<20) + `": NaN}}`, `a."` + strings.Repeat("k", clip.Most-3) + `..." (1048576 characters) is NaN (at line 1, column 1048588): a float that is not finite, which JSON has no number for; want a finite number`},
	} {
		var cfg config
		err := Explain(json.Unmarshal([]byte(c.in), &cfg), []byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("%.200s:\n got %.400v\nwant %.400s", c.in, err, c.want)
		}
	}
	// Without the text a place is a byte offset and a value is not quoted.
	var cfg config
	if err := Explain(json.Unmarshal([]byte(`{"a": x}`), &cfg), nil); err == nil || err.Error() != "not valid JSON at byte 7: invalid character 'x' looking for beginning of value" {
		t.Errorf("no data: %v", err)
	}
	if err := Explain(io.ErrUnexpectedEOF, nil); err == nil || err.Error() != "not valid JSON: the text ends inside a value: cut short" {
		t.Errorf("EOF: %v", err)
	}
	other := errors.New("other")
	if Explain(other, nil) != other || Explain(nil, nil) != nil {
		t.Error("other errors are not returned as they are")
	}
}

// ExplainLine places a syntax error in one line of a file by its column
// alone: the caller gives the file's line, so no message holds two.
func TestExplainLine(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"a": 1,, "b": 2}`, "not valid JSON at column 9: invalid character ','"},
		{`{"a": 1`, "not valid JSON at column 7: unexpected end of JSON input"},
		{`{"é": x}`, "not valid JSON at column 7: invalid character 'x'"},
		{`{"a": [{"v": NaN}]}`, "a[0].v is NaN (column 14): a float that is not finite"},
		{`{"a": -Infinity}`, "a is -Infinity (column 7): a float that is not finite"},
	} {
		var v map[string]any
		err := ExplainLine(json.Unmarshal([]byte(c.data), &v), []byte(c.data))
		if err == nil || len(err.Error()) < len(c.want) || err.Error()[:len(c.want)] != c.want {
			t.Errorf("%s: %v, want %q", c.data, err, c.want)
		}
	}
}

// Text that is not UTF-8 is named by its first byte that begins no UTF-8
// character, where it is: encoding/json would read it as U+FFFD.
func TestUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": "é"}`, ""},
		{"{\"a\": \"\xef\xbf\xbd\"}", ""}, // U+FFFD itself is text
		{"{\"a\xff\": 1}", "not UTF-8 text at line 1, column 4: byte 0xff begins no UTF-8 character, and a JSON file is UTF-8"},
		{"{\n  \"é\": \"\xc3\"}", "not UTF-8 text at line 2, column 9: byte 0xc3 begins no UTF-8 character"},
		{"\xed\xa0\x80", "not UTF-8 text at line 1, column 1: byte 0xed begins no UTF-8 character"}, // a surrogate's encoding
	} {
		err := UTF8([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
}

// A \u escape of half a surrogate pair, alone, is named where it is; a
// pair, an escaped backslash before a u and other escapes are text.
func TestLoneSurrogate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": "\ud83d\ude00", "b": "\u0120\u00e9"}`, ""},
		{`{"a": "\\ud800"}`, ""},
		{`{"a": "x\ud800"}`, `a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 9: it stands for no character`},
		{"{\n\"a\": \"\\udc00\"}", `a string holds \udc00, half of a UTF-16 surrogate pair without its other half, at line 2, column 7`},
		{`{"\ud800\u0041": 1}`, `a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 3`},
		{`{"a": "\\\ud800"}`, `a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 10`},
		{`{"a": "\ud800\ud800"}`, `a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 8`},
	} {
		err := LoneSurrogate([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

// A whole file's wrong type is placed by the line and column its value
// starts at, as its syntax errors are.
func TestExplainFile(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\n  \"hidden_size\": \"64\"\n}", `hidden_size is a JSON string ("64"), want a whole number (at line 2, column 18)`},
		{"{\n  \"hidden_size\": 96.5}", `hidden_size is a JSON number 96.5, want a whole number (at line 2, column 18)`},
		{"{\"num_layers\": -2}", `num_layers is -2, want a whole number not below 0 (at line 1, column 16)`},
		{"{\"tie_word_embeddings\": \"a \\\" b\"}", `tie_word_embeddings is a JSON string ("a \" b"), want true or false (at line 1, column 25)`},
		{"{\"hidden_size\": true}", `hidden_size is a JSON bool (true), want a whole number (at line 1, column 17)`},
		{"{\n \"model\": [1]}", `model is a JSON array, want an object (at line 2, column 11)`},
		{"{\"archs\": 1, \"architectures\": {\"a\": 1}}", `architectures is a JSON object, want a list (at line 1, column 31)`},
		{"{\"rms_norm_eps\": 1e999}", `rms_norm_eps is 1e999, beyond a 64-bit float's range (at line 1, column 18)`},
		{"[]", `the file is a JSON array, want an object (at line 1, column 1)`},
		{"{\"a\": x}", `not valid JSON at line 1, column 7: invalid character 'x' looking for beginning of value`},
		// encoding/json's nesting bound is named as what it is, where the
		// list past it opens (the object is the first level), not as a bad
		// character.
		{"{\"a\": " + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "}",
			"not valid JSON at line 1, column 10006: lists and objects nest deeper than 10000 levels, past what any JSON reader of model files takes"},
	} {
		var cfg config
		err := ExplainFile(json.Unmarshal([]byte(c.in), &cfg), []byte(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
}

// Nesting past the limit is named where its first list or object opens;
// brackets in strings are text.
func TestNesting(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		in   string
		want string
	}{
		{`{"a": ` + nest(126) + `}`, ""},
		{`{"a": ` + nest(127) + `}`, "lists and objects nest deeper than 127 levels at line 1, column 133"},
		{`{"a": "` + strings.Repeat("[", 200) + `"}`, ""},
		{`{"a\"[[": ` + nest(126) + `}`, ""},
	} {
		err := Nesting([]byte(c.in), SerdeDepth)
		if (err == nil) != (c.want == "") || err != nil && err.Error() != c.want {
			t.Errorf("%.40s...: %v, want %q", c.in, err, c.want)
		}
	}
}

// A text that ends inside a value is worded one way, an array or an
// object, read by Unmarshal or a Decoder; an error elsewhere, or a text
// of more after a whole value, is not that, nor is a line that ends
// inside its value.
func TestCutShortOneWording(t *testing.T) {
	const want = "not valid JSON: " + CutShort
	for _, c := range []struct {
		data string
		cut  bool
	}{
		{`[{"a": 1`, true},
		{`{"a": [1`, true},
		{`[`, true},
		{`{"a": 1` + "\n\n", true},
		{`[1,,2]`, false},
		{`{"a": 1}}`, false},
	} {
		var v any
		for i, err := range []error{json.Unmarshal([]byte(c.data), &v), json.NewDecoder(strings.NewReader(c.data)).Decode(&v)} {
			if err == nil {
				continue
			}
			got := Explain(err, []byte(c.data))
			if IsCutShort(err, []byte(c.data)) != c.cut || (got.Error() == want) != c.cut {
				t.Errorf("%q: %v (IsCutShort %v), want cut short %v", c.data, got, IsCutShort(err, []byte(c.data)), c.cut)
			}
			// A line that Unmarshal finds ending inside its value is its
			// caller's to word: more lines may follow (TestExplainLine).
			if lg := ExplainLine(err, []byte(c.data)); i == 0 && c.cut && !strings.Contains(c.data, "\n") && lg.Error() == want {
				t.Errorf("%q as a line: %v, said cut short", c.data, lg)
			}
		}
	}
}
