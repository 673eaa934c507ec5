package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// A top_k at or above the model's vocabulary keeps every token, as none
// does: the case is keyed and named as one without it (so it pairs with
// such a case in compare and gate) and records its sampling as written;
// two cases that run the same sampling so are one case, refused by
// validate and run alike. ../testdata/hf/llama has 512 tokens.
func TestTopKOfTheWholeVocabulary(t *testing.T) {
	for _, tt := range []struct {
		name, samplings string
		set             map[string]string
		keys, names     []string // as recorded, in order
		recorded        []string // each case's recorded sampling
		err             string
	}{
		{name: "at and past the vocabulary",
			samplings: `["temperature:1,top_k:512", "temperature:1,top_k:100000,top_p:0.9", "temperature:1,top_k:511"]`,
			keys: []string{"model/s/gen_len=2/prompt_len=4/sampling=temperature:1", "model/s/gen_len=2/prompt_len=4/sampling=temperature:1,top_p:0.9",
				"model/s/gen_len=2/prompt_len=4/sampling=temperature:1,top_k:511"},
			names:    []string{"s/sampling=temperature:1", "s/sampling=temperature:1,top_p:0.9", "s/sampling=temperature:1,top_k:511"},
			recorded: []string{"temperature:1,top_k:512", "temperature:1,top_k:100000,top_p:0.9", "temperature:1,top_k:511"}},
		{name: "the same case as none",
			samplings: `["temperature:1", "temperature:1,top_k:600"]`,
			err:       `:9:43: case s/sampling=temperature:1,top_k:600 repeats case s/sampling=temperature:1 (line 8): llama has 512 tokens, so a top_k of 512 or more keeps every token, as none does`},
		// A --set keeps the key the suite gave the case, and its name says the
		// value that ran after the one it replaced.
		{name: "a value set over the suite's",
			samplings: `["temperature:1,top_k:600"]`, set: map[string]string{"sampling": "temperature:1,top_k:5"},
			keys:     []string{"model/s/gen_len=2/prompt_len=4/sampling=temperature:1"},
			names:    []string{"s/sampling=temperature:1 (--set sampling=temperature:1,top_k:5)"},
			recorded: []string{"temperature:1,top_k:5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := `name: v
model: { path: ../testdata/hf/llama }
backend: cpu
repetitions: 1
warmup: 0
params: { prompt_len: 4, gen_len: 2 }
cases:
  - name: s
    matrix: { sampling: ` + tt.samplings + ` }
`
			s := loadSuite(t, src)
			if err := s.Override(tt.set); err != nil {
				t.Fatal(err)
			}
			err := Check(s, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Check: %v, want %q", err, tt.err)
				}
			} else if err != nil {
				t.Errorf("Check: %v", err)
			}
			db := openDB(t)
			sum, err := Run(context.Background(), loadSuite(t, src), Options{DB: db, BandwidthBuffer: -1, Set: tt.set})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Run: %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cases, _ := db.Cases(sum.RunID)
			var keys, names, recorded []string
			for _, c := range cases {
				keys, names, recorded = append(keys, c.Key), append(names, c.Name), append(recorded, c.Params["sampling"])
			}
			if !slices.Equal(keys, tt.keys) || !slices.Equal(names, tt.names) || !slices.Equal(recorded, tt.recorded) {
				t.Errorf("recorded\n keys %q\nnames %q\nsampling %q\nwant\n keys %q\nnames %q\nsampling %q", keys, names, recorded, tt.keys, tt.names, tt.recorded)
			}
		})
	}
}
