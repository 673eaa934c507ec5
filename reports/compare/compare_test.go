package compare

import (
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
)

func seq(n int, base, step float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = base + step*float64(i)
	}
	return out
}

func TestCompareRows(t *testing.T) {
	a, b := NewSide("A"), NewSide("B")
	c := results.Case{Key: "model/decode", Name: "decode", Kind: "model", Status: results.CaseDone,
		LayersRun: 2, LayersTotal: 6, Params: map[string]string{"dtype": "bf16"}}
	a.Add(c, append(append(samples("decode_tok_s", "tok/s", seq(8, 100, 1)), samples("peak_rss_bytes", "B", seq(8, 1e8, 1))...),
		samples("bytes_per_step", "B", seq(8, 1, 0))...))
	c.Params = map[string]string{"dtype": "f32"}
	b.Add(c, append(samples("decode_tok_s", "tok/s", seq(8, 200, 1)), samples("peak_rss_bytes", "B", seq(8, 2e8, 1))...))
	// Pooled: a second run of the candidate adds samples to the same key.
	b.Add(c, samples("decode_tok_s", "tok/s", seq(2, 200, 1)))
	a.Add(results.Case{Key: "only-a", Status: results.CaseDone}, nil)
	cmp := Compare(a, b, Options{})
	if len(cmp.Rows) != 2 || cmp.Metrics[0] != "decode_tok_s" || cmp.Metrics[1] != "peak_rss_bytes" {
		t.Fatalf("rows %d, metrics %v: bytes_per_step is informational and must be skipped", len(cmp.Rows), cmp.Metrics)
	}
	if r := cmp.Rows[0]; r.Verdict != VerdictFaster || r.B.N != 10 || math.Abs(r.Delta-95.65) > 0.01 {
		t.Errorf("decode row: %+v", r)
	}
	if r := cmp.Rows[1]; r.Verdict != VerdictWorse {
		t.Errorf("peak RSS doubled: verdict %q, want worse", r.Verdict)
	}
	if len(cmp.OnlyA) != 1 || len(cmp.OnlyB) != 0 {
		t.Errorf("one-sided cases: %d, %d", len(cmp.OnlyA), len(cmp.OnlyB))
	}
	if !strings.Contains(strings.Join(table.NoteTexts(cmp.Notes), "\n"), "dtype bf16 vs f32") {
		t.Errorf("notes should say the dtype differs: %q", cmp.Notes)
	}
	if tabs := cmp.Tables(); len(tabs) != 3 || !strings.HasPrefix(tabs[1].Title, "peak_rss_bytes (MiB") {
		t.Errorf("tables: %d", len(tabs))
	}

	// Truncated against whole model, and a side pooling both.
	whole := c
	whole.LayersRun, whole.LayersTotal = 6, 6
	b2 := NewSide("B")
	b2.Add(whole, samples("decode_tok_s", "tok/s", seq(8, 50, 1)))
	if r := Compare(a, b2, Options{}).Rows[0]; r.Verdict != VerdictNotComparable || !strings.Contains(r.Reason, "layers 2/6 in A, all layers in B") {
		t.Errorf("truncated vs whole: %q %q", r.Verdict, r.Reason)
	}
	// Both truncated, to different layers: not called whole.
	other := c
	other.LayersRun, other.LayersTotal = 1, 12
	b4 := NewSide("B")
	b4.Add(other, samples("decode_tok_s", "tok/s", seq(8, 50, 1)))
	if r := Compare(a, b4, Options{}).Rows[0]; r.Verdict != VerdictNotComparable || r.Reason != "layers 2/6 in A, layers 1/12 in B: figures of models truncated to different layers are not comparable" {
		t.Errorf("truncated vs truncated: %q %q", r.Verdict, r.Reason)
	}
	// A whole model counted (6/6) and one whose engine did not count its
	// layers (a peer) are the same: comparable.
	peer := c
	peer.LayersRun, peer.LayersTotal = 0, 0
	b3 := NewSide("peer")
	b3.Add(peer, samples("decode_tok_s", "tok/s", seq(8, 50, 1)))
	if r := Compare(b2, b3, Options{}).Rows[0]; r.Verdict == VerdictNotComparable {
		t.Errorf("whole model against an uncounted one: %q", r.Reason)
	}
	b2.Add(c, samples("decode_tok_s", "tok/s", seq(8, 50, 1)))
	if r := Compare(a, b2, Options{}).Rows[0]; r.Verdict != VerdictNotComparable || !strings.Contains(r.Reason, "B pools runs with different layer counts") {
		t.Errorf("mixed layers: %q %q", r.Verdict, r.Reason)
	}

	// Identical samples: p = 1, "~".
	if r := Compare(a, a, Options{}).Rows[0]; r.Verdict != VerdictSame || r.Delta != 0 {
		t.Errorf("A/A: %q %v", r.Verdict, r.Delta)
	}
}

// pooled pools runs into one side of a comparison.
func pooled(runs ...Run) *Side {
	s := NewSide("S")
	for _, r := range runs {
		s.AddRun(r)
	}
	return s
}

// checkNote compares a with b, and gates b on a, and checks the note
// holding marker: compare's is want alone (none where want is ""), gate's
// holds it.
func checkNote(t *testing.T, name string, a, b *Side, marker, want string) {
	t.Helper()
	c := Compare(a, b, Options{})
	var got []string
	for _, n := range table.NoteTexts(c.Notes) {
		if strings.Contains(n, marker) {
			got = append(got, n)
		}
	}
	var wants []string
	if want != "" {
		wants = []string{want}
	}
	if !slices.Equal(got, wants) || c.NotComparable != "" {
		t.Errorf("%s: notes %q (not comparable %q), want %q", name, got, c.NotComparable, wants)
	}
	g := Gate(a, b, GateOptions{})
	if n := strings.Join(table.NoteTexts(g.Notes), "\n"); want != "" && !strings.Contains(n, want) {
		t.Errorf("%s: gate notes %q, want %q", name, n, want)
	}
}

func TestCompareRunChecks(t *testing.T) {
	for _, tc := range []struct {
		a, b   *Side
		reason string
		note   string
	}{
		{pooled(Run{ID: 1}), pooled(Run{ID: 2, Emulated: true}), "emulated", ""},
		{pooled(Run{ID: 1}, Run{ID: 3, Emulated: true}), pooled(Run{ID: 2}), "pools emulated and real", ""},
		{pooled(Run{ID: 1, TimingMode: "profile"}), pooled(Run{ID: 2}), "profile timings", ""},
		{pooled(Run{ID: 1, Backend: "cpu"}), pooled(Run{ID: 2, Backend: "metal"}), "", "different backends (cpu, metal)"},
		{pooled(Run{ID: 1, Machine: "M2"}), pooled(Run{ID: 2, Machine: "M3"}), "", "different machines"},
	} {
		c := Compare(tc.a, tc.b, Options{})
		if tc.reason != "" && !strings.Contains(c.NotComparable, tc.reason) || tc.reason == "" && c.NotComparable != "" {
			t.Errorf("not comparable %q, want %q", c.NotComparable, tc.reason)
		}
		if tc.note != "" && !strings.Contains(strings.Join(table.NoteTexts(c.Notes), "\n"), tc.note) {
			t.Errorf("notes %q, want %q", c.Notes, tc.note)
		}
	}
}

// TestCompareIdentity: a side that pools runs of different models, weight
// formats or seeds under one key is never compared; sides that differ from each
// other are a note in a comparison and not comparable in a gate.
func TestCompareIdentity(t *testing.T) {
	caseOf := func(model, dtype string) results.Case {
		return results.Case{Key: "model/bench/batch=1", Name: "bench/batch=1", Kind: "model", Status: results.CaseDone,
			Params: map[string]string{"batch": "1", "model": model, "dtype": dtype}}
	}
	seeded := func(seed string) results.Case {
		c := caseOf("qwen3-moe-mini", "bf16")
		c.Params["seed"] = seed
		return c
	}
	sideOf := func(label string, cases ...results.Case) *Side {
		s := NewSide(label)
		for i, c := range cases {
			s.AddRun(Run{ID: int64(i + 1)})
			c.RunID = int64(i + 1)
			s.Add(c, samples("decode_tok_s", "tok/s", seq(8, 100*float64(i+1), 1)))
		}
		return s
	}
	qwen, gpt2 := caseOf("qwen3-moe-mini", "bf16"), caseOf("gpt2", "bf16")
	q4 := caseOf("qwen3-moe-mini", "q4")
	for _, tc := range []struct {
		name    string
		a, b    *Side
		compare string // the compare row's reason; "" comparable
		gate    string // the gate check's reason; "" judged
		note    string
	}{
		{"same", sideOf("A", qwen), sideOf("B", qwen), "", "", ""},
		{"pooled models", sideOf("A", qwen, gpt2), sideOf("B", qwen), "A pools runs of different model (qwen3-moe-mini, gpt2)", "A pools runs of different model", ""},
		{"pooled dtypes", sideOf("A", qwen), sideOf("B", qwen, q4), "B pools runs of different dtype (bf16, q4)", "B pools runs of different dtype", ""},
		{"dtype spelled apart", sideOf("A", qwen), sideOf("B", caseOf("qwen3-moe-mini", "BF16")), "", "", ""},
		{"other model", sideOf("A", qwen), sideOf("B", gpt2), "", "model qwen3-moe-mini in A, gpt2 in B", "model qwen3-moe-mini vs gpt2"},
		{"other dtype", sideOf("A", qwen), sideOf("B", q4), "", "dtype bf16 in A, q4 in B", "dtype bf16 vs q4"},
		// the seed draws the weights and prompts: another seed is other work
		{"pooled seeds", sideOf("A", seeded("1"), seeded("7")), sideOf("B", seeded("1")), "A pools runs of different seed (1, 7)", "A pools runs of different seed", ""},
		{"other seed", sideOf("A", seeded("1")), sideOf("B", seeded("7")), "", "seed 1 in A, 7 in B", "seed 1 vs 7"},
		{"seed recorded on one side", sideOf("A", qwen), sideOf("B", seeded("1")), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(tc.a, tc.b, Options{})
			if len(c.Rows) != 1 {
				t.Fatalf("rows %d", len(c.Rows))
			}
			if r := c.Rows[0]; tc.compare == "" && r.Verdict == VerdictNotComparable || tc.compare != "" && !strings.Contains(r.Reason, tc.compare) {
				t.Errorf("compare: %q %q, want %q", r.Verdict, r.Reason, tc.compare)
			}
			if tc.note != "" && !strings.Contains(strings.Join(table.NoteTexts(c.Notes), "\n"), tc.note) {
				t.Errorf("notes %q, want %q", c.Notes, tc.note)
			}
			res := Gate(tc.a, tc.b, GateOptions{})
			if len(res.Checks) == 0 {
				t.Fatal("no checks")
			}
			ch := res.Checks[0]
			if tc.gate == "" && ch.Outcome == NotComparable || tc.gate != "" && (ch.Outcome != NotComparable || !strings.Contains(ch.Reason, tc.gate)) {
				t.Errorf("gate: %q %q, want %q", ch.Outcome, ch.Reason, tc.gate)
			}
			if tc.gate != "" && res.Status == ExitRegression {
				t.Errorf("a gate of different models failed: %s", res.Headline)
			}
		})
	}
}

// Values no metric can take (a store written before the checks on storing)
// are left out of the statistics and said, never a verdict.
func TestCompareLeavesOutUnusableValues(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name      string
		a, b      []float64
		verdict   string
		an, bn    int
		reasonHas string
	}{
		{"every A value infinite", []float64{inf, inf, inf, inf, inf, inf, inf}, []float64{6.857},
			VerdictNoData, 0, 1, "A: 7 of 7 decode_tok_s samples left out"},
		{"a NaN among finite values", append(seq(7, 100, 1), nan), seq(7, 100, 1),
			VerdictSame, 7, 7, "A: 1 of 8 decode_tok_s samples left out"},
		{"negative throughput", seq(8, 100, 1), append(seq(8, 200, 1), -5),
			VerdictFaster, 8, 8, "B: 1 of 9 decode_tok_s samples left out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := NewSide("A"), NewSide("B")
			c := results.Case{Key: "k", Name: "bench/batch=1", Kind: "model", Status: results.CaseDone}
			a.Add(c, samples("decode_tok_s", "tok/s", tc.a))
			b.Add(c, samples("decode_tok_s", "tok/s", tc.b))
			r := Compare(a, b, Options{}).Rows[0]
			if r.Verdict != tc.verdict || r.A.N != tc.an || r.B.N != tc.bn || !strings.Contains(r.Reason, tc.reasonHas) {
				t.Errorf("verdict %q, n %d+%d, reason %q; want %q, %d+%d, %q", r.Verdict, r.A.N, r.B.N, r.Reason, tc.verdict, tc.an, tc.bn, tc.reasonHas)
			}
			if r.Verdict == VerdictNoData && r.Significant {
				t.Errorf("a row without data is significant: %+v", r)
			}
			for _, s := range []Stat{r.A, r.B} {
				if s.N > 0 && (math.IsNaN(s.Center) || math.IsInf(s.Center, 0)) {
					t.Errorf("median %v of finite values", s.Center)
				}
			}
		})
	}
}

// Tied samples can give the U test's approximation a p-value above 1; a
// p-value is a probability, in [0, 1], wherever it is reported.
func TestPValuesAreProbabilities(t *testing.T) {
	for _, tc := range []struct{ a, b []float64 }{
		{[]float64{1}, []float64{1, 2}},
		{[]float64{1, 1, 2}, []float64{1, 2}},
		{[]float64{1, 2, 3}, []float64{1, 2, 2, 3, 3}},
		{seq(8, 100, 1), seq(8, 200, 1)},
	} {
		a, b := NewSide("A"), NewSide("B")
		c := results.Case{Key: "k", Name: "bench/batch=1", Kind: "model", Status: results.CaseDone}
		a.Add(c, samples("decode_tok_s", "tok/s", tc.a))
		b.Add(c, samples("decode_tok_s", "tok/s", tc.b))
		if p := Compare(a, b, Options{}).Rows[0].P; !(p >= 0 && p <= 1) {
			t.Errorf("compare %v against %v: p = %v", tc.a, tc.b, p)
		}
		if p := uTestP(tc.a, tc.b, 0.05); !(p >= 0 && p <= 1) {
			t.Errorf("uTestP(%v, %v) = %v", tc.a, tc.b, p)
		}
	}
	if p := probability(math.NaN()); !math.IsNaN(p) {
		t.Errorf("probability(NaN) = %v, want NaN (no test)", p)
	}
}

// A differing recorded parameter is noted only when it is a setting: what
// a run found (a tune candidate's calibrated calls per sample, its status,
// role and error) differs between runs of one setup.
func TestParamDiffLeavesOutFound(t *testing.T) {
	tuneCase := map[string]string{"op": "moe", "dtype": "f32", "config": "loop", "tune.strategy": "loop",
		"tune.status": "timed", "tune.role": "winner", "tune.max_abs_err": "1.19e-07", "tune.iters": "214"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(tuneCase)
		m[k] = v
		return m
	}
	for _, c := range []struct {
		name string
		b    map[string]string
		want string
	}{
		{"same", tuneCase, ""},
		{"calibration", with("tune.iters", "188"), ""},
		{"status", with("tune.status", "pruned"), ""},
		{"role", with("tune.role", "candidate"), ""},
		{"error", with("tune.max_abs_err", "2.4e-07"), ""},
		{"setting", with("tune.strategy", "chunked"), "tune.strategy loop vs chunked"},
		{"dtype", with("dtype", "bf16"), "dtype f32 vs bf16"},
	} {
		if got := paramDiff(results.CaseKernel, tuneCase, c.b, nil, nil); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// Through Compare: two tune runs of one candidate, calibrated apart.
	a, b := NewSide("A"), NewSide("B")
	rc := results.Case{Key: "tune/moe/f32/x/loop", Name: "moe loop", Kind: "kernel", Status: results.CaseDone, Params: tuneCase}
	a.Add(rc, samples("us_per_call", "us", seq(8, 10, 0.1)))
	rc.Params = with("tune.iters", "188")
	b.Add(rc, samples("us_per_call", "us", seq(8, 10, 0.1)))
	if notes := strings.Join(table.NoteTexts(Compare(a, b, Options{}).Notes), "\n"); strings.Contains(notes, "recorded parameters differ") {
		t.Errorf("notes: %s", notes)
	}
}

// A metric only one side records (another engine's figures hold few of
// mtlbench's) is listed once, not shown as a table of "no data" rows; one
// that a failed run left empty keeps its table, which says why. Cases on
// one side only that share a name are told apart by their keys.
func TestCompareOneSidedMetrics(t *testing.T) {
	peer, mine := NewSide("peer"), NewSide("mine")
	shared := results.Case{Key: "bench/batch=1", Name: "bench/batch=1", Kind: "bench", Status: results.CaseDone}
	peer.Add(shared, samples("decode_tok_s", "tok/s", seq(5, 100, 1)))
	mine.Add(shared, append(append(samples("decode_tok_s", "tok/s", seq(5, 90, 1)),
		samples("ttft_ms", "ms", seq(5, 10, 1))...), samples("step_ms", "ms", seq(5, 5, 1))...))
	failed := results.Case{Key: "bench/batch=2", Name: "bench/batch=2", Kind: "bench", Status: results.CaseFailed, Error: "out of memory"}
	peer.Add(failed, nil)
	mine.Add(results.Case{Key: "bench/batch=2", Name: "bench/batch=2", Kind: "bench", Status: results.CaseDone},
		samples("step_ms", "ms", seq(5, 7, 1)))
	for _, k := range []string{"bench/batch=4/layers=2", "bench/batch=4/layers=4"} {
		mine.Add(results.Case{Key: k, Name: "bench/batch=4", Kind: "bench", Status: results.CaseDone}, samples("decode_tok_s", "tok/s", seq(5, 50, 1)))
	}
	cmp := Compare(peer, mine, Options{})
	var titles []string
	var text strings.Builder
	for _, tab := range cmp.Tables() {
		titles = append(titles, strings.Fields(tab.Title)[0])
		if err := tab.Render(&text, table.FormatCSV); err != nil {
			t.Fatal(err)
		}
		text.WriteString(strings.Join(table.NoteTexts(tab.Notes), "\n") + "\n")
	}
	if want := []string{"decode_tok_s", "step_ms", "metrics", "cases"}; !slices.Equal(titles, want) {
		t.Fatalf("tables %v, want %v:\n%s", titles, want, text.String())
	}
	for _, want := range []string{"ttft_ms,B", "bench/batch=4,B,bench/batch=4/layers=2", "bench/batch=4,B,bench/batch=4/layers=4", "out of memory"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	var page strings.Builder
	if err := cmp.WriteHTML(&page, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"B only: ttft_ms", "bench/batch=4 (bench/batch=4/layers=2)"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("no %q in the page", want)
		}
	}
	if strings.Contains(page.String(), "<h2>ttft_ms") {
		t.Error("the page shows a table of a metric only one side records")
	}
}

// A median of too few values for a 95% interval shows its count, as the
// other tables do (stats.CI), not an interval of ± infinity.
func TestFmtStatFewValues(t *testing.T) {
	for _, c := range []struct {
		values []float64
		want   string
	}{
		{seq(8, 100, 1), "103.5 ± 3%"},
		{seq(2, 100, 1), "100.5 (n=2)"},
		{[]float64{7}, "7.000 (n=1)"},
		{nil, "-"},
	} {
		if got := fmtStat(newStat(c.values), 1); got != c.want {
			t.Errorf("%v: %q, want %q", c.values, got, c.want)
		}
	}
}

// A side names its runs that did not complete (interrupted, failed, still
// running): their cases hold only what they stored, which compare and gate
// use as it stands, and show marks them unfinished.
func TestSideNamesUnfinishedRuns(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		status string
		want   string
	}{
		{results.RunComplete, ""},
		{results.RunInterrupted, "run 2 interrupted"},
		{results.RunFailed, "run 3 failed"},
		{results.RunRunning, "run 4 running"},
	} {
		id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Status: tc.status})
		if err != nil {
			t.Fatal(err)
		}
		side, err := Load(db, "A", strconv.FormatInt(id, 10), 0)
		if err != nil {
			t.Fatal(err)
		}
		got := side.Describe()
		if tc.want == "" && strings.Contains(got, ";") || !strings.Contains(got, tc.want) {
			t.Errorf("a %s run: %q, want %q", tc.status, got, tc.want)
		}
	}
}

// A side pooling runs of several backends or commits names them all: it
// named the first run's alone, so a pool of a cpu run and an emulated one
// read "(runs 1,2, cpu)" and one of two commits gave the first commit as
// the side's.
func TestSideNamesEveryBackendAndCommit(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, r := range []results.Run{
		{Backend: "cpu", GitCommit: "aaaaaaaaaaaa1"},           // 1
		{Backend: "cpu", GitCommit: "aaaaaaaaaaaa2"},           // 2: the same 10-character prefix
		{Backend: "metal-emu", Emulated: true, GitCommit: "b"}, // 3
		{Backend: "cpu"},                       // 4: no commit
		{Backend: "metal-emu", Emulated: true}, // 5
	} {
		r.SuiteName, r.Status = "s", results.RunComplete
		if _, err := db.CreateRun(&r); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ refs, want string }{
		{"1", "A (run 1, cpu, commit aaaaaaaaaa)"},
		{"1,2", "A (runs 1,2, cpu, commit aaaaaaaaaa)"},
		{"3", "A (run 3, metal-emu, emulated, commit b)"},
		{"3,5", "A (runs 3,5, metal-emu, emulated, commit b)"},
		{"1,3", "A (runs 1,3, backends cpu, metal-emu, run 3 emulated, commits aaaaaaaaaa, b)"},
		{"4,1", "A (runs 4,1, cpu, commit aaaaaaaaaa)"},
		{"4,3,5", "A (runs 4,3,5, backends cpu, metal-emu, runs 3,5 emulated, commit b)"},
	} {
		side, err := Load(db, "A", tc.refs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := side.Describe(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.refs, got, tc.want)
		}
	}
}

// Where matched cases differ in a parameter (run --set keeps the key),
// compare's and gate's data carry each side's value in a column of its
// own, in every row, and no single column claims one value for both;
// parameters the sides share stay one column. A parameter one side set
// with --set and the other's case does not record (it ran the default)
// differs too, in the data and in the tables' note.
func TestDataCarriesBothSidesParams(t *testing.T) {
	params := func(kv ...string) map[string]string {
		m := map[string]string{"batch": "4", "n": "64", "dtype": "bf16"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	mk := func(label string, pa, own, set map[string]string) *Side {
		s := NewSide(label)
		s.AddRun(Run{ID: 1, Backend: "cpu", Overrides: set})
		s.Add(results.Case{Key: "model/decode/batch=4", Name: "decode/batch=4", Kind: "model", Status: results.CaseDone, Params: pa},
			samples("decode_tok_s", "tok/s", seq(8, 100, 1)))
		if own != nil {
			s.Add(results.Case{Key: "model/only/" + label, Name: "only-" + label, Kind: "model", Status: results.CaseDone, Params: own},
				samples("decode_tok_s", "tok/s", seq(8, 100, 1)))
		}
		return s
	}
	cmp := func(a, b *Side) (*table.Data, []string) {
		c := Compare(a, b, Options{})
		return c.Data(), table.NoteTexts(c.Notes)
	}
	gate := func(a, b *Side) (*table.Data, []string) {
		r := Gate(a, b, GateOptions{})
		return r.Data(), table.NoteTexts(r.Notes)
	}
	type want map[string]any // column -> value; nil: no value there
	const none = "none"      // a column there, empty
	for _, tc := range []struct {
		name  string
		a, b  map[string]string
		setB  map[string]string // B's run --set
		data  func(a, b *Side) (*table.Data, []string)
		want  want
		onlyB want // the row of B's own case (params("fusion", "on"))
		note  string
	}{
		{"compare, fusion differs", params("fusion", "on"), params("fusion", "off"), nil, cmp,
			want{"a_fusion": "on", "b_fusion": "off", "fusion": nil, "batch": int64(4), "param_n": int64(64)},
			want{"a_fusion": none, "b_fusion": "on", "fusion": nil}, "fusion on vs off"},
		{"compare, a matmul's n differs", params(), params("n", "128"), nil, cmp,
			want{"a_param_n": int64(64), "b_param_n": int64(128), "param_n": nil, "a_n": int64(8)},
			want{"a_param_n": none, "b_param_n": int64(64)}, "n 64 vs 128"},
		{"compare, B set fusion, A ran the default", params(), params("fusion", "off"), map[string]string{"fusion": "off"}, cmp,
			want{"a_fusion": none, "b_fusion": "off", "fusion": nil, "batch": int64(4)},
			want{"a_fusion": none, "b_fusion": "on", "fusion": nil}, "fusion (default) vs off"},
		{"compare, B records what A does not, unset", params(), params("tuned.moe", "loop"), nil, cmp,
			want{"tuned.moe": "loop", "a_tuned.moe": nil}, want{}, ""},
		{"compare, same", params("fusion", "on"), params("fusion", "on"), nil, cmp,
			want{"fusion": "on", "a_fusion": nil, "b_fusion": nil},
			want{"fusion": "on"}, ""},
		{"gate, fusion differs", params("fusion", "on"), params("fusion", "off"), nil, gate,
			want{"baseline_fusion": "on", "candidate_fusion": "off", "fusion": nil, "batch": int64(4)}, nil, "fusion on vs off"},
		// A parameter whose side column would be one of gate's own is named
		// apart from it.
		{"gate, a parameter named as a column", params("center", "1"), params("center", "2"), nil, gate,
			want{"baseline_param_center": int64(1), "candidate_param_center": int64(2), "center": nil}, nil, "center 1 vs 2"},
	} {
		a, b := mk("A", tc.a, nil, nil), mk("B", tc.b, params("fusion", "on"), tc.setB)
		d, notes := tc.data(a, b)
		if len(d.Rows) == 0 {
			t.Fatalf("%s: no rows", tc.name)
		}
		check := func(row []any, w want, which string) {
			for col, v := range w {
				i := slices.Index(d.Columns, col)
				var got any // a row added before a column was has no cell there
				if i >= 0 && i < len(row) {
					got = row[i]
				}
				switch {
				case v == none && (i < 0 || got != nil):
					t.Errorf("%s, %s: %s = %v (column at %d), want an empty column (columns %v)", tc.name, which, col, got, i, d.Columns)
				case v == none:
				case v == nil && got != nil:
					t.Errorf("%s, %s: %s = %v, want none (columns %v)", tc.name, which, col, got, d.Columns)
				case v != nil && i < 0:
					t.Errorf("%s, %s: no column %s (columns %v)", tc.name, which, col, d.Columns)
				case v != nil && got != v:
					t.Errorf("%s, %s: %s = %#v, want %#v", tc.name, which, col, got, v)
				}
			}
		}
		check(d.Rows[0], tc.want, "matched row")
		if tc.onlyB != nil {
			last := d.Rows[len(d.Rows)-1]
			if i := slices.Index(d.Columns, "only_in"); i < 0 || last[i] != "B" {
				t.Fatalf("%s: last row is not B's own case: %v", tc.name, last)
			}
			check(last, tc.onlyB, "B's own case")
		}
		note := strings.Join(notes, "\n")
		if tc.note == "" && strings.Contains(note, "recorded parameters differ") ||
			tc.note != "" && !strings.Contains(note, "recorded parameters differ ("+tc.note+")") {
			t.Errorf("%s: notes %q, want the difference %q", tc.name, note, tc.note)
		}
	}
}

// The note on parameters that differ leaves out those that differ only in
// how the same work was chosen: a tuned config's origin, and MoE dispatch
// one side left to its default where what ran in its place (tuned.moe)
// is the other side's; what ran differently stays in it.
func TestParamDiffLeavesOutTheSameWork(t *testing.T) {
	set := map[string]bool{"moe_strategy": true, "moe_chunk": true}
	for _, c := range []struct {
		name       string
		a, b       map[string]string
		setA, setB map[string]bool
		want       string
	}{
		{"--set moe_strategy=grouped, the default grouped",
			map[string]string{"tuned.moe": "grouped (default)"},
			map[string]string{"moe_strategy": "grouped", "tuned.moe": "grouped (explicit)"}, nil, set, ""},
		{"the same in the other order",
			map[string]string{"moe_strategy": "grouped", "tuned.moe": "grouped (explicit)"},
			map[string]string{"tuned.moe": "grouped (default)"}, set, nil, ""},
		{"--set moe_chunk=1, the default grouped",
			map[string]string{"tuned.moe": "grouped (default)"},
			map[string]string{"moe_chunk": "1", "tuned.moe": "chunked/1 (explicit)"}, nil, set,
			"moe_chunk (default) vs 1, tuned.moe grouped (default) vs chunked/1 (explicit)"},
		{"a tuned config from another layer",
			map[string]string{"tuned.moe": "chunked/16 (user cache)"}, map[string]string{"tuned.moe": "chunked/16 (shipped)"}, nil, nil, ""},
		{"tuned matmuls from other layers",
			map[string]string{"tuned.matmul": "m=8,n=64,k=64: mv/4r (shipped); others even/2t (default)"},
			map[string]string{"tuned.matmul": "m=8,n=64,k=64: mv/4r (user cache); others even/2t (default)"}, nil, nil, ""},
		{"another tuned config",
			map[string]string{"tuned.moe": "chunked/16 (user cache)"}, map[string]string{"tuned.moe": "chunked/32 (user cache)"}, nil, nil,
			"tuned.moe chunked/16 (user cache) vs chunked/32 (user cache)"},
		{"the default's choice not recorded",
			map[string]string{}, map[string]string{"moe_strategy": "grouped", "tuned.moe": "grouped (explicit)"}, nil, set,
			"moe_strategy (default) vs grouped"},
	} {
		if got := paramDiff(results.CaseModel, c.a, c.b, c.setA, c.setB); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Runs whose backends ran with different notes (a switch such as graphs
// off) are a note, not a verdict; runs stored before the notes were
// recorded (none) say nothing.
func TestCompareNotesBackendNotes(t *testing.T) {
	const on, off = "sm_90, graphs on", "sm_90, graphs off"
	if r := RunOf(&results.Run{ID: 1, BackendNotes: on}); r.BackendNotes != on {
		t.Errorf("a stored run's backend notes read as %q, want %q", r.BackendNotes, on)
	}
	for _, tc := range []struct {
		name string
		a, b *Side
		want string
	}{
		{"differ", pooled(Run{ID: 1, BackendNotes: on}), pooled(Run{ID: 2, BackendNotes: off}),
			"the runs' backends ran with different notes (run 1: sm_90, graphs on; run 2: sm_90, graphs off): the change may come from a backend switch, not the build"},
		{"a side pools both", pooled(Run{ID: 1, BackendNotes: on}, Run{ID: 3, BackendNotes: off}), pooled(Run{ID: 2, BackendNotes: on}),
			"the runs' backends ran with different notes (runs 1,2: sm_90, graphs on; run 3: sm_90, graphs off): the change may come from a backend switch, not the build"},
		{"same", pooled(Run{ID: 1, BackendNotes: on}), pooled(Run{ID: 2, BackendNotes: on}), ""},
		{"one stored before notes", pooled(Run{ID: 1}), pooled(Run{ID: 2, BackendNotes: off}), ""},
		{"none", pooled(Run{ID: 1}), pooled(Run{ID: 2}), ""},
	} {
		checkNote(t, tc.name, tc.a, tc.b, "backends ran with different notes", tc.want)
	}
}

// Runs made with different --threads pair their cases, whose keys do not
// carry the run's count: a note says so, in compare and gate alike; runs
// stored before the count was recorded say nothing.
func TestCompareNotesThreads(t *testing.T) {
	if r := RunOf(&results.Run{ID: 1, Threads: "1"}); r.Threads != "1" {
		t.Errorf("a stored run's threads read as %q, want %q", r.Threads, "1")
	}
	for _, tc := range []struct {
		name string
		a, b *Side
		want string
	}{
		{"differ", pooled(Run{ID: 1, Threads: "1"}), pooled(Run{ID: 2, Threads: "default"}),
			"the runs were made with different --threads (run 1: 1; run 2: default): the change may come from the thread count, not the build"},
		{"a side pools both", pooled(Run{ID: 1, Threads: "4"}, Run{ID: 3, Threads: "2"}), pooled(Run{ID: 2, Threads: "4"}),
			"the runs were made with different --threads (runs 1,2: 4; run 3: 2): the change may come from the thread count, not the build"},
		{"same", pooled(Run{ID: 1, Threads: "default"}), pooled(Run{ID: 2, Threads: "default"}), ""},
		{"one stored before threads", pooled(Run{ID: 1}), pooled(Run{ID: 2, Threads: "1"}), ""},
		{"none", pooled(Run{ID: 1}), pooled(Run{ID: 2}), ""},
	} {
		checkNote(t, tc.name, tc.a, tc.b, "different --threads", tc.want)
	}
}

// The note on parameters that differ leaves out values that key alike
// (suites.Key): a --set at the default the other side left out, and two
// spellings of one value; another value stays in it (docs/suites.md, "A
// default written is a default left out").
func TestParamDiffLeavesOutDefaults(t *testing.T) {
	fusion := map[string]bool{"fusion": true}
	for _, c := range []struct {
		name, kind string
		a, b       map[string]string
		setA, setB map[string]bool
		want       string
	}{
		{"--set fusion=on, the default", results.CaseModel, map[string]string{"fusion": "on"}, map[string]string{}, fusion, nil, ""},
		{"the same in the other order", results.CaseModel, map[string]string{}, map[string]string{"fusion": "on"}, nil, fusion, ""},
		{"--set fusion=off", results.CaseModel, map[string]string{"fusion": "off"}, map[string]string{}, fusion, nil, "fusion off vs (default)"},
		{"range_ratio 0.0 and 0", results.CaseModel, map[string]string{"range_ratio": "0.0"}, map[string]string{"range_ratio": "0"}, nil, nil, ""},
		{"--set requests at the batch", results.CaseModel, map[string]string{"batch": "4", "requests": "4"}, map[string]string{"batch": "4"},
			map[string]bool{"requests": true}, nil, ""},
		{"--set requests past the batch", results.CaseModel, map[string]string{"batch": "4", "requests": "8"}, map[string]string{"batch": "4"},
			map[string]bool{"requests": true}, nil, "requests 8 vs (default)"},
		{"--set dtype=bf16 on matmul, its default", results.CaseKernel, map[string]string{"op": "matmul", "dtype": "bf16"}, map[string]string{"op": "matmul"},
			map[string]bool{"dtype": true}, nil, ""},
		{"--set dtype=f32 on matmul", results.CaseKernel, map[string]string{"op": "matmul", "dtype": "f32"}, map[string]string{"op": "matmul"},
			map[string]bool{"dtype": true}, nil, "dtype f32 vs (default)"},
	} {
		if got := paramDiff(c.kind, c.a, c.b, c.setA, c.setB); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
