package history

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/internal/plural"
)

// ImportResult is what ImportMarkdown found.
type ImportResult struct {
	Points []Point
	// Mapped says, per column header (bold markers removed), which field it
	// fed: "date", "series", "batch", "note", "model", "hardware", "dtype",
	// "component", "value:<metric>", or "series+value:<metric>" for a column
	// named after a series whose cells carry a unit ("18.2 tok/s").
	Mapped map[string]string
	// Columns lists the keys of Mapped in order of appearance.
	Columns []string
	// Unmapped lists the columns of imported tables that fed nothing, in
	// order of appearance.
	Unmapped []string
	// Warnings lists tables skipped for want of a value column and value
	// cells that hold a remark rather than a figure, as "line N: ...".
	Warnings []string
}

// A cell that holds a wrong figure is an error, never skipped: a date that
// is no day, a batch that is no count, a negative or non-finite value, a row
// whose cells do not match its header, the same figure twice. Every such
// cell of the page is named, by line, table, row and column, and nothing is
// imported. A value cell that holds words ("OOM", "16 GB/s" in a tok/s
// column) is a remark: skipped with a warning.

// ImportMarkdown reads every GitHub-markdown table in text (outside fenced
// code blocks) that has at least one value column, and turns each value cell
// into a Point. Columns are recognised by case-insensitive synonyms:
//
//	date                                  -> Date
//	version, label, series, variant, ...  -> Series
//	component, op, stage                  -> Component (normalised: moe, attention, norm, ...)
//	batch, batch size, bs                 -> Batch
//	notes, note, comment, description     -> Note
//	model, hardware/device/chip, dtype    -> Model, Hardware, DType
//	tps, tok/s, throughput                -> value, metric tok_s (decode_/prefill_ when named)
//	time, duration                        -> value, metric time_ms, unit ms
//	latency                               -> value, metric latency_ms, unit ms
//	time/layer, total, %..., speedup, scaling -> ms_per_layer, ms_total, pct, speedup, scaling
//
// A column with another name whose cells all read as numbers with a unit is
// taken as a series of values. Fields a table lacks come from defaults (model,
// hardware, source, date...); Section is the nearest heading above the table
// (defaults.Section when there is none); Line is the row's line in text.
// Cells may carry bold markers and qualifiers: "**10+**" (>= 10), "~5",
// "<1ms", "300+", "6.8-7.0" (range), "84,000". A row whose label reads as a
// throughput ("**TPS** | **11.5**") gives a tok_s point even in a time column.
// It is an error when no table could be imported, and for every wrong cell
// (see above), all of them reported at once.
func ImportMarkdown(text []byte, defaults Point) (*ImportResult, error) {
	res := &ImportResult{Mapped: map[string]string{}}
	var errs []string
	seen := map[string]int{} // a point's fields but its line -> its line
	// A Windows editor (Notepad) starts the file with a UTF-8 byte-order
	// mark: kept, it was a cell before the header's first pipe, and every
	// row was said to lack one.
	text = bytes.TrimPrefix(text, []byte("\uFEFF"))
	lines := strings.Split(strings.ReplaceAll(string(text), "\r\n", "\n"), "\n")
	section := defaults.Section
	fence := ""
	unmapped := map[string]bool{}
	tables, found := 0, 0
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		// Tables inside fenced code are examples, not data.
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := heading.FindStringSubmatch(trimmed); m != nil {
			section = cleanCell(m[1])
			continue
		}
		if !strings.Contains(line, "|") || i+1 >= len(lines) || !delimiterRow.MatchString(lines[i+1]) {
			continue
		}
		header := splitRow(line)
		start := i + 1 // 1-based line of the header row
		found++
		i += 2
		var rows [][]string
		var rowLines []int
		for ; i < len(lines) && strings.Contains(lines[i], "|") && strings.TrimSpace(lines[i]) != ""; i++ {
			rows = append(rows, splitRow(lines[i]))
			rowLines = append(rowLines, i+1)
		}
		i-- // the loop's i++ must see the line that ended the table

		cols := make([]column, len(header))
		hasValue := false
		for c, h := range header {
			cols[c] = classify(h, rows, c)
			hasValue = hasValue || cols[c].metric != ""
		}
		if !hasValue {
			res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: table %q under %q has no value column, skipped", start, strings.Join(cleanAll(header), " | "), section))
			continue
		}
		tables++
		for c, col := range cols {
			name := cleanCell(header[c])
			if col.field == "" && col.metric == "" {
				if !unmapped[name] {
					unmapped[name] = true
					res.Unmapped = append(res.Unmapped, name)
				}
				continue
			}
			if _, ok := res.Mapped[name]; !ok {
				res.Columns = append(res.Columns, name)
			}
			res.Mapped[name] = col.describe()
		}
		for r, row := range rows {
			at := rowAt{line: rowLines[r], table: found, header: start, row: r + 1}
			if len(row) != len(header) {
				errs = append(errs, at.String()+fmt.Sprintf(": %s, but its header has %d", plural.Of(len(row), "cell"), len(header)))
				continue
			}
			var repeats []string
			first := 0
			for _, p := range importRow(res, &errs, at, defaults, section, header, cols, row) {
				k := p
				k.Line = 0
				key := fmt.Sprintf("%#v", k)
				if l, dup := seen[key]; dup {
					repeats = append(repeats, p.Metric+" "+strconv.FormatFloat(p.Value, 'g', -1, 64))
					first = l
					continue
				}
				seen[key] = p.Line
				res.Points = append(res.Points, p)
			}
			if len(repeats) > 0 {
				errs = append(errs, at.String()+fmt.Sprintf(": repeats line %d (%s): the same figure twice", first, strings.Join(repeats, ", ")))
			}
		}
	}
	if len(errs) > 0 {
		return res, errors.New(strings.Join(errs, "\n"))
	}
	if tables == 0 {
		return res, errors.New("no markdown table with a value column (tps, tok/s, time, %...) found")
	}
	return res, nil
}

// rowAt locates a table row: its line, and which table and row it is.
type rowAt struct{ line, table, header, row int }

func (a rowAt) String() string {
	return fmt.Sprintf("line %d: table %d (header at line %d), row %d", a.line, a.table, a.header, a.row)
}

// cell locates one cell of the row by its column's header.
func (a rowAt) cell(header string) string {
	return fmt.Sprintf("%s, column %q", a, cleanCell(header))
}

var (
	heading      = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*$`)
	delimiterRow = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)
	// quantity reads "~75-85ms", "**10+**", "<1 ms", "84,000", "1.76x".
	quantity  = regexp.MustCompile(`^(~|≈|>=|≥|<=|≤|>|<)?\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(\+)?(?:\s*(?:-|–|—|to)\s*(\d+(?:\.\d+)?))?\s*(.*)$`)
	thousands = regexp.MustCompile(`(\d),(\d{3})\b`)
	parens    = regexp.MustCompile(`\s*\([^)]*\)`)
	parenText = regexp.MustCompile(`\(([^)]*)\)`)
	rateUnit  = regexp.MustCompile(`^[^\s,;]+/[^\s,;]+$`) // GB/s, req/s: a unit, not a remark`
)

// column says what one table column feeds.
type column struct {
	field        string // a Point text field, or "" for a value column
	metric, unit string // set for value columns
	series       string // for value columns named after a series
	// cellUnit is the unit its header gives a value column's bare
	// numbers ("Latency (s)"), converted to unit as a cell's own is.
	cellUnit string
}

func (c column) describe() string {
	switch {
	case c.metric != "" && c.series != "":
		return "series+value:" + c.metric
	case c.metric != "":
		return "value:" + c.metric
	}
	return c.field
}

func splitRow(line string) []string {
	s := strings.TrimSpace(line)
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '|':
			cur.WriteByte('|')
			i++
		case s[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// cleanCell removes emphasis markers and <br>, which carry no data.
func cleanCell(s string) string {
	s = strings.ReplaceAll(s, "**", "")
	s = strings.ReplaceAll(s, "__", "")
	s = strings.ReplaceAll(s, "<br>", " ")
	return strings.TrimSpace(s)
}

func cleanAll(cells []string) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = cleanCell(c)
	}
	return out
}

// classifyName maps a header (or a row label) to a column by its name only.
func classifyName(h string) column {
	n := strings.Join(strings.Fields(strings.ToLower(cleanCell(h))), " ")
	bare := strings.TrimSpace(parens.ReplaceAllString(n, ""))
	// The header's unit, if its parentheses name one; a rate of something
	// else than tokens (GB/s, req/s) is no column of the history's.
	var cellUnit string
	for _, m := range parenText.FindAllStringSubmatch(n, -1) {
		u := strings.TrimSpace(m[1])
		if known, ok := units[u]; ok {
			cellUnit = known
		} else if rateUnit.MatchString(u) {
			return column{}
		}
	}
	value := func(metric, unit string) column { return column{metric: metric, unit: unit, cellUnit: cellUnit} }
	is := func(names ...string) bool {
		for _, x := range names {
			if n == x || bare == x {
				return true
			}
		}
		return false
	}
	throughput := func(s string) bool {
		for _, w := range []string{"tps", "tok/s", "tokens/s", "tok_s", "tokens/sec", "tok/sec", "throughput"} {
			if s == w || strings.HasSuffix(s, " "+w) {
				return true
			}
		}
		return false
	}
	switch {
	case is("date", "day", "when"):
		return column{field: "date"}
	case is("version", "label", "series", "variant", "config", "configuration", "implementation", "backend", "name"):
		return column{field: "series"}
	case is("component", "op", "operation", "stage", "layer"):
		return column{field: "component"}
	case is("batch", "batch size", "batch_size", "bs", "batch-size"):
		return column{field: "batch"}
	case is("notes", "note", "comment", "comments", "description", "remarks"):
		return column{field: "note"}
	case is("model"):
		return column{field: "model"}
	case is("hardware", "device", "chip", "machine", "gpu"):
		return column{field: "hardware"}
	case is("dtype", "precision"):
		return column{field: "dtype"}
	case throughput(bare) || cellUnit == "tok/s": // "Decode (t/s)" too
		metric := "tok_s"
		if bare == "decode" || strings.HasPrefix(bare, "decode ") {
			metric = "decode_tok_s"
		} else if bare == "prefill" || strings.HasPrefix(bare, "prefill ") {
			metric = "prefill_tok_s"
		}
		return value(metric, "tok/s")
	case is("time/layer", "time per layer", "ms/layer", "per layer"):
		return value("ms_per_layer", "ms")
	case is("total", "total time"):
		return value("ms_total", "ms")
	case is("latency"):
		return value("latency_ms", "ms")
	case is("time", "ms", "duration"):
		return value("time_ms", "ms")
	case strings.HasPrefix(n, "%") || is("pct", "percent", "share"):
		return value("pct", "%")
	case is("speedup"):
		return value("speedup", "x")
	case is("scaling"):
		return value("scaling", "x")
	}
	return column{}
}

// classify maps a column by its name, else by its cells: a column whose
// non-empty cells all read as a number with a throughput or time unit is a
// series of values named by its header.
func classify(h string, rows [][]string, c int) column {
	if col := classifyName(h); col.field != "" || col.metric != "" {
		return col
	}
	unit, n := "", 0
	for _, r := range rows {
		if c >= len(r) || emptyCell(r[c]) {
			continue
		}
		q, ok := parseQuantity(r[c])
		if !ok || q.unit == "" || (unit != "" && q.unit != unit) {
			return column{}
		}
		unit = q.unit
		n++
	}
	metric := map[string]string{"tok/s": "tok_s", "ms": "time_ms", "x": "speedup", "%": "pct", "GB": "memory_gb"}[unit]
	if n == 0 || metric == "" {
		return column{}
	}
	return column{metric: metric, unit: unit, series: cleanCell(h)}
}

type parsedQuantity struct {
	value, max float64
	qualifier  string
	unit       string
}

var units = map[string]string{
	"ms": "ms", "s": "s", "us": "us", "µs": "us", "μs": "us", "tok/s": "tok/s", "tps": "tok/s",
	"sec": "s", "secs": "s", "seconds": "s", "msec": "ms", "milliseconds": "ms", "microseconds": "us",
	"tokens/s": "tok/s", "tok/sec": "tok/s", "tokens/sec": "tok/s", "t/s": "tok/s",
	"x": "x", "×": "x", "%": "%", "gb": "GB", "mb": "MB",
}

func emptyCell(s string) bool {
	switch strings.ToLower(cleanCell(s)) {
	case "", "-", "–", "—", "n/a", "na", "?":
		return true
	}
	return false
}

// timeUnits are the units convert moves between, in seconds.
var timeUnits = map[string]float64{"s": 1, "ms": 1e-3, "us": 1e-6}

// convert is the factor from unit from to unit to, where both are times.
func convert(from, to string) (float64, bool) {
	a, ok1 := timeUnits[from]
	b, ok2 := timeUnits[to]
	return a / b, ok1 && ok2
}

func parseQuantity(s string) (parsedQuantity, bool) {
	s = cleanCell(s)
	s = strings.ReplaceAll(s, "`", "")
	s = thousands.ReplaceAllString(s, "$1$2")
	m := quantity.FindStringSubmatch(s)
	if m == nil {
		return parsedQuantity{}, false
	}
	var q parsedQuantity
	var err error
	// 1e400 parses as +Inf with a range error: not a figure anyone measured.
	if q.value, err = strconv.ParseFloat(m[2], 64); err != nil || math.IsInf(q.value, 0) || math.IsNaN(q.value) {
		return parsedQuantity{}, false
	}
	switch m[1] {
	case "~", "≈":
		q.qualifier = "~"
	case ">=", "≥":
		q.qualifier = ">="
	case "<=", "≤":
		q.qualifier = "<="
	case ">", "<":
		q.qualifier = m[1]
	}
	if m[3] == "+" {
		q.qualifier = ">="
	}
	if m[4] != "" {
		if q.max, err = strconv.ParseFloat(m[4], 64); err != nil || math.IsInf(q.max, 0) || math.IsNaN(q.max) {
			return parsedQuantity{}, false
		}
		q.qualifier = "range"
		if m[1] == "~" || m[1] == "≈" {
			q.qualifier = "~range"
		}
	}
	if rest := strings.TrimSpace(m[5]); rest != "" {
		u, ok := units[strings.ToLower(rest)]
		if !ok {
			return parsedQuantity{}, false
		}
		q.unit = u
	}
	return q, true
}

// normComponent folds component labels ("Attention (QKV+SDPA+O)",
// "**Total**", "vLLM overhead") onto the shipped vocabulary.
func normComponent(s string) string {
	l := strings.ToLower(cleanCell(s))
	switch {
	case strings.Contains(l, "overhead"):
		return "overhead"
	case strings.Contains(l, "moe") || strings.Contains(l, "expert"):
		return "moe"
	case strings.Contains(l, "attention") || strings.Contains(l, "attn") || strings.Contains(l, "sdpa"):
		return "attention"
	case strings.Contains(l, "norm"):
		return "norm"
	case strings.Contains(l, "compute"):
		return "compute"
	case strings.Contains(l, "total"):
		return "total"
	}
	return "other"
}

func importRow(res *ImportResult, errs *[]string, at rowAt, defaults Point, section string, header []string, cols []column, row []string) []Point {
	line := at.line
	base := defaults
	base.Params = maps.Clone(defaults.Params)
	base.Line = line
	if section != "" {
		base.Section = section
	}
	// A row labelled like a value column ("TPS") overrides that row's metric.
	var override column
	for c, col := range cols {
		if c >= len(row) {
			break
		}
		cell := cleanCell(row[c])
		if cell == "" {
			continue
		}
		switch col.field {
		case "date":
			if why := DateProblem(cell); why != "" {
				*errs = append(*errs, fmt.Sprintf("%s: date %q %s", at.cell(header[c]), cell, why))
				continue
			}
			base.Date = cell
		case "series":
			base.Series = cell
		case "note":
			base.Note = cell
		case "model":
			base.Model = cell
		case "hardware":
			base.Hardware = cell
		case "dtype":
			base.DType = cell
		case "component":
			// Only throughput labels override: "Total" is a component.
			if o := classifyName(cell); o.unit == "tok/s" {
				override = o
				continue
			}
			base.Component = normComponent(cell)
		case "batch":
			b, why := parseBatch(cell)
			if why != "" {
				*errs = append(*errs, fmt.Sprintf("%s: batch %q %s", at.cell(header[c]), cell, why))
				continue
			}
			base.Batch = b
		}
	}
	var out []Point
	for c, col := range cols {
		if col.metric == "" || c >= len(row) || emptyCell(row[c]) {
			continue
		}
		q, ok := parseQuantity(row[c])
		if !ok {
			if why := wrongFigure(row[c]); why != "" {
				*errs = append(*errs, fmt.Sprintf("%s: %q %s", at.cell(header[c]), cleanCell(row[c]), why))
				continue
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: column %q: %q holds no figure, skipped", line, cleanCell(header[c]), cleanCell(row[c])))
			continue
		}
		p := base
		p.Params = maps.Clone(base.Params)
		p.Metric, p.Unit = col.metric, col.unit
		cellUnit := col.cellUnit
		if override.metric != "" {
			p.Metric, p.Unit, cellUnit = override.metric, override.unit, override.cellUnit
		}
		if q.unit == "" {
			q.unit = cellUnit
		}
		switch {
		case q.unit != "" && p.Unit == "":
			p.Unit = q.unit
		case q.unit != "" && q.unit != p.Unit:
			// A cell's own unit beats its column's: converted where both
			// are times, else the figure is not the column's metric.
			f, ok := convert(q.unit, p.Unit)
			if !ok {
				res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: %q is in %s, but its column is in %s: skipped", line, cleanCell(row[c]), q.unit, p.Unit))
				continue
			}
			q.value, q.max = q.value*f, q.max*f
		}
		if IsRange(q.qualifier) && q.max < q.value {
			res.Warnings = append(res.Warnings, fmt.Sprintf("line %d: range %q ends below its start: skipped", line, cleanCell(row[c])))
			continue
		}
		if col.series != "" {
			p.Series = col.series
		}
		if err := checkFigures(p.Metric, p.Unit, q.value, q.max); err != nil {
			*errs = append(*errs, fmt.Sprintf("%s: %q: %v", at.cell(header[c]), cleanCell(row[c]), err))
			continue
		}
		p.Value, p.Qualifier = q.value, q.qualifier
		if IsRange(q.qualifier) {
			if p.Params == nil {
				p.Params = map[string]string{}
			}
			p.Params["max"] = strconv.FormatFloat(q.max, 'f', -1, 64)
		}
		out = append(out, p)
	}
	return out
}

// checkFigures holds a cell's figure, and a range's upper end, to the rule
// every stored figure meets (metrics.CheckValue).
func checkFigures(metric, unit string, v, max float64) error {
	if err := metrics.CheckValue(metric, unit, v); err != nil {
		return err
	}
	if max != 0 {
		return metrics.CheckValue(metric, unit, max)
	}
	return nil
}

// dateForm is the shape of a history date, whether or not it is a real day.
var dateForm = regexp.MustCompile(`^\d{4}(-\d{2}(-\d{2})?)?$`)

// wrongFigure says why a value cell parseQuantity refused is a figure, but
// a wrong one ("-5": negative; "1e999": beyond a float64), or "" when the
// cell holds no figure at all.
func wrongFigure(cell string) string {
	s := cleanCell(cell)
	for _, minus := range []string{"-", "−"} {
		if rest, ok := strings.CutPrefix(s, minus); ok {
			if _, ok := parseQuantity(rest); ok {
				return "is negative: a figure the history keeps is never below zero"
			}
		}
	}
	if m := quantity.FindStringSubmatch(thousands.ReplaceAllString(s, "$1$2")); m != nil {
		for _, n := range []string{m[2], m[4]} {
			if f, err := strconv.ParseFloat(n, 64); n != "" && (err != nil || math.IsInf(f, 0)) {
				return "is beyond a float64's range"
			}
		}
	}
	return ""
}

// Undated is the date of a figure whose document gives none.
const Undated = "unknown"

// DateProblem says why s is no date the history keeps, "" when it is one:
// YYYY-MM-DD, YYYY-MM or YYYY, each a real day, month or year, or Undated
// (in any case, as the chart reads it). History files, history import's
// cells and its --date are read by this one rule.
func DateProblem(s string) string {
	if strings.EqualFold(s, Undated) {
		return ""
	}
	for _, layout := range []string{"2006-01-02", "2006-01", "2006"} {
		if _, err := time.Parse(layout, s); err == nil {
			return ""
		}
	}
	if dateForm.MatchString(s) {
		return "is no calendar date"
	}
	return "is not YYYY-MM-DD, YYYY-MM, YYYY or " + Undated
}
