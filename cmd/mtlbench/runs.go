package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
)

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "list recorded runs, newest first",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "tag", Usage: "only runs with this tag"},
			&cli.StringFlag{Name: "suite", Usage: "only runs of this suite"},
			&cli.IntFlag{Name: "limit", Value: 20, Usage: "at most this many runs"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, md, csv or json"},
		},
		Action: func(c *cli.Context) error {
			f, err := table.ParseFormat(c.String("format"))
			if err != nil {
				return err
			}
			db, err := openDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			runs, err := db.Runs(results.RunFilter{Tag: c.String("tag"), SuiteName: c.String("suite"), Limit: c.Int("limit")})
			if err != nil {
				return err
			}
			t := &table.Table{Header: []string{"run", "suite", "tag", "backend", "timing", "status", "started", "commit", "machine"}}
			for _, r := range runs {
				commit := r.GitCommit
				if len(commit) > 10 {
					commit = commit[:10]
				}
				machine := r.Machine.CPUModel
				if r.Machine.GPUName != "" {
					machine = r.Machine.GPUName
				}
				if r.Emulated {
					machine += " (emulated)"
				}
				t.Rows = append(t.Rows, []string{strconv.FormatInt(r.ID, 10), r.SuiteName, r.Tag, r.Backend, r.TimingMode, r.Status,
					r.StartedAt.Local().Format(time.DateTime), commit, machine})
			}
			return t.Render(c.App.Writer, f)
		},
	}
}

func showCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "show a run's cases with medians and confidence intervals",
		ArgsUsage: "RUN (id, tag, or git commit)",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, md, csv, json or benchfmt"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("show needs one run (id, tag or commit)")
			}
			db, err := openDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			ids, err := db.ResolveRef(c.Args().First())
			if err != nil {
				return err
			}
			run, err := db.GetRun(ids[0])
			if err != nil {
				return err
			}
			cases, err := db.Cases(run.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "run %d: suite %s, %s, backend %s on %s, %s timing\n", run.ID, run.SuiteName, run.Status, run.Backend, run.Machine.CPUModel, run.TimingMode)
			return printRun(c.App.Writer, db, &bench.Summary{RunID: run.ID, Run: run, Cases: cases}, c.String("format"))
		},
	}
}
