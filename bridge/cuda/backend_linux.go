//go:build linux

package cuda

import (
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
)

// Backend implements bridge.Backend on one NVIDIA GPU.
//
// Ops only record kernel launches (and cuBLAS GEMMs) into the step's list;
// EndStep uploads the step's metadata, runs the list on one stream and
// synchronises once. A list seen twice with the same kernels, grids and
// arguments (a decode step of a given batch size: the metadata lives in
// fixed device buffers, so its values are not part of the list) is captured
// into a CUDA graph and replayed from then on. On sm_90 and later kernels
// are launched with programmatic dependent launch, so each one is scheduled
// while the one before it drains. Every CUDA call runs on one goroutine
// locked to its OS thread, with the device's primary context current there.
type Backend struct {
	api  *api
	th   *thread
	opts Options

	dev            int32
	ctx, stream    uintptr
	mod            uintptr
	fns            map[string]uintptr
	cublas         uintptr
	cublasWS       uint64
	cc, sms        int
	l2             int64
	name           string
	totalMem       int64
	driverVersion  string
	nvrtcVersion   string
	compileNote    string
	maxSharedBlock int

	// memory
	memMu   sync.Mutex
	freeQ   []*devAlloc
	arena   *chunk
	weights map[weightKey]*tensor
	tables  map[string]uint64 // MoE expert pointer tables by content
	// moeByW finds a MoE block's table without walking its experts: a
	// decode step asks for every layer's, and the walk cost microseconds.
	moeByW  map[*bridge.MoEWeights]moeTableRef
	scratch map[string]*devAlloc
	retired []*devAlloc // scratch replaced during a step, freed at its end

	// the step being recorded
	inStep   bool
	profile  bool
	meta     *bridge.StepMeta
	mo       metaOffsets
	metaHost []int32
	metaDev  *devAlloc
	stats    *devAlloc
	tokSrc   uint64 // where the device reads the step's token ids (0: the host's)
	// stepKern: the step opens with step_begin and closes with step_end
	// (step.cu) in its graph, instead of copies and a memset around it
	stepKern bool
	// metaBufs are pinned, so the upload runs when the step does; the step
	// being recorded uses metaBufs[metaSlot], a step in flight the other.
	metaBufs  [2]hostBuf
	metaSlot  int
	streaming bool
	// submitted steps not yet waited for, and what each reads back
	slots    [2]stepSlot
	inflight int
	chained  int
	ents     []entry
	args     []uint64
	marks    []bridge.OpTiming
	// Streaming: entries before flushed were handed to the CUDA thread
	// while the step was still being recorded (started: with the step's
	// metadata upload); the next hand-off waits for segNext more. segErr is
	// a handed-off segment's failure (thread only).
	flushed, segNext, segs int
	started                bool
	segErr                 error
	moeCalls               int
	// fusions is the fusion table (fusion_linux.go); standIn the op a fusion
	// leaves for the runner to run next.
	fusions []bridge.Pattern
	standIn bridge.RMSNormOp
	stepErr error

	// graphs
	graphs   map[uint64]*graph
	seen     map[uint64]int
	keyBuf   []uint64
	useCount uint64
	events   []uintptr
	// kernels the last step launched
	lastLaunches, lastSegments int
	params                     [48]uintptr
	closed                     bool

	// programmatic dependent launch (sm_90+): each kernel may be scheduled
	// while the one before it finishes (the kernels wait for it first)
	pdl   bool
	lcfg  launchConfig
	lattr launchAttr

	// tuned launch parameters (tuning_linux.go), and the default for the
	// L2 weight prefetch of the GEMVs and the MoE down projection
	tuning   launchTuning
	prefetch bool
}

// launchConfig and launchAttr are CUlaunchConfig and CUlaunchAttribute.
type launchConfig struct {
	gridX, gridY, gridZ, blockX, blockY, blockZ, smem uint32
	_                                                 uint32
	stream                                            uintptr
	attrs                                             uintptr
	numAttrs                                          uint32
	_                                                 uint32
}

type launchAttr struct {
	id  uint32
	_   uint32
	val [64]byte
}

// cuLaunchAttributeProgrammaticStreamSerialization is
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const cuLaunchAttributeProgrammaticStreamSerialization = 6

// statsCap is the size of the step's stats buffer (int32s): the error word,
// then the distinct experts of each MoE call (calls beyond it share the
// last entry and are not reported).
const statsCap = 8192

// thread runs functions on one goroutine locked to an OS thread.
type thread struct{ ch chan func() }

func newThread() *thread {
	t := &thread{ch: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for f := range t.ch {
			f()
		}
	}()
	return t
}

// do runs f on the thread and waits; a panic in f becomes an error.
func (t *thread) do(f func() error) (err error) {
	done := make(chan struct{})
	t.ch <- func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("cuda: panic: %v", r)
			}
			close(done)
		}()
		err = f()
	}
	<-done
	return err
}

// post runs f on the thread without waiting; calls run in order, so a later
// do waits for every f posted before it.
func (t *thread) post(f func()) { t.ch <- f }

func (t *thread) close() { close(t.ch) }

// New opens GPU o.Device: it loads the driver, NVRTC and cuBLAS, compiles
// (or loads from the cache) the kernels, and sets up a stream. Without a
// driver it returns an error that says where it looked.
func New(o Options) (*Backend, error) {
	a, err := loadAPI(!o.NoCuBLAS, o.Libs)
	if err != nil {
		return nil, err
	}
	b := &Backend{api: a, opts: o, th: newThread(), fns: map[string]uintptr{}, weights: map[weightKey]*tensor{},
		tables: map[string]uint64{}, moeByW: map[*bridge.MoEWeights]moeTableRef{}, scratch: map[string]*devAlloc{}, graphs: map[uint64]*graph{}, seen: map[uint64]int{}}
	if err := b.th.do(b.init); err != nil {
		b.th.do(b.release) //nolint:errcheck // best effort
		b.th.close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) check(what string, r int32) error { return b.api.cuErr(what, r) }

func (b *Backend) init() error {
	a := b.api
	if r := call(a.cuInit, 0); r != 0 {
		if r == cudaErrorNoDevice {
			return fmt.Errorf("no CUDA device: the driver (%s) found no GPU", a.driverPath)
		}
		return b.check("cuInit", r)
	}
	var count int32
	if err := b.check("cuDeviceGetCount", call(a.cuDeviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return err
	}
	if b.opts.Device < 0 || b.opts.Device >= int(count) {
		return fmt.Errorf("no CUDA device %d (the driver sees %d)", b.opts.Device, count)
	}
	if err := b.check("cuDeviceGet", call(a.cuDeviceGet, uintptr(unsafe.Pointer(&b.dev)), uintptr(b.opts.Device))); err != nil {
		return err
	}
	d := deviceInfo(a, b.dev)
	b.name, b.cc, b.sms, b.totalMem, b.l2 = d.name, d.cc, d.sms, d.mem, d.l2
	var v int32
	call(a.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	b.driverVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	if err := b.check("cuDevicePrimaryCtxRetain", call(a.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&b.ctx)), uintptr(b.dev))); err != nil {
		return err
	}
	if err := b.check("cuCtxSetCurrent", call(a.cuCtxSetCurrent, b.ctx)); err != nil {
		return err
	}
	if err := b.check("cuStreamCreate", call(a.cuStreamCreate, uintptr(unsafe.Pointer(&b.stream)), 0)); err != nil {
		return err
	}
	b.nvrtcVersion = a.nvrtcVersionString()
	start := time.Now()
	cubin, cached, err := a.compileCached(b.opts, b.cc, b.name)
	if err != nil {
		return err
	}
	if cached {
		b.compileNote = "kernels from cache"
	} else {
		b.compileNote = fmt.Sprintf("kernels compiled in %.1fs", time.Since(start).Seconds())
	}
	if err := b.check("cuModuleLoadData", call(a.cuModuleLoadData, uintptr(unsafe.Pointer(&b.mod)), uintptr(unsafe.Pointer(&cubin[0])))); err != nil {
		return err
	}
	runtime.KeepAlive(cubin)
	for _, n := range kernelNames() {
		var f uintptr
		cn := cstr(n)
		if err := b.check("cuModuleGetFunction "+n, call(a.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), b.mod, uintptr(unsafe.Pointer(cn)))); err != nil {
			return err
		}
		b.fns[n] = f
	}
	if a.cublasCreate != 0 && !b.opts.NoCuBLAS {
		var h uintptr
		if call(a.cublasCreate, uintptr(unsafe.Pointer(&h))) == 0 {
			b.cublas = h
			call(a.cublasSetStream, h, b.stream)
			// A workspace of our own keeps cuBLAS from allocating while a
			// graph is being captured.
			if ws, err := b.devAlloc(32 << 20); err == nil {
				b.cublasWS = ws.ptr
				call(a.cublasSetWorkspace, h, uintptr(ws.ptr), uintptr(ws.size))
			}
		}
	}
	b.pdl = a.cuLaunchKernelEx != 0 && b.cc >= 90 && !b.opts.NoPDL
	b.prefetch = b.cc >= 90 && b.opts.Prefetch
	b.lattr.id = cuLaunchAttributeProgrammaticStreamSerialization
	b.lattr.val[0] = 1
	b.lcfg.stream = b.stream
	b.lcfg.attrs = uintptr(unsafe.Pointer(&b.lattr))
	b.lcfg.numAttrs = 1
	st, err := b.devAlloc(statsCap * 4)
	if err != nil {
		return err
	}
	b.stats = st
	return nil
}

type devInfo struct {
	name    string
	cc, sms int
	mem     int64
	l2      int64
}

func deviceInfo(a *api, dev int32) devInfo {
	var d devInfo
	buf := make([]byte, 256)
	call(a.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), 256, uintptr(dev))
	d.name = strings.TrimRight(string(buf[:clen(buf)]), " ")
	attr := func(id int) int {
		var v int32
		call(a.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(id), uintptr(dev))
		return int(v)
	}
	d.cc = attr(75)*10 + attr(76) // compute capability major, minor
	d.sms = attr(16)              // multiprocessors
	d.l2 = int64(attr(38))        // L2 cache size
	var mem uint64
	call(a.cuDeviceTotalMem, uintptr(unsafe.Pointer(&mem)), uintptr(dev))
	d.mem = int64(mem)
	return d
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// Close frees everything the backend holds.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	err := b.th.do(b.release)
	b.th.close()
	return err
}

func (b *Backend) release() error {
	a := b.api
	if b.ctx == 0 {
		return nil
	}
	call(a.cuCtxSetCurrent, b.ctx)
	call(a.cuCtxSynchronize)
	for i := range b.slots {
		if s := &b.slots[i]; s.event != 0 {
			call(a.cuEventDestroy, s.event)
			s.event = 0
		}
		b.hostFree(&b.slots[i].host)
	}
	b.hostFree(&b.metaBufs[0])
	b.hostFree(&b.metaBufs[1])
	b.inflight = 0
	for _, g := range b.graphs {
		b.dropGraph(g)
	}
	b.graphs = map[uint64]*graph{}
	for _, e := range b.events {
		call(a.cuEventDestroy, e)
	}
	b.events = nil
	if b.cublas != 0 {
		call(a.cublasDestroy, b.cublas)
		b.cublas = 0
	}
	if b.mod != 0 {
		call(a.cuModuleUnload, b.mod)
	}
	if b.stream != 0 {
		call(a.cuStreamDestroy, b.stream)
	}
	// Releasing the primary context frees every allocation made in it.
	call(a.cuDevicePrimaryCtxRelease, uintptr(b.dev))
	b.ctx = 0
	return nil
}

func (b *Backend) Info() bridge.DeviceInfo {
	var free, total uint64
	b.th.do(func() error { //nolint:errcheck // zero on failure: unknown
		return b.check("cuMemGetInfo", call(b.api.cuMemGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	})
	cublas := "no cuBLAS (own GEMM kernels)"
	if b.cublas != 0 {
		cublas = "cuBLAS " + b.api.cublasPath
	}
	graphs := "graphs on"
	if b.opts.NoGraphs {
		graphs = "graphs off"
	}
	if b.pdl {
		graphs += ", PDL on"
	}
	return bridge.DeviceInfo{
		Backend: "cuda", Name: b.name, Cores: b.sms, MemoryBytes: b.totalMem, AvailableBytes: int64(free), CacheBytes: b.l2,
		Notes: fmt.Sprintf("sm_%d, %d SMs, driver %s, NVRTC %s, %s, %s, %s", b.cc, b.sms, b.driverVersion,
			b.nvrtcVersion, cublas, graphs, b.compileNote),
	}
}

// ActDType is f32: activations and the KV cache are f32, weights stay in
// the dtype they come in, and every kernel accumulates in f32.
func (b *Backend) ActDType() bridge.DType { return bridge.F32 }

// ---- memory ----

// devAlloc is device memory: a block of its own, or a piece of an arena
// chunk (weights, packed to avoid the driver's 2 MiB rounding).
type devAlloc struct {
	ptr   uint64
	size  int64
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

// devAlloc allocates size bytes (thread only). On out-of-memory it drops the
// weight cache, collects garbage so unreachable tensors free their memory,
// and tries again.
func (b *Backend) devAlloc(size int64) (*devAlloc, error) {
	if size <= 0 {
		size = arenaAlign
	}
	var p uint64
	var r int32
	for try := 0; ; try++ {
		r = call(b.api.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(size))
		if r != cudaErrorOutOfMemory || try >= allocRetries {
			break
		}
		b.memMu.Lock()
		b.weights = map[weightKey]*tensor{}
		b.memMu.Unlock()
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		b.processFrees()
	}
	if r != 0 {
		return nil, fmt.Errorf("cuda: allocating %s: %w", human(size), b.check("cuMemAlloc", r))
	}
	return &devAlloc{ptr: p, size: size}, nil
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
		b.freeNow(d)
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
	wkey  *weightKey // set for cached weights
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

// weightKey identifies host bytes already uploaded: engines made again for
// each repetition of a benchmark hand the same cached bytes over, and get
// the same device tensor instead of another copy.
type weightKey struct {
	addr uintptr
	size int
	dt   bridge.DType
	fp   uint64 // sampled content, in case the host memory was reused
}

func fingerprint(data []byte) uint64 {
	h := fnv.New64a()
	const samples = 64
	step := max(len(data)/samples, 1)
	for i := 0; i < len(data); i += step {
		j := min(i+8, len(data))
		h.Write(data[i:j])
	}
	h.Write(data[max(len(data)-8, 0):])
	return h.Sum64()
}

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
	key := weightKey{addr: uintptr(unsafe.Pointer(&data[0])), size: len(data), dt: dt, fp: fingerprint(data)}
	b.memMu.Lock()
	t := b.weights[key]
	b.memMu.Unlock()
	if t != nil && sameShape(t.shape, shape) && t.mem != nil && !t.mem.freed.Load() {
		return t, nil
	}
	var d *devAlloc
	err = b.th.do(func() error {
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
	t = b.newTensor(dt, shape, n, d)
	t.wkey = &key
	b.memMu.Lock()
	b.weights[key] = t
	b.memMu.Unlock()
	return t, nil
}

func sameShape(a, c []int) bool {
	if len(a) != len(c) {
		return false
	}
	for i := range a {
		if a[i] != c[i] {
			return false
		}
	}
	return true
}

// Free releases t's memory once no queued work can use it.
func (b *Backend) Free(x bridge.Tensor) {
	t, ok := x.(*tensor)
	if !ok || t == nil || t.mem == nil {
		return
	}
	if t.wkey != nil {
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

// drain runs what a step recorded so far (a read in the middle of a step)
// and waits for the stream (thread only).
func (b *Backend) drain() error {
	if b.inStep && len(b.ents) > b.flushed && b.stepErr == nil {
		if err := b.segErr; err != nil {
			return err
		}
		if !b.started {
			if err := b.stepPrologue(); err != nil {
				return err
			}
			b.started = true
		}
		if err := b.runDirect(b.ents[b.flushed:], b.args, nil); err != nil {
			return err
		}
		b.ents, b.args, b.flushed = b.ents[:0], b.args[:0], 0
	}
	return b.check("cuStreamSynchronize", call(b.api.cuStreamSynchronize, b.stream))
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
