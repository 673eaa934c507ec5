// Package history loads mtlbench's documented performance history: the
// figures the project's source documents report (tok/s per version, per
// batch size, per-component breakdowns, isolated op timings), shipped as
// YAML in reports/history/data and embedded in the binary, so measured runs can
// be plotted and compared against what was documented.
//
// # File format
//
// A file is a YAML list of points, one mapping per reported figure
// (required: source, date, model, metric, value, unit):
//
//	# 001-knowledge-base.yaml
//	- source: 001_42c42577c32c4287.txt # document file name
//	  section: Performance History     # heading in the document
//	  date: "2024-12-11"               # a real day; "2025-12" = month only, "2025" year, or "unknown"
//	  hardware: M-series Mac           # "unknown" when the document does not say
//	  model: Qwen3-30B-A3B
//	  dtype: float16                   # only where the document states it
//	  batch: 1                         # 0 or absent = not stated
//	  series: Cached offsets           # line label: version, backend, variant
//	  component: moe                   # moe, attention, norm, other, compute, overhead, total
//	  metric: tok_s
//	  value: 11.6
//	  qualifier: ">="                  # "", "~", ">=", ">", "<=", "<", "range", "~range"
//	  unit: tok/s
//	  params: {moe_chunk: "64"}        # benchmark parameters, strings
//	  note: Attention index optimization
//
// Qualifiers keep the document's wording honest: "10+" is stored as value
// 10 with qualifier ">=", "~5" as 5 with "~", "<1ms" as 1 with "<", and a
// range such as "6-7" as value 6 with qualifier "range" and params max: "7"
// ("~30-35" with "~range").
//
// # Metrics
//
//	tok_s            throughput as the document gives it ("TPS", "tok/s");
//	                 a filter for tok_s finds decode_tok_s too (Filter)
//	decode_tok_s     decode throughput, where the document says decode
//	prefill_tok_s    prefill throughput
//	tok_s_limit      a theoretical limit or ceiling the document computes
//	tok_s_target     a goal ("Target: 50+ TPS"), never a measurement
//	tok_s_projected  the expected result of a proposed optimisation
//	ms_per_layer     time of one layer (component) in one decode step
//	ms_total         time of a component over all layers of one step, or
//	                 a profile total (params say over what)
//	ms_forward       forward pass time; ms_step: whole step time
//	ms_per_op        one op call (params/note say which op); ms_per_call
//	ms_per_batch     time per batch of a pipeline stage
//	ms_saved         time saved per forward
//	pct              share of a total (note says of what)
//	gain_pct         improvement in percent
//	speedup          ratio new/old (x); speedup_projected for proposals
//	scaling          throughput relative to batch 1 (x)
//	memory_gb        resident memory
//	tolerance, deterministic_pct  precision claims (003, model unknown)
//
// Figures are stored once per section that states them, so one number may
// appear in two sections (e.g. a history table and a list of working
// models); filter by Section or Series to pick one.
package history

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/internal/atomicfile"
	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// shipped holds the documented history: one YAML file per source document.
// New files dropped into data/ (for example a table imported with
// ImportMarkdown and written with Save) are embedded on the next build.
//
//go:embed data/*.yaml
var shipped embed.FS

// Point is one documented figure.
type Point struct {
	Source, Section, Date, Hardware, Model, DType, Series, Metric, Unit, Component, Qualifier, Note string

	Batch  int // 0 = not stated
	Value  float64
	Params map[string]string

	// File and Line locate the point's mapping in the file it was loaded
	// from (or the table row it was imported from); Save does not write them.
	File string
	Line int
}

// Figure is the point's value as the document wrote it, for tables: "~31",
// ">=50", a range "6–7" (value to params.max), "~30–35", or the bare number.
func (p Point) Figure() string {
	v := strconv.FormatFloat(p.Value, 'f', -1, 64)
	switch p.Qualifier {
	case "":
		return v
	case "range":
		return v + "–" + p.Params["max"]
	case "~range":
		return "~" + v + "–" + p.Params["max"]
	}
	return p.Qualifier + v
}

// IsRange reports whether a qualifier stores a range: the value is its
// lower end and params.max its upper.
func IsRange(qualifier string) bool { return qualifier == "range" || qualifier == "~range" }

// Qualifiers lists the accepted Qualifier values.
var Qualifiers = []string{"", "~", ">=", ">", "<=", "<", "range", "~range"}

// requiredFields are the fields a point cannot be plotted or compared without.
var requiredFields = []string{"source", "date", "model", "metric", "value", "unit"}

// Load reads every *.yaml file in dir (not recursively), in name order.
// Problems are reported as "file:line: ..." and all of them are returned
// at once, so a broken data file can be fixed in one pass.
func Load(dir string) ([]Point, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var (
		points []Point
		errs   []error
	)
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		name := filepath.Join(dir, e.Name())
		data, err := readfile.Read(name, readfile.Config, "a history file")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p, err := parse(name, data)
		points = append(points, p...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return points, errors.Join(errs...)
}

// Embedded returns the history shipped in reports/history/data; File is the
// file's name there.
func Embedded() ([]Point, error) {
	files, err := fs.Sub(shipped, "data")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var (
		points []Point
		errs   []error
	)
	for _, n := range names {
		data, err := fs.ReadFile(files, n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p, err := parse(path.Base(n), data)
		points = append(points, p...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return points, errors.Join(errs...)
}

// ModelKey is a model name with case and the separators '-', '_' and ' '
// dropped: the documents' "GPT-2" and "TinyLlama-1.1B" and the presets'
// gpt2 and tinyllama-1.1b give the same key.
func ModelKey(name string) string {
	return strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(strings.TrimSpace(name)))
}

// SameModel reports whether two model names have one ModelKey.
func SameModel(a, b string) bool { return ModelKey(a) == ModelKey(b) }

// metricFamilies names, for a metric that is also a family, the metrics it
// takes in: tok_s is measured throughput as the document gives it, and
// decode_tok_s the same figure where the document says decode (history
// import names a "Decode" column so), so asking for tok_s finds both.
var metricFamilies = map[string][]string{"tok_s": {"tok_s", "decode_tok_s"}}

// MetricMatches reports whether a point's metric got answers a request for
// want: the same name (case-insensitive), or one of want's family.
func MetricMatches(want, got string) bool {
	for _, m := range metricFamilies[strings.ToLower(want)] {
		if strings.EqualFold(m, got) {
			return true
		}
	}
	return strings.EqualFold(want, got)
}

// MeasuredThroughput reports whether metric is a measured throughput figure
// (tok_s or decode_tok_s; never a target, limit or projection).
func MeasuredThroughput(metric string) bool { return MetricMatches("tok_s", metric) }

// Filter returns the points matching model (SameModel), metric
// (MetricMatches) and series (case-insensitive, exact); an empty argument
// matches everything.
func Filter(points []Point, model, metric, series string) []Point {
	match := func(want, got string) bool { return want == "" || strings.EqualFold(want, got) }
	var out []Point
	for _, p := range points {
		if (model == "" || SameModel(model, p.Model)) && (metric == "" || MetricMatches(metric, p.Metric)) && match(series, p.Series) {
			out = append(out, p)
		}
	}
	return out
}

// yamlLine matches the "yaml: line N: msg" prefix of yaml.v3 errors so they
// can be rewritten as file:line like every other error here.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func parse(file string, data []byte) ([]Point, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, fmt.Errorf("%s:%s: %s", file, m[1], m[2])
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty file: no points
	}
	root := doc.Content[0]
	if root.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("%s:%d: top level must be a list of points", file, root.Line)
	}
	var (
		points []Point
		errs   []error
	)
	for _, item := range root.Content {
		p, perrs := parsePoint(file, item)
		if len(perrs) > 0 {
			errs = append(errs, perrs...)
			continue
		}
		points = append(points, p)
	}
	return points, errors.Join(errs...)
}

func parsePoint(file string, n *yaml.Node) (Point, []error) {
	var errs []error
	errf := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...)))
	}
	p := Point{File: file, Line: n.Line}
	if n.Kind != yaml.MappingNode {
		errf(n.Line, "point must be a mapping")
		return p, errs
	}
	seen := map[string]bool{}
	valueLine := 0 // where a finite value was read
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if seen[key] {
			errf(k.Line, "duplicate field %q", key)
			continue
		}
		seen[key] = true
		if key == "params" {
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue
			}
			if v.Kind != yaml.MappingNode {
				errf(v.Line, "params must be a mapping of name: value")
				continue
			}
			p.Params = map[string]string{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				pk, pv := v.Content[j], v.Content[j+1]
				if pv.Kind != yaml.ScalarNode {
					errf(pv.Line, "params.%s must be a scalar", pk.Value)
					continue
				}
				p.Params[pk.Value] = pv.Value
			}
			continue
		}
		if v.Kind != yaml.ScalarNode {
			errf(v.Line, "field %q must be a scalar", key)
			continue
		}
		s := v.Value
		switch key {
		case "source":
			p.Source = s
		case "section":
			p.Section = s
		case "date":
			p.Date = s
			if why := DateProblem(s); s != "" && why != "" {
				errf(v.Line, "date %q %s", s, why)
			}
		case "hardware":
			p.Hardware = s
		case "model":
			p.Model = s
		case "dtype":
			p.DType = s
		case "series":
			p.Series = s
		case "metric":
			p.Metric = s
		case "unit":
			p.Unit = s
		case "component":
			p.Component = s
		case "qualifier":
			p.Qualifier = s
		case "note":
			p.Note = s
		case "batch":
			b, why := parseBatch(s)
			if why != "" {
				errf(v.Line, "batch %q %s", s, why)
			}
			p.Batch = b
		case "value":
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				errf(v.Line, "value %q is not a finite number", s)
				break
			}
			p.Value, valueLine = f, v.Line
		default:
			// Unknown keys are refused: a typo ("vaule") would otherwise
			// silently drop a figure.
			errf(k.Line, "unknown field %q", key)
		}
	}
	var missing []string
	for _, f := range requiredFields {
		if !seen[f] || (f != "value" && fieldString(p, f) == "") {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		errf(n.Line, "point missing required field(s): %s", strings.Join(missing, ", "))
	}
	if valueLine > 0 {
		if err := metrics.CheckValue(p.Metric, p.Unit, p.Value); err != nil {
			errf(valueLine, "%v", err)
		}
	}
	if err := checkQualifier(p); err != nil {
		errf(n.Line, "%v", err)
	}
	return p, errs
}

func fieldString(p Point, f string) string {
	switch f {
	case "source":
		return p.Source
	case "date":
		return p.Date
	case "model":
		return p.Model
	case "metric":
		return p.Metric
	case "unit":
		return p.Unit
	}
	return ""
}

func checkQualifier(p Point) error {
	ok := false
	for _, q := range Qualifiers {
		ok = ok || p.Qualifier == q
	}
	if !ok {
		return fmt.Errorf("qualifier %q is not one of %q", p.Qualifier, Qualifiers)
	}
	if IsRange(p.Qualifier) {
		max, err := strconv.ParseFloat(p.Params["max"], 64)
		if err != nil {
			return fmt.Errorf("qualifier %q needs params.max, the upper end of the range", p.Qualifier)
		}
		if err := metrics.CheckValue(p.Metric, p.Unit, max); err != nil {
			return fmt.Errorf("params.max: %w", err)
		}
		// As history import skips such a cell: the chart and the table
		// would show a range running backwards (10–5).
		if max < p.Value {
			return fmt.Errorf("params.max %s is below the value %s: a range's upper end cannot be below its start",
				p.Params["max"], strconv.FormatFloat(p.Value, 'g', -1, 64))
		}
	}
	return nil
}

// savedPoint fixes the field order and omits empty optional fields, so
// saved files look like the shipped ones.
type savedPoint struct {
	Source    string            `yaml:"source"`
	Section   string            `yaml:"section,omitempty"`
	Date      string            `yaml:"date"`
	Hardware  string            `yaml:"hardware,omitempty"`
	Model     string            `yaml:"model"`
	DType     string            `yaml:"dtype,omitempty"`
	Batch     int               `yaml:"batch,omitempty"`
	Series    string            `yaml:"series,omitempty"`
	Component string            `yaml:"component,omitempty"`
	Metric    string            `yaml:"metric"`
	Value     float64           `yaml:"value"`
	Qualifier string            `yaml:"qualifier,omitempty"`
	Unit      string            `yaml:"unit"`
	Params    map[string]string `yaml:"params,omitempty"`
	Note      string            `yaml:"note,omitempty"`
}

// Save writes points to path in the shipped format (File and Line are not
// written). It refuses points Load would reject, so a saved file can be
// dropped into reports/history/data as is.
func Save(path string, points []Point) error {
	if err := Check(points); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	out := make([]savedPoint, len(points))
	for i, p := range points {
		out[i] = savedPoint{
			Source: p.Source, Section: p.Section, Date: p.Date, Hardware: p.Hardware,
			Model: p.Model, DType: p.DType, Batch: p.Batch, Series: p.Series,
			Component: p.Component, Metric: p.Metric, Value: p.Value,
			Qualifier: p.Qualifier, Unit: p.Unit, Params: p.Params, Note: p.Note,
		}
		if len(out[i].Params) == 0 {
			out[i].Params = nil
		}
	}
	var b bytes.Buffer
	b.WriteString("# mtlbench documented performance history (format: package reports/history).\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if len(out) == 0 {
		b.WriteString("[]\n")
	} else if err := enc.Encode(out); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	// Whole or not at all: every command reads the user's history files,
	// so a write cut short would leave one they warn about.
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(b.Bytes()); return err }); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// Check refuses points Load would reject: a missing required field, a value
// the metric cannot take (metrics.CheckValue), a negative batch, a bad
// qualifier.
func Check(points []Point) error {
	var errs []error
	for i, p := range points {
		var missing []string
		for _, f := range requiredFields {
			if f != "value" && fieldString(p, f) == "" {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("point %d (%s): missing required field(s): %s", i, where(p), strings.Join(missing, ", ")))
		}
		if err := metrics.CheckValue(p.Metric, p.Unit, p.Value); err != nil {
			errs = append(errs, fmt.Errorf("point %d (%s): %w", i, where(p), err))
		}
		if p.Batch < 0 {
			errs = append(errs, fmt.Errorf("point %d (%s): negative batch %d", i, where(p), p.Batch))
		}
		if err := checkQualifier(p); err != nil {
			errs = append(errs, fmt.Errorf("point %d (%s): %w", i, where(p), err))
		}
	}
	return errors.Join(errs...)
}

// LoadFile reads one history file.
func LoadFile(path string) ([]Point, error) {
	data, err := readfile.Read(path, readfile.Config, "a history file")
	if err != nil {
		return nil, err
	}
	return parse(path, data)
}

// Merge is old with the points of each (source, model) that points holds
// replaced by them: a page imported again updates its figures, and another
// page of the same name keeps its own. replaced counts the points dropped.
func Merge(old, points []Point) (merged []Point, replaced int) {
	type key struct{ source, model string }
	in := map[key]bool{}
	for _, p := range points {
		in[key{p.Source, ModelKey(p.Model)}] = true
	}
	for _, p := range old {
		if in[key{p.Source, ModelKey(p.Model)}] {
			replaced++
			continue
		}
		merged = append(merged, p)
	}
	return append(merged, points...), replaced
}

func where(p Point) string {
	switch {
	case p.File != "":
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	case p.Line > 0:
		return fmt.Sprintf("line %d, %s %s", p.Line, p.Series, p.Metric)
	}
	return p.Series + " " + p.Metric
}

// parseBatch reads a point's batch, a history file's field and an imported
// table's cell alike, saying why one is none: 0 is how a point says no
// batch is stated (Point.Batch), so a batch of 0 would read as none.
func parseBatch(s string) (int, string) {
	b, err := strconv.Atoi(s)
	switch {
	case err != nil || b < 0:
		return 0, "is not a whole number of sequences"
	case b == 0:
		return 0, "is no count of sequences (1 or more; leave it out where none is stated)"
	}
	return b, ""
}
