package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/reports/peers"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/suites"
)

func peerCommand() *cli.Command {
	return &cli.Command{
		Name:  "peer",
		Usage: "import another engine's figures as peer runs (llama-bench, vLLM, mlx_lm.benchmark)",
		Subcommands: []*cli.Command{{
			Name:      "import",
			Usage:     "store other engines' benchmark output so compare can put it beside mtlbench's runs (- reads standard input)",
			ArgsUsage: "FILE...",
			Description: "Reads llama-bench -o json / -o jsonl, vllm bench serve --save-result, vllm bench\n" +
				"latency --output-json, mlx_lm.benchmark's printed output, or mtlbench's own peer-run\n" +
				"JSON (tools/peers); the format is recognised unless --from names it. Each tool's\n" +
				"parameters become the keys `mtlbench bench` gives its cases\n" +
				"(model/bench/batch=B/gen_len=N/prompt_len=P), so\n" +
				"  mtlbench bench -m qwen3-30b-a3b -b 1 -p 512 -n 128 -r 5 --backend metal --tag mine\n" +
				"  mtlbench peer import llama.json --model qwen3-30b-a3b\n" +
				"  mtlbench compare llama.cpp mine\n" +
				"puts both engines' figures side by side. A file that does not say which machine\n" +
				"it ran on is recorded as run on this one. Every file is read and checked before\n" +
				"anything is stored, and all files' runs are stored together or not at all. A run\n" +
				"the store already holds (the same tool, tag, machine, cases and samples, read from\n" +
				"the same bytes or of the same start) is skipped, so importing a file twice, or a copy\n" +
				"of it, stores it once. A FILE of - is standard input; a run it does not date is dated\n" +
				"by the import, as a file's is by its modification time:\n" +
				"  llama-bench -m model.gguf -o jsonl | mtlbench peer import - --model qwen3-30b-a3b\n" +
				"docs/peers.md has each tool's commands.",
			Flags: []cli.Flag{dbFlag(),
				&cli.StringFlag{Name: "from", Usage: "the file's format: " + strings.Join(peers.Formats, ", ") + " (default: recognised)"},
				tagFlag("label for the peer runs (default: the tool's name)"),
				&cli.StringFlag{Name: "model", Usage: "mtlbench model name to record (a preset, or the name of the checkpoint folder or .gguf file without .gguf that mtlbench's runs record), so cases read as mtlbench's do (default: the tool's own name for the model, which no mtlbench run records; mtlbench's peer-run JSON records its own)"},
				&cli.IntFlag{Name: "batch", Usage: "batch the tool ran (vllm bench latency --batch-size)", DefaultText: "the file's, else vllm bench latency's 8"},
				&cli.IntFlag{Name: "prompt-len", Usage: "prompt tokens (vllm bench latency --input-len)", DefaultText: "the file's, else vllm bench latency's 32"},
				&cli.IntFlag{Name: "gen-len", Usage: "generated tokens (vllm bench latency --output-len)", DefaultText: "the file's, else vllm bench latency's 128"},
				&cli.StringFlag{Name: "range-ratio", Usage: "vllm bench serve's --random-range-ratio, which its file does not record: keys the case as mtlbench's range_ratio"},
				&cli.StringFlag{Name: "slo", Usage: "vllm bench serve's --goodput bounds as the suites' slo (ttft:MS,tpot:MS,e2el:MS), which its file does not record: keys the case as mtlbench's"},
			},
			Action: func(c *cli.Context) error {
				if c.NArg() == 0 {
					return fmt.Errorf("peer import needs one or more files")
				}
				if err := stdinOnce("peer import", c.Args().Slice()); err != nil {
					return err
				}
				// Checked before any file is read: a typo names the format
				// meant, and a count of 0 or less would be taken for the
				// flag left out (the file's, else vLLM's default).
				if f := c.String("from"); f != "" && !slices.Contains(peers.Formats, f) {
					msg := fmt.Sprintf("--from %q: unknown peer format (want one of %s)", f, strings.Join(peers.Formats, ", "))
					if d := suggest.DidYouMean(f, peers.Formats); d != "" {
						msg += " (" + d + ")"
					}
					return errors.New(msg)
				}
				for _, f := range []string{"batch", "prompt-len", "gen-len"} {
					if n := c.Int(f); c.IsSet(f) && n < 1 {
						return fmt.Errorf("--%s %d: want 1 or more", f, n)
					}
				}
				// A name no mtlbench run records would line up with none
				// of their cases (model.CheckRecordedName).
				if c.IsSet("model") {
					if err := model.CheckRecordedName(c.String("model")); err != nil {
						return fmt.Errorf("--model %w", err)
					}
				}
				o := peers.Options{Model: c.String("model"), Batch: c.Int("batch"), PromptLen: c.Int("prompt-len"), GenLen: c.Int("gen-len")}
				for _, f := range []struct {
					flag, param string
					dst         *string
				}{{"range-ratio", suites.ParamRangeRatio, &o.RangeRatio}, {"slo", suites.ParamSLO, &o.SLO}} {
					if v := c.String(f.flag); v != "" {
						var err error
						if *f.dst, err = suites.Canonical(f.param, v); err != nil {
							return fmt.Errorf("--%s: %w", f.flag, err)
						}
					}
				}
				// Read and convert every file before storing anything.
				type pending struct {
					path string
					recs []*results.RunRecord
				}
				var all []pending
				for _, arg := range c.Args().Slice() {
					data, path, err := readInput(c.App.Reader, arg, readfile.Import, "a peer's results")
					if err != nil {
						return err
					}
					format := c.String("from")
					if format == "" {
						if format, err = peers.Detect(data); err != nil {
							// --from helps a file of no shape Detect knows, not
							// one whose error says what to run instead.
							if errors.Is(err, peers.ErrUnknownFormat) {
								return fmt.Errorf("%s: %w (name the format with --from)", path, err)
							}
							return fmt.Errorf("%s: %w", path, err)
						}
					}
					if (o.RangeRatio != "" || o.SLO != "") && format != peers.FormatVLLMServe {
						return fmt.Errorf("%s: --range-ratio and --slo describe vllm bench serve runs, and this file is %s", path, format)
					}
					// The other formats record their shapes: a flag would
					// be dropped, not applied.
					if format != peers.FormatVLLMServe && format != peers.FormatVLLMLatency {
						for _, f := range []string{"batch", "prompt-len", "gen-len"} {
							if c.IsSet(f) {
								return fmt.Errorf("%s: --%s describes vllm bench runs, and this file is %s, which records its own", path, f, format)
							}
						}
					}
					// mtlbench's peer-run JSON keys its cases as a suite does,
					// mtlbench's model name among them.
					if format == peers.FormatMtlbench && c.IsSet("model") {
						return fmt.Errorf("%s: --model names the model of another tool's output, and this file is %s, which records mtlbench's own", path, format)
					}
					runs, err := peers.Parse(format, path, data, o)
					if err != nil {
						return err
					}
					for _, r := range runs {
						for _, w := range r.Warnings {
							fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: %s: %s\n", path, w)
						}
					}
					src := peerSource{name: path, hash: fmt.Sprintf("%x", sha256.Sum256(data))}
					if arg != stdinPath {
						if st, err := os.Stat(path); err == nil {
							src.mod = st.ModTime()
						}
					}
					// Each run as it would be stored, checked as import checks
					// an export's (results.RunRecord.Check): refused here,
					// naming the file, not by the store's batch.
					var recs []*results.RunRecord
					for _, r := range runs {
						rec := peerRecord(r, src, c.String("tag"))
						if err := rec.Check(); err != nil {
							return fmt.Errorf("%s: %s: %w", path, rec.Run.ToolVersion, err)
						}
						recs = append(recs, rec)
					}
					all = append(all, pending{path, recs})
				}
				// A new store is made only now, and taken away again where
				// the batch fails (docs/data.md).
				st, err := prepareStore(c)
				if err != nil {
					return err
				}
				defer st.close()
				db, err := st.open()
				if err != nil {
					return err
				}
				// Every file's runs in one transaction: a store failing on a
				// later file leaves none of the earlier ones' (docs/peers.md).
				var said []string
				err = storeBatch(c, db, func(db *results.DB) error {
					for _, p := range all {
						for _, rec := range p.recs {
							if id, ok, err := db.FindRecord(rec, suites.RunKeys); err != nil {
								return err
							} else if ok {
								// The same file twice would pool its figures twice.
								said = append(said, fmt.Sprintf("%s (%s) is already here as run %d (tag %s): skipped",
									rec.Run.ToolVersion, p.path, id, rec.Run.Tag))
								continue
							}
							id, err := db.ImportRun(rec)
							if err != nil {
								return fmt.Errorf("%s: %w", p.path, err)
							}
							said = append(said, fmt.Sprintf("imported %s as run %d (tag %s): %s",
								rec.Run.ToolVersion, id, rec.Run.Tag, plural.Of(len(rec.Cases), "case")))
						}
					}
					return nil
				})
				if err != nil {
					return fmt.Errorf("%w; nothing was imported: every file's runs are stored together or not at all", err)
				}
				for _, l := range said {
					fmt.Fprintln(c.App.ErrWriter, l)
				}
				return nil
			},
		}},
	}
}

// peerSource is what a peer import read: its name (a path, or "standard
// input"), the sha256 of its bytes, and a file's modification time (zero
// for standard input, which has none).
type peerSource struct {
	name, hash string
	mod        time.Time
}

// peerRecord is a peer run as the store keeps it: kind peer, complete,
// started when the input says, else at the file's modification time, else
// (standard input) now; ended when the input says (mtlbench's peer format)
// or else when it started (the other tools do not record their end; the
// import time is not it), on this machine unless the input named one. Its
// suite hash is the input's, which keys it for FindRecord whatever its
// start: the same bytes imported again are the same run.
func peerRecord(r *peers.Run, src peerSource, tag string) *results.RunRecord {
	if tag == "" {
		tag = peerTag(r.Tool)
	}
	start := r.StartedAt
	if start.IsZero() {
		start = src.mod
	}
	if start.IsZero() {
		start = time.Now()
	}
	end := r.EndedAt
	if end.IsZero() {
		end = start
	}
	m := r.Machine
	if !r.HasMachine {
		m = hostMachine()
	} else if m.Hostname == "" {
		h := hostMachine()
		if m.CPUModel == h.CPUModel {
			m.Hostname, m.OS, m.Arch, m.CPUCores, m.MemoryBytes = h.Hostname, h.OS, h.Arch, h.CPUCores, h.MemoryBytes
		}
	}
	if m.Extra == nil {
		m.Extra = map[string]string{}
	}
	m.Extra["peer_tool"] = strings.TrimSpace(r.Tool + " " + r.ToolVersion)
	notes := "imported from " + src.name
	if r.Notes != "" {
		notes += ": " + r.Notes
	}
	rec := &results.RunRecord{Run: results.Run{SuiteName: r.SuiteName, SuiteHash: src.hash, Tag: tag, Backend: r.Backend, TimingMode: r.TimingMode,
		Kind: results.KindPeer, Status: results.RunComplete, ToolVersion: strings.TrimSpace(r.Tool + " " + r.ToolVersion),
		Notes: notes, Machine: m, StartedAt: start, EndedAt: end}}
	for _, pc := range r.Cases {
		rec.Cases = append(rec.Cases, results.CaseRecord{
			Case: results.Case{Key: pc.Key, Name: pc.Name, Kind: pc.Kind, Params: pc.Params, Status: results.CaseDone,
				LayersRun: pc.LayersRun, LayersTotal: pc.LayersTotal, StartedAt: start, EndedAt: end},
			Samples: pc.Samples})
	}
	return rec
}

// peerTag is a tool's default tag: its first word, without the Python
// module's suffix ("vllm bench serve" -> vllm, "mlx_lm.benchmark" -> mlx-lm).
func peerTag(tool string) string {
	t := strings.Fields(tool)
	if len(t) == 0 {
		return "peer"
	}
	name := strings.TrimSuffix(t[0], ".benchmark")
	return strings.ReplaceAll(name, "_", "-")
}

// hostMachine describes the machine this command runs on, by the facts the
// OS gives without opening a backend.
func hostMachine() results.Machine {
	name, _ := os.Hostname()
	return results.Machine{Hostname: name, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUModel: host.CPUModel(),
		CPUCores: runtime.NumCPU(), MemoryBytes: host.TotalMemory()}
}
