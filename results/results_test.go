package results

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTemp(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "sub", "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func testMachine() Machine {
	return Machine{
		Hostname: "m3max", OS: "darwin", Arch: "arm64", CPUModel: "Apple M3 Max", CPUCores: 16,
		MemoryBytes: 128 << 30, GPUName: "Apple M3 Max", GPUMemoryBytes: 96 << 30, Driver: "Metal 3",
		ThermalState: "nominal", PowerState: "ac", Extra: map[string]string{"gpu_cores": "40"},
	}
}

func mustRun(t testing.TB, db *DB, r Run) int64 {
	t.Helper()
	id, err := db.CreateRun(&r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustCases(t testing.TB, db *DB, runID int64, n int) []Case {
	t.Helper()
	cs := make([]Case, n)
	for i := range cs {
		cs[i] = Case{Name: fmt.Sprintf("matmul-%d", i), Kind: CaseKernel,
			Params: map[string]string{"op": "matmul", "m": fmt.Sprint(64 * (i + 1)), "dtype": "f16"}}
	}
	if err := db.AddCases(runID, cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func pragma(t testing.TB, db *DB, name string) string {
	t.Helper()
	var v string
	if err := db.SQL().QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func count(t testing.TB, db *DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.SQL().QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestOpenFresh(t *testing.T) {
	db := openTemp(t)
	if v, err := db.SchemaVersion(); err != nil || v != LatestSchemaVersion() {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, LatestSchemaVersion())
	}
	for name, want := range map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"busy_timeout": "10000",
		"synchronous":  "1", // NORMAL
	} {
		if got := pragma(t, db, name); got != want {
			t.Errorf("PRAGMA %s = %q, want %q", name, got, want)
		}
	}
	for _, table := range []string{"machines", "runs", "cases", "case_params", "samples", "op_timings", "operand_traffic", "run_summary", "sample_stats"} {
		if count(t, db, `SELECT count(*) FROM sqlite_master WHERE name = ?`, table) != 1 {
			t.Errorf("no table or view %s", table)
		}
	}
	// Reopening an up-to-date file changes nothing.
	path := db.Path()
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if v, _ := db2.SchemaVersion(); v != LatestSchemaVersion() {
		t.Fatalf("version after reopen = %d", v)
	}
}

func TestDefaultPath(t *testing.T) {
	home, _ := os.UserHomeDir()
	for _, tc := range []struct {
		name, xdg, want string
	}{
		{"xdg", "/data", "/data/mtlbench/results.db"},
		{"relative xdg ignored", "rel", filepath.Join(home, ".local/share/mtlbench/results.db")},
		{"home", "", filepath.Join(home, ".local/share/mtlbench/results.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_DATA_HOME", tc.xdg)
			if got := DefaultPath(); got != tc.want {
				t.Errorf("DefaultPath() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOpenWantsAPath(t *testing.T) {
	if db, err := Open(""); err == nil {
		db.Close()
		t.Fatal("Open(\"\") opened a database")
	}
}

func TestOpenPathWithOddCharacters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a b?c#d%20", "results.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the path asked for: %v", err)
	}
}

func TestMigrateFromV1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := open(path, migrations[:1])
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := old.SchemaVersion(); v != 1 {
		t.Fatalf("v1 database has version %d", v)
	}
	// Data as a v1 mtlbench wrote it, with v1's columns only.
	for _, q := range []string{
		`INSERT INTO machines (id, content_hash, hostname, os, arch, extra_json, first_seen)
			VALUES (1, 'h', 'oldbox', 'linux', 'amd64', '{"k":"v"}', '2025-01-02T03:04:05.000000Z')`,
		`INSERT INTO runs (id, suite_name, git_commit, tag, backend, machine_id, started_at, ended_at, status)
			VALUES (7, 'smoke', 'abcdef123', 'baseline', 'cpu', 1, '2025-01-02T03:04:05.000000Z', '2025-01-02T03:05:00.000000Z', 'complete')`,
		`INSERT INTO cases (id, run_id, case_key, name, kind, seq, params_json, status)
			VALUES (11, 7, 'm=64', 'mm', 'kernel', 0, '{"m":"64"}', 'done'), (12, 7, 'm=128', 'mm', 'kernel', 1, '{"m":"128"}', 'pending')`,
		`INSERT INTO case_params VALUES (11, 'm', '64', 64), (12, 'm', '128', 128)`,
		`INSERT INTO samples VALUES (11, 0, 'gflops', 1.5, 'GFLOP/s'), (11, 1, 'gflops', 1.75, 'GFLOP/s')`,
	} {
		if _, err := old.SQL().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old.Close()

	db := openUpgraded(t, path)
	r, err := db.GetRun(7)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tag != "baseline" || r.Emulated || r.Machine.Hostname != "oldbox" || r.Machine.Extra["k"] != "v" ||
		r.StartedAt != time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) {
		t.Errorf("run after upgrade: %+v", r)
	}
	cs, err := db.Cases(7)
	if err != nil || len(cs) != 2 || cs[0].Status != CaseDone || cs[0].LayersRun != 0 || cs[1].Params["m"] != "128" {
		t.Fatalf("cases after upgrade: %+v, %v", cs, err)
	}
	if s, _ := db.Samples(11); len(s) != 2 || s[1].Value != 1.75 {
		t.Errorf("samples after upgrade: %+v", s)
	}
	// The new schema is usable on the old data.
	err = db.FinishCase(12, []Sample{{0, "gflops", 3, "GFLOP/s"}}, []OpTiming{{0, -1, CompOther, "matmul", 0.001, 1, 0, 0, 0}}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := db.ResolveRef("abcdef"); err != nil || !reflect.DeepEqual(ids, []int64{7}) {
		t.Errorf("ResolveRef after upgrade = %v, %v", ids, err)
	}
}

func TestRefuseNewerSchema(t *testing.T) {
	db := openTemp(t)
	path := db.Path()
	if _, err := db.SQL().Exec(fmt.Sprintf("PRAGMA user_version = %d", LatestSchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := Open(path)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a newer database: %v; want ErrSchemaTooNew naming the file", err)
	}
	// An older build (knowing only step 1) refuses today's file the same way.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	cur, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cur.Close()
	if _, err := open(path, migrations[:1]); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("v1 build opening a v%d file: %v", LatestSchemaVersion(), err)
	}
}

// TestNewerSchemaLeftUnwritten: a newer mtlbench's store, in whichever
// journal mode it was left, is refused by every way of opening it with its
// bytes as they were: switching it to WAL would rewrite its header.
func TestNewerSchemaLeftUnwritten(t *testing.T) {
	for _, mode := range []string{"delete", "wal"} {
		for _, o := range []struct {
			name string
			open func(string) (*DB, error)
		}{{"Open", Open}, {"OpenToWrite", OpenToWrite}, {"OpenReadOnly", OpenReadOnly}} {
			t.Run(mode+"/"+o.name, func(t *testing.T) {
				db := openTemp(t)
				path := db.Path()
				for _, q := range []string{"PRAGMA journal_mode = " + mode,
					fmt.Sprintf("PRAGMA user_version = %d", LatestSchemaVersion()+1)} {
					if _, err := db.SQL().Exec(q); err != nil {
						t.Fatal(err)
					}
				}
				db.Close()
				before, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := o.open(path); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), path) {
					t.Fatalf("%s of a newer store: %v; want ErrSchemaTooNew naming it", o.name, err)
				}
				after, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(before, after) {
					t.Errorf("%s of a newer %s-mode store changed its bytes", o.name, mode)
				}
			})
		}
	}
}

func TestRoundTrip(t *testing.T) {
	db := openTemp(t)
	start := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	in := Run{SuiteName: "llama-decode", SuitePath: "suites/llama.yaml", SuiteHash: "sha256:1234",
		ToolVersion: "v0.1.0", GitCommit: "DEADBEEF00", Tag: "base", Backend: "metal", TimingMode: TimingProfile,
		Kind: KindTune, Notes: "fan at max", Emulated: true, Machine: testMachine(), StartedAt: start,
		TreeCommit: "cafe01", Overrides: map[string]string{"moe_chunk": "1", "sampling": "temperature:0.7,top_k:40"},
		ReadBandwidthGBs: 101.5}
	id, err := db.CreateRun(&in)
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != id || in.Status != RunRunning || in.GitCommit != "deadbeef00" {
		t.Fatalf("CreateRun did not fill defaults: %+v", in)
	}
	got, err := db.GetRun(id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, in) {
		t.Fatalf("GetRun:\n got %+v\nwant %+v", *got, in)
	}
	if err := db.FinishRun(id, RunComplete); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.GetRun(id); got.Status != RunComplete || got.EndedAt.IsZero() {
		t.Errorf("after FinishRun: %+v", got)
	}
	if _, err := db.GetRun(id + 100); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun(unknown) = %v", err)
	}
	if err := db.FinishRun(id, "bogus"); err == nil {
		t.Error("FinishRun accepted status bogus")
	}

	// Machines are identified by their stable facts: Extra, the thermal
	// state and the measured bandwidth (a run's) do not make a new one.
	m2 := testMachine()
	m3 := testMachine()
	m3.Extra = nil
	m4 := m3
	m4.Extra = map[string]string{"read_bandwidth_gb_s": "99"}
	m5 := testMachine()
	m5.ThermalState = "serious"
	m6 := testMachine()
	m6.GPUName = "another GPU"
	for _, m := range []Machine{m2, m3, m4, m5, m6} {
		mustRun(t, db, Run{Machine: m, ReadBandwidthGBs: 90 + float64(len(m.ThermalState))})
	}
	if n := count(t, db, `SELECT count(*) FROM machines`); n != 2 {
		t.Errorf("%d machines stored, want 2", n)
	}

	cases := []Case{
		{Name: "llama-3-8b decode", Kind: CaseModel, Params: map[string]string{"model": "llama-3-8b", "batch": "1", "ctx": "4096", "quant": "q4_0"}},
		{Key: "custom-key", Name: "rmsnorm", Kind: CaseKernel, Params: map[string]string{"op": "rms_norm", "n": "4096", "eps": "1e-5"}},
		{Name: "empty params kernel", Kind: CaseKernel, Key: "noparams"},
	}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	if cases[0].Key != "batch=1,ctx=4096,model=llama-3-8b,quant=q4_0" || cases[1].Key != "custom-key" {
		t.Errorf("keys: %q %q", cases[0].Key, cases[1].Key)
	}
	more := []Case{{Name: "later", Kind: CaseKernel, Params: map[string]string{"op": "softmax"}}}
	if err := db.AddCases(id, more); err != nil {
		t.Fatal(err)
	}
	if more[0].Seq != 3 {
		t.Errorf("seq of a later AddCases = %d, want 3", more[0].Seq)
	}
	if err := db.AddCases(id, []Case{{Kind: CaseKernel, Key: "custom-key"}}); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Errorf("duplicate key: %v", err)
	}
	if err := db.AddCases(id, []Case{{Kind: "gemm", Key: "x"}}); err == nil {
		t.Error("AddCases accepted kind gemm")
	}
	if err := db.AddCases(999, []Case{{Kind: CaseKernel, Key: "x"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AddCases on unknown run: %v", err)
	}

	samples := []Sample{
		{0, "decode_tok_s", 41.5, "tok/s"}, {1, "decode_tok_s", 42.25, "tok/s"}, {2, "decode_tok_s", 40, "tok/s"},
		{0, "ttft_ms", 120.5, "ms"}, {1, "ttft_ms", 118, "ms"}, {2, "ttft_ms", 119.75, "ms"},
	}
	timings := []OpTiming{
		{0, -1, CompOther, "embed", 0.0001, 1, 0, 0, 0},
		{0, 0, CompNorm, "rms_norm", 0.00002, 2, 0, 0, 0},
		{0, 0, CompAttention, "flash_attn", 0.0012, 1, 0, 0, 0},
		{0, 0, CompMLP, "mul_mat", 0.0021, 3, 0, 0, 0},
		{1, 0, CompMoE, "mul_mat_id", 0.0031, 1, 25_000_000, 21_500_000, 116}, // the witness's bytes and critical loads
	}
	if err := db.StartCase(cases[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishCase(cases[0].ID, samples, timings, 4, 32); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishCase(cases[0].ID, nil, nil, 0, 0); err == nil {
		t.Error("finishing a done case twice succeeded")
	}
	if err := db.FailCase(cases[1].ID, "kernel did not compile"); err != nil {
		t.Fatal(err)
	}
	if err := db.SkipCase(cases[2].ID, "unsupported on cpu"); err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(cases[0].ID, "x"); err == nil {
		t.Error("FailCase on a done case succeeded")
	}

	gotCases, err := db.Cases(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotCases) != 4 {
		t.Fatalf("%d cases", len(gotCases))
	}
	c0 := gotCases[0]
	if c0.Status != CaseDone || c0.LayersRun != 4 || c0.LayersTotal != 32 || c0.StartedAt.IsZero() ||
		c0.EndedAt.Before(c0.StartedAt) || !reflect.DeepEqual(c0.Params, cases[0].Params) || c0.Key != cases[0].Key ||
		c0.Name != cases[0].Name || c0.Kind != CaseModel || c0.Seq != 0 || c0.RunID != id {
		t.Errorf("case 0: %+v", c0)
	}
	if g := gotCases[1]; g.Status != CaseFailed || g.Error != "kernel did not compile" || g.LayersTotal != 0 {
		t.Errorf("case 1: %+v", g)
	}
	if g := gotCases[2]; g.Status != CaseSkipped || g.Error != "unsupported on cpu" {
		t.Errorf("case 2: %+v", g)
	}
	if g, err := db.GetCase(more[0].ID); err != nil || g.Status != CasePending || g.Name != "later" {
		t.Errorf("GetCase: %+v, %v", g, err)
	}

	gotSamples, err := db.Samples(cases[0].ID)
	if err != nil || !reflect.DeepEqual(gotSamples, samples) {
		t.Errorf("Samples:\n got %+v, %v\nwant %+v", gotSamples, err, samples)
	}
	runSamples, err := db.RunSamples(id)
	if err != nil || len(runSamples) != 1 || !reflect.DeepEqual(runSamples[cases[0].ID], samples) {
		t.Errorf("RunSamples: %+v, %v", runSamples, err)
	}
	gotTimings, err := db.OpTimings(cases[0].ID)
	if err != nil || !reflect.DeepEqual(gotTimings, timings) {
		t.Errorf("OpTimings:\n got %+v, %v\nwant %+v", gotTimings, err, timings)
	}

	// Parameters are queryable from SQL, numerically where numeric.
	if n := count(t, db, `SELECT count(*) FROM case_params WHERE name = 'ctx' AND value_num >= 2048`); n != 1 {
		t.Errorf("numeric param query found %d", n)
	}
	if n := count(t, db, `SELECT count(*) FROM case_params WHERE name = 'eps' AND value_num = 1e-5`); n != 1 {
		t.Errorf("1e-5 not stored numerically (%d)", n)
	}
	if n := count(t, db, `SELECT count(*) FROM case_params WHERE name = 'model' AND value_num IS NULL`); n != 1 {
		t.Errorf("text param has value_num (%d)", n)
	}
	if n := count(t, db, `SELECT n FROM sample_stats WHERE case_id = ? AND metric = 'ttft_ms'`, cases[0].ID); n != 3 {
		t.Errorf("sample_stats n = %d", n)
	}
	if n := count(t, db, `SELECT done FROM run_summary WHERE id = ?`, id); n != 1 {
		t.Errorf("run_summary done = %d", n)
	}

	// Deleting a run takes its rows with it (foreign keys are on).
	if err := db.DeleteRun(id); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"cases", "case_params", "samples", "op_timings"} {
		if n := count(t, db, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows left in %s after DeleteRun", n, table)
		}
	}
}

func TestRunsFilter(t *testing.T) {
	db := openTemp(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := mustRun(t, db, Run{SuiteName: "smoke", GitCommit: "aaaa1111", Tag: "v1", Backend: "cpu", StartedAt: t0})
	b := mustRun(t, db, Run{SuiteName: "smoke", GitCommit: "aaaa2222", Tag: "v2", Backend: "metal", StartedAt: t0.Add(time.Hour)})
	c := mustRun(t, db, Run{SuiteName: "full", GitCommit: "bbbb1111", Tag: "v2", Kind: KindPeer, StartedAt: t0.Add(2 * time.Hour)})
	if err := db.FinishRun(a, RunComplete); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    RunFilter
		want []int64
	}{
		{"all newest first", RunFilter{}, []int64{c, b, a}},
		{"tag", RunFilter{Tag: "v2"}, []int64{c, b}},
		{"commit prefix", RunFilter{GitCommit: "aaaa"}, []int64{b, a}},
		{"commit prefix upper case", RunFilter{GitCommit: "AAAA1"}, []int64{a}},
		{"commit prefix is not a pattern", RunFilter{GitCommit: "a%"}, nil},
		{"suite", RunFilter{SuiteName: "smoke"}, []int64{b, a}},
		{"status", RunFilter{Status: RunComplete}, []int64{a}},
		{"kind", RunFilter{Kind: KindPeer}, []int64{c}},
		{"backend", RunFilter{Backend: "metal"}, []int64{b}},
		{"combined", RunFilter{Tag: "v2", SuiteName: "smoke"}, []int64{b}},
		{"limit", RunFilter{Limit: 2}, []int64{c, b}},
		{"none", RunFilter{Tag: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := db.Runs(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("Runs(%+v) = %v, want %v", tc.f, ids, tc.want)
			}
		})
	}
}

// A reference list splits on commas, each item trimmed; one naming nothing
// is an empty reference, and an empty item among others is refused, not
// skipped.
func TestSplitRefs(t *testing.T) {
	for _, tc := range []struct {
		list, want, err string
	}{
		{"a", "a", ""},
		{" a , 42 ", "a|42", ""},
		{"a,b,latest", "a|b|latest", ""},
		{"", "", `empty run reference ""`},
		{" , ", "", `empty run reference " , "`},
		{"a,", "", `run references "a,": item 2 of 2 is empty`},
		{",a", "", `run references ",a": item 1 of 2 is empty`},
		{"a,,b", "", `run references "a,,b": item 2 of 3 is empty`},
		{"a, ,b", "", `run references "a, ,b": item 2 of 3 is empty`},
	} {
		got, err := SplitRefs(tc.list)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SplitRefs(%q) = %q, %v; want error %q", tc.list, got, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, "|") != tc.want {
			t.Errorf("SplitRefs(%q) = %q, %v; want %q", tc.list, got, err, tc.want)
		}
	}
}

func TestResolveRef(t *testing.T) {
	db := openTemp(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := mustRun(t, db, Run{GitCommit: "c0ffee1234", Tag: "nightly", StartedAt: t0})
	b := mustRun(t, db, Run{GitCommit: "c0ffee9999", Tag: "nightly", StartedAt: t0.Add(time.Hour)})
	c := mustRun(t, db, Run{GitCommit: "f00d", Tag: "c0ffee", StartedAt: t0.Add(2 * time.Hour)})
	d := mustRun(t, db, Run{GitCommit: "c0ffee12", StartedAt: t0.Add(-time.Hour)}) // a's commit, spelt short
	for _, tc := range []struct {
		ref     string
		want    []int64
		wantErr bool
	}{
		{"c0ffee12", []int64{a, d}, false},
		{fmt.Sprint(a), []int64{a}, false},
		{fmt.Sprint(b), []int64{b}, false},
		{"nightly", []int64{b, a}, false},
		{"c0ffee1", []int64{a, d}, false},
		{"C0FFEE9", []int64{b}, false},
		{"c0ffee", []int64{c}, false}, // an exact tag beats a commit prefix
		{"f00d", []int64{c}, false},
		{"latest", []int64{c}, false},
		{"  nightly ", []int64{b, a}, false},
		{"c0f", nil, true}, // too short to be taken as a commit
		{"c0ffe", nil, true},
		{"999", nil, true},
		{"1000", nil, true}, // digits that are no run id and no commit prefix either
		{"99999", nil, true},
		{"abcd", nil, true},
		{"deadbeef", nil, true},
		{"no-such-tag", nil, true},
		{"", nil, true},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			ids, err := db.ResolveRef(tc.ref)
			if tc.ref == "c0ffe" { // two commits: ambiguous, as git has it
				if err == nil || !strings.Contains(err.Error(), `commit prefix "c0ffe" is ambiguous: it names runs of 2 commits (c0ffee1234, c0ffee9999)`) {
					t.Errorf("ResolveRef(%q) = %v, %v; want it ambiguous", tc.ref, ids, err)
				}
				return
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ResolveRef(%q) = %v, want an error", tc.ref, ids)
				}
				// "no run matches" is the whole message: no ": not found" after it.
				if tc.ref != "" && (!errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), strings.TrimSpace(tc.ref)) ||
					!strings.Contains(err.Error(), db.Path()) || strings.HasSuffix(err.Error(), ErrNotFound.Error())) {
					t.Errorf("error %q should wrap ErrNotFound, name the ref and the store, and end with what lists the runs", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("ResolveRef(%q) = %v, %v; want %v", tc.ref, ids, err, tc.want)
			}
		})
	}
}

// A reference that matches no run names the store's tag it is a likely
// typo of, and no tag where none is close.
func TestResolveRefNamesACloseTag(t *testing.T) {
	db := openTemp(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"main", "main", "nightly", "pr-1234", ""} {
		mustRun(t, db, Run{Tag: tag, StartedAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	for _, tc := range []struct{ ref, want string }{
		{"mian", `no run matches "mian" in ` + db.Path() + `: did you mean the tag "main"? (tried run id`},
		{"nightyl", `: did you mean the tag "nightly"?`},
		{"pr-1243", `: did you mean the tag "pr-1234"?`},
		{"release", `no run matches "release" in ` + db.Path() + ` (tried run id`},
		{"99", `no run matches "99" in ` + db.Path() + ` (tried run id`},
	} {
		_, err := db.ResolveRef(tc.ref)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ResolveRef(%q) = %v, want %q in it", tc.ref, err, tc.want)
		}
	}
}

// A reference into a store that holds no run says so and how runs get
// there, not to list its runs.
func TestResolveRefEmptyStore(t *testing.T) {
	db := openTemp(t)
	for _, ref := range []string{"latest", "1", "main", "c0ffee"} {
		_, err := db.ResolveRef(ref)
		want := fmt.Sprintf("no run matches %q: %s holds no runs yet (record one with mtlbench run ci or mtlbench bench", ref, db.Path())
		if !errors.Is(err, ErrNotFound) || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ResolveRef(%q) = %v, want ErrNotFound saying %q", ref, err, want)
		}
	}
}

func TestCanonicalKey(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{"b": "2", "a": "1"}, "a=1,b=2"},
		{map[string]string{"model": "org/llama-3.1-8B", "q": "q4_K_M"}, "model=org/llama-3.1-8B,q=q4_K_M"},
		{map[string]string{"x": "a,b=c"}, `x="a,b=c"`},
		{map[string]string{"x": ""}, `x=""`},
		{map[string]string{"x y": "1 2"}, `"x y"="1 2"`},
		{map[string]string{"x": `"q"`}, `x="\"q\""`},
	} {
		if got := CanonicalKey(tc.params); got != tc.want {
			t.Errorf("CanonicalKey(%v) = %q, want %q", tc.params, got, tc.want)
		}
	}
	// Maps that differ must give keys that differ.
	a := CanonicalKey(map[string]string{"a": "1,b=2"})
	b := CanonicalKey(map[string]string{"a": "1", "b": "2"})
	if a == b {
		t.Errorf("ambiguous keys: %q", a)
	}
}

func TestFinishCaseAtomic(t *testing.T) {
	good := make([]Sample, 1000)
	for i := range good {
		good[i] = Sample{Rep: i, Metric: "decode_tok_s", Value: float64(i), Unit: "tok/s"}
	}
	with := func(i int, s Sample) []Sample {
		out := append([]Sample(nil), good...)
		out[i] = s
		return out
	}
	goodTimings := []OpTiming{{0, 0, CompAttention, "sdpa", 0.1, 1, 0, 0, 0}}
	for _, tc := range []struct {
		name    string
		samples []Sample
		timings []OpTiming
		run     int
		total   int
	}{
		{"NaN half-way", with(500, Sample{500, "decode_tok_s", math.NaN(), "tok/s"}), goodTimings, 0, 0},
		{"+Inf at the end", with(999, Sample{999, "decode_tok_s", math.Inf(1), "tok/s"}), goodTimings, 0, 0},
		{"repetition twice", with(700, Sample{3, "decode_tok_s", 1, "tok/s"}), goodTimings, 0, 0},
		{"empty metric", with(10, Sample{10, "", 1, ""}), goodTimings, 0, 0},
		{"bad timing after good samples", good, []OpTiming{goodTimings[0], {0, 0, "lm_head", "x", 1, 1, 0, 0, 0}}, 0, 0},
		{"NaN timing", good, []OpTiming{{0, 0, CompMLP, "x", math.NaN(), 1, 0, 0, 0}}, 0, 0},
		{"layer below -1", good, []OpTiming{{0, -2, CompMLP, "x", 1, 1, 0, 0, 0}}, 0, 0},
		{"negative witness bytes", good, []OpTiming{{0, 0, CompMLP, "x", 1, 1, -1, 0, 0}}, 0, 0},
		{"negative critical loads", good, []OpTiming{{0, 0, CompMLP, "x", 1, 1, 0, 0, -1}}, 0, 0},
		{"more layers run than exist", good, goodTimings, 33, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTemp(t)
			run := mustRun(t, db, Run{})
			cs := mustCases(t, db, run, 1)
			if err := db.FinishCase(cs[0].ID, tc.samples, tc.timings, tc.run, tc.total); err == nil {
				t.Fatal("FinishCase succeeded")
			} else {
				t.Logf("error: %v", err)
			}
			c, err := db.GetCase(cs[0].ID)
			if err != nil || c.Status != CasePending || !c.EndedAt.IsZero() {
				t.Errorf("case after failed FinishCase: %+v, %v", c, err)
			}
			if n := count(t, db, `SELECT count(*) FROM samples`); n != 0 {
				t.Errorf("%d partial samples stored", n)
			}
			if n := count(t, db, `SELECT count(*) FROM op_timings`); n != 0 {
				t.Errorf("%d partial op timings stored", n)
			}
			// The case can still be finished properly afterwards.
			if err := db.FinishCase(cs[0].ID, good, goodTimings, 0, 0); err != nil {
				t.Fatal(err)
			}
			if n := count(t, db, `SELECT count(*) FROM samples`); n != len(good) {
				t.Errorf("%d samples after retry", n)
			}
		})
	}
	t.Run("unknown case", func(t *testing.T) {
		db := openTemp(t)
		if err := db.FinishCase(12345, good, nil, 0, 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishCase(unknown) = %v", err)
		}
	})
}

func TestInterruptedRunKeepsFinishedCases(t *testing.T) {
	db := openTemp(t)
	id := mustRun(t, db, Run{SuiteName: "smoke"})
	cs := mustCases(t, db, id, 4)
	s := []Sample{{0, "gflops", 10, "GFLOP/s"}, {1, "gflops", 11, "GFLOP/s"}}
	if err := db.FinishCase(cs[0].ID, s, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(cs[1].ID, "out of memory"); err != nil {
		t.Fatal(err)
	}
	// The process dies here; the next one notices the stale run.
	if err := db.MarkInterrupted(id); err != nil {
		t.Fatal(err)
	}
	r, _ := db.GetRun(id)
	if r.Status != RunInterrupted || r.EndedAt.IsZero() {
		t.Fatalf("run after MarkInterrupted: %+v", r)
	}
	got, _ := db.Cases(id)
	want := []string{CaseDone, CaseFailed, CasePending, CasePending}
	for i, c := range got {
		if c.Status != want[i] {
			t.Errorf("case %d status %s, want %s", i, c.Status, want[i])
		}
	}
	if got, _ := db.Samples(cs[0].ID); !reflect.DeepEqual(got, s) {
		t.Errorf("samples of the finished case: %+v", got)
	}

	// Resume: run the failed and pending cases, then complete the run.
	if err := db.ResumeRun(id); err != nil {
		t.Fatal(err)
	}
	if r, _ := db.GetRun(id); r.Status != RunRunning || !r.EndedAt.IsZero() {
		t.Fatalf("run after ResumeRun: %+v", r)
	}
	for _, c := range got[1:] {
		if err := db.FinishCase(c.ID, s, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishRun(id, RunComplete); err != nil {
		t.Fatal(err)
	}
	// MarkInterrupted leaves a run that is not running alone.
	if err := db.MarkInterrupted(id); err != nil {
		t.Fatal(err)
	}
	if r, _ := db.GetRun(id); r.Status != RunComplete {
		t.Errorf("MarkInterrupted changed a complete run to %s", r.Status)
	}
	if err := db.ResumeRun(id); err == nil {
		t.Error("ResumeRun of a complete run succeeded")
	}
	if err := db.MarkInterrupted(id + 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkInterrupted(unknown) = %v", err)
	}
}

const (
	childEnv     = "RESULTS_TEST_CHILD_DB"
	writerRuns   = 30
	writerCases  = 10
	writerReps   = 20
	childTagName = "child-process"
)

// writeLoad is what each concurrent writer does: many short transactions,
// the pattern that collides most with another writer.
func writeLoad(db *DB, tag string) error {
	for i := 0; i < writerRuns; i++ {
		id, err := db.CreateRun(&Run{Tag: tag, SuiteName: "concurrency", Machine: testMachine()})
		if err != nil {
			return err
		}
		cs := make([]Case, writerCases)
		for j := range cs {
			cs[j] = Case{Kind: CaseKernel, Params: map[string]string{"i": fmt.Sprint(i), "j": fmt.Sprint(j)}}
		}
		if err := db.AddCases(id, cs); err != nil {
			return err
		}
		for _, c := range cs {
			s := make([]Sample, writerReps)
			for r := range s {
				s[r] = Sample{r, "us", float64(r), "us"}
			}
			if err := db.FinishCase(c.ID, s, nil, 0, 0); err != nil {
				return err
			}
		}
		if err := db.FinishRun(id, RunComplete); err != nil {
			return err
		}
	}
	return nil
}

func waitFile(path string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s did not appear in 30 s", path)
}

func TestConcurrentWriters(t *testing.T) {
	if path := os.Getenv(childEnv); path != "" {
		// Child: the second process.
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := os.WriteFile(path+".ready", nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := waitFile(path + ".go"); err != nil {
			t.Fatal(err)
		}
		if err := writeLoad(db, childTagName); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "shared.db")
	// The child starts on a file that does not exist yet, so the two
	// processes also race to create and migrate the schema.
	cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentWriters$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// In this process: two goroutines with separate handles, as two
	// unrelated packages in one binary might have.
	tags := []string{"goroutine-a", "goroutine-b"}
	errs := make([]error, len(tags))
	var wg sync.WaitGroup
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := Open(path)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			if errs[i] = waitFile(path + ".go"); errs[i] == nil {
				errs[i] = writeLoad(db, tag)
			}
		}()
	}
	// Release all writers together once the child is ready, so that
	// their writes really overlap however slowly the child started.
	if err := waitFile(path + ".ready"); err != nil {
		t.Errorf("child never got ready: %v", err)
	}
	if err := os.WriteFile(path+".go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	childErr := cmd.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %s: %v", tags[i], err)
		}
	}
	if childErr != nil {
		t.Fatalf("child process: %v\n%s", childErr, out.String())
	}

	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tag := range append(tags, childTagName) {
		runs, err := db.Runs(RunFilter{Tag: tag, Status: RunComplete})
		if err != nil || len(runs) != writerRuns {
			t.Errorf("tag %s: %d complete runs, %v; want %d", tag, len(runs), err, writerRuns)
		}
		n := count(t, db, `SELECT count(*) FROM samples s JOIN cases c ON c.id = s.case_id
			JOIN runs r ON r.id = c.run_id WHERE r.tag = ?`, tag)
		if n != writerRuns*writerCases*writerReps {
			t.Errorf("tag %s: %d samples, want %d", tag, n, writerRuns*writerCases*writerReps)
		}
	}
	if n := count(t, db, `SELECT count(*) FROM machines`); n != 1 {
		t.Errorf("%d machines; concurrent writers should share one", n)
	}
	if v, _ := db.SchemaVersion(); v != LatestSchemaVersion() {
		t.Errorf("schema version %d", v)
	}
}

// storeSamples creates a run of nCases cases and finishes each with reps
// samples.
func storeSamples(t testing.TB, db *DB, nCases, reps int) {
	id := mustRun(t, db, Run{Machine: testMachine()})
	cs := make([]Case, nCases)
	for i := range cs {
		cs[i] = Case{Kind: CaseKernel, Params: map[string]string{"m": fmt.Sprint(i), "op": "matmul"}}
	}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	s := make([]Sample, reps)
	for r := range s {
		s[r] = Sample{Rep: r, Metric: "decode_tok_s", Value: 40 + float64(r%7), Unit: "tok/s"}
	}
	for _, c := range cs {
		if err := db.FinishCase(c.ID, s, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkStore100kSamples(b *testing.B) {
	for _, bc := range []struct {
		name        string
		cases, reps int
	}{
		{"1case_x_100k", 1, 100_000},
		{"1000cases_x_100", 1000, 100},
	} {
		b.Run(bc.name, func(b *testing.B) {
			db := openTemp(b)
			for b.Loop() {
				storeSamples(b, db, bc.cases, bc.reps)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.cases*bc.reps), "ns/sample")
		})
	}
}

type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("sqlite code %d", int(c)) }
func (c codeErr) Code() int     { return int(c) }

// The store's own failures name the database and what to do.
func TestStoreError(t *testing.T) {
	db := openTemp(t)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("results: store machine: %w", codeErr(8)), "the results database " + db.Path() + " cannot be written"},
		{fmt.Errorf("results: begin: %w", codeErr(5|2<<8)), "was locked by another process for more than 10s"},
		{codeErr(13), "the results database " + db.Path()},
		{errors.New("a kernel failed"), ""},
	} {
		got := db.StoreError(tc.err)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("StoreError(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if FromStore(tc.err) != (tc.want != "") {
			t.Errorf("FromStore(%v) = %v", tc.err, FromStore(tc.err))
		}
	}
}

// openUpgraded opens a database an older schema wrote and checks that
// opening brought it to the latest version; it is closed with the test.
func openUpgraded(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if v, _ := db.SchemaVersion(); v != LatestSchemaVersion() {
		t.Fatalf("version after upgrade = %d, want %d", v, LatestSchemaVersion())
	}
	return db
}

// A tag is refused only where a reference would not find it again: a
// tag "latest~1" was refused as "how a reference names the newest runs",
// a form no reference reads; tagged so, a run is found by it.
func TestCheckTag(t *testing.T) {
	for _, tc := range []struct{ tag, want string }{
		{"", ""},
		{"main", ""},
		{"latest~1", ""},
		{"latest-main", ""},
		{"latest", `tag "latest" is how a reference names the newest runs`},
		{"7", `tag "7" is a number, which a reference reads as run 7`},
		{"a,b", `tag "a,b" holds a comma`},
		{" a", `tag " a" starts or ends with a space`},
	} {
		err := CheckTag(tc.tag)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckTag(%q) = %v, want %q", tc.tag, err, tc.want)
		}
	}
	db, err := Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	id, err := db.CreateRun(&Run{SuiteName: "s", Backend: "cpu", Tag: "latest~1"})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := db.ResolveRef("latest~1"); err != nil || len(ids) != 1 || ids[0] != id {
		t.Errorf("a run tagged latest~1: %v, %v", ids, err)
	}
}
