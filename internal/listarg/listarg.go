// Package listarg reads a comma-separated list given on the command line
// (run references, --tag, --threshold, bench's -b/-p/-n/-d, ...), so that
// every list refuses an empty item in one wording, whatever package reads it.
package listarg

import (
	"fmt"
	"strings"
)

// EmptyItemError is an empty item of a list: "main,$PR" with PR unset
// would read as main alone (docs/perf-gate.md, "Gating stored runs").
type EmptyItemError struct {
	What  string // what the list is ("--tag", "run references"); may be ""
	List  string // the list as given
	Item  int    // the empty item's place, from 1
	Items int    // how many items the list has
	Seps  string // the separators of the list ("" for a comma alone)
	// InFile is set by a caller reading the list from a file (a suite's
	// range), where no shell variable can have been left unset: the
	// file's position names where it is.
	InFile bool
}

// sepNames are the separators' names, for the error's guess.
var sepNames = map[rune]string{',': "comma", ';': "semicolon"}

func (e *EmptyItemError) Error() string {
	seps := e.Seps
	if seps == "" {
		seps = ","
	}
	var names []string
	for _, r := range seps {
		names = append(names, sepNames[r])
	}
	guess := "a " + strings.Join(names, " or ") + " too many"
	if !e.InFile {
		guess += ", or a variable left unset"
	}
	msg := fmt.Sprintf("%q: item %d of %d is empty (%s?)", e.List, e.Item, e.Items, guess)
	if e.What == "" {
		return msg
	}
	return e.What + " " + msg
}

// Split splits list at its commas, each item trimmed. An empty item is an
// *EmptyItemError naming what the list is (what) and which item.
func Split(what, list string) ([]string, error) {
	return SplitAt(what, list, ",")
}

// SplitAt is Split at any of the separators seps, of sepNames (tune's
// --shape takes ';' too).
func SplitAt(what, list, seps string) ([]string, error) {
	// Every separator read as the first, which then splits.
	items := strings.Split(strings.Map(func(r rune) rune {
		if strings.ContainsRune(seps, r) {
			return rune(seps[0])
		}
		return r
	}, list), seps[:1])
	for i, p := range items {
		items[i] = strings.TrimSpace(p)
	}
	for i, p := range items {
		if p == "" {
			e := &EmptyItemError{What: what, List: list, Item: i + 1, Items: len(items)}
			if seps != "," {
				e.Seps = seps
			}
			return nil, e
		}
	}
	return items, nil
}

// Named is err of a list read below the command line (suites.ParseIntList
// splits with no name), said under the flag it came from: an empty item
// takes what as its name, as Split would have given it; any other error is
// prefixed "what: ".
func Named(what string, err error) error {
	// Only the list's own error: one wrapped in more words keeps them.
	if empty, ok := err.(*EmptyItemError); ok && empty.What == "" {
		named := *empty
		named.What = what
		return &named
	}
	return fmt.Errorf("%s: %w", what, err)
}
