package listarg

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		what, list string
		want       []string
		err        string
	}{
		{"--tag", "a, b ,c", []string{"a", "b", "c"}, ""},
		{"--tag", "a", []string{"a"}, ""},
		{"--tag", "a,,b", nil, `--tag "a,,b": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{"run references", "41,", nil, `run references "41,": item 2 of 2 is empty (a comma too many, or a variable left unset?)`},
		{"--kernel", " ", nil, `--kernel " ": item 1 of 1 is empty (a comma too many, or a variable left unset?)`},
		{"", "1,,2", nil, `"1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
	} {
		got, err := Split(c.what, c.list)
		if msg := fmt.Sprint(err); c.err == "" && err != nil || c.err != "" && msg != c.err || !slices.Equal(got, c.want) {
			t.Errorf("Split(%q, %q) = %q, %v; want %q, %q", c.what, c.list, got, err, c.want, c.err)
		}
	}
}

// A list of more separators than the comma (tune's --shape) splits at
// each, and its empty item's guess names them.
func TestSplitAt(t *testing.T) {
	for _, c := range []struct {
		list, seps string
		want       []string
		err        string
	}{
		{"a;b, c", ",;", []string{"a", "b", "c"}, ""},
		{"a;b", ",", []string{"a;b"}, ""},
		{"a;;b", ",;", nil, `--shape "a;;b": item 2 of 3 is empty (a comma or semicolon too many, or a variable left unset?)`},
		{"a,", ",;", nil, `--shape "a,": item 2 of 2 is empty (a comma or semicolon too many, or a variable left unset?)`},
		{"a,,b", ",", nil, `--shape "a,,b": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
	} {
		got, err := SplitAt("--shape", c.list, c.seps)
		if msg := fmt.Sprint(err); c.err == "" && err != nil || c.err != "" && msg != c.err || !slices.Equal(got, c.want) {
			t.Errorf("SplitAt(%q, %q) = %q, %v; want %q, %q", c.list, c.seps, got, err, c.want, c.err)
		}
	}
}

// An error of a list read with no name takes the flag's; any other is
// prefixed with it.
func TestNamed(t *testing.T) {
	_, unnamed := Split("", "1,,2")
	_, named := Split("--tag", "a,")
	for _, c := range []struct {
		err  error
		want string
	}{
		{unnamed, `--batch "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{fmt.Errorf("wrapped: %w", unnamed), `--batch: wrapped: "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{named, `--batch: --tag "a,": item 2 of 2 is empty (a comma too many, or a variable left unset?)`},
		{errors.New("0 is below 1"), "--batch: 0 is below 1"},
	} {
		if got := Named("--batch", c.err).Error(); got != c.want {
			t.Errorf("Named(--batch, %v) = %q, want %q", c.err, got, c.want)
		}
	}
	// The unnamed error is left as it was.
	if got := unnamed.Error(); got != `"1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)` {
		t.Errorf("Named changed the error it named: %q", got)
	}
}

// A list read from a file guesses no variable left unset: none is there.
func TestEmptyItemInFile(t *testing.T) {
	for _, c := range []struct {
		e    EmptyItemError
		want string
	}{
		{EmptyItemError{List: "1,,2", Item: 2, Items: 3}, `"1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{EmptyItemError{List: "1,,2", Item: 2, Items: 3, InFile: true}, `"1,,2": item 2 of 3 is empty (a comma too many?)`},
		{EmptyItemError{What: "--shape", List: "a;", Item: 2, Items: 2, Seps: ",;", InFile: true}, `--shape "a;": item 2 of 2 is empty (a comma or semicolon too many?)`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}
