package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/shquote"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/reports/tidy"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/suites"
)

func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", TakesFile: true, Usage: "results database (default $MTLBENCH_DB or ~/.local/share/mtlbench/results.db)"}
}

// openDB opens --db, else the database the environment names (MTLBENCH_DB),
// else the default, for a command that records results: a store it may not
// write is refused before the command's work, and so is a --resume of a
// store that is not there (it would be created empty, to hold no run).
func openDB(c *cli.Context) (*results.DB, error) {
	wait, err := envconfig.DBWait()
	if err != nil {
		return nil, err
	}
	// A statement waits no longer than the command would in all.
	o := results.Options{BusyTimeout: min(results.BusyTimeout, wait)}
	if resumesRun(c) {
		abs, err := existingDB(c)
		if err != nil {
			return nil, err
		}
		return opened(c)(results.OpenToWriteWith(abs, o))
	}
	path := c.String("db")
	if path == "" {
		path = envconfig.DB()
	}
	return opened(c)(results.OpenToWriteWith(path, o))
}

// recordStore is the store a command that records writes (openDB's).
// One that is there (a resume's must be) is opened at once, so that a
// store that cannot take the results is refused before the work; a new
// one is checked (results.CheckNew) and made only as the command first
// records (open), so that a command refused before then (a backend that
// does not open, a case past memory) leaves none behind (docs/data.md).
type recordStore struct {
	c    *cli.Context
	path string // absolute
	db   *results.DB
	made bool // open made the store: close removes it where it holds no run
}

// prepareStore is the store a command that records writes: open, or
// checked to be made.
func prepareStore(c *cli.Context) (*recordStore, error) {
	if !resumesRun(c) {
		if _, err := envconfig.DBWait(); err != nil {
			return nil, err
		}
		path := c.String("db")
		if path == "" {
			path = envconfig.DB()
		}
		abs, err := results.Resolve(path)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
			if err := results.CheckNew(abs); err != nil {
				return nil, err
			}
			return &recordStore{c: c, path: abs}, nil
		}
	}
	db, err := openDB(c)
	if err != nil {
		return nil, err
	}
	return &recordStore{c: c, path: db.Path(), db: db}, nil
}

// storeFor is prepareStore for a run of suite s, once its model opens
// (bench.CheckModel): bad input is refused before anything.
func storeFor(c *cli.Context, s *suites.Suite) (*recordStore, error) {
	// A resume makes no store (openDB refuses one that is not there), and
	// its own checks of the run come first (bench.checkResume).
	if !resumesRun(c) {
		if err := bench.CheckModel(s); err != nil {
			return nil, err
		}
	}
	return prepareStore(c)
}

// open is the store, made now if it was not there.
func (r *recordStore) open() (*results.DB, error) {
	if r.db == nil {
		db, err := openDB(r.c)
		if err != nil {
			return nil, err
		}
		r.db, r.made = db, true
	}
	return r.db, nil
}

// close closes the store; one this command made and then recorded no run
// in (its first write failed) is removed, as if never made.
func (r *recordStore) close() {
	switch {
	case r.db == nil:
	case r.made:
		r.db.CloseNew()
	default:
		r.db.Close()
	}
}

// resumesRun reports whether c resumes a stored run (--resume RUN): ab's
// --resume names a folder, whatever its name.
func resumesRun(c *cli.Context) bool {
	for _, f := range c.Command.Flags {
		if i, ok := f.(*cli.Int64Flag); ok && i.Name == "resume" {
			return c.Int64("resume") != 0
		}
	}
	return false
}

// checkResumeFlag refuses a --resume given as 0 or less before any work:
// no run has that id, and 0, the flag's default, would start a new run
// where one was to be finished.
func checkResumeFlag(c *cli.Context) error {
	if n := c.Int64("resume"); c.IsSet("resume") && n < 1 {
		return fmt.Errorf("--resume %d: want the id of the run to finish (mtlbench runs lists them)", n)
	}
	return nil
}

// measure runs suite s into st with what run and bench both take (the
// backend, --tag, --threads, --resume, --steps, --quiet, the environment's
// store wait) over o, which holds what only the caller sets. The summary
// is nil where no run was recorded; the error names the store where its
// writes failed.
func measure(c *cli.Context, s *suites.Suite, st *recordStore, o bench.Options) (*bench.Summary, error) {
	ctx, stop := stopOnSignals(c.Context, c.App.ErrWriter)
	defer stop()
	bo, err := backendOptions(c.Int("threads"))
	if err != nil {
		return nil, err
	}
	stepLog, closeSteps, err := openStepLog(c, st.path)
	if err != nil {
		return nil, err
	}
	prog := newProgress(c.App.ErrWriter, c.Bool("quiet"))
	store, err := recordOptions(prog.note)
	if err != nil {
		return nil, err
	}
	o.DB, o.OpenDB, o.Backend, o.Tag = st.db, st.open, c.String("backend"), c.String("tag")
	o.Threads, o.Resume, o.Backends, o.Tuned = c.Int("threads"), c.Int64("resume"), bo, tunedStore(c.App.ErrWriter)
	o.ToolVersion = readBuildInfo().Version
	o.GitCommit, o.TreeCommit = provenance()
	o.Progress, o.Warn, o.Start, o.Steps, o.Store = prog.event, prog.warn, prog.begin, stepLog, store
	sum, err := bench.Run(ctx, s, o)
	prog.done()
	if cerr := closeSteps(sum != nil); cerr != nil && err == nil {
		err = cerr
	}
	return sum, storeFailed(st.db, err)
}

// recordOptions are how a command that measures waits for a results
// database another process holds (MTLBENCH_DB_WAIT), telling note.
func recordOptions(note func(string)) (results.RecordOptions, error) {
	wait, err := envconfig.DBWait()
	return results.RecordOptions{Wait: wait, Note: note}, err
}

// storeBatch stores what an import has read in one transaction, waiting
// for a lock another process holds as long as a run's writes would
// (MTLBENCH_DB_WAIT), with a line on stderr once it has waited.
func storeBatch(c *cli.Context, db *results.DB, f func(*results.DB) error) error {
	wait, err := envconfig.DBWait()
	if err != nil {
		return err
	}
	return db.BatchWaiting(wait, func(s string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: "+s) }, f)
}

// storeFailed names the results database in an error of the store itself
// and says what to do (results.DB.StoreError); other errors are kept.
func storeFailed(db *results.DB, err error) error {
	if db == nil {
		return err // not opened: nothing of the store's failed
	}
	if msg := db.StoreError(err); msg != "" {
		return fmt.Errorf("%s: %w", msg, err)
	}
	return err
}

// opened notes the database a command opened in its app's Metadata, for
// nameStore.
func opened(c *cli.Context) func(*results.DB, error) (*results.DB, error) {
	return func(db *results.DB, err error) (*results.DB, error) {
		if err == nil && c.App.Metadata != nil {
			c.App.Metadata[storeKey] = db
		}
		return db, err
	}
}

// openExistingDB opens the database openDB would, for commands that only
// read (a store they may not write is read).
func openExistingDB(c *cli.Context) (*results.DB, error) {
	abs, err := existingDB(c)
	if err != nil {
		return nil, err
	}
	watch := closeOnSignals(c)
	db, err := opened(c)(results.Open(abs))
	watch(db, err)
	return db, err
}

// existingDB is the absolute path of the database openDB would open, which
// must be there: a path that holds no file is an error naming where it came
// from, so a mistyped MTLBENCH_DB or --db does not quietly create an empty
// store. A file of 0 bytes (touched, or truncated) holds no runs either,
// and opening it would write a schema into it.
func existingDB(c *cli.Context) (string, error) {
	path, from := c.String("db"), "--db"
	if path == "" {
		path, from = envconfig.DB(), "MTLBENCH_DB"
		if envconfig.Get("MTLBENCH_DB") == "" {
			from = "the default location"
		}
	}
	abs, err := results.Resolve(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no results database at %s (%s): check the path, or record a run first (mtlbench run ci)", abs, from)
		}
		if f := results.FileInPath(abs); f != "" {
			return "", fmt.Errorf("no results database at %s (%s): %s is a file, not a folder; check the path", abs, from, f)
		}
		return "", fmt.Errorf("results database %s (%s): %w", abs, from, err)
	}
	// Switching a store to WAL writes its header to the main file, so 0
	// bytes there with no -wal beside it is no store.
	if st.Mode().IsRegular() && st.Size() == 0 && !nonEmpty(abs+"-wal") {
		return "", fmt.Errorf("results database %s (%s) is an empty file: it holds no runs; check the path, or record a run into it first (mtlbench run ci)", abs, from)
	}
	return abs, nil
}

func nonEmpty(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() > 0
}

// notTheStore refuses an output file (what names it: a flag, a variable)
// that is the results database at store (which need not be there yet),
// or a file of SQLite's beside it: writing it would destroy every run there.
func notTheStore(store, what, path string) error {
	if path == "" || path == stdoutPath || !results.StoreHolds(store, path) {
		return nil
	}
	return fmt.Errorf("%s %s is the results database %s (or its SQLite file): writing it would destroy every run there; name another file", what, path, store)
}

// stopOnSignals is the context of a command that measures (run, bench,
// tune, ab): Ctrl-C, SIGTERM or a closed terminal (SIGHUP) stop it once
// the step in hand ends, keeping what it measured and saying how to
// resume; a second signal kills at once. SIGHUP is left alone where it is
// ignored (nohup). The first signal is answered on w at once: a step can
// take minutes (a large model on metal-emu). The answer is written before
// the context ends, so a command that stops at once still says it: written
// once the context had ended, it could come after the command's last line,
// or never, the process having exited first.
func stopOnSignals(parent context.Context, w io.Writer) (context.Context, context.CancelFunc) {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch) // the next signal kills
			cause := errors.New(sig.String() + " signal received")
			if parent.Err() == nil {
				fmt.Fprintf(w, "mtlbench: %v: stopping once the step in hand ends, keeping what was measured (a second signal stops at once)\n", cause)
			}
			cancel(cause)
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, func() {
		signal.Stop(ch) // at once: a signal after the command is not caught
		cancel(context.Canceled)
	}
}

// backendOptions are the backends' options from the environment, with the
// command's CPU threads.
func backendOptions(threads int) (backends.Options, error) {
	if err := checkThreads(threads); err != nil {
		return backends.Options{}, err
	}
	o, err := envconfig.Backends()
	o.Threads = threads
	return o, err
}

// openBackendFlag opens the backend --backend names with --threads (and
// the environment's options), the one way for the commands that take
// both; it refuses --threads where that backend takes none.
func openBackendFlag(c *cli.Context) (bridge.Backend, bridge.DeviceInfo, error) {
	if err := backendFlag(c); err != nil {
		return nil, bridge.DeviceInfo{}, err
	}
	bo, err := backendOptions(c.Int("threads"))
	if err != nil {
		return nil, bridge.DeviceInfo{}, err
	}
	be, err := backends.Open(c.String("backend"), bo)
	if err != nil {
		return nil, bridge.DeviceInfo{}, fmt.Errorf("--backend %s: %w", c.String("backend"), err)
	}
	info := be.Info()
	if err := bench.ThreadsFlag(c.Int("threads"), info.Backend, be); err != nil {
		be.Close()
		return nil, bridge.DeviceInfo{}, err
	}
	return be, info, nil
}

// backendFlag refuses a --backend that names no backend, before the
// command prints or opens anything; empty leaves the choice to the suite.
func backendFlag(c *cli.Context) error {
	if name := c.String("backend"); name != "" {
		return enumFlag("--backend", name, backends.Names...)
	}
	return nil
}

// threadsUsage is --threads' help wherever a command opens a backend.
const threadsUsage = "CPU threads (0: all cores): the cpu backend's goroutines and bandwidth probe; another backend refuses it"

// checkThreads refuses a --threads count a suite's threads would refuse
// (ops.MaxThreads says why).
func checkThreads(threads int) error {
	if threads < 0 || threads > ops.MaxThreads {
		return fmt.Errorf("--threads %d: want 1 to %d (0: every core)", threads, ops.MaxThreads)
	}
	return nil
}

// tunedStore is the tuned configs the engine consults, warning on w about
// a layer it cannot read.
func tunedStore(w io.Writer) *tune.Store {
	return tune.Default(envconfig.TunedDir(), func(msg string) { fmt.Fprintln(w, "mtlbench: warning:", msg) })
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a benchmark suite and record every sample",
		ArgsUsage: "SUITE.yaml",
		Description: "Runs every case of the suite (warm-up, repetitions, interleaving as the suite says),\n" +
			"stores each repetition in the results database as it finishes, and prints a summary.\n" +
			"Ctrl-C (or SIGTERM, or a closed terminal's SIGHUP where nohup does not ignore it) stops after\n" +
			"the current step, and a second one at once; finished repetitions are kept and --resume RUN\n" +
			"runs exactly the missing ones, under the --set, --backend, --timing and --threads the run was made with\n" +
			"(the command it prints repeats them and names the database by its full path; others are refused).\n" +
			"A run another live process runs cannot be resumed, and a run or database that is not there is\n" +
			"refused before any work. A database that refuses a write (locked past MTLBENCH_DB_WAIT, full,\n" +
			"read-only, removed) stops the run with what it measured kept in a file beside the database,\n" +
			"which the error names with the `mtlbench import` that stores it (docs/data.md).\n\n" +
			"Examples:\n\n" +
			"   mtlbench run ci --tag main                        # a shipped suite by name (mtlbench suites list)\n" +
			"   mtlbench run suites/ci.yaml --tag pr --set moe_chunk=1\n" +
			"   mtlbench run my.yaml --backend cpu --format csv > summary.csv\n" +
			"   mtlbench run suites/ci.yaml --resume 12           # finish an interrupted run",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "backend", Usage: "override the suite's backend"},
			&cli.StringFlag{Name: "timing", Usage: "override the suite's timing: throughput, or profile (per-op timings; on metal-emu each op's witness bytes)"},
			tagFlag("label to find this run by (compare, gate)"),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "summary format: " + formatList(formatBenchfmt) + " (csv, json, jsonl: one row per case and metric)"},
			&cli.Int64Flag{Name: "resume", Usage: "finish an interrupted run of the same suite"},
			&cli.IntFlag{Name: "threads", Usage: threadsUsage},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
			stepsFlag(),
			&cli.StringSliceFlag{Name: "set", Usage: "override a parameter in every case, keeping case keys: --set moe_chunk=1 (repeatable)"},
			&cli.BoolFlag{Name: "lockstep", Hidden: true, Usage: "before each repetition print a ready line and wait for a line on stdin (`ab` drives two runs in turn)"},
		},
		Action: func(c *cli.Context) error {
			if err := oneSuite(c, "run"); err != nil {
				return err
			}
			if err := backendFlag(c); err != nil {
				return err
			}
			if err := checkResumeFlag(c); err != nil {
				return err
			}
			format, err := parseRunFormat(c.String("format"))
			if err != nil {
				return err
			}
			s, err := suites.Resolve(c.Args().First())
			if err != nil {
				return err
			}
			if c.IsSet("timing") {
				tm := c.String("timing")
				if !slices.Contains(suites.Timings, tm) {
					return fmt.Errorf("--timing %q: want one of %s", tm, strings.Join(suites.Timings, ", "))
				}
				s.Timing = tm
			}
			set, err := bench.ParseOverrides(c.StringSlice("set"))
			if err != nil {
				return err
			}
			st, err := storeFor(c, s)
			if err != nil {
				return err
			}
			defer st.close()
			slow, err := envconfig.TestSlowdown()
			if err != nil {
				return err
			}
			if slow > 0 {
				fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: MTLBENCH_TEST_SLOWDOWN lengthens every step by %g%%: these timings are deliberately slow\n", slow*100)
			}
			sum, err := measure(c, s, st, bench.Options{Set: set, Slowdown: slow, Pace: lockstepPace(c)})
			if sum == nil {
				if errors.Is(err, bench.ErrInterrupted) {
					return interruptedEarly(err)
				}
				return err
			}
			db := st.db
			if rerr := printRun(c.App.Writer, db, sum, format, false); rerr != nil && err == nil {
				err = rerr
			}
			stored, reps := storedLine(sum, db.Path())
			fmt.Fprintf(c.App.ErrWriter, "run %d (%s) %s in %v: %s\n", sum.RunID, s.Name, runStatus(err), sum.Elapsed.Round(time.Second), stored)
			if resumable(sum.Run.Status, err, reps) {
				printResume(c.App.ErrWriter, err, resumeCommand(c, db.Path(), sum.RunID))
			}
			if errors.Is(err, bench.ErrInterrupted) {
				return &exitError{code: 130, err: err}
			}
			return err
		},
	}
}

// resumable says whether a run that ended as status with err can be
// finished with --resume: it was stopped (Ctrl-C, SIGTERM, a --steps file
// it could not write), or the store failed under it (a lock held too long,
// a full disk) once it had kept repetitions, in the store or in a recovery
// file. A complete run has nothing to resume, whatever failed after it
// ended (reading its cases back), and --resume would refuse it.
func resumable(status string, err error, reps int) bool {
	if status == results.RunComplete {
		return false
	}
	return errors.Is(err, bench.ErrInterrupted) || errors.Is(err, bench.ErrStepLog) ||
		(reps > 0 || recoveryFile(err) != nil) && results.FromStore(err)
}

// recoveryFile is the error of a store that refused what a run measured
// when a recovery file holds it, else nil.
func recoveryFile(err error) *results.UnstoredError {
	if u := (*results.UnstoredError)(nil); errors.As(err, &u) && u.File != "" {
		return u
	}
	return nil
}

// printResume prints the command that finishes a stopped run: the import
// of its recovery file first, where the store refused what it measured,
// so that the resume does not measure that again.
func printResume(w io.Writer, err error, resume string) {
	if u := recoveryFile(err); u != nil {
		resume = u.ImportCommand() + " && " + resume
	}
	fmt.Fprintf(w, "resume with: %s\n", resume)
}

// resumeCommand is the command that finishes run id: the suite and every
// flag that shaped what its cases measured, or where they are stored.
func resumeCommand(c *cli.Context, db string, id int64) string {
	// The store by its absolute path: the command may be run from another
	// folder, or without the MTLBENCH_DB this one had.
	cmd := []string{"mtlbench", "run", c.Args().First(), "--db", db}
	for _, f := range []string{"backend", "timing", "threads"} {
		if c.IsSet(f) {
			cmd = append(cmd, "--"+f, c.String(f))
		}
	}
	for _, kv := range c.StringSlice("set") {
		cmd = append(cmd, "--set", kv)
	}
	for i, a := range cmd {
		cmd[i] = shellQuote(a)
	}
	return strings.Join(append(cmd, "--resume", strconv.FormatInt(id, 10)), " ")
}

// oneSuite refuses a command of one suite given none or several: several
// would run only the first, and which ones were given is said back.
func oneSuite(c *cli.Context, cmd string) error {
	if c.NArg() == 0 {
		return fmt.Errorf("%s needs one suite file (see `mtlbench suites list`)", cmd)
	}
	return oneArg(c, cmd, "suite", "run each on its own")
}

// oneArg refuses a command of one argument (what it is: "suite", "file")
// given none or several, saying back the ones given and, after them, what
// to do instead (then).
func oneArg(c *cli.Context, cmd, what, then string) error {
	switch n := c.NArg(); {
	case n == 0:
		return fmt.Errorf("%s needs one %s", cmd, what)
	case n > 1:
		args := c.Args().Slice()
		for i, a := range args {
			args[i] = shellQuote(a)
		}
		return fmt.Errorf("%s takes one %s, got %d: %s (%s)", cmd, what, n, strings.Join(args, " "), then)
	}
	return nil
}

// shellQuote quotes an argument a shell would split or expand
// (shquote.Quote).
func shellQuote(a string) string { return shquote.Quote(a) }

// lockstepReady is the line a --lockstep run prints before each
// repetition; it then waits for a line on stdin (EOF: run freely).
const lockstepReady = "mtlbench-lockstep ready"

// lockstepPace is run --lockstep's pacing: nil without the flag.
func lockstepPace(c *cli.Context) func() error {
	if !c.Bool("lockstep") {
		return nil
	}
	in := bufio.NewReader(c.App.Reader)
	free := false
	return func() error {
		if free {
			return nil
		}
		if _, err := fmt.Fprintln(c.App.Writer, lockstepReady); err != nil {
			return err
		}
		if _, err := in.ReadString('\n'); err != nil {
			free = true // the driver is gone or done: no more waiting
		}
		return nil
	}
}

// interruptedEarly is a run stopped by a signal while its cases were being
// prepared (a model loaded, its first dispatches on metal-emu): no run was
// recorded, so there is nothing to resume.
// storedLine says what the store holds of a run, read back from it, and
// how many repetitions: nothing is claimed that was not written. run and
// bench end with it alike.
func storedLine(sum *bench.Summary, dbPath string) (string, int) {
	reps, done := 0, 0
	for _, sc := range sum.Cases {
		reps += sc.RepsDone
		if sc.Status == results.CaseDone {
			done++
		}
	}
	if reps == 0 && done == 0 {
		return "nothing stored in " + dbPath, 0
	}
	skipped := ""
	if sum.Skipped > 0 {
		// kernel cases the backend does not run (docs/suites.md)
		skipped = fmt.Sprintf(" (%d skipped: the %s backend does not run them; mtlbench show %d says why)", sum.Skipped, sum.Run.Backend, sum.RunID)
	}
	return fmt.Sprintf("%d of %s done%s, %s stored in %s", done, plural.Of(len(sum.Cases), "case"), skipped, plural.Of(reps, "repetition"), dbPath), reps
}

func interruptedEarly(err error) error {
	return &exitError{code: 130, err: fmt.Errorf("%w while its cases were prepared: nothing was recorded", err)}
}

func runStatus(err error) string {
	switch {
	case err == nil:
		return "complete"
	case errors.Is(err, bench.ErrInterrupted):
		return "interrupted"
	}
	return "finished with errors"
}

// progress draws a bar on a terminal and plain lines elsewhere (CI logs).
type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
	start time.Time
}

func newProgress(w io.Writer, quiet bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok && os.Getenv("CI") == "" {
		// A terminal, not any character device: /dev/null is one too.
		tty = isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
	}
	return &progress{w: w, tty: tty, quiet: quiet, start: time.Now()}
}

func (p *progress) event(e bench.Event) {
	if p.quiet {
		return
	}
	rep := fmt.Sprintf("rep %d", e.Rep+1)
	if e.Rep < 0 {
		rep = "warm-up"
	}
	msg := e.Headline
	if msg == "" {
		msg = "done" // a warm-up records nothing
	}
	if e.Err != nil {
		msg = "FAILED: " + e.Err.Error()
	}
	if !p.tty {
		fmt.Fprintf(p.w, "[%d/%d] %s %s: %s\n", e.Done, e.Total, e.Case, rep, msg)
		return
	}
	const width = 24
	fill := width * e.Done / max(e.Total, 1)
	eta := ""
	if e.Done > 0 {
		left := time.Duration(float64(time.Since(p.start)) / float64(e.Done) * float64(e.Total-e.Done))
		eta = " eta " + left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %d/%d%s %s %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), e.Done, e.Total, eta, e.Case, rep)
	if e.Err != nil {
		fmt.Fprintf(p.w, "\n%s: %v\n", e.Case, e.Err)
	}
}

// begin says, before any work, how many cases and repetitions the run
// will make: the first progress line comes only after a case's first
// warm-up, which a model's loading can put minutes away.
func (p *progress) begin(s *suites.Suite) {
	if p.quiet {
		return
	}
	warm := ""
	if s.Warmup > 0 {
		warm = " after " + plural.Of(s.Warmup, "warm-up")
	}
	fmt.Fprintf(p.w, "suite %s: %s, %s each%s\n", s.Name, plural.Of(len(s.Cases), "case"), plural.Of(s.Repetitions, "repetition"), warm)
}

// note prints a line of its own, off the bar.
func (p *progress) note(msg string) {
	if p.tty && !p.quiet {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, "mtlbench:", msg)
}

// warn prints msg as a warning line, clear of the progress line.
func (p *progress) warn(msg string) { p.note("warning: " + msg) }

func (p *progress) done() {
	if p.tty && !p.quiet {
		fmt.Fprintln(p.w)
	}
}

// formatBenchfmt is the Go benchmark format, for benchstat; only commands
// that print samples take it.
const formatBenchfmt = "benchfmt"

// parseRunFormat accepts the table formats and benchfmt, naming the value
// and every choice when it is none of them.
func parseRunFormat(s string) (string, error) {
	if strings.EqualFold(strings.TrimSpace(s), formatBenchfmt) {
		return formatBenchfmt, nil
	}
	f, err := table.ParseFormat(s)
	if err != nil {
		return "", formatError(s, formatNames(formatBenchfmt))
	}
	return string(f), nil
}

// formatError is the error of every command's --format that names none of
// names: the flag, the value, a near miss's format and every choice.
func formatError(s string, names []string) error {
	msg := fmt.Sprintf("--format: unknown output format %q (want one of: %s)", s, strings.Join(names, ", "))
	if d := suggest.DidYouMean(strings.TrimSpace(s), names); d != "" {
		msg += " (" + d + ")"
	}
	return errors.New(msg)
}

// parseTableFormat is table.ParseFormat for the commands that do not print
// samples, where benchfmt, the samples' format, is named as the format of
// the commands that do.
func parseTableFormat(s string) (table.Format, error) {
	f, err := table.ParseFormat(s)
	switch {
	case err != nil && strings.EqualFold(strings.TrimSpace(s), formatBenchfmt):
		return "", fmt.Errorf("%w; benchfmt is for the commands that print samples: show, run and bench", formatError(s, formatNames()))
	case err != nil:
		return "", formatError(s, formatNames())
	}
	return f, nil
}

// formatNames are the names table.ParseFormat accepts, in table.Formats'
// order.
func formatNames(extra ...string) []string {
	var names []string
	for _, f := range table.Formats {
		names = append(names, string(f))
	}
	return append(names, extra...)
}

// formatList is the help's "table, md, csv, json or jsonl" (and extra, such
// as benchfmt, last): every --format flag's usage is built from it, so none
// leaves out a format its command takes.
func formatList(extra ...string) string {
	names := formatNames(extra...)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// printRun writes the run's summary in the requested format: display tables
// for table and md, tidy rows for csv, json and jsonl (one per sample with
// raw), Go benchmark lines for benchfmt.
func printRun(w io.Writer, db *results.DB, sum *bench.Summary, format string, raw bool) error {
	format, err := parseRunFormat(format)
	if err != nil {
		return err
	}
	run := sum.Run
	if run == nil {
		if run, err = db.GetRun(sum.RunID); err != nil {
			return err
		}
	}
	if format == formatBenchfmt {
		r, err := tidy.Load(db, run)
		if err != nil {
			return err
		}
		return tidy.WriteBenchfmt(w, []*tidy.Run{r})
	}
	f := table.Format(format)
	if table.IsData(f) {
		r, err := tidy.Load(db, run)
		if err != nil {
			return err
		}
		d := tidy.Summaries([]*tidy.Run{r})
		if raw {
			d = tidy.Raw([]*tidy.Run{r})
		}
		return d.Render(w, f)
	}
	if len(sum.Cases) == 0 {
		// No table at all would leave the reader guessing whether the
		// output was cut; say that nothing was recorded, and why if known
		// (the status as stored now: run's own copy may predate its end).
		if r, err := db.GetRun(sum.RunID); err == nil {
			run = r
		}
		_, err := fmt.Fprintln(w, stats.NoCases(run))
		return err
	}
	tables, err := runTables(db, sum)
	if err != nil {
		return err
	}
	return table.RenderAll(w, f, tables)
}

// tagFlag is --tag of the commands that store runs: a tag a reference
// could not find again is refused before any work (results.CheckTag).
func tagFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "tag", Usage: usage, Action: func(_ *cli.Context, v string) error {
		if err := results.CheckTag(v); err != nil {
			return fmt.Errorf("--tag: %w", err)
		}
		return nil
	}}
}
