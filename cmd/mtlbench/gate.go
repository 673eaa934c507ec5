package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/reports/compare"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/suites"
)

func gateCommand() *cli.Command {
	return &cli.Command{
		Name:  "gate",
		Usage: "fail (exit 1) when the candidate runs are significantly slower than the baseline",
		Description: "Compares --candidate with --baseline like `compare` and fails a case and metric only\n" +
			"when the change is significant (Mann-Whitney U, p < --alpha) AND worse than the\n" +
			"metric's threshold. Gated metrics and thresholds come from the suite's thresholds:\n" +
			"section (the candidate run's suite file, or --suite), else decode_tok_s,\n" +
			"prefill_tok_s and us_per_call at 5%. --threshold 10% overrides every threshold,\n" +
			"--threshold ttft_ms=3% one metric (and gates it).\n\n" +
			"Significance is Mann-Whitney U on each run's mean of its better half of repetitions\n" +
			"where both sides have several runs of a case (else on repetitions), with p adjusted\n" +
			"over every check of the gate (Benjamini-Hochberg) and compared with --alpha\n" +
			"(docs/perf-gate.md).\n\n" +
			"Exit status: 0 pass; 1 regression, or a case the candidate failed (stored as failed in\n" +
			"any of its runs) where the baseline measured it, with no sample of the candidate's or\n" +
			"failed in none of the baseline's runs, whatever the other cases did; 2 tool error\n" +
			"(an unknown baseline or candidate included); 3 cannot tell (fewer than --min-samples\n" +
			"samples, too few runs, a baseline noisier than the threshold, a case not comparable,\n" +
			"skipped or never reached by the candidate or failed by the baseline, no matching\n" +
			"baseline case).\n" +
			"Each outcome is explained on stderr;\n" +
			"--summary FILE (and $GITHUB_STEP_SUMMARY, when set) get a markdown summary.\n\n" +
			"Examples:\n\n" +
			"   mtlbench gate --baseline main --candidate pr\n" +
			"   mtlbench gate --baseline main --candidate pr --threshold 10% --summary gate.md",
		Flags: []cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "baseline", Required: true, Usage: "baseline runs: run id, tag, latest or git commit (comma-separated to pool)"},
			&cli.StringFlag{Name: "candidate", Required: true, Usage: "candidate runs: run id, tag, latest or git commit (comma-separated to pool)"},
			&cli.StringSliceFlag{Name: "threshold", Usage: "allowed worsening: 5% for every gated metric, or METRIC=5% (repeatable)"},
			&cli.Float64Flag{Name: "alpha", Value: compare.DefaultGateAlpha, Usage: "false-discovery rate over all checks (Benjamini-Hochberg)"},
			&cli.IntFlag{Name: "min-samples", Value: compare.DefaultMinSamples, Usage: "fewest samples per side and gated metric"},
			&cli.StringFlag{Name: "suite", TakesFile: true, Usage: "take thresholds from this suite file instead of the candidate run's"},
			&cli.IntFlag{Name: "latest", Usage: "use only the newest N runs of each reference (0: all)"},
			&cli.StringFlag{Name: "summary", TakesFile: true, Usage: "write the markdown summary to this file (not -: stdout takes --format md)"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "stdout: the checks as " + formatList() + " (md: the markdown summary)"},
		},
		Action: func(c *cli.Context) error {
			f, err := parseTableFormat(c.String("format"))
			if err != nil {
				return err
			}
			alpha := c.Float64("alpha")
			if err := checkAlpha(alpha); err != nil {
				return err
			}
			if err := checkRunCount(c, "latest"); err != nil {
				return err
			}
			if c.Int("min-samples") < 1 {
				return fmt.Errorf("--min-samples must be at least 1, got %d", c.Int("min-samples"))
			}
			if err := checkSummaries(c); err != nil {
				return err
			}
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			if err := notTheStore(db.Path(), "--summary", c.String("summary")); err != nil {
				return err
			}
			if err := notTheStore(db.Path(), "$GITHUB_STEP_SUMMARY", os.Getenv("GITHUB_STEP_SUMMARY")); err != nil {
				return err
			}
			// Both sides are read before either is refused, so two unknown
			// references are named at once; an unknown name is a mistake to
			// fix, not missing data.
			cand, errC := compare.Load(db, c.String("candidate"), c.String("candidate"), c.Int("latest"))
			base, errB := compare.Load(db, c.String("baseline"), c.String("baseline"), c.Int("latest"))
			var errs []error
			if errB != nil {
				errs = append(errs, fmt.Errorf("baseline: %w", errB))
			}
			if errC != nil {
				errs = append(errs, fmt.Errorf("candidate: %w", errC))
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			var suite *suites.Suite
			if path := c.String("suite"); path != "" {
				// a file, or a built-in suite's name, as run takes it
				if suite, err = suites.Resolve(path); err != nil {
					return fmt.Errorf("--suite: %w", err)
				}
			}
			opts, notes, err := gateOptions(c, cand, suite)
			if err != nil {
				return err
			}
			opts.Alpha, opts.MinSamples = alpha, c.Int("min-samples")
			if ids := compare.Shared(base, cand); len(ids) > 0 {
				return fmt.Errorf("--baseline %s and --candidate %s both hold run %s: a run gated against itself passes whatever it measured",
					c.String("baseline"), c.String("candidate"), joinIDs(ids))
			}
			res := compare.Gate(base, cand, opts)
			res.Notes = append(notes, res.Notes...)
			return finishGate(c, res, f)
		},
	}
}

// finishGate prints a gate's result (stdout: the checks; stderr: one line
// per check and the headline; --summary and $GITHUB_STEP_SUMMARY: the
// markdown) and turns its status into the exit code.
func finishGate(c *cli.Context, res compare.Result, f table.Format) error {
	var err error
	if f == table.FormatMarkdown {
		_, err = io.WriteString(c.App.Writer, res.Markdown())
	} else if table.IsData(f) {
		err = res.Data().Render(c.App.Writer, f)
	} else if len(res.Checks) > 0 {
		err = res.Table().Render(c.App.Writer, f)
	}
	if err != nil {
		return err
	}
	if err := res.Explain(c.App.ErrWriter); err != nil {
		return err
	}
	if err := writeSummary(c.String("summary"), res.Markdown()); err != nil {
		return err
	}
	switch res.Status {
	case compare.ExitRegression:
		return &exitError{code: res.Status, err: errors.New("perf gate: regression (exit 1)")}
	case compare.ExitCannotTell:
		return &exitError{code: res.Status, err: errors.New("perf gate: cannot tell (exit 3)")}
	}
	return nil
}

// runSuite is the suite file a run was made from, for its thresholds: the
// file at the path the run recorded, if it still holds what the run read
// (its hash), else nil with a note saying why. A suite named by flags
// (`bench`) or by a built-in's name left no file to read, and no note.
func runSuite(r compare.Run) (*suites.Suite, table.Note) {
	s, err := suites.Load(r.SuitePath)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist) && !strings.ContainsRune(r.SuitePath, filepath.Separator) && filepath.Ext(r.SuitePath) == "":
		return nil, table.Note{}
	case err != nil:
		return nil, table.Notef("cannot read the candidate's suite %s (%v): default thresholds; pass --suite", r.SuitePath, err)
	case r.SuiteHash != "" && s.Hash != r.SuiteHash:
		return nil, table.Notef("the suite at %s is not the file run %d was made from (suite hash %.12s, the run's %.12s): default thresholds; pass --suite",
			r.SuitePath, r.ID, s.Hash, r.SuiteHash)
	}
	return s, table.Note{}
}

// gateOptions gathers the gated metrics and thresholds: the suite's, then
// --threshold on top (a flag beats a file). notes explain where they came
// from when that is not obvious.
func gateOptions(c *cli.Context, cand *compare.Side, suite *suites.Suite) (o compare.GateOptions, notes []table.Note, err error) {
	if suite == nil {
		for _, r := range cand.Runs {
			if r.SuitePath == "" {
				continue
			}
			s, note := runSuite(r)
			if note.Text != "" {
				notes = append(notes, note)
			}
			suite = s
			break
		}
	}
	o.Thresholds = map[string]float64{}
	if suite != nil {
		for m, t := range suite.Thresholds {
			o.Thresholds[m] = t
		}
	}
	o.Metrics = slices.Sorted(maps.Keys(o.Thresholds))
	if len(o.Metrics) == 0 {
		o.Metrics = slices.Clone(compare.DefaultGateMetrics)
	}
	flags, err := thresholdFlags(c)
	if err != nil {
		return o, nil, err
	}
	for _, f := range flags {
		if f.metric == "" {
			// One value for all: it replaces the suite's per-metric ones.
			o.Threshold, o.ThresholdSet = f.t, true
			for m := range o.Thresholds {
				o.Thresholds[m] = f.t
			}
		}
	}
	// A metric's own --threshold beats the one for all, given before it
	// or after: --threshold decode_tok_s=1%,5% gates decode_tok_s at 1%.
	for _, f := range flags {
		if f.metric == "" {
			continue
		}
		o.Thresholds[f.metric] = f.t
		if !slices.Contains(o.Metrics, f.metric) {
			o.Metrics = append(o.Metrics, f.metric)
		}
	}
	return o, notes, nil
}

// thresholdFlag is one --threshold value: a metric's allowed worsening, or
// every gated metric's where metric is "".
type thresholdFlag struct {
	metric string
	t      float64
}

// thresholdFlags reads --threshold (repeatable, comma-separated). ab calls
// it before its rounds, so that a bad value is said before any work. An
// empty item, and a metric (or the value for all) given twice, are refused:
// one of the two would be dropped without a word.
func thresholdFlags(c *cli.Context) ([]thresholdFlag, error) {
	var list []string
	for _, v := range c.StringSlice("threshold") {
		items, err := listarg.Split("--threshold", v)
		if err != nil {
			return nil, err
		}
		list = append(list, items...)
	}
	var out []thresholdFlag
	given := map[string]string{} // metric ("": every one) -> its value as given
	for _, v := range list {
		metric, pct, named := strings.Cut(v, "=")
		if !named {
			pct, metric = v, ""
		}
		t, err := parsePercent(pct)
		if err != nil {
			// metric:5% (a suite's thresholds: spelling) is metric=5% here
			if m, p, ok := strings.Cut(v, ":"); !named && ok && metrics.CheckThreshold(strings.TrimSpace(m)) == nil {
				return nil, fmt.Errorf("--threshold %s: %w; one metric's is METRIC=PERCENT: --threshold %s=%s", v, err, strings.TrimSpace(m), strings.TrimSpace(p))
			}
			return nil, fmt.Errorf("--threshold %s: %w (or METRIC=PERCENT for one metric)", v, err)
		}
		if named {
			metric = strings.TrimSpace(metric)
			if metric == "" {
				return nil, fmt.Errorf("--threshold %s: no metric before =", v)
			}
			if err := metrics.CheckThreshold(metric); err != nil {
				return nil, fmt.Errorf("--threshold %s: %w (%s)", v, err, metrics.ThresholdHint(metric))
			}
			if err := metrics.CheckThresholdSize(metric, t); err != nil {
				return nil, fmt.Errorf("--threshold %s: %w", v, err)
			}
		} else if t >= 1 {
			// One value for every gated metric: the rates among them fall
			// by at most 100%, so it would pass every run on them, as a
			// suite's threshold would (metrics.CheckThresholdSize).
			return nil, fmt.Errorf("--threshold %s: the gated rates (decode_tok_s, ...) fall by at most 100%%, so it would pass every run on them: write less than 100%%, or METRIC=PERCENT for a time or size that may grow more", v)
		}
		if first, twice := given[metric]; twice {
			what := metric
			if metric == "" {
				what = "the threshold of every metric"
			}
			return nil, fmt.Errorf("--threshold gives %s twice (%s, %s): give it once", what, first, strings.TrimSpace(v))
		}
		given[metric] = strings.TrimSpace(v)
		out = append(out, thresholdFlag{metric, t})
	}
	return out, nil
}

// parsePercent reads "5%" as 0.05. The % is required: a bare 0.05 could
// mean five percent or a twentieth of one.
func parsePercent(s string) (float64, error) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("want a percentage like 5%%, got %q", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("want a percentage >= 0 like 5%%, got %q", s)
	}
	return v / 100, nil
}

// writeSummary writes the markdown summary to path (if set) and appends it
// to $GITHUB_STEP_SUMMARY (if set), where GitHub Actions shows it on the
// job's page.
func writeSummary(path, md string) error {
	if path != "" {
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			return fmt.Errorf("--summary: %w", err)
		}
	}
	if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
		_, werr := io.WriteString(f, md+"\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", werr)
		}
	}
	return nil
}

// joinIDs writes run ids as "3" or "3, 4".
func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

// checkSummaries checks where the gate will write its summary, --summary
// and $GITHUB_STEP_SUMMARY, before any work: found unwritable at the end
// (after ab's rounds), it would hide the verdict behind a tool error.
func checkSummaries(c *cli.Context) error {
	if err := noStdout("--summary", c.String("summary"), "standard output carries the checks (--format md writes the summary there)"); err != nil {
		return err
	}
	if err := checkWritable("--summary", c.String("summary")); err != nil {
		return err
	}
	return checkWritable("$GITHUB_STEP_SUMMARY", os.Getenv("GITHUB_STEP_SUMMARY"))
}

// checkWritable fails where a path (what names it: a flag, a variable)
// could not be written once the work is done: a missing folder, a folder
// named as the file; or should not be: a results database or a model's
// file there, which the text written would destroy (readfile.KindOf).
func checkWritable(what, path string) error {
	if path == "" || path == stdoutPath {
		return nil
	}
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s %s: a folder, not a file", what, path)
		}
		if k := readfile.KindOf(readfile.Head(path)); k != readfile.Unknown {
			return fmt.Errorf("%s %s: %s, which writing there would destroy: name another file", what, path, k)
		}
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: its folder cannot be used: %w", what, path, readfile.PathError(dir, err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s: %s is not a folder", what, path, dir)
	}
	return nil
}
