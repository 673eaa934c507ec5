package suites

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse checks that no input panics or takes long (YAML aliases and
// matrices expand within limits) and that every result is either a
// consistent suite or positioned errors.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.y*ml"))
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		head + "  - name: c\n    matrix: {batch: [1, 2], gen_len: [3]}\n",
		head + "  - name: c\n    op: moe\n    matrix: {experts: [4, 8], top_k: [8], num_heads: [8], num_kv_heads: [3]}\n",
		"name: s\nparams: &d {batch: 2}\ncases:\n  - name: a\n    params: {<<: *d}\n  - &c {name: b, matrix: {gen_len: [1]}}\n  - *c\n",
		"a: &a [*a]\n",
		"name: s\nmodel: {preset: p, <<: [{path: x}, {seed: 2}]}\ncases: [{name: c, params: {sampling: \"temperature:1,top_k:2\"}}]\n",
		"name: s\ncases:\n- {name: c, kind: kernel, matrix: {op: [rope, 1, ~]}}\n---\n",
		"{name: s, thresholds: {x: 5%, y: -1%}, cooldown: 1h, cases: [{name: c, op: argmax}]}\n",
		head + "  - name: c\n    params: {slo: \"ttft:5,e2el:9.5\", range_ratio: 0.5}\n    matrix: {arrival: [\"poisson:2\", \"poisson:1e3\", all, \"stagger:3\"]}\n",
		head + "  - name: c\n    matrix: {batch: [8, 1-9223372036854775807*2], block_size: 8-40+8}\n",
		"name: s\nx-a: &a {x-b: 1}\nmodel: {preset: p, x-note: n}\ncases:\n  - {name: c, x-note: n, params: *a, matrix: {x-c: [1]}}\n",
		head + "  - name: c\nthresholds: {decode_tok_s: 100%, ttft_ms: 300%, prefill_tok_s: 99.9%}\n",
		"name: !!str s\nx-a: &a !env X\nrepetitions: !!float 3\nwarmup: !!str 1\ncases: [!c {name: c, op: rope, params: {variant: *a, tokens: !!binary Mw==}}]\n",
		"name: s\nseed: 1\nmatrix: {batch: [1]}\nmodel: {preset: p, batch: 2, backend: cpu}\ncases: [{name: c, preset: p, repetitions: 2}]\n",
		mergeBomb("params"),
		mergeBomb("matrix"),
		mergeList(2000, 600),
		// More groups of a case each than a suite holds.
		head + groups(MaxCases+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		defer func() {
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v", d)
			}
		}()
		s, err := Parse("f.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatal("suite and error both returned")
			}
			var one *Error
			if !errors.As(err, &one) {
				t.Fatalf("error of type %T", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "f.yaml:") && !strings.HasPrefix(line, "... and ") {
					t.Fatalf("unpositioned error line %q", line)
				}
			}
			return
		}
		if s.Name == "" || len(s.Cases) == 0 || len(s.Cases) > MaxCases {
			t.Fatalf("bad suite: name %q, %d cases", s.Name, len(s.Cases))
		}
		keys := map[string]bool{}
		for _, c := range s.Cases {
			if keys[c.Key] {
				t.Fatalf("duplicate key %q", c.Key)
			}
			keys[c.Key] = true
			if c.Kind == KindKernel && c.Op == "" {
				t.Fatalf("kernel case %q without op", c.Name)
			}
			if c.Kind == KindModel && s.Model == nil {
				t.Fatalf("model case %q without model", c.Name)
			}
		}
	})
}
