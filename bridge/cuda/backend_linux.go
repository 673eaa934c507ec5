//go:build linux

package cuda

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/pool"
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
//
// Its state is kept by job, in the structs embedded below.
type Backend struct {
	QuantRules
	api  *api
	th   *thread
	opts Options

	device
	memory
	recorder
	stepIO
	graphCache
	launcher
	timeline

	// tuned launch parameters (tuning_linux.go), and the default for the
	// L2 weight prefetch of the GEMVs and the MoE down projection
	tuning   launchTuning
	prefetch bool
	closed   bool
	// persistent GEMV chains (persist_linux.go): the ring's slots (0: no
	// chains) and the grid barrier's word
	qcSlots int
	qcBar   *devAlloc
}

// device is the GPU as the driver API hands it out: the context, stream,
// module and kernel table, cuBLAS, and the device's facts (init sets them).
type device struct {
	dev            int32
	ctx, stream    uintptr
	mods           []uintptr // one module per kernel unit (kernels/cuda.Units)
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
}

// memory is device allocation (alloc_linux.go): the weight arena, the
// queue of frees, the freed blocks kept for reuse, cached weights and
// tables, and the scratch buffers.
type memory struct {
	memMu   sync.Mutex
	freeQ   []*devAlloc
	pool    pool.Blocks[uint64]
	arena   *chunk
	weights map[bridge.HostKey]*tensor
	tables  map[string]uint64 // MoE expert pointer tables by content
	ropes   map[string]uint64 // RoPE frequency tables by kernels.Rotary.Key
	// moeByW finds a MoE block's table without walking its experts: a
	// decode step asks for every layer's, and the walk cost microseconds.
	moeByW  map[*bridge.MoEWeights]moeTableRef
	qmoeByW map[*bridge.MoEWeights]*qmoeTable // packed experts' pointer tables (quant_linux.go)
	scratch map[string]pool.Shelf[*devAlloc]
	// drop gives back the file pages of weights copied to the device
	// (bridge.CopyDropper); nil drops nothing.
	drop func([]byte)
}

// recorder is the step being recorded (record_linux.go): entries, arguments,
// profile marks, streamed segments, the first error, and fusion state.
type recorder struct {
	inStep    bool
	profile   bool
	streaming bool
	ents      []entry
	args      []uint64
	marks     []bridge.OpTiming
	// Streaming: entries before flushed were handed to the CUDA thread
	// while the step was still being recorded (started: with the step's
	// metadata upload); pieces says when the next hand-off is due. segErr
	// is a handed-off segment's failure (thread only).
	flushed  int
	pieces   bridge.StreamPieces
	started  bool
	segErr   error
	moeCalls int
	// fusions is the fusion table (fusion_linux.go); standIn the op a fusion
	// leaves for the runner to run next.
	fusions []bridge.Pattern
	always  []bridge.Pattern // fusions' Always entries (Options.NoFuse)
	standIn bridge.RMSNormOp
	// standInLN is standIn for an AddLayerNorm's norm (GPT-2).
	standInLN bridge.LayerNormOp
	stepErr   error
}

// stepIO is what goes in and out of a step (stepio_linux.go): its metadata
// and where the device reads it, the stats buffer, and the submitted steps.
type stepIO struct {
	meta     *bridge.StepMeta
	mo       metaOffsets
	metaHost []int32
	metaDev  *devAlloc // where the step's kernels read metaHost
	// metaDevs and metaBufs are shelves, so a step of one shape keeps its
	// metadata's addresses, and its CUDA graph, whatever larger steps ran
	// between.
	metaDevs pool.Shelf[*devAlloc]
	stats    *devAlloc
	tokSrc   uint64 // where the device reads the step's token ids (0: the host's)
	// stepKern: the step opens with step_begin and closes with step_end
	// (step.cu) in its graph, instead of copies and a memset around it
	stepKern bool
	// metaBufs are pinned, so the upload runs when the step does; the step
	// being recorded uses metaBufs[metaSlot], a step in flight the other.
	metaBufs [2]pool.Shelf[*hostBuf]
	metaSlot int
	// submitted steps not yet waited for, and what each reads back
	slots    [2]stepSlot
	inflight int
	chained  int
	// starts are the timed events a step's DeviceTime counts from, one
	// more than the slots: the step being recorded takes one no busy slot
	// holds (starts[startCur]).
	starts   [3]uintptr
	startCur int
}

// graphCache is the CUDA graphs of lists seen twice (graph_linux.go), how
// often each list was seen, the profile events and the last step's counts.
type graphCache struct {
	graphs   map[uint64]*graph
	seen     map[uint64]int
	keyBuf   []uint64
	useCount uint64
	misses   int // lists run without a graph held for them
	// stepMisses is misses when the step being recorded began.
	stepMisses int
	events     []uintptr
	// kernels the last step launched
	lastLaunches, lastSegments int
	params                     [256]uintptr
}

// launcher is programmatic dependent launch (sm_90+): each kernel may be
// scheduled while the one before it finishes (the kernels wait for it first).
type launcher struct {
	pdl   bool
	lcfg  launchConfig
	lattr launchAttr
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
	b := &Backend{api: a, opts: o, th: newThread(),
		device: device{fns: map[string]uintptr{}},
		memory: memory{weights: map[bridge.HostKey]*tensor{}, tables: map[string]uint64{}, ropes: map[string]uint64{}, moeByW: map[*bridge.MoEWeights]moeTableRef{},
			scratch: map[string]pool.Shelf[*devAlloc]{}},
		graphCache: graphCache{graphs: map[uint64]*graph{}, seen: map[uint64]int{}}}
	if err := b.th.do(b.init); err != nil {
		b.th.do(b.release) //nolint:errcheck // best effort
		b.th.close()
		return nil, err
	}
	return b, nil
}

func (b *Backend) check(what string, r int32) error { return b.api.cuErr(what, r) }

// function finds kernel n in the module of the unit that generates it.
func (b *Backend) function(n string) (uintptr, error) {
	cn := cstr(n)
	for _, m := range b.mods {
		var f uintptr
		r := call(b.api.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m, uintptr(unsafe.Pointer(cn)))
		if r == 0 {
			return f, nil
		}
		if r != cudaErrorNotFound {
			return 0, b.check("cuModuleGetFunction "+n, r)
		}
	}
	return 0, fmt.Errorf("cuModuleGetFunction %s: no kernel of that name in the %d compiled programs (kernels/cuda)", n, len(b.mods))
}

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
	b.name, b.cc, b.sms, b.totalMem, b.l2, b.maxSharedBlock = d.name, d.cc, d.sms, d.mem, d.l2, d.smemOptin
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
	cubins, compiled, err := a.compileCached(b.opts, b.cc, b.name)
	if err != nil {
		return err
	}
	switch compiled {
	case 0:
		b.compileNote = "kernels from cache"
	case len(cubins):
		b.compileNote = fmt.Sprintf("kernels compiled in %.1fs", time.Since(start).Seconds())
	default:
		b.compileNote = fmt.Sprintf("kernels compiled in %.1fs (%d of %d programs; the rest from cache)",
			time.Since(start).Seconds(), compiled, len(cubins))
	}
	for _, cubin := range cubins {
		var m uintptr
		if err := b.check("cuModuleLoadData", call(a.cuModuleLoadData, uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&cubin[0])))); err != nil {
			return err
		}
		runtime.KeepAlive(cubin)
		b.mods = append(b.mods, m)
	}
	for _, n := range kernelNames() {
		f, err := b.function(n)
		if err != nil {
			return err
		}
		b.fns[n] = f
		if sm := smemKernels[n]; sm > 0 {
			var static int32 // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
			call(a.cuFuncGetAttribute, uintptr(unsafe.Pointer(&static)), 1, f)
			if b.maxSharedBlock > 0 && sm+int(static) > b.maxSharedBlock {
				// More than a block may ask for on this device: never
				// launched (decodeMMAWhole keeps decode off it).
				delete(b.fns, n)
				continue
			}
			// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
			if err := b.check("cuFuncSetAttribute "+n, call(a.cuFuncSetAttribute, f, 8, uintptr(sm))); err != nil {
				return err
			}
		}
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
	return b.qcSetup()
}

type devInfo struct {
	name      string
	cc, sms   int
	mem       int64
	l2        int64
	smemOptin int
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
	d.smemOptin = attr(97)        // shared memory a block may ask for
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
	for i, e := range b.starts {
		if e != 0 {
			call(a.cuEventDestroy, e)
			b.starts[i] = 0
		}
	}
	for i, s := range b.metaBufs {
		s.Each(b.hostFree)
		b.metaBufs[i] = nil
	}
	b.metaDev, b.metaDevs = nil, nil // the context's release frees them
	b.inflight = 0
	b.releasePool() // another backend may hold the primary context on
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
	for _, m := range b.mods {
		call(a.cuModuleUnload, m)
	}
	b.mods = nil
	if b.stream != 0 {
		call(a.cuStreamDestroy, b.stream)
	}
	// Releasing the primary context frees every allocation made in it.
	call(a.cuDevicePrimaryCtxRelease, uintptr(b.dev))
	b.ctx = 0
	return nil
}

func (b *Backend) Info() bridge.DeviceInfo {
	var free uint64
	b.th.do(func() error { //nolint:errcheck // zero on failure: unknown
		var err error
		free, err = b.freeMemory()
		return err
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
	if b.opts.Timeline {
		graphs += ", in-place timeline"
	}
	return bridge.DeviceInfo{
		Backend: "cuda", Name: b.name, Cores: b.sms, MemoryBytes: b.totalMem, AvailableBytes: int64(free), CacheBytes: b.l2,
		Notes: fmt.Sprintf("sm_%d, %d SMs, driver %s, NVRTC %s, %s, %s", b.cc, b.sms, b.driverVersion,
			b.nvrtcVersion, cublas, graphs),
		Startup: b.compileNote,
	}
}

// ActDType is f32: activations are f32, weights stay in the dtype they
// come in, and every kernel accumulates in f32. The KV cache is kept in
// any of KVDTypes (the model's dtype by default: runner/engine.KVDType).
func (b *Backend) ActDType() bridge.DType { return bridge.F32 }

// KVDTypes are the dtypes the attention kernels keep a KV cache in: they
// read and write it as stored and accumulate in f32 (docs/cuda.md).
var KVDTypes = []bridge.DType{bridge.F32, bridge.F16, bridge.BF16}

// KVDTypes implements bridge.KVCacheDTypes.
func (b *Backend) KVDTypes() []bridge.DType { return KVDTypes }
