package tidy

import (
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// A case's benchfmt name holds every parameter of its key, at the value
// the case ran with, so benchstat pairs only cases compare pairs; groups
// whose names differ by a separator before a digit stay apart.
func TestBenchName(t *testing.T) {
	for _, c := range []struct {
		c    results.Case
		want string
	}{
		{results.Case{Name: "decode/batch=1", Key: "model/decode/batch=1/gen_len=64/prompt_len=128"},
			"Decode/batch=1/gen_len=64/prompt_len=128"},
		// the parameters the name leaves out (a serving case's requests, slo)
		{results.Case{Name: "bench/batch=2/arrival=poisson:50", Key: "model/bench/arrival=poisson:50/batch=2/requests=8/slo=ttft:1"},
			"Bench/arrival=poisson:50/batch=2/requests=8/slo=ttft:1"},
		// a run --set value: the key keeps the suite's, the params what ran
		{results.Case{Name: "moe-chunk/moe_chunk=1", Key: "model/moe-chunk/moe_chunk=64", Params: map[string]string{"moe_chunk": "1"}},
			"MoeChunk/moe_chunk=1"},
		{results.Case{Name: "norm-2", Key: "kernel/norm-2/width=8"}, "Norm_2/width=8"},
		{results.Case{Name: "norm2", Key: "kernel/norm2/width=8"}, "Norm2/width=8"},
		{results.Case{Name: "serve fast/batch=1"}, "Serve_fast/batch=1"},
	} {
		if got := BenchName(c.c); got != c.want {
			t.Errorf("BenchName(%q, key %q) = %q, want %q", c.c.Name, c.c.Key, got, c.want)
		}
	}
}
