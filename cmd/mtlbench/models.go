package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tokenizer"
)

func modelsCommand() *cli.Command {
	return &cli.Command{
		Name:      "models",
		Usage:     "list the model presets (or describe checkpoints) with their size and memory need",
		ArgsUsage: "[CHECKPOINT ...]",
		Description: "Presets have the real shapes of the models mtlbench's users tune for and run\n" +
			"with seeded synthetic weights. Memory is for the weights in --dtype (bf16 by default;\n" +
			"packed formats, q2 to q8 (MLX affine, group 64), nvfp4 and mxfp8 (mlx), q4_k_m, q5_k_m,\n" +
			"q8_0 and the IQ types (GGUF), count packed bytes and scales) plus a KV cache of 4096\n" +
			"tokens, or the model's context where shorter; --dtype all lists every format.\n\n" +
			"With arguments, each a checkpoint folder or .gguf file (a split one by any of its parts),\n" +
			"the checkpoints are described instead: their weights as they load (packed formats as they\n" +
			"run), and for a GGUF file its tensors by stored type, with the formats transcoded types run\n" +
			"as (docs/quantization.md; in csv and json: tensors_TYPE, file_bytes_TYPE and run_bytes_TYPE\n" +
			"columns), and the tokenizer generate --prompt would encode with (docs/tokenizer.md). A\n" +
			"folder's tensors its model does not read are named too (unread_tensors: their count), as\n" +
			"generate, run and bench warn of them: config.json may describe another model.\n\n" +
			"Packed weights count as --backend runs them: Metal runs every format as stored (a\n" +
			"transcoded GGUF type in its narrowest exact form), CUDA and the CPU run 2-, 3-, 5- and\n" +
			"6-bit affine widened to 4 or 8 bits (the default: metal on a Mac, else cpu).\n\n" +
			"   mtlbench models --dtype all\n" +
			"   mtlbench models --backend metal ~/models/Qwen3-30B-A3B-Q5_K_M.gguf",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "format", Value: "table", Usage: formatList() + " (sizes in bytes)"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "weights: f32, f16, bf16, " + strings.Join(model.QuantFormats, ", ") + ", or all"},
			&cli.StringFlag{Name: "backend", Value: localBackend(), Usage: "count packed weights as cpu, metal or cuda runs them"},
		},
		Action: func(c *cli.Context) error {
			// Weights count as a named backend runs them: auto names none.
			counted := slices.DeleteFunc(slices.Clone(backends.Names), func(n string) bool { return n == "auto" })
			if err := enumFlag("--backend", c.String("backend"), counted...); err != nil {
				return err
			}
			rules, err := backends.QuantRules(c.String("backend"))
			if err != nil {
				return fmt.Errorf("--backend: %w", err)
			}
			if c.NArg() > 0 {
				// A preset among the checkpoints is said first: --dtype
				// beside it is what the presets' table takes.
				for _, p := range c.Args().Slice() {
					if model.IsPreset(p) {
						list := "mtlbench models"
						if c.IsSet("dtype") {
							list += " --dtype " + shellQuote(c.String("dtype"))
						}
						return fmt.Errorf("%s is a preset: `%s` lists the presets; give checkpoints as paths", p, list)
					}
				}
				if c.IsSet("dtype") {
					return fmt.Errorf("--dtype is for presets: a checkpoint's weights load in their own dtype")
				}
				return describeCheckpoints(c, rules, c.Args().Slice())
			}
			var formats []model.Format
			if d := c.String("dtype"); d == "all" {
				// Every format --dtype takes: the floats, then the packed ones.
				for _, dt := range []bridge.DType{bridge.F32, bridge.F16, bridge.BF16} {
					formats = append(formats, model.Format{DType: dt})
				}
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
					cfg = cfg.RunOn(rules)
					kv := cfg.KVBytesPerToken(bridge.BF16)
					w, read := cfg.WeightBytes(f.DType), cfg.ActiveBytesPerToken(f.DType)
					need := w + cfg.KVBytesPerToken(bridge.F32)*needTokens(cfg)
					row := []string{name, cfg.Architecture, fmt.Sprint(cfg.Layers), human(cfg.Params()),
						engine.GiB(read), engine.GiB(w), engine.GiB(kv), engine.GiB(need)}
					data := map[string]any{"preset": name, "architecture": cfg.Architecture, "layers": cfg.Layers,
						"params": cfg.Params(), "read_bytes_per_token" + sfx: read, "weight_bytes" + sfx: w,
						"kv_bytes_per_token_bf16": kv, "memory_need_bytes": need, "max_positions": modelContext(cfg)}
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
			t.Notes = []table.Note{table.NoteText("read/token: bytes a batch-1 decode step reads (dense weights and the routed experts)"),
				table.Notef("memory need: %s plus an f32 KV cache of 4096 tokens (the model's context where shorter); KV/token in bf16; packed weights as the %s backend runs them", what, c.String("backend"))}
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			return t.Render(c.App.Writer, f)
		},
	}
}

// localBackend is the backend `mtlbench models` counts weights for by
// default: Metal on a Mac, else the CPU.
func localBackend() string {
	if runtime.GOOS == "darwin" {
		return "metal"
	}
	return "cpu"
}

// human prints a parameter count as 1.1B / 494M / 1.43M / 495K: at least
// three significant digits below a billion, so a test checkpoint's 1.4M
// does not read as 1M, nor its 495104 in another notation than the rest.
func human(n int64) string {
	if n >= 999_500_000 { // what rounds to 1000M reads as 1.0B
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	}
	for _, u := range []struct {
		scale float64
		sfx   string
	}{{1e6, "M"}, {1e3, "K"}} {
		if x := float64(n) / u.scale; x >= 0.9995 { // 999,600 is 1.00M, not 1000K
			decimals := max(0, 2-int(math.Floor(math.Log10(max(x, 1)))))
			return strconv.FormatFloat(x, 'f', decimals, 64) + u.sfx
		}
	}
	return fmt.Sprint(n)
}

// describeCheckpoints prints models' row for each checkpoint (folder or
// GGUF file), with a GGUF file's tensors by stored type as notes.
func describeCheckpoints(c *cli.Context, rules bridge.QuantSupport, paths []string) error {
	t := &table.Table{Header: []string{"checkpoint", "architecture", "layers", "params", "read/token", "weights", "KV/token", "memory need"},
		Data: &table.Data{Columns: []string{"checkpoint", "architecture", "layers", "params", "read_bytes_per_token",
			"weight_bytes", "kv_bytes_per_token_bf16", "memory_need_bytes", "max_positions"}}}
	for _, p := range paths {
		cfg, src, err := model.Open(model.Spec{Model: p})
		if err != nil {
			return err
		}
		cfg = cfg.RunOn(rules)
		dt := src.DType()
		kv := cfg.KVBytesPerToken(bridge.BF16)
		w, read := cfg.WeightBytes(dt), cfg.ActiveBytesPerToken(dt)
		need := w + cfg.KVBytesPerToken(bridge.F32)*needTokens(cfg)
		// A folder as its config names it (a Hugging Face cache's snapshot
		// as its repository), a file as itself.
		name := filepath.Base(p)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			name = cfg.Name
		}
		t.Rows = append(t.Rows, []string{name, cfg.Architecture, fmt.Sprint(cfg.Layers), human(cfg.Params()),
			engine.GiB(read), engine.GiB(w), engine.GiB(kv), engine.GiB(need)})
		row := map[string]any{"checkpoint": p, "architecture": cfg.Architecture, "layers": cfg.Layers,
			"params": cfg.Params(), "read_bytes_per_token": read, "weight_bytes": w, "kv_bytes_per_token_bf16": kv,
			"memory_need_bytes": need, "max_positions": modelContext(cfg)}
		if g, ok := src.(model.FormatLister); ok {
			var parts []string
			for _, f := range g.Formats(rules) {
				run := f.FileBytes
				if f.RunsAs != "" {
					run = f.RunBytes
				}
				row["tensors_"+f.Stored], row["file_bytes_"+f.Stored], row["run_bytes_"+f.Stored] = f.Tensors, f.FileBytes, run
				s := fmt.Sprintf("%s %d (%s)", f.Stored, f.Tensors, engine.GiB(f.FileBytes))
				if f.RunsAs != "" {
					s += fmt.Sprintf(" run as %s (%s)", f.RunsAs, engine.GiB(f.RunBytes))
				}
				parts = append(parts, s)
			}
			if len(parts) > 0 {
				t.Notes = append(t.Notes, table.Notef("%s: tensors by type: %s", name, strings.Join(parts, "; ")))
			}
		}
		for _, n := range model.Notes(src) {
			t.Notes = append(t.Notes, table.Notef("%s", n))
		}
		if note := model.UnreadNote(src); note != "" {
			row["unread_tensors"] = len(model.Unread(src))
			t.Notes = append(t.Notes, table.Notef("%s: %s", name, note))
		}
		// What generate --prompt would encode with: the checkpoint's own
		// tokenizer, or why there is none to use.
		switch tok, err := tokenizer.Load(p); {
		case err == nil:
			row["tokenizer"] = tok.Describe()
			t.Notes = append(t.Notes, table.Notef("%s: tokenizer: %s", name, tok.Describe()))
		case errors.Is(err, tokenizer.ErrNoTokenizer):
			t.Notes = append(t.Notes, table.Notef("%s: no tokenizer: generate takes --tokens, or --prompt with --tokenizer", name))
		default:
			t.Notes = append(t.Notes, table.Notef("%s: tokenizer not read: %s", name, strings.TrimPrefix(err.Error(), p+": ")))
		}
		if r := cfg.RopeScaling; r != nil {
			row["rope_scaling"] = r.Type
			format, args := "%s: RoPE scaled by %s (factor %g", []any{name, r.Type, r.Factor}
			if r.OriginalMax > 0 {
				format, args = format+", from a %d-token context", append(args, r.OriginalMax)
			}
			if r.LogitScale() != 1 {
				format, args = format+", attention factor %.4g", append(args, r.Attention)
			}
			// The context the scaling states bounds requests, not the
			// positions alone (model.Config.Context).
			if n := modelContext(cfg); n > 0 {
				format, args = format+"; runs %d positions", append(args, n)
			}
			t.Notes = append(t.Notes, table.Notef(format+")", args...))
		}
		if cfg.RopeFreqFactors != nil {
			row["rope_scaling"] = "rope_freqs"
			t.Notes = append(t.Notes, table.Notef("%s: RoPE frequencies divided by the file's rope_freqs (llama3)", name))
		}
		if cfg.Window > 0 {
			row["sliding_window"] = cfg.Window
			slide := 0
			for l := range cfg.ModelLayers {
				if cfg.LayerWindow(l) > 0 {
					slide++
				}
			}
			t.Notes = append(t.Notes, table.Notef("%s: %d of %d layers attend over a sliding window of %d tokens (the KV cache keeps every position)", name, slide, cfg.ModelLayers, cfg.Window))
		}
		t.Data.Add(row)
		src.Close()
	}
	t.Notes = append(t.Notes, table.Notef("weights: as they load, packed formats as the %s backend runs them; memory need: the weights plus an f32 KV cache of 4096 tokens (the model's context where shorter); KV/token in bf16", c.String("backend")))
	f, err := parseTableFormat(c.String("format"))
	if err != nil {
		return err
	}
	return t.Render(c.App.Writer, f)
}

// needTokens is the context a model's memory need counts: 4096 tokens, or
// the model's own where it holds fewer (GPT-2's 1024).
func needTokens(cfg *model.Config) int64 {
	if n := modelContext(cfg); n > 0 && n < 4096 {
		return int64(n)
	}
	return 4096
}

// modelContext is the longest sequence the model runs (model.Config.Context:
// its positions, or those its scaled RoPE states), 0 where unbounded.
func modelContext(cfg *model.Config) int {
	n, _ := cfg.Context()
	return n
}
