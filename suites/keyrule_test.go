package suites

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/kernels/ops"
)

// keyOf is the key of the one case of a group written with params (a
// kernel group names its op among them).
func keyOf(t *testing.T, kind, params string) Case {
	t.Helper()
	s := mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: g\n    kind: "+kind+"\n    params: {"+params+"}\n")
	if len(s.Cases) != 1 {
		t.Fatalf("%s: %d cases", params, len(s.Cases))
	}
	return s.Cases[0]
}

// explicitKey is the key a case got before defaults were left out: every
// parameter it holds, a model case's depth of 0 aside.
func explicitKey(c Case) string {
	var segs []string
	for k, v := range c.Params {
		if k == ParamDepth && c.Kind == KindModel && v.IsNum && v.Int == 0 {
			continue
		}
		segs = append(segs, k+"="+canon(k, v))
	}
	sort.Strings(segs)
	return strings.Join(append([]string{c.Kind, c.Group}, segs...), "/")
}

// A case that gives a parameter its default is keyed as one that leaves
// it out, by a suite and by a run stored with the default in its key; a
// value that is no default, or whose default hangs on the model or the
// backend, keeps its own key.
func TestDefaultsKeyAsLeftOut(t *testing.T) {
	for _, tc := range []struct {
		name, kind     string
		base, explicit string // the case's params without and with the value
		same           bool   // keyed as one
	}{
		{"batch", "model", "gen_len: 4", "gen_len: 4, batch: 1", true},
		{"prompt_len", "model", "gen_len: 4", "gen_len: 4, prompt_len: 128", true},
		{"gen_len", "model", "batch: 2", "batch: 2, gen_len: 32", true},
		{"depth", "model", "batch: 2", "batch: 2, depth: 0", true},
		{"arrival", "model", "batch: 2", "batch: 2, arrival: all", true},
		{"range_ratio", "model", "batch: 2", "batch: 2, range_ratio: 0", true},
		{"range_ratio 0.0", "model", "batch: 2", "batch: 2, range_ratio: 0.0", true},
		{"kv_blocks", "model", "batch: 2", "batch: 2, kv_blocks: 0", true},
		{"block_size", "model", "batch: 2", "batch: 2, block_size: 16", true},
		{"kv_dtype", "model", "batch: 2", "batch: 2, kv_dtype: auto", true},
		{"sampling greedy", "model", "batch: 2", "batch: 2, sampling: greedy", true},
		{"sampling temperature 0", "model", "batch: 2", "batch: 2, sampling: \"temperature:0\"", true},
		{"steps", "model", "batch: 2", "batch: 2, steps: overlapped", true},
		{"fusion", "model", "batch: 2", "batch: 2, fusion: on", true},
		{"requests of the batch", "model", "batch: 4", "batch: 4, requests: 4", true},
		{"max_seqs of the batch", "model", "batch: 4, requests: 8", "batch: 4, requests: 8, max_seqs: 4", true},
		{"requests of the default batch", "model", "gen_len: 4", "gen_len: 4, requests: 1", true},
		{"witness_gpu", "model", "batch: 2", "batch: 2, witness_gpu: Apple M3 Ultra", true},
		{"every default at once", "model", "gen_len: 4",
			"gen_len: 4, batch: 1, prompt_len: 128, depth: 0, arrival: all, range_ratio: 0, kv_blocks: 0, block_size: 16, kv_dtype: auto, sampling: greedy, steps: overlapped, fusion: on, requests: 1, max_seqs: 1", true},
		{"moe_chunk 64 beside chunked", "model", "moe_strategy: chunked", "moe_strategy: chunked, moe_chunk: 64", true},
		{"moe_chunk 64 alone", "model", "moe_strategy: chunked", "moe_chunk: 64", true},
		{"chunked beside a moe_chunk", "model", "moe_chunk: 8", "moe_chunk: 8, moe_strategy: chunked", true},
		{"kernel tokens", "kernel", "op: rms_norm, width: 64", "op: rms_norm, width: 64, tokens: 1", true},
		{"kernel width", "kernel", "op: rms_norm, tokens: 2", "op: rms_norm, tokens: 2, width: 2048", true},
		{"kernel alias at its default", "kernel", "op: matmul, n: 64", "op: matmul, n: 64, tokens: 1", true},
		{"kernel dtype", "kernel", "op: matmul, n: 64", "op: matmul, n: 64, dtype: bf16", true},
		{"kernel packed dtype", "kernel", "op: qmatmul, n: 64", "op: qmatmul, n: 64, dtype: q4", true},
		{"kernel bias", "kernel", "op: matmul, n: 64", "op: matmul, n: 64, bias: 0", true},
		{"kernel attention", "kernel", "op: paged_attention_decode, seqs: 2",
			"op: paged_attention_decode, seqs: 2, block_size: 16, partitions: 0, window: 0, context: 1024, num_heads: 32, num_kv_heads: 8, head_size: 128, dtype: bf16", true},
		{"kernel prefill context", "kernel", "op: paged_attention_prefill, seqs: 2", "op: paged_attention_prefill, seqs: 2, context: 0", true},
		{"kernel moe_strategy", "kernel", "op: moe, experts: 16", "op: moe, experts: 16, moe_strategy: grouped", true},
		{"kernel moe_chunk 64", "kernel", "op: moe, experts: 16, moe_strategy: chunked", "op: moe, experts: 16, moe_chunk: 64", true},
		{"kernel witness_gpu", "kernel", "op: rope", "op: rope, witness_gpu: M3 Ultra 80-core", true},
		// No default, or one a suite alone cannot tell.
		{"batch 2", "model", "gen_len: 4", "gen_len: 4, batch: 2", false},
		{"requests past the batch", "model", "batch: 4", "batch: 4, requests: 8", false},
		{"kv_dtype f32: auto's on the cpu alone", "model", "batch: 2", "batch: 2, kv_dtype: f32", false},
		{"layers: the model's", "model", "batch: 2", "batch: 2, layers: 2", false},
		{"moe_strategy: the tuned configs'", "model", "batch: 2", "batch: 2, moe_strategy: grouped", false},
		{"moe_chunk 8 is not chunked at 64", "model", "moe_strategy: chunked", "moe_chunk: 8", false},
		{"kernel width of another op", "kernel", "op: layer_norm, tokens: 2", "op: layer_norm, tokens: 2, width: 2048", false},
		{"kernel chunked is not grouped", "kernel", "op: moe, experts: 16", "op: moe, experts: 16, moe_strategy: chunked", false},
		{"witness_gpu M4 Max", "model", "batch: 2", "batch: 2, witness_gpu: M4 Max", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			left, given := keyOf(t, tc.kind, tc.base), keyOf(t, tc.kind, tc.explicit)
			if same := left.Key == given.Key; same != tc.same {
				t.Fatalf("keyed as one: %v, want %v:\n%s\n%s", same, tc.same, left.Key, given.Key)
			}
			// A run stored with the default in its key pairs with the case.
			for _, c := range []Case{given, left} {
				if got := StoredKeys([]string{explicitKey(c)}, 0)[0]; got != c.Key {
					t.Errorf("stored key %s read as %s, want %s", explicitKey(c), got, c.Key)
				}
			}
		})
	}
}

// Every shipped suite's cases, stored under the keys they had while a
// default written was keyed as written, are read as they are keyed now:
// runs made before pair with new ones case by case.
func TestStoredKeysOfShippedSuitesWithDefaults(t *testing.T) {
	read := func(path string) map[string][]string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			suite, key, _ := strings.Cut(line, " ")
			out[suite] = append(out[suite], key)
		}
		return out
	}
	before, now := read("testdata/shipped-keys-before-defaults.txt"), read("testdata/shipped-keys.txt")
	if len(before) != len(now) {
		t.Fatalf("%d suites before, %d now", len(before), len(now))
	}
	changed := 0
	for suite, keys := range before {
		got := StoredKeys(keys, 151936)
		if !reflect.DeepEqual(got, now[suite]) {
			t.Errorf("%s: read as\n%q\nwant\n%q", suite, got, now[suite])
		}
		for i := range keys {
			if keys[i] != got[i] {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Error("no shipped key gave a default")
	}
}

// Peer imports key by the same rule: bench's keys at the default batch
// leave it out, as a suite's do.
func TestKeyOfPlainValues(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]string
		want string
	}{
		{map[string]string{"batch": "1", "prompt_len": "512", "gen_len": "128"}, "model/bench/gen_len=128/prompt_len=512"},
		{map[string]string{"batch": "8", "prompt_len": "128", "gen_len": "32", "requests": "8", "depth": "0"}, "model/bench/batch=8"},
		{map[string]string{"batch": "8", "requests": "64", "arrival": "poisson:4"}, "model/bench/arrival=poisson:4/batch=8/requests=64"},
	} {
		if got := Key(KindModel, "bench", tc.vals); got != tc.want {
			t.Errorf("Key(%v) = %q, want %q", tc.vals, got, tc.want)
		}
	}
}

// Sets reads a case's parameters by the rule that keys it: a value written
// at its default is as one left out, so a fit hint that lowers the batch
// sees the two spellings of a case as the one case its key says they are.
func TestSetsFollowsTheKey(t *testing.T) {
	for _, tc := range []struct {
		kind, params, name string
		sets               bool
	}{
		{"model", "batch: 4, requests: 4", ParamRequests, false},
		{"model", "batch: 4, requests: 0x4", ParamRequests, false},
		{"model", "batch: 4, requests: 8", ParamRequests, true},
		{"model", "batch: 4", ParamRequests, false},
		{"model", "batch: 4, max_seqs: 4", ParamMaxSeqs, false},
		{"model", "batch: 2, requests: 8, max_seqs: 6", ParamMaxSeqs, true},
		{"model", "batch: 1, gen_len: 4", ParamBatch, false},
		{"model", "fusion: on, gen_len: 4", ParamFusion, false},
		{"model", "fusion: off, gen_len: 4", ParamFusion, true},
		{"model", "layers: 2, gen_len: 4", ParamLayers, true}, // the model's: no default a suite knows
		{"kernel", "op: rms_norm, width: 64, tokens: 1", "tokens", false},
		{"kernel", "op: rms_norm, width: 64, tokens: 16", "tokens", true},
		{"kernel", "op: rms_norm, width: 64", "width", true},
	} {
		c := keyOf(t, tc.kind, tc.params)
		if got := c.Sets(tc.name); got != tc.sets {
			t.Errorf("%s {%s}: Sets(%s) = %v, want %v", tc.kind, tc.params, tc.name, got, tc.sets)
		}
	}
}

// KeysAs matches a case by a parameter's value by the rule that keys it: a
// default value matches the case that leaves the parameter out as the one
// that writes it, so selftest --filter tokens=1 selects both.
func TestKeysAsFollowsTheKey(t *testing.T) {
	for _, tc := range []struct {
		kind, params, name, value string
		want                      bool
	}{
		{"model", "batch: 4, requests: 4", ParamRequests, "4", true},
		{"model", "batch: 4, requests: 0x4", ParamRequests, "4", true},
		{"model", "batch: 4, requests: 8", ParamRequests, "4", false},
		{"model", "batch: 4", ParamRequests, "4", true},
		{"model", "batch: 4", ParamRequests, "0x4", true},
		{"model", "batch: 4", ParamRequests, "8", false},
		{"model", "batch: 2, requests: 8, max_seqs: 6", ParamMaxSeqs, "6", true},
		{"model", "gen_len: 4", ParamBatch, "1", true},
		{"model", "gen_len: 4", ParamFusion, "on", true},
		{"model", "gen_len: 4", ParamFusion, "off", false},
		{"model", "gen_len: 4", ParamLayers, "2", false}, // the model's: no default a suite knows
		{"kernel", "op: rms_norm, width: 64", "tokens", "1", true},
		{"kernel", "op: rms_norm, width: 64, tokens: 1", "tokens", "1", true},
		{"kernel", "op: rms_norm, width: 64", "tokens", "16", false},
		{"kernel", "op: rms_norm, width: 64", "width", "64", true},
		{"kernel", "op: rms_norm, width: 64", "width", "96", false},
		{"kernel", "op: moe, moe_chunk: 64", string(ops.MoEStrategyParam), "chunked", true},
	} {
		c := keyOf(t, tc.kind, tc.params)
		if got := c.KeysAs(tc.name, tc.value); got != tc.want {
			t.Errorf("%s {%s}: KeysAs(%s, %s) = %v, want %v", tc.kind, tc.params, tc.name, tc.value, got, tc.want)
		}
	}
}
