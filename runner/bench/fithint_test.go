package bench

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
)

// A case refused for memory says which of its lengths, lowered alone, would
// fit, and to what: the refusal named only the model, as if a smaller one
// were the only way. Each length named fits at its figure and is refused
// one above it, by the same check.
func TestFitHintNamesLengths(t *testing.T) {
	hintRE := regexp.MustCompile(`([a-z_]+) (\d+) or less \(from (\d+)\)`)
	for _, tc := range []struct {
		name, params string
		limit        int64
		want         []string // the lengths the hint names, in order
	}{
		// weights 41 MiB, KV cache 33 MiB, the prefill ~700 MiB
		{"batch or prompt", "batch: 64, prompt_len: 512, gen_len: 1", 256 << 20, []string{"batch", "prompt_len"}},
		{"gen alone", "batch: 16, prompt_len: 64, gen_len: 4000", 160 << 20, []string{"gen_len"}},
		{"depth", "batch: 32, prompt_len: 16, gen_len: 1, depth: 4000", 160 << 20, []string{"batch", "depth"}},
		{"kv_blocks", "batch: 1, prompt_len: 8, gen_len: 4, kv_blocks: 16777216, block_size: 32", 8 << 30, []string{"kv_blocks"}},
		{"weights past the limit", "batch: 1, prompt_len: 8, gen_len: 4", 30 << 20, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suite := func(params string) error {
				s := loadSuite(t, "name: x\nmodel: { preset: qwen3-moe-mini, layers: 1 }\ncases:\n  - name: c\n    params: { "+params+" }\n")
				be := cpu.New(cpu.Options{})
				models := map[modelKey]*loadedModel{}
				defer func() {
					for _, m := range models {
						m.src.Close()
					}
				}()
				_, err := modelCase(context.Background(), s, s.Cases[0], be, models, tc.limit, newSuiteChecks())
				return err
			}
			err := suite(tc.params)
			if err == nil || !strings.Contains(err.Error(), "needs") {
				t.Fatalf("err = %v, want a memory refusal", err)
			}
			_, hint, _ := strings.Cut(err.Error(), "(hint: ")
			var got []string
			for _, m := range hintRE.FindAllStringSubmatch(hint, -1) {
				key, n := m[1], m[2]
				got = append(got, key)
				at := func(v string) string {
					return regexp.MustCompile(`\b`+key+`: \d+`).ReplaceAllString(tc.params, key+": "+v)
				}
				if !strings.Contains(tc.params, key+": "+m[3]) {
					t.Errorf("%s: from %s, but the case has %s", key, m[3], tc.params)
				}
				if err := suite(at(n)); err != nil {
					t.Errorf("%s %s, which the hint says fits: %v", key, n, err)
				}
				v, _ := strconv.Atoi(n)
				if err := suite(at(strconv.Itoa(v + 1))); err == nil || !strings.Contains(err.Error(), "needs") {
					t.Errorf("%s %d, one past the hint's: %v, want a memory refusal", key, v+1, err)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("the hint names %v, want %v:\n%v", got, tc.want, err)
			}
		})
	}
}
