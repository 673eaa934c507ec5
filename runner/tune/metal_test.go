package tune

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMetalSpaces(t *testing.T) {
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	var names []string
	for _, k := range Kernels("metal-emu") {
		names = append(names, string(k.Op))
	}
	want := []string{"paged_attention_decode", "paged_attention_prefill", "rms_norm", "add_rms_norm", "matmul", "moe", "argmax",
		"layer_norm", "add_layer_norm", "qmatmul", "qmoe"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("metal-emu kernels %v, want Metal's %v", names, want)
	}
	reasons := func(ps []Pruned) map[string]int {
		m := map[string]int{}
		for _, p := range ps {
			m[strings.SplitN(p.Reason, ":", 2)[0]]++
		}
		return m
	}
	tests := []struct {
		kernel  string
		shape   Shape
		lim     Limits
		cands   []string // nil: only counted
		n       int
		reasons map[string]int
	}{
		// A GQA group of 4: the head caps 4 and 8 are one config (7
		// partition sizes each: single and 32..1024 positions). Simdgroups
		// past 4 keys each are one config: 16 and 32 of a 32-position
		// partition are 8, 32 of a 64-position one 16. Every count fits
		// threadgroup memory, the partial results meeting in rounds.
		{kernel: "paged_attention_decode", shape: Shape{"context": 1024, "num_heads": 32, "num_kv_heads": 8}, lim: lim,
			n: 6*3*7 - 3*3, reasons: map[string]int{"threadgroup memory": 0}},
		// No GQA (one head a threadgroup), a context of 100 (single, 32,
		// 64), and a pipeline that runs at most 256 threads: 16 simdgroups
		// go (single and 64; 32 of 64 positions are 16, 16 and 32 of 32
		// are 8), and the default, 32 of a single pass, stays first.
		{kernel: "paged_attention_decode", shape: Shape{"context": 100, "num_heads": 8, "num_kv_heads": 8},
			lim: Limits{MaxThreads: 256, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}, n: 1 + 4*3,
			reasons: map[string]int{"threads per threadgroup": 2}},
		// Argmax over Qwen3's vocabulary: 6 thread counts by single and
		// partitions of 1024 to 65536 values; 1024 and 2048 are more than 64
		// partitions.
		{kernel: "argmax", shape: Shape{"width": 151936}, lim: lim, n: 6 * 6, reasons: map[string]int{"partitions": 12}},
		// A row of 1000: every partition is the row (single), and 512 or
		// 1024 threads would leave simdgroups without four values each.
		{kernel: "argmax", shape: Shape{"width": 1000}, lim: lim, cands: []string{"256t/single", "32t/single", "64t/single", "128t/single"},
			n: 4, reasons: map[string]int{"idle simdgroups": 2}},
		// Simdgroups of 64 threads: nothing the kernels assume.
		{kernel: "rms_norm", shape: Shape{"width": 2048}, lim: Limits{MaxThreads: 1024, SIMDWidth: 64}, n: 1,
			reasons: map[string]int{"simd width": 5}},
		// One token: the matvec (4 rows x 6 simdgroup counts) or tiles one
		// 8-row tile tall (8 widths-by-simdgroups x 3 depths).
		{kernel: "matmul", shape: Shape{"m": 1, "n": 4096, "k": 4096}, lim: lim, n: 4*6 + 8*3},
		// The tiled prefill kernel from 8 tokens on by default; 13 tokens
		// of blocks of 8 tile with 1, 2 or 4 query heads of the GQA group
		// of 4 per threadgroup (8 is 4), 8, 16 or 32 keys a step and
		// query tiles of 8 or 16 tokens (32 is 16: the tile past the
		// longest query would only idle), or run per token.
		{kernel: "paged_attention_prefill", shape: Shape{"tokens": 13, "head_size": 32, "block_size": 8}, lim: lim,
			cands: []string{"tiled>=8/q4/k16/t16", "per-token<16",
				"tiled>=8/q1/k8/t8", "tiled>=8/q1/k8/t16", "tiled>=8/q1/k16/t8", "tiled>=8/q1/k16/t16", "tiled>=8/q1/k32/t8", "tiled>=8/q1/k32/t16",
				"tiled>=8/q2/k8/t8", "tiled>=8/q2/k8/t16", "tiled>=8/q2/k16/t8", "tiled>=8/q2/k16/t16", "tiled>=8/q2/k32/t8", "tiled>=8/q2/k32/t16",
				"tiled>=8/q4/k8/t8", "tiled>=8/q4/k8/t16", "tiled>=8/q4/k16/t8", "tiled>=8/q4/k32/t8", "tiled>=8/q4/k32/t16"}, n: 19},
	}
	for _, tc := range tests {
		k, err := Find("metal", tc.kernel)
		if err != nil {
			t.Fatal(err)
		}
		s, err := k.Normalize(tc.shape, tc.lim)
		if err != nil {
			t.Fatal(err)
		}
		cands, pruned := k.Candidates(s, tc.lim)
		var got []string
		for _, c := range cands {
			got = append(got, k.String(c))
		}
		if tc.cands != nil && !reflect.DeepEqual(got, tc.cands) {
			t.Errorf("%s %s: candidates %v, want %v", tc.kernel, s.Key(), got, tc.cands)
		}
		if len(cands) != tc.n {
			t.Errorf("%s %s: %d candidates, want %d", tc.kernel, s.Key(), len(cands), tc.n)
		}
		r := reasons(pruned)
		for name, n := range tc.reasons {
			if r[name] != n {
				t.Errorf("%s %s: %d pruned by %q, want %d (all: %v)", tc.kernel, s.Key(), r[name], name, n, r)
			}
		}
	}
}

// Metal's moe space: one token's pairs are distinct experts, so every
// strategy is one schedule and only grouped is a candidate; a few tokens
// tune loop (pairs one at a time) against grouped and chunked (pairs
// grouped by expert).
func TestMetalMoEStrategies(t *testing.T) {
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	k, err := Find("metal", "moe")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tokens int
		want   []string
	}{{1, []string{"grouped"}}, {16, []string{"chunked", "grouped", "loop"}}} {
		s, err := k.Normalize(Shape{"tokens": c.tokens, "experts": 128, "top_k": 8, "hidden": 2048, "intermediate": 768}, lim)
		if err != nil {
			t.Fatal(err)
		}
		cands, _ := k.Candidates(s, lim)
		seen := map[string]bool{}
		for _, cf := range cands {
			seen[cf["strategy"]] = true
		}
		var got []string
		for st := range seen {
			got = append(got, st)
		}
		slices.Sort(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%d tokens: strategies %v among %d candidates, want %v", c.tokens, got, len(cands), c.want)
		}
	}
}
