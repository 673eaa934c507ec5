// Package roofline reads documented performance figures against the limit
// of the hardware they were measured on: it maps the hardware strings of
// the documented history (reports/history/data) to the Apple GPU table
// (bridge/mtl/applegpu) and gives the memory-bandwidth roofline of decode
// tok/s for a model, and a figure's fraction of it.
//
// The roofline is bandwidth / bytes one decode step must read at batch 1
// (every dense weight, the routed experts' share, one embedding row; the KV
// cache is not counted), so it is the most tok/s a single sequence can
// decode on that machine. The bytes come from the model's config, which
// lives in runner/model: reports do not import the runner, so the caller
// passes a ModelBytes (cmd/mtlbench builds it from the presets).
package roofline

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/reports/history"
)

// ModelBytes gives the bytes a batch-1 decode step of a documented model
// must read with its matrices in dtype ("float16", "bf16", ...); false when
// the model or the dtype is not known (an empty dtype is not known).
type ModelBytes func(model, dtype string) (int64, bool)

// chipRE finds an Apple chip anywhere in a hardware string: "Apple M3 Ultra
// (128GB)", "Mac Studio (M2 Ultra)", "m3-max", "M4Pro".
var chipRE = regexp.MustCompile(`\bm([1-9])\s*(pro|max|ultra)?\b`)

// coresRE finds a GPU core count ("40-core GPU", "80 GPU cores", "30-core");
// a count followed by "cpu" is the CPU's and is not matched.
var coresRE = regexp.MustCompile(`\b(\d+)\s*(?:core|cores)\b(?:\s*(gpu|cpu))?|\b(\d+)\s*gpu\s*cores?\b`)

// Machine maps a documented hardware string to its row of the Apple GPU
// table, tolerant of spelling: case, "Apple " or a Mac model before the
// chip, hyphens, and memory sizes after it ("Apple M3 Ultra (128GB)") are
// ignored. A GPU core count in the string picks that bin; without one the
// chip's largest bin is taken, as applegpu.Lookup does. Strings naming no
// chip ("M-series Mac", "unknown") and core counts no bin has give false.
func Machine(hardware string) (applegpu.GPU, bool) {
	s := strings.ToLower(hardware)
	s = strings.NewReplacer("-", " ", "_", " ", "(", " ", ")", " ", ",", " ").Replace(s)
	m := chipRE.FindStringSubmatch(s)
	if m == nil {
		return applegpu.GPU{}, false
	}
	chip := "M" + m[1]
	if m[2] != "" {
		chip += " " + strings.ToUpper(m[2][:1]) + m[2][1:]
	}
	cores := 0
	for _, c := range coresRE.FindAllStringSubmatch(s, -1) {
		n := c[1]
		if n == "" {
			n = c[3]
		} else if c[2] == "cpu" {
			continue
		}
		cores, _ = strconv.Atoi(n)
		break
	}
	if cores > 0 {
		return applegpu.LookupCores(chip, cores)
	}
	return applegpu.Lookup(chip)
}

// Line is the roofline of one model on one machine.
type Line struct {
	GPU   applegpu.GPU
	Bytes int64   // bytes a batch-1 decode step reads
	TokS  float64 // bandwidth / Bytes: the most decode tok/s of one sequence
}

// Label is the line's legend entry, e.g. "M3 Ultra roofline (819 GB/s)".
func (l Line) Label() string {
	return fmt.Sprintf("%s roofline (%s GB/s)", l.GPU.Chip, strconv.FormatFloat(l.GPU.BandwidthGBs, 'f', -1, 64))
}

// TokS is the memory-bandwidth roofline of decode tok/s: the machine's
// bandwidth over the bytes a decode step reads; 0 when bytes is not
// positive.
func TokS(g applegpu.GPU, bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return g.BytesPerSecond() / float64(bytes)
}

// Fraction is tokS over the roofline of a step reading bytes on g; false
// when there is no roofline (no bytes, no bandwidth) or tokS is not a
// positive figure.
func Fraction(tokS float64, g applegpu.GPU, bytes int64) (float64, bool) {
	roof := TokS(g, bytes)
	if roof <= 0 || !(tokS > 0) {
		return 0, false
	}
	return tokS / roof, true
}

// DecodeMetrics are the documented metrics that are decode tok/s of one
// step after another, measured or claimed, and so bounded by the roofline.
// Prefill is compute-bound and is not read against it.
var DecodeMetrics = map[string]bool{
	"tok_s": true, "decode_tok_s": true, "tok_s_limit": true, "tok_s_target": true, "tok_s_projected": true,
}

// For is the roofline of a documented figure's model on its machine: false
// when the machine is not in the table or bytes does not know the model in
// the figure's dtype.
func For(p history.Point, bytes ModelBytes) (Line, bool) {
	if bytes == nil {
		return Line{}, false
	}
	g, ok := Machine(p.Hardware)
	if !ok {
		return Line{}, false
	}
	b, ok := bytes(p.Model, p.DType)
	if !ok || b <= 0 {
		return Line{}, false
	}
	return Line{GPU: g, Bytes: b, TokS: TokS(g, b)}, true
}

// Of is a documented figure's fraction of its roofline. Only decode tok/s
// figures of one sequence (batch 1 or not stated) have one: a batch of B
// decodes B tokens per step, and how many experts such a step reads depends
// on routing the documents do not give.
func Of(p history.Point, bytes ModelBytes) (float64, Line, bool) {
	if !DecodeMetrics[p.Metric] || p.Batch > 1 {
		return 0, Line{}, false
	}
	l, ok := For(p, bytes)
	if !ok {
		return 0, Line{}, false
	}
	f, ok := Fraction(p.Value, l.GPU, l.Bytes)
	return f, l, ok
}

// Documented lists the rooflines of the machines the figures of model were
// measured on (decode tok/s metrics only), one per machine and step size,
// in the order the figures name them.
func Documented(hist []history.Point, model string, bytes ModelBytes) []Line {
	var out []Line
	seen := map[string]bool{}
	for _, p := range hist {
		if !DecodeMetrics[p.Metric] || !strings.EqualFold(p.Model, model) {
			continue
		}
		l, ok := For(p, bytes)
		if !ok {
			continue
		}
		k := fmt.Sprintf("%s/%d/%d", l.GPU.Chip, l.GPU.Cores, l.Bytes)
		if !seen[k] {
			seen[k] = true
			out = append(out, l)
		}
	}
	return out
}
