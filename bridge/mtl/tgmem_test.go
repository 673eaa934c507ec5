package mtl

import (
	"math"
	"strings"
	"testing"
)

// A dispatch is given threadgroup memory at its kernel's own
// [[threadgroup(n)]] indices only: lengths an earlier kernel of the same
// encoder left at other indices stay set but are not counted.
func TestThreadgroupLengths(t *testing.T) {
	const limit = 32 << 10
	a0, a1, a2 := ThreadgroupArg{"a", 0}, ThreadgroupArg{"b", 1}, ThreadgroupArg{"c", 2}
	for _, c := range []struct {
		name    string
		set     [][2]int // length, index, in order
		args    []ThreadgroupArg
		static  int
		want    int
		err     string
		wantSet string // the first Set error
	}{
		{name: "none", want: 0},
		{name: "one", set: [][2]int{{1024, 0}}, args: []ThreadgroupArg{a0}, static: 4096, want: 1024},
		{name: "static only, stale length", set: [][2]int{{32 << 10, 0}}, static: 16 << 10, want: 0},
		{name: "two after three", set: [][2]int{{8 << 10, 0}, {8 << 10, 1}, {20 << 10, 2}}, args: []ThreadgroupArg{a0, a1}, static: 8 << 10, want: 16 << 10},
		{name: "three", set: [][2]int{{8 << 10, 0}, {8 << 10, 1}, {20 << 10, 2}}, args: []ThreadgroupArg{a0, a1, a2}, want: 36 << 10,
			err: "kernel k: 36864 bytes of threadgroup memory (0 static, 36864 dynamic) exceed the device's 32768"},
		{name: "reset to a smaller length", set: [][2]int{{32 << 10, 0}, {1024, 0}}, args: []ThreadgroupArg{a0}, static: 1024, want: 1024},
		{name: "static and dynamic over", set: [][2]int{{20 << 10, 1}}, args: []ThreadgroupArg{a1}, static: 16 << 10, want: 20 << 10,
			err: "kernel k: 36864 bytes of threadgroup memory (16384 static, 20480 dynamic) exceed the device's 32768"},
		{name: "exactly the limit", set: [][2]int{{16 << 10, 3}}, args: []ThreadgroupArg{{"d", 3}}, static: 16 << 10, want: 16 << 10},
		{name: "no memory", set: [][2]int{{1024, 0}}, args: []ThreadgroupArg{a0, a1}, err: "kernel k: threadgroup(1) 'b' has no memory (SetThreadgroupMemoryLength)"},
		{name: "huge lengths saturate", set: [][2]int{{math.MaxInt &^ 15, 0}, {math.MaxInt &^ 15, 1}}, args: []ThreadgroupArg{a0, a1}, static: 16, want: math.MaxInt,
			err: "exceed the device's 32768"},
		{name: "argument index out of range", args: []ThreadgroupArg{{"e", 31}}, err: "kernel k: threadgroup(31) 'e': index out of range [0, 30]"},
		{name: "Set index out of range", set: [][2]int{{16, 31}}, wantSet: "SetThreadgroupMemoryLength: index 31 out of range [0, 30]"},
		{name: "Set negative index", set: [][2]int{{16, -1}}, wantSet: "index -1 out of range"},
		{name: "Set not a multiple of 16", set: [][2]int{{24, 0}}, wantSet: "SetThreadgroupMemoryLength: 24 bytes is not a multiple of 16"},
		{name: "Set negative length", set: [][2]int{{-16, 0}}, wantSet: "-16 bytes is not a multiple of 16"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var l ThreadgroupLengths
			var setErr error
			for _, s := range c.set {
				if err := l.Set(s[0], s[1]); err != nil && setErr == nil {
					setErr = err
				}
			}
			if c.wantSet != "" || setErr != nil {
				if setErr == nil || c.wantSet == "" || !strings.Contains(setErr.Error(), c.wantSet) {
					t.Fatalf("Set: %v, want %q", setErr, c.wantSet)
				}
				return
			}
			dyn, err := l.Dynamic("k", c.args, c.static, limit)
			switch {
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
			case err != nil:
				t.Fatal(err)
			}
			if dyn != c.want {
				t.Errorf("dynamic %d, want %d", dyn, c.want)
			}
		})
	}
}
