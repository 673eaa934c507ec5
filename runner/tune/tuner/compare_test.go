package tuner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/perf/benchmath"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// TestCompareTunedSuite measures what tuned configs buy a whole model: it
// alternates suite runs of qwen3-moe-mini decode (batch 1, 4, 16, no
// explicit MoE params) with the tuned configs of a folder and with none
// (every kernel at its default), ABBA so drift lands on both, and reports
// decode tok/s medians, their ratio and a Mann-Whitney p per batch. It
// times real runs for a minute or more, so it only runs when asked:
//
//	MTLBENCH_TUNE_COMPARE=DIR go test -run CompareTunedSuite -v ./runner/tune/tuner/
func TestCompareTunedSuite(t *testing.T) {
	dir := envconfig.Get("MTLBENCH_TUNE_COMPARE")
	if dir == "" {
		t.Skip("set MTLBENCH_TUNE_COMPARE to a tuned folder to compare it with the defaults")
	}
	pairs := envconfig.Int("MTLBENCH_TUNE_PAIRS", 6)
	tuned, err := tune.DirLayer(tune.FromEnv, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := loadSuite(t, `name: compare
model: { preset: qwen3-moe-mini, dtype: bf16, seed: 1 }
backend: cpu
repetitions: 4
warmup: 1
interleave: true
params: { prompt_len: 32, gen_len: 64 }
cases:
  - name: decode
    matrix: { batch: [1, 4, 16] }
`)
	db, err := results.Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	samples := map[string]map[string][]float64{"tuned": {}, "default": {}}
	used := map[string]string{}
	run := func(variant string, store *tune.Store) {
		sum, err := bench.Run(context.Background(), s, bench.Options{DB: db, BandwidthBuffer: -1, Tuned: store, Tag: variant})
		if err != nil {
			t.Fatal(err)
		}
		all, _ := db.RunSamples(sum.RunID)
		for _, c := range sum.Cases {
			for _, sm := range all[c.ID] {
				if sm.Metric == "decode_tok_s" {
					samples[variant][c.Name] = append(samples[variant][c.Name], sm.Value)
				}
			}
			if variant == "tuned" {
				used[c.Name] = "moe " + c.Params["tuned.moe"] + "; matmul " + c.Params["tuned.matmul"]
			}
		}
	}
	for i := range pairs {
		a, b := func() { run("tuned", tune.NewStore(tuned)) }, func() { run("default", tune.NewStore()) }
		if i%2 == 1 {
			a, b = b, a
		}
		a()
		b()
	}
	names := make([]string, 0, len(samples["tuned"]))
	for n := range samples["tuned"] {
		names = append(names, n)
	}
	slices.Sort(names)
	th := benchmath.DefaultThresholds
	for _, n := range names {
		tv, dv := samples["tuned"][n], samples["default"][n]
		cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(dv, &th), benchmath.NewSample(tv, &th))
		t.Logf("%-16s decode tok/s tuned %7.1f  default %7.1f  ratio %.3fx  p=%.2g  n=%d+%d  (%s)",
			n, median(tv), median(dv), median(tv)/median(dv), cmp.P, len(tv), len(dv), used[n])
	}
	fmt.Fprintln(os.Stderr, "compared", pairs, "pairs of runs")
}
