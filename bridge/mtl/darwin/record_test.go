package darwin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

func TestRecording(t *testing.T) {
	r := &recording{maxTGMemory: 32 << 10}
	p := &pipeline{name: "k", id: 0x100, maxTotal: 1024, width: 32, staticTG: 4096}
	b := &buffer{id: 0x200, mem: make([]byte, 64)}
	e, err := r.newEncoder(false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.newEncoder(false, false); err == nil {
		t.Error("a second encoder while the first is open")
	}
	e.SetPipeline(p)
	e.SetBuffer(b, 16, 2)
	e.SetBuffer(nil, 0, 3)
	e.SetBytes([]byte{1, 2, 3}, 4)
	e.SetBytes([]byte{4, 5}, 5)
	e.SetThreadgroupMemoryLength(1024, 0)
	e.DispatchThreadgroups([3]int{3, 2, 1}, [3]int{32, 4, 1})
	e.DispatchThreads([3]int{100, 1, 1}, [3]int{64, 1, 1})
	e.DispatchThreadgroups([3]int{0, 1, 1}, [3]int{32, 1, 1}) // empty: dropped
	e.MemoryBarrier()
	e.End()
	e.End() // twice is fine
	te, err := r.newEncoder(true, false)
	if err != nil {
		t.Fatal(err)
	}
	te.End()
	if first, err := r.commit(); !first || err != nil {
		t.Fatalf("commit: %v, %v", first, err)
	}
	e.SetPipeline(p) // after Commit: ignored, as Metal's encoder is gone
	if first, _ := r.commit(); first {
		t.Error("second commit")
	}
	want := []op{
		{code: opEncoder},
		{code: opPipeline, a: 0x100},
		{code: opBuffer, a: 0x200, b: 16, c: 2},
		{code: opBuffer, c: 3},
		{code: opBytes, a: 0, b: 3, c: 4},
		{code: opBytes, a: 3, b: 2, c: 5},
		{code: opTGMemory, a: 1024, b: 0},
		{code: opGroups, g: mtlSize{3, 2, 1}, t: mtlSize{32, 4, 1}},
		{code: opThreads, g: mtlSize{100, 1, 1}, t: mtlSize{64, 1, 1}},
		{code: opBarrier},
		{code: opEnd},
		{code: opTimedEncoder, a: 0},
		{code: opEnd},
	}
	if len(r.ops) != len(want) {
		t.Fatalf("ops %+v", r.ops)
	}
	for i := range want {
		if r.ops[i] != want[i] {
			t.Errorf("op %d: %+v, want %+v", i, r.ops[i], want[i])
		}
	}
	if string(r.arena) != "\x01\x02\x03\x04\x05" || len(r.bufs) != 1 || r.timed != 1 {
		t.Errorf("arena %q, %d bufs, %d timed", r.arena, len(r.bufs), r.timed)
	}
	if _, err := r.newEncoder(false, false); err == nil {
		t.Error("an encoder after Commit")
	}
}

func TestRecordingErrors(t *testing.T) {
	p := &pipeline{name: "k", id: 1, maxTotal: 512, staticTG: 16 << 10}
	buf := &buffer{id: 2, mem: make([]byte, 64)}
	for _, c := range []struct {
		encode func(mtl.ComputeEncoder)
		want   string
	}{
		{func(e mtl.ComputeEncoder) { e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{1, 1, 1}) }, "dispatch without SetPipeline"},
		{func(e mtl.ComputeEncoder) {
			e.SetPipeline(p)
			e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{1024, 1, 1})
		}, "kernel k: 1024 threads per threadgroup exceed the pipeline's 512"},
		{func(e mtl.ComputeEncoder) {
			e.SetPipeline(p)
			e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{0, 1, 1})
		}, "kernel k: bad dispatch size"},
		{func(e mtl.ComputeEncoder) {
			e.SetPipeline(p)
			// 2^32·2^32 threads per threadgroup wrap around to 0.
			e.DispatchThreads([3]int{64, 64, 1}, [3]int{1 << 32, 1 << 32, 1})
		}, "kernel k: bad dispatch size"},
		{func(e mtl.ComputeEncoder) {
			e.SetPipeline(p)
			e.SetThreadgroupMemoryLength(20<<10, 1)
			e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{32, 1, 1})
		}, "kernel k: 36864 bytes of threadgroup memory (16384 static, 20480 dynamic) exceed the device's 32768"},
		{func(e mtl.ComputeEncoder) { e.SetThreadgroupMemoryLength(24, 0) }, "not a multiple of 16"},
		{func(e mtl.ComputeEncoder) { e.SetBuffer(buf, 64, 0) }, "offset 64 outside the 64-byte buffer"},
		{func(e mtl.ComputeEncoder) { e.SetBuffer(buf, 0, 31) }, "index 31 out of range"},
		{func(e mtl.ComputeEncoder) { e.SetBuffer(fakeBuffer{}, 0, 0) }, "is not a Metal buffer"},
		{func(e mtl.ComputeEncoder) { e.SetBytes(make([]byte, 4097), 0) }, "SetBytes: 4097 bytes"},
		{func(e mtl.ComputeEncoder) { e.SetPipeline(nil) }, "is not a Metal pipeline"},
		{func(e mtl.ComputeEncoder) {
			e.End()
			e.SetPipeline(p)
		}, "SetPipeline after End"},
	} {
		r := &recording{maxTGMemory: 32 << 10}
		e, err := r.newEncoder(false, false)
		if err != nil {
			t.Fatal(err)
		}
		c.encode(e)
		e.End()
		if _, err := r.commit(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	r := &recording{maxTGMemory: 32 << 10}
	if _, err := r.newEncoder(false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := r.commit(); err == nil || !strings.Contains(err.Error(), "Commit with an encoder that is not ended") {
		t.Errorf("open encoder at Commit: %v", err)
	}
}

func TestBufferRelease(t *testing.T) {
	var freed []uintptr
	b := &buffer{id: 7, mem: make([]byte, 8), free: func(id uintptr) { freed = append(freed, id) }}
	if b.Length() != 8 || len(b.Contents()) != 8 {
		t.Fatal("length")
	}
	b.Release()
	b.Release()
	if b.Contents() != nil || len(freed) != 1 || freed[0] != 7 {
		t.Errorf("after Release: contents %v, freed %v", b.Contents(), freed)
	}
}

type fakeBuffer struct{ mtl.Buffer }

// A dispatch is checked against the threadgroup memory its own kernel's
// [[threadgroup(n)]] arguments take (from the pipeline's reflection):
// lengths an earlier kernel of the same encoder set at other indices stay
// set, as in Metal, but are not counted. A pipeline without reflection
// counts every length set.
func TestThreadgroupMemoryOfThisKernel(t *testing.T) {
	tg := func(idx ...int) []mtl.ThreadgroupArg {
		var out []mtl.ThreadgroupArg
		for _, i := range idx {
			out = append(out, mtl.ThreadgroupArg{Name: fmt.Sprintf("t%d", i), Index: i})
		}
		return out
	}
	three := &pipeline{name: "three", id: 1, maxTotal: 1024, tgArgs: tg(0, 1, 2), reflected: true}
	two := &pipeline{name: "two", id: 2, maxTotal: 1024, staticTG: 16 << 10, tgArgs: tg(0, 1), reflected: true}
	static := &pipeline{name: "static", id: 3, maxTotal: 1024, staticTG: 24 << 10, reflected: true}
	blind := &pipeline{name: "blind", id: 4, maxTotal: 1024, staticTG: 16 << 10}
	type step struct {
		p   *pipeline
		set [][2]int // length, index
	}
	for _, c := range []struct {
		name  string
		steps []step
		err   string
	}{
		{"two after three", []step{{three, [][2]int{{8 << 10, 0}, {8 << 10, 1}, {8 << 10, 2}}}, {two, nil}}, ""},
		{"static after three", []step{{three, [][2]int{{8 << 10, 0}, {8 << 10, 1}, {8 << 10, 2}}}, {static, nil}}, ""},
		{"two over", []step{{three, [][2]int{{8 << 10, 0}, {12 << 10, 1}, {8 << 10, 2}}}, {two, nil}},
			"kernel two: 36864 bytes of threadgroup memory (16384 static, 20480 dynamic) exceed the device's 32768"},
		{"argument without memory", []step{{two, [][2]int{{1024, 0}}}}, "kernel two: threadgroup(1) 't1' has no memory"},
		{"no reflection counts every length", []step{{three, [][2]int{{8 << 10, 0}, {8 << 10, 1}, {8 << 10, 2}}}, {blind, nil}},
			"kernel blind: 40960 bytes of threadgroup memory (16384 static, 24576 dynamic)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &recording{maxTGMemory: 32 << 10}
			e, err := r.newEncoder(false, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.steps {
				e.SetPipeline(s.p)
				for _, l := range s.set {
					e.SetThreadgroupMemoryLength(l[0], l[1])
				}
				e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{32, 1, 1})
			}
			e.End()
			_, err = r.commit()
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Errorf("got %v, want %q", err, c.err)
			}
		})
	}
}

// Only the bindings reflection types as threadgroup memory are the
// kernel's threadgroup arguments.
func TestThreadgroupArgsOf(t *testing.T) {
	got := threadgroupArgsOf([]binding{{"x", 0, 0}, {"scratch", bindingThreadgroupMemory, 0}, {"tex", 2, 1}, {"partial", bindingThreadgroupMemory, 3}})
	want := []mtl.ThreadgroupArg{{Name: "scratch", Index: 0}, {Name: "partial", Index: 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("threadgroupArgsOf = %v, want %v", got, want)
	}
	if got := threadgroupArgsOf(nil); len(got) != 0 {
		t.Errorf("no bindings: %v", got)
	}
}
