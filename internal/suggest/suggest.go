// Package suggest finds the known name a mistyped one was probably meant
// to be, for the "did you mean" of every error and warning that names an
// unknown word (suite keys, gate metrics, environment variables).
package suggest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DidYouMean returns `did you mean "x"?` for the candidate closest to word,
// or "" when nothing is close enough to be a plausible typo.
func DidYouMean(word string, candidates []string) string {
	if best := Closest(word, candidates); best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return ""
}

// Closest is the candidate nearest to word, ignoring case, or "" when none
// is near enough to be a plausible typo of it.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best := Typo(word, candidates)
	if best != "" || len(w) < 3 {
		return best
	}
	// An abbreviation ("truncate" for "truncate-layers") is far in edits
	// but unambiguous when only one candidate starts with it.
	for _, c := range candidates {
		if strings.HasPrefix(strings.ToLower(c), w) {
			if best != "" {
				return ""
			}
			best = c
		}
	}
	return best
}

// Typo is the candidate within a few edits of word, ignoring case, or ""
// when none is: Closest without its abbreviations, for a name that may
// also be a shortened one of its own (a checkpoint's, beside the presets).
func Typo(word string, candidates []string) string {
	w := strings.ToLower(word)
	// Short words are within a couple of edits of almost anything, so the
	// allowed distance scales with length.
	limit := utf8.RuneCountInString(w) / 2
	if limit > 3 {
		limit = 3
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		if d := editDistance(w, strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance over runes:
// Levenshtein's, with two neighbours swapped counting as one edit, the
// commonest typo ("BD" for "DB"), which Levenshtein counts as two and so
// puts past the limit of a short word.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// rows i-2, i-1 and i of the table
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
