package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
	"github.com/mtlbench/mtlbench/runner/tokenizer"
	"github.com/mtlbench/mtlbench/suites"
)

// modelFlags are shared by every command that opens a model.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", TakesFile: true, Aliases: []string{"m"}, Usage: "preset name (mtlbench models lists them), checkpoint folder (HF or mlx-lm) or .gguf file", Required: true},
		&cli.StringFlag{Name: "dtype", Usage: "weight dtype: f32, f16, bf16, or for presets packed: q2, q3, q4, q5, q6, q8 (MLX affine), nvfp4, mxfp8 (mlx), q4_k_m, q5_k_m, q8_0, iq2_xxs, iq3_xxs (GGUF) (presets default to bf16; checkpoints keep theirs, and a float dtype converts their float matrices: refused where all are packed)"},
		&cli.IntFlag{Name: "layers", Usage: "run only the first N layers (results say so)"},
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of synthetic weights"},
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: "compute backend: " + strings.Join(backends.Names, ", ")},
		&cli.IntFlag{Name: "threads", Usage: threadsUsage},
		&cli.IntFlag{Name: "block-size", Value: 16, Usage: "KV cache block size in tokens"},
		&cli.StringFlag{Name: "moe-strategy", Value: "grouped", Usage: "MoE dispatch: loop, chunked or grouped"},
		&cli.IntFlag{Name: "moe-chunk", Value: 64, Usage: "(token, expert) pairs per chunk of the chunked MoE strategy, 1 to 16777216 as a suite's moe_chunk (alone, it asks for chunked)"},
		&cli.StringFlag{Name: "fusion", Value: "on", Usage: "on: the backend may fuse ops; off: every op is its own kernel (same tokens expected)"},
		&cli.StringFlag{Name: "kv-dtype", Value: "auto", Usage: "KV cache dtype: auto (the model's where the backend keeps it so by default, Metal and CUDA; else its activation dtype, f32 on the cpu), f32, f16 or bf16 (the suites' kv_dtype)"},
	}
}

// openEngine opens the backend and the model the flags name; against is
// --against's backend, or nil.
func openEngine(c *cli.Context, kvTokens int, against bridge.Backend) (*engine.Engine, func(), error) {
	if err := backendFlag(c); err != nil {
		return nil, nil, err
	}
	be, err := openBackend(c, c.String("backend"))
	if err != nil {
		// As --against's is named (checkAgainst).
		return nil, nil, fmt.Errorf("--backend %s: %w", c.String("backend"), err)
	}
	// --threads is refused where neither backend reads it (the CPU as
	// --against takes it), before the model loads.
	if err := bench.ThreadsFlag(c.Int("threads"), be.Info().Backend, be); err != nil &&
		(against == nil || bench.ThreadsFlag(c.Int("threads"), against.Info().Backend, against) != nil) {
		be.Close()
		return nil, nil, err
	}
	e, closeModel, err := openEngineOn(c, be, "--fusion", c.String("fusion"), kvTokens, c.App.ErrWriter)
	if err != nil {
		be.Close()
		return nil, nil, err
	}
	return e, func() { closeModel(); be.Close() }, nil
}

// openBackend opens the named backend with the flags' options.
func openBackend(c *cli.Context, name string) (bridge.Backend, error) {
	bo, err := backendOptions(c.Int("threads"))
	if err != nil {
		return nil, err
	}
	return backends.Open(name, bo)
}

// openEngineOn opens the model the flags name on be, with fusion (the
// value of the flag named flag) on or off; the func it returns closes the
// model, and the caller closes be. A checkpoint's tensors the model does
// not read are a warning on warn (nil: not said again).
func openEngineOn(c *cli.Context, be bridge.Backend, flag, fusion string, kvTokens int, warn io.Writer) (*engine.Engine, func(), error) {
	spec := model.Spec{Model: c.String("model"), Layers: c.Int("layers"), Seed: c.Uint64("seed")}
	// make mac-smoke compares fusion on and off (docs/metal-first-run.md).
	var noFusion bool
	if err := enumFlag(flag, fusion, "on", "off"); err != nil {
		return nil, nil, err
	}
	noFusion = fusion == "off"
	if s := c.String("dtype"); s != "" {
		f, err := model.ParseFormat(s)
		if err != nil {
			return nil, nil, fmt.Errorf("--dtype: %w", err)
		}
		spec.DType, spec.Quant = &f.DType, f.Quant
	}
	// 0 would be the engine's default, which the flag already gives.
	if bs, sizes := c.Int("block-size"), ops.Specs[ops.BlockSize].OneOf; !slices.Contains(sizes, bs) {
		words := make([]string, len(sizes))
		for i, n := range sizes {
			words[i] = strconv.Itoa(n)
		}
		last := len(words) - 1
		return nil, nil, fmt.Errorf("--block-size %d: the KV cache takes blocks of %s or %s tokens", bs, strings.Join(words[:last], ", "), words[last])
	}
	// A chunk size sizes the chunked dispatch only, as in a suite: alone it
	// asks for it, beside another strategy it would change nothing.
	strategy := c.String("moe-strategy")
	if err := enumFlag("--moe-strategy", strategy, string(bridge.MoELoop), string(bridge.MoEChunked), string(bridge.MoEGrouped)); err != nil {
		return nil, nil, err
	}
	if c.IsSet("moe-chunk") {
		// The suites' moe_chunk range (ops.Specs): 0 would run the default
		// chunk under a flag that asked for another, a negative one fail
		// once the model is loaded, unnamed.
		if n, spec := c.Int("moe-chunk"), ops.Specs[ops.MoEChunk]; n < spec.Min || n > spec.Max {
			return nil, nil, fmt.Errorf("--moe-chunk %d: want %d to %d (token, expert) pairs a chunk", n, spec.Min, spec.Max)
		}
		switch {
		case !c.IsSet("moe-strategy"):
			strategy = string(bridge.MoEChunked)
		case strategy != string(bridge.MoEChunked):
			return nil, nil, fmt.Errorf("--moe-chunk sizes the chunks of --moe-strategy chunked, not of %s", strategy)
		}
	}
	// Refused naming the flag before the model loads, as --against's is.
	if _, err := engine.KVDType(be, be.ActDType(), c.String("kv-dtype")); err != nil {
		return nil, nil, fmt.Errorf("--kv-dtype: %w", err)
	}
	cfg, src, err := model.Open(spec)
	if le := (*model.LayersError)(nil); errors.As(err, &le) || (err != nil && spec.Layers < 0) {
		return nil, nil, fmt.Errorf("--layers: %w", err) // as bench names it
	}
	if err != nil {
		return nil, nil, err
	}
	// As in a suite (runner/bench checkMoE): on a dense model the flags
	// would change nothing that runs.
	if cfg.NumExperts == 0 {
		for _, f := range []string{"moe-strategy", "moe-chunk"} {
			if c.IsSet(f) {
				src.Close()
				return nil, nil, fmt.Errorf("--%s: model %s has no experts (only a mixture-of-experts model reads --moe-strategy and --moe-chunk)", f, cfg.Name)
			}
		}
	}
	// One request never holds more than the model's context: a request
	// past it is refused by its positions, not by the memory of a cache
	// sized for it (whose advice, fewer layers, would not make it run).
	if n, _ := cfg.Context(); n > 0 {
		kvTokens = min(kvTokens, n)
	}
	if warn != nil {
		model.WarnUnread(spec.Model, src, func(line string) { fmt.Fprintln(warn, "mtlbench: warning:", line) })
	}
	info := be.Info()
	e, err := engine.New(be, cfg, src, engine.Options{
		NoFusion:  noFusion,
		BlockSize: c.Int("block-size"), KVTokens: kvTokens, KVDType: c.String("kv-dtype"),
		MoE:             bridge.MoEParams{Strategy: bridge.MoEStrategy(strategy), ChunkSize: c.Int("moe-chunk")},
		AvailableMemory: info.AvailableBytes, MemoryWhere: info.Backend + " (" + info.Name + ")",
		// Every step's logits are checked: a NaN met by a generated token
		// would otherwise print token 0 from there on, and --against agree.
		CheckLogits: true,
	})
	if err != nil {
		src.Close()
		return nil, nil, err
	}
	return e, func() { src.Close() }, nil
}

func generateCommand() *cli.Command {
	return &cli.Command{
		Name:      "generate",
		Usage:     "generate tokens from a prompt (token ids, or text through the checkpoint's tokenizer)",
		ArgsUsage: " ",
		Description: "Runs the engine on one prompt and prints the generated token ids. With --json it\n" +
			"prints {\"tokens\": [...], \"logits_last\": [...]}, the logits being those of the\n" +
			"last prompt position, and where there is a tokenizer \"text\" (the new tokens decoded)\n" +
			"and with --prompt \"prompt\" (the ids the text encoded to).\n\n" +
			"With --against BACKEND the prompt runs again on BACKEND (the CPU: the reference), with\n" +
			"fusion as --against-fusion says, and the command fails unless the tokens are the same\n" +
			"and the last prompt position's logits differ by at most --tolerance of the largest\n" +
			"(in absolute value): how a new Mac shows its Metal kernels compute what the CPU does.\n" +
			"The CPU keeps its KV cache in f32 and a GPU in the model's dtype unless --kv-dtype says\n" +
			"otherwise: --kv-dtype f32 compares the kernels alone.\n" +
			"Examples:\n\n" +
			"   mtlbench generate --model qwen3-moe-mini --tokens 12,7,300 --max-new-tokens 16\n" +
			"   mtlbench generate --model gpt2 --dtype q4 --tokens 464,2068 --backend metal --kv-dtype f32 --against cpu\n" +
			"   mtlbench generate --model ./Qwen3-0.6B-4bit --prompt \"The capital of France is\" -n 8\n" +
			"   mtlbench generate --model ~/models/Qwen3-30B-A3B-Q8_0-00001-of-00002.gguf --prompt \"Hello\"\n\n" +
			"With --prompt the checkpoint's tokenizer.json (else its tekken.json, Mistral's own format),\n" +
			"or a .gguf file's own tokenizer, encodes the text (docs/tokenizer.md) and the new tokens\n" +
			"are printed decoded after their ids (an id the tokenizer has no text for as [id N], with\n" +
			"a warning). A GGUF file split into parts is named by any one of\n" +
			"them (docs/quantization.md, \"GGUF files\").",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "tokens", Aliases: []string{"t"}, Usage: "prompt token ids, comma separated (or --prompt)"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Usage: "prompt text, encoded by the checkpoint's tokenizer.json or tekken.json (or --tokenizer's); the output is then decoded too"},
			&cli.StringFlag{Name: "tokenizer", TakesFile: true, Usage: tokenizer.Accepted + " (a checkpoint folder's tokenizer.json, else its tekken.json, or a .gguf file's own is used otherwise)"},
			&cli.IntFlag{Name: "max-new-tokens", Aliases: []string{"n"}, Value: 16, Usage: "tokens to generate, at most: generation stops at the checkpoint's end-of-sequence token (its generation_config.json's or config.json's eos_token_id, else its own tekken.json's </s>; a GGUF file's end-of-generation tokens as llama.cpp reads them: its eos, eot and eom ids and the tokens that end a turn, such as <|im_end|>), kept as the last"},
			&cli.BoolFlag{Name: "ignore-eos", Usage: "generate all --max-new-tokens, past an end-of-sequence token (as benchmarks do)"},
			&cli.StringFlag{Name: "sampling", Value: "greedy", Usage: "greedy or temperature:T[,top_k:K][,top_p:P][,seed:S], as a suite's sampling (temperature:0 is greedy)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON with the tokens, their text where there is a tokenizer, the --prompt ids and the last prompt position's logits"},
			&cli.StringFlag{Name: "against", Usage: "also run on this backend and fail unless its tokens and logits agree (e.g. cpu)"},
			&cli.StringFlag{Name: "against-fusion", Usage: "fusion on or off in the --against run (default: as --fusion)"},
			&cli.Float64Flag{Name: "tolerance", Value: 1e-3, Usage: "--against: the largest logit difference allowed, as a fraction of the largest logit's magnitude"},
		),
		Action: func(c *cli.Context) error {
			if c.IsSet("prompt") == c.IsSet("tokens") {
				return fmt.Errorf("give the prompt as --tokens (ids) or --prompt (text), one of them")
			}
			tok, err := openTokenizer(c)
			if err != nil {
				// A checkpoint that does not open is the error, whatever its
				// tokenizer says: no tokenizer or ids would make it run.
				if merr := checkCheckpoint(c.String("model")); merr != nil {
					return merr
				}
			}
			if err != nil && (c.IsSet("tokenizer") || c.IsSet("prompt")) {
				return err
			}
			if tok != nil {
				// What the file left to a default (a GGUF file's missing
				// tokenizer.ggml.pre), said before any work, as llama.cpp says it.
				for _, n := range tok.Notes() {
					fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", n)
				}
			}
			if err != nil && tokenizerBeside(c.String("model")) {
				// The ids run without it; say why no text follows them.
				_, lerr := tokenizer.Load(c.String("model"))
				fmt.Fprintf(c.App.ErrWriter, "note: the checkpoint's tokenizer was not read, so the new tokens are not decoded: %v\n", lerr)
			}
			var prompt []int32
			switch text := c.String("prompt"); {
			case c.IsSet("tokens"):
				if prompt, err = parseTokens(c.String("tokens")); err != nil {
					return err
				}
			default:
				if prompt, err = tok.Encode(text, true); err != nil {
					return fmt.Errorf("--prompt: %w", err)
				}
				// A tekken.json pattern that does not cover the text drops
				// what it leaves, as mistral-common does: said, not silent.
				if gaps, err := tok.Dropped(text); err == nil && len(gaps) > 0 {
					fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: --prompt: the tokenizer's tekken.json config.pattern leaves %s of the text between its matches, which are dropped as mistral-common drops them (the first: %s)\n",
						plural.Of(utf8.RuneCountInString(strings.Join(gaps, "")), "character"), clip.Quote(gaps[0]))
				}
				if len(prompt) == 0 {
					return fmt.Errorf("--prompt %q encodes to no tokens", text)
				}
			}
			n := c.Int("max-new-tokens")
			if n < 1 || n > suites.MaxTokens {
				return fmt.Errorf("--max-new-tokens %d: want 1 to %d", n, suites.MaxTokens)
			}
			against, err := checkAgainst(c)
			if err != nil {
				return err
			}
			if against != nil {
				defer against.Close()
			}
			sp, err := sample.Parse(c.String("sampling"))
			if err != nil {
				return fmt.Errorf("--sampling: %w", err)
			}
			e, closeAll, err := openEngine(c, len(prompt)+n+16, against)
			if err != nil {
				return err
			}
			defer closeAll()
			// A tokenizer with more tokens than the model's vocabulary is
			// another model's, whatever ids this prompt happens to give.
			if v := e.Config().Vocab; tok != nil && tok.VocabSize() > v {
				return fmt.Errorf("the tokenizer gives ids up to %d, past %s's vocabulary of %d tokens: it is another model's tokenizer (pass the model's own with --tokenizer)",
					tok.VocabSize()-1, c.String("model"), v)
			}
			// An id of --tokens past the vocabulary is named by its place
			// in the flag.
			if v := e.Config().Vocab; !c.IsSet("prompt") {
				for i, id := range prompt {
					if id < 0 || int(id) >= v {
						return fmt.Errorf("--tokens: item %d (%d) is outside %s's vocabulary of %d tokens (ids 0 to %d)", i+1, id, c.String("model"), v, v-1)
					}
				}
			}
			if v := e.Config().Vocab; c.IsSet("prompt") {
				for _, id := range prompt {
					if int(id) >= v {
						return fmt.Errorf("--prompt: the tokenizer gives id %d, past %s's vocabulary of %d tokens: it is another model's tokenizer", id, c.String("model"), v)
					}
				}
			}
			start := time.Now()
			// Logits are always read for the last prompt position (the
			// engine's CheckLogits reads every step's): the engine fails on
			// non-finite ones instead of printing garbage tokens.
			req := engine.Request{Prompt: prompt, MaxNewTokens: n, Sampling: sp, WantLogits: true, Name: "generate --tokens"}
			if c.IsSet("prompt") {
				req.Name = "generate --prompt"
			}
			if !c.Bool("ignore-eos") {
				req.Stop = stopTokens(e.Config().EOS, tok, !c.IsSet("tokenizer"))
			}
			out, err := e.Generate([]engine.Request{req})
			if err != nil {
				return err
			}
			el := time.Since(start)
			var text *string // the new tokens decoded, where a tokenizer is at hand
			if tok != nil {
				// An id the tokenizer has no text for is shown where it
				// falls and said once, not dropped unseen (docs/tokenizer.md).
				s, unnamed, err := tok.DecodeShowing(out[0].Tokens, true, unnamedToken)
				if err != nil {
					return fmt.Errorf("decoding the output: %w", err)
				}
				if len(unnamed) > 0 {
					fmt.Fprintln(c.App.ErrWriter, unnamedWarning(tok.VocabSize(), unnamed, c.String("model"), e.Config().Vocab, c.IsSet("tokenizer")))
				}
				text = &s
			}
			if c.Bool("json") {
				err := json.NewEncoder(c.App.Writer).Encode(struct {
					Prompt     []int32   `json:"prompt,omitempty"`
					Tokens     []int32   `json:"tokens"`
					Text       *string   `json:"text,omitempty"`
					LogitsLast []float32 `json:"logits_last"`
				}{promptIDs(c, prompt), out[0].Tokens, text, out[0].Logits})
				if err != nil {
					return err
				}
			} else {
				// the tokens are the output: a write that fails (a full
				// disk) is an error, as --json's is
				if _, err := fmt.Fprintln(c.App.Writer, tokenLine(out[0].Tokens)); err != nil {
					return err
				}
				if text != nil {
					if _, err := fmt.Fprintln(c.App.Writer, *text); err != nil {
						return err
					}
				}
			}
			cfg := e.Config()
			fmt.Fprintf(c.App.ErrWriter, "%s on %s: %d prompt + %d new tokens in %v\n", cfg.Name, e.Backend().Info().Backend, len(prompt), len(out[0].Tokens), el.Round(time.Millisecond))
			if got := out[0].Tokens; len(got) < n {
				fmt.Fprintf(c.App.ErrWriter, "note: stopped at the end-of-sequence token %d after %d of %d tokens (--ignore-eos goes on)\n", got[len(got)-1], len(got), n)
			}
			if cfg.Truncated() {
				fmt.Fprintf(c.App.ErrWriter, "note: ran %d of the model's %d layers\n", cfg.Layers, cfg.ModelLayers)
			}
			if c.String("against") == "" {
				return nil
			}
			return generateAgainst(c, e, against, req, out[0])
		},
	}
}

// checkAgainst refuses --against's flags before any run, and opens its
// backend (nil without --against; the caller closes it): one this machine
// lacks, or one that cannot keep the --kv-dtype asked for (the comparison
// keeps it), says so now rather than after the first run.
func checkAgainst(c *cli.Context) (bridge.Backend, error) {
	// Without --against nothing is compared: either would be dropped
	// without a word.
	for _, f := range []string{"tolerance", "against-fusion"} {
		if c.IsSet(f) && c.String("against") == "" {
			return nil, fmt.Errorf("--%s goes with --against BACKEND, the run the tokens and logits are compared with; without it nothing is compared", f)
		}
	}
	if tol := c.Float64("tolerance"); !(tol >= 0) {
		return nil, fmt.Errorf("--tolerance %g: want a fraction of 0 or more", tol)
	}
	if f := c.String("against-fusion"); f != "" {
		if err := enumFlag("--against-fusion", f, "on", "off"); err != nil {
			return nil, err
		}
	}
	b := c.String("against")
	if b == "" {
		return nil, nil
	}
	if err := enumFlag("--against", b, backends.Names...); err != nil {
		return nil, err
	}
	be, err := openBackend(c, b)
	if err != nil {
		return nil, fmt.Errorf("--against %s: %w", b, err)
	}
	if _, err := engine.KVDType(be, be.ActDType(), c.String("kv-dtype")); err != nil {
		be.Close()
		return nil, fmt.Errorf("--against %s: %w", b, err)
	}
	return be, nil
}

// generateAgainst runs req on against (the --against backend) and fails
// unless its tokens are got's (first's output) and its logits are within
// --tolerance of got's largest.
func generateAgainst(c *cli.Context, first *engine.Engine, against bridge.Backend, req engine.Request, got engine.Output) error {
	backend := first.Backend().Info().Backend
	tol := c.Float64("tolerance")
	fusion := c.String("fusion")
	if f := c.String("against-fusion"); f != "" {
		fusion = f
	}
	e, closeAll, err := openEngineOn(c, against, "--against-fusion", fusion, len(req.Prompt)+req.MaxNewTokens+16, nil)
	if err != nil {
		return fmt.Errorf("--against %s: %w", c.String("against"), err)
	}
	defer closeAll()
	out, err := e.Generate([]engine.Request{req})
	if err != nil {
		return fmt.Errorf("--against %s: %w", c.String("against"), err)
	}
	ref := out[0]
	other := fmt.Sprintf("%s (fusion %s)", e.Backend().Info().Backend, fusion)
	if len(ref.Logits) != len(got.Logits) {
		return fmt.Errorf("%d logits on %s, %d on %s", len(got.Logits), backend, len(ref.Logits), other)
	}
	var diff, scale float64
	for i, v := range ref.Logits {
		diff = max(diff, math.Abs(float64(got.Logits[i])-float64(v)))
		scale = max(scale, math.Abs(float64(v)))
	}
	fmt.Fprintf(c.App.ErrWriter, "against %s: tokens %s; the last prompt position's logits differ by at most %.3g (largest %.3g)\n",
		other, tokenLine(ref.Tokens), diff, scale)
	// Caches kept in different dtypes round the keys and values apart, which
	// the kernels are not to blame for.
	var kv string
	if a, b := first.KVDType(), e.KVDType(); a != b {
		// The first's dtype where the other keeps it too (the cpu keeps
		// f16 and bf16 when asked), else f32.
		both := bridge.F32
		if _, err := engine.KVDType(e.Backend(), e.Backend().ActDType(), a.String()); err == nil {
			both = a
		}
		why := fmt.Sprintf("%s keeps its KV cache in %s and %s in %s (--kv-dtype %s keeps both in %s)", backend, a, e.Backend().Info().Backend, b, both, both)
		fmt.Fprintf(c.App.ErrWriter, "note: %s\n", why)
		kv = "; " + why
	}
	if !slices.Equal(got.Tokens, ref.Tokens) {
		return fmt.Errorf("tokens differ: %s on %s, %s on %s%s", tokenLine(got.Tokens), backend, tokenLine(ref.Tokens), other, kv)
	}
	if !(diff <= tol*max(scale, 1)) {
		return fmt.Errorf("the last prompt position's logits differ by %.3g between %s and %s: more than %g of the largest (%.3g)%s",
			diff, backend, other, tol, scale, kv)
	}
	return nil
}

// tokenLine is token ids separated by spaces.
func tokenLine(toks []int32) string {
	ids := make([]string, len(toks))
	for i, t := range toks {
		ids[i] = strconv.Itoa(int(t))
	}
	return strings.Join(ids, " ")
}

// parseTokens reads --tokens as every list of the command line is read
// (listarg.Split: an empty item is refused as such, not as an id).
func parseTokens(s string) ([]int32, error) {
	items, err := listarg.Split("--tokens", s)
	if err != nil {
		return nil, err
	}
	out := make([]int32, 0, len(items))
	for i, f := range items {
		v, err := strconv.ParseInt(f, 10, 32)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("--tokens: item %d (%s) is no vocabulary's id: ids run from 0 to %d at most", i+1, f, math.MaxInt32)
		case err != nil:
			return nil, fmt.Errorf("--tokens: item %d (%q) is not a token id", i+1, f)
		}
		out = append(out, int32(v))
	}
	return out, nil
}

// promptIDs are the prompt's ids for --json when they came from --prompt
// (the reader gave none), nil otherwise.
func promptIDs(c *cli.Context, prompt []int32) []int32 {
	if c.IsSet("prompt") {
		return prompt
	}
	return nil
}

// checkCheckpoint opens the checkpoint on disk that model names (a preset
// is no error) and closes it: its weights are mapped, not read. A name
// that is neither gets model.Open's error, not a tokenizer's.
func checkCheckpoint(path string) error {
	if model.IsPreset(path) {
		return nil
	}
	_, src, err := model.Open(model.Spec{Model: path})
	if err != nil {
		return err
	}
	return src.Close()
}

// stopTokens are the ids a generation stops at: those the checkpoint names
// (config.json's or generation_config.json's eos_token_id, a GGUF file's
// end-of-generation tokens), else, where it names none, those its own
// tokenizer file names (a tekken.json's </s>). own says the tokenizer is
// the checkpoint's, not --tokenizer's.
func stopTokens(named []int32, tok *tokenizer.Tokenizer, own bool) []int32 {
	if len(named) > 0 || tok == nil || !own {
		return named
	}
	return tok.EndOfGeneration()
}

// tokenizerBeside reports whether model is a checkpoint that carries a
// tokenizer: a file (a .gguf file's metadata) or a folder with a
// tokenizer.json or tekken.json.
func tokenizerBeside(model string) bool {
	st, err := os.Stat(model)
	if err != nil {
		return false
	}
	if !st.IsDir() {
		return true
	}
	p := tokenizer.FileIn(model)
	if p == "" {
		return false
	}
	st, err = os.Stat(p)
	return err == nil && !st.IsDir()
}

// openTokenizer loads --tokenizer, or the checkpoint's own: a folder's
// tokenizer.json (else its tekken.json), a .gguf file's tokenizer.ggml.*
// metadata. Without either
// it says why, for --prompt to report; a run given --tokens goes on
// without text.
func openTokenizer(c *cli.Context) (*tokenizer.Tokenizer, error) {
	if p := c.String("tokenizer"); p != "" {
		t, err := tokenizer.Load(p)
		switch {
		case errors.Is(err, readfile.ErrNotAFile), errors.Is(err, tokenizer.ErrNoTokenizer):
			// A file of another kind says what the option takes instead.
			return nil, fmt.Errorf("--tokenizer: %w; --tokenizer takes %s", err, tokenizer.Accepted)
		case err != nil:
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		return t, nil
	}
	const hint = "give --tokenizer PATH (" + tokenizer.Accepted + ") or --tokens"
	m := c.String("model")
	st, err := os.Stat(m)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--prompt needs a tokenizer: %s is a preset, with none; %s", m, hint)
	case !st.IsDir():
		t, err := tokenizer.Load(m)
		if err != nil {
			return nil, fmt.Errorf("--prompt needs the checkpoint's tokenizer: %w; %s", err, hint)
		}
		return t, nil
	}
	p := tokenizer.FileIn(m)
	if p == "" {
		return nil, fmt.Errorf("--prompt needs a tokenizer: %s has no tokenizer.json or tekken.json; %s", m, hint)
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return nil, fmt.Errorf("--prompt needs a tokenizer: %s is a folder, not a %s; %s", p, filepath.Base(p), hint)
	}
	t, err := tokenizer.Load(m)
	if err != nil {
		return nil, fmt.Errorf("--prompt needs the checkpoint's tokenizer: %w; %s", err, hint)
	}
	return t, nil
}

// unnamedToken is how the text shows a new token's id that the tokenizer
// has no text for.
func unnamedToken(id int32) string { return fmt.Sprintf("[id %d]", id) }

// unnamedWarning is generate's warning of the new tokens unnamed, which a
// tokenizer of size ids has no text for. Ids past its vocabulary suggest
// another model's tokenizer; ids within it are tokens it decodes to nothing
// (a GGUF file's unused or padding tokens, as llama.cpp decodes them, or
// ids a tokenizer.json's vocab skips), which says nothing of whose it is.
// given: the tokenizer was named by --tokenizer.
func unnamedWarning(size int, unnamed []int32, model string, vocab int, given bool) string {
	var past, within []int32
	for _, id := range unnamed {
		if int(id) >= size {
			past = append(past, id)
		} else {
			within = append(within, id)
		}
	}
	var says []string
	if len(within) > 0 {
		verb, them := "lie", "them"
		if len(within) == 1 {
			verb, them = "lies", "it"
		}
		says = append(says, fmt.Sprintf("%s of the new tokens, shown as %s, %s within the tokenizer's %d ids but it has no text for %s (unused or padding tokens, or ids its vocabulary skips)",
			idList(within), unnamedToken(within[0]), verb, size, them))
	}
	if len(past) > 0 {
		whose := "the tokenizer"
		if given {
			whose = "--tokenizer"
		}
		says = append(says, fmt.Sprintf("the tokenizer (%d ids) has no text for %s of the new tokens, shown as %s: %s's vocabulary has %d; is %s this model's?",
			size, idList(past), unnamedToken(past[0]), model, vocab, whose))
	}
	return "warning: " + strings.Join(says, "; ")
}

// idList names ids for a message: "id 5", "ids 5, 9 and 12", the first
// eight of a longer list and how many more.
func idList(ids []int32) string {
	const most = 8
	var s []string
	for i, id := range ids {
		if i == most {
			s = append(s, fmt.Sprintf("%d more", len(ids)-most))
			break
		}
		s = append(s, strconv.Itoa(int(id)))
	}
	if len(s) == 1 {
		return "id " + s[0]
	}
	return "ids " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
