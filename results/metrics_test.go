package results

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The store refuses a value its metric cannot take, on every path that
// records samples: a repetition of a run (AddRep) and an imported run
// (ImportRun, which export files and peer tools go through). A roofline
// fraction of -1e308 was once accepted and made `mtlbench report` hang.
func TestImpossibleValuesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      Sample
		refuse string // "" stored; else the error holds it
	}{
		{"negative fraction", Sample{0, "roofline_frac", -1e308, "ratio"}, "roofline_frac rep 0: value -1e+308 is negative"},
		{"negative fraction without a unit", Sample{0, "roofline_frac", -0.5, ""}, "a fraction cannot be"},
		{"negative rate", Sample{0, "decode_tok_s", -1, "tok/s"}, "a rate cannot be"},
		{"negative rate of a peer tool", Sample{0, "prompt_gen_tok_s", -3, ""}, "a rate cannot be"},
		{"negative time", Sample{0, "ttft_ms", -1e307, "ms"}, "a time cannot be"},
		{"negative time per call", Sample{0, "us_per_call", -2, "us"}, "a time cannot be"},
		{"negative size", Sample{0, "peak_rss_bytes", -1, "B"}, "a size cannot be"},
		{"negative count by its unit", Sample{0, "kernels_run", -1, "count"}, "a count cannot be"},
		{"NaN", Sample{0, "decode_tok_s", math.NaN(), "tok/s"}, "not finite"},
		{"+Inf", Sample{0, "roofline_frac", math.Inf(1), "ratio"}, "not finite"},
		{"-Inf of a metric that may be negative", Sample{0, "profile_overhead_pct", math.Inf(-1), "%"}, "not finite"},
		{"no metric", Sample{0, "", 1, "ms"}, "needs a metric"},
		{"a metric with a space", Sample{0, "lat ms", 1, "ms"}, `metric "lat ms" rep 0: a metric's name is letters, digits and _`},
		{"a metric with a newline", Sample{0, "a\nb", 1, ""}, `metric "a\nb" rep 0: a metric's name`},
		{"a metric with a comma", Sample{0, "p50,p99", 1, ""}, `metric "p50,p99" rep 0: a metric's name`},
		{"a metric in capitals and digits", Sample{0, "ITL_p99", 1, ""}, ""},
		{"zero fraction", Sample{0, "roofline_frac", 0, "ratio"}, ""},
		{"fraction past 1 (caches)", Sample{0, "roofline_frac", 1.3, "ratio"}, ""},
		{"a rate past any machine's", Sample{0, "decode_tok_s", 1.7e308, "tok/s"}, "value 1.7e+308 is past 1e+18"},
		{"a large step's bytes", Sample{0, "bytes_per_step", 6e10, "B"}, ""},
		{"negative overhead", Sample{0, "profile_overhead_pct", -3, "%"}, ""},
		{"negative unknown metric", Sample{0, "delta", -2, ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				switch {
				case tc.refuse == "" && err != nil:
					t.Errorf("%s: %v", how, err)
				case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
					t.Errorf("%s: err = %v, want it to say %q", how, err, tc.refuse)
				}
			}
			db := openTemp(t)
			rec := &RunRecord{Run: Run{SuiteName: "imported", StartedAt: time.Now()},
				Cases: []CaseRecord{{Case: Case{Name: "decode", Kind: CaseModel, Params: map[string]string{"batch": "1"}},
					Samples: []Sample{tc.s}}}}
			_, err := db.ImportRun(rec)
			check("import", err)
			if tc.refuse != "" && count(t, db, `SELECT count(*) FROM runs`) != 0 {
				t.Error("a refused import left a run behind")
			}
			id := mustRun(t, db, Run{SuiteName: "live"})
			cs := mustCases(t, db, id, 1)
			check("AddRep", db.AddRep(cs[0].ID, 0, []Sample{tc.s}, nil))
		})
	}
}

// RunRecord.Check names the case and sample, for an import to say where in
// its file the value is before anything is stored.
func TestRunRecordCheck(t *testing.T) {
	rec := &RunRecord{Cases: []CaseRecord{
		{Case: Case{Name: "decode/batch=1", Key: "batch=1", Kind: CaseModel}, Samples: []Sample{{0, "decode_tok_s", 50, "tok/s"}}},
		{Case: Case{Name: "decode/batch=2", Key: "batch=2", Kind: CaseModel}, Samples: []Sample{{0, "decode_tok_s", 90, "tok/s"}, {0, "roofline_frac", -1e308, "ratio"}}},
	}}
	err := rec.Check()
	if err == nil || !strings.Contains(err.Error(), `case 1 "decode/batch=2" sample 1: roofline_frac rep 0: value -1e+308`) {
		t.Fatalf("Check = %v", err)
	}
	rec.Cases[1].Samples = rec.Cases[1].Samples[:1]
	if err := rec.Check(); err != nil {
		t.Fatal(err)
	}
}

// A case's name and key, and a run's tag, are printed one to a line or a
// cell: text with a control character or bytes that are not UTF-8 is
// refused as an import checks it, naming the case.
func TestRunRecordNamesOneLine(t *testing.T) {
	for _, c := range []struct {
		name, key, tag, err string
	}{
		{"decode/batch=1", "batch=1", "main", ""},
		{"décodé · 解码", "batch=1", "", ""},
		{"decode\nbatch=1", "batch=1", "", `case 0: name "decode\nbatch=1" holds the control character U+000A at byte 6`},
		{"decode", "batch=1\t2", "", `case 0: key "batch=1\t2" holds the control character U+0009 at byte 7`},
		{"decode\xff", "batch=1", "", `case 0: name "decode\xff" is not UTF-8 text`},
		{"decode", "batch=1", "nightly\r", `tag "nightly\r" holds the control character U+000D at byte 7`},
	} {
		rec := RunRecord{Run: Run{Tag: c.tag}, Cases: []CaseRecord{{Case: Case{Name: c.name, Key: c.key, Kind: CaseModel},
			Samples: []Sample{{0, "decode_tok_s", 50, "tok/s"}}}}}
		err := rec.Check()
		if c.err == "" && err != nil || c.err != "" && (err == nil || err.Error() != c.err) {
			t.Errorf("%q %q %q: %v, want %q", c.name, c.key, c.tag, err, c.err)
		}
	}
}

// A repetition out of order is refused, saying how many the case holds in
// words ("1 repetition stored", not "1 repetitions").
func TestAddRepOutOfOrder(t *testing.T) {
	for _, tc := range []struct {
		stored, rep int
		want        string
	}{
		{0, 1, "has 0 repetitions stored; the next is rep 0, not 1"},
		{1, 3, "has 1 repetition stored; the next is rep 1, not 3"},
		{2, 0, "has 2 repetitions stored; the next is rep 2, not 0"},
	} {
		db := openTemp(t)
		cs := mustCases(t, db, mustRun(t, db, Run{SuiteName: "live"}), 1)
		for r := range tc.stored {
			if err := db.AddRep(cs[0].ID, r, []Sample{{r, "decode_tok_s", 10, "tok/s"}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		err := db.AddRep(cs[0].ID, tc.rep, []Sample{{tc.rep, "decode_tok_s", 10, "tok/s"}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d stored, rep %d: err = %v, want %q in it", tc.stored, tc.rep, err, tc.want)
		}
	}
}
