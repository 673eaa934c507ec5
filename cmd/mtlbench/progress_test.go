package main

import (
	"os"
	"testing"
)

// The progress bar is drawn on a terminal only: /dev/null is a character
// device, as a terminal is, and gets the plain lines a log does.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	t.Setenv("CI", "")
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer null.Close()
	if newProgress(null, false).tty {
		t.Errorf("%s taken for a terminal", os.DevNull)
	}
}
