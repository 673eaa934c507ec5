package table

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sample has the awkward cells every format must survive: commas, quotes,
// pipes, newlines, unicode (including wide characters) and ragged rows.
func sample() *Table {
	return &Table{
		Title:  "Metal vs MPS (TinyLlama-1.1B)",
		Header: []string{"Batch Size", "Metal PagedAttention", "MPS Baseline", "Speedup", "Notes"},
		Rows: [][]string{
			{"1", "18.2", "37.1", "0.49x", `MPS wins, "for now"`},
			{"2", "33.9", "19.3", "1.76x", "a | b"},
			{"4", "66.9", "28.4", "2.36x", "µs → ms, 日本語"},
			{"8", "129.7", "41.6", "3.12x", "line one\nline two"},
			{"16", "10+"},
		},
		Notes: []Note{NoteText("Source: 002 MVP summary."), NoteText("10+ means at least 10.")},
	}
}

func second() *Table {
	return &Table{
		Title:  "Chunk size",
		Header: []string{"chunk", "ms"},
		Rows:   [][]string{{"64", "1.40"}, {"128", "1.41"}},
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s mismatch\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestRenderGolden(t *testing.T) {
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			var b bytes.Buffer
			if err := sample().Render(&b, f); err != nil {
				t.Fatal(err)
			}
			golden(t, "render_"+string(f), b.Bytes())
		})
	}
}

func TestRenderAllGolden(t *testing.T) {
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderAll(&b, f, []*Table{sample(), second()}); err != nil {
				t.Fatal(err)
			}
			golden(t, "all_"+string(f), b.Bytes())
		})
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"table": FormatTable, "MD": FormatMarkdown, "markdown": FormatMarkdown, " csv ": FormatCSV, "json": FormatJSON} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParseFormat("xml")
	if err == nil || !strings.Contains(err.Error(), "table, md, csv, json") {
		t.Errorf("ParseFormat(xml) error = %v; want the list of formats", err)
	}
	if err := sample().Render(&bytes.Buffer{}, "xml"); err == nil {
		t.Error("Render with an unknown format: no error")
	}
}

// The csv and json outputs must read back to the same cells, whatever the
// golden files say.
func TestRoundTrip(t *testing.T) {
	tb := sample()
	var b bytes.Buffer
	if err := tb.Render(&b, FormatCSV); err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(&b)
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(tb.Rows)+1 || recs[0][2] != "MPS Baseline" || recs[1][4] != `MPS wins, "for now"` || recs[4][4] != "line one\nline two" {
		t.Errorf("csv read back %q", recs)
	}

	b.Reset()
	if err := tb.Render(&b, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := json.Unmarshal(b.Bytes(), &objs); err != nil {
		t.Fatal(err)
	}
	if objs[0]["Batch Size"] != 1.0 || objs[0]["Speedup"] != "0.49x" || objs[4]["Metal PagedAttention"] != "10+" || objs[0]["Metal PagedAttention"] != "18.2" ||
		objs[4]["Notes"] != nil || objs[1]["Notes"] != "a | b" {
		t.Errorf("json read back %v", objs)
	}
}

// A missing value ("-", as the text forms print it, or an empty cell) is
// null in json and jsonl, and a column is one JSON type in every row that
// has a value: numbers where every value is one, else strings.
func TestJSONMissingIsNull(t *testing.T) {
	tb := &Table{Header: []string{"backend", "cores", "memory", "ratio"}, Rows: [][]string{
		{"cpu", "2", "23.5 GiB", "1.5"},
		{"metal", "-", "-", "10+"},
		{"cuda", "", " - ", "2"},
	}}
	for _, f := range []Format{FormatJSON, FormatJSONL} {
		var b bytes.Buffer
		if err := tb.Render(&b, f); err != nil {
			t.Fatal(err)
		}
		var objs []map[string]any
		if f == FormatJSON {
			if err := json.Unmarshal(b.Bytes(), &objs); err != nil {
				t.Fatal(err)
			}
		} else {
			for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				var o map[string]any
				if err := json.Unmarshal([]byte(l), &o); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, o)
			}
		}
		want := []map[string]any{
			{"backend": "cpu", "cores": 2.0, "memory": "23.5 GiB", "ratio": "1.5"},
			{"backend": "metal", "cores": nil, "memory": nil, "ratio": "10+"},
			{"backend": "cuda", "cores": nil, "memory": nil, "ratio": "2"},
		}
		if !reflect.DeepEqual(objs, want) {
			t.Errorf("%s: %v\nwant %v", f, objs, want)
		}
	}
	// csv keeps the cells as the table prints them.
	var b bytes.Buffer
	if err := tb.Render(&b, FormatCSV); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "metal,-,-,10+") {
		t.Errorf("csv:\n%s", b.String())
	}
}

func TestJSONKeys(t *testing.T) {
	tb := &Table{Header: []string{"a", "", "a"}, Rows: [][]string{{"1", "0123", "x", "extra"}}}
	var b bytes.Buffer
	if err := tb.Render(&b, FormatJSON); err != nil {
		t.Fatal(err)
	}
	want := "[\n  {\n    \"a\": 1,\n    \"col2\": \"0123\",\n    \"a_2\": \"x\",\n    \"col4\": \"extra\"\n  }\n]\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestEmpty(t *testing.T) {
	for _, f := range Formats {
		var b bytes.Buffer
		if err := (&Table{Title: "empty"}).Render(&b, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// gfmRow reads a markdown table row as GFM does: a backslash escapes the
// character after it, a bare pipe ends the cell, \| is a pipe, a backslash
// before other ASCII punctuation is dropped, and <br> breaks the line.
func gfmRow(line string) []string {
	var cells []string
	var cur strings.Builder
	body := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|")
	for i := 0; i < len(body); i++ {
		switch {
		case body[i] == '\\' && i+1 < len(body):
			cur.WriteString(body[i : i+2])
			i++
		case body[i] == '|':
			cells = append(cells, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(body[i])
		}
	}
	cells = append(cells, cur.String())
	for i, c := range cells {
		c = strings.ReplaceAll(strings.TrimSpace(c), `\|`, "|")
		var b strings.Builder
		for j := 0; j < len(c); j++ {
			if c[j] == '\\' && j+1 < len(c) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c[j+1]) >= 0 {
				j++
			}
			b.WriteByte(c[j])
		}
		c = strings.ReplaceAll(b.String(), "<br>", "\n")
		cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "&lt;", "<"), "&amp;", "&")
	}
	return cells
}

// A markdown cell reads back as the text it holds, every backslash and pipe
// kept, and stays one cell.
func TestMarkdownCellKeepsText(t *testing.T) {
	for _, text := range []string{
		`a\|b`, `a|b`, `a\b`, `a\\|b`, `trailing\`, `\*not emphasis\*`, `x\`, "line one\nline two", `c:\dir|x`,
		"a*b*c", "x<br>y", "_x_", "[a](b)", "#1", "> q", "`code`", "~~s~~", "&lt;", "&amp;lt;", "R&D", "snake_case_",
	} {
		t.Run(text, func(t *testing.T) {
			var b bytes.Buffer
			tab := &Table{Header: []string{"case", "n"}, Rows: [][]string{{text, "1"}}}
			if err := tab.Render(&b, FormatMarkdown); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			got := gfmRow(lines[len(lines)-1])
			if len(got) != 2 || got[0] != text || got[1] != "1" {
				t.Errorf("%q wrote %q, read back as %q", text, lines[len(lines)-1], got)
			}
		})
	}
}

// Markdown text renders as written on GitHub: formatting characters are
// escaped, numbers and text that is already safe are left alone.
// A note's arguments are the user's text, escaped in the markdown form as
// a cell is, each after its verb formats it; its format is the project's
// own words and markdown, written as they are in both forms.
func TestNotef(t *testing.T) {
	for _, c := range []struct {
		name, format string
		args         []any
		text, md     string
	}{
		{"a case name", "%s: in the baseline only", []any{"a*b*c"}, "a*b*c: in the baseline only", `a\*b\*c: in the baseline only`},
		{"a tag with a tag", "A: %s", []any{"x<br>y (run 1)"}, "A: x<br>y (run 1)", "A: x&lt;br>y (run 1)"},
		{"the project's backticks", "to make the run the unit: `mtlbench ab` (%s)", []any{"`x`"}, "to make the run the unit: `mtlbench ab` (`x`)", "to make the run the unit: `mtlbench ab` (\\`x\\`)"},
		{"numbers and a percent", "%d of %d (%.0f%%) %s", []any{3, 4, 75.0, "decode_tok_s"}, "3 of 4 (75%) decode_tok_s", "3 of 4 (75%) decode_tok_s"},
		{"a precision cuts the text before escaping", "%.3s", []any{"**bold"}, "**b", `\*\*b`},
		{"a quoted name", "%q", []any{"_x_"}, `"_x_"`, `"\_x\_"`},
		{"no arguments", "50% of it", nil, "50% of it", "50% of it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := Notef(c.format, c.args...)
			if c.args == nil {
				n = NoteText(c.format)
			}
			if n.Text != c.text || n.Markdown != c.md {
				t.Errorf("Notef(%q, %q) = %q / %q, want %q / %q", c.format, c.args, n.Text, n.Markdown, c.text, c.md)
			}
		})
	}
	// The markdown form is what md writes under a table; the text form
	// what the terminal table and json write.
	tab := &Table{Header: []string{"case"}, Rows: [][]string{{"x"}}, Notes: []Note{Notef("%s: only in A", "a*b")}}
	var md, txt, js bytes.Buffer
	if err := tab.Render(&md, FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	if err := tab.Render(&txt, FormatTable); err != nil {
		t.Fatal(err)
	}
	if err := RenderAll(&js, FormatJSON, []*Table{tab}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "- a\\*b: only in A\n") || !strings.Contains(txt.String(), "a*b: only in A\n") || !strings.Contains(js.String(), `"a*b: only in A"`) {
		t.Errorf("md:\n%s\ntable:\n%s\njson:\n%s", md.String(), txt.String(), js.String())
	}
}

func TestMarkdownText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1003 ± 2%", "1003 ± 2%"},
		{"-16.77%", "-16.77%"},
		{"decode_tok_s (tok/s)", "decode_tok_s (tok/s)"},
		{"~", "~"},
		{"a~b", "a~b"},
		{"a#b", "a#b"},
		{"a>b", "a>b"},
		{"R&D", "R&D"},
		{"日本_語", "日本_語"},
		{"a*b*c", `a\*b\*c`},
		{"<br>", "&lt;br>"},
		{"_x_", `\_x\_`},
		{"__init__", `\_\_init\_\_`},
		{"snake_case_", `snake_case\_`},
		{"[a](b)", `\[a\](b)`},
		{"# h", `\# h`},
		{"> q", `\> q`},
		{"`x`", "\\`x\\`"},
		{"~~s~~", `\~\~s\~\~`},
		{"&lt;", "&amp;lt;"},
		{"&#60;", "&amp;#60;"},
		{`a\b`, `a\\b`},
		{"a|b", `a\|b`},
		{"1\r\n2", "1<br>2"},
	} {
		t.Run(c.in, func(t *testing.T) {
			if got := MarkdownText(c.in); got != c.want {
				t.Errorf("MarkdownText(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// fullWriter takes limit bytes, then fails as a full disk or a closed pipe.
type fullWriter struct{ n, limit int }

func (w *fullWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		k := max(w.limit-w.n, 0)
		w.n = w.limit
		return k, errors.New("no space left on device")
	}
	w.n += len(p)
	return len(p), nil
}

// A write that fails is an error in every format, the table's too, with or
// without a title and notes: `mtlbench runs > /dev/full` must not exit 0
// having written nothing.
func TestRenderReportsWriteErrors(t *testing.T) {
	bare := func() *Table { tb := sample(); tb.Title, tb.Notes = "", nil; return tb }
	for _, tb := range []func() *Table{sample, bare} {
		for _, f := range []Format{FormatTable, FormatMarkdown, FormatCSV, FormatJSON, FormatJSONL} {
			var whole bytes.Buffer
			if err := tb().Render(&whole, f); err != nil {
				t.Fatal(err)
			}
			// the start, the middle of the rows, the last byte
			for _, limit := range []int{0, whole.Len() / 2, whole.Len() - 1} {
				if err := tb().Render(&fullWriter{limit: limit}, f); err == nil {
					t.Errorf("%s (title %q) to a writer that fails after %d bytes: no error", f, tb().Title, limit)
				}
			}
		}
	}
}
