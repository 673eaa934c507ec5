package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/suggest"
)

// enumFlag refuses a value of flag ("--strategy") that is none of choices,
// the one way a flag of named values says so: the flag, the value, the
// choices and the one a near miss meant.
func enumFlag(flag, v string, choices ...string) error {
	if slices.Contains(choices, v) {
		return nil
	}
	want := choices[0]
	if n := len(choices); n > 1 {
		want = strings.Join(choices[:n-1], ", ") + " or " + choices[n-1]
	}
	msg := fmt.Sprintf("%s %q: want %s", flag, v, want)
	if d := suggest.DidYouMean(v, choices); d != "" {
		msg += " (" + d + ")"
	}
	return errors.New(msg)
}
