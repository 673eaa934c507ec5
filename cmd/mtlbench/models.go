package main

import (
	"fmt"
	"strings"

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
			"with seeded synthetic weights. Memory is for the weights in --dtype (bf16 by default; packed\n" +
			"formats q4, q8 (MLX affine, group 64), q4_k_m, q8_0 (GGUF) count packed bytes and scales)\n" +
			"plus a 4096-token KV cache; --dtype all lists every format.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, md, csv, json or jsonl (sizes in bytes)"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "weights: f32, f16, bf16, " + strings.Join(model.QuantFormats, ", ") + ", or all"},
		},
		Action: func(c *cli.Context) error {
			var formats []model.Format
			if d := c.String("dtype"); d == "all" {
				formats = append(formats, model.Format{DType: bridge.BF16})
				for _, q := range model.QuantFormats {
					formats = append(formats, model.Format{DType: bridge.BF16, Quant: q})
				}
			} else {
				f, err := model.ParseFormat(d)
				if err != nil {
					return fmt.Errorf("--dtype: %w", err)
				}
				formats = []model.Format{f}
			}
			all := len(formats) > 1
			head, sfx := formats[0].String()+" weights", "_"+formats[0].String()
			if all {
				head, sfx = "weights", ""
			}
			t := &table.Table{Header: []string{"preset", "architecture", "layers", "params", "read/token", head, "KV/token", "memory need"},
				Data: &table.Data{Columns: []string{"preset", "architecture", "layers", "params", "read_bytes_per_token" + sfx,
					"weight_bytes" + sfx, "kv_bytes_per_token_bf16", "memory_need_bytes", "max_positions"}}}
			if all {
				t.Header = append([]string{"preset", "dtype"}, t.Header[1:]...)
				t.Data.Columns = append([]string{"preset", "dtype"}, t.Data.Columns[1:]...)
			}
			for _, name := range model.PresetNames() {
				for _, f := range formats {
					cfg, err := model.PresetFormat(name, f)
					if err != nil {
						continue // a packed format the architecture does not run
					}
					kv := cfg.KVBytesPerToken(bridge.BF16)
					w, read := cfg.WeightBytes(f.DType), cfg.ActiveBytesPerToken(f.DType)
					need := w + cfg.KVBytesPerToken(bridge.F32)*4096
					row := []string{name, cfg.Architecture, fmt.Sprint(cfg.Layers), human(cfg.Params()),
						engine.GiB(read), engine.GiB(w), engine.GiB(kv), engine.GiB(need)}
					data := map[string]any{"preset": name, "architecture": cfg.Architecture, "layers": cfg.Layers,
						"params": cfg.Params(), "read_bytes_per_token" + sfx: read, "weight_bytes" + sfx: w,
						"kv_bytes_per_token_bf16": kv, "memory_need_bytes": need, "max_positions": cfg.MaxPos}
					if all {
						row = append([]string{name, f.String()}, row[1:]...)
						data["dtype"] = f.String()
					}
					t.Rows = append(t.Rows, row)
					t.Data.Add(data)
				}
			}
			what := formats[0].String() + " weights"
			if all {
				what = "the weights"
			}
			t.Notes = []string{"read/token: bytes a batch-1 decode step reads (dense weights and the routed experts)",
				"memory need: " + what + " plus a 4096-token f32 KV cache on the CPU backend"}
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
