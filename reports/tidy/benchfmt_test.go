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

// A case's configuration lines carry what it measured beside its key (the
// model, its weight format and seed), so benchstat keeps runs of two seeds
// apart as compare does; a value the case did not record is left out.
func TestBenchConfigIdentity(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   map[string]string
	}{
		{map[string]string{"model": "qwen3_moe", "dtype": "bf16", "seed": "7"}, map[string]string{"model": "qwen3_moe", "dtype": "bf16", "seed": "7"}},
		{map[string]string{"op": "matmul"}, map[string]string{}},
	} {
		got := map[string]string{}
		for _, kv := range benchConfig(&results.Run{ID: 1}, results.Case{Params: c.params}) {
			if kv[0] == "model" || kv[0] == "dtype" || kv[0] == "seed" {
				got[kv[0]] = kv[1]
			}
		}
		if len(got) != len(c.want) || got["model"] != c.want["model"] || got["dtype"] != c.want["dtype"] || got["seed"] != c.want["seed"] {
			t.Errorf("params %v: configuration %v, want %v", c.params, got, c.want)
		}
	}
}
