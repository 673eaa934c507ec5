package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/runner/tune/tuner"
	"github.com/mtlbench/mtlbench/suites"
)

// tuneCommand is `mtlbench tune`, with show, export and import as
// subcommands (each with its own flags and --help).
func tuneCommand() *cli.Command {
	dir := &cli.StringFlag{Name: "dir", TakesFile: true, Usage: "tuned folder to use instead of the user's cache"}
	return &cli.Command{
		Name:      "tune",
		Usage:     "tune kernel parameters for this device and record the winners",
		ArgsUsage: "[SUITE.yaml]",
		Description: "mtlbench tune SUITE.yaml             tune the buckets of the suite's decode steps and kernel cases\n" +
			"mtlbench tune --kernel moe --shape tokens=4,experts=32,top_k=4,hidden=512,intermediate=256\n" +
			"mtlbench tune export FILE | import FILE | show\n\n" +
			"Each candidate of the kernel's declared space (pruned by its constraints) is checked\n" +
			"against the reference (a wrong answer disqualifies it), then timed in interleaved\n" +
			"rounds; the fastest few are re-timed with the default and a Mann-Whitney test decides\n" +
			"whether the best is really faster, else the default is kept. Every sample goes to the\n" +
			"results database (a run of kind tune) and the winners to a tuned-config file, by\n" +
			"default in the user's cache. The engine takes the nearest bucket's config; among equally\n" +
			"near ones $MTLBENCH_TUNED's, then the cache's, then those shipped in the repository.\n" +
			"Explicit suite params always win.\n\n" +
			"--backend metal tunes the Metal kernels on this Mac's GPU; --backend metal-emu runs the\n" +
			"same candidates on the CPU emulation of Metal, anywhere: every one is checked against\n" +
			"the reference (wrong ones are disqualified and listed), but emulated timings are not a\n" +
			"GPU's, so no tuned config is written. There the cost witness counts each candidate's\n" +
			"bytes as a GPU would move them (--witness-gpu: against which Mac), stored with the run,\n" +
			"and the verdict names the default's bytes and the candidate moving the fewest.\n" +
			"Ctrl-C (or SIGTERM) stops a tune; each finished bucket's winner is kept, written as the bucket\n" +
			"ends, and tune names them and prints the command that tunes the rest: the same arguments with\n" +
			"--skip-tuned, which keeps each bucket whose stored winner was tuned by this build (commit, tool\n" +
			"version, kernel source) on this device against the same default and space, and tunes the others;\n" +
			"with --dry-run it lists which buckets it would skip and which tune, timing nothing.\n\n" +
			"   mtlbench tune suites/qwen3-moe.yaml --backend metal --skip-tuned   # tune what an interrupted tune left\n\n" +
			"docs/tuning.md has more.",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "kernel", Usage: "kernel(s) to tune, comma-separated (default: all the backend declares)"},
			&cli.StringFlag{Name: "shape", Usage: "with --kernel and no suite: the shape, e.g. tokens=4,experts=32 (default: the kernel's default shape, which tune names)"},
			&cli.StringFlag{Name: "dtype", Usage: "with --kernel, not a suite: the weight dtype (default: the kernel's: bf16; q4 for qmatmul and qmoe; f32, and only f32, for the norms and argmax, which read no weights)"},
			&cli.StringFlag{Name: "backend", Usage: "backend (default: the suite's, else auto)"},
			&cli.IntFlag{Name: "threads", Usage: threadsUsage},
			&cli.StringFlag{Name: "strategy", Value: tuner.Exhaustive, Usage: "search: exhaustive, random or local"},
			&cli.DurationFlag{Name: "budget", Value: 10 * time.Minute, Usage: "time budget for all buckets (0: none)"},
			&cli.IntFlag{Name: "rounds", Value: 10, Usage: "interleaved rounds for every candidate"},
			&cli.IntFlag{Name: "confirm", Value: 20, Usage: "rounds re-timing the finalists with the default"},
			&cli.IntFlag{Name: "top", Value: 3, Usage: "finalists re-timed against the default"},
			&cli.IntFlag{Name: "trials", Value: 8, Usage: "with --strategy random: candidates drawn"},
			&cli.DurationFlag{Name: "sample-time", Value: 20 * time.Millisecond, Usage: "length of one timed repetition"},
			&cli.Float64Flag{Name: "min-gain", Value: 0.01, Usage: "smallest gain worth a tuned config, a fraction: 0.01 asks a winner to be 1% faster than the default (1.01x); 0: the default"},
			&cli.Float64Flag{Name: "alpha", Value: 0.05, Usage: "significance level of the Mann-Whitney test, shared by the finalists (Bonferroni); 0: the default"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the round order and random search"},
			&cli.StringFlag{Name: "out", TakesFile: true, Usage: "tuned-config file to merge the winners into (default: the user's cache; not -, which a merge cannot be)"},
			&cli.StringFlag{Name: "dir", TakesFile: true, Usage: "tuned folder to use instead of the user's cache"},
			&cli.BoolFlag{Name: "dry-run", Usage: "list the buckets and their pruned spaces; time nothing (with --skip-tuned: which buckets a resume would skip, with the stored winner and run, and which it would tune, and why)"},
			&cli.BoolFlag{Name: "skip-tuned", Usage: "keep each bucket whose winner the tuned-config file holds from a tune of this build, device, kernel source, default and space (an interrupted tune's), tuning the rest"},
			tagFlag("label of the tune run in the database"),
			&cli.StringFlag{Name: "witness-gpu", Usage: "metal-emu: the Apple GPU the cost witness reads each candidate's counts against, e.g. \"M2 Pro\" (default M3 Ultra)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
		},
		Action: tuneRun,
		Subcommands: []*cli.Command{
			{
				Name:  "show",
				Usage: "list every tuned config the engine could consult, in lookup order, with whether it applies here",
				Flags: []cli.Flag{dir,
					&cli.StringFlag{Name: "backend", Usage: "backend whose device the configs are checked against (default: auto)"},
					&cli.IntFlag{Name: "threads", Usage: threadsUsage},
					&cli.StringFlag{Name: "format", Value: "table", Usage: formatList()}},
				Action: tuneShow,
			},
			{
				Name:      "export",
				Usage:     "write the user's tuned configs (or --dir's) to one new file (an existing one is not overwritten), or with - to standard output",
				ArgsUsage: "FILE",
				Flags:     []cli.Flag{dir},
				Action:    tuneExport,
			},
			{
				Name:      "import",
				Usage:     "merge a file's tuned configs (- reads standard input) into the user's cache (or --dir), each into its device's file; every entry and file is checked before any is written",
				ArgsUsage: "FILE",
				Flags:     []cli.Flag{dir},
				Action:    tuneImport,
			},
		},
	}
}

// checkTunedOut refuses, before any timing, a place the winners could not
// be merged into: a directory or special file, a file that is not a tuned
// config, a folder that is a file.
func checkTunedOut(out string) error {
	st, err := os.Stat(out)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file: want a tuned-config file to merge the winners into (--out, --dir)", out)
	case err == nil:
		// The results database or a model's file is named, not advised
		// to be fixed or removed as a damaged tuned-config file is.
		if k := readfile.KindOf(readfile.Head(out)); k != readfile.Unknown {
			return fmt.Errorf("%s is %s, not a tuned-config file: name one to merge the winners into with --out (not overwritten)", out, k)
		}
		if _, rerr := tune.ReadFile(out); rerr != nil {
			return fmt.Errorf("%v (not overwritten; fix or remove it, or pass --out)", rerr)
		}
		return nil
	case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return err
	}
	if d := results.FileInPath(out); d != "" {
		return fmt.Errorf("%s is not a folder: the tuned configs cannot go in it (--out, --dir)", d)
	}
	return nil
}

// tunedDir is --dir or the user's cache folder; a --dir that is a file, or
// is under one, is refused.
func tunedDir(c *cli.Context) (string, error) {
	if d := c.String("dir"); d != "" {
		if st, err := os.Stat(d); err == nil && !st.IsDir() {
			return "", fmt.Errorf("%s is not a folder: the tuned configs cannot go in it (--dir)", d)
		} else if f := results.FileInPath(d); err != nil && f != "" {
			return "", fmt.Errorf("%s is not a folder: the tuned configs cannot go in it (--dir %s)", f, d)
		}
		return d, nil
	}
	return tune.UserDir()
}

func tuneRun(c *cli.Context) error {
	var s *suites.Suite
	switch {
	case c.NArg() > 1:
		return oneArg(c, "tune", "suite", "tune each on its own")
	case c.NArg() == 1 && c.IsSet("shape"):
		return errors.New("tune: give a suite or --kernel with --shape, not both")
	// Each of these would be dropped without a word.
	case c.NArg() == 1 && c.IsSet("dtype"):
		return errors.New("tune: --dtype goes with --kernel, not a suite: each case tunes at its own dtype")
	case c.IsSet("out") && c.IsSet("dir"):
		return errors.New("tune: give --out FILE or --dir FOLDER, not both: the winners go to one file")
	case c.String("out") == stdoutPath:
		return noStdout("--out", stdoutPath, "the winners are merged into the tuned configs a file holds")
	case c.NArg() == 1:
		var err error
		if s, err = suites.Resolve(c.Args().First()); err != nil {
			return err
		}
	case !c.IsSet("kernel"):
		return errors.New("tune needs a suite, or --kernel NAME with --shape k=v,... (see mtlbench tune --help)")
	}
	strategy := c.String("strategy")
	if err := enumFlag("--strategy", strategy, tuner.Exhaustive, tuner.Random, tuner.Local); err != nil {
		return err
	}
	// Only the random search draws: elsewhere --trials would be
	// dropped, and a search meant to be short would time every candidate.
	if c.IsSet("trials") && strategy != tuner.Random {
		return fmt.Errorf("tune: --trials goes with --strategy random, the search that draws candidates; --strategy %s draws none", strategy)
	}
	var kernels []string
	if c.IsSet("kernel") {
		k := c.String("kernel")
		names, err := listarg.Split("--kernel", k)
		if err != nil {
			return err
		}
		for _, name := range names {
			if slices.Contains(kernels, name) {
				return fmt.Errorf("--kernel %q: %s twice", k, name)
			}
			kernels = append(kernels, name)
		}
	}
	if err := backendFlag(c); err != nil {
		return err
	}
	name := c.String("backend")
	if name == "" && s != nil {
		name = s.Backend
	}
	bo, err := backendOptions(c.Int("threads"))
	if err != nil {
		return err
	}
	be, err := backends.Open(name, bo)
	if err != nil {
		if c.IsSet("backend") || s == nil {
			return fmt.Errorf("--backend %s: %w", name, err)
		}
		return s.ErrorAt(s.Positions["backend"], "backend %s: %v", name, err) // the suite's line, as run says it
	}
	defer be.Close()
	if err := bench.ThreadsFlag(c.Int("threads"), be.Info().Backend, be); err != nil {
		return err
	}
	// A kernel the backend does not tune is a mistyped flag: say which.
	for _, k := range kernels {
		if _, err := tune.Find(be.Info().Backend, k); err != nil {
			return fmt.Errorf("--kernel %q: %w", c.String("kernel"), err)
		}
	}

	var buckets []tuner.Bucket
	if s != nil {
		warn := func(line string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", line) }
		if buckets, err = tuner.SuiteBuckets(s, be, kernels, warn); err != nil {
			return err
		}
		for _, n := range tuner.OtherThreads(s, be) {
			fmt.Fprintf(c.App.ErrWriter, "tune: %s\n", n)
		}
	} else {
		shape, err := tuner.ParseShape("--shape", c.String("shape"))
		if err != nil {
			return err
		}
		for _, k := range kernels {
			label := "--shape " + c.String("shape")
			if !c.IsSet("shape") {
				label = "default shape"
			}
			b, err := tuner.ShapeBucket(be, k, c.String("dtype"), shape, label)
			if err != nil {
				return err
			}
			// Without --shape the kernel's declared default shape is tuned:
			// say which, since a run at another shape looks up its own.
			if !c.IsSet("shape") {
				fmt.Fprintf(c.App.ErrWriter, "tune: no --shape: tuning %s at its default shape %s\n", k, b.Shape.Key())
			}
			buckets = append(buckets, b)
		}
	}
	if g := c.String("witness-gpu"); g != "" {
		if err := suites.CheckValue(suites.ParamWitnessGPU, g); err != nil {
			return fmt.Errorf("--witness-gpu: %w", err)
		}
		if err := bench.OtherBackend(suites.ParamWitnessGPU, g, be.Info().Backend, be); err != nil {
			return fmt.Errorf("--witness-gpu: %w", err)
		}
	}
	o := tuner.Options{
		Backend: be, Strategy: c.String("strategy"), Budget: c.Duration("budget"),
		Rounds: c.Int("rounds"), Confirm: c.Int("confirm"), Top: c.Int("top"), Trials: c.Int("trials"),
		Alpha: c.Float64("alpha"), MinGain: c.Float64("min-gain"), SampleTime: c.Duration("sample-time"),
		Seed: c.Uint64("seed"), ToolVersion: readBuildInfo().Version, GitCommit: gitCommit(), Tag: c.String("tag"),
		SuiteName: "tune", Progress: newTuneProgress(c.App.ErrWriter, c.Bool("quiet")).event,
		WitnessGPU: c.String("witness-gpu"),
	}
	// A dry run refuses what the run would, before it lists anything.
	if err := tuner.Check(buckets, o); err != nil {
		return err
	}
	w := c.App.Writer
	if c.Bool("dry-run") && !c.Bool("skip-tuned") {
		return printSpaces(w, be, buckets, nil)
	}

	out := c.String("out")
	if out == "" {
		dir, err := tunedDir(c)
		if err != nil {
			return err
		}
		out = filepath.Join(dir, tune.FileName(tune.DeviceName(be), be.Info().Backend))
	}
	if err := checkTunedOut(out); err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return dryRunSkipTuned(c, w, be, buckets, o, out)
	}
	// --out's folder must be there, as every file output's (checkWritable);
	// the user's cache or --dir is made where it is not.
	if err := checkWritable("--out", c.String("out")); err != nil {
		return err
	}
	// --out is checked against the store before the store is made.
	st, err := prepareStore(c)
	if err != nil {
		return err
	}
	defer st.close()
	if err := notTheStore(st.path, "--out", out); err != nil {
		return err
	}
	db, err := st.open()
	if err != nil {
		return err
	}
	// The first signal (a closed terminal too) stops tuning at its next
	// check and keeps what was measured; a second one kills at once.
	ctx, stop := stopOnSignals(c.Context, c.App.ErrWriter)
	defer stop()
	o.DB = db
	if o.Store, err = recordOptions(func(msg string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench:", msg) }); err != nil {
		return err
	}
	// Each bucket's config is written as the bucket ends, so a tune that
	// dies later (a kill, a crash) keeps it.
	kept := newTunedWriter(out, c.App.ErrWriter)
	if !be.Info().Emulated {
		o.OnResult = kept.add
	}
	if c.Bool("skip-tuned") {
		// checkTunedOut read it already; no file is nothing tuned yet.
		o.Tuned = &tune.File{}
		if f, err := tune.ReadFile(out); err == nil {
			o.Tuned = f
		}
	}
	if s != nil {
		o.SuiteName, o.SuitePath, o.SuiteHash = s.Name, s.File, s.Hash
	} else {
		o.SuitePath = "--kernel " + c.String("kernel")
		if c.IsSet("shape") {
			o.SuitePath += " --shape " + c.String("shape")
		}
	}
	emulated := be.Info().Emulated
	if emulated {
		fmt.Fprintf(c.App.ErrWriter, "tune: %s is an emulation: every candidate is checked against the reference, "+
			"but its timings are the CPU's, not a GPU's, so no tuned config will be written\n", be.Info().Backend)
	}
	rep, err := tuner.Run(ctx, buckets, o)
	// The store's name in its own failure: a recovery file beside it names
	// its path already.
	err = storeFailed(db, err)
	if rep == nil {
		return err
	}
	if perr := printTuneReport(w, rep); perr != nil && err == nil {
		err = perr
	}
	if kept.written() {
		fmt.Fprintf(c.App.ErrWriter, "tuned configs: %d new, %d replaced, %s kept in %s\n", kept.counts["new"], kept.counts["replaced"], plural.Of(kept.counts["kept"], "earlier winner"), out)
	} else if emulated {
		fmt.Fprintf(c.App.ErrWriter, "tuned configs: none written (emulated timings); the reference check's verdicts are above\n")
	}
	if o.Tuned != nil {
		fmt.Fprintf(c.App.ErrWriter, "tune: --skip-tuned: %d of %s tuned earlier for this build, in %s: not tuned again\n", skippedCount(rep), plural.Of(len(buckets), "bucket"), out)
	}
	fmt.Fprintf(c.App.ErrWriter, "tune run %d in %v, samples stored in %s\n", rep.RunID, rep.Elapsed.Round(time.Second), db.Path())
	if errors.Is(err, tuner.ErrInterrupted) {
		if kept.written() || skippedCount(rep) > 0 {
			printTuneResume(c.App.ErrWriter, rep, len(buckets), out, tuneResumeCommand(c, db.Path(), out))
		}
		return &exitError{code: 130, err: err}
	}
	failed := 0
	for _, r := range rep.Results {
		if r.Err != nil {
			failed++
		}
	}
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d of %s could not be tuned", failed, plural.Of(len(rep.Results), "bucket"))
	}
	return err
}

func skippedCount(rep *tuner.Report) int {
	n := 0
	for _, r := range rep.Results {
		if r.Skipped {
			n++
		}
	}
	return n
}

// printTuneResume says, of an interrupted tune, which buckets' winners are
// kept in out and the command that tunes the rest (--skip-tuned).
func printTuneResume(w io.Writer, rep *tuner.Report, buckets int, out, resume string) {
	var done []string
	for _, r := range rep.Results {
		if r.Err == nil && r.Entry != nil {
			done = append(done, r.Bucket.Describe()+": "+r.Bucket.Kernel.String(r.Winner))
		}
	}
	fmt.Fprintf(w, "tune: interrupted: %d of %s finished, their winners kept in %s", len(done), plural.Of(buckets, "bucket"), out)
	if len(done) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(done, "; "))
	}
	fmt.Fprintf(w, "\nresume with: %s\n", resume)
}

// tuneResumeCommand is the command line that tunes what an interrupted tune
// left: the same arguments, --db, --out and --dir by their absolute paths
// (the command may be run from another folder, or without the MTLBENCH_DB
// this one had) and --skip-tuned, as bench's resume (benchResumeCommand).
func tuneResumeCommand(c *cli.Context, db, out string) string {
	args, _ := c.App.Metadata[argsKey].([]string)
	abs := map[string]string{"db": db}
	for _, f := range []string{"out", "dir"} {
		if p, err := filepath.Abs(c.String(f)); c.IsSet(f) && err == nil {
			abs[f] = p
		}
	}
	cmd := []string{"mtlbench"}
	named := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			cmd = append(cmd, shellQuote(a))
			continue
		}
		if name == "skip-tuned" {
			continue
		}
		p, ok := abs[name]
		switch {
		case !ok:
			cmd = append(cmd, shellQuote(a))
			continue
		case inline:
			cmd = append(cmd, shellQuote(a[:strings.Index(a, "=")+1]+p))
		default:
			cmd = append(cmd, a, shellQuote(p))
			i++
		}
		named = named || name == "db"
	}
	if !named {
		cmd = append(cmd, "--db", shellQuote(db))
	}
	if !c.IsSet("out") && !c.IsSet("dir") {
		cmd = append(cmd, "--out", shellQuote(out))
	}
	return strings.Join(append(cmd, "--skip-tuned"), " ")
}

// tunedWriter merges each bucket's entry into the tuned-config file as the
// bucket ends (File.Write replaces the file whole, atomically).
type tunedWriter struct {
	path   string
	log    io.Writer
	counts map[string]int
}

func newTunedWriter(path string, log io.Writer) *tunedWriter {
	return &tunedWriter{path: path, log: log, counts: map[string]int{}}
}

func (w *tunedWriter) written() bool { return len(w.counts) > 0 }

func (w *tunedWriter) add(r *tuner.Result) error {
	if r.Entry == nil {
		return nil
	}
	f := &tune.File{}
	if old, err := tune.ReadFile(w.path); err == nil {
		f = old
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%v (not overwritten; fix or remove it, or pass --out)", err)
	}
	what, old := f.MergeResult(*r.Entry)
	if what == "kept" {
		fmt.Fprintf(w.log, "tune: %s: this run kept the default, which does not refute the earlier winner %s (p=%.2g, run %d): kept; delete its entry from %s to go back to the default\n",
			r.Entry.Describe(), old.Config.Key(), old.P, old.RunID, w.path)
	} else if err := f.Write(w.path); err != nil {
		return err
	}
	w.counts[what]++
	return nil
}

// dryRunSkipTuned is --skip-tuned --dry-run: each bucket as the resume
// would take it (tuner's Stored rule), skipped or tuned and why, reading
// the tuned-config file out and the store, writing neither and timing
// nothing (docs/tuning.md, "Resuming an interrupted tune").
func dryRunSkipTuned(c *cli.Context, w io.Writer, be bridge.Backend, buckets []tuner.Bucket, o tuner.Options, out string) error {
	// checkTunedOut read it already; no file is nothing tuned yet.
	o.Tuned = &tune.File{}
	if f, err := tune.ReadFile(out); err == nil {
		o.Tuned = f
	}
	// A stored winner is shown to be this build's by the tune run it names:
	// a store that is not there holds none (as for the tune, which would
	// make it), and is not made by a dry run.
	if len(o.Tuned.Entries) > 0 && storeIsThere(c) {
		db, err := openExistingDB(c)
		if err != nil {
			return err
		}
		defer db.Close()
		o.DB = db
	}
	plan := make([]string, len(buckets))
	skips := 0
	for i, b := range buckets {
		e, why := o.Stored(b)
		switch {
		case e != nil:
			skips++
			plan[i] = fmt.Sprintf("skipped: tuned earlier (run %d) for this build: %s kept, not tuned again", e.RunID, b.Kernel.String(e.Config))
		case why != "":
			plan[i] = "tuned: " + why
		default:
			plan[i] = "tuned: no stored winner in " + out
		}
	}
	if err := printSpaces(w, be, buckets, plan); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "tune: --skip-tuned --dry-run: %d of %s would be skipped, %d tuned (%s)\n", skips, plural.Of(len(buckets), "bucket"), len(buckets)-skips, out)
	return nil
}

// storeIsThere says whether the store openDB would open is there: any
// other trouble with it is openExistingDB's to say.
func storeIsThere(c *cli.Context) bool {
	path := c.String("db")
	if path == "" {
		path = envconfig.DB()
	}
	abs, err := results.Resolve(path)
	if err != nil {
		return true
	}
	_, err = os.Stat(abs)
	return !errors.Is(err, os.ErrNotExist)
}

// printSpaces is --dry-run: each bucket's candidates and what was pruned,
// grouped by reason, and with --skip-tuned what the resume would do with
// it (plan, one line a bucket; nil without).
func printSpaces(w io.Writer, be bridge.Backend, buckets []tuner.Bucket, plan []string) error {
	for i, b := range buckets {
		cands, pruned := b.Kernel.Candidates(b.Shape, tune.LimitsFor(be, string(b.Kernel.Op), b.DType))
		names := make([]string, len(cands))
		for i, c := range cands {
			names[i] = b.Kernel.String(c)
		}
		fmt.Fprintf(w, "%s  (%s)\n", b.Describe(), b.Label)
		if plan != nil {
			fmt.Fprintf(w, "  --skip-tuned: %s\n", plan[i])
		}
		fmt.Fprintf(w, "  %s: %s\n  %d pruned\n", plural.Of(len(cands), "candidate"), strings.Join(names, ", "), len(pruned))
		var reasons []string
		byReason := map[string][]string{}
		for _, p := range pruned {
			if byReason[p.Reason] == nil {
				reasons = append(reasons, p.Reason)
			}
			byReason[p.Reason] = append(byReason[p.Reason], "{"+p.Config.Key()+"}")
		}
		for _, r := range reasons {
			fmt.Fprintf(w, "    %s: %s\n", r, strings.Join(byReason[r], " "))
		}
	}
	return nil
}

func printTuneReport(w io.Writer, rep *tuner.Report) error {
	t := &table.Table{Title: fmt.Sprintf("tune run %d", rep.RunID),
		Header: []string{"kernel", "dtype", "bucket", "from", "timed", "pruned", "wrong", "winner", "vs default", "p", "verdict"}}
	for _, r := range rep.Results {
		counts := map[string]int{}
		for _, c := range r.Candidates {
			counts[c.Status]++
		}
		k := r.Bucket.Kernel
		row := []string{string(k.Op), r.Bucket.DType, r.Bucket.Shape.Key(), r.Bucket.Label,
			strconv.Itoa(counts[tuner.StatusTimed]), strconv.Itoa(counts[tuner.StatusPruned]), strconv.Itoa(counts[tuner.StatusDisqualified])}
		switch {
		case r.Skipped:
			// Nothing was timed: the stored winner's figures.
			row = append(row[:4], "-", "-", "-", k.String(r.Winner), fmt.Sprintf("%.3fx", r.Speedup), fmt.Sprintf("%.2g", r.P), r.Verdict)
		case r.Err != nil:
			row = append(row, "-", "-", "-", "error: "+r.Err.Error())
		case r.Emulated:
			row = append(row, k.String(r.Winner)+" (default)", "emulated", "-", r.Verdict)
		default:
			row = append(row, k.String(r.Winner), fmt.Sprintf("%.3fx", r.Speedup), fmt.Sprintf("%.2g", r.P), r.Verdict)
		}
		t.Rows = append(t.Rows, row)
	}
	if err := t.Render(w, table.Format("table")); err != nil {
		return err
	}
	for _, r := range rep.Results {
		for _, c := range r.Candidates {
			if c.Status == tuner.StatusDisqualified {
				fmt.Fprintf(w, "disqualified: %s %s: %s\n", r.Bucket.Describe(), r.Bucket.Kernel.String(c.Config), c.Reason)
			}
		}
	}
	return nil
}

// tuneProgress prints tuning progress: phase lines everywhere, a round
// counter on a terminal.
type tuneProgress struct {
	w     io.Writer
	tty   bool
	quiet bool
}

func newTuneProgress(w io.Writer, quiet bool) *tuneProgress {
	p := newProgress(w, quiet)
	return &tuneProgress{w: w, tty: p.tty, quiet: quiet}
}

func (p *tuneProgress) event(e tuner.Event) {
	if p.quiet {
		return
	}
	head := fmt.Sprintf("[%d/%d] %s", e.Bucket, e.Buckets, e.Label)
	if e.Msg != "" {
		if p.tty {
			fmt.Fprint(p.w, "\r\033[K")
		}
		fmt.Fprintf(p.w, "%s: %s: %s\n", head, e.Phase, e.Msg)
		return
	}
	if e.Rounds == 0 {
		return
	}
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s: %s round %d/%d", head, e.Phase, e.Round, e.Rounds)
		if e.Round == e.Rounds {
			fmt.Fprintln(p.w)
		}
	case e.Round == e.Rounds:
		fmt.Fprintf(p.w, "%s: %s: %s done\n", head, e.Phase, plural.Of(e.Rounds, "round"))
	}
}

// tuneShow lists every tuned config the engine could consult, in lookup
// order, with whether it applies here.
func tuneShow(c *cli.Context) error {
	f, err := parseTableFormat(c.String("format"))
	if err != nil {
		return err
	}
	store := tune.Default(envconfig.TunedDir(), nil)
	if d := c.String("dir"); d != "" {
		if _, err := tunedDir(c); err != nil {
			return err
		}
		l, err := tune.DirLayer(tune.FromUser, d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for i := range store.Layers {
			if store.Layers[i].Name == tune.FromUser {
				store.Layers[i] = l
			}
		}
	}
	be, info, err := openBackendFlag(c)
	if err != nil {
		return err
	}
	defer be.Close()
	threads := tune.LimitsOf(be).MaxThreads
	t := &table.Table{Title: fmt.Sprintf("tuned configs (this device: %s, %s, %d threads)", info.Name, info.Backend, threads),
		Header: []string{"from", "device", "backend", "kernel", "dtype", "bucket", "config", "vs default", "p", "tuned", "tool", "status"},
		Data:   &table.Data{Columns: []string{"from", "device", "backend", "kernel", "dtype", "bucket", "config", "speedup", "p", "tuned_at", "version", "status"}}}
	for _, e := range store.All() {
		status := "ok"
		switch {
		case e.Device != tune.DeviceName(be) || e.Backend != info.Backend:
			status = "other device"
		case e.Shape["threads"] != 0 && e.Shape["threads"] != threads:
			status = "other thread count"
		default:
			// The checks the engine's lookup makes (tune.Store.Lookup).
			k, err := tune.Find(e.Backend, e.Kernel)
			if err != nil {
				status = "unknown kernel"
				break
			}
			lim := tune.LimitsFor(be, e.Kernel, e.DType)
			if h := tune.SourceHash(be, e.Kernel); h != "" && h != e.SourceHash {
				status = "stale (kernel source changed)"
			} else if err := e.Check(); err != nil {
				status = "refused: " + err.Error()
			} else if err := k.Check(k.Canonicalize(e.Config, e.Shape, lim), e.Shape, lim); err != nil {
				status = "cannot run here: " + err.Error()
			}
		}
		cfg := e.Config.Key()
		if k, err := tune.Find(e.Backend, e.Kernel); err == nil {
			cfg = k.String(e.Config)
		}
		t.Rows = append(t.Rows, []string{e.Layer, e.Device, e.Backend, e.Kernel, e.DType, e.Shape.Key(), cfg,
			fmt.Sprintf("%.3fx", e.Speedup), fmt.Sprintf("%.2g", e.P), e.TunedAt.Format("2006-01-02"), e.ToolVersion, status})
		row := map[string]any{"from": e.Layer, "device": e.Device, "backend": e.Backend, "kernel": e.Kernel, "dtype": e.DType,
			"bucket": e.Shape.Key(), "config": cfg, "speedup": e.Speedup, "p": e.P, "tuned_at": e.TunedAt, "version": e.ToolVersion, "status": status}
		for k, v := range e.Shape {
			row["shape_"+string(k)] = v
		}
		t.Data.Add(row)
	}
	if table.IsData(f) {
		for _, w := range store.Warnings() { // a file left out is said whatever the format
			fmt.Fprintln(c.App.ErrWriter, "warning:", w)
		}
		return t.Render(c.App.Writer, f)
	}
	if len(t.Rows) == 0 {
		fmt.Fprintln(c.App.Writer, "no tuned configs (run mtlbench tune)")
	} else if err := t.Render(c.App.Writer, f); err != nil {
		return err
	}
	for _, l := range store.Layers {
		fmt.Fprintf(c.App.Writer, "%s: %s (%s)\n", l.Name, l.Where, plural.Of(len(l.Entries), "entry"))
	}
	for _, w := range store.Warnings() {
		fmt.Fprintln(c.App.ErrWriter, "warning:", w)
	}
	return nil
}

// tuneExport writes the user's tuned configs (or --dir's) to one file.
func tuneExport(c *cli.Context) error {
	if err := oneArg(c, "tune export", "file (- for standard output)", "export into one file"); err != nil {
		return err
	}
	dir, err := tunedDir(c)
	if err != nil {
		return err
	}
	l, err := tune.DirLayer(tune.FromUser, dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(l.Entries) == 0 {
		return fmt.Errorf("no tuned configs in %s to export (run mtlbench tune first)", dir)
	}
	path := c.Args().First()
	if _, err := os.Lstat(path); err == nil && path != stdoutPath {
		return fmt.Errorf("%s exists: not overwritten (remove it, or name another file)", path)
	}
	// A missing folder is refused, as every file output's is
	// (checkWritable), not made: a mistyped path wrote somewhere new.
	if err := checkWritable("tune export", path); err != nil {
		return err
	}
	f := &tune.File{}
	for _, e := range l.Entries {
		f.Merge(e.Entry)
	}
	to := path
	if path == stdoutPath {
		if err := f.Encode(c.App.Writer); err != nil {
			return err
		}
		to = "standard output"
	} else if err := f.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "exported %s from %s to %s\n", plural.Of(len(f.Entries), "tuned config"), dir, to)
	return nil
}

// maxImportDevices bounds the device files one import writes: every run
// reads every file of the tuned folder.
const maxImportDevices = 64

// readTuned reads a tuned-config file, or stdin where path is "-" (a pipe
// from another machine's tune export -), and says what errors call it.
func readTuned(stdin io.Reader, path string) (*tune.File, string, error) {
	data, name, err := readInput(stdin, path, readfile.Index, "a tuned-config file")
	if err != nil {
		return nil, name, err
	}
	f, err := tune.ParseFile(name, data)
	return f, name, err
}

// tuneImport merges a file's entries into the user's cache (or --dir),
// each into its device's file; an entry replaces one of the same bucket.
func tuneImport(c *cli.Context) error {
	if err := oneArg(c, "tune import", "file (- for standard input)", "import each on its own"); err != nil {
		return err
	}
	in, name, err := readTuned(c.App.Reader, c.Args().First())
	if err != nil {
		return err
	}
	dir, err := tunedDir(c)
	if err != nil {
		return err
	}
	for i := range in.Entries {
		if err := in.Entries[i].Check(); err != nil {
			return fmt.Errorf("%s: entry %d (%s on %s): %w; nothing imported", name, i, in.Entries[i].Describe(), in.Entries[i].Device, err)
		}
	}
	byFile := map[string][]tune.Entry{}
	for _, e := range in.Entries {
		p := filepath.Join(dir, tune.FileName(e.Device, e.Backend))
		byFile[p] = append(byFile[p], e)
	}
	if len(byFile) > maxImportDevices {
		return fmt.Errorf("%s: entries for %d devices (at most %d in one import); nothing imported", name, len(byFile), maxImportDevices)
	}
	// Every device file is read and merged before any is written, so a bad
	// one stops the import with nothing half done.
	paths := slices.Sorted(maps.Keys(byFile))
	merged := make([]*tune.File, len(paths))
	var added, replaced, unchanged int
	for i, p := range paths {
		f := &tune.File{}
		if old, err := tune.ReadFile(p); err == nil {
			f = old
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w; nothing imported", err)
		}
		a, r, u := f.Merge(byFile[p]...)
		added, replaced, unchanged = added+a, replaced+r, unchanged+u
		merged[i] = f
	}
	for i, p := range paths {
		if err := merged[i].Write(p); err != nil {
			return fmt.Errorf("%w (%d of %d device files written)", err, i, len(paths))
		}
	}
	fmt.Fprintf(c.App.ErrWriter, "imported %s into %s: %d new, %d replaced, %d unchanged\n", plural.Of(len(in.Entries), "tuned config"), dir, added, replaced, unchanged)
	return nil
}
