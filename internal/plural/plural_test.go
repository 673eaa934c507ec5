package plural

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{
		{0, "run", "0 runs"}, {1, "run", "1 run"}, {2, "run", "2 runs"}, {-1, "run", "-1 runs"},
		{1, "tuned config", "1 tuned config"}, {3, "tuned config", "3 tuned configs"},
		// a consonant and y takes ies; a vowel and y an s
		{1, "entry", "1 entry"}, {0, "entry", "0 entries"}, {2, "key", "2 keys"}, {2, "y", "2 ys"},
	} {
		if got := Of(c.n, c.noun); got != c.want {
			t.Errorf("Of(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
