package bench

import (
	"context"
	"strings"
	"testing"
)

// Check refuses the kernel parameters run refuses, with run's words and
// the parameter's line, and leaves memory to run.
func TestCheckKernelCases(t *testing.T) {
	s := loadSuite(t, `name: k
backend: cpu
cases:
  - name: packed
    kind: kernel
    op: matmul
    params: { m: 1, n: 64, k: 64, dtype: q4 }
  - name: wide
    kind: kernel
    op: matmul
    params: { m: 1, n: 2147483647, k: 64 }
  - name: large
    kind: kernel
    op: matmul
    params: { m: 65536, n: 65536, k: 65536 }
  - name: fine
    kind: kernel
    op: rms_norm
    params: { tokens: 4, width: 256 }
`)
	err := Check(s)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{":7:42: case packed: dtype=q4: supported dtypes are f32, f16, bf16", ":11:24: case wide: n=2147483647: must be at most"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	// A value from `run --set` is blamed on the --set, in Check and in run.
	s = loadSuite(t, "name: k\nbackend: cpu\ncases:\n  - name: mm\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 64, k: 64 }\n")
	if err := s.Override(map[string]string{"dtype": "q4"}); err != nil {
		t.Fatal(err)
	}
	want := "--set dtype=q4: case mm: dtype=q4: supported dtypes are f32, f16, bf16"
	if err := Check(s); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check: %v, want %q", err, want)
	}
	if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: %v, want %q", err, want)
	}
	for _, not := range []string{"large", "fine"} {
		if strings.Contains(msg, "case "+not) {
			t.Errorf("%q refuses case %s, which run may take", msg, not)
		}
	}
}

// Check refuses a model case whose kv_blocks cannot hold its batch side by
// side, with run's words and the parameter's line, and passes the case of
// the same suite that fits.
func TestCheckKVBlocks(t *testing.T) {
	s := loadSuite(t, `name: kv
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
params: { prompt_len: 8, gen_len: 4, kv_blocks: 1 }
cases:
  - name: decode
    matrix:
      batch: [1, 2]
`)
	err := Check(s)
	if err == nil {
		t.Fatal("no error")
	}
	want := ":4:49: kv_blocks=1 hold 16 tokens, but 2 concurrent requests of 8+4 tokens need 2 blocks of 16"
	if msg := err.Error(); !strings.Contains(msg, want) || strings.Count(msg, "kv_blocks=") != 1 {
		t.Errorf("%q, want one error saying %q", msg, want)
	}
}

// A case's layers beyond the model are refused at the case's value, by
// Check and by run alike.
func TestCheckLayers(t *testing.T) {
	s := loadSuite(t, "name: l\nmodel: {preset: qwen3-moe-mini}\nbackend: cpu\nrepetitions: 1\nwarmup: 0\nparams: {prompt_len: 4, gen_len: 2}\ncases:\n  - name: c\n    matrix: { layers: [1, 7] }\n")
	want := ":9:27: case c/layers=7: qwen3-moe-mini: layers=7 out of range 1..6"
	if err := Check(s); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check: %v, want %q", err, want)
	}
	if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: -1}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run: %v, want %q", err, want)
	}
}
