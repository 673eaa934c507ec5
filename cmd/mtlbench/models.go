package main

import (
	"fmt"

	"github.com/olekukonko/tablewriter"
	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

func modelsCommand() *cli.Command {
	return &cli.Command{
		Name:  "models",
		Usage: "list the model presets with their size and memory need",
		Description: "Presets have the real shapes of the models mtlbench's users tune for and run\n" +
			"with seeded synthetic weights. Memory is for bf16 weights plus a 4096-token KV cache.",
		Action: func(c *cli.Context) error {
			t := tablewriter.NewWriter(c.App.Writer)
			t.Header("preset", "architecture", "layers", "params", "active/token", "bf16 weights", "KV/token", "memory need")
			for _, name := range model.PresetNames() {
				cfg, _ := model.Preset(name)
				kv := cfg.KVBytesPerToken(bridge.BF16)
				need := cfg.WeightBytes(bridge.BF16) + cfg.KVBytesPerToken(bridge.F32)*4096
				t.Append(name, cfg.Architecture, fmt.Sprint(cfg.Layers), human(cfg.Params()),
					engine.GiB(cfg.ActiveBytesPerToken(bridge.BF16)), engine.GiB(cfg.WeightBytes(bridge.BF16)),
					engine.GiB(kv), engine.GiB(need))
			}
			return t.Render()
		},
	}
}

// human prints a parameter count as 1.1B / 494M.
func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	}
	return fmt.Sprint(n)
}
