// Package shquote writes arguments as a POSIX shell reads them back, for
// the commands that messages tell a user to run.
package shquote

import "strings"

// Quote quotes an argument a shell would split or expand: anything but a
// plain word goes in single quotes, inside which a POSIX shell expands
// nothing ($, `, # and ! included); a quote in it closes them, is escaped
// and opens them again.
func Quote(a string) string {
	plain := a != "" && !strings.ContainsFunc(a, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
	})
	if plain {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
