package bench

import (
	"context"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/runner/engine"
)

// A case of one generated token records none of metrics.DecodeStep, which
// suites refuse thresholds on where no case decodes; one of two records
// the decode throughput.
func TestOneTokenRecordsNoDecodeMetric(t *testing.T) {
	cfg, src := miniMoE(t)
	for _, gen := range []int{1, 2} {
		mc := &ModelCase{Backend: cpu.New(cpu.Options{}), Config: cfg, Source: src,
			Work: Workload{Requests: 3, PromptLen: 5, GenLen: gen, Seed: 1}, Engine: engine.Options{MaxSeqs: 3, KVTokens: 3 * 16}}
		r, err := mc.Rep(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range r.Samples {
			got = append(got, s.Metric)
			if gen == 1 && slices.Contains(metrics.DecodeStep, s.Metric) {
				t.Errorf("gen_len 1 records %s", s.Metric)
			}
		}
		if gen == 2 && !slices.Contains(got, "decode_tok_s") {
			t.Errorf("gen_len 2 records no decode_tok_s: %v", got)
		}
	}
}
