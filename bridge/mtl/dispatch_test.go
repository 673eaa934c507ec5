package mtl

import (
	"math"
	"strings"
	"testing"
)

// Dispatch sizes are checked before any product of them is taken: sizes
// whose product wraps around (to 0, or to something under the limit) are
// refused, not dropped as empty or let through to the GPU.
func TestCheckDispatch(t *testing.T) {
	const big = 1 << 32
	for _, c := range []struct {
		name      string
		threads   bool // CheckThreads, else CheckThreadgroups
		size, tpg [3]int
		want      Dispatch
		err       string
	}{
		{name: "groups", size: [3]int{3, 2, 1}, tpg: [3]int{32, 4, 1},
			want: Dispatch{Groups: [3]int{3, 2, 1}, PerGroup: [3]int{32, 4, 1}, Grid: [3]int{96, 8, 1}}},
		{name: "threads", threads: true, size: [3]int{100, 1, 1}, tpg: [3]int{64, 1, 1},
			want: Dispatch{Groups: [3]int{2, 1, 1}, PerGroup: [3]int{64, 1, 1}, Grid: [3]int{100, 1, 1}}},
		{name: "empty", size: [3]int{0, 1, 1}, tpg: [3]int{32, 1, 1},
			want: Dispatch{Groups: [3]int{0, 1, 1}, PerGroup: [3]int{32, 1, 1}, Grid: [3]int{0, 1, 1}, Empty: true}},
		{name: "empty threads", threads: true, size: [3]int{5, 0, 1}, tpg: [3]int{32, 1, 1},
			want: Dispatch{Groups: [3]int{1, 0, 1}, PerGroup: [3]int{32, 1, 1}, Grid: [3]int{5, 0, 1}, Empty: true}},
		{name: "too many threads", size: [3]int{1, 1, 1}, tpg: [3]int{1024, 2, 1}, err: "kernel k: 2048 threads per threadgroup exceed the pipeline's 1024"},
		{name: "no threads", size: [3]int{1, 1, 1}, tpg: [3]int{0, 1, 1}, err: "kernel k: bad dispatch size"},
		{name: "negative", threads: true, size: [3]int{-1, 1, 1}, tpg: [3]int{1, 1, 1}, err: "kernel k: bad dispatch size"},
		{name: "grid too wide", size: [3]int{big / 32, 1, 1}, tpg: [3]int{32, 1, 1}, err: "bad dispatch size"},
		// 2^31·2^31·4 threadgroups is 2^64, which wraps to 0: not empty.
		{name: "groups do not wrap to empty", size: [3]int{1 << 31, 1 << 31, 4}, tpg: [3]int{1, 1, 1},
			want: Dispatch{Groups: [3]int{1 << 31, 1 << 31, 4}, PerGroup: [3]int{1, 1, 1}, Grid: [3]int{1 << 31, 1 << 31, 4}}},
		// 2^32 threads per group in two dimensions wrap to 0 threads.
		{name: "threadgroup wraps to none", threads: true, size: [3]int{64, 64, 1}, tpg: [3]int{big, big, 1}, err: "bad dispatch size"},
		{name: "threadgroup product overflows", threads: true, size: [3]int{64, 64, 64}, tpg: [3]int{big - 1, big - 1, big - 1},
			err: "threads per threadgroup exceed the pipeline's 1024"},
		{name: "huge groups times threads", size: [3]int{math.MaxInt / 2, 1, 1}, tpg: [3]int{4, 1, 1}, err: "bad dispatch size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			check := CheckThreadgroups
			if c.threads {
				check = CheckThreads
			}
			d, err := check("k", c.size, c.tpg, 1024)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			case d != c.want:
				t.Errorf("%+v, want %+v", d, c.want)
			}
		})
	}
}
