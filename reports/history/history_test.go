package history

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// shippedFiles are the files of reports/history/data, one per source document.
var shippedFiles = map[string]string{
	"000-optimization-plan.yaml":        "000_bc918355f9dea9ac.txt",
	"001-knowledge-base.yaml":           "001_42c42577c32c4287.txt",
	"002-metal-pagedattention-mvp.yaml": "002_85360afca182a46e.txt",
	"003-metal-engine-v2.6.yaml":        "003_b76004d1f11ee3c2.txt",
	"004-metal-v1.5.yaml":               "004_610544da3b8c88e9.txt",
}

func embedded(t *testing.T) []Point {
	t.Helper()
	pts, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return pts
}

// one returns the single point matching all the given conditions.
func one(t *testing.T, pts []Point, cond func(Point) bool, what string) Point {
	t.Helper()
	var found []Point
	for _, p := range pts {
		if cond(p) {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d points match, want 1: %+v", what, len(found), found)
	}
	return found[0]
}

func TestEmbeddedFiles(t *testing.T) {
	pts := embedded(t)
	count := map[string]int{}
	for _, p := range pts {
		count[p.File]++
		if want := shippedFiles[p.File]; p.Source != want {
			t.Errorf("%s:%d: source %q, want %q", p.File, p.Line, p.Source, want)
		}
		if p.Line == 0 || p.Section == "" || p.Hardware == "" {
			t.Errorf("%s:%d: missing line, section or hardware: %+v", p.File, p.Line, p)
		}
	}
	for f := range shippedFiles {
		if count[f] == 0 {
			t.Errorf("%s: no points", f)
		}
	}
	if len(count) != len(shippedFiles) {
		t.Errorf("files %v, want %v", count, shippedFiles)
	}

	// Load of the folder itself must agree with the embedded copy.
	loaded, err := Load("data")
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != len(pts) {
		t.Errorf("Load found %d points, Embedded %d", len(loaded), len(pts))
	}
}

func TestEmbeddedValues(t *testing.T) {
	pts := embedded(t)
	hist := Filter(pts, "Qwen3-30B-A3B", "tok_s", "")
	var history []float64
	for _, p := range hist {
		if p.Section == "Performance History" {
			history = append(history, p.Value)
		}
	}
	if want := []float64{0.3, 4.2, 6.8, 10, 11.5, 11.6}; !reflect.DeepEqual(history, want) {
		t.Errorf("Performance History = %v, want %v", history, want)
	}

	p := one(t, pts, func(p Point) bool { return p.Series == "Cached offsets" && p.Metric == "tok_s" }, "11.6 entry")
	if p.Value != 11.6 || p.Date != "2024-12-11" || p.Model != "Qwen3-30B-A3B" || p.Unit != "tok/s" || p.Qualifier != "" {
		t.Errorf("11.6 entry: %+v", p)
	}
	p = one(t, pts, func(p Point) bool { return p.Series == "index_select" && p.Section == "Performance History" }, "10+ entry")
	if p.Value != 10 || p.Qualifier != ">=" {
		t.Errorf("10+ entry: %+v", p)
	}
	p = one(t, Filter(pts, "TinyLlama-1.1B", "tok_s", "mps baseline"), func(p Point) bool { return p.Batch == 8 }, "MPS batch 8")
	if p.Value != 41.6 || p.Date != "2025-12-11" {
		t.Errorf("MPS batch 8: %+v", p)
	}
	p = one(t, Filter(pts, "", "tok_s", "Metal V1.5"), func(p Point) bool { return p.Batch == 16 }, "V1.5 batch 16")
	if p.Value != 32.8 || p.Hardware != "Apple M3 Ultra" || p.DType != "float16" {
		t.Errorf("V1.5 batch 16: %+v", p)
	}
	p = one(t, pts, func(p Point) bool { return p.Section == "Chunk Size Benchmark" && p.Params["moe_chunk"] == "64" }, "chunk 64")
	if p.Value != 1.40 || p.Unit != "ms" || p.Metric != "ms_per_layer" || p.Component != "moe" {
		t.Errorf("chunk 64: %+v", p)
	}
	chunks := map[string]float64{}
	for _, p := range Filter(pts, "Qwen3-30B-A3B", "ms_per_layer", "chunked bmm") {
		if p.Section == "Chunk Size Benchmark" {
			chunks[p.Params["moe_chunk"]] = p.Value
		}
	}
	if want := map[string]float64{"8": 1.99, "16": 1.45, "32": 1.42, "64": 1.40, "128": 1.41, "256": 1.41}; !reflect.DeepEqual(chunks, want) {
		t.Errorf("chunk benchmark = %v, want %v", chunks, want)
	}
	p = one(t, pts, func(p Point) bool { return p.Model == "Qwen2-0.5B" && p.Metric == "prefill_tok_s" }, "Qwen2 prefill")
	if p.Value != 84000 || p.Batch != 16 || p.Date != "2025-12" || p.Hardware != "Apple M3 Ultra (128GB)" {
		t.Errorf("Qwen2 prefill: %+v", p)
	}
	p = one(t, pts, func(p Point) bool { return p.Series == "F.rms_norm" && p.Metric == "ms_per_call" }, "F.rms_norm per call")
	if p.Value != 0.011 {
		t.Errorf("F.rms_norm per call: %+v", p)
	}
	p = one(t, pts, func(p Point) bool { return p.Metric == "tok_s_target" && p.Series == "Phase 2: Metal MoE kernel" }, "phase 2 target")
	if p.Value != 15 || p.Qualifier != "range" || p.Params["max"] != "20" {
		t.Errorf("phase 2 target: %+v", p)
	}
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"missing.yaml", "- source: a.txt\n  date: \"2024\"\n  model: m\n  metric: tok_s\n  value: 1\n  unit: tok/s\n- source: a.txt\n  date: \"2024\"\n  metric: tok_s\n  value: 2\n", "missing.yaml:7: point missing required field(s): model, unit"},
		{"syntax.yaml", "- source: a.txt\n  date: \"2024\n  model: m\n", "syntax.yaml:2:"},
		{"badvalue.yaml", "- source: a.txt\n  date: \"2024\"\n  model: m\n  metric: tok_s\n  value: fast\n  unit: tok/s\n", `badvalue.yaml:5: value "fast" is not a finite number`},
		{"typo.yaml", "- source: a.txt\n  date: \"2024\"\n  model: m\n  metric: tok_s\n  value: 1\n  unit: tok/s\n  vaule: 2\n", `typo.yaml:7: unknown field "vaule"`},
		{"toplevel.yaml", "source: a.txt\n", "toplevel.yaml:1: top level must be a list"},
		{"range.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 1, unit: tok/s, qualifier: range}\n", "range.yaml:1: qualifier \"range\" needs params.max"},
		{"approx.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 1, unit: tok/s, qualifier: \"~range\"}\n", "approx.yaml:1: qualifier \"~range\" needs params.max"},
		// Held to the rule the store keeps (metrics.CheckValue).
		{"huge.yaml", "- source: a.txt\n  date: \"2024\"\n  model: m\n  metric: tok_s\n  value: 1e300\n  unit: tok/s\n", "huge.yaml:5: value 1e+300 is past 1e+18: no figure of a run is that large"},
		{"negative.yaml", "- source: a.txt\n  date: \"2024\"\n  model: m\n  metric: tok_s\n  unit: tok/s\n  value: -3\n", "negative.yaml:6: value -3 is negative, and a rate cannot be"},
		{"hugemax.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 1, unit: tok/s, qualifier: range, params: {max: 1e30}}\n", "hugemax.yaml:1: params.max: value 1e+30 is past 1e+18"},
		// history import skips such a cell; a file written by hand is held to the same rule.
		// 0 is how a point states no batch: written, it would read as none.
		{"batch0.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 1, unit: tok/s, batch: 0}\n", `batch0.yaml:1: batch "0" is no count of sequences`},
		{"batchneg.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 1, unit: tok/s, batch: -2}\n", `batchneg.yaml:1: batch "-2" is not a whole number of sequences`},
		{"inverted.yaml", "- {source: a, date: x, model: m, metric: tok_s, value: 10, unit: tok/s, qualifier: \"~range\", params: {max: 5}}\n", "inverted.yaml:1: params.max 5 is below the value 10: a range's upper end cannot be below its start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, tc.name, tc.text)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
				t.Errorf("Load error = %v\nwant it to contain %q", err, filepath.Join(dir, tc.want))
			}
		})
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	pts := embedded(t)
	path := filepath.Join(t.TempDir(), "all.yaml")
	if err := Save(path, pts); err != nil {
		t.Fatal(err)
	}
	back, err := Load(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(pts) {
		t.Fatalf("round trip: %d points, want %d", len(back), len(pts))
	}
	for i := range pts {
		a, b := pts[i], back[i]
		a.File, a.Line, b.File, b.Line = "", 0, "", 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("point %d changed:\n%+v\n%+v", i, a, b)
		}
	}

	// Save refuses what Load would reject.
	bad := []Point{{Source: "s", Date: "d", Metric: "tok_s", Unit: "tok/s", Value: 1}}
	if err := Save(filepath.Join(t.TempDir(), "bad.yaml"), bad); err == nil || !strings.Contains(err.Error(), "model") {
		t.Errorf("Save without model: %v", err)
	}
}

// Save's errors name the file and say what is wrong in words, not Go's
// "open"; it writes the file whole (atomicfile), as a history file every
// command reads must never be half written.
func TestSaveErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	pts := embedded(t)[:1]
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "h.yaml"), "save " + filepath.Join(dir, "missing", "h.yaml") + ": cannot write into folder " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{dir, "save " + dir + ": " + dir + " is a folder: name a file to write"},
	} {
		err := Save(tc.path, pts)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Save(%s): %v, want %q", tc.path, err, tc.want)
		}
	}
}

func TestImportPerformanceHistory(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "kb_performance_history.md"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ImportMarkdown(text, Point{Source: "KNOWLEDGE_BASE.md", Model: "Qwen3-30B-A3B", Hardware: "M-series Mac", File: "KNOWLEDGE_BASE.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Date": "date", "Version": "series", "TPS": "value:tok_s", "Notes": "note"}
	if !reflect.DeepEqual(res.Mapped, want) {
		t.Errorf("Mapped = %v, want %v", res.Mapped, want)
	}
	if len(res.Unmapped) != 0 || len(res.Warnings) != 0 {
		t.Errorf("Unmapped = %q, Warnings = %q; want none", res.Unmapped, res.Warnings)
	}
	if len(res.Points) != 6 {
		t.Fatalf("%d points, want 6", len(res.Points))
	}
	p := res.Points[3]
	if p.Value != 10 || p.Qualifier != ">=" || p.Series != "index_select" || p.Date != "2024-12-11" || p.Note != "4.5x faster weight gather" ||
		p.Section != "Performance History" || p.Metric != "tok_s" || p.Unit != "tok/s" || p.Model != "Qwen3-30B-A3B" || p.Line != 13 {
		t.Errorf("10+ row: %+v", p)
	}
	if p := res.Points[5]; p.Value != 11.6 || p.Qualifier != "" || p.Date != "2024-12-11" {
		t.Errorf("11.6 row: %+v", p)
	}

	// The import agrees with the shipped history, and saves in its format.
	var shipped []Point
	for _, p := range embedded(t) {
		if p.Section == "Performance History" {
			shipped = append(shipped, p)
		}
	}
	for i, p := range res.Points {
		s := shipped[i]
		if p.Value != s.Value || p.Qualifier != s.Qualifier || p.Series != s.Series || p.Date != s.Date {
			t.Errorf("row %d: imported %+v, shipped %+v", i, p, s)
		}
	}
	path := filepath.Join(t.TempDir(), "kb.yaml")
	if err := Save(path, res.Points); err != nil {
		t.Fatal(err)
	}
	if back, err := Load(filepath.Dir(path)); err != nil || len(back) != 6 {
		t.Errorf("Load of saved import: %d points, %v", len(back), err)
	}
}

func TestImportUnknownColumnsAndBreakdowns(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "breakdowns.md"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ImportMarkdown(text, Point{Source: "doc.md", Date: "2024-12-11", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Owner"}; !reflect.DeepEqual(res.Unmapped, want) {
		t.Errorf("Unmapped = %q, want %q", res.Unmapped, want)
	}
	for col, field := range map[string]string{
		"Component": "component", "Time/Layer": "value:ms_per_layer", "Total (48 layers)": "value:ms_total",
		"% of Time": "value:pct", "Time": "value:time_ms", "Batch Size": "batch", "Speedup": "value:speedup",
		"Metal PagedAttention": "series+value:tok_s", "MPS Baseline": "series+value:tok_s",
	} {
		if res.Mapped[col] != field {
			t.Errorf("Mapped[%q] = %q, want %q", col, res.Mapped[col], field)
		}
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "Environment Variables") {
		t.Errorf("Warnings = %q; want the environment table skipped", res.Warnings)
	}
	// 4 rows x 3 values + 3 rows + 2 rows x 3 values; the fenced table is ignored.
	if len(res.Points) != 21 {
		t.Errorf("%d points, want 21", len(res.Points))
	}
	find := func(cond func(Point) bool) *Point {
		for i := range res.Points {
			if cond(res.Points[i]) {
				return &res.Points[i]
			}
		}
		t.Fatal("no such point")
		return nil
	}
	p := find(func(p Point) bool { return p.Component == "total" && p.Metric == "ms_total" })
	if p.Value != 154 || p.Section != "Performance Breakdown (per decode step)" {
		t.Errorf("total: %+v", p)
	}
	// "~75-85ms": an approximate range keeps its "~".
	p = find(func(p Point) bool { return p.Metric == "time_ms" && IsRange(p.Qualifier) })
	if p.Value != 75 || p.Params["max"] != "85" || p.Component != "total" || p.Qualifier != "~range" || p.Figure() != "~75–85" {
		t.Errorf("total forward: %+v", p)
	}
	p = find(func(p Point) bool { return p.Metric == "tok_s" && p.Series == "" })
	if p.Value != 11.5 || p.Unit != "tok/s" || p.Component != "" {
		t.Errorf("TPS row: %+v", p)
	}
	p = find(func(p Point) bool { return p.Series == "MPS Baseline" && p.Batch == 8 })
	if p.Value != 41.6 || p.Metric != "tok_s" || p.Unit != "tok/s" {
		t.Errorf("MPS batch 8: %+v", p)
	}

	if _, err := ImportMarkdown([]byte("no tables here\n"), Point{}); err == nil {
		t.Error("ImportMarkdown without tables: no error")
	}
}

func TestFilter(t *testing.T) {
	pts := []Point{{Model: "A", Metric: "tok_s", Series: "x"}, {Model: "a", Metric: "ms", Series: "y"}, {Model: "b", Metric: "tok_s"},
		{Model: "b", Metric: "decode_tok_s"}, {Model: "b", Metric: "prefill_tok_s"}, {Model: "b", Metric: "tok_s_target"}}
	for _, c := range []struct {
		model, metric, series string
		want                  int
	}{
		{"", "", "", 6},
		{"a", "", "", 2},
		{"", "TOK_S", "x", 1},
		// tok_s takes in decode_tok_s (history import's "Decode" columns),
		// never prefill or a target; decode_tok_s is decode only.
		{"b", "tok_s", "", 2},
		{"b", "decode_tok_s", "", 1},
		{"b", "prefill_tok_s", "", 1},
	} {
		if n := len(Filter(pts, c.model, c.metric, c.series)); n != c.want {
			t.Errorf("Filter(%q, %q, %q): %d points, want %d", c.model, c.metric, c.series, n, c.want)
		}
	}
}

// A figure too large for a float64 (1e400) or not a number is no figure:
// it is skipped, never stored as +Inf.
func TestParseQuantityRejectsNonFinite(t *testing.T) {
	for _, s := range []string{"1e400", "1e400 tok/s", "5-1e400", "NaN", "Inf tok/s"} {
		if q, ok := parseQuantity(s); ok {
			t.Errorf("parseQuantity(%q) = %+v, want no figure", s, q)
		}
	}
	if q, ok := parseQuantity("42.5 tok/s"); !ok || q.value != 42.5 {
		t.Errorf("parseQuantity(42.5 tok/s) = %+v, %v", q, ok)
	}
}

// A wrong cell fails the import, named by line, table, row and column,
// whatever the defaults: a date that is no day is never replaced by the
// default date, and nothing of the page is imported.
func TestImportWrongCells(t *testing.T) {
	const head = "# Perf\n\n| Date | Batch | Decode tok/s |\n|---|---|---|\n"
	for _, c := range []struct{ name, rows, want string }{
		{"no calendar date", "| 2025-13-40 | 1 | 17 |\n", `line 5: table 1 (header at line 3), row 1, column "Date": date "2025-13-40" is no calendar date`},
		{"feb 30", "| 2025-01-01 | 1 | 16 |\n| 2025-02-30 | 1 | 17 |\n", `line 6: table 1 (header at line 3), row 2, column "Date": date "2025-02-30" is no calendar date`},
		{"no date", "| yesterday | 1 | 17 |\n", `line 5: table 1 (header at line 3), row 1, column "Date": date "yesterday" is not YYYY-MM-DD, YYYY-MM, YYYY or unknown`},
		{"batch", "| 2025-01-01 | x | 17 |\n", `line 5: table 1 (header at line 3), row 1, column "Batch": batch "x" is not a whole number of sequences`},
		{"batch 0", "| 2025-01-01 | 0 | 17 |\n", `line 5: table 1 (header at line 3), row 1, column "Batch": batch "0" is no count of sequences (1 or more; leave it out where none is stated)`},
		{"negative", "| 2025-01-01 | 1 | -5 |\n", `line 5: table 1 (header at line 3), row 1, column "Decode tok/s": "-5" is negative: a figure the history keeps is never below zero`},
		{"too large", "| 2025-01-01 | 1 | 1e999 |\n", `line 5: table 1 (header at line 3), row 1, column "Decode tok/s": "1e999" is beyond a float64's range`},
		{"past any run", "| 2025-01-01 | 1 | 1e300 |\n", `line 5: table 1 (header at line 3), row 1, column "Decode tok/s": "1e300": value 1e+300 is past 1e+18: no figure of a run is that large`},
		{"range past any run", "| 2025-01-01 | 1 | 5-2000000000000000000 |\n", `line 5: table 1 (header at line 3), row 1, column "Decode tok/s": "5-2000000000000000000": value 2e+18 is past 1e+18: no figure of a run is that large`},
		{"short row", "| 2025-01-01 | 1 |\n", `line 5: table 1 (header at line 3), row 1: 2 cells, but its header has 3`},
		{"long row", "| 2025-01-01 | 1 | 17 | 99 |\n", `line 5: table 1 (header at line 3), row 1: 4 cells, but its header has 3`},
		{"repeated", "| 2025-01-01 | 1 | 17 |\n| 2025-01-01 | 1 | 17 |\n", `line 6: table 1 (header at line 3), row 2: repeats line 5 (decode_tok_s 17): the same figure twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ImportMarkdown([]byte(head+c.rows), Point{Source: "d.md", Model: "m", Date: "2024-01-01"})
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %s", err, c.want)
			}
		})
	}
	// Every wrong cell of the page is named at once.
	_, err := ImportMarkdown([]byte(head+"| 2025-13-40 | 1 | 17 |\n| 2025-01-01 | 1 | -5 |\n"), Point{Source: "d.md", Model: "m"})
	if err == nil || strings.Count(err.Error(), "\n") != 1 {
		t.Errorf("two wrong cells: %v", err)
	}
	// A word where a figure goes is a remark, skipped with a warning naming its column.
	res, err := ImportMarkdown([]byte(head+"| 2025-01-01 | 1 | OOM |\n| 2025-01-02 | 1 | 9 |\n"), Point{Source: "d.md", Model: "m"})
	if err != nil || len(res.Points) != 1 || !slices.Contains(res.Warnings, `line 5: column "Decode tok/s": "OOM" holds no figure, skipped`) {
		t.Errorf("remark: %v, %v, %q", err, res.Points, res.Warnings)
	}
	if want := []string{"Date", "Batch", "Decode tok/s"}; !slices.Equal(res.Columns, want) {
		t.Errorf("Columns %q, want %q", res.Columns, want)
	}
}

// A cell's own unit beats its column's: times are converted, other units
// skipped with a warning, as is a range that ends below its start.
func TestImportCellUnits(t *testing.T) {
	text := []byte("| batch | TPS | Time (ms) | date |\n|---|---|---|---|\n| 1 | 12 ms | 3 s | 2026 |\n| 2 | 30-10 | 500 us | 2026 |\n")
	res, err := ImportMarkdown(text, Point{Source: "u.md", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Points {
		got = append(got, fmt.Sprintf("%s %g %s", p.Metric, p.Value, p.Unit))
	}
	if want := []string{"time_ms 3000 ms", "time_ms 0.5 ms"}; !slices.Equal(got, want) {
		t.Errorf("points %q, want %q", got, want)
	}
	for _, w := range []string{`line 3: "12 ms" is in ms, but its column is in tok/s: skipped`, `line 4: range "30-10" ends below its start: skipped`} {
		if !slices.Contains(res.Warnings, w) {
			t.Errorf("warnings %q lack %q", res.Warnings, w)
		}
	}
}

// Merge replaces a page's figures of a model and keeps everything else.
func TestMerge(t *testing.T) {
	old := []Point{{Source: "kb.md", Model: "gpt2", Value: 1}, {Source: "kb.md", Model: "TinyLlama", Value: 2}, {Source: "x.md", Model: "gpt2", Value: 3}}
	merged, replaced := Merge(old, []Point{{Source: "kb.md", Model: "GPT2", Value: 4}})
	var vals []float64
	for _, p := range merged {
		vals = append(vals, p.Value)
	}
	if replaced != 1 || !slices.Equal(vals, []float64{2, 3, 4}) {
		t.Errorf("merged %v, replaced %d", vals, replaced)
	}
}

// A header's unit is its bare numbers' unit: seconds and microseconds
// become milliseconds, and a rate of something other than tokens is no
// column of the history's.
func TestImportHeaderUnits(t *testing.T) {
	text := []byte("| Date | Batch | Latency (s) | Throughput (GB/s) | Time (µs) | Decode throughput (req/s) | Decode (t/s) | Notes (per token, median) |\n" +
		"|---|---|---|---|---|---|---|---|\n" +
		"| 2026-01-05 | 1 | 1.5 | 400 | 250 | 3 | 42 | x |\n" +
		"| 2026-01-06 | 1 | 20 ms | 400 | 2 ms | 3 | 43 | y |\n")
	res, err := ImportMarkdown(text, Point{Source: "u.md", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Points {
		got = append(got, fmt.Sprintf("%s %g %s", p.Metric, p.Value, p.Unit))
	}
	want := []string{"latency_ms 1500 ms", "time_ms 0.25 ms", "decode_tok_s 42 tok/s", "latency_ms 20 ms", "time_ms 2 ms", "decode_tok_s 43 tok/s"}
	if !slices.Equal(got, want) {
		t.Errorf("points %q, want %q", got, want)
	}
}

// A figure reads as the document wrote it: a range with both ends (its
// upper end is params.max), a qualifier before the number.
func TestFigure(t *testing.T) {
	for _, c := range []struct {
		p    Point
		want string
	}{
		{Point{Value: 10.3}, "10.3"},
		{Point{Value: 84000}, "84000"},
		{Point{Value: 31, Qualifier: "~"}, "~31"},
		{Point{Value: 50, Qualifier: ">="}, ">=50"},
		{Point{Value: 30, Qualifier: "range", Params: map[string]string{"max": "35"}}, "30–35"},
		{Point{Value: 6.8, Qualifier: "range", Params: map[string]string{"max": "7.0"}}, "6.8–7.0"},
		{Point{Value: 30, Qualifier: "~range", Params: map[string]string{"max": "35"}}, "~30–35"},
	} {
		if got := c.p.Figure(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}

// A history file's date is read by the rule history import reads its
// cells by: a real day, month or year, or unknown. A point of another
// date is refused at its line, as its cell would be.
func TestOneDateRule(t *testing.T) {
	for _, c := range []struct{ date, why string }{
		{"2026-13-40", "is no calendar date"},
		{"2026-02-30", "is no calendar date"},
		{"2025-02-29", "is no calendar date"},
		{"2026-13", "is no calendar date"},
		{"Dec 2026", "is not YYYY-MM-DD, YYYY-MM, YYYY or unknown"},
		{"2026-1-5", "is not YYYY-MM-DD, YYYY-MM, YYYY or unknown"},
		{"2024-02-29", ""},
		{"2026-12", ""},
		{"2026", ""},
		{"unknown", ""},
	} {
		t.Run(c.date, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "h.yaml", "- source: a.txt\n  date: \""+c.date+"\"\n  model: m\n  metric: tok_s\n  value: 1\n  unit: tok/s\n")
			pts, err := Load(dir)
			want := filepath.Join(dir, "h.yaml") + `:2: date "` + c.date + `" ` + c.why
			switch {
			case c.why == "" && (err != nil || len(pts) != 1):
				t.Errorf("load: %d points, %v", len(pts), err)
			case c.why != "" && (err == nil || err.Error() != want || len(pts) != 0):
				t.Errorf("load: %d points, %v\nwant %s", len(pts), err, want)
			}
			_, err = ImportMarkdown([]byte("| Date | Decode tok/s |\n|---|---|\n| "+c.date+" | 17 |\n"), Point{Source: "d.md", Model: "m"})
			want = `line 3: table 1 (header at line 1), row 1, column "Date": date "` + c.date + `" ` + c.why
			switch {
			case c.why == "" && err != nil:
				t.Errorf("import: %v", err)
			case c.why != "" && (err == nil || err.Error() != want):
				t.Errorf("import: %v\nwant %s", err, want)
			}
		})
	}
}

// A markdown file as a Windows editor saves it (a byte-order mark, CRLF
// line ends) imports as the same file without them: the mark read as a
// cell before the header's first pipe, and every row was refused as one
// cell short.
func TestImportMarkdownAsWindowsSavesIt(t *testing.T) {
	const table = "# Decode\n\n| batch | tok/s |\n|---|---|\n| 1 | 5.5 |\n| 4 | 18 |\n"
	want, err := ImportMarkdown([]byte(table), Point{Source: "d.md", Model: "m", Date: "2026-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, text string
		noHeading  bool // the table alone: no section to compare
	}{
		{"CRLF line ends", strings.ReplaceAll(table, "\n", "\r\n"), false},
		{"a byte-order mark before the heading", "\uFEFF" + table, false},
		{"a byte-order mark and CRLF", "\uFEFF" + strings.ReplaceAll(table, "\n", "\r\n"), false},
		{"a byte-order mark before the table", "\uFEFF" + strings.TrimPrefix(table, "# Decode\n\n"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ImportMarkdown([]byte(tc.text), Point{Source: "d.md", Model: "m", Date: "2026-01-01"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Points) != len(want.Points) {
				t.Fatalf("%d points, want %d", len(got.Points), len(want.Points))
			}
			for i := range got.Points {
				g, w := got.Points[i], want.Points[i]
				g.Line, w.Line = 0, 0
				if tc.noHeading {
					g.Section, w.Section = "", ""
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("point %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
