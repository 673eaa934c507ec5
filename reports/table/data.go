package table

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Data is a table's tidy form, what csv, json and jsonl write when a table
// has one: named columns and typed cells, one observation per row. A cell is
// nil (empty in csv, null in json), a string, a bool, an integer, a float64
// (NaN and ±Inf are NaN, +Inf and -Inf in csv, as strconv.ParseFloat and
// pandas read them back; json has no such values and writes null) or a
// time.Time (RFC 3339, UTC). A column holding text beside
// numbers has its numbers written as text in json, so that each column is
// one type in every row. Display tables keep their "359.0 ±69%" cells for
// the table and md forms only.
type Data struct {
	Columns []string
	Rows    [][]any
}

// Add appends a row given as column -> value; columns not seen before are
// appended to Columns in the order met (sorted within one call).
func (d *Data) Add(row map[string]any) {
	var fresh []string
	for k := range row {
		if !slices.Contains(d.Columns, k) {
			fresh = append(fresh, k)
		}
	}
	slices.Sort(fresh)
	d.Columns = append(d.Columns, fresh...)
	r := make([]any, len(d.Columns))
	for i, c := range d.Columns {
		r[i] = row[c]
	}
	d.Rows = append(d.Rows, r)
}

// Merge returns one Data holding the rows of all ds: columns are the union
// in order of first appearance, a row lacking a column gets nil there.
func Merge(ds ...*Data) *Data {
	out := &Data{}
	idx := map[string]int{}
	for _, d := range ds {
		for _, c := range d.Columns {
			if _, ok := idx[c]; !ok {
				idx[c] = len(out.Columns)
				out.Columns = append(out.Columns, c)
			}
		}
	}
	for _, d := range ds {
		for _, r := range d.Rows {
			row := make([]any, len(out.Columns))
			for i, v := range r {
				if i < len(d.Columns) {
					row[idx[d.Columns[i]]] = v
				}
			}
			out.Rows = append(out.Rows, row)
		}
	}
	return out
}

// Render writes d in a data format (csv, json or jsonl).
func (d *Data) Render(w io.Writer, f Format) error {
	switch f {
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(d.Columns); err != nil {
			return err
		}
		for _, r := range d.Rows {
			rec := make([]string, len(d.Columns))
			for i := range rec {
				if i < len(r) {
					rec[i] = csvCell(r[i])
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case FormatJSON:
		text := d.textColumns()
		objs := make([]dataRow, len(d.Rows))
		for i, r := range d.Rows {
			objs[i] = dataRow{d.Columns, r, text}
		}
		return writeJSON(w, objs)
	case FormatJSONL:
		text := d.textColumns()
		for _, r := range d.Rows {
			b, err := dataRow{d.Columns, r, text}.MarshalJSON()
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("table: %s is not a data format (want csv, json or jsonl)", f)
}

// textColumns says, per column, whether it holds text beside numbers (a
// parameter "8" in one case and "tile/32" in another): json writes its
// numbers as text too, so that a column is one type in every row.
func (d *Data) textColumns() []bool {
	text := make([]bool, len(d.Columns))
	for i := range d.Columns {
		str, num := false, false
		for _, r := range d.Rows {
			if i >= len(r) {
				continue
			}
			switch r[i].(type) {
			case string:
				str = true
			case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
				num = true
			}
		}
		text[i] = str && num
	}
	return text
}

// IsData reports whether f is one of the data formats.
func IsData(f Format) bool { return f == FormatCSV || f == FormatJSON || f == FormatJSONL }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// jsonFinite reports whether v is not a float that json cannot write.
func jsonFinite(v any) bool {
	switch x := v.(type) {
	case float64:
		return finite(x)
	case float32:
		return finite(float64(x))
	}
	return true
}

func csvCell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if !finite(x) {
			return strconv.FormatFloat(x, 'g', -1, 64) // NaN, +Inf, -Inf
		}
		if a := math.Abs(x); a == 0 || (a >= 1e-4 && a < 1e21) {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return csvCell(float64(x))
	case time.Time:
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// dataRow is one row as a JSON object in column order.
type dataRow struct {
	cols []string
	vals []any
	text []bool // the columns whose numbers are written as text (textColumns)
}

func (r dataRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range r.cols {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeString(&b, c); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		var v any
		if i < len(r.vals) {
			v = r.vals[i]
		}
		if i < len(r.text) && r.text[i] {
			switch v.(type) {
			case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
				if !jsonFinite(v) {
					v = nil // json has no NaN or ±Inf, as text or not
				} else {
					v = csvCell(v)
				}
			}
		}
		if !jsonFinite(v) {
			v = nil
		}
		switch x := v.(type) {
		case time.Time:
			if x.IsZero() {
				v = nil
			} else {
				v = x.UTC().Format(time.RFC3339Nano)
			}
		}
		if s, ok := v.(string); ok {
			if err := writeString(&b, s); err != nil {
				return nil, err
			}
			continue
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c, err)
		}
		b.Write(enc)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Typed is a text value as data: an integer or a finite float when the
// text is one, else the text itself.
func Typed(s string) any {
	t := strings.TrimSpace(s)
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil && finite(f) {
		return f
	}
	return s
}
