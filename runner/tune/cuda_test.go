package tune

import (
	"reflect"
	"strings"
	"testing"
)

func TestCUDASpaces(t *testing.T) {
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 48 << 10, SIMDWidth: 32}
	names := func(k *Kernel, cs []Config) []string {
		var out []string
		for _, c := range cs {
			out = append(out, k.String(c))
		}
		return out
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
		cands   []string // nil: only counted
		n       int
		reasons map[string]int
	}{
		// One token: the strategy and pairs per pass mean nothing, so the
		// space is rows × down-projection rows.
		{kernel: "moe", shape: Shape{"tokens": 1},
			cands: []string{"grouped/r1/d4", "grouped/r1/d2", "grouped/r1/d8", "grouped/r2/d2", "grouped/r2/d4", "grouped/r2/d8"}, n: 6},
		// 16 tokens (128 pairs): loop, grouped and chunked 2..64, each with
		// 2 rows and 5 passes; the down-projection rows drop out.
		{kernel: "moe", shape: Shape{"tokens": 16}, n: 8 * 2 * 5},
		// Partitions of 32 to 1024 positions; at context 8192, 64 would
		// make 128 partitions, more than a launch merges (the default, 32,
		// is always a candidate: the backend doubles it).
		// auto: the backend's split, which follows the context.
		{kernel: "paged_attention_decode", shape: Shape{"context": 1024},
			cands: []string{"pauto", "p32", "p64", "p128", "p256", "p512", "p1024"}, n: 7},
		// 32 positions a partition would take 512 of the 256 a launch merges.
		{kernel: "paged_attention_decode", shape: Shape{"context": 16384}, n: 6,
			reasons: map[string]int{"partitions": 1}},
		// 4 rows per warp exist for up to 4 tokens a pass (5 points); k=512
		// cannot keep 4 or 8 warps busy on one row (6 more).
		{kernel: "matmul", shape: Shape{"m": 8, "k": 512}, n: 3 * 3,
			reasons: map[string]int{"rows per warp": 5, "split-K": 2 * 3}},
	}
	for _, tc := range tests {
		k, err := Find("cuda", tc.kernel)
		if err != nil {
			t.Fatal(err)
		}
		s, err := k.Normalize(tc.shape, lim)
		if err != nil {
			t.Fatal(err)
		}
		cands, pruned := k.Candidates(s, lim)
		got := names(k, cands)
		if tc.cands != nil && !reflect.DeepEqual(got, tc.cands) {
			t.Errorf("%s %s: candidates %v, want %v", tc.kernel, s.Key(), got, tc.cands)
		}
		if len(cands) != tc.n {
			t.Errorf("%s %s: %d candidates (%v), want %d", tc.kernel, s.Key(), len(cands), got, tc.n)
		}
		r := reasons(pruned)
		for name, n := range tc.reasons {
			if r[name] != n {
				t.Errorf("%s %s: %d pruned by %q, want %d (all: %v)", tc.kernel, s.Key(), r[name], name, n, r)
			}
		}
	}

	// The GEMV takes up to 8 rows; cuBLAS runs larger m, with nothing to tune.
	mm, _ := Find("cuda", "matmul")
	if !mm.Applies(Shape{"m": 8}) || mm.Applies(Shape{"m": 16}) {
		t.Error("the CUDA matmul must apply to m <= 8 only")
	}
}
