package suites

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mtlbench/mtlbench/internal/suggest"
)

// Pos is a position in a suite file; Line and Col are 1-based.
type Pos struct {
	File      string
	Line, Col int
}

// String formats the position as "file:line:col" (just "line:col" when the
// file is unnamed), the form editors and terminals turn into links; a place
// with no line (a `run --set` value) is its name alone.
func (p Pos) String() string {
	if p.Line == 0 && p.File != "" {
		return p.File
	}
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is one problem in a suite, at a position, with an optional hint
// printed in parentheses after the message.
type Error struct {
	Pos  Pos
	Msg  string
	Hint string
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": " + e.Msg + " (" + e.Hint + ")"
}

// ErrorList is every problem found in a suite, sorted by position. Its
// Error() lists them one per line so the user can fix a file in one pass.
type ErrorList []*Error

// maxListed bounds the message of a hostile or badly broken file; the list
// itself keeps every error.
const maxListed = 100

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i == maxListed {
			fmt.Fprintf(&b, "\n... and %d more errors", len(l)-maxListed)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap exposes the individual errors to errors.Is / errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// errs collects errors while a suite is checked; duplicates (the same
// problem reached through several matrix points) are dropped.
type errs struct {
	list  ErrorList
	seen  map[string]bool
	found int // every add, duplicates included, so callers can tell "any new problem?"
}

func (c *errs) add(p Pos, hint, format string, args ...any) {
	c.found++
	e := &Error{Pos: p, Msg: fmt.Sprintf(format, args...), Hint: hint}
	s := e.Error()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[s] {
		return
	}
	c.seen[s] = true
	c.list = append(c.list, e)
}

func (c *errs) err() error {
	if len(c.list) == 0 {
		return nil
	}
	sort.SliceStable(c.list, func(i, j int) bool {
		a, b := c.list[i].Pos, c.list[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return c.list
}

// ErrorAt returns an error at p in the suite's file:line:col form, for
// checks the runner makes with knowledge this package lacks. Several such
// errors can be returned together as an ErrorList.
func (s *Suite) ErrorAt(p Pos, format string, args ...any) error {
	if p.File == "" && s != nil {
		p.File = s.File
	}
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// didYouMean and closest are the module's one close-name rule
// (internal/suggest), under the names this package's errors use.
var (
	didYouMean = suggest.DidYouMean
	closest    = suggest.Closest
)
