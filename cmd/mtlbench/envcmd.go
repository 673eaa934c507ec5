package main

import (
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/envconfig"
)

func envCommand() *cli.Command {
	return &cli.Command{
		Name:  "env",
		Usage: "list the MTLBENCH_* environment variables: value, source and meaning",
		Description: "Prints every environment variable mtlbench reads, with its current value and\n" +
			"whether that comes from the environment or is the default (an empty value counts\n" +
			"as unset), the part of mtlbench it configures and what it means. Variables of the\n" +
			"area \"tests\" configure the packages' tests (go test), not the command. A value\n" +
			"mtlbench cannot take is listed after the table, and stops every other command.",
		Flags: []cli.Flag{&cli.StringFlag{Name: "format", Value: "table", Usage: formatList() + " (json and jsonl: the same fields, default included)"}},
		Action: func(c *cli.Context) error {
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			vs := envconfig.Values()
			if f == table.FormatJSON || f == table.FormatJSONL {
				enc := json.NewEncoder(c.App.Writer)
				if f == table.FormatJSON {
					enc.SetIndent("", "  ")
					if err := enc.Encode(vs); err != nil {
						return err
					}
					return envconfig.Check()
				}
				for _, v := range vs { // jsonl: the same objects, one a line
					if err := enc.Encode(v); err != nil {
						return err
					}
				}
				return envconfig.Check()
			}
			t := &table.Table{Header: []string{"variable", "value", "source", "area", "meaning"}}
			for _, v := range vs {
				t.Rows = append(t.Rows, []string{v.Name, v.Value, v.Source, v.Area, v.Meaning})
			}
			if err := t.Render(c.App.Writer, f); err != nil {
				return err
			}
			return envconfig.Check()
		},
	}
}
