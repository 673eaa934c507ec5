//go:build linux

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// devAlloc is device memory: a block of its own, or a piece of an arena
// chunk (weights, packed to avoid the driver's 2 MiB rounding).
type devAlloc struct {
	ptr   uint64
	size  int64
	order uint64 // when the driver gave it (pool.Blocks); 0 for arena pieces
	chunk *chunk
	freed atomic.Bool
}

type chunk struct {
	mem  *devAlloc
	used int64
	live int
}

const (
	arenaChunk   = 512 << 20 // weights below arenaMax share chunks of this size
	arenaMax     = 32 << 20
	arenaAlign   = 256
	allocRetries = 3
)

// devAlloc allocates size bytes (thread only), a freed block of that size
// first. On out-of-memory it hands the freed blocks it keeps back to the
// driver; if that is not enough, it drops the weight cache, collects
// garbage so unreachable tensors free their memory, and tries again.
func (b *Backend) devAlloc(size int64) (*devAlloc, error) {
	if size <= 0 {
		size = arenaAlign
	}
	if p, order, ok := b.pool.Take(size); ok {
		return &devAlloc{ptr: p, size: size, order: order}, nil
	}
	var p uint64
	alloc := func() int32 { return call(b.api.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size)) }
	r := alloc()
	if r == cudaErrorOutOfMemory && b.pool.Bytes() > 0 {
		b.releasePool()
		r = alloc()
	}
	for try := 0; r == cudaErrorOutOfMemory && try < allocRetries; try++ {
		b.memMu.Lock()
		b.weights = map[bridge.HostKey]*tensor{}
		b.memMu.Unlock()
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		b.processFrees()
		b.releasePool()
		r = alloc()
	}
	if r != 0 {
		return nil, fmt.Errorf("cuda: allocating %s: %w", human(size), b.check("cuMemAlloc", r))
	}
	return &devAlloc{ptr: p, size: size, order: b.pool.Stamp()}, nil
}

// releasePool hands the blocks kept for reuse back to the driver (thread
// only).
func (b *Backend) releasePool() {
	for _, p := range b.pool.Drain() {
		call(b.api.cuMemFree, uintptr(p))
	}
}

// freeMemory is the device memory an allocation can still have: the
// driver's free memory and the blocks kept for reuse (thread only).
func (b *Backend) freeMemory() (uint64, error) {
	var free, total uint64
	err := b.check("cuMemGetInfo", call(b.api.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	return free + uint64(b.pool.Bytes()), err
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

// arenaAlloc places a weight in the current arena chunk (thread only).
func (b *Backend) arenaAlloc(size int64) (*devAlloc, error) {
	size = (size + arenaAlign - 1) / arenaAlign * arenaAlign
	if size >= arenaMax {
		return b.devAlloc(size)
	}
	c := b.arena
	if c == nil || c.used+size > c.mem.size {
		if c != nil && c.live == 0 {
			b.freeNow(c.mem)
		}
		m, err := b.devAlloc(arenaChunk)
		if err != nil {
			return nil, err
		}
		c = &chunk{mem: m}
		b.arena = c
	}
	d := &devAlloc{ptr: c.mem.ptr + uint64(c.used), size: size, chunk: c}
	c.used += size
	c.live++
	return d, nil
}

// release queues d to be freed at the next point where no work can use it.
// It may run on any goroutine (Free, or a tensor's cleanup).
func (b *Backend) releaseAlloc(d *devAlloc) {
	if d == nil || !d.freed.CompareAndSwap(false, true) {
		return
	}
	b.memMu.Lock()
	b.freeQ = append(b.freeQ, d)
	b.memMu.Unlock()
}

// processFrees frees what was released (thread only, no step recording).
// A submitted step may still use it, so that one is waited for first.
func (b *Backend) processFrees() {
	b.memMu.Lock()
	q := b.freeQ
	b.freeQ = nil
	b.memMu.Unlock()
	if len(q) > 0 && b.inflight > 0 {
		call(b.api.cuStreamSynchronize, b.stream)
	}
	b.freeList(q)
}

// freeList frees allocations no queued work uses (thread only).
func (b *Backend) freeList(q []*devAlloc) {
	for _, d := range q {
		if c := d.chunk; c != nil {
			c.live--
			if c.live == 0 {
				if c == b.arena {
					c.used = 0
				} else {
					b.freeNow(c.mem)
				}
			}
			continue
		}
		b.recycle(d)
	}
}

// recycle keeps a freed block for the next allocation of its size (thread
// only).
func (b *Backend) recycle(d *devAlloc) {
	if d != nil && d.ptr != 0 {
		b.pool.Put(d.ptr, d.size, d.order)
		d.ptr = 0
	}
}

func (b *Backend) freeNow(d *devAlloc) {
	if d != nil && d.ptr != 0 {
		call(b.api.cuMemFree, uintptr(d.ptr))
		d.ptr = 0
	}
}

// tensor is device memory with a dtype and shape.
type tensor struct {
	dt    bridge.DType
	shape []int
	n     int
	ptr   uint64
	mem   *devAlloc
	wkey  *bridge.HostKey // set for cached weights
	// holders: a cached weight is handed out once a build that asks for
	// its bytes (cachedWeight); Free releases it with the last holder.
	holders bridge.Holders
}

func (t *tensor) DType() bridge.DType { return t.dt }
func (t *tensor) Shape() []int        { return t.shape }
func (t *tensor) Len() int            { return t.n }
func (t *tensor) bytes() int64        { return int64(t.n) * int64(t.dt.Size()) }

func elems(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

func checkDType(dt bridge.DType) error {
	switch dt {
	case bridge.F32, bridge.F16, bridge.BF16, bridge.I32:
		return nil
	}
	return fmt.Errorf("unsupported dtype %v", dt)
}

func (b *Backend) newTensor(dt bridge.DType, shape []int, n int, d *devAlloc) *tensor {
	t := &tensor{dt: dt, shape: append([]int(nil), shape...), n: n, mem: d}
	if d != nil {
		t.ptr = d.ptr
		runtime.AddCleanup(t, b.releaseAlloc, d)
	}
	return t
}

// Alloc returns zeroed device memory.
func (b *Backend) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if err := checkDType(dt); err != nil {
		return nil, err
	}
	if n == 0 {
		return b.newTensor(dt, shape, 0, nil), nil
	}
	var d *devAlloc
	err = b.th.do(func() error {
		if !b.inStep {
			b.processFrees()
		}
		var err error
		if d, err = b.devAlloc(int64(n) * int64(dt.Size())); err != nil {
			return err
		}
		return b.check("cuMemsetD8", call(b.api.cuMemsetD8, uintptr(d.ptr), 0, uintptr(d.size)))
	})
	if err != nil {
		return nil, err
	}
	return b.newTensor(dt, shape, n, d), nil
}

// upload copies a weight's host bytes into the arena, then hands them to the
// loader's drop: the device holds them from now on.
func (b *Backend) upload(data []byte) (*devAlloc, error) {
	var d *devAlloc
	err := b.th.do(func() error {
		if !b.inStep {
			b.processFrees()
		}
		var err error
		if d, err = b.arenaAlloc(int64(len(data))); err != nil {
			return err
		}
		return b.check("cuMemcpyHtoD", call(b.api.cuMemcpyHtoD, uintptr(d.ptr), uintptr(unsafe.Pointer(&data[0])), uintptr(len(data))))
	})
	if err != nil {
		if d != nil {
			b.releaseAlloc(d)
		}
		return nil, err
	}
	if b.drop != nil {
		b.drop(data)
	}
	return d, nil
}

// DropCopied takes the loader's drop (bridge.CopyDropper): once a weight is
// on the device, the pages of the file it came from leave the process's
// resident set.
func (b *Backend) DropCopied(drop func([]byte)) { b.drop = drop }

// Weight copies host bytes to the device.
func (b *Backend) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if err := checkDType(dt); err != nil {
		return nil, err
	}
	if len(data) != n*dt.Size() {
		return nil, fmt.Errorf("%d bytes for a %v tensor of shape %v (want %d)", len(data), dt, shape, n*dt.Size())
	}
	if n == 0 {
		return b.newTensor(dt, shape, 0, nil), nil
	}
	key := bridge.KeyOf(dt, data)
	if t := b.cachedWeight(key, shape); t != nil {
		return t, nil
	}
	d, err := b.upload(data)
	if err != nil {
		return nil, err
	}
	t := b.newTensor(dt, shape, n, d)
	t.wkey = &key
	b.memMu.Lock()
	b.weights[key] = t
	b.memMu.Unlock()
	return t, nil
}

// cachedWeight is the live weight made of the host bytes key names, as
// shape, handed out once more (tensor.holders); nil if there is none.
func (b *Backend) cachedWeight(key bridge.HostKey, shape []int) *tensor {
	b.memMu.Lock()
	defer b.memMu.Unlock()
	t := b.weights[key]
	if t == nil || !slices.Equal(t.shape, shape) || t.mem == nil || t.mem.freed.Load() {
		return nil
	}
	t.holders.Add()
	return t
}

// Free releases t's memory once no queued work can use it, a cached
// weight's with its last holder.
func (b *Backend) Free(x bridge.Tensor) {
	// A packed matrix is its parts: a kernel case's, freed as it closes,
	// held the device memory until the backend closed.
	if q, ok := x.(*qtensor); ok && q != nil {
		for _, t := range []*tensor{q.data, q.scales, q.biases} {
			if t != nil {
				b.Free(t)
			}
		}
		return
	}
	t, ok := x.(*tensor)
	if !ok || t == nil || t.mem == nil {
		return
	}
	if t.wkey != nil {
		if !t.holders.Drop() {
			return
		}
		b.memMu.Lock()
		if b.weights[*t.wkey] == t {
			delete(b.weights, *t.wkey)
		}
		b.memMu.Unlock()
	}
	b.releaseAlloc(t.mem)
}

// Read copies t to the host as f32, after the work queued before it.
func (b *Backend) Read(x bridge.Tensor, dst []float32) error {
	t := x.(*tensor)
	if len(dst) < t.n {
		return fmt.Errorf("read: destination holds %d of %d elements", len(dst), t.n)
	}
	if t.n == 0 {
		return nil
	}
	return b.th.do(func() error {
		if err := b.drain(); err != nil {
			return err
		}
		switch t.dt {
		case bridge.F32:
			return b.check("cuMemcpyDtoH", call(b.api.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(t.ptr), uintptr(t.n*4)))
		case bridge.I32:
			tmp := make([]int32, t.n)
			if err := b.check("cuMemcpyDtoH", call(b.api.cuMemcpyDtoH, uintptr(unsafe.Pointer(&tmp[0])), uintptr(t.ptr), uintptr(t.n*4))); err != nil {
				return err
			}
			for i, v := range tmp {
				dst[i] = float32(v)
			}
		default:
			tmp := make([]uint16, t.n)
			if err := b.check("cuMemcpyDtoH", call(b.api.cuMemcpyDtoH, uintptr(unsafe.Pointer(&tmp[0])), uintptr(t.ptr), uintptr(t.n*2))); err != nil {
				return err
			}
			for i, v := range tmp {
				if t.dt == bridge.BF16 {
					dst[i] = math.Float32frombits(uint32(v) << 16)
				} else {
					dst[i] = f16ToF32(v)
				}
			}
		}
		return nil
	})
}

// ReadI32 copies an I32 tensor to the host.
func (b *Backend) ReadI32(x bridge.Tensor, dst []int32) error {
	t := x.(*tensor)
	if t.dt != bridge.I32 {
		return fmt.Errorf("read: tensor is %v, not i32", t.dt)
	}
	if len(dst) < t.n {
		return fmt.Errorf("read: destination holds %d of %d elements", len(dst), t.n)
	}
	if t.n == 0 {
		return nil
	}
	return b.th.do(func() error {
		if err := b.drain(); err != nil {
			return err
		}
		return b.check("cuMemcpyDtoH", call(b.api.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(t.ptr), uintptr(t.n*4)))
	})
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := int32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(man) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 31:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	return math.Float32frombits(sign | uint32(exp-15+127)<<23 | man<<13)
}
