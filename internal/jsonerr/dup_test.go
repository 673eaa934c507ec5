package jsonerr

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A key given twice reads as Python's json reads it, the last value whole
// (encoding/json alone merges two objects), or is refused with both places
// where the rule says the file's reader refuses it.
func TestDedup(t *testing.T) {
	refuseIn := func(at string) func(path, key string) Dup {
		return func(path, key string) Dup {
			if path == at {
				return Refuse
			}
			return LastWins
		}
	}
	for _, c := range []struct {
		name, in string
		rule     func(path, key string) Dup
		want     any // what the result decodes to
		err      string
	}{
		{name: "object twice", in: `{"q": {"bits": 4, "group_size": 64}, "q": {"bits": 8}}`,
			want: map[string]any{"q": map[string]any{"bits": 8.0}}},
		{name: "scalar twice", in: `{"a": 1, "b": 2, "a": 3}`, want: map[string]any{"a": 3.0, "b": 2.0}},
		{name: "three times", in: `{"a": [1], "a": {"x": 1}, "a": null}`, want: map[string]any{"a": nil}},
		{name: "escaped spelling", in: `{"a": {"x": 1}, "\u0061": {"y": 2}}`, want: map[string]any{"a": map[string]any{"y": 2.0}}},
		{name: "nested", in: `{"l": [{"k": {"x": 1}, "k": {"y": 1}}]}`,
			want: map[string]any{"l": []any{map[string]any{"k": map[string]any{"y": 1.0}}}}},
		{name: "case differs", in: `{"a": 1, "A": 2}`, want: map[string]any{"a": 1.0, "A": 2.0}},
		{name: "no repeat", in: `{"a": {"b": [1, 2]}}`, want: map[string]any{"a": map[string]any{"b": []any{1.0, 2.0}}}},
		{name: "refused", in: "{\"l\": [{\"k\": 1,\n \"k\": 2}]}", rule: refuseIn("l[0]"),
			err: `key "k" is given twice in l[0] (at line 1, column 9 and at line 2, column 2)`},
		{name: "refused at the top", in: `{"k": 1, "k": 2}`, rule: refuseIn(""),
			err: `key "k" is given twice in the top level (at line 1, column 2 and at line 1, column 10)`},
		{name: "refused elsewhere", in: `{"k": {"a": 1, "a": 2}, "k": 3}`, rule: refuseIn("l[0]"), want: map[string]any{"k": 3.0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := Dedup([]byte(c.in), c.rule)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("%v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(c.in) || strings.Count(string(out), "\n") != strings.Count(c.in, "\n") {
				t.Errorf("%q: offsets and lines moved: %q", c.in, out)
			}
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%q reads as %v, want %v", c.in, got, c.want)
			}
		})
	}
	// Invalid JSON is left for the decoder to word.
	if out, err := Dedup([]byte(`{"a": 1, "a": }`), nil); err != nil || string(out) != `{"a": 1, "a": }` {
		t.Errorf("invalid JSON: %q, %v", out, err)
	}
}

// unescape reads a string's escapes as encoding/json does.
func TestUnescape(t *testing.T) {
	for _, q := range []string{`"a\u0061\n\t\/\\\""`, `"\ud83d\ude00x"`, `"\ud800x"`, `"\udc00\ud800"`, `"\u00e9\u0120"`, `"\ud83d\u0041"`, `"é\b\f\r"`} {
		var want string
		if err := json.Unmarshal([]byte(q), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(unescape([]byte(q[1 : len(q)-1]))); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// A tokenizer.json's vocabulary is an object of up to millions of keys,
// often escaped (ensure_ascii writers): reading them for repeats costs one
// allocation an escaped key, not a decoder's several.
func TestDedupAllocates(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"vocab": {`)
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"\u0120t%d": %d`, i, i)
	}
	b.WriteString(`}}`)
	data := []byte(b.String())
	if n := testing.AllocsPerRun(5, func() { Dedup(data, nil) }); n > 1100 {
		t.Errorf("%.0f allocations for 1000 escaped keys", n)
	}
}

// Reading objects for repeats keeps their members in one scratch stack,
// grown once for the largest, not a list made and grown for each object
// (BenchmarkParseVocab in runner/tokenizer).
func TestDedupReusesScratch(t *testing.T) {
	for _, c := range []struct {
		name          string
		objects, keys int
		most          float64
	}{
		{"many objects", 200, 100, 50},
		{"one large", 1, 20000, 50},
	} {
		var b strings.Builder
		b.WriteString(`[`)
		for o := range c.objects {
			if o > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`{`)
			for k := range c.keys {
				if k > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, `"t%d": %d`, k, k)
			}
			b.WriteString(`}`)
		}
		b.WriteString(`]`)
		data := []byte(b.String())
		if n := testing.AllocsPerRun(3, func() { dedup(data, nil) }); n > c.most {
			t.Errorf("%s: %.0f allocations for %d objects of %d keys, want at most %.0f", c.name, n, c.objects, c.keys, c.most)
		}
	}
}

// Once refuses a key given twice anywhere, naming it and both places, and
// passes JSON that gives each key once, and text that is no JSON, which
// its decoder words.
func TestOnce(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1, "b": {"c": 2}}`, ""},
		{`{"a": 1, "a": 2}`, `key "a" is given twice in the top level (at line 1, column 2 and at line 1, column 10)`},
		{"{\"x\": [{\"c\": 1,\n \"c\": 2}]}", `key "c" is given twice in x[0] (at line 1, column 9 and at line 2, column 2)`},
		{`{"a": `, ""},
	} {
		err := Once([]byte(tc.in))
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("Once(%q): %v, want %q", tc.in, err, tc.want)
		}
	}
}
