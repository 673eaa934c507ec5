package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/stats"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"golang.org/x/perf/benchmath"
)

// The summary after a run shows the GPU and step-witness columns only for
// runs that recorded them, the witness's with a note saying what they count.
func TestRunTablesWitnessColumns(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	record := func(backend string, metrics map[string]float64, timings []results.OpTiming) *bench.Summary {
		// The emulator's runs are marked emulated: their times are the
		// emulator's, so only the bytes by op are shown, not the times.
		r := &results.Run{SuiteName: "witness", Backend: backend, Emulated: backend == "metal-emu"}
		if _, err := db.CreateRun(r); err != nil {
			t.Fatal(err)
		}
		cases := []results.Case{{Key: "model/decode/fusion=on", Name: "decode/fusion=on", Kind: results.CaseModel}}
		if err := db.AddCases(r.ID, cases); err != nil {
			t.Fatal(err)
		}
		var s []results.Sample
		for _, m := range []string{"decode_tok_s", "step_ms", "dispatches_per_step", "encode_ms", "encode_frac", "device_ms", "device_frac", "witness_bytes_per_step",
			"witness_traffic_efficiency", "witness_footprint_bytes_per_step", "witness_footprint_efficiency", "witness_tok_s",
			"witness_lanes_per_load", "witness_critical_loads"} {
			if v, ok := metrics[m]; ok {
				for rep := range 3 {
					s = append(s, results.Sample{Rep: rep, Metric: m, Value: v})
				}
			}
		}
		if err := db.FinishCase(cases[0].ID, s, timings, 6, 6); err != nil {
			t.Fatal(err)
		}
		if cases, err = db.Cases(r.ID); err != nil {
			t.Fatal(err)
		}
		return &bench.Summary{RunID: r.ID, Run: r, Cases: cases}
	}
	render := func(sum *bench.Summary) string { return renderRunTables(t, db, sum) }
	emu := render(record("metal-emu", map[string]float64{"decode_tok_s": 3.3, "step_ms": 311.7, "dispatches_per_step": 58,
		"encode_ms": 301.2, "encode_frac": 0.966, "device_ms": 9.8, "device_frac": 0.031,
		"witness_bytes_per_step": 41.7e6, "witness_traffic_efficiency": 0.853,
		"witness_footprint_bytes_per_step": 36.1e6, "witness_footprint_efficiency": 0.986, "witness_tok_s": 22686.9,
		"witness_lanes_per_load": 27.3, "witness_critical_loads": 1483},
		// A profiled step: two layers' q/k/v GEMV and MoE in two
		// repetitions, and the LM head once outside the layers.
		[]results.OpTiming{
			{Rep: 0, Layer: 0, Component: results.CompAttention, Op: "qkv", Seconds: 0.01, Calls: 1, Bytes: 4_000_000, Footprint: 3_500_000},
			{Rep: 0, Layer: 0, Component: results.CompMoE, Op: "moe", Seconds: 0.02, Calls: 1, Bytes: 12_000_000, Footprint: 10_000_000, CriticalLoads: 58},
			{Rep: 0, Layer: 1, Component: results.CompAttention, Op: "qkv", Seconds: 0.01, Calls: 1, Bytes: 4_000_000, Footprint: 3_500_000},
			{Rep: 0, Layer: 1, Component: results.CompMoE, Op: "moe", Seconds: 0.02, Calls: 1, Bytes: 12_000_000, Footprint: 10_000_000, CriticalLoads: 58},
			{Rep: 0, Layer: -1, Component: results.CompOther, Op: "lm_head", Seconds: 0.03, Calls: 1, Bytes: 9_000_000, Footprint: 8_000_000},
			{Rep: 1, Layer: 0, Component: results.CompAttention, Op: "qkv", Seconds: 0.01, Calls: 1, Bytes: 4_000_000, Footprint: 3_500_000},
			{Rep: 1, Layer: 0, Component: results.CompMoE, Op: "moe", Seconds: 0.02, Calls: 1, Bytes: 12_000_000, Footprint: 12_000_000, CriticalLoads: 58},
			{Rep: 1, Layer: 1, Component: results.CompAttention, Op: "qkv", Seconds: 0.01, Calls: 1, Bytes: 4_000_000, Footprint: 3_500_000},
			{Rep: 1, Layer: 1, Component: results.CompMoE, Op: "moe", Seconds: 0.02, Calls: 1, Bytes: 12_000_000, Footprint: 12_000_000, CriticalLoads: 58},
			{Rep: 1, Layer: -1, Component: results.CompOther, Op: "lm_head", Seconds: 0.03, Calls: 1, Bytes: 9_000_000, Footprint: 8_000_000},
		}))
	cpu := render(record("cpu", map[string]float64{"decode_tok_s": 95.2, "step_ms": 10.5},
		[]results.OpTiming{{Rep: 0, Layer: 0, Component: results.CompMLP, Op: "mlp", Seconds: 0.001, Calls: 1, Bytes: 0, Footprint: 0}}))
	golden(t, "run-summary-witness", emu+"\n"+cpu)
	// Counted bytes without a footprint: no share, no time, no NaN.
	if tb := witnessByOpTable(1, results.Case{Name: "c"}, []stats.OpWitness{{Component: "moe", Op: "moe", Layers: 1, Bytes: 1e6}}); tb.Rows[0][5] != "-" || tb.Rows[0][6] != "-" {
		t.Errorf("a row without a footprint: %q", tb.Rows[0])
	}
	if !strings.Contains(emu, "Apple M3 Ultra (80 cores, 819 GB/s)") {
		t.Errorf("the witness note does not name the GPU and bandwidth of its ceiling:\n%s", emu)
	}
	if !strings.Contains(emu, "decode/fusion=on is host-bound: encoding a decode step took the host 301.20 of its 311.70 ms (97%)") {
		t.Errorf("a step encoded in 97%% of its time is not called host-bound:\n%s", emu)
	}
	if strings.Contains(cpu, "traffic eff") || strings.Contains(cpu, "dispatches/step") || strings.Contains(cpu, "bytes by op") ||
		strings.Contains(cpu, "encode ms") || strings.Contains(cpu, "host-bound") {
		t.Errorf("a CPU run's summary shows GPU or witness columns:\n%s", cpu)
	}
}

// A case is host-bound when encoding takes most of its step; one that is
// not, but whose device ran under stats.DeviceIdle of the step, left the
// device idle; a case without the figures, or busy, gets no note.
func TestStepShareNotes(t *testing.T) {
	cases := []results.Case{{Name: "host"}, {Name: "idle"}, {Name: "busy"}, {Name: "cpu"}, {Name: "kernel", Kind: results.CaseKernel}}
	sum := func(kv ...float64) map[string]*stats.Summary {
		m := map[string]*stats.Summary{}
		names := []string{"step_ms", "encode_ms", "encode_frac", "device_ms", "device_frac"}
		for i, v := range kv {
			if v >= 0 {
				m[names[i]] = &stats.Summary{Summary: benchmath.Summary{Center: v}}
			}
		}
		return m
	}
	byCase := []map[string]*stats.Summary{
		sum(2, 1.9, 0.95, 0.3, 0.15),
		sum(0.74, 0.30, 0.41, 0.52, 0.70),
		sum(2.39, 1.1, 0.46, 2.36, 0.99),
		sum(10.5),
		sum(1, -1, -1, 0.1, 0.1),
	}
	got := table.NoteTexts(stepShareNotes(cases, byCase))
	want := []string{
		"host is host-bound: encoding a decode step took the host 1.90 of its 2.00 ms (95%), so the device waited for the host (docs/architecture.md)",
		"idle left the device idle: it ran 0.52 ms of a 0.74 ms decode step (70%), and waited the rest for steps to be handed to it (docs/architecture.md)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Each case's witness figures are read against its own witness_gpu: the
// ceiling note names every GPU with its cases, and a profiled case's
// per-op times are its footprint at its GPU's bandwidth.
func TestWitnessGPUNotes(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &results.Run{SuiteName: "witness", Backend: "metal-emu"}
	if _, err := db.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{
		{Key: "model/decode", Name: "decode", Kind: results.CaseModel},
		{Key: "model/decode/witness_gpu=M2 Pro", Name: "decode/witness_gpu=M2 Pro", Kind: results.CaseModel,
			Params: map[string]string{"witness_gpu": "M2 Pro"}},
		{Key: "kernel/gemv", Name: "gemv", Kind: results.CaseKernel, Params: map[string]string{"op": "matmul", "witness_gpu": "M1"}},
		{Key: "kernel/norm", Name: "norm", Kind: results.CaseKernel, Params: map[string]string{"op": "rms_norm"}},
	}
	if err := db.AddCases(r.ID, cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		s := []results.Sample{{Metric: "decode_tok_s", Value: 3}, {Metric: "witness_bytes_per_step", Value: 4e6},
			{Metric: "witness_footprint_bytes_per_step", Value: 2e6}, {Metric: "witness_tok_s", Value: 100}}
		ts := []results.OpTiming{{Layer: 0, Component: results.CompMoE, Op: "moe", Seconds: 0.01, Calls: 1, Bytes: 4e6, Footprint: 2e6}}
		if c.Kind == results.CaseKernel {
			// The norm ran where nothing counts its bytes: no witness.
			s, ts = []results.Sample{{Metric: "us_per_call", Value: 9}}, nil
			if c.Name == "gemv" {
				s = append(s, results.Sample{Metric: "traffic_efficiency", Value: 0.89}, results.Sample{Metric: "footprint_efficiency", Value: 1},
					results.Sample{Metric: "bytes_per_load", Value: 16}, results.Sample{Metric: "lanes_per_load", Value: 29.4},
					results.Sample{Metric: "simdgroups_per_core", Value: 16},
					results.Sample{Metric: "witness_us", Value: 15.45})
			}
		}
		if c.Name == "decode" {
			// Ten arguments of a decode step: the eight re-read most shown,
			// most first.
			var ops []results.OperandTraffic
			for i := range 10 {
				ops = append(ops, results.OperandTraffic{Kernel: fmt.Sprintf("k%d", i), Operand: "x", Read: int64(1000 * (i + 1)), DistinctRead: 1000})
			}
			if err := db.AddRep(c.ID, 0, nil, nil, ops...); err != nil {
				t.Fatal(err)
			}
		}
		if c.Name == "gemv" {
			// Two repetitions of the same call's arguments: shown once.
			for rep := range 2 {
				ops := []results.OperandTraffic{
					{Rep: rep, Kernel: "matvec_bf16", Operand: "x", Read: 32768, DistinctRead: 2048},
					{Rep: rep, Kernel: "matvec_bf16", Operand: "out", Written: 1024, DistinctWritten: 1024},
				}
				if err := db.AddRep(c.ID, rep, nil, nil, ops...); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.FinishCase(c.ID, s, ts, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	stored, err := db.Cases(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	out := renderRunTables(t, db, &bench.Summary{RunID: r.ID, Run: r, Cases: stored})
	for _, want := range []string{
		"each case's GPU: Apple M3 Ultra (80 cores, 819 GB/s) for decode; Apple M2 Pro (19 cores, 200 GB/s) for decode/witness_gpu=M2 Pro",
		"µs at Apple M2 Pro", "µs at Apple M3 Ultra",
		"│ moe       │ moe │      1 │       4.00 │         2.00 │       100.0 │               10.0 │", // 2 MB at 200 GB/s
		// Neither case records GB/s or GFLOP/s: no columns of dashes for them.
		"│ gemv │ 9.00 (n=1) │ 89 (n=1)      │ 100 (n=1)       │ 16.0 (n=1) │ 29.4 (n=1) │ 16.0 (n=1)      │ 15.45 (n=1) │",
		"│ norm │ 9.00 (n=1) │ -             │ -               │ -          │ -          │ -               │ -           │",
		"floor µs: the footprint at the GPU's bandwidth; GPU: the Apple M1 (8 cores, 68.25 GB/s) (witness_gpu",
		"run 1: kernel cases' arguments (cost witness, one call)",
		"│ gemv │ matvec_bf16 │ out      │   0.000 │ -            │      0.001 │ 1.0           │",
		"│ gemv │ matvec_bf16 │ x        │   0.033 │ 16.0         │      0.000 │ -             │",
		"run 1: a decode step's most re-read kernel arguments (cost witness, mean over the steps)",
		"│ decode │ k9     │ x        │   0.010 │         10.0 │      0.000 │ -             │\n│ decode │ k8     │ x        │   0.009 │          9.0 │",
		"the 8 arguments of each case moving the most bytes beyond their distinct ones",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "│ decode │ k1 ") {
		t.Errorf("a decode step's ninth most re-read argument is listed:\n%s", out)
	}
}

// renderRunTables is the summary a run prints after it, as tables.
func renderRunTables(t *testing.T, db *results.DB, sum *bench.Summary) string {
	t.Helper()
	tables, err := runTables(db, sum)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, tb := range tables {
		if err := tb.Render(&b, table.FormatTable); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// Serving cases (poisson arrivals, or an slo) add the serving columns, and
// goodput only when a case bounds its latencies.
func TestRunTablesServingColumns(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	record := func(params ...map[string]string) string {
		r := &results.Run{SuiteName: "serving", Backend: "cpu"}
		if _, err := db.CreateRun(r); err != nil {
			t.Fatal(err)
		}
		var cases []results.Case
		for i, p := range params {
			cases = append(cases, results.Case{Key: fmt.Sprintf("model/c%d", i), Name: fmt.Sprintf("c%d", i), Kind: results.CaseModel, Params: p})
		}
		if err := db.AddCases(r.ID, cases); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			var s []results.Sample
			for m, v := range map[string]float64{"decode_tok_s": 50, "request_per_s": 3.2, "goodput_per_s": 2.9, "ttft_p99_ms": 412, "e2el_ms": 900} {
				s = append(s, results.Sample{Metric: m, Value: v})
			}
			if err := db.FinishCase(c.ID, s, nil, 6, 6); err != nil {
				t.Fatal(err)
			}
		}
		if cases, err = db.Cases(r.ID); err != nil {
			t.Fatal(err)
		}
		return renderRunTables(t, db, &bench.Summary{RunID: r.ID, Run: r, Cases: cases})
	}
	serving := []string{"req/s", "goodput req/s", "TTFT p99 ms", "E2EL ms"}
	for _, tc := range []struct {
		name   string
		params []map[string]string
		want   []string
	}{
		{"plain", []map[string]string{{"batch": "1"}}, nil},
		{"stagger", []map[string]string{{"arrival": "stagger:2"}}, nil},
		{"poisson", []map[string]string{{"batch": "1"}, {"arrival": "poisson:4"}}, []string{"req/s", "TTFT p99 ms", "E2EL ms"}},
		{"poisson and slo", []map[string]string{{"arrival": "poisson:4", "slo": "ttft:500"}}, serving},
		{"slo alone", []map[string]string{{"slo": "e2el:2000"}}, serving},
	} {
		out := record(tc.params...)
		header := strings.SplitN(out, "\n", 4)[2]
		for _, col := range serving {
			if got, want := strings.Contains(header, "│ "+col+" "), slices.Contains(tc.want, col); got != want {
				t.Errorf("%s: column %q shown %v, want %v\n%s", tc.name, col, got, want, out)
			}
		}
	}
}

// A kernel table shows the headline columns its cases recorded: a tune run
// times calls alone, so it has µs/call and no GB/s or GFLOP/s of dashes;
// and a case skipped says so, not a row of dashes.
func TestRunTablesKernelColumns(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	record := func(metrics ...string) string {
		r := &results.Run{SuiteName: "tune", Kind: results.KindTune, Backend: "cpu"}
		if _, err := db.CreateRun(r); err != nil {
			t.Fatal(err)
		}
		cases := []results.Case{{Key: "tune/matmul/a", Name: "matmul a", Kind: results.CaseKernel},
			{Key: "tune/matmul/b", Name: "matmul b", Kind: results.CaseKernel}}
		if err := db.AddCases(r.ID, cases); err != nil {
			t.Fatal(err)
		}
		var s []results.Sample
		for _, m := range metrics {
			s = append(s, results.Sample{Metric: m, Value: 2})
		}
		if err := db.FinishCase(cases[0].ID, s, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := db.SkipCase(cases[1].ID, "coverage: 1 piece cannot keep 2 threads busy"); err != nil {
			t.Fatal(err)
		}
		if cases, err = db.Cases(r.ID); err != nil {
			t.Fatal(err)
		}
		out := renderRunTables(t, db, &bench.Summary{RunID: r.ID, Run: r, Cases: cases})
		lines := strings.Split(out, "\n")
		// A skipped case says so where its figures would be.
		if skipped := lines[5]; !strings.Contains(skipped, "matmul b") || !strings.Contains(skipped, " skipped ") || strings.Contains(skipped, " - ") {
			t.Errorf("the skipped case's row: %s", skipped)
		}
		return lines[2]
	}
	for _, tc := range []struct {
		name    string
		metrics []string
		want    []string
	}{
		{"calls timed alone", []string{"us_per_call", "confirm_us_per_call"}, []string{"µs/call"}},
		{"bytes and flops", []string{"us_per_call", "gb_s", "gflop_s"}, []string{"µs/call", "GB/s", "GFLOP/s"}},
	} {
		header := record(tc.metrics...)
		for _, col := range []string{"µs/call", "GB/s", "GFLOP/s"} {
			if got, want := strings.Contains(header, "│ "+col+" "), slices.Contains(tc.want, col); got != want {
				t.Errorf("%s: column %q shown %v, want %v: %s", tc.name, col, got, want, header)
			}
		}
	}
}

// Another engine's imported figures (decode and prefill tok/s, no layer
// count) show their own columns, not a layers column and five of dashes.
func TestRunTablesPeerColumns(t *testing.T) {
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &results.Run{SuiteName: "bench", Kind: results.KindPeer, Backend: "metal"}
	if _, err := db.CreateRun(r); err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{{Key: "model/bench/batch=1/gen_len=128/prompt_len=512", Name: "bench/batch=1/prompt_len=512/gen_len=128", Kind: results.CaseModel}}
	if err := db.AddCases(r.ID, cases); err != nil {
		t.Fatal(err)
	}
	s := []results.Sample{{Metric: "decode_tok_s", Value: 688}, {Metric: "prefill_tok_s", Value: 9591}}
	if err := db.FinishCase(cases[0].ID, s, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if cases, err = db.Cases(r.ID); err != nil {
		t.Fatal(err)
	}
	out := renderRunTables(t, db, &bench.Summary{RunID: r.ID, Run: r, Cases: cases})
	lines := strings.Split(out, "\n")
	if got, want := strings.Join(strings.Fields(lines[2]), " "), "│ case │ decode tok/s │ prefill tok/s │"; got != want {
		t.Errorf("header %q, want %q\n%s", got, want, out)
	}
	if strings.Contains(out, "layers") {
		t.Errorf("a run that recorded no layers has the layers column or note:\n%s", out)
	}
}

// A kernel case's GB/s above the bandwidth the run measured (a working
// set that stays in a cache) is marked in show's table and the report's,
// and the note under them says against what and why.
func TestKernelGBsOverBandwidthMarked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bw, gbs  float64
		emulated bool
		marked   bool
	}{
		{"above the measured bandwidth", 100, 150, false, true},
		{"below it", 100, 50, false, false},
		{"nothing measured", 0, 150, false, false},
		{"emulated", 100, 150, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.db")
			db, err := results.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := &results.Run{SuiteName: "k", Backend: "cpu", ReadBandwidthGBs: tc.bw, Emulated: tc.emulated}
			if _, err := db.CreateRun(r); err != nil {
				t.Fatal(err)
			}
			cases := []results.Case{{Key: "kernel/matmul/m=1", Name: "matmul/m=1", Kind: results.CaseKernel}}
			if err := db.AddCases(r.ID, cases); err != nil {
				t.Fatal(err)
			}
			var s []results.Sample
			for rep := range 3 {
				s = append(s, results.Sample{Rep: rep, Metric: "us_per_call", Value: 10, Unit: "us"},
					results.Sample{Rep: rep, Metric: "gb_s", Value: tc.gbs, Unit: "GB/s"})
			}
			if err := db.FinishCase(cases[0].ID, s, nil, 0, 0); err != nil {
				t.Fatal(err)
			}
			if err := db.FinishRun(r.ID, results.RunComplete); err != nil {
				t.Fatal(err)
			}
			db.Close()
			const note = "†: GB/s above the 100.0 GB/s read bandwidth measured before the run (matmul/m=1): a working set small enough to stay in a cache"
			out, stderr, err := mtl(t, "show", "1", "--db", path)
			if err != nil {
				t.Fatalf("show: %v\n%s", err, stderr)
			}
			cell := fmt.Sprintf("%.1f (n=3) †", tc.gbs)
			if strings.Contains(out, cell) != tc.marked || strings.Contains(out, note) != tc.marked {
				t.Errorf("show: cell %q and note marked, want %v:\n%s", cell, tc.marked, out)
			}
			rep := filepath.Join(dir, "rep")
			if _, stderr, err := mtl(t, "report", "1", "--db", path, "--out", rep); err != nil {
				t.Fatalf("report: %v\n%s", err, stderr)
			}
			page, err := os.ReadFile(filepath.Join(rep, "index.html"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(page), note) != tc.marked {
				t.Errorf("report: note written %v, want %v", !tc.marked, tc.marked)
			}
		})
	}
}
