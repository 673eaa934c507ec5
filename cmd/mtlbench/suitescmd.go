package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/suites"
)

func suitesCommand() *cli.Command {
	return &cli.Command{
		Name:  "suites",
		Usage: "list and validate benchmark suites",
		Subcommands: []*cli.Command{
			{
				Name:      "validate",
				Usage:     "check suite files and show how many cases each expands to",
				ArgsUsage: "FILE...",
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return fmt.Errorf("validate needs at least one suite file")
					}
					bad := 0
					for _, f := range c.Args().Slice() {
						s, err := suites.Load(f)
						if err != nil {
							bad++
							fmt.Fprintln(c.App.ErrWriter, err)
							continue
						}
						fmt.Fprintf(c.App.Writer, "%s: ok, suite %q, %d cases\n", f, s.Name, len(s.Cases))
					}
					if bad > 0 {
						return &exitError{code: 1, err: fmt.Errorf("%d of %d suites are invalid", bad, c.NArg())}
					}
					return nil
				},
			},
			{
				Name:      "list",
				Usage:     "list the suites in a folder (default: suites)",
				ArgsUsage: "[DIR]",
				Action: func(c *cli.Context) error {
					dir := "suites"
					if c.NArg() > 0 {
						dir = c.Args().First()
					}
					infos, err := suites.List(dir)
					if err != nil {
						return err
					}
					t := &table.Table{Header: []string{"suite", "file", "cases", "description"}}
					for _, in := range infos {
						cases, desc := strconv.Itoa(in.Cases), in.Description
						if in.Err != nil {
							cases, desc = "invalid", in.Err.Error()
						}
						t.Rows = append(t.Rows, []string{in.Name, in.Path, cases, desc})
					}
					return t.Render(c.App.Writer, table.Format("table"))
				},
			},
		},
	}
}
