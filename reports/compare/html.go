package compare

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/reports/table"
)

// pageRow is one row of the HTML page.
type pageRow struct {
	Case, A, ACI, B, BCI, Delta, P, N, Verdict, Class string
}

type pageTable struct {
	Title string
	Rows  []pageRow
	Notes []string
}

type page struct {
	Title      string
	A, B       string
	Alpha      float64
	NotComp    string
	Tables     []pageTable
	Notes      []string
	OnlyA      []string
	OnlyB      []string
	OneSided   []string
	Images     []string
	Generated  string
	StyleClass map[string]string
}

var pageTemplate = template.Must(template.New("compare").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:-apple-system,Helvetica,Arial,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}
td.better{background:#e3f6e3}td.worse{background:#fbe3e3}td.na{color:#888}
.note{color:#555;font-size:0.9em;margin:0.2em 0}
img{max-width:100%;border:1px solid #eee;margin:0.5em 0}
</style></head><body>
<h1>{{.Title}}</h1>
<p><b>A</b> (baseline): {{.A}}<br><b>B</b> (candidate): {{.B}}</p>
<p class="note">Medians with 95% confidence intervals; change is B against A; p is the Mann-Whitney U test's; ~ means no significant difference at alpha {{.Alpha}}.</p>
{{if .NotComp}}<p><b>Not comparable:</b> {{.NotComp}}</p>{{end}}
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{range .Tables}}<h2>{{.Title}}</h2>
<table><tr><th>case</th><th>A median</th><th>A 95% CI</th><th>B median</th><th>B 95% CI</th><th>change</th><th>p</th><th>n A+B</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{.Case}}</td><td>{{.A}}</td><td>{{.ACI}}</td><td>{{.B}}</td><td>{{.BCI}}</td><td>{{.Delta}}</td><td>{{.P}}</td><td>{{.N}}</td><td class="{{.Class}}">{{.Verdict}}</td></tr>
{{end}}</table>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}{{end}}
{{if .OneSided}}<h2>Metrics one side records</h2><ul>
{{range .OneSided}}<li>{{.}}</li>{{end}}</ul>
{{end}}{{if or .OnlyA .OnlyB}}<h2>Cases on one side only</h2><ul>
{{range .OnlyA}}<li>A only: {{.}}</li>{{end}}{{range .OnlyB}}<li>B only: {{.}}</li>{{end}}</ul>{{end}}
{{if .Images}}<h2>Charts</h2>{{range .Images}}<p><img src="{{.}}" alt="{{.}}"></p>{{end}}{{end}}
</body></html>
`))

// WriteHTML writes the comparison as one HTML page: per metric, every
// case's A and B medians with their 95% intervals, the change, the p-value
// and the verdict; then the cases on one side only and the charts given
// (file paths, shown by their base name, for a page in the same folder).
func (c *Comparison) WriteHTML(w io.Writer, charts []string) error {
	p := page{Title: fmt.Sprintf("mtlbench compare: %s against %s", c.B.Label, c.A.Label),
		A: c.A.Describe(), B: c.B.Describe(), Alpha: c.Alpha, NotComp: c.NotComparable, Notes: table.NoteTexts(c.Notes)}
	ci := func(s Stat, scale float64) string {
		if s.N == 0 {
			return ""
		}
		if math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
			return fmt.Sprintf("(n=%d: too few for an interval)", s.N)
		}
		return fmtNum(s.Lo*scale) + " – " + fmtNum(s.Hi*scale)
	}
	med := func(s Stat, scale float64) string {
		if s.N == 0 {
			return "-"
		}
		return fmtNum(s.Center * scale)
	}
	for _, m := range c.Metrics {
		rows := c.metricRows(m)
		if side := recordedBy(rows); side != "" {
			p.OneSided = append(p.OneSided, side+" only: "+m)
			continue
		}
		scale, unit := displayUnit(rows[0].Unit)
		t := pageTable{Title: m + " (" + strings.TrimPrefix(unit+", ", ", ") + rows[0].Direction.String() + ")"}
		for _, r := range rows {
			class := "na"
			switch {
			case r.Verdict == VerdictFaster || r.Verdict == VerdictBetter:
				class = "better"
			case r.Verdict == VerdictSlower || r.Verdict == VerdictWorse:
				class = "worse"
			case r.Verdict == VerdictSame:
				class = ""
			}
			t.Rows = append(t.Rows, pageRow{Case: r.Case, A: med(r.A, scale), ACI: ci(r.A, scale), B: med(r.B, scale),
				BCI: ci(r.B, scale), Delta: fmtDelta(r.Delta), P: fmtP(r.P), N: fmt.Sprintf("%d+%d", r.A.N, r.B.N),
				Verdict: r.Verdict, Class: class})
			if r.Reason != "" {
				t.Notes = append(t.Notes, r.Case+": "+r.Reason)
			}
		}
		p.Tables = append(p.Tables, t)
	}
	names, keyed := c.onlyNames()
	for i, x := range append(slices.Clone(c.OnlyA), c.OnlyB...) {
		n := names[i]
		if keyed {
			n += " (" + x.Key + ")"
		}
		if i < len(c.OnlyA) {
			p.OnlyA = append(p.OnlyA, n)
		} else {
			p.OnlyB = append(p.OnlyB, n)
		}
	}
	for _, f := range charts {
		if strings.HasSuffix(f, ".svg") {
			p.Images = append(p.Images, filepath.Base(f))
		}
	}
	return pageTemplate.Execute(w, p)
}
