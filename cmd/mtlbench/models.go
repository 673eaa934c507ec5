package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

func modelsCommand() *cli.Command {
	return &cli.Command{
		Name:  "models",
		Usage: "list the model presets with their size and memory need",
		Description: "Presets have the real shapes of the models mtlbench's users tune for and run\n" +
			"with seeded synthetic weights. Memory is for bf16 weights plus a 4096-token KV cache.",
		Flags: []cli.Flag{&cli.StringFlag{Name: "format", Value: "table", Usage: "table, md, csv, json or jsonl (sizes in bytes)"}},
		Action: func(c *cli.Context) error {
			t := &table.Table{Header: []string{"preset", "architecture", "layers", "params", "read/token", "bf16 weights", "KV/token", "memory need"},
				Data: &table.Data{Columns: []string{"preset", "architecture", "layers", "params", "read_bytes_per_token_bf16",
					"weight_bytes_bf16", "kv_bytes_per_token_bf16", "memory_need_bytes", "max_positions"}}}
			for _, name := range model.PresetNames() {
				cfg, _ := model.Preset(name)
				kv := cfg.KVBytesPerToken(bridge.BF16)
				need := cfg.WeightBytes(bridge.BF16) + cfg.KVBytesPerToken(bridge.F32)*4096
				t.Rows = append(t.Rows, []string{name, cfg.Architecture, fmt.Sprint(cfg.Layers), human(cfg.Params()),
					engine.GiB(cfg.ActiveBytesPerToken(bridge.BF16)), engine.GiB(cfg.WeightBytes(bridge.BF16)),
					engine.GiB(kv), engine.GiB(need)})
				t.Data.Add(map[string]any{"preset": name, "architecture": cfg.Architecture, "layers": cfg.Layers,
					"params": cfg.Params(), "read_bytes_per_token_bf16": cfg.ActiveBytesPerToken(bridge.BF16),
					"weight_bytes_bf16": cfg.WeightBytes(bridge.BF16), "kv_bytes_per_token_bf16": kv, "memory_need_bytes": need,
					"max_positions": cfg.MaxPos})
			}
			t.Notes = []string{"read/token: bytes a batch-1 decode step reads (dense weights and the routed experts)",
				"memory need: bf16 weights plus a 4096-token f32 KV cache on the CPU backend"}
			f, err := table.ParseFormat(c.String("format"))
			if err != nil {
				return err
			}
			return t.Render(c.App.Writer, f)
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
