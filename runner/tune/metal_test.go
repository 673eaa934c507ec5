package tune

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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
		// The norms read a row of 4096 as 1024 float4s: every thread count
		// up to 1024 has a float4 a thread, the default (1024) one each.
		{kernel: "rms_norm", shape: Shape{"width": 4096}, lim: lim, cands: []string{"1024t", "32t", "64t", "128t", "256t", "512t"},
			n: 6},
		// GPT-2's 768 are 192 float4s: 192 threads (the default) hold one
		// each, and 256 or more would leave simdgroups without one.
		{kernel: "layer_norm", shape: Shape{"width": 768}, lim: lim, cands: []string{"192t", "32t", "64t", "128t"},
			n: 4, reasons: map[string]int{"idle simdgroups": 3}},
		// A width of 4095 is read a float at a time: 1024 threads of four.
		{kernel: "rms_norm", shape: Shape{"width": 4095}, lim: lim, cands: []string{"1024t", "32t", "64t", "128t", "256t", "512t"},
			n: 6},
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

// A Metal matmul entry tuned at one row holds the matvec's canonical
// mv_max=1, as a tune that keeps the default stores it. At two to four rows
// that config is the tiles, whose 64-row default cannot run there: the
// lookup passes the entry over, for the next nearest or the default,
// without a warning. An entry that cannot run at its own bucket is still
// warned about.
func TestNearbyMetalEntryWhosePathDoesNotApply(t *testing.T) {
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
	k, err := Find("metal", "matmul")
	if err != nil {
		t.Fatal(err)
	}
	shape := func(m int) Shape {
		s, err := k.Normalize(Shape{"m": m, "n": 2048, "k": 2048}, lim)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	matmul := func(m int, cfg Config) Entry {
		return Entry{Device: "Test GPU", Backend: "metal", Kernel: "matmul", DType: "bf16", Shape: shape(m),
			Config: cfg, Default: k.DefaultConfig(shape(m), lim), Speedup: 1.2, P: 0.001, Samples: 20,
			SourceHash: "h", ToolVersion: "test", TunedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	}
	query := func(m int) Query {
		return Query{Device: "Test GPU", Backend: "metal", Kernel: "matmul", DType: "bf16", SourceHash: "h", Limits: lim, Shape: shape(m)}
	}

	s := NewStore(layer(FromUser, matmul(1, k.DefaultConfig(shape(1), lim))))
	for m := 1; m <= 4; m++ {
		c, err := s.Lookup(query(m))
		if err != nil {
			t.Fatal(err)
		}
		if want := m > 1; c.IsDefault() != want {
			t.Errorf("m=%d: %s, want the default: %v", m, c, want)
		}
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("an entry tuned at m=1 warned at m=2..4: %q", w)
	}

	// m=2 is an octave from the buckets at 1 and 4; the smaller does not
	// apply, so the one at 4 does, canonical for 2 rows.
	s = NewStore(layer(FromUser,
		matmul(1, Config{"mv_max": "1", "rows": "2", "simdgroups": "8"}),
		matmul(4, Config{"mv_max": "4", "rows": "3", "simdgroups": "2"})))
	if c, err := s.Lookup(query(2)); err != nil || c.String() != "mv<=2m/r3/2sg (user cache)" {
		t.Errorf("m=2 between buckets 1 and 4: %s, %v; want the bucket at 4", c, err)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}

	// A 64-row tile tuned at one row runs nowhere near: that file is wrong.
	s = NewStore(layer(FromUser, matmul(1, Config{"mv_max": "0", "bm": "64", "bn": "64", "bk": "32", "sgm": "2", "sgn": "2"})))
	if c, _ := s.Lookup(query(2)); !c.IsDefault() {
		t.Errorf("a tile that cannot run at its bucket was taken: %s", c)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "cannot run here") {
		t.Errorf("warnings %q, want one that the entry cannot run here", w)
	}
}
