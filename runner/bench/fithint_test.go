package bench

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/suites"
)

// A case refused for memory says which of its numbers, lowered alone, would
// fit, and to what: the refusal named only the model, as if a smaller one
// were the only way, and then only the lengths, never max_seqs, the prefill
// budget or a smaller kv_dtype, which size the cache and the step as much.
// Each number named fits at its figure and is refused one above it, by the
// same check; a kv_dtype named fits.
func TestFitHintNamesLengths(t *testing.T) {
	hintRE := regexp.MustCompile(`([a-z_]+) (?:(\d+) to (\d+)|(\d+) or less|([a-z0-9]+)) \(from ([a-z0-9: ]+)\)`)
	for _, tc := range []struct {
		name, params string
		limit        int64
		want         []string // the numbers the hint names, in order
	}{
		// weights 41 MiB, KV cache 33 MiB, the prefill ~700 MiB
		{"batch, prompt or budget", "batch: 64, prompt_len: 512, gen_len: 1", 256 << 20, []string{"batch", "prompt_len", "prefill_budget"}},
		{"gen alone", "batch: 16, prompt_len: 64, gen_len: 4000", 160 << 20, []string{"gen_len", "prefill_budget"}},
		{"depth", "batch: 32, prompt_len: 16, gen_len: 1, depth: 4000", 160 << 20, []string{"batch", "depth", "kv_dtype"}},
		{"kv_blocks", "batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 16777216, block_size: 32", 8 << 30, []string{"kv_blocks"}},
		// a cache of 256 MiB in f32, 128 MiB in f16
		{"kv_dtype", "batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 16384", 256 << 20, []string{"kv_blocks", "kv_dtype"}},
		{"kv_dtype asked", "batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 16384, kv_dtype: f32", 256 << 20, []string{"kv_blocks", "kv_dtype"}},
		{"half already", "batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 32768, kv_dtype: bf16", 256 << 20, []string{"kv_blocks"}},
		// 256 sequences at once: their cache (132 MiB) and their prompts' step
		{"max_seqs", "batch: 4, requests: 256, max_seqs: 256, prompt_len: 512, gen_len: 1", 256 << 20, []string{"max_seqs", "prompt_len", "prefill_budget"}},
		{"budget set", "batch: 64, prompt_len: 512, gen_len: 1, prefill_budget: 16384", 256 << 20, []string{"batch", "prompt_len", "prefill_budget"}},
		{"weights past the limit", "batch: 1, prompt_len: 8, gen_len: 4", 30 << 20, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suite := func(params string) error { return fitCase(t, hintSuite(t, params), tc.limit) }
			refused := func(err error) bool { return err != nil && strings.Contains(err.Error(), "needs") }
			err := suite(tc.params)
			if !refused(err) {
				t.Fatalf("err = %v, want a memory refusal", err)
			}
			_, hint, _ := strings.Cut(err.Error(), "(hint: ")
			var got []string
			for _, m := range hintRE.FindAllStringSubmatch(hint, -1) {
				key, from := m[1], m[6]
				got = append(got, key)
				set := regexp.MustCompile(`\b` + key + `: [a-z0-9]+`)
				at := func(v string) string {
					if !set.MatchString(tc.params) {
						return tc.params + ", " + key + ": " + v
					}
					return set.ReplaceAllString(tc.params, key+": "+v)
				}
				switch {
				case from == "none" && !set.MatchString(tc.params):
				case from == "auto: f32" && !set.MatchString(tc.params):
				case !strings.Contains(tc.params, key+": "+from):
					t.Errorf("%s: from %s, but the case has %s", key, from, tc.params)
				}
				if v := m[5]; v != "" { // a dtype
					if err := suite(at(v)); err != nil {
						t.Errorf("%s %s, which the hint says fits: %v", key, v, err)
					}
					continue
				}
				n := m[3] + m[4]
				if err := suite(at(n)); err != nil {
					t.Errorf("%s %s, which the hint says fits: %v", key, n, err)
				}
				v, _ := strconv.Atoi(n)
				if err := suite(at(strconv.Itoa(v + 1))); !refused(err) {
					t.Errorf("%s %d, one past the hint's: %v, want a memory refusal", key, v+1, err)
				}
				if m[2] != "" { // the least the suites take with the rest of the case
					if f, _ := strconv.Atoi(m[2]); f < 2 || !strings.Contains(tc.params, ": "+m[2]) {
						t.Errorf("%s from %s, which is none of the case's numbers: %s", key, m[2], tc.params)
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("the hint names %v, want %v:\n%v", got, tc.want, err)
			}
		})
	}
}

// A case that writes requests or max_seqs at their default, the batch, is
// the case that leaves them out (suites.Key), so its memory refusal gives
// the same hint: the hint held them at the old batch when it lowered the
// batch, and so never named the batch (docs/suites.md, "A default written
// is a default left out").
func TestFitHintDefaultsWrittenAsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name, left, written string
		limit               int64
	}{
		{"requests and max_seqs", "batch: 64, prompt_len: 512, gen_len: 1", "batch: 64, requests: 64, max_seqs: 64, prompt_len: 512, gen_len: 1", 256 << 20},
		{"depth", "batch: 32, prompt_len: 16, gen_len: 1, depth: 4000", "batch: 32, requests: 32, max_seqs: 32, prompt_len: 16, gen_len: 1, depth: 4000", 160 << 20},
		{"spelt otherwise", "batch: 64, prompt_len: 512, gen_len: 1", "batch: 64, requests: 0x40, max_seqs: 64, prompt_len: 512, gen_len: 1", 256 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hint := func(params string) string {
				s := hintSuite(t, params)
				if s.Cases[0].Key != hintSuite(t, tc.left).Cases[0].Key {
					t.Fatalf("%s keys apart from %s", params, tc.left)
				}
				err := fitCase(t, s, tc.limit)
				if err == nil || !strings.Contains(err.Error(), "(hint: ") {
					t.Fatalf("%s: err = %v, want a memory refusal with a hint", params, err)
				}
				_, h, _ := strings.Cut(err.Error(), "(hint: ")
				return h
			}
			left, written := hint(tc.left), hint(tc.written)
			if !strings.Contains(left, "batch ") {
				t.Fatalf("left out: hint %q names no batch", left)
			}
			if written != left {
				t.Errorf("written at the batch: hint %q\nleft out: hint %q", written, left)
			}
		})
	}
}

// hintSuite is a one-case suite of a one-layer MoE preset with params.
func hintSuite(t *testing.T, params string) *suites.Suite {
	t.Helper()
	return loadSuite(t, "name: x\nmodel: { preset: qwen3-moe-mini, layers: 1 }\ncases:\n  - name: c\n    params: { "+params+" }\n")
}

// fitCase runs s's first case on the cpu under a memory limit and returns
// its error (a memory refusal names what would fit).
func fitCase(t *testing.T, s *suites.Suite, limit int64) error {
	t.Helper()
	models := map[modelKey]*loadedModel{}
	defer func() {
		for _, m := range models {
			m.src.Close()
		}
	}()
	_, err := modelCase(context.Background(), s, s.Cases[0], cpu.New(cpu.Options{}), models, limit, newSuiteChecks())
	return err
}
