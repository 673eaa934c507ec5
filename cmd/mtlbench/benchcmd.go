package main

import (
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/runner/model"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/suites"
)

// benchCommand is a llama-bench-style quick run: the flags build a suite
// (one model case per point of batch × prompt × gen), which runs through the
// same runner and store as `mtlbench run`.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "quick llama-bench-style run from flags: -m MODEL -b 1,2,4 -p 512 -n 128 -r 5",
		Description: "Lists take commas and ranges, as llama-bench's do: 1,2,4; 1-8 (every integer);\n" +
			"1-16*2 (1, 2, 4, 8, 16: times 2); 16-64+16 (16, 32, 48, 64: plus 16). Every combination\n" +
			"of batch, prompt, gen and depth (-d: context in the cache before each prompt) is one case,\n" +
			"named and keyed as a suite's would be (bench/batch=1/prompt_len=512/gen_len=128, keyed\n" +
			"model/bench/gen_len=128/prompt_len=512), a value at its default (batch 1) left out of the\n" +
			"key, so compare pairs it with the same case of\n" +
			"another run or of a peer engine (mtlbench peer import). The suite it builds is\n" +
			"printed by --print-suite; save it to change anything the flags do not reach.\n\n" +
			"Serving load, as vllm bench serve measures it: --request-rate 1,2,4 --requests 64 -b 8\n" +
			"--slo ttft:500,tpot:50 sends 64 requests arriving as a Poisson process at each rate, at\n" +
			"most 8 served at once, and records requests and goodput a second, TTFT, TPOT and\n" +
			"end-to-end latency (docs/suites.md, \"Serving load\"); --burstiness 0.5 sends them in bursts.\n\n" +
			"Examples:\n\n" +
			"   mtlbench bench -m qwen3-moe-mini -b 1-8*2 -p 128 -n 32 -r 5\n" +
			"   mtlbench bench -m qwen3-30b-a3b --dtype q4 --layers 4 -r 3\n" +
			"   mtlbench bench -m gpt2 --dtype q4 --fusion on,off -n 64\n" +
			"   mtlbench bench -m qwen3-moe-mini -b 8 --request-rate 2,4,8 --requests 64 --slo ttft:500,tpot:50",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "model", TakesFile: true, Aliases: []string{"m"}, Usage: "model preset (mtlbench models), checkpoint folder (HF or mlx-lm) or .gguf file", Required: true},
			&cli.StringFlag{Name: "batch", Aliases: []string{"b"}, Value: "1", Usage: "concurrent sequences: list or range"},
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Value: "512", Usage: "prompt tokens per sequence: list or range"},
			&cli.StringFlag{Name: "gen", Aliases: []string{"n"}, Value: "128", Usage: "generated tokens per sequence: list or range"},
			&cli.StringFlag{Name: "depth", Aliases: []string{"d"}, Value: "0", Usage: "tokens of context in the KV cache before each prompt, as llama-bench's -d (the suites' depth); e.g. 0,4096"},
			&cli.StringFlag{Name: "request-rate", Usage: "serving load: requests arriving a second as a Poisson process (vLLM's --request-rate), a list such as 1,2,4 for a case each; --batch is then the most served at once; needs --requests"},
			&cli.StringFlag{Name: "burstiness", Value: "1", Usage: "--request-rate's gaps as a gamma distribution of this shape (vLLM's --burstiness): 1 is Poisson, below 1 burstier, above more even"},
			&cli.IntFlag{Name: "requests", Usage: "requests in all (vLLM's --num-prompts), more than the batch queue", DefaultText: "the batch"},
			&cli.Float64Flag{Name: "range-ratio", Usage: "each request's prompt and output lengths drawn uniformly from -p and -n times 1-r to 1+r (vLLM's --random-range-ratio; 0: as given)"},
			&cli.StringFlag{Name: "slo", Usage: "latency bounds for goodput_per_s, vLLM's --goodput: ttft:MS,tpot:MS,e2el:MS (any of them)"},
			&cli.IntFlag{Name: "repetitions", Aliases: []string{"r"}, Value: 5, Usage: "repetitions of every case"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "unrecorded warm-up repetitions of every case"},
			&cli.StringFlag{Name: "backend", Value: "auto", Usage: "auto, cpu, cuda, metal or metal-emu"},
			&cli.StringFlag{Name: "dtype", Usage: "weight dtype (default: a checkpoint's own, a preset's bf16): f32, f16, bf16, or for presets packed: q2, q3, q4, q5, q6, q8 (MLX affine), nvfp4, mxfp8 (mlx), q4_k_m, q5_k_m, q8_0, iq2_xxs, iq3_xxs (GGUF); a float dtype converts a checkpoint's float matrices, refused where all are packed"},
			&cli.StringFlag{Name: "timing", Value: "throughput", Usage: "throughput, or profile (per-op timings)"},
			&cli.StringFlag{Name: "fit", Value: "strict", Usage: "strict, or truncate-layers to run what fits in memory"},
			&cli.BoolFlag{Name: "synthetic", Usage: "with a checkpoint (--model PATH), seeded weights of its architecture instead of its own, in --dtype (packed too): a model benchmarked before its weights are downloaded"},
			&cli.IntFlag{Name: "layers", Usage: "run only the first N layers of the model (0: all), as the suites' layers; results say so"},
			&cli.StringFlag{Name: "fusion", Value: "on", Usage: "on, off, or on,off: the backend's fusions (the suites' fusion); on,off runs both, interleaved, to compare"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads: the cases' threads, in their key (0: all cores, the backend's default); the cpu backend's alone, another refuses it"},
			&cli.StringFlag{Name: "witness-gpu", Usage: "metal-emu: the Apple GPU its cost witness reads the counts against, e.g. \"M2 Pro\" or \"M4 Max 32-core\" (default M3 Ultra; docs/metal-kernels.md)"},
			tagFlag("label to find this run by (compare, gate)"),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "summary format: " + formatList(formatBenchfmt)},
			&cli.BoolFlag{Name: "print-suite", Usage: "print the suite the flags build and exit"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
			&cli.Int64Flag{Name: "resume", Usage: "finish an interrupted bench run: the same flags and --resume RUN (Ctrl-C prints the command)"},
			stepsFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.Bool("print-suite") {
				// what a run reads, not the suite: printing runs nothing
				for _, f := range []string{"db", "tag", "format", "resume", "steps"} {
					if c.IsSet(f) {
						return fmt.Errorf("--print-suite runs nothing, so --%s would be dropped: give it to the run (mtlbench run SUITE --%s ...)", f, f)
					}
				}
			}
			if err := checkResumeFlag(c); err != nil {
				return err
			}
			format, err := parseRunFormat(c.String("format"))
			if err != nil {
				return err
			}
			spec := quickSpec{Model: c.String("model"), Backend: c.String("backend"), DType: c.String("dtype"),
				Timing: c.String("timing"), Fit: c.String("fit"), Repetitions: c.Int("repetitions"), Warmup: c.Int("warmup"),
				Layers: c.Int("layers"), Fusion: strings.Split(c.String("fusion"), ","), WitnessGPU: c.String("witness-gpu"),
				Requests: c.Int("requests"), SLO: c.String("slo"), RangeRatio: c.Float64("range-ratio"), Synthetic: c.Bool("synthetic"),
				Threads: c.Int("threads")}
			if spec.Rates, err = parseRates(c.String("request-rate")); err != nil {
				return err
			}
			if spec.Burstiness, err = suites.ParseBurstiness(c.String("burstiness")); err != nil {
				return fmt.Errorf("--burstiness: %w", err)
			}
			if c.IsSet("burstiness") && spec.Rates == nil {
				return fmt.Errorf("--burstiness shapes the gaps between requests arriving at --request-rate; give a rate")
			}
			// Read by the rule a matrix reads a range of the parameter by,
			// its bounds included: a range past them is one error, at the
			// flag, said with every other list flag's.
			var listErrs []error
			for _, l := range []struct {
				flag, param string
				dst         *[]int
			}{{"batch", suites.ParamBatch, &spec.Batch}, {"prompt", suites.ParamPromptLen, &spec.Prompt}, {"gen", suites.ParamGenLen, &spec.Gen}, {"depth", suites.ParamDepth, &spec.Depth}} {
				if *l.dst, err = suites.ParseParamList(l.param, c.String(l.flag)); err != nil {
					listErrs = append(listErrs, listarg.Named("--"+l.flag, err))
				}
			}
			if err := errors.Join(listErrs...); err != nil {
				return err
			}
			// An unusable --backend is said as every command says it, with
			// the other flags' problems, before anything is printed.
			berr := backendFlag(c)
			if berr != nil {
				spec.Backend = "auto"
			}
			text, err := spec.yaml()
			if err != nil {
				return err
			}
			// Checked before it is printed too: a printed suite runs.
			s, err := suites.Parse("bench", text)
			if err != nil {
				return errors.Join(benchFlagErrors(text, err), berr)
			}
			if berr != nil {
				return berr
			}
			if c.Bool("print-suite") {
				// What suites validate checks, the model's configuration
				// included (--layers past its depth), so the printed suite
				// is one run takes.
				if err := bench.Check(s, func(line string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", line) }); err != nil {
					return benchFlagErrors(text, err)
				}
				_, err := c.App.Writer.Write(text)
				return err
			}
			st, err := storeFor(c, s)
			if err != nil {
				return benchFlagErrors(text, err)
			}
			defer st.close()
			sum, err := measure(c, s, st, bench.Options{})
			if sum == nil {
				if errors.Is(err, bench.ErrInterrupted) {
					return interruptedEarly(err)
				}
				// bench's suite is its flags: "a different version of
				// bench" would name no file the user can look at.
				if sc := (*bench.SuiteChangedError)(nil); errors.As(err, &sc) {
					return fmt.Errorf("resume: run %d was made from another suite than these bench flags build (suite hash %.12s, now %.12s): "+
						"resume it with the flags it was made with, as the resume command its interruption printed gives them", sc.Run, sc.Was, sc.Now)
				}
				return benchFlagErrors(text, err)
			}
			db := st.db
			if rerr := printRun(c.App.Writer, db, sum, format, false); rerr != nil && err == nil {
				err = rerr
			}
			stored, reps := storedLine(sum, db.Path())
			fmt.Fprintf(c.App.ErrWriter, "run %d (bench) %s in %v: %s\n", sum.RunID, runStatus(err), sum.Elapsed.Round(time.Second), stored)
			if resumable(sum.Run.Status, err, reps) {
				printResume(c.App.ErrWriter, err, benchResumeCommand(c, db.Path(), sum.RunID))
			}
			if errors.Is(err, bench.ErrInterrupted) {
				return &exitError{code: 130, err: err}
			}
			return err
		},
	}
}

// benchResumeCommand is the command line that finishes bench run id in
// the store db: the same flags, which build the same suite (its hash is
// checked), the store by its absolute path (the command may be run from
// another folder, or without the MTLBENCH_DB this one had) and --resume.
func benchResumeCommand(c *cli.Context, db string, id int64) string {
	args, _ := c.App.Metadata[argsKey].([]string)
	cmd := []string{"mtlbench"}
	named := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--resume" || a == "-resume":
			i++
			continue
		case strings.HasPrefix(a, "--resume=") || strings.HasPrefix(a, "-resume="):
			continue
		case a == "--db" || a == "-db":
			cmd = append(cmd, a, shellQuote(db))
			i++
			named = true
			continue
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			cmd = append(cmd, shellQuote(a[:strings.Index(a, "=")+1]+db))
			named = true
			continue
		}
		cmd = append(cmd, shellQuote(a))
	}
	if !named {
		cmd = append(cmd, "--db", shellQuote(db))
	}
	return strings.Join(append(cmd, "--resume", strconv.FormatInt(id, 10)), " ")
}

// benchKeyFlags maps the keys of the suite bench builds to the flags that
// set them.
var benchKeyFlags = map[string]string{
	"model": "--model", "preset": "--model", "path": "--model", "dtype": "--dtype", "fit": "--fit", "backend": "--backend", "weights": "--synthetic",
	"timing": "--timing", "repetitions": "--repetitions", "warmup": "--warmup", "batch": "--batch",
	"prompt_len": "--prompt", "gen_len": "--gen", "depth": "--depth", "fusion": "--fusion",
	suites.ParamArrival: "--request-rate and --burstiness", suites.ParamRequests: "--requests", suites.ParamSLO: "--slo",
	suites.ParamRangeRatio: "--range-ratio",
	suites.ParamWitnessGPU: "--witness-gpu", suites.ParamLayers: "--layers", string(ops.Threads): "--threads",
}

// benchFlagErrors names, for each problem found at a position of the suite
// bench built (text: its checks, and the runner's before any case runs),
// the flag behind it instead of a line of a file the user never wrote; a
// problem no flag explains drops the position, which names no file.
func benchFlagErrors(text []byte, err error) error {
	var list suites.ErrorList
	switch e := err.(type) {
	case suites.ErrorList:
		list = e
	case *suites.Error:
		list = suites.ErrorList{e}
	default:
		return err
	}
	lines := strings.Split(string(text), "\n")
	msgs := make([]string, len(list))
	for i, e := range list {
		if e.Pos.Line == 0 && strings.HasPrefix(e.Pos.File, "--") {
			msgs[i] = e.Error() // at a flag already (--backend cuda)
			continue
		}
		msg := strings.TrimPrefix(e.Error(), e.Pos.String()+": ")
		msgs[i] = "bench: " + msg
		if e.Pos.Line < 1 || e.Pos.Line > len(lines) {
			continue
		}
		key, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(lines[e.Pos.Line-1]), "- "), ":")
		if flag, ok := benchKeyFlags[key]; ok {
			msgs[i] = flag + ": " + benchHint(msg)
		}
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// benchHintKeys are the case lengths a hint tells to lower (runner/bench's
// positions and memory checks), each a word of its own there.
var benchHintKeys = regexp.MustCompile(`(^|[\s(,])(batch|prompt_len|gen_len|depth|requests)\b`)

// benchHint says the lengths a message's hint names as the flags that set
// them: a bench user wrote --prompt, not prompt_len (benchKeyFlags).
func benchHint(msg string) string {
	i := strings.LastIndex(msg, "(hint: ")
	if i < 0 {
		return msg
	}
	hint := benchHintKeys.ReplaceAllStringFunc(msg[i:], func(m string) string {
		sub := benchHintKeys.FindStringSubmatch(m)
		return sub[1] + benchKeyFlags[sub[2]]
	})
	// A memory hint may name keys no flag sets (prefill_budget, kv_dtype):
	// the suite bench builds is where they are set.
	var suiteOnly []string
	for _, k := range bench.FitHintKeys() {
		if _, ok := benchKeyFlags[k]; !ok && regexp.MustCompile(`[\s(,]`+k+` `).MatchString(hint) {
			suiteOnly = append(suiteOnly, k)
		}
	}
	if len(suiteOnly) > 0 && strings.HasSuffix(hint, ")") {
		them := "it"
		if len(suiteOnly) > 1 {
			them = "them"
		}
		hint = fmt.Sprintf("%s; bench has no flag for %s: save the suite --print-suite prints and set %s there)",
			strings.TrimSuffix(hint, ")"), strings.Join(suiteOnly, " or "), them)
	}
	return msg[:i] + hint
}

// quickSpec is what bench's flags ask for.
type quickSpec struct {
	Model, Backend, DType, Timing, Fit string
	Synthetic                          bool   // a checkpoint's architecture with seeded weights
	WitnessGPU                         string // the cases' witness_gpu, "" for the default
	Repetitions, Warmup                int
	Layers                             int      // the cases' layers, 0 for the whole model
	Fusion                             []string // the cases' fusion: on, off, or both
	Batch, Prompt, Gen, Depth          []int
	// Rates are the serving cases' poisson arrivals, requests a second
	// (none: every request at once); Requests the requests of each case
	// (0: the batch) and SLO the cases' slo ("" for none).
	Rates    []string
	Requests int
	SLO      string
	// RangeRatio is the cases' range_ratio (0: every request of -p and -n).
	RangeRatio float64
	// Burstiness is the rates' gamma shape (1: Poisson).
	Burstiness float64
	// Threads is the cases' threads (0: the backend's count), so that the
	// printed suite runs on the goroutines the bench command does.
	Threads int
}

// parseRates reads --request-rate's list: each a rate the suites' poisson
// arrival takes (suites.ParseRate, so a flag and a file refuse the same);
// its errors name the flag.
func parseRates(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	// An empty item is refused as every list's is (listarg.Split),
	// not as a rate that is no number.
	items, err := listarg.Split("--request-rate", s)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[float64]string{}
	for i, r := range items {
		x, err := suites.ParseRate(r)
		if err != nil {
			return nil, fmt.Errorf("--request-rate: item %d: %v", i+1, err)
		}
		if prev, dup := seen[x]; dup {
			return nil, fmt.Errorf("--request-rate: %s given twice (as %s and %s)", strconv.FormatFloat(x, 'g', -1, 64), prev, r)
		}
		seen[x] = r
		out = append(out, r)
	}
	return out, nil
}

// yaml is the suite the flags describe, as a suite file would say it.
func (q quickSpec) yaml() ([]byte, error) {
	if q.Repetitions < 1 || q.Repetitions > suites.MaxRepetitions {
		return nil, fmt.Errorf("--repetitions must be from 1 to %d, got %d", suites.MaxRepetitions, q.Repetitions)
	}
	if q.Warmup < 0 || q.Warmup > suites.MaxRepetitions {
		return nil, fmt.Errorf("--warmup must be from 0 to %d, got %d", suites.MaxRepetitions, q.Warmup)
	}
	if q.Layers < 0 {
		return nil, fmt.Errorf("--layers must be at least 0 (0: every layer), got %d", q.Layers)
	}
	if q.Requests < 0 {
		return nil, fmt.Errorf("--requests must be at least 1 (0: the batch), got %d", q.Requests)
	}
	// YAML would spell a non-finite value .nan or .inf, which the user never wrote.
	if math.IsNaN(q.RangeRatio) || math.IsInf(q.RangeRatio, 0) {
		return nil, fmt.Errorf("--range-ratio %v: want a fraction from 0 to below 1", q.RangeRatio)
	}
	if err := checkThreads(q.Threads); err != nil {
		return nil, err
	}
	if len(q.Rates) > 0 && q.Requests == 0 {
		return nil, fmt.Errorf("--request-rate needs --requests: how many requests arrive at that rate (vLLM's --num-prompts)")
	}
	for i, f := range q.Fusion {
		if f != "on" && f != "off" || slices.Contains(q.Fusion[:i], f) {
			return nil, fmt.Errorf("--fusion %q: want on, off, or on,off", strings.Join(q.Fusion, ","))
		}
	}
	if err := q.checkCases(); err != nil {
		return nil, err
	}
	type modelYAML struct {
		Preset  string `yaml:"preset,omitempty"`
		Path    string `yaml:"path,omitempty"`
		Weights string `yaml:"weights,omitempty"`
		DType   string `yaml:"dtype,omitempty"`
		Seed    int    `yaml:"seed"`
		Fit     string `yaml:"fit,omitempty"`
	}
	type matrixYAML struct {
		Batch     []int    `yaml:"batch,flow"`
		PromptLen []int    `yaml:"prompt_len,flow"`
		GenLen    []int    `yaml:"gen_len,flow"`
		Depth     []int    `yaml:"depth,flow,omitempty"` // the suites' depth: context before each prompt
		Arrival   []string `yaml:"arrival,flow,omitempty"`
		Fusion    []string `yaml:"fusion,flow,omitempty"`
	}
	type caseYAML struct {
		Name   string         `yaml:"name"`
		Kind   string         `yaml:"kind"`
		Params map[string]any `yaml:"params,omitempty"`
		Matrix matrixYAML     `yaml:"matrix"`
	}
	doc := struct {
		Name        string     `yaml:"name"`
		Description string     `yaml:"description"`
		Model       modelYAML  `yaml:"model"`
		Backend     string     `yaml:"backend"`
		Timing      string     `yaml:"timing"`
		Repetitions int        `yaml:"repetitions"`
		Warmup      int        `yaml:"warmup"`
		Interleave  bool       `yaml:"interleave"`
		Cases       []caseYAML `yaml:"cases"`
	}{
		Name: "bench", Description: "mtlbench bench " + q.describe(),
		Model:   modelYAML{DType: q.DType, Seed: 1},
		Backend: q.Backend, Timing: q.Timing, Repetitions: q.Repetitions, Warmup: q.Warmup, Interleave: true,
		Cases: []caseYAML{{Name: "bench", Kind: "model", Matrix: matrixYAML{Batch: q.Batch, PromptLen: q.Prompt, GenLen: q.Gen}}},
	}
	params := map[string]any{}
	if q.WitnessGPU != "" {
		params[suites.ParamWitnessGPU] = q.WitnessGPU
	}
	if q.Layers > 0 {
		params[suites.ParamLayers] = q.Layers
	}
	if q.Requests > 0 {
		params[suites.ParamRequests] = q.Requests
	}
	if q.SLO != "" {
		params[suites.ParamSLO] = q.SLO
	}
	if q.RangeRatio != 0 {
		params[suites.ParamRangeRatio] = q.RangeRatio
	}
	if q.Threads > 0 {
		params[string(ops.Threads)] = q.Threads
	}
	for _, r := range q.Rates {
		a := "poisson:" + r
		if q.Burstiness != 1 {
			a = "gamma:" + r + ":" + strconv.FormatFloat(q.Burstiness, 'g', -1, 64)
		}
		doc.Cases[0].Matrix.Arrival = append(doc.Cases[0].Matrix.Arrival, a)
	}
	switch {
	case len(q.Fusion) > 1:
		doc.Cases[0].Matrix.Fusion = q.Fusion
	case len(q.Fusion) == 1 && q.Fusion[0] == "off":
		params[suites.ParamFusion] = "off"
	}
	if len(params) > 0 {
		doc.Cases[0].Params = params
	}
	if slices.ContainsFunc(q.Depth, func(d int) bool { return d != 0 }) {
		doc.Cases[0].Matrix.Depth = q.Depth
	}
	// A checkpoint, a folder or a GGUF file, is a path, as docs/suites.md
	// has it (a folder wins over a preset of its name).
	if st, err := os.Stat(q.Model); err == nil && (st.IsDir() || !model.IsPreset(q.Model)) || !model.IsPreset(q.Model) && q.Synthetic {
		doc.Model.Path, doc.Model.Weights = q.Model, suites.WeightsCheckpoint
		if q.Synthetic {
			doc.Model.Weights = suites.WeightsSynthetic
		}
	} else {
		doc.Model.Preset = q.Model
	}
	// A checkpoint runs in its own dtype unless --dtype says otherwise;
	// synthetic weights, a preset's too, default to bf16.
	if doc.Model.DType == "" && (model.IsPreset(q.Model) || q.Synthetic) {
		doc.Model.DType = "bf16"
	}
	if q.Fit != "strict" {
		doc.Model.Fit = q.Fit
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// checkCases refuses lists whose combinations make more cases than a
// suite holds, naming the flags: the suite's own error would point at a
// line of a file the user never wrote.
func (q quickSpec) checkCases() error {
	n, parts := 1.0, []string(nil)
	for _, l := range []struct {
		flag string
		n    int
	}{{"--batch", len(q.Batch)}, {"--prompt", len(q.Prompt)}, {"--gen", len(q.Gen)}, {"--depth", len(q.Depth)}, {"--request-rate", len(q.Rates)}, {"--fusion", len(q.Fusion)}} {
		if l.n > 1 {
			n *= float64(l.n) // a float: the product of long lists cannot wrap
			parts = append(parts, fmt.Sprintf("%s %d", l.flag, l.n))
		}
	}
	if n > suites.MaxCases {
		return fmt.Errorf("%s make %.0f cases, over the limit of %d: shorten the lists", strings.Join(parts, " x "), n, suites.MaxCases)
	}
	return nil
}

func (q quickSpec) describe() string {
	j := func(v []int) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = strconv.Itoa(x)
		}
		return strings.Join(s, ",")
	}
	d := fmt.Sprintf("-m %s -b %s -p %s -n %s -r %d", shellQuote(q.Model), j(q.Batch), j(q.Prompt), j(q.Gen), q.Repetitions)
	if slices.ContainsFunc(q.Depth, func(d int) bool { return d != 0 }) {
		d += " -d " + j(q.Depth)
	}
	if q.Layers > 0 {
		d += fmt.Sprintf(" --layers %d", q.Layers)
	}
	if len(q.Rates) > 0 {
		d += " --request-rate " + strings.Join(q.Rates, ",")
		if q.Burstiness != 1 {
			d += " --burstiness " + strconv.FormatFloat(q.Burstiness, 'g', -1, 64)
		}
	}
	if q.Requests > 0 {
		d += fmt.Sprintf(" --requests %d", q.Requests)
	}
	if q.SLO != "" {
		d += " --slo " + q.SLO
	}
	if q.RangeRatio != 0 {
		d += " --range-ratio " + strconv.FormatFloat(q.RangeRatio, 'g', -1, 64)
	}
	if f := strings.Join(q.Fusion, ","); f != "" && f != "on" {
		d += " --fusion " + f
	}
	if q.WitnessGPU != "" {
		d += " --witness-gpu " + shellQuote(q.WitnessGPU)
	}
	if q.Threads > 0 {
		d += fmt.Sprintf(" --threads %d", q.Threads)
	}
	return d
}
