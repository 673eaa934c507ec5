package main

import (
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"io"

	"github.com/urfave/cli/v2"
)

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:    "mtlbench",
		Usage:   "benchmark and tune LLM inference kernels (Metal, CUDA, CPU)",
		Version: readBuildInfo().String(),
		Description: "mtlbench runs a real inference engine (paged KV cache, continuous batching,\n" +
			"chunked prefill, MoE dispatch) under parameterised suites, records every sample\n" +
			"to SQLite, and compares runs with each other and with the documented history.\n\n" +
			"Environment variables (MTLBENCH_*) choose the results database, tuned configs and\n" +
			"backend switches: `mtlbench env` lists them with their values and meaning.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
		// A variable set to what mtlbench cannot take stops every command
		// but env, which lists them.
		Before: func(c *cli.Context) error {
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
}
