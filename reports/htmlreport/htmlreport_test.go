package htmlreport

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/reports/charts"
	"github.com/mtlbench/mtlbench/reports/history"
	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/results"
)

// recordRun stores a throughput run of the first 4 of 48 layers of
// Qwen3-30B-A3B, made up but of the shape bench.Run records.
func recordRun(t *testing.T, db *results.DB, tag string, emulated bool) int64 {
	t.Helper()
	r := &results.Run{SuiteName: "qwen3-moe", Tag: tag, Backend: "metal", TimingMode: results.TimingThroughput,
		GitCommit: "abcdef0123456789", Emulated: emulated,
		Machine: results.Machine{Hostname: "mac", OS: "darwin", Arch: "arm64", CPUModel: "Apple M3 Ultra", GPUName: "Apple M3 Ultra", CPUCores: 24}}
	id, err := db.CreateRun(r)
	if err != nil {
		t.Fatal(err)
	}
	var cases []results.Case
	for _, b := range []int{1, 4, 16} {
		cases = append(cases, results.Case{Name: "batch-scaling/batch=" + strconv.Itoa(b), Kind: results.CaseModel,
			Params: map[string]string{"model": "qwen3-30b-a3b", "batch": strconv.Itoa(b)}})
	}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var s []results.Sample
		for rep := range 7 {
			v := float64(60+20*i) * (1 + 0.01*float64(rep))
			s = append(s, results.Sample{Rep: rep, Metric: "decode_tok_s", Value: v, Unit: "tok/s"},
				results.Sample{Rep: rep, Metric: "roofline_frac", Value: 0.4 + 0.1*float64(i), Unit: "ratio"})
		}
		if err := db.FinishCase(c.ID, s, nil, 4, 48); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(id, results.RunComplete); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	db, err := results.Open(filepath.Join(dir, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := recordRun(t, db, "<b>base</b>", false)
	b := recordRun(t, db, "new", true)
	// A failed case says why, as show does.
	failed := []results.Case{{Name: "oom/batch=64", Kind: results.CaseModel, Params: map[string]string{"batch": "64"}}}
	if err := db.AddCases(b, failed); err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(failed[0].ID, "KV cache of 9 GiB does not fit"); err != nil {
		t.Fatal(err)
	}
	hist := []history.Point{
		{Source: "d.txt", Date: "2024-12-11", Hardware: "M-series Mac", Model: "Qwen3-30B-A3B", Series: "Cached offsets", Metric: "tok_s", Value: 11.6, Unit: "tok/s"},
		{Source: "d.txt", Date: "unknown", Hardware: "Apple M3 Ultra", Model: "Qwen3-30B-A3B", Series: "Metal V1.5", Batch: 1, Metric: "tok_s", Value: 6.7, Unit: "tok/s"},
	}
	out := filepath.Join(dir, "out")
	paths, err := WriteFiles(out, db, []int64{a, b}, Options{History: hist, Now: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 || paths[0] != filepath.Join(out, IndexName) {
		t.Fatalf("paths = %v, want index.html first", paths)
	}
	page, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{
		"<svg", "run " + strconv.FormatInt(a, 10), "run " + strconv.FormatInt(b, 10),
		"&lt;b&gt;base&lt;/b&gt;", // a tag is text, never markup
		"4/48 layers", "emulated", "Apple M3 Ultra", "abcdef0123456789", "throughput",
		"Qwen3-30B-A3B", "Cached offsets", "Achieved fraction", "2026-01-02 03:04 UTC",
		"±", // CIs of 7 repetitions
		"oom/batch=64 failed: KV cache of 9 GiB does not fit",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(html, "<b>base</b>") {
		t.Error("run tag inserted as markup")
	}
	if strings.Contains(html, "<?xml") {
		t.Error("inline SVG keeps its XML prolog")
	}
	for _, name := range []string{"throughput-vs-batch", "roofline", "history"} {
		for _, ext := range []string{".png", ".svg"} {
			if _, err := os.Stat(filepath.Join(out, name+ext)); err != nil {
				t.Error(err)
			}
		}
	}
	// Written again, the folder keeps no chart of an earlier report that
	// this one does not make (here a serving chart, of runs with no serving
	// case); other files stay.
	os.WriteFile(filepath.Join(out, "mine.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(out, "serving-throughput.png"), []byte("old"), 0o644)
	if _, err := WriteFiles(out, db, []int64{a}, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"serving-throughput.png": false, "roofline.png": true, "mine.txt": true} {
		if _, err := os.Stat(filepath.Join(out, name)); (err == nil) != want {
			t.Errorf("%s after a second report: present %v, want %v", name, err == nil, want)
		}
	}
	if err := Write(out, db, nil, Options{}); err == nil {
		t.Error("Write with no runs succeeded")
	}
}

// TestWriteSaysWhatIsNotDrawn reports a run of one batch size of a model the
// history does not document: the page says which charts it has no data for
// and why, and that the history has no figures of the run's model, naming
// the models it has, never a heading with no model.
func TestWriteSaysWhatIsNotDrawn(t *testing.T) {
	dir := t.TempDir()
	db, err := results.Open(filepath.Join(dir, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, err := db.CreateRun(&results.Run{SuiteName: "bench", Backend: "cpu", TimingMode: results.TimingThroughput})
	if err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{{Name: "bench/batch=1", Kind: results.CaseModel, Params: map[string]string{"model": "qwen3-moe-mini", "batch": "1"}}}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishCase(cases[0].ID, []results.Sample{{Metric: "decode_tok_s", Value: 7, Unit: "tok/s"}}, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	hist := []history.Point{
		{Source: "d.txt", Date: "2024-12-11", Hardware: "M-series Mac", Model: "Qwen3-30B-A3B", Series: "Cached offsets", Metric: "tok_s", Value: 11.6, Unit: "tok/s"},
		{Source: "d.txt", Date: "2024-12-11", Hardware: "M-series Mac", Model: "GPT-2", Series: "base", Metric: "tok_s", Value: 80, Unit: "tok/s"},
	}
	out := filepath.Join(dir, "out")
	paths, err := WriteFiles(out, db, []int64{id}, Options{History: hist})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Errorf("paths = %v, want the page alone", paths)
	}
	page, err := os.ReadFile(filepath.Join(out, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{
		"<h2>Charts</h2>",
		"throughput against batch size (model cases with decode tok/s at two or more batch sizes",
		"the per-component breakdown (model cases run with profile timing)",
		"the roofline fraction (model cases that record roofline_frac)",
		"<h2>Documented history</h2>",
		"No documented throughput figures of these runs&#39; model (qwen3-moe-mini); --history-model draws those of another: GPT-2, Qwen3-30B-A3B.",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(html, "Documented history: </h2>") {
		t.Error("the history heading names no model")
	}
}

// A column of medians is right-aligned whatever its cells say besides: the
// sample count where too few repetitions give no interval, or the status of
// a case that did not finish; a column of names is not.
func TestAlignNumericColumns(t *testing.T) {
	tbl := &htmlTable{
		Header: []string{"case", "decode tok/s", "µs/call", "note"},
		Rows: [][]string{
			{"bench/batch=1", "10.0 (n=1)", "12.50 ±20%", "x"},
			{"bench/batch=2", "20.0 ±0%", "0.0024 (n=3)", "-"},
			{"bench/batch=4", "failed", "skipped", "pending"},
			{"bench/batch=8", "-", "pending", "y"},
		},
	}
	align(tbl)
	if want := []bool{false, true, true, false}; !slices.Equal(tbl.Right, want) {
		t.Errorf("right-aligned columns %v, want %v", tbl.Right, want)
	}
}

// A summary shows the headline columns its cases recorded: a tune run
// times calls alone, so its table has µs/call and no column of dashes, and
// another engine's imported figures (decode and prefill tok/s, no layer
// count) have no layers column either.
func TestSummariesKernelColumns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    string
		layers  int
		metrics []string
		want    string
	}{
		{"calls timed alone", results.CaseKernel, 0, []string{"us_per_call"}, "case|µs/call"},
		{"bytes and flops", results.CaseKernel, 0, []string{"us_per_call", "gb_s", "gflop_s"}, "case|µs/call|GB/s|GFLOP/s"},
		{"another engine's figures", results.CaseModel, 0, []string{"decode_tok_s", "prefill_tok_s"}, "case|decode tok/s|prefill tok/s"},
		{"a truncated model", results.CaseModel, 48, []string{"decode_tok_s", "step_ms"}, "case|layers|decode tok/s|step ms"},
	} {
		st := map[string]*stats.Summary{}
		for _, m := range tc.metrics {
			st[m] = &stats.Summary{N: 1}
		}
		runs := []charts.RunData{{Run: results.Run{ID: 1, SuiteName: "tune"},
			Cases: []charts.CaseData{{Case: results.Case{Name: "a", Kind: tc.kind, Status: results.CaseDone, LayersRun: 4, LayersTotal: tc.layers}, Stats: st}}}}
		tables := summaries(runs)
		if got := strings.Join(tables[0].Header, "|"); got != tc.want {
			t.Errorf("%s: header %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A run that stored no case is said so in its summary's place, with why
// where its status tells, as show says it, not left an empty section.
func TestSummariesRunOfNoCases(t *testing.T) {
	for _, tc := range []struct {
		status, want string
	}{
		{results.RunComplete, "run 7 recorded no cases."},
		{results.RunInterrupted, "run 7 recorded no cases: it was interrupted before it stored any."},
	} {
		tables := summaries([]charts.RunData{{Run: results.Run{ID: 7, SuiteName: "ci", Status: tc.status}}})
		if len(tables) != 1 || len(tables[0].Header) != 0 || strings.Join(tables[0].Notes, "\n") != tc.want {
			t.Errorf("%s: %+v, want one note %q", tc.status, tables, tc.want)
		}
	}
}
