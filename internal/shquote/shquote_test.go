package shquote

import "testing"

// An argument the printed commands (a resume line, bench's description, a
// hint naming a file) carry reads back as one word, as written: a double
// quote left $ and ` to the shell, and # unquoted began a comment that
// dropped the rest of the line (--resume included).
func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain/path-1.db", "plain/path-1.db"},
		{"--db=/a/b.db", "--db=/a/b.db"},
		{"", "''"},
		{"my run", "'my run'"},
		{"#42", "'#42'"},
		{"run$HOME", "'run$HOME'"},
		{"a`b`", "'a`b`'"},
		{"it's", `'it'\''s'`},
		{"~/x", "'~/x'"},
		{"a\nb", "'a\nb'"},
		{"ü.db", "'ü.db'"},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
