// Package plural counts things in words: "1 run", "2 runs".
package plural

import (
	"strconv"
	"strings"
)

// Of is n followed by noun, plural unless n is 1: an s, or ies for a
// consonant and y ("1 entry", "2 entries"; "2 keys").
func Of(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if b, ok := strings.CutSuffix(noun, "y"); ok && b != "" && !strings.ContainsRune("aeiou", rune(b[len(b)-1])) {
		return strconv.Itoa(n) + " " + b + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
