package suggest

import "testing"

// A swap of two neighbouring letters is one edit, so a short name typed
// with two letters swapped still finds the name meant.
func TestClosest(t *testing.T) {
	for _, c := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"BD", []string{"DB", "DB_WAIT", "HISTORY", "TUNED"}, "DB"},
		{"TUNDE", []string{"DB", "HISTORY", "TUNED"}, "TUNED"},
		{"HISOTRY", []string{"DB", "HISTORY", "TUNED"}, "HISTORY"},
		{"cuad", []string{"auto", "cpu", "cuda", "metal", "metal-emu"}, "cuda"},
		{"tinyllama", []string{"tinyllama-1.1b", "qwen2-0.5b"}, "tinyllama-1.1b"},
		{"XY", []string{"DB"}, ""},
		{"zzzzzz", []string{"HISTORY", "TUNED"}, ""},
	} {
		if got := Closest(c.word, c.candidates); got != c.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", c.word, c.candidates, got, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"db", "db", 0},
		{"bd", "db", 1},
		{"abc", "acb", 1},
		{"abc", "ca", 3},
		{"kitten", "sitting", 3},
		{"tuned", "tunde", 1},
		{"héllo", "hlélo", 1},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}
