package clip

import (
	"strings"
	"testing"
)

// A string of at most Most characters is quoted whole, a longer one cut
// to its first Most-3 with its length said, whatever its length in bytes.
func TestQuote(t *testing.T) {
	long := strings.Repeat("é", 1<<20)
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"gpt2", `"gpt2"`},
		{"a\nb\x00\xff", `"a\nb\x00\xff"`},
		{strings.Repeat("x", Most), `"` + strings.Repeat("x", Most) + `"`},
		{strings.Repeat("x", Most+1), `"` + strings.Repeat("x", Most-3) + `..." (41 characters)`},
		{long, `"` + strings.Repeat("é", Most-3) + `..." (1048576 characters)`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%.20q) = %.80s, want %.80s", c.in, got, c.want)
		}
	}
}

// A key is named bare where it is short and plain, else as Quote names it.
func TestKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"w", "w"},
		{"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"},
		{strings.Repeat("x", Most), strings.Repeat("x", Most)},
		{strings.Repeat("x", Most+1), `"` + strings.Repeat("x", Most-3) + `..." (41 characters)`},
		{"a\nb", `"a\nb"`},
		{"a\x00", `"a\x00"`},
	} {
		if got := Key(c.in); got != c.want {
			t.Errorf("Key(%.20q) = %.80s, want %.80s", c.in, got, c.want)
		}
	}
}
