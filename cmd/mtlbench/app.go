package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/shquote"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/runner/envconfig"
)

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "mtlbench",
		Usage:   "benchmark and tune LLM inference kernels (Metal, CUDA, CPU)",
		Version: readBuildInfo().String(),
		Description: "mtlbench runs a real inference engine (paged KV cache, continuous batching,\n" +
			"chunked prefill, MoE dispatch) under parameterised suites, records every sample\n" +
			"to SQLite, and compares runs with each other and with the documented history.\n\n" +
			"Environment variables (MTLBENCH_*) choose the results database, tuned configs and\n" +
			"backend switches: `mtlbench env` lists them with their values and meaning.",
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		// A misspelt MTLBENCH_ variable would change nothing without a
		// word, so every command says so, once, on stderr (stdout may be
		// data). A variable set to what mtlbench cannot take stops every
		// command but env, which lists them.
		Before: func(c *cli.Context) error {
			if cmd := c.Args().First(); cmd != "" && cmd != "help" && cmd != "h" {
				for _, w := range envconfig.UnknownWarnings() {
					fmt.Fprintln(c.App.ErrWriter, w)
				}
			}
			if err := helpWords(c); err != nil {
				return err
			}
			if c.Args().First() == "env" {
				return nil
			}
			return envconfig.Check()
		},
		// --set values are YAML (sampling=temperature:0.7,top_k:40,
		// batch=[1,2]): a comma is not a separator.
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			generateCommand(),
			modelsCommand(),
			runCommand(),
			benchCommand(),
			suitesCommand(),
			runsCommand(),
			compareCommand(),
			gateCommand(),
			abCommand(),
			reportCommand(),
			tuneCommand(),
			peerCommand(),
			exportCommand(),
			importCommand(),
			showCommand(),
			historyCommand(),
			selftestCommand(),
			devicesCommand(),
			envCommand(),
		},
	}
	app.OnUsageError = usageError
	app.Action = commandGroup(cli.ShowAppHelp)
	required := map[cli.Flag]bool{}
	app.Metadata = map[string]any{requiredKey: required}
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, cmd := range cmds {
			cmd.OnUsageError = usageError
			if len(cmd.Subcommands) > 0 && cmd.Action == nil {
				cmd.Action = commandGroup(cli.ShowSubcommandHelp)
			}
			req := takeRequired(cmd)
			for _, f := range req {
				required[f] = true
			}
			if cmd.Action != nil {
				cmd.Action = requireFlags(cmd.Action, req)
			}
			// Arguments first: `gate 1 2` (compare's form) lacks the flags
			// it meant them for, and is told so (flagsOnly).
			if len(cmd.Subcommands) == 0 && strings.TrimSpace(cmd.ArgsUsage) == "" && cmd.Action != nil {
				cmd.Action = flagsOnly(cmd.Action, req)
			}
			walk(cmd.Subcommands)
		}
	}
	walk(app.Commands)
	return app
}

// usageError says what was wrong with a command line and where its help is,
// instead of the whole help text; an argument such as -1 is read as a flag.
func usageError(c *cli.Context, err error, _ bool) error {
	var path []string
	for _, x := range c.Lineage() {
		if x.Command != nil && x.Command.Name != "" && x.Command.Name != c.App.Name {
			path = append([]string{x.Command.Name}, path...)
		}
	}
	help := strings.Join(append([]string{c.App.Name}, path...), " ") + " --help"
	msg := err.Error()
	if m := invalidValueRE.FindStringSubmatch(msg); m != nil {
		msg = invalidValue(c, m[2], m[1], m[3])
	}
	if f, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if _, num := strconv.ParseFloat(f, 64); num == nil {
			msg += " (a negative number is read as a flag; put -- before it)"
		} else {
			msg = unknownFlag(c, f)
		}
	}
	if len(path) > 0 {
		msg = strings.Join(path, " ") + ": " + msg
	}
	return fmt.Errorf("%s (see `%s`)", msg, help)
}

// unknownFlag names a flag the command does not have as it would be typed
// (--name, -n), with the nearest it has, in place of the flag package's
// "flag provided but not defined: -name".
func unknownFlag(c *cli.Context, name string) string {
	flag := "--" + name
	if len(name) == 1 {
		flag = "-" + name
	}
	var names []string
	if c.Command != nil {
		for _, f := range c.Command.Flags {
			names = append(names, f.Names()...)
		}
	}
	if best := suggest.Closest(name, names); best != "" {
		if len(best) == 1 {
			return fmt.Sprintf("unknown flag %s (did you mean -%s?)", flag, best)
		}
		return fmt.Sprintf("unknown flag %s (did you mean --%s?)", flag, best)
	}
	// Given before a command's name (mtlbench --db r.db runs), a flag of
	// the commands is not the program's: say where it goes.
	subs := c.App.Commands
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		subs = c.Command.Subcommands
	}
	var takers []string
	for _, cmd := range subs {
		if !cmd.Hidden && findFlag(cmd.Flags, name) != nil {
			takers = append(takers, cmd.Name)
		}
	}
	if len(takers) > 0 {
		those := strings.Join(takers, ", ")
		if len(takers) > 3 {
			those = strings.Join(takers[:3], ", ") + "..."
		}
		return fmt.Sprintf("unknown flag %s: a flag of %s, given after the command's name (%s %s %s ...)", flag, those, commandPath(c), takers[0], flag)
	}
	return "unknown flag " + flag
}

// commandPath is the program and the commands c is in: "mtlbench tune".
func commandPath(c *cli.Context) string {
	path := []string{c.App.Name}
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		path = append(path, c.Command.Name)
	}
	return strings.Join(path, " ")
}

// invalidValueRE is the flag package's error for a value its flag cannot
// parse (`invalid boolean value` for a switch): the value quoted, the flag
// as typed without its first dash, and "parse error" or "value out of range".
var invalidValueRE = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-(\S+): (.*)$`)

// invalidValue says what a flag takes, by its type, in place of the flag
// package's `invalid value "x" for flag -limit: parse error`.
func invalidValue(c *cli.Context, name, quoted, why string) string {
	flag := "--" + name
	if len(name) == 1 {
		flag = "-" + name
	}
	want := "a value of its type"
	if c.Command != nil {
		for _, f := range c.Command.Flags {
			if !slices.Contains(f.Names(), name) {
				continue
			}
			switch f.(type) {
			case *cli.IntFlag, *cli.Int64Flag:
				want = "a whole number"
			case *cli.UintFlag, *cli.Uint64Flag:
				// -1 is a whole number: say the sign is what is wrong
				want = "a whole number of 0 or more"
			case *cli.Float64Flag:
				want = "a number"
				// The float flags take fractions (--min-gain 0.01 is 1%),
				// where --threshold takes a percentage: say the one for it.
				if v, err := strconv.Unquote(quoted); err == nil && strings.HasSuffix(v, "%") {
					if pct, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64); err == nil {
						want = fmt.Sprintf("a number, a fraction: %g for %s", pct/100, v)
					}
				}
			case *cli.DurationFlag:
				want = "a duration such as 500ms, 2s or 1m30s"
			case *cli.BoolFlag:
				want = "true or false"
			}
		}
	}
	if why == "value out of range" {
		return fmt.Sprintf("%s %s: out of range, want %s that fits", flag, quoted, want)
	}
	return fmt.Sprintf("%s %s: want %s", flag, quoted, want)
}

// commandGroup is the action of the program and of a command with
// subcommands: alone it prints the help; a word that names no command is
// refused as one, where urfave/cli would call it a missing help topic.
func commandGroup(help func(*cli.Context) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if !c.Args().Present() {
			return help(c)
		}
		var names []string
		for _, cmd := range c.Command.Subcommands {
			if !cmd.Hidden && cmd.Name != "help" {
				names = append(names, cmd.Name)
			}
		}
		return usageError(c, fmt.Errorf("unknown command %q (want one of %s)", c.Args().First(), strings.Join(names, ", ")), false)
	}
}

// helpWords refuses `mtlbench help WORD...` whose words name no command
// as the command line without help is refused (commandGroup), where
// urfave/cli says "No help topic" or shows the help of the words before
// an unknown one (help suites lsit).
func helpWords(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) < 2 || (args[0] != "help" && args[0] != "h") {
		return nil
	}
	cmds, path := c.App.Commands, []string{c.App.Name}
	for _, w := range args[1:] {
		if len(cmds) == 0 {
			break // a command without subcommands: urfave/cli shows its help
		}
		var found *cli.Command
		var names []string
		for _, cmd := range cmds {
			if cmd.Hidden || cmd.Name == "help" {
				continue
			}
			names = append(names, cmd.Name)
			if cmd.HasName(w) {
				found = cmd
			}
		}
		if found == nil {
			where := ""
			if len(path) > 1 {
				where = strings.Join(path[1:], " ") + ": "
			}
			return fmt.Errorf("%sunknown command %q (want one of %s) (see `%s --help`)", where, w, strings.Join(names, ", "), strings.Join(path, " "))
		}
		cmds, path = found.Subcommands, append(path, found.Name)
	}
	return nil
}

// flagsOnly refuses the arguments of a command whose help names none
// (devices, env, selftest...), which it would otherwise ignore: a value
// whose flag was mistyped or left out is not dropped without a word. Given
// as many as the required flags left out (`gate 1 2`, `bench MODEL`), it
// says them as those flags, in their order.
func flagsOnly(action cli.ActionFunc, req []*cli.StringFlag) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() == 0 {
			return action(c)
		}
		msg := fmt.Sprintf("takes flags only, got the argument(s) %q", c.Args().Slice())
		var missing []string
		for _, f := range req {
			if !c.IsSet(f.Name) {
				missing = append(missing, "--"+f.Name)
			}
		}
		if len(missing) > 0 && len(missing) == c.NArg() {
			for i, a := range c.Args().Slice() {
				missing[i] += " " + shquote.Quote(a)
			}
			them := "it"
			if len(missing) > 1 {
				them = "them"
			}
			msg += ": give " + them + " as " + strings.Join(missing, " ")
		}
		return usageError(c, errors.New(msg), false)
	}
}

// takeRequired clears the Required of cmd's required flags, which
// requireFlags checks itself, and returns them.
func takeRequired(cmd *cli.Command) []*cli.StringFlag {
	var req []*cli.StringFlag
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			req = append(req, sf)
		}
	}
	return req
}

// requireFlags checks a command's required flags (req: takeRequired)
// itself, in place of urfave/cli, which prints the whole help and then
// `Required flag "model" not set`: a missing flag is named with its aliases
// and what it takes, and the help is pointed to.
func requireFlags(action cli.ActionFunc, req []*cli.StringFlag) cli.ActionFunc {
	if len(req) == 0 {
		return action
	}
	return func(c *cli.Context) error {
		var missing []string
		for _, f := range req {
			if !c.IsSet(f.Name) {
				name := "--" + f.Name
				for _, a := range f.Aliases {
					name += "/-" + a
				}
				missing = append(missing, fmt.Sprintf("%s is required: %s", name, f.Usage))
			}
		}
		if len(missing) > 0 {
			return usageError(c, errors.New(strings.Join(missing, "; ")), false)
		}
		return action(c)
	}
}
