// Package plural counts things in words: "1 run", "2 runs".
package plural

import "strconv"

// Of is n followed by noun, with an s unless n is 1.
func Of(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
