package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/internal/atomicfile"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/reports/peers"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

const exportFormat = results.ExportFormat

type exportLine = results.ExportLine

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write runs as JSON lines (machine, provenance, cases, samples) for another store",
		ArgsUsage: "[RUN...] (id, tag, \"latest\" or commit, or a,b for several; default: every run)",
		Description: "One JSON object a line, each a whole run, then a line counting them, by which import\n" +
			"refuses an export cut short: what `mtlbench import` reads into another\n" +
			"store. A matrix of CI runners each exports its runs as an artifact; one job imports\n" +
			"them all into one store and reports over every machine (docs/perf-gate.md).\n\n" +
			"Examples:\n\n" +
			"   mtlbench export main -o m3.jsonl                  # runs tagged main, for another store\n" +
			"   mtlbench import m1.jsonl m3.jsonl                 # on one machine: every machine's runs in one store",
		Flags: []cli.Flag{dbFlag(),
			&cli.StringFlag{Name: "out", TakesFile: true, Aliases: []string{"o"}, Usage: "file to write (default, or -: standard output)"}},
		Action: func(c *cli.Context) error {
			db, err := openExistingDB(c)
			if err != nil {
				return err
			}
			defer db.Close()
			var ids []int64
			if c.NArg() == 0 {
				runs, err := db.Runs(results.RunFilter{})
				if err != nil {
					return err
				}
				for i := len(runs) - 1; i >= 0; i-- {
					ids = append(ids, runs[i].ID)
				}
			} else if ids, err = resolveRuns(db, c.Args().Slice()); err != nil {
				return err
			}
			if len(ids) == 0 {
				// An empty export would be refused by import, which takes an
				// empty input for a writer that failed (docs/data.md).
				return fmt.Errorf("the results database %s holds no runs: nothing to export, and no file written (record one with run or bench, or name another store with --db)", db.Path())
			}
			write := func(w io.Writer) error {
				bw := bufio.NewWriter(w)
				x := results.NewExportWriter(bw)
				for _, id := range ids {
					rec, err := db.ExportRun(id)
					if err != nil {
						return err
					}
					for _, note := range leaveOutImpossible(rec) {
						fmt.Fprintln(c.App.ErrWriter, "mtlbench: warning:", note)
					}
					// What import would refuse (a store written before its
					// checks may hold it) is said now, not at the far end.
					if err := rec.Check(); err != nil {
						fmt.Fprintf(c.App.ErrWriter, "mtlbench: warning: run %d (%s) is written, but import refuses it as it stands: %v\n", id, rec.Run.SuiteName, err)
					}
					if err := x.Write(rec); err != nil {
						return fmt.Errorf("run %d: %w", id, err)
					}
				}
				// The closing line counts the runs: an export cut at a
				// line's end is refused by import, not read as fewer runs.
				if err := x.Close(); err != nil {
					return err
				}
				return bw.Flush()
			}
			p := c.String("out")
			if p == "" {
				p = stdoutPath
			}
			if err := notTheStore(db.Path(), "--out", p); err != nil {
				return err
			}
			if err := checkWritable("--out", p); err != nil {
				return err
			}
			if err = writeOutput(c.App.Writer, p, write); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "exported %s\n", plural.Of(len(ids), "run"))
			return nil
		},
	}
}

// leaveOutImpossible takes out of rec the samples whose values their metric
// cannot take (results.CheckValue: not finite, negative where the metric
// cannot be, or past any figure of a run), which only a store written
// before the checks on storing holds: statistics leave them out, and import
// would refuse the whole file for one. It says which it took out.
func leaveOutImpossible(rec *results.RunRecord) []string {
	var notes []string
	for i := range rec.Cases {
		c := &rec.Cases[i]
		kept := c.Samples[:0]
		for _, s := range c.Samples {
			if err := results.CheckValue(s.Metric, s.Unit, s.Value); err != nil {
				notes = append(notes, fmt.Sprintf("run %d (%s): case %q: %s rep %d left out: %v",
					rec.Run.ID, rec.Run.SuiteName, c.Case.Name, s.Metric, s.Rep, err))
				continue
			}
			kept = append(kept, s)
		}
		c.Samples = kept
	}
	return notes
}

// writeWhole writes path through write, whole or not at all
// (internal/atomicfile: a write that fails midway leaves whatever path held
// before; a link is written through to its target).
func writeWhole(path string, write func(io.Writer) error) error {
	var storeErr error
	err := atomicfile.Write(path, func(w io.Writer) error {
		err := write(w)
		if results.FromStore(err) {
			storeErr = err
		}
		return err
	})
	if storeErr != nil {
		// the store failed, not the file
		return fmt.Errorf("%w (--out %s is unchanged)", storeErr, path)
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return nil
}

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "read runs that `mtlbench export` wrote into this store (- reads standard input)",
		ArgsUsage: "FILE...",
		Description: "Each run keeps its machine, commit, times, tag and samples, under a new id. A run the\n" +
			"store already holds (the same start, suite, tag, commit and machine, and one copy\n" +
			"holding every case and sample of the other) is skipped, so importing the same artifacts\n" +
			"twice is harmless, unless the file holds it further on (more repetitions, or finished\n" +
			"where the stored copy is not: an export taken while it ran): then the file's copy\n" +
			"replaces the stored one under its id. Runs that share only a start are two runs. Every file is read and\n" +
			"checked before anything is stored, and all files' runs are stored in one transaction:\n" +
			"all of them, or, when storing one fails, none. A FILE of - is standard input:\n" +
			"  ssh mac mtlbench export -o - | mtlbench import -",
		Flags: []cli.Flag{dbFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("import needs one or more files from mtlbench export")
			}
			if err := stdinOnce("import", c.Args().Slice()); err != nil {
				return err
			}
			var recs []*results.RunRecord
			for _, path := range c.Args().Slice() {
				got, err := readExport(c.App.Reader, path)
				if err != nil {
					return err
				}
				recs = append(recs, got...)
			}
			// A new store is made only now, and taken away again where the
			// batch fails (docs/data.md).
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
			// later file leaves none of the earlier ones' (docs/perf-gate.md).
			added, skipped := 0, 0
			var said []string
			err = storeBatch(c, db, func(db *results.DB) error {
				for _, rec := range recs {
					from := rec.Run.ID
					if id, ok, err := db.FindRun(rec, suites.RunKeys); err != nil {
						return err
					} else if ok {
						replaced, err := replaceIfFurther(db, id, rec)
						if err != nil {
							return fmt.Errorf("run %d of %s: %w", from, hostLabel(rec.Run.Machine), err)
						}
						if replaced != "" {
							added++
							said = append(said, fmt.Sprintf("run %d of %s (%s) was here as run %d %s: replaced",
								from, hostLabel(rec.Run.Machine), rec.Run.SuiteName, id, replaced))
							continue
						}
						skipped++
						said = append(said, fmt.Sprintf("run %d of %s (%s) is already here as run %d: skipped",
							from, hostLabel(rec.Run.Machine), rec.Run.SuiteName, id))
						continue
					}
					id, err := db.ImportRun(rec)
					if err != nil {
						return fmt.Errorf("run %d of %s: %w", from, hostLabel(rec.Run.Machine), err)
					}
					added++
					said = append(said, fmt.Sprintf("imported run %d of %s (%s, %s) as run %d", from, hostLabel(rec.Run.Machine),
						rec.Run.SuiteName, machineLabel(rec.Run.Machine), id))
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w; nothing was imported: every file's runs are stored together or not at all", err)
			}
			for _, l := range said {
				fmt.Fprintln(c.App.ErrWriter, l)
			}
			fmt.Fprintf(c.App.ErrWriter, "%s imported, %d already here, into %s\n", plural.Of(added, "run"), skipped, db.Path())
			return nil
		},
	}
}

// replaceIfFurther puts rec in place of stored run id, keeping its id, when
// rec holds the run further on: more repetitions, or as many and finished
// where the stored copy is not (an export taken while the run ran, or before
// it was resumed). It says what the stored copy held, or "" when it kept it.
func replaceIfFurther(db *results.DB, id int64, rec *results.RunRecord) (string, error) {
	stored, err := db.ExportRun(id)
	if err != nil {
		return "", err
	}
	have, got := stored.Reps(), rec.Reps()
	finished := rec.Run.Status == results.RunComplete && stored.Run.Status != results.RunComplete
	if got < have || got == have && !finished {
		return "", nil
	}
	was := fmt.Sprintf("(%s, %s; the file's copy: %s, %d)", stored.Run.Status, plural.Of(have, "repetition"), rec.Run.Status, got)
	return was, db.ReplaceRun(id, rec)
}

// hostLabel names the machine a run was recorded on by its hostname, which
// a peer import may not have.
func hostLabel(m results.Machine) string {
	if m.Hostname == "" {
		return "an unnamed machine"
	}
	return m.Hostname
}

func machineLabel(m results.Machine) string {
	if m.GPUName != "" {
		return m.GPUName
	}
	return m.CPUModel
}

// newerExport reports whether format is an export format of a later
// version than this mtlbench writes (mtlbench-run/N).
func newerExport(format string) bool {
	base, v, _ := strings.Cut(exportFormat, "/")
	fb, fv, ok := strings.Cut(format, "/")
	n, err1 := strconv.Atoi(fv)
	have, err2 := strconv.Atoi(v)
	return ok && fb == base && err1 == nil && err2 == nil && n > have
}

// readExport reads an export file, or stdin where path is "-", line by
// line, checking each run. The runs of a version 2 export are counted
// against its closing line (results.ExportEnd): one missing, or counting
// other runs, cases or samples than the lines before it hold, is a file
// cut short or damaged, refused whole. Version 1 exports have none.
func readExport(stdin io.Reader, path string) ([]*results.RunRecord, error) {
	store, arg := shellQuote(path), shellQuote(path)
	if path == stdinPath {
		store, arg = "STORE", "-"
	}
	in, path, err := openInput(stdin, path, "an export file")
	if err != nil {
		return nil, err
	}
	defer in.Close()
	br := bufio.NewReader(in)
	// A results database given where its export was meant reads as a line
	// of binary that JSON refuses at its first byte.
	head, _ := br.Peek(readfile.HeadLen)
	switch k := readfile.KindOf(head); {
	case k == readfile.SQLite:
		return nil, fmt.Errorf("%s is an SQLite database (a results store?), not an export: import its runs from `mtlbench export --db %s -o runs.jsonl`", path, store)
	case path == stdinName:
		// A model's file, named as readInput names it.
		if err := stdinOfAnotherKind(head, "an export file"); err != nil {
			return nil, err
		}
	default:
		if err := suites.NotAText(path, head, "an export file"); err != nil {
			return nil, err
		}
	}
	// Another tool's output (or mtlbench's peer-run JSON) given where an
	// export was meant: said with the command that reads it, not as a
	// first line that is no export line.
	head, _ = br.Peek(1 << 16)
	peerFile := func(line int) error {
		if line != 1 {
			return nil
		}
		f, err := peers.Detect(head)
		if err != nil {
			return nil
		}
		what := f + " output"
		if f == peers.FormatMtlbench {
			// Detect takes any "format" for the peer run's; an export's
			// own (a newer one, a line written by hand) is not one.
			var v struct {
				Format string `json:"format"`
			}
			if json.NewDecoder(bytes.NewReader(head)).Decode(&v) != nil || !strings.HasPrefix(v.Format, "mtlbench-peer-run/") {
				return nil
			}
			what = "a peer run (" + v.Format + ")"
		}
		return fmt.Errorf("%s is %s, not an mtlbench export: `mtlbench peer import %s` reads it", path, what, arg)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 1<<20), readfile.Import)
	var out []*results.RunRecord
	var open openRuns
	line := 1
	for ; sc.Scan(); line++ {
		text := sc.Bytes()
		if line == 1 {
			// a Windows editor saves the file with a UTF-8 byte-order mark,
			// which peer import and suites read past too
			text = bytes.TrimPrefix(text, []byte("\uFEFF"))
		}
		if len(text) == 0 {
			continue
		}
		// The format first: a newer format's fields may not decode into
		// this one's, and its error would hide that the file is newer.
		var f struct {
			Format string          `json:"format"`
			End    json.RawMessage `json:"end"`
		}
		if err := json.Unmarshal(text, &f); err == nil && f.Format != exportFormat && f.Format != results.ExportFormatV1 {
			if err := peerFile(line); err != nil {
				return nil, err
			}
			if newerExport(f.Format) {
				return nil, fmt.Errorf("%s:%d: format %q is a newer mtlbench's; this one reads %q: import it with an mtlbench as new as the one that exported it", path, line, f.Format, exportFormat)
			}
			return nil, fmt.Errorf("%s:%d: format %q, want %q (a file from mtlbench export)", path, line, f.Format, exportFormat)
		}
		if f.End != nil {
			if err := closeExport(path, line, text, f.Format, &open); err != nil {
				return nil, err
			}
			continue
		}
		// mtlbench writes each key of a line once: one given twice is an
		// edit, whose last value encoding/json would take without a word
		// (two objects it would merge).
		if err := jsonerr.Once(text); err != nil {
			return nil, fmt.Errorf("%s:%d: %v: an export line gives each key once; nothing was imported", path, line, err)
		}
		var l exportLine
		if err := json.Unmarshal(text, &l); err != nil {
			if perr := peerFile(line); perr != nil {
				return nil, perr
			}
			// In the line's terms (run.id is a JSON string), not Go's types;
			// encoding/json names the embedded RunRecord in its path, which
			// the line does not have.
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				te.Field = strings.TrimPrefix(te.Field, "RunRecord.")
			}
			// A time's own error names no field.
			if terr := badTime(text); terr != nil {
				err = terr
			}
			// JSON that ends before its run does, on the input's last
			// line: a copy cut mid-line (not a JSON file of many lines).
			var se *json.SyntaxError
			if errors.As(err, &se) && se.Error() == "unexpected end of JSON input" && !sc.Scan() && sc.Err() == nil {
				return nil, fmt.Errorf("%s:%d: the line ends (after %s) before its run does: the export was cut short mid-line; nothing was imported: export it again, or copy the whole file",
					path, line, plural.Of(len(text), "byte"))
			}
			if t := string(bytes.TrimSpace(text)); t == "{" || t == "[" {
				// One value over many lines, as --format json or jq .
				// writes it, not a line cut short.
				return nil, fmt.Errorf("%s:%d: a JSON value that goes on past its line (a file of --format json, or one pretty-printed by jq .), not an export line: an export holds one run a line, as `mtlbench export` writes it (jq -c keeps each on one); nothing was imported",
					path, line)
			}
			return nil, fmt.Errorf("%s:%d: not an mtlbench export line: %v", path, line, jsonerr.ExplainLine(err, text))
		}
		// Newer formats were refused above, so a field this one lacks is a
		// mistake (a misspelt read), never a later mtlbench's: a field is
		// added with a new format (docs/data.md, "What the store and `import` accept").
		if err := jsonerr.Unknown(text, &l); err != nil {
			return nil, fmt.Errorf("%s:%d: run %d: %v: an export line of format %q has no such field; nothing was imported", path, line, l.Run.ID, err, l.Format)
		}
		if l.Run.StartedAt.IsZero() {
			return nil, fmt.Errorf("%s:%d: the run has no start time", path, line)
		}
		if err := results.UnsetSample(text, caseNames(&l.RunRecord)); err != nil {
			return nil, fmt.Errorf("%s:%d: run %d: %w", path, line, l.Run.ID, err)
		}
		if err := l.RunRecord.Check(); err != nil {
			return nil, fmt.Errorf("%s:%d: run %d: %w", path, line, l.Run.ID, err)
		}
		rec := l.RunRecord
		out = append(out, &rec)
		if l.Format == exportFormat {
			if open.End.Runs == 0 {
				open.from = line
			}
			open.End.Add(&rec)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s:%d: a line of more than %s: not an mtlbench export", path, line, readfile.Size(readfile.Import))
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if open.End.Runs > 0 {
		return nil, fmt.Errorf("%s:%d: the export ends without its closing line (the count of its runs), after %s from line %d on: "+
			"it was cut short; nothing was imported: export it again, or copy the whole file", path, line-1, plural.Of(open.End.Runs, "run"), open.from)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no runs: an export holds one JSON line a run (an empty input is often a writer that failed; export refuses a store with no runs)", path)
	}
	return out, nil
}

// openRuns counts the runs of a version 2 export read since its start or
// its previous closing line, from line from on.
type openRuns struct {
	End  results.ExportEnd
	from int
}

// closeExport checks an export's closing line (text, at line of path)
// against the runs read since the last one, open, and starts the count
// again: exports joined end to end each close their own runs.
func closeExport(path string, line int, text []byte, format string, open *openRuns) error {
	if format != exportFormat {
		return fmt.Errorf("%s:%d: a closing line of format %q, want %q: not an mtlbench export line", path, line, format, exportFormat)
	}
	var l results.ExportEndLine
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return fmt.Errorf("%s:%d: not an mtlbench export's closing line: %v", path, line, jsonerr.ExplainLine(err, text))
	}
	got, want := open.End, l.End
	if got != want {
		from := ""
		if got.Runs > 0 {
			from = fmt.Sprintf(" (lines %d to %d)", open.from, line-1)
		}
		return fmt.Errorf("%s:%d: the closing line counts %s, and the export holds %s%s: it is damaged or was joined from parts; nothing was imported: export it again",
			path, line, countText(want), countText(got), from)
	}
	*open = openRuns{}
	return nil
}

// countText is an export's count as a person reads it.
func countText(e results.ExportEnd) string {
	return fmt.Sprintf("%s, %s, %s", plural.Of(e.Runs, "run"), plural.Of(e.Cases, "case"), plural.Of(e.Samples, "sample"))
}

// badTime says which time of an export line is no time (a time's decoding
// error names neither the field nor the case), or nil.
func badTime(text []byte) error {
	type span struct {
		StartedAt json.RawMessage `json:"started_at"`
		EndedAt   json.RawMessage `json:"ended_at"`
	}
	var raw struct {
		Run   span `json:"run"`
		Cases []struct {
			Case span `json:"case"`
		} `json:"cases"`
	}
	if json.Unmarshal(text, &raw) != nil {
		return nil
	}
	check := func(field string, v json.RawMessage) error {
		var t time.Time
		if v == nil || t.UnmarshalJSON(v) == nil || string(v) == "null" {
			return nil
		}
		if len(v) > 40 {
			v = append(v[:40:40], "..."...)
		}
		return fmt.Errorf("%s is %s: want a time as RFC 3339 writes it (\"2026-01-02T03:04:05Z\")", field, v)
	}
	if err := cmp.Or(check("run.started_at", raw.Run.StartedAt), check("run.ended_at", raw.Run.EndedAt)); err != nil {
		return err
	}
	for i, c := range raw.Cases {
		if err := cmp.Or(check("cases.case.started_at", c.Case.StartedAt), check("cases.case.ended_at", c.Case.EndedAt)); err != nil {
			return fmt.Errorf("case %d: %w", i, err)
		}
	}
	return nil
}

// caseNames are rec's case names, in order.
func caseNames(rec *results.RunRecord) []string {
	names := make([]string, len(rec.Cases))
	for i, c := range rec.Cases {
		names[i] = c.Case.Name
	}
	return names
}
