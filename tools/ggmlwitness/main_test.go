package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

var (
	update  = flag.Bool("update", false, "rewrite testdata/table.golden")
	ggmlDir = flag.String("ggml", "", "a ggml checkout, for the llama.cpp half (go test ./tools/ggmlwitness -args -ggml DIR)")
)

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		err  string // "" when the arguments are good
	}{
		{"defaults", []string{"-ggml", "x"}, ""},
		{"no checkout", nil, "-ggml: a ggml or llama.cpp checkout is needed"},
		{"unknown op", []string{"-ggml", "x", "-ops", "rms_norm,q5_k"}, `-ops: unknown op "q5_k"`},
		{"k off the block", []string{"-ggml", "x", "-k", "4000"}, "-k=4000: must be a positive multiple of 256"},
		{"width", []string{"-ggml", "x", "-width", "10"}, "-width=10"},
		{"context not a multiple", []string{"-ggml", "x", "-contexts", "512,100"}, `-contexts: "100" is not a positive multiple of 32`},
		{"context past one simdgroup", []string{"-ggml", "x", "-contexts", "512,4096"}, "-contexts: 4096 is past 2048"},
		{"context past one simdgroup, merge barrier", []string{"-ggml", "x", "-contexts", "512,4096", "-merge-barrier"}, ""},
		{"context past one simdgroup, lanes reversed", []string{"-ggml", "x", "-contexts", "512,4096", "-reverse-lanes"}, ""},
		{"heads not grouped", []string{"-ggml", "x", "-heads", "6/4/64"}, "a multiple of the KV heads"},
		{"head of 128", []string{"-ggml", "x", "-heads", "32/4/128"}, "heads of 128 store over threadgroup words"},
		{"head of 128, merge barrier", []string{"-ggml", "x", "-heads", "32/4/128", "-merge-barrier"}, ""},
		{"head of 128, lanes reversed", []string{"-ggml", "x", "-heads", "32/4/128", "-reverse-lanes"}, ""},
		{"head of 96", []string{"-ggml", "x", "-heads", "32/4/96", "-merge-barrier"}, "head size 96 (64 or 128)"},
		{"heads malformed", []string{"-ggml", "x", "-heads", "32/4"}, "want query heads/KV heads/head size"},
		{"stray argument", []string{"-ggml", "x", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseArgs(c.args, io.Discard)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := len(cfg.cases()); got != 6 {
					t.Errorf("%d cases by default, want 6 (norm, three GEMVs, two contexts)", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %v, want one containing %q", err, c.err)
			}
		})
	}
}

func TestReadGGML(t *testing.T) {
	flat := t.TempDir()
	files := map[string]string{
		"ggml-metal.metal":  "#if defined(GGML_METAL_EMBED_LIBRARY)\n__embed_ggml-common.h__\n#else\n#include \"ggml-common.h\"\n#endif\n#include \"ggml-metal-impl.h\"\nkernel void k() {}\n",
		"ggml-common.h":     "// common\n",
		"ggml-metal-impl.h": "// impl", // no final newline: sed's r still ends the line
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(flat, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkout := t.TempDir()
	for name, dir := range map[string]string{"ggml-metal.metal": "src/ggml-metal", "ggml-metal-impl.h": "src/ggml-metal", "ggml-common.h": "src"} {
		if err := os.MkdirAll(filepath.Join(checkout, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(checkout, dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := "#if defined(GGML_METAL_EMBED_LIBRARY)\n// common\n#else\n#include \"ggml-common.h\"\n#endif\n// impl\nkernel void k() {}\n"
	for _, dir := range []string{flat, checkout} {
		got, err := readGGML(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: pasted\n%s\nwant\n%s", dir, got, want)
		}
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := readGGML(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing folder: %v, want an error naming it", err)
	}
	empty := t.TempDir()
	if _, err := readGGML(empty); err == nil || !strings.Contains(err.Error(), "no ggml-metal.metal") ||
		!strings.Contains(err.Error(), filepath.Join(empty, "src/ggml-metal/ggml-metal.metal")) {
		t.Errorf("a folder without the library: %v, want an error naming the file and where it looked", err)
	}
	// A run with a folder that is not there stops before any kernel runs.
	var out bytes.Buffer
	if err := run([]string{"-ggml", missing}, &out, io.Discard); err == nil || out.Len() > 0 {
		t.Errorf("run with a missing checkout: %v, printed %q", err, out.String())
	}
}

// TestInsertMergeBarrier puts a simdgroup_barrier before each of the vec
// attention kernel's stores from lane 0 over words its lanes have read
// (source.go, lockstepReads), and refuses a source holding either place
// other than once.
func TestInsertMergeBarrier(t *testing.T) {
	const (
		store  = "        // these are needed for reducing the results from the simdgroups (reuse the ss buffer)\n        if (tiisg == 0) {\n"
		merge  = "            const float S = S0*ms0 + S1*ms1;\n\n            if (tiisg == 0) {\n"
		stored = "        // these are needed for reducing the results from the simdgroups (reuse the ss buffer)\n        simdgroup_barrier(mem_flags::mem_threadgroup);\n        if (tiisg == 0) {\n"
		merged = "            const float S = S0*ms0 + S1*ms1;\n\n            simdgroup_barrier(mem_flags::mem_threadgroup);\n            if (tiisg == 0) {\n"
	)
	src := "a\n" + store + "b\n" + merge + "c\n"
	got, err := insertMergeBarrier(src)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n" + stored + "b\n" + merged + "c\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, c := range []struct{ name, src, err string }{
		{"neither", "a\nb\n", "the store of S and M"},
		{"no merge", "a\n" + store, "the merge of the simdgroups"},
		{"no store", "a\n" + merge, "the store of S and M"},
		{"merge twice", store + merge + merge, "the merge of the simdgroups"},
	} {
		if _, err := insertMergeBarrier(c.src); err == nil || !strings.Contains(err.Error(), "-merge-barrier") || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error naming -merge-barrier and %q", c.name, err, c.err)
		}
	}
}

func TestTable(t *testing.T) {
	st := func(read, written, fpr, fpw, loads, sgLoads, crit, tgs, sgs, barriers int64) mtl.StepStats {
		return mtl.StepStats{Dispatches: 1, Cost: mtl.Cost{BytesRead: read, BytesWritten: written, FootprintRead: fpr, FootprintWritten: fpw,
			Loads: loads, SimdgroupLoads: sgLoads, CriticalLoads: crit, Threadgroups: tgs, Simdgroups: sgs, Barriers: barriers}}
	}
	rows := []row{
		{Op: "gemv q4_0", Shape: "1x4096 by 4096x4096", Impl: "mtlbench", Kernels: "qmatvec_q4_0", MaxErr: 9.5e-7, Ideal: 9_470_000,
			Stats: st(10_486_000, 16_384, 9_453_616, 16_384, 4_700_000, 146_875, 146, 512, 1024, 1024), SimdgroupsPerCore: 12.8},
		{Op: "gemv q4_0", Shape: "1x4096 by 4096x4096", Impl: "llama.cpp", Kernels: "a+b", MaxErr: 0, Ideal: 9_470_000,
			Stats: st(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)},
	}
	var b bytes.Buffer
	writeTable(&b, rows, "M3 Ultra")
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("table:\n%s\nwant (%s):\n%s", b.String(), golden, want)
	}
}

// mtlbench's half: its kernels through the kernel-case path, held to the
// Go reference by kbench's check, at shapes small enough for every run.
func TestOurs(t *testing.T) {
	c, o := oursFor(t, "-width", "256", "-n", "64", "-k", "256", "-contexts", "64", "-heads", "4/2/64")
	for _, cs := range c.cases() {
		r, err := o.run(cs)
		if err != nil {
			t.Fatal(err)
		}
		if r.Impl != "mtlbench" || r.Kernels == "" || r.Ideal <= 0 || r.Stats.Dispatches == 0 || r.Stats.Loads == 0 ||
			r.Stats.Footprint() < r.Ideal/2 || r.SimdgroupsPerCore <= 0 {
			t.Errorf("%s %s: %+v: a witness with nothing counted", cs.name, cs.shape, r)
		}
	}
}

// llama.cpp's half needs ggml's sources, which the repository does not hold.
func TestAgainstGGML(t *testing.T) {
	if *ggmlDir == "" {
		t.Skip("skipping: no ggml checkout (go test ./tools/ggmlwitness -run AgainstGGML -args -ggml DIR)")
	}
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	var out bytes.Buffer
	err := run([]string{"-ggml", *ggmlDir, "-width", "256", "-n", "64", "-k", "256", "-contexts", "64", "-heads", "4/2/64"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"`rms_norm`", "`kernel_rms_norm_mul_f32_4`", "`kernel_mul_mv_q4_0_f32`", "`kernel_mul_mv_q8_0_f32`",
		"`kernel_mul_mv_q4_K_f32`", "`kernel_flash_attn_ext_vec_f16_dk64_dv64`+`kernel_flash_attn_ext_vec_reduce`"} {
		if !strings.Contains(out.String(), k) {
			t.Errorf("no row of %s in\n%s", k, out.String())
		}
	}
}

// oursFor is the tool's configuration from args (no ggml checkout) and
// mtlbench's half opened on the emulator, closed with the test; it skips
// where no clang runs the emulator.
func oursFor(t *testing.T, args ...string) (*config, *ours) {
	t.Helper()
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	c, err := parseArgs(append([]string{"-ggml", "x"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o, err := openOurs(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return c, o
}
