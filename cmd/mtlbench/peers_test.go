package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/results"
)

// csvRows parses csv output into maps keyed by the header.
func csvRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		rows = append(rows, m)
	}
	return rows
}

// compareRow finds the compare row of a case key and metric.
func compareRow(t *testing.T, rows []map[string]string, key, metric string) map[string]string {
	t.Helper()
	for _, r := range rows {
		if r["key"] == key && r["metric"] == metric {
			return r
		}
	}
	t.Fatalf("no compare row for %s %s", key, metric)
	return nil
}

// Other engines' output, written as their tools write it, imports as peer
// runs keyed like `mtlbench bench`'s cases, so compare pairs them.
func TestPeerImportsCompare(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	// No --threads: it is the cases' threads, in their keys, which an
	// import's keys leave out.
	if _, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "-b", "1,2", "-p", "16", "-n", "8", "-r", "2", "--warmup", "0",
		"--backend", "cpu", "--dtype", "f32", "--db", db, "-q", "--tag", "mine"); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr)
	}
	peer := func(name string, args ...string) string {
		t.Helper()
		_, stderr, err := mtl(t, append([]string{"peer", "import", filepath.Join("..", "..", "reports", "peers", "testdata", name), "--db", db,
			"--model", "qwen3-moe-mini"}, args...)...)
		if err != nil {
			t.Fatalf("peer import %s: %v\n%s", name, err, stderr)
		}
		return stderr
	}
	b1 := "model/bench/gen_len=8/prompt_len=16"
	b2 := "model/bench/batch=2/gen_len=8/prompt_len=16"
	median := func(r map[string]string, side string) float64 {
		v, err := strconv.ParseFloat(r[side+"_median"], 64)
		if err != nil {
			t.Fatalf("%s_median %q in %v", side, r[side+"_median"], r)
		}
		return v
	}
	cmp := func(b string) []map[string]string {
		t.Helper()
		out, stderr, err := mtl(t, "compare", "mine", b, "--db", db, "--format", "csv")
		if err != nil {
			t.Fatalf("compare mine %s: %v\n%s", b, err, stderr)
		}
		return csvRows(t, out)
	}

	// llama-bench -o json: prefill from pp 16, decode from tg 8 at depth 16
	// (after the prompt, as mtlbench decodes), each repetition's rate from
	// its samples_ns.
	if got := peer("llama-bench.json"); !strings.Contains(got, "imported llama.cpp build 6812 (b4f2a1c9) as run 2 (tag llama.cpp): 3 cases") {
		t.Errorf("llama-bench import: %s", got)
	}
	out, _, err := mtl(t, "show", "llama.cpp", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "peer-llama-bench.csv", out)
	rows := cmp("llama.cpp")
	if r := compareRow(t, rows, b1, "decode_tok_s"); median(r, "b") != 8e9/11627906 || r["b_n"] != "3" || r["a_n"] != "2" || r["verdict"] == "not comparable" {
		t.Errorf("llama-bench decode row %v", r)
	}
	if r := compareRow(t, rows, b1, "prefill_tok_s"); median(r, "b") != 16e9/1668282 {
		t.Errorf("llama-bench prefill row %v", r)
	}

	// -o jsonl with a threads sweep: one run per setting.
	if got := peer("llama-bench.jsonl", "--tag", "llama-t"); strings.Count(got, "(tag llama-t): 1 case\n") != 2 {
		t.Errorf("llama-bench jsonl import: %s", got)
	}

	// vllm bench serve: two prompts at concurrency 2 is the batch-2 case.
	if got := peer("vllm-serve.json"); !strings.Contains(got, "(tag vllm): 1 case\n") {
		t.Errorf("vllm serve import: %s", got)
	}
	rows = cmp("vllm")
	if r := compareRow(t, rows, b2, "output_tok_s"); median(r, "b") != 390.24 {
		t.Errorf("vllm serve output_tok_s row %v", r)
	}
	if r := compareRow(t, rows, b2, "ttft_ms"); median(r, "b") != 9.74 {
		t.Errorf("vllm serve ttft row %v", r)
	}

	// vllm bench serve at --request-rate 4 with --goodput and a range ratio,
	// which the file does not record: given as flags, the case pairs with
	// mtlbench's serving case of the same rate, bounds and lengths.
	if _, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "-b", "2", "-p", "16", "-n", "8", "-r", "2", "--warmup", "0",
		"--request-rate", "4", "--requests", "6", "--slo", "ttft:500,e2el:2000", "--range-ratio", "0.5",
		"--backend", "cpu", "--dtype", "f32", "--db", db, "-q", "--tag", "mine-serve"); err != nil {
		t.Fatalf("bench --request-rate: %v\n%s", err, stderr)
	}
	peer("vllm-serve-rate.json", "--tag", "vllm-rate", "--slo", "e2el:2000.0,ttft:500", "--range-ratio", "0.50", "--prompt-len", "16", "--gen-len", "8")
	out, stderr, err := mtl(t, "compare", "mine-serve", "vllm-rate", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatalf("compare mine-serve vllm-rate: %v\n%s", err, stderr)
	}
	serve := "model/bench/arrival=poisson:4/batch=2/gen_len=8/prompt_len=16/range_ratio=0.5/requests=6/slo=ttft:500,e2el:2000"
	rows = csvRows(t, out)
	if r := compareRow(t, rows, serve, "goodput_per_s"); median(r, "b") != 3.5 || r["a_n"] != "2" {
		t.Errorf("vllm serve goodput row %v", r)
	}
	if r := compareRow(t, rows, serve, "request_per_s"); median(r, "b") != 48.78 || r["a_n"] != "2" {
		t.Errorf("vllm serve request rate row %v", r)
	}

	// vllm bench latency: the workload comes from the flags it ran with.
	peer("vllm-latency.json", "--tag", "vllm-lat", "--batch", "2", "--prompt-len", "16", "--gen-len", "8")
	rows = cmp("vllm-lat")
	if r := compareRow(t, rows, b2, "output_tok_s"); r["b_n"] != "5" || median(r, "b") < 390 || median(r, "b") > 392 {
		t.Errorf("vllm latency row %v (want 2*8/0.0409 s)", r)
	}

	// mlx_lm.benchmark's printed trials, two batch sizes in one file.
	if got := peer("mlx-benchmark.txt"); !strings.Contains(got, "(tag mlx-lm): 2 cases") {
		t.Errorf("mlx import: %s", got)
	}
	rows = cmp("mlx-lm")
	if r := compareRow(t, rows, b1, "decode_tok_s"); median(r, "b") != 515.002 || r["p"] == "" || r["verdict"] == "not comparable" {
		t.Errorf("mlx decode row %v", r)
	}
	if r := compareRow(t, rows, b2, "prefill_tok_s"); median(r, "b") != 2833.04 {
		t.Errorf("mlx prefill row %v", r)
	}

	// Errors name the file and what is wrong.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"hello": 1}`), 0o644)
	if _, _, err := mtl(t, "peer", "import", bad, "--db", db); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--from") {
		t.Errorf("unknown JSON: %v", err)
	}
	if _, _, err := mtl(t, "peer", "import", bad, "--db", db, "--from", "llama-bench"); err == nil || !strings.Contains(err.Error(), "llama-bench") {
		t.Errorf("--from llama-bench on other JSON: %v", err)
	}
	if _, _, err := mtl(t, "peer", "import", bad, "--db", db, "--from", "xml"); err == nil || !strings.Contains(err.Error(), `--from "xml": unknown peer format`) {
		t.Errorf("--from xml: %v", err)
	}
}

// Two stores, one per machine, merged by export and import give one store,
// and one report, over both machines; importing twice adds nothing.
// TestExportThroughLink: export -o onto a link writes the file it links to
// and leaves the link (internal/atomicfile).
func TestExportThroughLink(t *testing.T) {
	dir := t.TempDir()
	db := recordTwoCases(t)
	real, link := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(real, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.jsonl", link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mtl(t, "export", "--db", db, "-o", link); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("export -o replaced the link %s with a plain file (%v)", link, err)
	}
	if b, err := os.ReadFile(real); err != nil || !strings.Contains(string(b), exportFormat) {
		t.Errorf("the link's target holds %.80q (%v), want the export", b, err)
	}
}

// TestPeerFromHint: "name the format with --from" follows only an error
// of a file whose format was not recognised, not one that says what to run.
func TestPeerFromHint(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	for _, c := range []struct {
		data string
		hint bool
	}{
		{`{"tool": "other"}`, true},
		{"| model | size | params | backend | threads | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: | ---: |\n", false},
		{"", false},
	} {
		f := filepath.Join(dir, "f.txt")
		os.WriteFile(f, []byte(c.data), 0o644)
		_, _, err := mtl(t, "peer", "import", f, "--db", db)
		if err == nil || strings.Contains(err.Error(), "--from") != c.hint {
			t.Errorf("%.30q: %v; want the --from hint %v", c.data, err, c.hint)
		}
	}
}

// A flag describing what a file's format records itself (the workload of
// any but vLLM's, --model of mtlbench's own peer-run JSON, whose cases carry
// mtlbench's model name) is refused naming the file, not dropped.
func TestPeerImportRefusesFlagsTheFileRecords(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	llama := filepath.Join("..", "..", "reports", "peers", "testdata", "llama-bench.json")
	hf := filepath.Join("testdata", "peer", "hf.json")
	for _, tc := range []struct {
		file string
		flag []string
		want string
	}{
		{llama, []string{"--slo", "ttft:5"}, llama + ": --range-ratio and --slo describe vllm bench serve runs, and this file is llama-bench"},
		{llama, []string{"--batch", "4"}, llama + ": --batch describes vllm bench runs, and this file is llama-bench, which records its own"},
		{hf, []string{"--batch", "4"}, hf + ": --batch describes vllm bench runs, and this file is mtlbench, which records its own"},
		{hf, []string{"--model", "gpt2"}, hf + ": --model names the model of another tool's output, and this file is mtlbench, which records mtlbench's own"},
	} {
		_, _, err := mtl(t, append([]string{"peer", "import", tc.file, "--db", db}, tc.flag...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: %v, want %q", tc.file, strings.Join(tc.flag, " "), err, tc.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused import made the store %s", db)
	}
}

// TestImportAllOrNothing: an import of several files stores them in one
// transaction, so a store failing on a later file (a trigger that refuses
// the second run stands in for a full disk) leaves no earlier file's runs.
func TestImportAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	src := recordTwoCases(t)
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	if _, _, err := mtl(t, "export", "--db", src, "-o", a); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(a)
	os.WriteFile(b, bytes.ReplaceAll(data, []byte(`"tag":"two"`), []byte(`"tag":"other"`)), 0o644)
	peer := filepath.Join("testdata", "peer", "hf.json")
	hf, _ := os.ReadFile(peer)
	peer2 := filepath.Join(dir, "hf2.json")
	os.WriteFile(peer2, bytes.Replace(hf, []byte(`"started_at": "2026-11-21`), []byte(`"started_at": "2026-11-20`), 1), 0o644)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"import", []string{"import", a, b}},
		{"peer import", []string{"peer", "import", peer, peer2}},
	} {
		db := filepath.Join(t.TempDir(), "r.db")
		store, err := results.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.SQL().Exec(`CREATE TRIGGER second_run BEFORE INSERT ON runs WHEN (SELECT count(*) FROM runs) >= 1
			BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
			t.Fatal(err)
		}
		store.Close()
		_, stderr, err := mtl(t, append(c.args, "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), "injected failure") || !strings.Contains(err.Error(), "nothing was imported") {
			t.Errorf("%s: %v, want the failure and that nothing was imported", c.name, err)
		}
		if strings.Contains(stderr, "imported") {
			t.Errorf("%s: stderr tells of runs imported:\n%s", c.name, stderr)
		}
		out, _, err := mtl(t, "runs", "--db", db, "--format", "csv")
		if err != nil {
			t.Fatal(err)
		}
		if rows := csvRows(t, out); len(rows) != 0 {
			t.Errorf("%s: %d runs stored after the failure, want none", c.name, len(rows))
		}
	}
}

func TestExportImportMerge(t *testing.T) {
	dir := t.TempDir()
	a := recordTwoCases(t)
	b := recordTwoCases(t)
	if _, _, err := mtl(t, "export", "--db", a, "-o", filepath.Join(dir, "a.jsonl")); err != nil {
		t.Fatal(err)
	}
	out, _, err := mtl(t, "export", "two", "--db", b)
	if err != nil {
		t.Fatal(err)
	}
	// Store b stands for another runner of the matrix: its lines say so.
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		run, ok := l["run"].(map[string]any)
		if !ok { // the closing line, which counts the runs
			lines = append(lines, sc.Text())
			continue
		}
		m := run["machine"].(map[string]any)
		m["hostname"], m["gpu_name"], m["os"], m["arch"] = "ci-mac-m4", "Apple M4 Max", "darwin", "arm64"
		run["backend"] = "metal"
		enc, _ := json.Marshal(l)
		lines = append(lines, string(enc))
	}
	os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)

	merged := filepath.Join(dir, "merged.db")
	_, stderr, err := mtl(t, "import", filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl"), "--db", merged)
	if err != nil || !strings.Contains(stderr, "2 runs imported, 0 already here") {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	if _, stderr, err = mtl(t, "import", filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl"), "--db", merged); err != nil || !strings.Contains(stderr, "0 runs imported, 2 already here") {
		t.Fatalf("second import: %v\n%s", err, stderr)
	}
	out, _, err = mtl(t, "runs", "--db", merged, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	runs := csvRows(t, out)
	var hosts []string
	for _, r := range runs {
		hosts = append(hosts, r["hostname"])
		if r["commit"] == "" && r["version"] == "" {
			t.Errorf("provenance lost: %v", r)
		}
	}
	slices.Sort(hosts)
	if len(runs) != 2 || hosts[0] == hosts[1] || !slices.Contains(hosts, "ci-mac-m4") {
		t.Fatalf("merged runs: %v", runs)
	}
	// The samples came across: the same medians in both stores.
	orig, _, _ := mtl(t, "show", "two", "--db", a, "--format", "csv")
	got, _, _ := mtl(t, "show", "1", "--db", merged, "--format", "csv")
	om, gm := csvRows(t, orig), csvRows(t, got)
	if len(om) != len(gm) {
		t.Fatalf("%d rows after import, %d before", len(gm), len(om))
	}
	for i := range om {
		if om[i]["median"] != gm[i]["median"] || om[i]["key"] != gm[i]["key"] || om[i]["started"] != gm[i]["started"] {
			t.Errorf("row %d changed on import:\n%v\n%v", i, om[i], gm[i])
		}
	}
	// One report over both machines.
	report := filepath.Join(dir, "report")
	if _, stderr, err := mtl(t, "report", "two", "--db", merged, "--out", report); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	html, err := os.ReadFile(filepath.Join(report, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "Apple M4 Max") || !strings.Contains(string(html), "ci-mac-m4") {
		t.Errorf("the report does not cover the imported machine")
	}
	// A file that is not an export is refused before anything is stored.
	if _, _, err := mtl(t, "import", filepath.Join("..", "..", "reports", "peers", "testdata", "vllm-serve.json"), "--db", merged); err == nil || !strings.Contains(err.Error(), "mtlbench export") {
		t.Errorf("import of another file: %v", err)
	}
}

// An export taken while a run ran, imported first, is replaced by the
// finished run's export (under its id), never the other way round; a tag
// that a reference could not name is refused; a peer file imported twice
// is stored once.
func TestImportKeepsTheFurthestCopy(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	db, err := results.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Kind: results.KindSuite, Tag: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.AddCases(id, []results.Case{{Key: "model/c/batch=1", Name: "c", Kind: results.CaseModel, Params: map[string]string{"batch": "1"}}}); err != nil {
		t.Fatal(err)
	}
	stored, _ := db.Cases(id)
	rep := func(r int) {
		if err := db.AddRep(stored[0].ID, r, []results.Sample{{Rep: r, Metric: "decode_tok_s", Value: 100 + float64(r), Unit: "tok/s"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rep(0)
	export := func(name string) string {
		path := filepath.Join(dir, name)
		if _, stderr, err := mtl(t, "export", "--db", src, "-o", path); err != nil {
			t.Fatalf("export: %v\n%s", err, stderr)
		}
		return path
	}
	partial := export("partial.jsonl")
	rep(1)
	rep(2)
	if err := db.FinishRun(id, results.RunComplete); err != nil {
		t.Fatal(err)
	}
	db.Close()
	full := export("full.jsonl")

	merged := filepath.Join(dir, "merged.db")
	for _, step := range []struct {
		file, want string
		reps       string
	}{
		{partial, "1 run imported, 0 already here", "1"},
		{full, "was here as run 1 (interrupted, 1 repetition; the file's copy: complete, 3): replaced", "3"},
		{partial, "0 runs imported, 1 already here", "3"},
		{full, "0 runs imported, 1 already here", "3"},
	} {
		_, stderr, err := mtl(t, "import", step.file, "--db", merged)
		if err != nil || !strings.Contains(stderr, step.want) {
			t.Fatalf("import %s: %v\n%s", filepath.Base(step.file), err, stderr)
		}
		out, _, err := mtl(t, "show", "1", "--db", merged, "--format", "csv")
		if err != nil {
			t.Fatal(err)
		}
		if rows := csvRows(t, out); len(rows) != 1 || rows[0]["n"] != step.reps {
			t.Fatalf("after %s: %v", filepath.Base(step.file), rows)
		}
	}

	raw, _ := os.ReadFile(full)
	bad := filepath.Join(dir, "latest.jsonl")
	os.WriteFile(bad, []byte(strings.Replace(string(raw), `"tag":"nightly"`, `"tag":"latest"`, 1)), 0o644)
	if _, _, err := mtl(t, "import", bad, "--db", merged); err == nil || !strings.Contains(err.Error(), `tag "latest" is how a reference names the newest runs`) {
		t.Errorf("a run tagged latest: %v", err)
	}

	peer := filepath.Join("testdata", "peer", "hf.json")
	if _, _, err := mtl(t, "peer", "import", peer, "--db", merged); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := mtl(t, "peer", "import", peer, "--db", merged); err != nil || !strings.Contains(stderr, "is already here as run 2 (tag transformers): skipped") {
		t.Errorf("the same peer file twice: %v\n%s", err, stderr)
	}
}

// An interrupted bench run finishes with the same flags and --resume, as
// the command it prints says; the store's own failures name the database.
func TestBenchResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	// A first run at another goroutine count on the same machine: a run's
	// count is its own, not its machine row's.
	if _, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0",
		"--backend", "cpu", "--db", path, "-q", "--threads", "1"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	flags := []string{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-b", "1,2", "-p", "4", "-n", "2", "-r", "2", "--warmup", "0",
		"--backend", "cpu", "--db", path, "-q", "--tag", "my run"}
	if _, stderr, err := mtl(t, flags...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// Leave the run as Ctrl-C would: its second case not yet run.
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := db.Cases(2)
	if _, err := db.SQL().Exec(`DELETE FROM samples WHERE case_id = ?`, cases[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec(`UPDATE cases SET status = 'pending', reps_done = 0 WHERE id = ?`, cases[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec(`UPDATE runs SET status = 'interrupted' WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	app := newApp(io.Discard, io.Discard)
	app.Metadata = map[string]any{argsKey: append([]string{"mtlbench"}, append(flags, "--resume", "9")...)}
	want := "mtlbench bench -m qwen3-moe-mini --layers 1 -b 1,2 -p 4 -n 2 -r 2 --warmup 0 --backend cpu --db " + shellQuote(path) + ` -q --tag 'my run' --resume 2`
	if got := benchResumeCommand(cli.NewContext(app, nil, nil), path, 2); got != want {
		t.Errorf("resume command:\n%s\nwant\n%s", got, want)
	}
	if _, stderr, err := mtl(t, append(flags, "--resume", "2")...); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	// --threads is the cases' threads: another count builds another suite.
	if _, _, err := mtl(t, append(flags, "--resume", "2", "--threads", "1")...); err == nil || !strings.Contains(err.Error(), "resume: run 2 was made from another suite than these bench flags build (suite hash ") ||
		!strings.Contains(err.Error(), "resume it with the flags it was made with, as the resume command its interruption printed gives them") {
		t.Errorf("a resume at another count: %v", err)
	}
	out, _, err := mtl(t, "show", "2", "--db", path, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range csvRows(t, out) {
		if r["metric"] == "decode_tok_s" && r["n"] != "2" {
			t.Errorf("after the resume: %v", r)
		}
	}

	// A store that cannot be written is named, with what still works.
	ro := filepath.Join(t.TempDir(), "ro.db")
	raw, _ := os.ReadFile(path)
	os.WriteFile(ro, raw, 0o444)
	if os.Getuid() == 0 {
		t.Skip("root writes a read-only file")
	}
	_, _, err = mtl(t, "bench", "-m", "qwen3-moe-mini", "--layers", "1", "-p", "4", "-n", "2", "-r", "1", "--backend", "cpu", "--db", ro, "-q")
	if err == nil || !strings.Contains(err.Error(), "the results database "+ro+" cannot be written") {
		t.Errorf("a read-only store: %v", err)
	}
}

// Two results that share only their start (files without a time of their
// own, dated by a checkout's one modification time) are two runs; the same
// result again is skipped.
func TestPeerImportTellsResultsApart(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	when := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	write := func(name string, prompt int, tps float64) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(fmt.Sprintf("Timing with prompt_tokens=%d, generation_tokens=64, batch_size=1.\nTrial 1:  prompt_tps=%.3f, generation_tps=40.000, peak_memory=1.000\n", prompt, tps)), 0o644)
		os.Chtimes(p, when, when)
		return p
	}
	a, b := write("mlx-p128.txt", 128, 500), write("mlx-p2048.txt", 2048, 300)
	_, stderr, err := mtl(t, "peer", "import", a, b, "--db", db)
	if err != nil || strings.Count(stderr, "imported ") != 2 || strings.Contains(stderr, "skipped") {
		t.Fatalf("two results of one time: %v\n%s", err, stderr)
	}
	_, stderr, err = mtl(t, "peer", "import", b, "--db", db)
	if err != nil || !strings.Contains(stderr, "is already here as run 2") {
		t.Errorf("the second file again: %v\n%s", err, stderr)
	}
}

// bench -d 0,P mirrors llama-bench -d 0,P: its depth-0 case is keyed as a
// case without a depth, and its depth-P case as the peer's prompt at depth
// P, so compare pairs both.
func TestBenchDepthPairsWithLlamaBench(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if _, stderr, err := mtl(t, "bench", "-m", "qwen3-moe-mini", "-p", "16", "-n", "8", "-d", "0,32", "-r", "1", "--db", db, "--tag", "ours"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, stderr, err := mtl(t, "peer", "import", filepath.Join("testdata", "peer", "llama-bench-depth.json"), "--db", db, "--tag", "llama"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	keys := func(tag string) map[string]bool {
		out, _, err := mtl(t, "show", tag, "--db", db, "--format", "csv")
		if err != nil {
			t.Fatal(err)
		}
		k := map[string]bool{}
		for _, r := range csvRows(t, out) {
			k[r["key"]] = true
		}
		return k
	}
	ours, theirs := keys("ours"), keys("llama")
	for _, want := range []string{"model/bench/gen_len=8/prompt_len=16", "model/bench/depth=32/gen_len=8/prompt_len=16"} {
		if !ours[want] || !theirs[want] {
			t.Errorf("key %s: bench %v, llama-bench %v", want, ours, theirs)
		}
	}
}

// runs takes a list of tags, as compare does, and a kind: peer runs read as
// peer runs, not as bench runs.
func TestRunsByTagsAndKind(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	for i, tag := range []string{"x", "y"} {
		p := filepath.Join(dir, tag+".txt")
		os.WriteFile(p, []byte(fmt.Sprintf("Timing with prompt_tokens=%d, generation_tokens=64, batch_size=1.\nTrial 1:  prompt_tps=500.000, generation_tps=40.000, peak_memory=1.000\n", 128*(i+1))), 0o644)
		if _, stderr, err := mtl(t, "peer", "import", p, "--db", db, "--tag", tag); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
	}
	// An untagged run, which --tag "" lists alone: it listed every run,
	// as if --tag were left out.
	store, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Status: results.RunComplete}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	for _, c := range []struct {
		args []string
		n    int
	}{
		{[]string{"--tag", "x,y"}, 2},
		{[]string{"--tag", "y"}, 1},
		{[]string{"--tag", ""}, 1},
		{[]string{"--tag="}, 1},
		{[]string{"--kind", "peer"}, 2},
		{[]string{"--kind", "suite"}, 1},
		{nil, 3},
	} {
		out, _, err := mtl(t, append([]string{"runs", "--db", db, "--format", "csv"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if rows := csvRows(t, out); len(rows) != c.n {
			t.Errorf("runs %v: %d rows, want %d", c.args, len(rows), c.n)
		}
	}
	if out, _, err := mtl(t, "runs", "--db", db); err != nil || !strings.Contains(out, "peer") {
		t.Errorf("runs table without the kind: %v\n%s", err, out)
	}
	if _, _, err := mtl(t, "runs", "--db", db, "--kind", "bench"); err == nil || !strings.Contains(err.Error(), `--kind "bench": want suite, tune or peer`) {
		t.Errorf("an unknown kind: %v", err)
	}
}

// A resume names the store it resumes in: the command run and bench print
// names it by its absolute path, whatever folder it is run from; a --resume
// of a store that is not there creates none, and one of a run the store
// lacks says which store, before the suite's models are loaded.
func TestResumeNamesTheStore(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	abs := filepath.Join(work, "rel.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-m", "gpt2", "--db", "rel.db"}, "mtlbench bench -m gpt2 --db " + shellQuote(abs) + " --resume 3"},
		{[]string{"bench", "-m", "gpt2", "--db=rel.db", "--resume", "3"}, "mtlbench bench -m gpt2 " + shellQuote("--db="+abs) + " --resume 3"},
		{[]string{"bench", "-m", "gpt2"}, "mtlbench bench -m gpt2 --db " + shellQuote(abs) + " --resume 3"},
	} {
		app := newApp(io.Discard, io.Discard)
		app.Metadata = map[string]any{argsKey: append([]string{"mtlbench"}, tc.args...)}
		if got := benchResumeCommand(cli.NewContext(app, nil, nil), abs, 3); got != tc.want {
			t.Errorf("%v: resume command\n%s\nwant\n%s", tc.args, got, tc.want)
		}
	}
	for _, args := range [][]string{{"run", "--db", "rel.db", "--threads", "2", "ci"}, {"run", "--threads", "2", "ci"}} {
		var got string
		cmd := runCommand()
		cmd.Action = func(c *cli.Context) error { got = resumeCommand(c, abs, 3); return nil }
		app := &cli.App{Commands: []*cli.Command{cmd}}
		if err := app.Run(append([]string{"mtlbench"}, args...)); err != nil {
			t.Fatal(err)
		}
		if want := "mtlbench run ci --db " + shellQuote(abs) + " --threads 2 --resume 3"; got != want {
			t.Errorf("%v: resume command\n%s\nwant\n%s", args, got, want)
		}
	}

	// A suite whose model is not there: its cases would fail as they are
	// prepared, after a resume's checks.
	suite := filepath.Join(work, "gone.yaml")
	text := "name: gone\nmodel: { path: " + filepath.Join(work, "no-model") + " }\nbackend: cpu\nrepetitions: 1\nwarmup: 0\n" +
		"params: { prompt_len: 4, gen_len: 2 }\ncases:\n  - name: d\n    kind: model\n"
	if err := os.WriteFile(suite, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(work, "typo", "r.db")
	if _, _, err := mtl(t, "run", suite, "--db", missing, "--resume", "9"); err == nil || !strings.Contains(err.Error(), "no results database at "+missing) {
		t.Errorf("resume in a store that is not there: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); err == nil {
		t.Error("a resume created the store it was to resume in")
	}
	db, err := results.Open(abs)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, _, err := mtl(t, "run", suite, "--db", "rel.db", "--resume", "9"); err == nil || !strings.Contains(err.Error(), "run 9 is not in "+abs) {
		t.Errorf("resume of a run the store lacks: %v", err)
	}
}

// Runs that share a start, suite, tag, commit and machine but measured
// different things (two peer files dated alike, a sweep's runs begun in
// one second) are two runs to import; only a copy of a run holding all of
// the other's samples, further on, replaces it.
func TestImportTellsRunsOfOneStartApart(t *testing.T) {
	start := time.Date(2026, 11, 20, 9, 30, 12, 0, time.UTC)
	line := func(key string, vals ...float64) results.ExportLine {
		c := results.CaseRecord{Case: results.Case{Key: "model/" + key, Name: key, Kind: results.CaseModel, Status: results.CaseDone}}
		for i, v := range vals {
			c.Samples = append(c.Samples, results.Sample{Rep: i, Metric: "output_tok_s", Value: v, Unit: "tok/s"})
		}
		return results.ExportLine{Format: results.ExportFormat, RunRecord: results.RunRecord{
			Run: results.Run{ID: 1, SuiteName: "bench", Tag: "vllm", Backend: "vllm", Kind: results.KindPeer,
				Status: results.RunComplete, StartedAt: start, Machine: results.Machine{Hostname: "mac", CPUModel: "Apple M3 Max"}},
			Cases: []results.CaseRecord{c}}}
	}
	for _, tc := range []struct {
		name  string
		files [][]results.ExportLine // imported one after another
		want  string                 // the last import's summary
		runs  [][]string             // each stored run's raw values, by id
	}{
		{"two results of one start, one file",
			[][]results.ExportLine{{line("a", 100), line("b", 200)}},
			"2 runs imported, 0 already here", [][]string{{"100"}, {"200"}}},
		{"a run of more repetitions is another run, not a later copy",
			[][]results.ExportLine{{line("a", 100)}, {line("a", 300, 301, 302)}},
			"1 run imported, 0 already here", [][]string{{"100"}, {"300", "301", "302"}}},
		{"a later copy of the run replaces it",
			[][]results.ExportLine{{line("a", 100)}, {line("a", 100, 101, 102)}},
			"0 already here", [][]string{{"100", "101", "102"}}},
		{"an earlier copy is already here",
			[][]results.ExportLine{{line("a", 100, 101, 102)}, {line("a", 100)}},
			"0 runs imported, 1 already here", [][]string{{"100", "101", "102"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			db := filepath.Join(dir, "r.db")
			var stderr string
			for i, lines := range tc.files {
				path := filepath.Join(dir, fmt.Sprintf("%d.jsonl", i))
				var b bytes.Buffer
				x := results.NewExportWriter(&b)
				for _, l := range lines {
					if err := x.Write(&l.RunRecord); err != nil {
						t.Fatal(err)
					}
				}
				if err := x.Close(); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(path, b.Bytes(), 0o644)
				var err error
				if _, stderr, err = mtl(t, "import", path, "--db", db); err != nil {
					t.Fatalf("import %d: %v\n%s", i, err, stderr)
				}
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("last import said %q, want %q", stderr, tc.want)
			}
			for id, want := range tc.runs {
				out, _, err := mtl(t, "show", strconv.Itoa(id+1), "--db", db, "--format", "csv", "--raw")
				if err != nil {
					t.Fatalf("run %d: %v", id+1, err)
				}
				var got []string
				for _, r := range csvRows(t, out) {
					got = append(got, r["value"])
				}
				if !slices.Equal(got, want) {
					t.Errorf("run %d holds %v, want %v", id+1, got, want)
				}
			}
			if _, _, err := mtl(t, "show", strconv.Itoa(len(tc.runs)+1), "--db", db); err == nil {
				t.Errorf("a run %d beyond the %d expected", len(tc.runs)+1, len(tc.runs))
			}
		})
	}
}

// vLLM's *.pytorch.json copy of a run is refused, naming the result file
// written beside it, which peer import reads.
func TestPeerImportNamesVLLMResultFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	td := filepath.Join("..", "..", "reports", "peers", "testdata")
	for _, c := range []struct{ file, want string }{
		{"vllm-latency.pytorch.json", "import " + filepath.Join(td, "vllm-latency.json") + ", the result file vllm bench latency wrote beside it, with --batch 2 --prompt-len 16 --gen-len 8"},
		{"vllm-serve.pytorch.json", "import " + filepath.Join(td, "vllm-serve.json") + ", the result file vllm bench serve wrote beside it"},
	} {
		_, _, err := mtl(t, "peer", "import", filepath.Join(td, c.file), "--db", db)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "--from") {
			t.Errorf("%s: %v, want %q", c.file, err, c.want)
		}
	}
}

// An import of vllm bench serve --request-rate inf is a serving run:
// show and report print its serving figures and state its rate as inf.
func TestPeerVLLMRateInfShown(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	td := filepath.Join("..", "..", "reports", "peers", "testdata")
	for _, f := range []string{"vllm-serve.json", "vllm-serve-rate.json"} {
		if _, stderr, err := mtl(t, "peer", "import", filepath.Join(td, f), "--db", db); err != nil {
			t.Fatalf("import %s: %v\n%s", f, err, stderr)
		}
	}
	const note = "request rate inf (bench/batch=2/prompt_len=16/gen_len=8): vllm bench serve sent every request at once"
	for _, tc := range []struct {
		run         string
		want        []string
		noteWritten bool
	}{
		{"1", []string{"req/s", "TTFT p99 ms", "E2EL ms", "48.78 (n=1)", "37.9 (n=1)"}, true},
		{"2", []string{"req/s", "arrival=poisson:4"}, false},
	} {
		out, stderr, err := mtl(t, "show", tc.run, "--db", db)
		if err != nil {
			t.Fatalf("show %s: %v\n%s", tc.run, err, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("show %s lacks %q:\n%s", tc.run, w, out)
			}
		}
		if strings.Contains(out, note) != tc.noteWritten {
			t.Errorf("show %s: note %q written %v, want %v:\n%s", tc.run, note, !tc.noteWritten, tc.noteWritten, out)
		}
	}
	rep := filepath.Join(dir, "rep")
	if _, stderr, err := mtl(t, "report", "1", "--db", db, "--out", rep); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr)
	}
	page, err := os.ReadFile(filepath.Join(rep, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "req/s") || !strings.Contains(string(page), note) {
		t.Errorf("report of run 1 lacks req/s or %q", note)
	}
}

// A peer run file with a value of the wrong type names its key and the
// JSON value, not Go's struct field and type.
func TestPeerImportNamesTheBadField(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hf.json")
	if err := os.WriteFile(file, []byte(`{"format": "mtlbench-peer-run/1", "cases": [{"samples": [{"value": "fast"}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := mtl(t, "peer", "import", file, "--db", filepath.Join(dir, "r.db"))
	if want := file + `: mtlbench: not a peer run: cases.samples.value is a JSON string ("fast"), want a number`; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// Another tool's file read as mlx_lm.benchmark's output (--from mlx-lm)
// says what that output holds, not only that no case was read.
func TestPeerImportMLXOfNoTrials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "serve.json")
	if err := os.WriteFile(file, []byte("{\"completed\": 4}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := mtl(t, "peer", "import", file, "--from", "mlx-lm", "--db", filepath.Join(dir, "r.db"))
	want := file + `: mlx-lm: no case could be read (mlx_lm.benchmark prints a "Timing with prompt_tokens=P, generation_tokens=N, batch_size=B." line and its "Trial N:" lines; none is here)`
	if exitCode(err) != 2 || err.Error() != want {
		t.Errorf("exit %d, %v; want 2 and %q", exitCode(err), err, want)
	}
}

// A file given to the importer that does not read it names the one that
// does, whichever way round: another tool's output (or a peer run) to
// import, an export to peer import. Nothing is stored.
func TestImportersNameEachOther(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	hf := filepath.Join("testdata", "peer", "hf.json")
	llama := filepath.Join("..", "..", "reports", "peers", "testdata", "llama-bench.jsonl")
	mlx := filepath.Join("..", "..", "reports", "peers", "testdata", "mlx-benchmark.txt")
	src := filepath.Join(dir, "src.db")
	if _, _, err := mtl(t, "peer", "import", hf, "--db", src); err != nil {
		t.Fatal(err)
	}
	export := filepath.Join(dir, "runs.jsonl")
	if _, _, err := mtl(t, "export", "--db", src, "-o", export); err != nil {
		t.Fatal(err)
	}
	hfText, err := os.ReadFile(hf)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"import", hf}, "", hf + " is a peer run (mtlbench-peer-run/1), not an mtlbench export: `mtlbench peer import " + hf + "` reads it"},
		{[]string{"import", llama}, "", llama + " is llama-bench output, not an mtlbench export: `mtlbench peer import " + llama + "` reads it"},
		{[]string{"import", mlx}, "", "is mlx-lm output, not an mtlbench export"},
		{[]string{"import", "-"}, string(hfText), "standard input is a peer run (mtlbench-peer-run/1), not an mtlbench export: `mtlbench peer import -` reads it"},
		{[]string{"peer", "import", export}, "", export + `: mtlbench: format "mtlbench-run/2" is an mtlbench export, not a peer run: ` + "`mtlbench import` reads it"},
	} {
		_, _, err := mtlIn(t, tc.stdin, append(tc.args, "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a refused import made a store")
	}
}

// peer import --model takes a name mtlbench's runs record: a preset, or a
// checkpoint's name as bench -m records it (its folder's, a GGUF file's
// without .gguf). A near miss of a preset, a path, a file name or an empty
// name is refused before any store is made, naming what to give; a name
// that differs from a preset only in case, or is far from every preset,
// is a checkpoint's and is recorded.
func TestPeerImportModelName(t *testing.T) {
	llama := filepath.Join("..", "..", "reports", "peers", "testdata", "llama-bench.json")
	for _, tc := range []struct {
		model, want string
	}{
		{"qwen3-moe-mini", ""},
		{"Qwen3-30B-A3B", ""},
		{"Meta-Llama-3-8B-Instruct", ""},
		{"mixtral", ""}, // a checkpoint folder's name, not a typo of mixtral-8x7b
		{"qwen3-30b-a3", `--model "qwen3-30b-a3" is no preset (did you mean "qwen3-30b-a3b"?); a checkpoint's runs record its folder's name, a GGUF file's its name without .gguf`},
		{"tinylama-1.1b", `--model "tinylama-1.1b" is no preset (did you mean "tinyllama-1.1b"?)`},
		{"Qwen/Qwen3-30B-A3B", `--model "Qwen/Qwen3-30B-A3B": a run records a checkpoint by its folder's name ("Qwen3-30B-A3B"), never a path or a repository id`},
		{"qwen3-q4_k_m.gguf", `--model "qwen3-q4_k_m.gguf": a run records a GGUF file by its name without .gguf ("qwen3-q4_k_m")`},
		{" ", `--model " ": an empty model name (give a preset: `},
	} {
		t.Run(tc.model, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "r.db")
			_, _, err := mtl(t, "peer", "import", llama, "--db", db, "--model", tc.model)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				store, err := results.Open(db)
				if err != nil {
					t.Fatal(err)
				}
				defer store.Close()
				runs, err := store.Runs(results.RunFilter{})
				if err != nil || len(runs) == 0 {
					t.Fatalf("no run stored: %v", err)
				}
				cases, err := store.Cases(runs[0].ID)
				if err != nil || len(cases) == 0 || cases[0].Params["model"] != tc.model {
					t.Errorf("cases %v (%v), want model %q", cases, err, tc.model)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to begin %s", err, tc.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit %d, want 2 (a usage error)", code)
			}
			if _, serr := os.Stat(db); serr == nil {
				t.Errorf("a refused import made the store %s", db)
			}
		})
	}
}

// peer import's flags are checked before any file is read: a mistyped
// --from names the format meant, and a workload count of 0 or less, which
// was taken for the flag left out, is refused naming the flag.
func TestPeerImportFlagValues(t *testing.T) {
	latency := filepath.Join("..", "..", "reports", "peers", "testdata", "vllm-latency.json")
	for _, tc := range []struct {
		flag []string
		want string
	}{
		{[]string{"--from", "llamabench"}, `--from "llamabench": unknown peer format (want one of llama-bench, vllm-serve, vllm-latency, mlx-lm, mtlbench) (did you mean "llama-bench"?)`},
		{[]string{"--from", "xml"}, `--from "xml": unknown peer format (want one of llama-bench, vllm-serve, vllm-latency, mlx-lm, mtlbench)`},
		{[]string{"--batch", "0"}, "--batch 0: want 1 or more"},
		{[]string{"--prompt-len", "-3"}, "--prompt-len -3: want 1 or more"},
		{[]string{"--gen-len", "0"}, "--gen-len 0: want 1 or more"},
	} {
		db := filepath.Join(t.TempDir(), "r.db")
		_, _, err := mtl(t, append([]string{"peer", "import", latency, "--db", db}, tc.flag...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v\nwant %s", tc.flag, err, tc.want)
		}
		if code := exitCode(err); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.flag, code)
		}
		if _, serr := os.Stat(db); serr == nil {
			t.Errorf("%v: a refused import made the store %s", tc.flag, db)
		}
	}
}

// A peer result imported by an earlier mtlbench, which keyed a value at its
// default with it (batch=1), is the same result imported again now, keyed
// without it: skipped, not stored twice for compare to pool twice
// (docs/suites.md, "A default written is a default left out").
func TestPeerImportAgainAfterKeysDroppedDefaults(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	for _, tc := range []struct{ name, text, old, now string }{
		{"mlx batch 1", "Timing with prompt_tokens=128, generation_tokens=64, batch_size=1.\nTrial 1:  prompt_tps=500.000, generation_tps=40.000, peak_memory=1.000\n",
			"model/bench/batch=1/gen_len=64/prompt_len=128", "model/bench/gen_len=64"},
		{"mlx batch 2", "Timing with prompt_tokens=16, generation_tokens=8, batch_size=2.\nTrial 1:  prompt_tps=900.000, generation_tps=70.000, peak_memory=1.000\n",
			"", "model/bench/batch=2/gen_len=8/prompt_len=16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".txt")
			if err := os.WriteFile(p, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, err := mtl(t, "peer", "import", p, "--db", db)
			if err != nil || !strings.Contains(stderr, "imported ") {
				t.Fatalf("first import: %v\n%s", err, stderr)
			}
			if tc.old != "" {
				// As the earlier mtlbench stored it.
				d, err := results.Open(db)
				if err != nil {
					t.Fatal(err)
				}
				res, err := d.SQL().Exec(`UPDATE cases SET case_key = ? WHERE case_key = ?`, tc.old, tc.now)
				if n, _ := res.RowsAffected(); err != nil || n != 1 {
					t.Fatalf("rewriting the key: %v, %d rows", err, n)
				}
				d.Close()
			}
			_, stderr, err = mtl(t, "peer", "import", p, "--db", db)
			if err != nil || !strings.Contains(stderr, "is already here as run") || strings.Contains(stderr, "imported ") {
				t.Errorf("the same result again: %v\n%s", err, stderr)
			}
		})
	}
}

// A store that imported a peer result while a value at its default was
// keyed with it (batch=1) already holds the run another store imported
// from the same file since: importing that store's export skips it, as
// the same run, not pooled twice (docs/suites.md, "A default written is a
// default left out").
func TestImportOfARunKeyedBeforeDefaultsWereLeftOut(t *testing.T) {
	dir := t.TempDir()
	old, now := filepath.Join(dir, "old.db"), filepath.Join(dir, "now.db")
	p := filepath.Join(dir, "mlx.txt")
	if err := os.WriteFile(p, []byte("Timing with prompt_tokens=128, generation_tokens=64, batch_size=1.\nTrial 1:  prompt_tps=500.000, generation_tps=40.000, peak_memory=1.000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{old, now} {
		if _, stderr, err := mtl(t, "peer", "import", p, "--db", db); err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
	}
	// As the earlier mtlbench stored it.
	d, err := results.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.SQL().Exec(`UPDATE cases SET case_key = 'model/bench/batch=1/gen_len=64/prompt_len=128' WHERE case_key = 'model/bench/gen_len=64'`)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("rewriting the key: %v, %d rows", err, n)
	}
	d.Close()
	export := filepath.Join(dir, "now.jsonl")
	if _, stderr, err := mtl(t, "export", "--db", now, "-o", export); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, stderr, err := mtl(t, "import", export, "--db", old); err != nil || !strings.Contains(stderr, "0 runs imported, 1 already here") {
		t.Errorf("the same run from another store: %v\n%s", err, stderr)
	}
}
