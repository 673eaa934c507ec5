package jsonerr

import "testing"

func TestKeyAt(t *testing.T) {
	for _, c := range []struct{ json, key, want string }{
		{"{\n  \"a\": 1,\n  \"b\": null\n}", "b", "at line 3, column 8"},
		{`{"a": {"b": 1}, "b": 2}`, "b", "at line 1, column 22"},
		// Python's json keeps the last of a key given twice.
		{"{\"b\": 1,\n\"b\":null}", "b", "at line 2, column 5"},
		{`{"a": 1}`, "b", ""},
		{`[1]`, "b", ""},
		{`{"b": NaN}`, "b", ""},
	} {
		if got := KeyAt([]byte(c.json), c.key); got != c.want {
			t.Errorf("KeyAt(%q, %q) = %q, want %q", c.json, c.key, got, c.want)
		}
	}
}
