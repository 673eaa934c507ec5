package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/selftest"
)

// The selftest table shows the cost witness's efficiencies only where a
// check was counted (metal-emu), with a note giving the limits; the CPU's
// table has neither. A skipped check has no max error, counts neither as
// passed nor failed, and --failures leaves it out.
func TestSelftestTable(t *testing.T) {
	counted := []selftest.Result{
		{Case: "matvec", Shape: "matmul m=1 n=4096 k=2048 dtype=bf16", MaxErr: 0.004, Efficiency: 0.889, FootprintEfficiency: 0.998},
		{Case: "norm", Shape: "rms_norm tokens=4 width=2048", MaxErr: 2e-7},
		{Case: "attention", Shape: "paged_attention_decode seqs=1 context=512", MaxErr: 0.01, Efficiency: 0.5, FootprintEfficiency: 0.8,
			Err: errors.New("touches 1359360 distinct bytes, 1.25× the op's ideal 1087488 (a decode-path kernel may touch 1.10×)")},
	}
	cpu := []selftest.Result{
		{Case: "norm", Shape: "rms_norm tokens=4 width=2048", MaxErr: 2e-7},
		{Case: "qmatmul/m=1/dtype=q5_k", Err: errors.New("op=qmatmul: cpu: Q5_K weights run transcoded (affine 8-bit, group 32, f32 scales)"), Skipped: true},
		{Case: "qmatmul/m=1/dtype=q4", Shape: "qmatmul m=1 n=37 k=512 dtype=q4", MaxErr: 0.2, Err: errors.New("max error 0.2 over 1e-4")},
	}
	var b strings.Builder
	for _, c := range []struct {
		backend  string
		rs       []selftest.Result
		failures bool
		want     selftestCounts
	}{
		{"metal-emu", counted, false, selftestCounts{passed: 2, failed: 1}},
		{"cpu", cpu, false, selftestCounts{passed: 1, failed: 1, skipped: 1}},
		{"cpu", cpu, true, selftestCounts{passed: 1, failed: 1, skipped: 1}},
	} {
		tb, n := selftestTable(c.backend, c.rs, c.failures, false)
		if err := tb.Render(&b, table.FormatTable); err != nil {
			t.Fatal(err)
		}
		if n != c.want {
			t.Errorf("%s (failures only %v): counted %+v, want %+v", c.backend, c.failures, n, c.want)
		}
	}
	golden(t, "selftest-witness", b.String())
}

// --failures with none says so in the text forms, where a table of only a
// header would read as cut short; csv and json keep their empty lists for
// a program, and a run with a failure lists it as before.
func TestSelftestNoFailures(t *testing.T) {
	passing := []selftest.Result{
		{Case: "norm", Shape: "rms_norm tokens=4 width=2048", MaxErr: 2e-7},
		{Case: "qmatmul/m=1/dtype=q5_k", Err: errors.New("op=qmatmul: cpu: Q5_K weights run transcoded (affine 8-bit, group 32, f32 scales)"), Skipped: true},
	}
	failing := append(slices.Clone(passing), selftest.Result{Case: "qmatmul/m=1/dtype=q4", Shape: "qmatmul m=1 n=37 k=512 dtype=q4", MaxErr: 0.2, Err: errors.New("max error 0.2 over 1e-4")})
	var b strings.Builder
	for _, c := range []struct {
		rs       []selftest.Result
		failures bool
		f        table.Format
	}{
		{passing, true, table.FormatTable},
		{passing, true, table.FormatMarkdown},
		{passing, true, table.FormatCSV},
		{passing, true, table.FormatJSON},
		{passing, false, table.FormatTable},
		{failing, true, table.FormatTable},
	} {
		fmt.Fprintf(&b, "--- %d checks, failures only %v, %s\n", len(c.rs), c.failures, c.f)
		tb, n := selftestTable("cpu", c.rs, c.failures, false)
		if err := renderSelftest(&b, c.f, tb, n, c.failures); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "selftest-no-failures", b.String())
}

// A check the backend does not support is skipped: counted apart from the
// passes, left out of --failures, and a run whose every check was skipped
// checked nothing, so it does not succeed.
func TestSelftestSkipped(t *testing.T) {
	for _, c := range []struct {
		name       string
		args       []string
		wantErr    string // "" for success
		wantStderr string
		notStdout  string
		wantStdout string
	}{
		{name: "all skipped", args: []string{"--filter", "dtype=q5_k"},
			wantErr: `--filter "dtype=q5_k" matches 6 checks, all skipped on cpu (the verdicts say why): nothing was checked`},
		// counts are words: "1 check", not "1 checks"
		{name: "one skipped", args: []string{"--filter", "qmoe/tokens=3/dtype=q5_k"},
			wantErr: `--filter "qmoe/tokens=3/dtype=q5_k" matches 1 check, skipped on cpu (the verdicts say why): nothing was checked`},
		{name: "one passed", args: []string{"--filter", "decode-attention/head_size=32/num_kv_heads=8/block_size=8/context=300"},
			wantStderr: "the 1 check passed on cpu\n", wantStdout: "1 check: 1 passed, 0 failed, 0 skipped;"},
		{name: "some skipped", args: []string{"--filter", "qmatmul/m=1/"},
			wantStderr: "20 of 25 checks passed on cpu, 5 skipped\n"},
		// and a run with none says so, not a table of only a header
		{name: "failures leave skips out", args: []string{"--filter", "qmatmul/m=1/", "--failures"},
			wantStderr: "20 of 25 checks passed on cpu, 5 skipped\n", notStdout: "skipped:",
			wantStdout: "selftest on cpu: no failures (25 checks: 20 passed, 5 skipped)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, err := mtl(t, append([]string{"selftest", "--backend", "cpu"}, c.args...)...)
			switch {
			case c.wantErr != "" && (err == nil || err.Error() != c.wantErr):
				t.Errorf("err = %v, want %q", err, c.wantErr)
			case c.wantErr != "" && exitCode(err) == 0:
				t.Errorf("exit code 0 for %v", err)
			case c.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			}
			if c.wantStderr != "" && !strings.HasSuffix(stderr, c.wantStderr) {
				t.Errorf("stderr = %q, want it to end %q", stderr, c.wantStderr)
			}
			if !strings.Contains(stdout, c.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", c.wantStdout, stdout)
			}
			if c.notStdout != "" && strings.Contains(stdout, c.notStdout) {
				t.Errorf("stdout holds %q:\n%s", c.notStdout, stdout)
			}
		})
	}
}

// A check that fails, or that took a second or more, is written as it
// ends, so a run of slow checks (--model-shapes on metal-emu: minutes)
// shows where it is; quick passes and skips are not.
func TestSelftestProgress(t *testing.T) {
	for _, c := range []struct {
		name string
		r    selftest.Result
		want string
	}{
		{"quick pass", selftest.Result{Case: "norm", Shape: "rms_norm tokens=3 width=96", Elapsed: 5 * time.Millisecond}, ""},
		{"slow pass", selftest.Result{Case: "matmul-5", Shape: "matmul m=8 n=5120 k=2048 dtype=bf16", Elapsed: 14200 * time.Millisecond},
			"[7/40] matmul-5 matmul m=8 n=5120 k=2048 dtype=bf16: ok in 14.2s\n"},
		{"quick skip", selftest.Result{Case: "q5k", Err: errors.New("transcoded"), Skipped: true, Elapsed: time.Millisecond}, ""},
		{"slow skip", selftest.Result{Case: "q5k", Err: errors.New("transcoded"), Skipped: true, Elapsed: 2 * time.Second}, "[7/40] q5k: skipped in 2.0s\n"},
		{"quick failure", selftest.Result{Case: "norm", Shape: "rms_norm tokens=3 width=96", Err: errors.New("max abs error 1"), Elapsed: time.Millisecond},
			"[7/40] norm rms_norm tokens=3 width=96: FAIL: max abs error 1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			selftestProgress(&b, 7, 40, c.r)
			if b.String() != c.want {
				t.Errorf("wrote %q, want %q", b.String(), c.want)
			}
		})
	}
}

// A failed selftest of the Metal kernels names the switch that compiles
// them without fast math, unless they already were; other backends get no
// such advice.
func TestSelftestFastMathAdvice(t *testing.T) {
	for _, c := range []struct {
		info bridge.DeviceInfo
		want bool
	}{
		{bridge.DeviceInfo{Backend: "metal", Notes: "MSL 3.2; profile timing: x"}, true},
		{bridge.DeviceInfo{Backend: "metal-emu", Notes: "MSL 3.1; profile timing: x"}, true},
		{bridge.DeviceInfo{Backend: "metal", Notes: "MSL 3.2, fast math off; profile timing: x"}, false},
		{bridge.DeviceInfo{Backend: "cpu"}, false},
		{bridge.DeviceInfo{Backend: "cuda", Notes: "sm_90"}, false},
	} {
		got := fastMathAdvice(c.info)
		if has := strings.Contains(got, "MTLBENCH_METAL_FAST_MATH=0"); has != c.want || !c.want && got != "" {
			t.Errorf("%+v: advice %q, want it: %v", c.info, got, c.want)
		}
	}
}
