package main

import (
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
	out := []string{args[0]}
	cmds := app.Commands
	var flags []cli.Flag
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
		out = append(out, a)
		cmds, flags = found.Subcommands, found.Flags
		if len(cmds) == 0 {
			i++
			break
		}
	}
	takesValue := map[string]bool{}
	for _, f := range flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var named, positional []string
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		named = append(named, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(args) {
			i++
			named = append(named, args[i])
		}
	}
	return append(append(out, named...), positional...)
}
