package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/suites"
)

func suitesCommand() *cli.Command {
	return &cli.Command{
		Name:  "suites",
		Usage: "list, show and validate benchmark suites (the shipped ones are built in)",
		Subcommands: []*cli.Command{
			{
				Name:      "validate",
				Usage:     "check suite files (or built-in suites by name) and show how many cases each expands to",
				ArgsUsage: "FILE|NAME...",
				Description: "Checks what `run` would check before measuring anything, the model's\n" +
					"configuration included (no weights are read). --set checks the suite as\n" +
					"`run --set` would run it:\n" +
					"  mtlbench suites validate qwen3-moe --set batch=64\n" +
					"It exits 1 when a suite is invalid, and 2 when one is not there (a usage error).",
				Flags: []cli.Flag{
					&cli.StringSliceFlag{Name: "set", Usage: "override a parameter in every case, as run does: --set batch=64 (repeatable)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return fmt.Errorf("validate needs at least one suite file")
					}
					set, err := bench.ParseOverrides(c.StringSlice("set"))
					if err != nil {
						return err
					}
					var bad []error
					for _, f := range c.Args().Slice() {
						s, err := suites.Resolve(f)
						if err == nil {
							err = s.Override(set)
						}
						if err == nil {
							err = bench.Check(s, func(line string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", line) })
						}
						if err != nil {
							bad = append(bad, err)
							fmt.Fprintln(c.App.ErrWriter, err)
							continue
						}
						fmt.Fprintf(c.App.Writer, "%s: ok, suite %q, %s\n", f, s.Name, plural.Of(len(s.Cases), "case"))
					}
					if len(bad) > 0 {
						// exit 1, or 2 where a suite named is not there (exitCode)
						return &exitError{code: 1, err: &summaryError{validateSummary(bad, c.NArg()), bad}}
					}
					return nil
				},
			},
			{
				Name:      "list",
				Usage:     "list the built-in suites, or the suites in a folder",
				ArgsUsage: "[DIR]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "format", Value: "table", Usage: formatList() + " (csv, json, jsonl: cases as a number, an invalid suite's error in its own column)"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() > 1 {
						return fmt.Errorf("suites list takes one folder, got %d arguments", c.NArg())
					}
					f, err := parseTableFormat(c.String("format"))
					if err != nil {
						return err
					}
					infos := suites.ListShipped()
					if dir := c.Args().First(); dir != "" {
						if st, err := os.Stat(dir); err == nil && !st.IsDir() {
							return fmt.Errorf("suites list %s: a file, not a folder (suites validate %s checks one suite, suites show prints it)", dir, dir)
						}
						if infos, err = suites.List(dir); err != nil {
							return fmt.Errorf("suites list: %w", err)
						}
						if len(infos) == 0 {
							// On stderr, as runs says it: an empty table alone
							// reads as a listing that failed.
							fmt.Fprintf(c.App.ErrWriter, "no suite files (*.yaml, *.yml) in %s\n", dir)
						}
					}
					return suitesTable(infos).Render(c.App.Writer, f)
				},
			},
			{
				Name:      "show",
				Usage:     "print a suite's YAML: a built-in suite by name, or a file",
				ArgsUsage: "NAME|FILE",
				Description: "Prints the suite as written, to read or to copy and edit:\n" +
					"  mtlbench suites show ci > my.yaml && mtlbench run my.yaml\n" +
					"docs/suites.md documents every key and parameter.",
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fmt.Errorf("suites show needs one suite name or file (built in: %s)", strings.Join(suites.ShippedNames(), ", "))
					}
					_, data, err := suites.Source(c.Args().First())
					if err != nil {
						return err
					}
					_, err = c.App.Writer.Write(data)
					return err
				},
			},
		},
	}
}

// suitesTable lists suites: an invalid one's error in place of its cases
// and description, and as data the error in a column of its own, its
// cases empty (null).
func suitesTable(infos []suites.Info) *table.Table {
	t := &table.Table{Header: []string{"suite", "file", "cases", "description"},
		Data: &table.Data{Columns: []string{"suite", "file", "cases", "description", "error"}}}
	for _, in := range infos {
		cases, desc := strconv.Itoa(in.Cases), in.Description
		row := map[string]any{"suite": in.Name, "file": in.Path, "cases": int64(in.Cases), "description": in.Description, "error": ""}
		if in.Err != nil {
			cases, desc = "invalid", in.Err.Error()
			row["cases"], row["error"] = nil, in.Err.Error()
		}
		t.Rows = append(t.Rows, []string{in.Name, in.Path, cases, desc})
		t.Data.Add(row)
	}
	return t
}

// validateSummary counts the suites of n that failed by why, as exitCode
// tells them apart: a suite not there, or a file of another kind, is not
// one that is invalid ("1 of 3 suites failed: 1 invalid, 1 not found").
func validateSummary(bad []error, n int) string {
	counts := []struct {
		n    int
		what string
	}{{0, "invalid"}, {0, "not found"}, {0, "not a suite file"}}
	for _, err := range bad {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			counts[1].n++
		case errors.Is(err, readfile.ErrNotAFile):
			counts[2].n++
		default:
			counts[0].n++
		}
	}
	var parts, whats []string
	for _, c := range counts {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
			whats = append(whats, c.what)
		}
	}
	of := fmt.Sprintf("%d of %s", len(bad), plural.Of(n, "suite"))
	if len(whats) == 1 {
		return of + " " + whats[0]
	}
	return of + " failed: " + strings.Join(parts, ", ")
}
