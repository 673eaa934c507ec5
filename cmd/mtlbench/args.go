package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's flags ahead of its positional arguments, so
// `mtlbench run suite.yaml --db x.db` works as people type it: urfave/cli v2
// stops reading flags at the first positional argument.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out, _, flags, rest := commandArgs(app, args)
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var named, positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		named = append(named, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(rest) {
			i++
			named = append(named, rest[i])
		}
	}
	return append(append(out, named...), positional...)
}

// commandArgs walks args down the command path: out holds the program, the
// commands and the flags met on the way (with their values), path the
// commands' names, flags what the last command takes, and rest the
// arguments after the path.
func commandArgs(app *cli.App, args []string) (out, path []string, flags []cli.Flag, rest []string) {
	out = []string{args[0]}
	cmds := app.Commands
	i := 1
	takes := func(flags []cli.Flag, a string) bool {
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			return false
		}
		for _, f := range flags {
			if _, isBool := f.(*cli.BoolFlag); !isBool && slices.Contains(f.Names(), name) {
				return true
			}
		}
		return false
	}
	appFlags := app.Flags
	// Walk the command path: flags met on the way stay put (with their
	// values), commands narrow the set.
	for ; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
			cur := flags
			if cur == nil {
				cur = appFlags
			}
			if takes(cur, a) && i+1 < len(args) {
				i++
				out = append(out, args[i])
			}
			continue
		}
		var found *cli.Command
		for _, c := range cmds {
			if c.HasName(a) {
				found = c
			}
		}
		if found == nil {
			break
		}
		out, path = append(out, a), append(path, a)
		cmds, flags = found.Subcommands, found.Flags
		if len(cmds) == 0 {
			i++
			break
		}
	}
	return out, path, flags, args[min(i, len(args)):]
}

// listFlags are the flags that take a comma list, by command path. Given
// twice, their values join (bench -b 1 -b 4 is -b 1,4), as llama-bench
// reads a repeated flag, where a flag of one value is refused
// (checkFlagArgs).
var listFlags = map[string][]string{"bench": {"batch", "prompt", "gen", "depth", "request-rate", "fusion"}}

// joinLists gives each list flag (listFlags) of the command args runs once,
// its values joined with commas where it was given more than once, at the
// place it was first given.
func joinLists(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out, path, flags, rest := commandArgs(app, args)
	lists := listFlags[strings.Join(path, " ")]
	if len(lists) == 0 {
		return args
	}
	long, takesValue := map[string]string{}, map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
			if slices.Contains(lists, f.Names()[0]) {
				long[n] = f.Names()[0]
			}
		}
	}
	at := map[string]int{} // a list flag's value in kept
	var kept []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			kept = append(kept, rest[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		flag := strings.HasPrefix(a, "-") && a != "-"
		l, isList := long[name]
		if !flag || !isList {
			kept = append(kept, a)
			if flag && !hasValue && takesValue[name] && i+1 < len(rest) {
				i++ // its value, which may look like a flag
				kept = append(kept, rest[i])
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(rest) {
				kept = append(kept, a) // no value: the parser says so
				continue
			}
			i++
			value = rest[i]
		}
		if j, again := at[l]; again {
			kept[j] += "," + value
			continue
		}
		kept = append(kept, "--"+l, value)
		at[l] = len(kept) - 1
	}
	return append(out, kept...)
}

// pathFlags are the flags that name a file or folder, by their first name.
var pathFlags = []string{"db", "out", "steps", "summary", "keep", "dir", "tokenizer"}

// checkFlagArgs refuses, before any work, what the flag parser would take
// without a word: a flag of one value given twice (runs --limit 3 --limit
// 4), which keeps the last and drops the other, as --set refuses a name
// twice (flags that collect values, --set and --threshold, switches, and
// list flags, which joinLists joins first, may repeat); and a
// path flag given an empty value (--db "$DB" with DB unset), which reads as
// left out: the default store, no step log.
func checkFlagArgs(app *cli.App, args []string) error {
	if len(args) < 2 {
		return nil
	}
	_, path, flags, rest := commandArgs(app, args)
	usage := func(format string, a ...any) error {
		cmd := strings.Join(append([]string{app.Name}, path...), " ")
		return fmt.Errorf("%s: %s (see `%s --help`)", strings.Join(path, " "), fmt.Sprintf(format, a...), cmd)
	}
	seen := map[string]string{}
	for i := 0; i < len(rest) && rest[i] != "--"; i++ {
		a := rest[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f cli.Flag
		for _, g := range flags {
			if slices.Contains(g.Names(), name) {
				f = g
			}
		}
		if f == nil {
			continue
		}
		if _, isBool := f.(*cli.BoolFlag); isBool {
			continue
		}
		given, got := a, hasValue
		if !hasValue && i+1 < len(rest) {
			i++ // its value, which may look like a flag (-1)
			value, given, got = rest[i], a+" "+rest[i], true
		}
		long := "--" + f.Names()[0]
		if got && value == "" && slices.Contains(pathFlags, f.Names()[0]) {
			return usage("%s \"\": an empty path (leave %s out for the default)", long, long)
		}
		switch f.(type) {
		case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
			continue
		}
		if first, twice := seen[long]; twice {
			return usage("%s given twice (%s, %s): give it once", long, first, given)
		}
		seen[long] = given
	}
	return nil
}
