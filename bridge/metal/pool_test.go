package metal

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// countingDevice is the emulator with a working set of ws bytes (0: the
// emulator's), counting the buffers it makes.
type countingDevice struct {
	*emu.Device
	ws   int64
	made int
}

func (d *countingDevice) RecommendedMaxWorkingSetSize() int64 {
	if d.ws > 0 {
		return d.ws
	}
	return d.Device.RecommendedMaxWorkingSetSize()
}

func (d *countingDevice) NewBuffer(n int) (mtl.Buffer, error) {
	d.made++
	return d.Device.NewBuffer(n)
}

func bufOf(t *testing.T, x bridge.Tensor) *dbuf {
	t.Helper()
	tt, ok := x.(*tensor)
	if !ok || tt.buf == nil {
		t.Fatalf("%T is not a Metal tensor with a buffer", x)
	}
	return tt.buf
}

// A freed tensor's buffer comes back, cleared, for the next tensor of its
// size, and counts as available meanwhile; another size gets a buffer of
// its own.
func TestFreedBuffersComeBack(t *testing.T) {
	dev := &countingDevice{Device: emuDevice(t)}
	be, err := New(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	avail := be.Info().AvailableBytes
	a, err := be.Alloc(bridge.F32, 1000)
	if err != nil {
		t.Fatal(err)
	}
	first := bufOf(t, a)
	for i := range first.Contents() {
		first.Contents()[i] = 0xa5
	}
	made := dev.made
	be.Free(a)
	if got := be.Info().AvailableBytes; got != avail {
		t.Errorf("%d bytes available with the freed buffer pooled, %d before it was allocated", got, avail)
	}
	b, _ := be.Alloc(bridge.F32, 1000)
	if bufOf(t, b) != first || dev.made != made {
		t.Fatalf("a tensor of the freed one's size got a new buffer (%d made, %d before)", dev.made, made)
	}
	for i, v := range first.Contents()[:4000] {
		if v != 0 {
			t.Fatalf("byte %d of the reused buffer is %#x, want it cleared", i, v)
		}
	}
	c, _ := be.Alloc(bridge.F32, 999)
	if bufOf(t, c) == first || dev.made != made+1 {
		t.Fatalf("a tensor of another size took the pooled buffer (%d made, want %d)", dev.made, made+1)
	}
}

// The pool gives its buffers back before a buffer of another size would
// take the working set past the device's recommended size, and when the
// backend closes.
func TestPoolGivesWayAndCloses(t *testing.T) {
	dev := &countingDevice{Device: emuDevice(t)}
	be, err := New(dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	be.mu.Lock()
	dev.ws = be.allocated + 1<<20 // 1 MiB beyond what New allocated
	be.mu.Unlock()
	a, _ := be.Alloc(bridge.F32, 150<<10)
	be.Free(a)
	if got := be.pool.Bytes(); got != 600<<10 {
		t.Fatalf("pool holds %d bytes, want %d", got, 600<<10)
	}
	b, err := be.Alloc(bridge.F32, 150<<10+4) // fits only without the pooled buffer
	if err != nil {
		t.Fatal(err)
	}
	if got := be.pool.Bytes(); got != 0 {
		t.Errorf("pool holds %d bytes after an allocation that needed its room", got)
	}
	be.Free(b)
	if err := be.Close(); err != nil {
		t.Fatal(err)
	}
	if be.pool.Bytes() != 0 || be.allocated != 0 {
		t.Errorf("after Close: pool %d bytes, %d allocated", be.pool.Bytes(), be.allocated)
	}
}

// A tensor freed while a committed step may still use it goes to the pool
// only once that step has run: no allocation in between gets its buffer.
func TestFreedDuringAStepInFlight(t *testing.T) {
	be, err := New(emuDevice(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	out, _ := be.Alloc(bridge.F32, 256)
	x, _ := be.Alloc(bridge.F32, 256)
	meta := oneToken()
	if err := be.BeginStep(meta, []int32{0}, false); err != nil {
		t.Fatal(err)
	}
	be.Add(out, x, x)
	p, err := be.SubmitStep(nil)
	if err != nil {
		t.Fatal(err)
	}
	used := bufOf(t, out)
	be.Free(out)
	again, _ := be.Alloc(bridge.F32, 256)
	if bufOf(t, again) == used {
		t.Fatal("a buffer a step in flight writes was handed out again before the step ran")
	}
	if _, _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	after, _ := be.Alloc(bridge.F32, 256)
	if bufOf(t, after) != used {
		t.Error("the freed buffer did not come back once the step had run")
	}
}
