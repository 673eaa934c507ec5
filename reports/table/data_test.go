package table

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDataFormats(t *testing.T) {
	a := &Data{}
	a.Add(map[string]any{"case": "decode/batch=1", "batch": int64(1), "median": 359.25, "ci_lo": math.Inf(-1)})
	b := &Data{}
	b.Add(map[string]any{"case": "matmul/m=8", "m": int64(8), "median": 12.5, "when": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	tables := []*Table{{Title: "model", Header: []string{"x"}, Rows: [][]string{{"359 ±1%"}}, Data: a},
		{Title: "kernel", Header: []string{"y"}, Rows: [][]string{{"12 ±1%"}}, Data: b}}

	var buf bytes.Buffer
	if err := RenderAll(&buf, FormatCSV, tables); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("csv does not parse as one table: %v", err)
	}
	want := [][]string{
		{"batch", "case", "ci_lo", "median", "m", "when"},
		{"1", "decode/batch=1", "-Inf", "359.25", "", ""},
		{"", "matmul/m=8", "", "12.5", "8", "2026-01-02T03:04:05Z"},
	}
	if len(recs) != len(want) {
		t.Fatalf("csv:\n%v\nwant\n%v", recs, want)
	}
	for i := range want {
		if strings.Join(recs[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("csv row %d: %q, want %q", i, recs[i], want[i])
		}
	}

	buf.Reset()
	if err := RenderAll(&buf, FormatJSONL, tables); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("jsonl: %d lines, want 2:\n%s", len(lines), buf.String())
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil {
		t.Fatal(err)
	}
	if row["median"] != 359.25 || row["batch"] != 1.0 || row["ci_lo"] != nil {
		t.Errorf("jsonl row carries %v, want numbers and null for an infinite bound", row)
	}

	buf.Reset()
	if err := RenderAll(&buf, FormatJSON, tables); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, buf.String())
	}
	if len(rows) != 2 || rows[1]["m"] != 8.0 {
		t.Errorf("json rows: %v", rows)
	}

	// The display forms keep the display cells.
	buf.Reset()
	if err := RenderAll(&buf, FormatMarkdown, tables); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "359 ±1%") {
		t.Errorf("md lost the display cells:\n%s", buf.String())
	}
}

func TestParseFormatNamesValue(t *testing.T) {
	_, err := ParseFormat("xml")
	if err == nil || !strings.Contains(err.Error(), `"xml"`) || !strings.Contains(err.Error(), "jsonl") {
		t.Errorf("ParseFormat(xml) = %v", err)
	}
}

// A data column holding text beside numbers (a parameter "8" in one case,
// "tile/32" in another) is text in every row of json and jsonl; a column of
// numbers and missing values stays numbers and null.
func TestDataColumnOneType(t *testing.T) {
	d := &Data{}
	d.Add(map[string]any{"variant": int64(8), "median": 1.5})
	d.Add(map[string]any{"variant": "tile/32", "median": nil})
	d.Add(map[string]any{"variant": nil, "median": 2.0})
	for _, f := range []Format{FormatJSON, FormatJSONL} {
		var b bytes.Buffer
		if err := d.Render(&b, f); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(strings.Fields(b.String()), "")
		for _, want := range []string{`"median":1.5,"variant":"8"`, `"median":null,"variant":"tile/32"`, `"median":2,"variant":null`} {
			if !strings.Contains(got, want) {
				t.Errorf("%s lacks %s:\n%s", f, want, b.String())
			}
		}
	}
}

// Tables rendered as one document of titled tables (some without a data
// form) give each table's typed rows where it has them, in every format:
// json's rows are not the display cells ("23.5 GiB") that csv leaves out.
func TestRenderAllMixedKeepsData(t *testing.T) {
	d := &Data{}
	d.Add(map[string]any{"backend": "cpu", "memory_bytes": int64(25276203008)})
	tables := []*Table{{Title: "devices", Header: []string{"backend", "memory"}, Rows: [][]string{{"cpu", "23.5 GiB"}}, Data: d},
		{Title: "pipelines", Header: []string{"op", "simd width"}, Rows: [][]string{{"matmul", "32"}}}}
	for _, f := range []Format{FormatJSON, FormatCSV, FormatJSONL} {
		var buf bytes.Buffer
		if err := RenderAll(&buf, f, tables); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if strings.Contains(out, "GiB") || !strings.Contains(out, "25276203008") || !strings.Contains(out, "simd") {
			t.Errorf("%s: want the devices table's data and the pipelines table's cells:\n%s", f, out)
		}
	}
	var buf bytes.Buffer
	if err := RenderAll(&buf, FormatJSON, tables); err != nil {
		t.Fatal(err)
	}
	var docs []struct {
		Title string           `json:"title"`
		Rows  []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &docs); err != nil {
		t.Fatalf("json: %v\n%s", err, buf.String())
	}
	if len(docs) != 2 || docs[0].Rows[0]["memory_bytes"] != 25276203008.0 || docs[1].Rows[0]["simd width"] != 32.0 {
		t.Errorf("json documents: %+v", docs)
	}
}

// TestNonFiniteCells: csv writes a value that is not finite as strconv
// writes it, so that it reads back as itself; json has no such values and
// writes null, in a number column and in one holding text beside numbers.
func TestNonFiniteCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		csv  string
	}{
		{"NaN", math.NaN(), "NaN"},
		{"+Inf", math.Inf(1), "+Inf"},
		{"-Inf", math.Inf(-1), "-Inf"},
		{"float32 +Inf", float32(math.Inf(1)), "+Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Data{}
			d.Add(map[string]any{"value": tc.v, "variant": tc.v})
			d.Add(map[string]any{"value": 1.5, "variant": "tile/32"})
			var buf bytes.Buffer
			if err := d.Render(&buf, FormatCSV); err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(&buf).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if got := recs[1][0]; got != tc.csv {
				t.Fatalf("csv cell %q, want %q", got, tc.csv)
			}
			back, err := strconv.ParseFloat(recs[1][0], 64)
			want, _ := strconv.ParseFloat(tc.csv, 64)
			if err != nil || !(back == want || math.IsNaN(back) && math.IsNaN(want)) {
				t.Errorf("csv cell %q reads back as %v, %v", recs[1][0], back, err)
			}
			for _, f := range []Format{FormatJSON, FormatJSONL} {
				buf.Reset()
				if err := d.Render(&buf, f); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if !strings.Contains(strings.Join(strings.Fields(buf.String()), ""), `{"value":null,"variant":null}`) {
					t.Errorf("%s: %s, want null for the value and its text column", f, buf.String())
				}
			}
		})
	}
}
