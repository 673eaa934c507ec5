package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/internal/childproc"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/reports/compare"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/suites"
)

// Tags of the runs ab records in its side databases.
const (
	abBaselineTag  = "ab-baseline"
	abCandidateTag = "ab-candidate"
)

// abInterrupted is ab's error when interrupted in round r (from 0) of
// rounds: exit 130, saying where the runs already measured are and how to
// read them. keep says dir must stay, even a temporary one: measured
// results are never thrown away.
func abInterrupted(dir string, r, rounds int) (keep bool, err error) {
	msg := fmt.Sprintf("ab interrupted in round %d of %d", r+1, rounds)
	held := abHeld(dir)
	if len(held) == 0 {
		return false, &exitError{code: 130, err: errors.New(msg + "; nothing was recorded yet")}
	}
	last, tag := held[len(held)-1], abCandidateTag
	if last == "baseline.db" {
		tag = abBaselineTag
	}
	msg += fmt.Sprintf("; the %d complete rounds (and what the interrupted one recorded, marked interrupted) are kept in %s "+
		"(%s, runs tagged %s and %s, and each round's logs): `mtlbench show %s --db %s` shows them, "+
		"and the same ab with --resume %s finishes it",
		r, dir, strings.Join(held, ", "), abBaselineTag, abCandidateTag, tag, filepath.Join(dir, last), dir)
	return true, &exitError{code: 130, err: errors.New(msg)}
}

// abInterruptedChecking is ab's error when interrupted while it checked
// the binaries, before a round ran: exit 130, and where a resumed ab's
// earlier rounds still are.
func abInterruptedChecking(dir string, fresh bool) error {
	msg := "ab interrupted while it checked the binaries, before its rounds"
	if fresh {
		return &exitError{code: 130, err: errors.New(msg + ": nothing was measured")}
	}
	return &exitError{code: 130, err: fmt.Errorf("%s: the rounds measured are kept in %s, and the same ab with --resume %s finishes it", msg, dir, dir)}
}

// abHeld lists the side databases in dir: what the rounds recorded.
func abHeld(dir string) []string {
	var held []string
	for _, name := range []string{"baseline.db", "candidate.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			held = append(held, name)
		}
	}
	return held
}

func abCommand() *cli.Command {
	return &cli.Command{
		Name:      "ab",
		Usage:     "run a suite with two binaries in rounds, side by side, and gate the candidate against the baseline",
		ArgsUsage: "SUITE.yaml",
		Description: "Runs the suite --rounds times with each binary. In a round both binaries run side by\n" +
			"side, one repetition at a time in turns (rounds alternate which goes first), so load\n" +
			"and drift of the machine fall on both alike. The gate's unit is the round: per case\n" +
			"and metric the ratio of the two runs' values (each run's mean of its better half of\n" +
			"repetitions), Student's t on the log ratios of the rounds, p adjusted over all checks\n" +
			"(Benjamini-Hochberg), and a change beyond the metric's threshold\n" +
			"(docs/perf-gate.md). Each side's figure is the geometric mean of its runs' values,\n" +
			"whose quotient is the change. The candidate is this binary unless\n" +
			"--candidate-bin names another; --set applies to the candidate only. Each side\n" +
			"records into its own database (--keep DIR, an empty folder, keeps them: baseline.db\n" +
			"and candidate.db, and each round's logs); --db STORE also records both sides' runs\n" +
			"there once the rounds are done, tagged TAG-baseline and TAG-candidate (--tag), for\n" +
			"compare, gate, report and show.\n\n" +
			"A side's run that fails a case finishes the others and the rounds go on: the gate judges\n" +
			"it as `gate` does.\n\n" +
			"Exit status: 0 pass; 1 regression, or a case the candidate failed in any round where\n" +
			"the baseline measured it, with no sample of the candidate's or failed in none of the\n" +
			"baseline's rounds; 2 tool error (a binary failed, or a run crashed or stopped before\n" +
			"it completed); 3 cannot tell (too noisy, too few rounds, a case the baseline failed);\n" +
			"130 interrupted (Ctrl-C). Interrupted, or after a run that crashed, the rounds measured\n" +
			"are kept, in a temporary folder without --keep, and the message says where; the same ab\n" +
			"with --resume DIR finishes it.\n\n" +
			"Examples:\n\n" +
			"   mtlbench ab suites/ci.yaml --baseline-bin /tmp/mtlbench-base\n" +
			"   mtlbench ab suites/ci.yaml --baseline-bin ./bin/mtlbench --set moe_chunk=1   # one setting, same binary",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "baseline-bin", TakesFile: true, Required: true, Usage: "the baseline mtlbench binary (built from the base commit)"},
			&cli.StringFlag{Name: "candidate-bin", TakesFile: true, Usage: "the candidate mtlbench binary (default: this one)"},
			&cli.StringSliceFlag{Name: "set", Usage: "override a setting `name=value` for the candidate's runs only, as run --set does (repeatable)"},
			&cli.IntFlag{Name: "rounds", Value: 5, Usage: "rounds: each runs the suite once with each binary, side by side, repetitions in turns (at least 3 for the paired test)"},
			&cli.StringFlag{Name: "backend", Usage: "override the suite's backend on both sides"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads on both sides (0: all cores); the cpu backend's alone, another refuses it"},
			&cli.StringFlag{Name: "keep", TakesFile: true, Usage: "keep the side databases and run logs in this folder"},
			&cli.StringFlag{Name: "resume", TakesFile: true, Usage: "finish the interrupted ab whose folder is `DIR` (its --keep folder, or the one it named), with the same suite, binaries and flags: its complete rounds are kept, its interrupted runs finished and the rounds left run"},
			&cli.StringFlag{Name: "db", TakesFile: true, Usage: "also record both sides' runs in this results database once the rounds are done (tagged TAG-baseline, TAG-candidate)"},
			&cli.StringFlag{Name: "tag", Value: "ab", Usage: "with --db: the runs' tags are `TAG`-baseline and TAG-candidate"},
			&cli.StringSliceFlag{Name: "threshold", Usage: "allowed worsening: 5% for every gated metric, or METRIC=5% (repeatable)"},
			&cli.Float64Flag{Name: "alpha", Value: compare.DefaultGateAlpha, Usage: "false-discovery rate over all checks (Benjamini-Hochberg)"},
			&cli.IntFlag{Name: "min-samples", Value: compare.DefaultMinSamples, Usage: "fewest repetitions per side and gated metric"},
			&cli.StringFlag{Name: "summary", TakesFile: true, Usage: "write the markdown summary to this file (not -: stdout takes --format md)"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "stdout: the checks as " + formatList() + " (md: the markdown summary)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress output"},
		},
		Action: func(c *cli.Context) error {
			var keepTemp bool
			if err := oneSuite(c, "ab"); err != nil {
				return err
			}
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			alpha := c.Float64("alpha")
			if err := checkAlpha(alpha); err != nil {
				return err
			}
			if c.Int("min-samples") < 1 {
				return fmt.Errorf("--min-samples must be at least 1, got %d", c.Int("min-samples"))
			}
			rounds := c.Int("rounds")
			if rounds < 1 || rounds > 100 {
				return fmt.Errorf("--rounds must be between 1 and 100, got %d", rounds)
			}
			if rounds < compare.MinPairs {
				fmt.Fprintf(c.App.ErrWriter, "ab: warning: --rounds %d gives fewer than the %d pairs the paired test needs: the gate will compare unpaired and may not be able to judge (--rounds %d or more)\n",
					rounds, compare.MinPairs, compare.MinPairs)
			}
			if err := checkSummaries(c); err != nil {
				return err
			}
			if _, err := thresholdFlags(c); err != nil {
				return err
			}
			suitePath := c.Args().First()
			suite, err := suites.Resolve(suitePath)
			if err != nil {
				return err
			}
			if strings.HasPrefix(suite.File, suites.ShippedPrefix) {
				// a built-in suite (ab ci): its sides' runs read it by
				// this name from any folder
				suitePath = suite.File
			}
			set := c.StringSlice("set")
			ov, err := bench.ParseOverrides(set)
			if err != nil {
				return err
			}
			// What the candidate will run, checked here so that a bad
			// --set fails before the first baseline run.
			probe, err := suites.Resolve(suitePath)
			if err != nil {
				return err
			}
			if err := probe.Override(ov); err != nil {
				return err
			}
			// Each side's run refuses --threads on a backend that does not
			// read it, and a count out of range; said before the first round.
			if err := checkThreads(c.Int("threads")); err != nil {
				return err
			}
			for _, s := range []*suites.Suite{suite, probe} {
				name := s.Backend
				if b := c.String("backend"); b != "" {
					name = b
				}
				if err := bench.ThreadsFlag(c.Int("threads"), name, nil); err != nil {
					return err
				}
			}
			// What each side's run would warn of, said once, before any
			// round (their logs keep theirs).
			bench.WarnUnread(probe, func(line string) { fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", line) })
			// The store is opened (or checked, to be made as the runs are
			// recorded), and the tags checked, before any work: a store that
			// cannot take the runs would lose them at the end.
			var store *recordStore
			if c.String("db") != "" {
				for _, side := range []string{"baseline", "candidate"} {
					if err := results.CheckTag(c.String("tag") + "-" + side); err != nil {
						return fmt.Errorf("--tag: %w", err)
					}
				}
				if store, err = prepareStore(c); err != nil {
					return err
				}
				defer store.close()
			}
			base, err := executable(c.String("baseline-bin"), "--baseline-bin")
			if err != nil {
				return err
			}
			candPath := c.String("candidate-bin")
			if candPath == "" {
				if candPath, err = os.Executable(); err != nil {
					return fmt.Errorf("this binary's path (pass --candidate-bin): %w", err)
				}
			}
			cand, err := executable(candPath, "--candidate-bin")
			if err != nil {
				return err
			}
			// What this ab runs with: what a resume must run with too.
			now := &abState{Set: set, Backend: c.String("backend"), Threads: c.Int("threads"), Rounds: rounds, Tag: c.String("tag"), SuiteHash: suite.Hash}
			now.Suite = suitePath
			if !strings.HasPrefix(suitePath, suites.ShippedPrefix) {
				if now.Suite, err = filepath.Abs(suitePath); err != nil {
					return err
				}
			}
			if store != nil {
				now.DB = store.path
			}
			if now.Baseline, err = binaryOf(base); err != nil {
				return fmt.Errorf("--baseline-bin: %w", err)
			}
			if now.Candidate, err = binaryOf(cand); err != nil {
				return fmt.Errorf("--candidate-bin: %w", err)
			}
			st, dir := now, c.String("keep")
			switch {
			case c.String("resume") != "":
				keep := dir
				if dir, err = filepath.Abs(c.String("resume")); err != nil {
					return err
				}
				// The same ab again, --keep and all, resumes.
				if abs, _ := filepath.Abs(keep); keep != "" && abs != dir {
					return fmt.Errorf("--resume %s and --keep %s: an ab resumes in its own folder (leave --keep out)", dir, keep)
				}
				if st, err = readABState(dir); err != nil {
					return err
				}
				if differ := st.differ(now); len(differ) > 0 {
					return fmt.Errorf("--resume %s: the ab there ran with %s: resume it with the settings it was made with", dir, strings.Join(differ, ", "))
				}
				// Kept until the rounds are done: its rounds are measured.
				keepTemp = true
			case dir == "":
				if dir, err = os.MkdirTemp("", "mtlbench-ab-"); err != nil {
					return err
				}
				now.Temporary = true
			default:
				if err := makeFolder("--keep", dir, "ab keeps its rounds' databases in a folder"); err != nil {
					return err
				}
				// Rounds pair by run ID: runs of an earlier ab in the same
				// databases would pair with the wrong ones.
				for _, name := range []string{"baseline.db", "candidate.db"} {
					if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
						return fmt.Errorf("--keep %s already holds %s from an earlier ab: choose an empty folder (or finish that ab with --resume %s)", dir, name, dir)
					}
				}
			}
			fresh := st == now
			// An interrupt keeps what was measured (abInterrupted).
			defer func() {
				if st.Temporary && !keepTemp {
					os.RemoveAll(dir)
				}
			}()
			var common []string
			if b := c.String("backend"); b != "" {
				common = append(common, "--backend", b)
			}
			if n := c.Int("threads"); n > 0 {
				common = append(common, "--threads", fmt.Sprint(n))
			}
			var candExtra []string
			for _, s := range set {
				candExtra = append(candExtra, "--set", s)
			}
			sides := map[bool]abSide{
				false: {label: "baseline", bin: base, db: filepath.Join(dir, "baseline.db"), tag: abBaselineTag},
				true:  {label: "candidate", bin: cand, db: filepath.Join(dir, "candidate.db"), tag: abCandidateTag, extra: candExtra},
			}
			ctx, stop := stopOnSignals(c.Context, c.App.ErrWriter)
			defer stop()
			// The sides read the same environment: its emulator build
			// limit is theirs; a bad setting is each side's own error.
			bo, _ := envconfig.Backends()
			for i, side := range []abSide{sides[false], sides[true]} {
				backend := []*suites.Suite{suite, probe}[i].Backend
				if b := c.String("backend"); b != "" {
					backend = b
				}
				err := abPreflight(ctx, side, suitePath, c.String("backend"))
				if err == nil {
					err = abBackendOpens(ctx, side, backend, abCheckLimit(backend, bo), c.App.ErrWriter)
				}
				// An interrupt stops a check's binary: that is no fault
				// of the binary's, nor a tool error.
				if ctx.Err() != nil {
					return abInterruptedChecking(dir, fresh)
				}
				if err != nil {
					return err
				}
			}
			first, next := 0, [2]abRound{}
			if fresh {
				if err := st.save(dir); err != nil {
					return err
				}
			} else {
				if first, next, err = abProgress([2]abSide{sides[false], sides[true]}, rounds); err != nil {
					return fmt.Errorf("--resume %s: %w", dir, err)
				}
				if first == rounds {
					return fmt.Errorf("--resume %s: the ab there finished its %s: nothing to resume", dir, plural.Of(rounds, "round"))
				}
				if !c.Bool("quiet") {
					fmt.Fprintf(c.App.ErrWriter, "ab: resuming %s in round %d/%d: %s; %s\n", dir, first+1, rounds,
						abResumeSays("baseline", next[0]), abResumeSays("candidate", next[1]))
				}
			}
			start := time.Now()
			for r := first; r < rounds; r++ {
				if !c.Bool("quiet") {
					first := [2]string{"baseline", "candidate"}[abTurn(r, 0)]
					fmt.Fprintf(c.App.ErrWriter, "ab: round %d/%d: baseline and candidate repetitions in turns, %s first\n", r+1, rounds, first)
				}
				t0 := time.Now()
				logs := [2]string{filepath.Join(dir, fmt.Sprintf("round%02d-baseline.log", r+1)), filepath.Join(dir, fmt.Sprintf("round%02d-candidate.log", r+1))}
				round := [2]abSide{sides[false], sides[true]}
				if r == first && !fresh {
					// The interrupted round: each side's run finished where
					// it stopped (its logs beside the first attempt's).
					for i := range round {
						round[i].resume, round[i].skip = next[i].resume, next[i].done
						logs[i] = strings.TrimSuffix(logs[i], ".log") + "-resumed.log"
					}
				}
				steps, failed, err := runLockstep(ctx, r, round, suitePath, common, logs)
				if err != nil {
					if ctx.Err() != nil {
						keepTemp, err = abInterrupted(dir, r, rounds)
						// What was measured goes to the store too (an
						// interrupted run marked so); the folder stays.
						if store != nil && keepTemp {
							if rerr := recordAB(c.App.ErrWriter, store, c.String("db"), c.String("tag"), [2]abSide{sides[false], sides[true]}, &st.Recorded); rerr != nil {
								fmt.Fprintf(c.App.ErrWriter, "ab: %v\n", rerr)
							} else if serr := st.save(dir); serr != nil {
								fmt.Fprintf(c.App.ErrWriter, "ab: %v\n", serr)
							}
						}
						return err
					}
					// A side's store refused what it measured: its recovery
					// file (results.Recorder) is in dir, which stays.
					if held, _ := filepath.Glob(filepath.Join(dir, "*.unstored*.jsonl")); len(held) > 0 {
						keepTemp = true
						return fmt.Errorf("%w\nab: what the runs measured is kept in %s (%s)", err, dir, strings.Join(held, ", "))
					}
					// A side's run that crashed or stopped: the rounds
					// measured stay, as an interrupt leaves them.
					if held := abHeld(dir); len(held) > 0 {
						keepTemp = true
						return fmt.Errorf("%w\nab: round %d of %d failed; the %d complete rounds (and what the failed one recorded) are kept in %s (%s, and each round's logs): "+
							"the same ab with --resume %s finishes it once the run is fixed", err, r+1, rounds, r, dir, strings.Join(held, ", "), dir)
					}
					return err
				}
				// A run that failed cases finished the others: what it
				// stored is the gate's to judge (a case the candidate
				// failed fails it), not a tool error.
				for i, f := range failed {
					if len(f) > 0 {
						fmt.Fprintf(c.App.ErrWriter, "ab: round %d: the %s's run failed %s (%s): the gate judges it\n",
							r+1, round[i].label, plural.Of(len(f), "case"), strings.Join(f, "; "))
					}
				}
				if steps[0] != steps[1] && len(failed[0])+len(failed[1]) == 0 && !round[0].skip && !round[1].skip && round[0].resume == 0 && round[1].resume == 0 {
					fmt.Fprintf(c.App.ErrWriter, "ab: warning: the baseline ran %d steps and the candidate %d: only the shared part alternated\n", steps[0], steps[1])
				}
				if !c.Bool("quiet") {
					fmt.Fprintf(c.App.ErrWriter, "ab: round %d took %v (%d+%d steps)\n", r+1, time.Since(t0).Round(100*time.Millisecond), steps[0], steps[1])
				}
				// A binary that records nothing would run every round for
				// nothing: the first round says so.
				if r == 0 {
					for i, side := range []abSide{sides[false], sides[true]} {
						if _, err := loadABSide(side, side.label); err != nil {
							err = fmt.Errorf("ab: after round 1 the %s binary %s recorded no run (%v); the end of its output:\n%s", side.label, side.bin, err, tail(logs[i], 800))
							// The other side's round stays, as a crash leaves it.
							if held := abHeld(dir); len(held) > 0 {
								keepTemp = true
								return fmt.Errorf("%w\nab: what round 1 recorded is kept in %s (%s, and its logs)", err, dir, strings.Join(held, ", "))
							}
							return err
						}
					}
				}
			}
			// The rounds are done: a temporary folder goes once the gate
			// has read them; an error before then keeps it and says where.
			keepTemp = true
			kept := func(err error) error { return fmt.Errorf("%w\nab: the runs are kept in %s", err, dir) }
			if store != nil {
				if err := recordAB(c.App.ErrWriter, store, c.String("db"), c.String("tag"), [2]abSide{sides[false], sides[true]}, &st.Recorded); err != nil {
					return kept(err)
				}
			}
			baseSide, err := loadABSide(sides[false], "baseline")
			if err != nil {
				return kept(err)
			}
			candSide, err := loadABSide(sides[true], "candidate")
			if err != nil {
				return kept(err)
			}
			opts, notes, err := gateOptions(c, candSide, suite)
			if err != nil {
				return kept(err)
			}
			opts.Alpha, opts.MinSamples = alpha, c.Int("min-samples")
			// Round r wrote run r into each side's fresh database.
			opts.Paired = true
			opts.MoreRuns = fmt.Sprintf("ab --rounds %d or more", compare.MinPairs)
			res := compare.Gate(baseSide, candSide, opts)
			keepTemp = false
			res.Notes = append(notes, res.Notes...)
			res.Notes = append(res.Notes, table.NoteText(abRoundsNote(rounds, time.Since(start))))
			if !fresh {
				res.Notes = append(res.Notes, table.Notef("ab: resumed in round %d of %d (%s): the time above is the resumed rounds'", first+1, rounds, dir))
			}
			if len(set) > 0 {
				res.Notes = append(res.Notes, table.Notef("the candidate ran with --set %s", strings.Join(set, " --set ")))
			}
			return finishGate(c, res, f)
		},
	}
}

// abRoundsNote says how the rounds ran; one round has no BA to speak of.
func abRoundsNote(rounds int, took time.Duration) string {
	if rounds == 1 {
		return fmt.Sprintf("ab: 1 round (one run a side, repetitions in turns, the baseline first) in %v", took.Round(time.Second))
	}
	return fmt.Sprintf("ab: %d rounds (one run a side each, repetitions in turns, AB then BA) in %v", rounds, took.Round(time.Second))
}

// abTurn is whose turn step i of lockstep round r is: 0 (the baseline) or
// 1 (the candidate). The sides alternate step by step, so every step of
// either follows one of the other's (the cache and the CPU's state before
// a step are alike on both sides: ABBA turns would give each side its own
// mix of warm and cold steps), and rounds alternate which side goes first
// (AB, then BA), so that a steady drift adds as much to each side.
func abTurn(r, i int) int {
	return (r + i) % 2
}

// executable checks that path is a regular file that can be executed and
// returns it absolute (ab runs the binaries from the working directory).
func executable(path, flag string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flag, path, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, readfile.PathError(abs, err))
	}
	if st.IsDir() { // said as readfile says a folder given for a file
		return "", fmt.Errorf("%s: %w", flag, readfile.NotA(path+": a folder, not an executable file"))
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s %s: not an executable file", flag, path)
	}
	return abs, nil
}

// abPreflight checks, before any round, that a side's binary is an mtlbench
// that knows run --lockstep and accepts the suite as that side will run it
// (its backend and --set): otherwise the other side would measure a whole
// round before the failure shows (docs/perf-gate.md).
func abPreflight(ctx context.Context, side abSide, suite, backend string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	bin := side.label + " binary " + side.bin
	out, err := combinedOutput(exec.CommandContext(ctx, side.bin, "run", "--lockstep", "--help"))
	switch {
	case err != nil && strings.Contains(string(out), "-lockstep"):
		return fmt.Errorf("ab: the %s does not know `run --lockstep`: an mtlbench older than ab cannot be gated side by side (docs/perf-gate.md)", bin)
	case err != nil:
		return fmt.Errorf("ab: the %s failed `run --lockstep --help`: %w\n%s", bin, err, lastBytes(out, 800))
	case !strings.Contains(string(out), "mtlbench run - "):
		return fmt.Errorf("ab: the %s is not mtlbench: `run --lockstep --help` printed no mtlbench help\n%s", bin, lastBytes(out, 800))
	}
	args := []string{"suites", "validate", suite}
	if backend != "" {
		args = append(args, "--set", "backend="+backend)
	}
	args = append(args, side.extra...)
	out, err = combinedOutput(exec.CommandContext(ctx, side.bin, args...))
	if err != nil && len(args) > 3 && strings.Contains(string(out), "flag provided but not defined: -set") {
		// An mtlbench from before `suites validate --set` (a baseline may
		// be) checks the suite as written; its round checks the rest.
		args = args[:3]
		out, err = combinedOutput(exec.CommandContext(ctx, side.bin, args...))
	}
	if err != nil {
		return fmt.Errorf("ab: the %s refuses the suite (%s): %w\n%s", bin, strings.Join(args, " "), err, lastBytes(out, 2000))
	}
	return nil
}

// combinedOutput is cmd.CombinedOutput run as internal/childproc runs a
// child: stopped (ab interrupted, a check's time-out), what the binary
// started stops too, and no descendant holding its output keeps ab waiting.
func combinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b lockedBuffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := childproc.Run(cmd)
	return b.Bytes(), err
}

// abBackendOpens checks, before any round, that a side's binary opens the
// backend its run takes, by its `devices` list: a backend that does not
// open here would fail that side's run only once the round has begun.
// auto opens what there is; a binary whose list cannot be read (an older
// one) leaves the check to its round. The list is of that backend alone:
// the whole list opens metal-emu, whose first open compiles its kernels.
// The check waits limit (abCheckLimit; 0: no limit) and passes the
// binary's notice of a compile on to w, so a wait of minutes is explained;
// stopped, it stops what the binary started too (internal/childproc).
func abBackendOpens(ctx context.Context, side abSide, backend string, limit time.Duration, w io.Writer) error {
	if backend == "" || backend == "auto" {
		return nil
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, side.bin, "devices", "--backend", backend, "--format", "json")
	var stdout bytes.Buffer
	notices := &noticeWriter{w: w, prefix: "ab: the " + side.label + " binary " + side.bin + ": "}
	cmd.Stdout, cmd.Stderr = &stdout, notices
	err := childproc.Run(cmd)
	notices.flush()
	if err != nil {
		return nil
	}
	out := stdout.Bytes()
	var rows []struct {
		Backend string  `json:"backend"`
		Device  *string `json:"device"` // null where the backend does not open
		Status  string  `json:"status"`
	}
	if json.Unmarshal(out, &rows) != nil {
		return nil
	}
	for _, r := range rows {
		if r.Backend == backend && r.Device == nil {
			return fmt.Errorf("ab: the %s binary %s cannot open backend %s here: %s", side.label, side.bin, backend, r.Status)
		}
	}
	return nil
}

// abCheckLimit is how long abBackendOpens waits for a binary to open
// backend: a minute, and as long again as the backend's first open may
// compile its kernels under its own build limit (backends.OpenCompileLimit),
// where the minute alone ran out on metal-emu's cold cache (84-116 s on
// two shared cores), and the round then compiled them again. 0: no limit.
func abCheckLimit(backend string, o backends.Options) time.Duration {
	build, ok := backends.OpenCompileLimit(backend, o)
	switch {
	case !ok:
		return time.Minute
	case build < 0:
		return 0
	}
	return time.Minute + build
}

// noticeWriter passes on, to w after prefix, the lines of a command's
// stderr that say it compiles kernels ("mtlbench: compiling ...",
// runner/envconfig's notice), and drops the rest.
type noticeWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	line   []byte
}

func (n *noticeWriter) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.line = append(n.line, p...)
	for {
		i := bytes.IndexByte(n.line, '\n')
		if i < 0 {
			break
		}
		n.pass(n.line[:i])
		n.line = n.line[i+1:]
	}
	return len(p), nil
}

// flush passes on a last line that ended without a newline.
func (n *noticeWriter) flush() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pass(n.line)
	n.line = nil
}

func (n *noticeWriter) pass(line []byte) {
	if msg, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("mtlbench: compiling ")); ok && n.w != nil {
		fmt.Fprintf(n.w, "%scompiling %s\n", n.prefix, msg)
	}
}

// lastBytes is the end of a command's output, at most n bytes, trimmed.
func lastBytes(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// abSide is one binary of an ab comparison.
type abSide struct {
	label, bin, db, tag string
	extra               []string // arguments for this side only (the candidate's --set)
	resume              int64    // a resumed round: the side's interrupted run, finished by run --resume
	skip                bool     // a resumed round: the side's run of it is complete
}

// runLockstep runs the suite once with each side's binary at the same time,
// letting one repetition (or warm-up) run at a time, in turns: both
// processes set up together, then take turns, so load on the machine that
// comes and goes falls on both sides alike. It returns the steps each ran
// and, for a side whose run completed but failed cases (its exit status
// says so), those cases ("name: error"): the run stored its measured
// cases and its failed ones as such, for the gate to judge, so it is no
// error. Any other failure of a run is.
func runLockstep(ctx context.Context, round int, sides [2]abSide, suite string, common []string, logs [2]string) (steps [2]int, failed [2][]string, err error) {
	type proc struct {
		side  abSide
		cmd   *exec.Cmd
		wait  func() error // childproc.Start's
		stdin io.WriteCloser
		lines chan string // stdout lines; closed at EOF
		out   *lockedBuffer
		done  bool
	}
	var ps [2]*proc
	defer func() {
		for i, p := range ps {
			if p == nil || p.cmd == nil {
				continue
			}
			p.stdin.Close()
			werr := p.wait()
			if lerr := os.WriteFile(logs[i], p.out.Bytes(), 0o644); lerr != nil && err == nil {
				err = lerr
			}
			if werr != nil && ctx.Err() == nil {
				if failed[i] = abFailedCases(p.side, round); len(failed[i]) > 0 {
					werr = nil
				}
			}
			if werr != nil && err == nil {
				tail := p.out.String()
				if len(tail) > 2000 {
					tail = "..." + tail[len(tail)-2000:]
				}
				err = fmt.Errorf("%s run (%s %s) failed: %w\n%s", p.side.label, p.side.bin, strings.Join(p.cmd.Args[1:], " "), werr, strings.TrimSpace(tail))
			}
		}
	}()
	for i, sd := range sides {
		if sd.skip {
			ps[i] = &proc{side: sd, done: true}
			continue
		}
		args := append([]string{"run", suite, "--db", sd.db, "--tag", sd.tag, "--quiet", "--format", "csv", "--lockstep"}, common...)
		args = append(args, sd.extra...)
		if sd.resume != 0 {
			args = append(args, "--resume", fmt.Sprint(sd.resume))
		}
		cmd := exec.CommandContext(ctx, sd.bin, args...)
		// Stopped, the run (and what it started) is interrupted, and given
		// time to store what it finished (internal/childproc).
		cmd.WaitDelay = 30 * time.Second
		p := &proc{side: sd, cmd: cmd, out: &lockedBuffer{}, lines: make(chan string, 16)}
		cmd.Stderr = p.out
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return steps, failed, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return steps, failed, err
		}
		if p.wait, err = childproc.Start(cmd, os.Interrupt); err != nil {
			return steps, failed, fmt.Errorf("%s binary %s: %w", sd.label, sd.bin, err)
		}
		ps[i] = p
		go func() {
			defer close(p.lines)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<16), 1<<20)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
		}()
	}
	// wait reads p's output up to its next ready line (it is then parked
	// before a step) or its end.
	wait := func(p *proc) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case line, ok := <-p.lines:
				if !ok {
					p.done = true
					return nil
				}
				if line == lockstepReady {
					return nil
				}
				p.out.WriteString(line + "\n")
			}
		}
	}
	for _, p := range ps {
		if p.done {
			continue
		}
		if err := wait(p); err != nil {
			return steps, failed, err
		}
	}
	for turn := 0; !ps[0].done || !ps[1].done; turn++ {
		i := abTurn(round, turn)
		if ps[i].done {
			i = 1 - i
		}
		if _, err := io.WriteString(ps[i].stdin, "go\n"); err != nil {
			ps[i].done = true
			continue
		}
		steps[i]++
		if err := wait(ps[i]); err != nil {
			return steps, failed, err
		}
	}
	return steps, failed, nil
}

// abFailedCases lists, as "name: error", the cases a side's run of round
// (from 0) failed, when that run completed: a run that failed cases
// finishes the others and exits non-zero. nil when the run is not the
// round's, did not complete (a binary that crashed, a store that refused
// it), or failed no case.
func abFailedCases(side abSide, round int) []string {
	db, err := openSide(side.db)
	if err != nil {
		return nil
	}
	defer db.Close()
	runs, err := db.Runs(results.RunFilter{Tag: side.tag})
	// Round r is run r+1 of the side's database, the newest.
	if err != nil || len(runs) != round+1 || runs[0].Status != results.RunComplete {
		return nil
	}
	cases, err := db.Cases(runs[0].ID)
	if err != nil {
		return nil
	}
	var failed []string
	for _, c := range cases {
		if c.Status == results.CaseFailed {
			failed = append(failed, c.Name+": "+c.Error)
		}
	}
	return failed
}

// lockedBuffer is a run's log: its stderr is copied in by exec's goroutine
// while its stdout lines are added by the driver, so writes take turns.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) WriteString(s string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.WriteString(s)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *lockedBuffer) String() string { return string(b.Bytes()) }

// openSide opens a side's database, which its runs make as they record:
// one that is not there is an error, not made empty here, so that a round
// that recorded nothing leaves no store in the folder (a --keep folder
// would then be refused as an earlier ab's).
func openSide(path string) (*results.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no runs recorded: %w", err)
	}
	return results.Open(path)
}

// loadABSide reads every run a side recorded.
func loadABSide(s abSide, label string) (*compare.Side, error) {
	db, err := openSide(s.db)
	if err != nil {
		return nil, fmt.Errorf("%s runs: %w", label, err)
	}
	defer db.Close()
	side, err := compare.Load(db, label, s.tag, 0)
	if err != nil {
		return nil, fmt.Errorf("%s runs: %w", label, err)
	}
	if len(side.Runs) > 0 {
		side.Label = fmt.Sprintf("%s %s", label, s.bin)
	}
	return side, nil
}

// recordAB copies both sides' runs into st (ab --db, made now if it was
// not there), tagged tag-baseline and tag-candidate, in one transaction:
// compare, gate and report read them there (docs/perf-gate.md). recorded
// holds the store's ids of the runs an earlier recording of this ab stored
// (an interrupted one, since resumed), in round order: those runs are
// replaced, the others added, and recorded then holds every run's.
func recordAB(w io.Writer, st *recordStore, path, tag string, sides [2]abSide, recorded *[2][]int64) error {
	var recs [2][]*results.RunRecord
	for i, side := range sides {
		db, err := openSide(side.db)
		if errors.Is(err, fs.ErrNotExist) {
			continue // the side recorded nothing
		}
		if err != nil {
			return fmt.Errorf("%s runs: %w", side.label, err)
		}
		runs, err := db.Runs(results.RunFilter{Tag: side.tag})
		for j := len(runs) - 1; err == nil && j >= 0; j-- { // oldest first: round order
			var rec *results.RunRecord
			if rec, err = db.ExportRun(runs[j].ID); err == nil {
				rec.Run.Tag = tag + "-" + side.label
				recs[i] = append(recs[i], rec)
			}
		}
		db.Close()
		if err != nil {
			return fmt.Errorf("%s runs: %w", side.label, err)
		}
	}
	var ids, was [2][]int64
	if recorded != nil {
		was = *recorded
	}
	if len(recs[0])+len(recs[1]) == 0 {
		return nil // nothing measured: no store is made for it
	}
	wait, err := envconfig.DBWait()
	if err != nil {
		return err
	}
	store, err := st.open()
	if err != nil {
		return err
	}
	// As an import waits: a lock another process holds is waited for up to
	// MTLBENCH_DB_WAIT, not one statement's 10 s.
	err = store.BatchWaiting(wait, func(s string) { fmt.Fprintln(w, "ab: "+s) }, func(db *results.DB) error {
		for i := range recs {
			for j, rec := range recs[i] {
				if j < len(was[i]) {
					if err := db.ReplaceRun(was[i][j], rec); err != nil {
						return fmt.Errorf("recording the %s's runs in %s again: %w", sides[i].label, path, err)
					}
					ids[i] = append(ids[i], was[i][j])
					continue
				}
				id, err := db.ImportRun(rec)
				if err != nil {
					return fmt.Errorf("recording the %s's runs in %s: %w", sides[i].label, path, err)
				}
				ids[i] = append(ids[i], id)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if recorded != nil {
		*recorded = ids
	}
	fmt.Fprintf(w, "ab: recorded in %s: baseline runs %s (tag %s-baseline), candidate runs %s (tag %s-candidate)\n",
		path, joinIDs(ids[0]), tag, joinIDs(ids[1]), tag)
	return nil
}

// tail is the last n bytes of the file at path, or why it cannot be read.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil {
		return err.Error()
	}
	return string(b)
}

// abResumeSays what a resumed round runs of a side.
func abResumeSays(label string, r abRound) string {
	switch {
	case r.done:
		return fmt.Sprintf("the %s's run %d of it is complete", label, r.resume)
	case r.resume != 0:
		return fmt.Sprintf("the %s's run %d is finished (run --resume %d)", label, r.resume, r.resume)
	}
	return fmt.Sprintf("the %s's run of it starts anew", label)
}
