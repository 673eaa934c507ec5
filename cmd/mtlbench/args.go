package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/homepath"
	"github.com/urfave/cli/v2"
)

// tokenKind says what one argument is to the flag parser.
type tokenKind int

const (
	tokCommand tokenKind = iota // a command's name on the command path
	tokFlag                     // a flag, with its value where it takes one
	tokArg                      // a positional argument
	tokEnd                      // "--": what follows is positional
)

// token is one element of a command line as urfave/cli reads it: Go's flag
// parser, one command at a time, each command's flags up to its first
// positional argument or "--", the next word naming its subcommand.
type token struct {
	kind  tokenKind
	args  []string // the arguments it spans: a flag and its value given apart, else one
	level int      // the commands named before it: 0 is the program's own flags
	// A flag's name as given (no dashes, no value), the flag of its
	// command it names (nil: none, which the parser refuses), and its value.
	name     string
	flag     cli.Flag
	value    string
	hasValue bool
}

// commandLine is a command line read against the app's commands and flags.
type commandLine struct {
	prog   string
	path   []*cli.Command // the commands named, outermost first
	tokens []token
}

// tokenize reads args as the flag parser will, so that what the command
// line is rewritten or refused for (interspersed, joinLists, checkFlagArgs)
// is what the parser then reads: a flag of a value takes the next argument
// whatever it looks like (-1, -, --), a switch takes a value only after =,
// "--" ends a command's flags, and the first positional word that names no
// subcommand ends the command path.
func tokenize(app *cli.App, args []string) commandLine {
	var cl commandLine
	if len(args) == 0 {
		return cl
	}
	cl.prog = args[0]
	flags, cmds := app.Flags, app.Commands
	pathDone, end := len(cmds) == 0, false
	for i := 1; i < len(args); i++ {
		a := args[i]
		t := token{args: []string{a}, level: len(cl.path)}
		switch {
		case a == "--" && !end:
			t.kind, end = tokEnd, true
		case end || len(a) < 2 || a[0] != '-':
			t.kind = tokArg
			if pathDone {
				break
			}
			c := findCommand(cmds, a)
			if c == nil {
				pathDone = true
				break
			}
			t.kind = tokCommand
			cl.path = append(cl.path, c)
			flags, cmds = c.Flags, c.Subcommands
			pathDone, end = len(cmds) == 0, false
		default:
			t.kind = tokFlag
			t.name, t.value, t.hasValue = strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
			t.flag = findFlag(flags, t.name)
			if t.flag != nil && !isSwitch(t.flag) && !t.hasValue && i+1 < len(args) {
				i++
				t.args = append(t.args, args[i])
				t.value, t.hasValue = args[i], true
			}
		}
		cl.tokens = append(cl.tokens, t)
	}
	// A flag given before a subcommand is parsed as its parent's, but the
	// subcommand reads its own flag of that name: tune --dir x show read
	// show's --dir, unset. Such a flag is the subcommand's, as if given
	// after it; a parent's flag the subcommand has no flag for is refused
	// (checkFlagArgs).
	if n := len(cl.path); n > 0 {
		for i, t := range cl.tokens {
			if t.kind != tokFlag || t.level >= n || t.flag == nil {
				continue
			}
			if f := findFlag(cl.path[n-1].Flags, t.name); f != nil && isSwitch(f) == isSwitch(t.flag) {
				cl.tokens[i].level, cl.tokens[i].flag = n, f
			}
		}
	}
	return cl
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// isSwitch says whether f takes its value only after = (--quiet=false).
func isSwitch(f cli.Flag) bool {
	_, ok := f.(*cli.BoolFlag)
	return ok
}

// collects says whether f may be given more than once, each adding a value.
func collects(f cli.Flag) bool {
	switch f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return true
	}
	return false
}

// leaf says whether t belongs to the last command of the path, whose flags
// and arguments follow it.
func (cl commandLine) leaf(t token) bool { return t.level == len(cl.path) }

// unknownCommand says whether the path ends at a group of commands (the
// program itself too: subcommands, and no arguments of its own, as tune's
// SUITE) followed by a word naming none of them.
func (cl commandLine) unknownCommand() bool {
	if n := len(cl.path); n > 0 && (len(cl.path[n-1].Subcommands) == 0 || strings.TrimSpace(cl.path[n-1].ArgsUsage) != "") {
		return false
	}
	for _, t := range cl.tokens {
		if cl.leaf(t) && t.kind == tokEnd {
			return false
		}
		if cl.leaf(t) && t.kind == tokArg {
			return true
		}
	}
	return false
}

// pathNames is the path's command names: "suites validate".
func (cl commandLine) pathNames() string { return commandNames(cl.path) }

func commandNames(cmds []*cli.Command) string {
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	return strings.Join(names, " ")
}

// args is the command line with each token's arguments as tokenize read them.
func (cl commandLine) args(tokens []token) []string {
	out := []string{cl.prog}
	for _, t := range tokens {
		out = append(out, t.args...)
	}
	return out
}

// interspersed moves a command's flags ahead of its positional arguments, so
// `mtlbench run suite.yaml --db x.db` works as people type it: urfave/cli v2
// stops reading flags at the first positional argument.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cl := tokenize(app, args)
	if cl.unknownCommand() {
		// Moved ahead of the word, a flag of the command meant would be
		// refused as the group's (`shwo --db x 1`: unknown flag --db),
		// where the group's own error names the word.
		return args
	}
	var before, named, end, positional []token
	for _, t := range cl.tokens {
		switch {
		case !cl.leaf(t):
			before = append(before, t)
		case t.kind == tokFlag:
			named = append(named, t)
		case t.kind == tokEnd:
			end = []token{t}
		default:
			positional = append(positional, t)
		}
	}
	// "--" goes before every positional argument, not only those it came
	// before: the parser stops at the first one and would keep a later "--"
	// as an argument (suites validate ci -- x read "--" as a suite).
	return cl.args(slices.Concat(before, named, end, positional))
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
	cl := tokenize(app, args)
	lists := listFlags[cl.pathNames()]
	if len(lists) == 0 {
		return args
	}
	at := map[string]int{} // a list flag's token in kept
	var kept []token
	for _, t := range cl.tokens {
		if t.kind != tokFlag || !cl.leaf(t) || t.flag == nil || !t.hasValue || !slices.Contains(lists, t.flag.Names()[0]) {
			kept = append(kept, t) // a list flag with no value: the parser says so
			continue
		}
		long := t.flag.Names()[0]
		if j, again := at[long]; again {
			kept[j].args = []string{kept[j].args[0], kept[j].args[1] + "," + t.value}
			continue
		}
		t.args = []string{"--" + long, t.value}
		at[long] = len(kept)
		kept = append(kept, t)
	}
	return cl.args(kept)
}

// pathFlag says whether f names a file or folder: its definition sets
// TakesFile (which shell completion reads too), so a new path flag is
// held to checkFlagArgs's rules by being defined as one.
func pathFlag(f cli.Flag) bool {
	sf, ok := f.(*cli.StringFlag)
	return ok && sf.TakesFile
}

// expandHome reads a leading ~ or ~/ in every path flag's value (pathFlag)
// as the home folder, as suites read a model path (internal/homepath): a
// shell expands ~ only at a word's start, so -m=~/x and --db=~/r.db came
// through as a folder named ~. ~user is refused, naming the flag.
func expandHome(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	cl := tokenize(app, args)
	for i, t := range cl.tokens {
		if t.kind != tokFlag || t.flag == nil || !t.hasValue || !pathFlag(t.flag) {
			continue
		}
		x, err := homepath.Expand(t.value)
		if err != nil {
			return nil, fmt.Errorf("%s: --%s %s: %w", cl.pathNames(), t.flag.Names()[0], t.value, err)
		}
		if x == t.value {
			continue
		}
		a := slices.Clone(t.args)
		if len(a) == 2 { // the flag and its value given apart
			a[1] = x
		} else {
			name, _, _ := strings.Cut(a[0], "=")
			a[0] = name + "=" + x
		}
		cl.tokens[i].args = a
	}
	return cl.args(cl.tokens), nil
}

// spellsFlag says whether value is what the parser would read as one of
// flags or --help (-x, --x, --x=v), were it not taken as a value.
func spellsFlag(flags []cli.Flag, value string) bool {
	if len(value) < 2 || value[0] != '-' || value == "--" {
		return false
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(value[1:], "-"), "=")
	return findFlag(flags, name) != nil || cli.HelpFlag != nil && slices.Contains(cli.HelpFlag.Names(), name)
}

// nameFlags are the flags whose value names a thing (a backend, dtype,
// model, kernel, suite, format...), by their first name: empty, such a flag
// reads as left out. Flags where "" means something (--tag "": no tag,
// --filter, --title) are not among them.
var nameFlags = []string{
	"backend", "dtype", "kv-dtype", "model", "history-model", "kernel", "suite", "format", "from",
	"kind", "metric", "series", "timing", "fit", "fusion", "against", "against-fusion",
	"strategy", "moe-strategy", "sampling", "witness-gpu", "hardware",
	// what runs or is recorded, which "" would leave at its default:
	// tune's default shape, bench without its SLO or its rates
	"shape", "slo", "request-rate", "date", "source",
}

// checkFlagArgs refuses, before any work, what the flag parser would take
// without a word: a flag of one value given twice (runs --limit 3 --limit
// 4), which keeps the last and drops the other, as --set refuses a name
// twice (flags that collect values, --set and --threshold, switches, and
// list flags, which joinLists joins first, may repeat); a
// path flag (pathFlag) given an empty value (--db "$DB" with DB unset),
// which reads as left out: the default store, no step log; a path flag
// given one of its command's flags (export -o --help), which it takes as
// its value and would write a file of that name (./--help names one); a
// flag that names a thing (nameFlags) given an empty value (--backend "":
// the suite's backend); and a command's flag given before a subcommand
// that takes no such flag (tune --rounds 3 show).
func checkFlagArgs(app *cli.App, args []string) error {
	if len(args) < 2 {
		return nil
	}
	cl := tokenize(app, args)
	usage := func(format string, a ...any) error {
		path := cl.pathNames()
		cmd := strings.TrimSpace(app.Name + " " + path)
		return fmt.Errorf("%s: %s (see `%s --help`)", path, fmt.Sprintf(format, a...), cmd)
	}
	leafFlags := app.Flags
	if n := len(cl.path); n > 0 {
		leafFlags = cl.path[n-1].Flags
	}
	seen := map[string]string{}
	for _, t := range cl.tokens {
		if t.kind != tokFlag || t.flag == nil {
			continue
		}
		if !cl.leaf(t) {
			parent := strings.TrimSpace(app.Name + " " + commandNames(cl.path[:t.level]))
			leaf := app.Name + " " + cl.pathNames()
			return usage("%s is a flag of `%s`, not of `%s`: it would be dropped", strings.Join(t.args, " "), parent, leaf)
		}
		if isSwitch(t.flag) {
			continue
		}
		long := "--" + t.flag.Names()[0]
		given := strings.Join(t.args, " ")
		// A required flag has no default to leave it out for.
		required, _ := app.Metadata[requiredKey].(map[cli.Flag]bool)
		if t.hasValue && t.value == "" && required[t.flag] {
			return usage("%s \"\": an empty value (%s is required: %s)", long, long, flagUsage(t.flag))
		}
		if t.hasValue && t.value == "" && slices.Contains(nameFlags, t.flag.Names()[0]) {
			return usage("%s \"\": an empty value (name one, or leave %s out for the default)", long, long)
		}
		if t.hasValue && t.value == "" && pathFlag(t.flag) {
			return usage("%s \"\": an empty path (leave %s out for the default)", long, long)
		}
		if t.hasValue && pathFlag(t.flag) && spellsFlag(leafFlags, t.value) {
			return usage("%s: %s is a flag of this command, so %s was given no path (a file or folder so named is ./%s)", given, t.value, long, t.value)
		}
		if collects(t.flag) {
			continue
		}
		if first, twice := seen[long]; twice {
			return usage("%s given twice (%s, %s): give it once", long, first, given)
		}
		seen[long] = given
	}
	return nil
}

// flagUsage is what f takes, as its help says.
func flagUsage(f cli.Flag) string {
	if d, ok := f.(cli.DocGenerationFlag); ok {
		return d.GetUsage()
	}
	return "see the help"
}
