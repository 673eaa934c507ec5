package emu_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A closed Options.Stop ends a dispatch in flight at its next threadgroup
// (an interrupted run need not wait out an emulated step of minutes), and
// every command buffer after it fails at once.
func TestStopEndsADispatch(t *testing.T) {
	stop := make(chan struct{})
	dev := newDevice(t, emu.Options{Stop: stop})
	p := pipe(t, testLibrary(t, dev, "idioms.metal"), "bump_first", nil)
	const groups, threads = 1 << 17, 32
	before, counts := newBuf(t, dev, 4*groups*threads), newBuf(t, dev, 4)
	ran := (*uint32)(unsafe.Pointer(&counts.Contents()[0]))
	errc := make(chan error, 1)
	go func() {
		errc <- run(t, dev, p, [3]int{groups, 1, 1}, [3]int{threads, 1, 1}, arg{buf: before}, arg{buf: counts})
	}()
	for atomic.LoadUint32(ran) == 0 {
		runtime.Gosched()
	}
	close(stop)
	if err := <-errc; !errors.Is(err, emu.ErrStopped) {
		t.Fatalf("stopped dispatch: %v, want ErrStopped", err)
	}
	if n := atomic.LoadUint32(ran); n >= groups*threads {
		t.Errorf("all %d threads ran: the stop did not end the dispatch", n)
	}
	if err := run(t, dev, p, [3]int{1, 1, 1}, [3]int{threads, 1, 1}, arg{buf: before}, arg{buf: counts}); !errors.Is(err, emu.ErrStopped) {
		t.Errorf("a dispatch after the stop: %v, want ErrStopped", err)
	}
}
