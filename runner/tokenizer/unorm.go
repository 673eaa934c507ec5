package tokenizer

import (
	"slices"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxNonStarters is where x/text's norm, keeping to UAX #15's Stream-Safe
// Text Format, puts a U+034F after a run of non-starters (combining marks)
// and orders the run in pieces of that length.
const maxNonStarters = 30

// normForm is Unicode normalization form f as HF's normalizers give it
// (the unicode-normalization-alignments crate): a run of combining marks
// of any length is ordered whole and nothing is inserted. Text with no run
// longer than x/text's limit is x/text's own result; a longer one (Zalgo
// text) is decomposed, ordered and composed here. See docs/tokenizer.md.
func normForm(f norm.Form) func(string) string {
	return func(s string) string {
		if !longNonStarterRun(s) {
			return f.String(s)
		}
		decomp, compose := norm.NFD, false
		switch f {
		case norm.NFC:
			compose = true
		case norm.NFKC:
			decomp, compose = norm.NFKD, true
		case norm.NFKD:
			decomp = norm.NFKD
		}
		// Each character's own decomposition is short, so x/text gives it
		// whole; the runs are then put in canonical order, stably by ccc.
		var rs []rune
		for _, r := range s {
			rs = append(rs, []rune(decomp.String(string(r)))...)
		}
		for i := 0; i < len(rs); {
			if ccc(rs[i]) == 0 {
				i++
				continue
			}
			j := i
			for j < len(rs) && ccc(rs[j]) != 0 {
				j++
			}
			slices.SortStableFunc(rs[i:j], func(a, b rune) int { return int(ccc(a)) - int(ccc(b)) })
			i = j
		}
		if compose {
			rs = composeRunes(rs)
		}
		return string(rs)
	}
}

// longNonStarterRun reports whether s holds more non-starters in a row
// than x/text's norm orders whole.
func longNonStarterRun(s string) bool {
	n := 0
	for i := 0; i < len(s); {
		p := norm.NFKD.PropertiesString(s[i:])
		if p.Size() == 0 {
			_, sz := utf8.DecodeRuneInString(s[i:])
			i += sz
			n = 0
			continue
		}
		if p.LeadCCC() == 0 {
			n = 0
		} else if n++; n > maxNonStarters-2 {
			// A character's decomposition may add non-starters:
			// close to the limit, take the slow path.
			return true
		}
		i += p.Size()
	}
	return false
}

func ccc(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }

// composeRunes is UAX #15's canonical composition of decomposed, ordered
// text: a character joins the last starter unless a character between has
// ccc 0 or at least its own.
func composeRunes(rs []rune) []rune {
	out := rs[:0:0]
	starter, last := -1, -1 // last: ccc of the last character kept after the starter, -1 for none
	for _, r := range rs {
		c := int(ccc(r))
		if starter >= 0 && (last == -1 || last != 0 && last < c) {
			if p, ok := composePair(out[starter], r); ok {
				out[starter] = p
				continue
			}
		}
		if c == 0 {
			starter, last = len(out), -1
		} else {
			last = c
		}
		out = append(out, r)
	}
	return out
}

// composePair is the primary composite of a and b, if they have one.
func composePair(a, b rune) (rune, bool) {
	s := norm.NFC.String(string(a) + string(b))
	if r, n := utf8.DecodeRuneInString(s); n == len(s) && r != utf8.RuneError {
		return r, true
	}
	return 0, false
}
