package main

import (
	"bytes"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/charts"
	"github.com/mtlbench/mtlbench/results"
)

// reportSuite is the smallest suite of the qwen3-moe shape: batch scaling,
// a MoE chunk sweep at two batch sizes, and profile timing for the
// per-component breakdown.
const reportSuite = `name: report-mini
description: tiny profile-mode suite for the report tests
model:
  preset: qwen3-moe-mini
  dtype: bf16
  seed: 1
  layers: 2
backend: auto
timing: profile
repetitions: 2
warmup: 0
params:
  prompt_len: 8
  gen_len: 4
cases:
  - name: batch-scaling
    kind: model
    matrix:
      batch: [1, 2]
  - name: moe-chunk
    kind: model
    params: { moe_strategy: chunked }
    matrix:
      batch: [1, 2]
      moe_chunk: [8, 32]
`

// runApp runs the CLI with the report command present whether or not
// app.go registers it yet.
func runApp(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp(&out, &errOut)
	has := false
	for _, c := range app.Commands {
		has = has || c.Name == "report"
	}
	if !has {
		app.Commands = append(app.Commands, reportCommand())
	}
	if err := app.Run(interspersed(app, append([]string{"mtlbench"}, args...))); err != nil {
		t.Fatalf("mtlbench %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func TestReport(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "report-mini.yaml")
	if err := os.WriteFile(suite, []byte(reportSuite), 0o644); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "r.db")
	t.Setenv("MTLBENCH_GIT_COMMIT", "c0ffee1234567890c0ffee1234567890c0ffee12")
	if err := run([]string{"mtlbench", "run", suite, "--db", dbPath, "--tag", "mini", "-q"}, noInput{}, io.Discard, io.Discard); err != nil {
		t.Fatalf("recording the run: %v", err)
	}
	db, err := results.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids, err := db.ResolveRef("mini")
	if err != nil || len(ids) != 1 {
		t.Fatalf("ResolveRef(mini) = %v, %v", ids, err)
	}
	runID := ids[0]

	t.Run("extraction", func(t *testing.T) {
		runs, err := charts.LoadRuns(db, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || len(runs[0].Cases) != 6 {
			t.Fatalf("loaded %d runs with %d cases, want 1 with 6", len(runs), len(runs[0].Cases))
		}

		// Throughput vs batch: the batch-scaling entry only (the chunk
		// sweep varies moe_chunk too).
		bd := charts.BatchSeries(runs)
		if len(bd.Series) != 1 {
			t.Fatalf("batch series = %+v, want 1", bd.Series)
		}
		s := bd.Series[0]
		if len(s.Points) != 2 || s.Points[0].X != 1 || s.Points[1].X != 2 {
			t.Errorf("batch points = %+v, want x 1 and 2", s.Points)
		}
		for _, p := range s.Points {
			if !(p.Y > 0) {
				t.Errorf("decode tok/s %v at batch %v", p.Y, p.X)
			}
		}
		if !strings.Contains(s.Label, "2/6 layers") {
			t.Errorf("label %q does not say the model is truncated", s.Label)
		}
		if !strings.Contains(bd.Title, "qwen3-moe-mini") || !strings.Contains(bd.Title, "profile timing") {
			t.Errorf("title %q lacks the model or the timing mode", bd.Title)
		}

		// MoE chunk curve: one line per batch size, MoE ms per layer from
		// the profile timings, x = the chunk sizes.
		cd := charts.ChunkSeries(runs, nil)
		if cd.YLabel != "MoE time per layer per decode step (ms)" {
			t.Errorf("chunk y label = %q", cd.YLabel)
		}
		if len(cd.Series) != 2 {
			t.Fatalf("chunk series = %+v, want 2", cd.Series)
		}
		for i, want := range []string{"batch 1", "batch 2"} {
			cs := cd.Series[i]
			if !strings.HasPrefix(cs.Label, want) {
				t.Errorf("chunk series %d label %q, want %q...", i, cs.Label, want)
			}
			if len(cs.Points) != 2 || cs.Points[0].X != 8 || cs.Points[1].X != 32 {
				t.Errorf("%s points = %+v, want x 8 and 32", want, cs.Points)
			}
			for _, p := range cs.Points {
				if !(p.Y > 0) {
					t.Errorf("%s: MoE ms %v at chunk %v", want, p.Y, p.X)
				}
			}
		}

		// Breakdown: every case, averaged over its 2 layers.
		br := charts.Breakdown(runs, nil)
		if len(br.Bars) != 6 {
			t.Fatalf("breakdown bars = %d, want 6", len(br.Bars))
		}
		for _, b := range br.Bars {
			if b.Layers != 2 {
				t.Errorf("%s: averaged over %d layers, want 2", b.Label, b.Layers)
			}
			for _, comp := range []string{"attention", "moe", "norm"} {
				if !(b.MS[comp] > 0) {
					t.Errorf("%s: %s = %v ms/layer", b.Label, comp, b.MS[comp])
				}
			}
			if b.MS["mlp"] != 0 {
				t.Errorf("%s: dense MLP time %v in an all-MoE model", b.Label, b.MS["mlp"])
			}
			if !(b.OutsideMS["other"] > 0) {
				t.Errorf("%s: no time outside the layers (lm_head)", b.Label)
			}
		}
		if br.Bars[0].Label != "batch-scaling/batch=1" {
			t.Errorf("first bar %q", br.Bars[0].Label)
		}

		// Roofline: one bar per case, when the machine's bandwidth is known.
		rf := charts.Roofline(runs)
		if n := len(rf.Bars); n != 0 && n != 6 {
			t.Errorf("roofline bars = %d, want 6 (or none without a bandwidth)", n)
		}

		// History: the mini model is not documented, so nothing is
		// overlaid and the page says why.
		tl := charts.Timeline(runs, nil, "Qwen3-30B-A3B")
		for _, ts := range tl.Series {
			if !ts.Documented {
				t.Errorf("run of qwen3-moe-mini overlaid on Qwen3-30B-A3B: %q", ts.Label)
			}
		}
		if !strings.Contains(strings.Join(tl.Notes, " "), "qwen3-moe-mini") {
			t.Errorf("timeline notes %q do not mention qwen3-moe-mini", tl.Notes)
		}
	})

	t.Run("end to end", func(t *testing.T) {
		out := filepath.Join(dir, "report")
		// No RUN: the latest run.
		printed := runApp(t, "report", "--db", dbPath, "--out", out)
		index := filepath.Join(out, "index.html")
		if !strings.Contains(printed, index) {
			t.Errorf("report printed %q, want the index path", printed)
		}
		page, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		html := string(page)
		for _, want := range []string{
			"run " + strconv.FormatInt(runID, 10), "<svg", "report-mini", "profile", "c0ffee1234567890", "qwen3-moe-mini",
			"Decode throughput vs batch size", "Decode step breakdown per layer", "MoE chunk size sweep",
			"Documented history", "2/6",
		} {
			if !strings.Contains(html, want) {
				t.Errorf("index.html lacks %q", want)
			}
		}
		// Self-contained: nothing fetched from elsewhere.
		for _, bad := range []string{"<script src", "<link ", "http://", "https://", "<img src=\"http"} {
			if bad == "http://" {
				// SVG namespaces are identifiers, not fetches.
				html = strings.ReplaceAll(html, `xmlns="http://www.w3.org/2000/svg"`, "")
				html = strings.ReplaceAll(html, `xmlns:xlink="http://www.w3.org/1999/xlink"`, "")
			}
			if strings.Contains(html, bad) {
				t.Errorf("index.html refers to an external asset (%q)", bad)
			}
		}
		// Every printed chart file exists; the PNGs decode.
		lines := strings.Fields(printed)
		if len(lines) < 1+2*3 {
			t.Errorf("report wrote only %v", lines)
		}
		for _, p := range lines[1:] {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("printed path: %v", err)
				continue
			}
			if strings.HasSuffix(p, ".png") {
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					t.Errorf("%s: %v", p, err)
				} else if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
					t.Errorf("%s: %dx%d", p, b.Dx(), b.Dy())
				}
			}
		}

		// By commit prefix, into another directory.
		out2 := filepath.Join(dir, "by-commit")
		runApp(t, "report", "c0ffee12", "--db", dbPath, "-o", out2)
		if _, err := os.Stat(filepath.Join(out2, "index.html")); err != nil {
			t.Error(err)
		}

		// A history model with no documented figures is refused before
		// anything is written, naming the documented ones.
		out3 := filepath.Join(dir, "no-history")
		err = run([]string{"mtlbench", "report", "--db", dbPath, "-o", out3, "--history-model", "llama-9"}, noInput{}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `--history-model "llama-9": no documented figures (documented models: `) ||
			!strings.Contains(err.Error(), "Qwen3-30B-A3B") {
			t.Errorf("report --history-model llama-9: %v", err)
		}
		if _, err := os.Stat(out3); err == nil {
			t.Error("report --history-model llama-9 wrote a report")
		}
		// Nor is one whose figures hold no decode throughput (the precision
		// figures of a model stated as unknown): the chart would be left out.
		err = run([]string{"mtlbench", "report", "--db", dbPath, "-o", out3, "--history-model", "unknown"}, noInput{}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), `--history-model "unknown": no documented decode throughput, which the history chart draws (documented models: `) ||
			!strings.Contains(err.Error(), "Qwen3-30B-A3B") || strings.Contains(err.Error(), ", unknown") {
			t.Errorf("report --history-model unknown: %v", err)
		}
		if _, err := os.Stat(out3); err == nil {
			t.Error("report --history-model unknown wrote a report")
		}

		// --out naming a file is refused by the flag, and the file is left.
		file := filepath.Join(dir, "a-file.db")
		os.WriteFile(file, []byte("keep"), 0o644)
		err = run([]string{"mtlbench", "report", "--db", dbPath, "-o", file}, noInput{}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--out "+file+": a file, not a folder") {
			t.Errorf("report -o FILE: %v", err)
		}
		if b, _ := os.ReadFile(file); string(b) != "keep" {
			t.Errorf("report -o FILE changed the file: %q", b)
		}
	})

	t.Run("WriteCharts", func(t *testing.T) {
		out := filepath.Join(dir, "charts")
		paths, _, err := charts.WriteCharts(out, db, ids, charts.Options{ModelBytes: documentedModelBytes})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, n := range []string{charts.NameThroughput, charts.NameBreakdown, charts.NameMoEChunk} {
			want[filepath.Join(out, n+".png")] = true
			want[filepath.Join(out, n+".svg")] = true
		}
		for _, p := range paths {
			delete(want, p)
			// qwen3-moe-mini has no documented history: no other model's
			// history is drawn beside its runs.
			if strings.Contains(p, charts.NameHistory) {
				t.Errorf("a history chart for an undocumented model: %s", p)
			}
		}
		if len(want) > 0 {
			t.Errorf("WriteCharts wrote %v; missing %v", paths, want)
		}
	})
}

// report with no RUN reports the latest benchmark run: a peer (or tune) run
// recorded after it has no report of its own to make.
func TestReportDefaultsToLatestBenchmarkRun(t *testing.T) {
	db := recordTwoCases(t)
	// A peer run dated after the benchmark run: a file without started_at
	// is dated by its modification time, now.
	hf, err := os.ReadFile(filepath.Join("testdata", "peer", "hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	peer := filepath.Join(t.TempDir(), "peer.json")
	os.WriteFile(peer, []byte(strings.Replace(string(hf), `"started_at": "2026-11-21T10:00:00Z",`, "", 1)), 0o644)
	if _, stderr, err := mtl(t, "peer", "import", peer, "--db", db); err != nil || !strings.Contains(stderr, "as run 2") {
		t.Fatalf("peer import: %v\n%s", err, stderr)
	}
	if out, _, err := mtl(t, "show", "latest", "--db", db, "--format", "csv"); err != nil || !strings.Contains(out, "\n2,") {
		t.Fatalf("the peer run is not the latest: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "report")
	if _, stderr, err := mtl(t, "report", "--db", db, "--out", out); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	page, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<title>mtlbench report: run 1 (two)</title>") {
		i := strings.Index(string(page), "<title>")
		t.Errorf("report without RUN: page %q, want the benchmark run 1, not the peer run 2", string(page)[i:min(len(page), i+80)])
	}
}
