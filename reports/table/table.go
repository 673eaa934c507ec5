// Package table renders one tabular result in several output formats:
// a box-drawn terminal table (through tablewriter), GitHub-flavoured
// markdown, CSV and JSON. Every mtlbench report builds a *Table and lets the
// user pick the format, so the rules below are the single place where the
// formats are defined.
//
// Shape rules shared by all formats: the column count is the longest of the
// header and every row; short rows are padded with empty cells rather than
// rejected, because reports are often built incrementally.
//
// JSON: a table is an array of objects, one per row, keyed by the header in
// column order. A missing value, a cell the text forms print as "-" or
// leave empty, is null. A column is one type in every row: where each of
// its other cells is a valid JSON number literal ("42", "-1.40", "1e3") they
// are written as numbers, the original text kept, so "1.40" stays 1.40 and
// does not become 1.4; where any is not ("10+", "~5", "1.76x", "0123",
// "NaN"), the column's cells are all strings, so no value is ever silently
// reinterpreted and a reader never meets 2 in one row and "10+" in the
// next. Empty header names become "colN" (1-based) and repeated ones get a
// "_2", "_3"... suffix so that no cell is lost.
package table

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/tw"
)

// Table is one tabular result.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []Note // footnotes printed under the text forms (table, md)
	// Data, when set, is what csv, json and jsonl write instead of the
	// display cells: typed values, one observation per row.
	Data *Data
}

// Format names an output format.
type Format string

// The supported formats.
const (
	FormatTable    Format = "table" // terminal, box drawing
	FormatMarkdown Format = "md"    // GitHub-flavoured markdown
	FormatCSV      Format = "csv"   // RFC 4180 via encoding/csv, header row first
	FormatJSON     Format = "json"  // array of objects keyed by header
	FormatJSONL    Format = "jsonl" // one object per line
)

// Formats lists the supported formats in the order they are documented.
var Formats = []Format{FormatTable, FormatMarkdown, FormatCSV, FormatJSON, FormatJSONL}

// ParseFormat parses a format name, case-insensitively; "markdown" is
// accepted for "md" because that is what people type.
func ParseFormat(s string) (Format, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if v == "markdown" {
		return FormatMarkdown, nil
	}
	for _, f := range Formats {
		if v == string(f) {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("unknown output format %q (want one of: %s)", s, strings.Join(names, ", "))
}

// Render writes t to w in format f. The text forms (table, md) print the
// title above and the notes below; csv and json carry the cells only (use
// RenderAll to keep titles in those forms).
func (t *Table) Render(w io.Writer, f Format) error {
	if t.Data != nil && IsData(f) {
		return t.Data.Render(w, f)
	}
	switch f {
	case FormatTable:
		return t.renderText(w)
	case FormatMarkdown:
		return t.renderMarkdown(w)
	case FormatCSV:
		return t.renderCSV(w)
	case FormatJSON:
		objs, err := t.jsonRows()
		if err != nil {
			return err
		}
		return writeJSON(w, objs)
	case FormatJSONL:
		objs, err := t.jsonRows()
		if err != nil {
			return err
		}
		for _, o := range objs {
			b, err := o.MarshalJSON()
			if err != nil {
				return err
			}
			if _, err := w.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		return nil
	default:
		_, err := ParseFormat(string(f))
		return err
	}
}

// RenderAll writes several tables in one format. Text forms are separated by
// a blank line, each with its title above; csv gets a "# title" line before
// each table (blank line between tables; encoding/csv readers skip both with
// Comment: '#'); json is an array of {"title", "rows", "notes"} objects.
func RenderAll(w io.Writer, f Format, tables []*Table) error {
	if _, err := ParseFormat(string(f)); err != nil {
		return err
	}
	if IsData(f) && allData(tables) {
		// One tidy table, whatever the display split them into.
		ds := make([]*Data, len(tables))
		for i, t := range tables {
			ds[i] = t.Data
		}
		return Merge(ds...).Render(w, f)
	}
	if f == FormatJSONL {
		for _, t := range tables {
			if err := t.Render(w, f); err != nil {
				return err
			}
		}
		return nil
	}
	if f == FormatJSON {
		type doc struct {
			Title string           `json:"title"`
			Rows  []json.Marshaler `json:"rows"`
			Notes []Note           `json:"notes,omitempty"`
		}
		docs := make([]doc, 0, len(tables))
		for _, t := range tables {
			// A table with a data form gives its typed rows, as csv and
			// jsonl write them, not its display cells.
			if t.Data != nil {
				rows := make([]json.Marshaler, len(t.Data.Rows))
				text := t.Data.textColumns()
				for i, r := range t.Data.Rows {
					rows[i] = dataRow{t.Data.Columns, r, text}
				}
				docs = append(docs, doc{Title: t.Title, Rows: rows, Notes: t.Notes})
				continue
			}
			rows, err := t.jsonRows()
			if err != nil {
				return err
			}
			ms := make([]json.Marshaler, len(rows))
			for i, r := range rows {
				ms[i] = r
			}
			docs = append(docs, doc{Title: t.Title, Rows: ms, Notes: t.Notes})
		}
		return writeJSON(w, docs)
	}
	for i, t := range tables {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if f == FormatCSV {
			// A title line keeps tables apart in one csv stream; newlines
			// would break the comment, so they are flattened.
			if _, err := fmt.Fprintf(w, "# %s\n", oneLine(t.Title)); err != nil {
				return err
			}
		}
		if err := t.Render(w, f); err != nil {
			return err
		}
	}
	return nil
}

func allData(tables []*Table) bool {
	for _, t := range tables {
		if t.Data == nil {
			return false
		}
	}
	return len(tables) > 0
}

// grid returns the header and rows padded to one column count.
func (t *Table) grid() (header []string, rows [][]string) {
	n := len(t.Header)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	pad := func(r []string) []string {
		out := make([]string, n)
		copy(out, r)
		return out
	}
	if len(t.Header) > 0 {
		header = pad(t.Header)
	}
	rows = make([][]string, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = pad(r)
	}
	return header, rows
}

// numericLike matches cells that read as numbers to a person (optional
// ~/</>/+/- prefix, thousands separators, a trailing x, % or +); such
// columns are right-aligned so digits line up.
var numericLike = regexp.MustCompile(`^[~<>≈≥≤+-]?\d[\d,]*(\.\d+)?([eE][+-]?\d+)?\s*(x|%|\+)?$`)

// rightAligned reports, per column, whether every non-empty body cell is
// numeric-like (and at least one is).
func rightAligned(ncols int, rows [][]string) []bool {
	out := make([]bool, ncols)
	for c := range ncols {
		seen := false
		ok := true
		for _, r := range rows {
			v := strings.TrimSpace(r[c])
			if v == "" {
				continue
			}
			seen = true
			if !numericLike.MatchString(v) {
				ok = false
				break
			}
		}
		out[c] = seen && ok
	}
	return out
}

func (t *Table) renderText(w io.Writer) error {
	header, rows := t.grid()
	if t.Title != "" {
		if _, err := fmt.Fprintln(w, t.Title); err != nil {
			return err
		}
	}
	if ncols := max(len(header), widthOf(rows)); ncols > 0 {
		align := make([]tw.Align, ncols)
		for i, r := range rightAligned(ncols, rows) {
			align[i] = tw.AlignLeft
			if r {
				align[i] = tw.AlignRight
			}
		}
		// Wrapping, header upper-casing and trimming are off: a report
		// must show the cells exactly as given.
		// tablewriter drops its writes' errors: kept here, so a table to a
		// full disk or a closed pipe fails as the data formats do
		ew := &errWriter{w: w}
		tbl := tablewriter.NewTable(ew,
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithHeaderAutoWrap(tw.WrapNone),
			tablewriter.WithRowAutoWrap(tw.WrapNone),
			tablewriter.WithHeaderAlignment(tw.AlignLeft),
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{Global: tw.AlignLeft, PerColumn: align}),
		)
		if header != nil {
			tbl.Header(toAny(header)...)
		}
		for _, r := range rows {
			if err := tbl.Append(r); err != nil {
				return fmt.Errorf("table %q: %w", t.Title, err)
			}
		}
		if err := tbl.Render(); err != nil {
			return fmt.Errorf("table %q: %w", t.Title, err)
		}
		if ew.err != nil {
			return ew.err
		}
	}
	for _, n := range t.Notes {
		if _, err := fmt.Fprintln(w, n.Text); err != nil {
			return err
		}
	}
	return nil
}

// errWriter keeps the first error of its writes and writes nothing after.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func widthOf(rows [][]string) int {
	if len(rows) == 0 {
		return 0
	}
	return len(rows[0])
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// mdEntity is an HTML character reference, which GFM would render as the
// character it names.
var mdEntity = regexp.MustCompile(`^&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]*);`)

// MarkdownText escapes text (a case name, a label, a cell) so that GitHub
// renders it as written, not as formatting: a backslash before markdown
// punctuation (\ ` * [ ] |), < as &lt; (an HTML tag such as <br>), & as
// &amp; where it starts a character reference, _ unless inside a word
// (snake_case is never emphasis), ~ where two could strike through, # and >
// at the start, and a newline as <br>. Numbers and plain text are unchanged.
func MarkdownText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	rs := []rune(s)
	tildes := strings.Count(s, "~") > 1
	var b strings.Builder
	for i, r := range rs {
		switch {
		case r == '\n':
			b.WriteString("<br>")
		case r == '<':
			b.WriteString("&lt;")
		case r == '&' && mdEntity.MatchString(string(rs[i:])):
			b.WriteString("&amp;")
		case strings.ContainsRune("\\`*[]|", r),
			r == '_' && !inWord(rs, i),
			r == '~' && tildes,
			(r == '#' || r == '>') && i == 0:
			b.WriteRune('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// inWord reports whether the run of underscores at rs[i] has a letter or
// digit on both sides, where GFM never reads it as emphasis.
func inWord(rs []rune, i int) bool {
	j, k := i, i
	for j > 0 && rs[j-1] == '_' {
		j--
	}
	for k < len(rs) && rs[k] == '_' {
		k++
	}
	alnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	return j > 0 && k < len(rs) && alnum(rs[j-1]) && alnum(rs[k])
}

// Note is one footnote, in the two forms the text outputs write: Text as
// written (terminal, stderr, json) and Markdown, where the user's text in
// it (a case name, a label, a tag, a path) is escaped by MarkdownText and
// the project's own words, `mtlbench ab` in backticks included, are kept.
type Note struct {
	Text, Markdown string
}

// Notef is a note whose format is the project's own words and whose
// arguments are the user's: in the markdown form each argument, formatted
// by its verb, goes through MarkdownText.
func Notef(format string, args ...any) Note {
	md := make([]any, len(args))
	for i, a := range args {
		md[i] = mdArg{a}
	}
	return Note{Text: fmt.Sprintf(format, args...), Markdown: fmt.Sprintf(format, md...)}
}

// NoteText is a note of the project's own words alone.
func NoteText(s string) Note { return Note{Text: s, Markdown: s} }

// NoteTexts are the notes' Text forms.
func NoteTexts(ns []Note) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Text
	}
	return out
}

func (n Note) String() string { return n.Text }

// MarshalJSON writes a note as its text: json is data, not markdown.
func (n Note) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeString(&b, n.Text); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// mdArg formats a note's argument as its verb does, then escapes it.
type mdArg struct{ v any }

func (a mdArg) Format(f fmt.State, verb rune) {
	io.WriteString(f, MarkdownText(fmt.Sprintf(fmt.FormatString(f, verb), a.v)))
}

// renderMarkdown writes a GFM table itself rather than through tablewriter's
// markdown renderer, which does not escape pipes or newlines in cells.
// Columns are padded to their display width so the source reads well too.
func (t *Table) renderMarkdown(w io.Writer) error {
	header, rows := t.grid()
	var b bytes.Buffer
	if t.Title != "" {
		fmt.Fprintf(&b, "### %s\n\n", MarkdownText(oneLine(t.Title)))
	}
	ncols := max(len(header), widthOf(rows))
	if ncols > 0 {
		if header == nil {
			header = make([]string, ncols) // GFM requires a header row
		}
		cells := make([][]string, 0, len(rows)+1)
		for _, r := range append([][]string{header}, rows...) {
			e := make([]string, ncols)
			for i, c := range r {
				e[i] = MarkdownText(c) // a pipe would end the cell, a newline the row
			}
			cells = append(cells, e)
		}
		widths := make([]int, ncols)
		for _, r := range cells {
			for i, c := range r {
				widths[i] = max(widths[i], twwidth.Width(c), 3)
			}
		}
		right := rightAligned(ncols, rows)
		line := func(r []string) {
			b.WriteString("|")
			for i, c := range r {
				pad := strings.Repeat(" ", widths[i]-twwidth.Width(c))
				if right[i] {
					b.WriteString(" " + pad + c + " |")
				} else {
					b.WriteString(" " + c + pad + " |")
				}
			}
			b.WriteString("\n")
		}
		line(cells[0])
		b.WriteString("|")
		for i := range ncols {
			if right[i] {
				b.WriteString(" " + strings.Repeat("-", widths[i]-1) + ": |")
			} else {
				b.WriteString(" " + strings.Repeat("-", widths[i]) + " |")
			}
		}
		b.WriteString("\n")
		for _, r := range cells[1:] {
			line(r)
		}
	}
	if len(t.Notes) > 0 {
		if ncols > 0 {
			b.WriteString("\n")
		}
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(n.Markdown, "\n", " "))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (t *Table) renderCSV(w io.Writer) error {
	header, rows := t.grid()
	cw := csv.NewWriter(w)
	if header != nil {
		if err := cw.Write(header); err != nil {
			return err
		}
	}
	if err := cw.WriteAll(rows); err != nil { // WriteAll flushes
		return err
	}
	return cw.Error()
}

// jsonNumber is the JSON number grammar (RFC 8259 section 6).
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

type jsonField struct {
	key string
	val string
	// kind is how val is written: a string, a number, or null (missing).
	kind jsonKind
}

type jsonKind int

const (
	jsonString jsonKind = iota
	jsonNum
	jsonNull
)

// Missing says whether a display cell holds no value: "-", as the text
// forms print one, or nothing. json and jsonl write it as null.
func Missing(cell string) bool {
	c := strings.TrimSpace(cell)
	return c == "" || c == "-"
}

// isJSONNumber says whether a cell's text is a JSON number literal, which
// json writes as it stands.
func isJSONNumber(s string) bool {
	if !jsonNumber.MatchString(s) {
		return false
	}
	// Finite by construction: the grammar has no Inf or NaN.
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// jsonRow is one row as an object whose keys keep the header's order (a Go
// map would sort them).
type jsonRow []jsonField

func (r jsonRow) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range r {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeString(&b, f.key); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		switch f.kind {
		case jsonNull:
			b.WriteString("null")
		case jsonNum:
			b.WriteString(f.val)
		default:
			if err := writeString(&b, f.val); err != nil {
				return nil, err
			}
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeString appends s as a JSON string without HTML escaping, matching
// the encoder setting in writeJSON (json.Marshal would escape < > &).
func writeString(b *bytes.Buffer, s string) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode appends a newline
	return nil
}

// jsonKeys returns unique, non-empty object keys for n columns.
func jsonKeys(header []string, n int) []string {
	keys := make([]string, n)
	used := map[string]bool{}
	for i := range n {
		k := ""
		if i < len(header) {
			k = header[i]
		}
		if k == "" {
			k = fmt.Sprintf("col%d", i+1)
		}
		base := k
		for j := 2; used[k]; j++ {
			k = fmt.Sprintf("%s_%d", base, j)
		}
		used[k] = true
		keys[i] = k
	}
	return keys
}

func (t *Table) jsonRows() ([]jsonRow, error) {
	header, rows := t.grid()
	n := max(len(header), widthOf(rows))
	keys := jsonKeys(header, n)
	// A column is numbers only where every value it holds is one.
	numeric := make([]bool, n)
	for i := range n {
		numeric[i] = true
		for _, r := range rows {
			if !Missing(r[i]) && !isJSONNumber(r[i]) {
				numeric[i] = false
				break
			}
		}
	}
	out := make([]jsonRow, 0, len(rows))
	for _, r := range rows {
		obj := make(jsonRow, n)
		for i := range n {
			f := jsonField{key: keys[i], val: r[i]}
			switch {
			case Missing(r[i]):
				f.kind = jsonNull
			case numeric[i]:
				f.kind = jsonNum
			}
			obj[i] = f
		}
		out = append(out, obj)
	}
	return out, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	// Cells such as "<br>" or "a & b" stay readable.
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
