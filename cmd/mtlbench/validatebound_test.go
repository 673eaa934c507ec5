package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// suites validate of a sweep of 1000 kv_blocks values over a million
// requests returns in seconds, where it took minutes, and says on stderr
// which cases' kv_blocks it could not check and why, in one line; the
// suite is valid.
func TestValidateSaysUnchecked(t *testing.T) {
	f := filepath.Join(t.TempDir(), "sweep.yaml")
	suite := `name: sweep
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { batch: 64, prompt_len: 1024, gen_len: 256, prefill_budget: 128, requests: 1000000 }
cases:
  - name: c
    matrix: { kv_blocks: 80-1079 }
`
	if err := os.WriteFile(f, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		stdout, stderr string
		err            error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.stdout, r.stderr, r.err = mtl(t, "suites", "validate", f)
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if want := f + ": ok, suite \"sweep\", 1000 cases\n"; r.stdout != want {
			t.Errorf("stdout %q, want %q", r.stdout, want)
		}
		want := "mtlbench: warning: kv_blocks of cases c/kv_blocks=80, c/kv_blocks=81, c/kv_blocks=82 and 997 more not checked against what seats the batch: the scheduler's run over the case's requests passed 4194304 tokens undecided; the run records their preemptions\n"
		if r.stderr != want {
			t.Errorf("stderr %q, want %q", r.stderr, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("suites validate of 1000 kv_blocks over a million requests did not return in 30s")
	}
}
