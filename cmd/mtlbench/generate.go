package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
)

// modelFlags are shared by every command that opens a model.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "preset name (mtlbench models lists them), checkpoint folder (HF or mlx-lm) or .gguf file", Required: true},
		&cli.StringFlag{Name: "dtype", Usage: "weight dtype: f32, f16, bf16, or for presets packed: q2, q3, q4, q5, q6, q8 (MLX affine), nvfp4, mxfp8 (mlx), q4_k_m, q5_k_m, q8_0, iq2_xxs, iq3_xxs (GGUF) (presets default to bf16; checkpoints keep theirs)"},
		&cli.IntFlag{Name: "layers", Usage: "run only the first N layers (results say so)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of synthetic weights"},
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "compute backend: " + strings.Join(backends.Names, ", ")},
		&cli.IntFlag{Name: "threads", Usage: "CPU threads (0: all cores)"},
		&cli.IntFlag{Name: "block-size", Value: 16, Usage: "KV cache block size in tokens"},
		&cli.StringFlag{Name: "moe-strategy", Value: "grouped", Usage: "MoE dispatch: loop, chunked or grouped"},
		&cli.IntFlag{Name: "moe-chunk", Value: 64, Usage: "chunk size of the chunked MoE strategy"},
		&cli.StringFlag{Name: "fusion", Value: "on", Usage: "on: the backend may fuse ops; off: every op is its own kernel (same tokens expected)"},
		&cli.StringFlag{Name: "kv-dtype", Value: "auto", Usage: "KV cache dtype: auto (the model's where the backend keeps it, else its activation dtype), f32, f16 or bf16 (the suites' kv_dtype)"},
	}
}

// openEngine opens the backend and the model the flags name.
func openEngine(c *cli.Context, kvTokens int) (*engine.Engine, func(), error) {
	spec := model.Spec{Model: c.String("model"), Layers: c.Int("layers"), Seed: c.Uint64("seed")}
	// make mac-smoke compares the tokens of fusion on and off
	// (docs/metal-first-run.md).
	var noFusion bool
	switch f := c.String("fusion"); f {
	case "on":
	case "off":
		noFusion = true
	default:
		return nil, nil, fmt.Errorf("--fusion %q: want on or off", f)
	}
	if s := c.String("dtype"); s != "" {
		f, err := model.ParseFormat(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--dtype: %w", err)
		}
		spec.DType, spec.Quant = &f.DType, f.Quant
	}
	bo, err := backendOptions(c.Int("threads"))
	if err != nil {
		return nil, nil, err
	}
	be, err := backends.Open(c.String("backend"), bo)
	if err != nil {
		return nil, nil, err
	}
	cfg, src, err := model.Open(spec)
	if err != nil {
		return nil, nil, err
	}
	info := be.Info()
	e, err := engine.New(be, cfg, src, engine.Options{
		NoFusion:  noFusion,
		BlockSize: c.Int("block-size"), KVTokens: kvTokens, KVDType: c.String("kv-dtype"),
		MoE:             bridge.MoEParams{Strategy: bridge.MoEStrategy(c.String("moe-strategy")), ChunkSize: c.Int("moe-chunk")},
		AvailableMemory: info.AvailableBytes, MemoryWhere: info.Backend + " (" + info.Name + ")",
	})
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return e, func() { src.Close(); be.Close() }, nil
}

func generateCommand() *cli.Command {
	return &cli.Command{
		Name:      "generate",
		Usage:     "generate tokens from a prompt of token ids",
		ArgsUsage: " ",
		Description: "Runs the engine on one prompt and prints the generated token ids. With --json it\n" +
			"prints {\"tokens\": [...], \"logits_last\": [...]}, the logits being those of the\n" +
			"last prompt position. Example:\n\n" +
			"   mtlbench generate --model qwen3-moe-mini --tokens 12,7,300 --max-new-tokens 16",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "tokens", Aliases: []string{"t"}, Usage: "prompt token ids, comma separated", Required: true},
			&cli.IntFlag{Name: "max-new-tokens", Aliases: []string{"n"}, Value: 16, Usage: "tokens to generate"},
			&cli.StringFlag{Name: "sampling", Value: "greedy", Usage: "greedy or temperature:T[,top_k:K][,top_p:P][,seed:S]"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON with the tokens and the last prompt position's logits"},
		),
		Action: func(c *cli.Context) error {
			prompt, err := parseTokens(c.String("tokens"))
			if err != nil {
				return err
			}
			sp, err := sample.Parse(c.String("sampling"))
			if err != nil {
				return err
			}
			n := c.Int("max-new-tokens")
			e, closeAll, err := openEngine(c, len(prompt)+n+16)
			if err != nil {
				return err
			}
			defer closeAll()
			start := time.Now()
			// Logits are always read for the last prompt position: the engine
			// fails on non-finite ones instead of printing garbage tokens.
			out, err := e.Generate([]engine.Request{{Prompt: prompt, MaxNewTokens: n, Sampling: sp, WantLogits: true}})
			if err != nil {
				return err
			}
			el := time.Since(start)
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(struct {
					Tokens     []int32   `json:"tokens"`
					LogitsLast []float32 `json:"logits_last"`
				}{out[0].Tokens, out[0].Logits})
			}
			ids := make([]string, len(out[0].Tokens))
			for i, t := range out[0].Tokens {
				ids[i] = strconv.Itoa(int(t))
			}
			fmt.Fprintln(c.App.Writer, strings.Join(ids, " "))
			cfg := e.Config()
			fmt.Fprintf(c.App.ErrWriter, "%s on %s: %d prompt + %d new tokens in %v\n", cfg.Name, e.Backend().Info().Backend, len(prompt), len(out[0].Tokens), el.Round(time.Millisecond))
			if cfg.Truncated() {
				fmt.Fprintf(c.App.ErrWriter, "note: ran %d of the model's %d layers\n", cfg.Layers, cfg.ModelLayers)
			}
			return nil
		},
	}
}

func parseTokens(s string) ([]int32, error) {
	var out []int32
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--tokens: item %d (%q) is not a token id", i+1, f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}
