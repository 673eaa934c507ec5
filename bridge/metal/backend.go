// Package metal is the Metal backend: bridge.Backend on the thin device API
// of bridge/mtl, with the kernels of kernels/metal. The same code drives a
// real Apple GPU (the darwin mtl implementation) and the CPU emulator
// (bridge/mtl/emu), so everything above mtl — buffers, pipelines, argument
// structs, launch shapes, barriers, step encoding — is tested on Linux.
//
// A step is encode-only: BeginStep uploads the metadata into one shared
// buffer, every op encodes its dispatches into the step's one command
// buffer without waiting, and EndStep commits it and waits once. Buffers
// use shared storage (unified memory), so uploads and reads are memcpys.
// In profile mode each Mark starts a new command buffer, whose GPU start
// and end times time that op group (bridge/mtl's interface has no counter
// sampling; the darwin device's TimedCommandBuffer samples stage boundaries,
// which the backend does not use yet): TimingMode says so.
package metal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/bridge/pool"
	kmetal "github.com/mtlbench/mtlbench/kernels/metal"
)

// Options configure the backend.
type Options struct {
	// LanguageVersion is the MSL version the kernels are compiled for;
	// empty: the newest of LanguageVersions the device accepts.
	LanguageVersion string
	// NoFastMath compiles the kernels with fast math off
	// (mtl.CompileOptions.NoFastMath): an error that goes away with it is
	// fast math's, not the kernel's.
	NoFastMath bool
	// Tuning sets launch shapes and variants (zero fields: defaults).
	Tuning Tuning
	// SerialDispatch encodes each step in serial compute passes instead of
	// concurrent ones with memory barriers between dependent dispatches:
	// what concurrency buys, measured.
	SerialDispatch bool
	// NoStream commits a step only once it is wholly encoded, instead of
	// committing its first dispatches while the rest are encoded where no
	// step of its own runs ahead of it (bridge.StreamPieces).
	NoStream bool
}

// TimingMode describes how profile mode times ops.
const TimingMode = "command buffer per op group (GPU start/end times)"

// Backend implements bridge.Backend on an mtl.Device.
type Backend struct {
	QuantRules
	dev    mtl.Device
	opts   Options
	lang   string // the MSL version the kernels were compiled for
	tuning Tuning
	lib    mtl.Library
	queue  mtl.CommandQueue
	pipes  map[pipeKey]mtl.Pipeline

	mu        sync.Mutex // guards allocated and pool (Alloc may be called from loaders)
	allocated int64
	// pool keeps released buffers for the next allocation of their size:
	// the next repetition's engine gets the last one's KV cache and
	// workspaces, cleared, instead of new ones the system must map and
	// zero-fill again (docs/architecture.md, "A repetition's engine").
	pool pool.Blocks[*dbuf]

	// weights
	// byHost are the tensors made of host bytes (Weight, WeightMapped, packed
	// bytes), qbyHost the packed matrices, by their bytes' keys: the engine
	// of each repetition of a benchmark gets the first one's tensors, and
	// with them the experts packed for it, instead of copies it would keep
	// until the backend closes.
	byHost  map[bridge.HostKey]*tensor
	qbyHost map[qkey]*qtensor
	packed  map[*tensor]*packedExperts // by a layer's first gate tensor
	qpacked map[*qtensor]*qexperts     // packed-weight experts, likewise (quant.go)
	invFreq map[string]*tensor
	owned   []*dbuf // buffers the backend owns beyond tensors (packed experts)
	// drop gives back the file pages of host bytes copied into a buffer
	// (bridge.CopyDropper); nil drops nothing.
	drop func([]byte)

	// launch holds the tuned launch configs' picks (launch.go).
	launch launchState

	// fusions is the fusion table (fusion.go); standIn and standInLN are
	// the op a fusion leaves for the runner to run next.
	fusions   []bridge.Pattern
	standIn   bridge.RMSNormOp
	standInLN bridge.LayerNormOp

	// the step, and the steps committed and not yet waited for (async.go)
	step       stepState
	inFlight   []*pendingStep
	zeroIDs    []int32
	argScratch [64]uint64 // argBytes' staging, 8-byte aligned
	closed     bool
}

// tensor is a range of a shared-storage buffer.
type tensor struct {
	dt    bridge.DType
	shape []int
	n     int
	buf   *dbuf
	off   int  // bytes
	owned bool // Free releases buf
	// holders: a tensor kept by its host bytes (kept) is handed out once a
	// build that asks for them; Free releases buf with the last holder.
	holders bridge.Holders
}

func (t *tensor) DType() bridge.DType { return t.dt }
func (t *tensor) Shape() []int        { return t.shape }
func (t *tensor) Len() int            { return t.n }
func (t *tensor) bytes() int          { return t.n * t.dt.Size() }

// LanguageVersions are the MSL versions the kernels compile for, newest
// first: without an explicit version the backend takes the newest the OS's
// compiler accepts (macOS 13 stops at 3.0, 14 at 3.1).
var LanguageVersions = []string{"3.2", "3.1", "3.0"}

// compileKernels builds the kernel library for opts' version, or for the
// newest of LanguageVersions the device accepts, and says which.
func compileKernels(dev mtl.Device, opts Options) (mtl.Library, string, error) {
	versions := LanguageVersions
	if opts.LanguageVersion != "" {
		versions = []string{opts.LanguageVersion}
	}
	// A version before the oldest the kernels are written for lacks what
	// they use: a Mac's compiler refuses them there, but the emulator,
	// which gates only bfloat by version, would build them and run under a
	// version no Mac could (docs/msl-subset.md). Refused alike on both.
	oldest := LanguageVersions[len(LanguageVersions)-1]
	if v := opts.LanguageVersion; v != "" && mslBefore(v, oldest) {
		return nil, "", fmt.Errorf("metal: MSL %s: the kernels need MSL %s or newer", v, oldest)
	}
	var msgs, tried []string // distinct first lines, and the versions of each
	for _, v := range versions {
		lib, err := dev.NewLibrary(kmetal.Files(), mtl.CompileOptions{LanguageVersion: v, NoFastMath: opts.NoFastMath})
		if err == nil {
			return lib, v, nil
		}
		first, _, _ := strings.Cut(err.Error(), "\n")
		if i := slices.Index(msgs, first); i >= 0 {
			tried[i] += ", " + v
			continue
		}
		msgs, tried = append(msgs, first), append(tried, "MSL "+v)
	}
	for i := range msgs {
		msgs[i] = tried[i] + ": " + msgs[i]
	}
	return nil, "", fmt.Errorf("metal: compiling the kernels: %s", strings.Join(msgs, "; "))
}

// mslBefore reports whether MSL version v ("2.4") comes before w ("3.0");
// a version that is no major.minor pair is left to the device to refuse.
func mslBefore(v, w string) bool {
	vn, ok1 := mtl.LanguageVersionNumber(v)
	wn, ok2 := mtl.LanguageVersionNumber(w)
	return ok1 && ok2 && vn < wn
}

// New compiles the kernels on dev (or loads them from the emulator's cache)
// and makes a command queue.
func New(dev mtl.Device, opts Options) (*Backend, error) {
	if err := opts.Tuning.Check(); err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	lib, lang, err := compileKernels(dev, opts)
	if err != nil {
		return nil, err
	}
	q, err := dev.NewCommandQueue()
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	b := &Backend{dev: dev, opts: opts, lang: lang, tuning: opts.Tuning.withDefaults(), lib: lib, queue: q,
		pipes: map[pipeKey]mtl.Pipeline{}, packed: map[*tensor]*packedExperts{}, invFreq: map[string]*tensor{}}
	b.step.init()
	return b, nil
}

// Device is the device the backend runs on.
func (b *Backend) Device() mtl.Device { return b.dev }

// Tuning is the tuning in use, defaults filled in.
func (b *Backend) Tuning() Tuning { return b.tuning }

// SetTuning changes launch shapes and variants for the following steps.
func (b *Backend) SetTuning(t Tuning) error {
	if err := t.Check(); err != nil {
		return fmt.Errorf("metal: %w", err)
	}
	if b.step.active {
		return errors.New("metal: SetTuning inside a step")
	}
	b.tuning = t.withDefaults()
	b.launch.cache = nil
	return nil
}

// KernelSourceHash is the package function, as a method for the tuner.
func (b *Backend) KernelSourceHash(kernel string) string { return KernelSourceHash(kernel) }

func (b *Backend) Info() bridge.DeviceInfo {
	name := "metal"
	if b.dev.Emulated() {
		name = "metal-emu"
	}
	ws := b.dev.RecommendedMaxWorkingSetSize()
	b.mu.Lock()
	avail := ws - b.allocated
	b.mu.Unlock()
	notes := "MSL " + b.lang
	if b.opts.NoFastMath {
		notes += ", fast math off"
	}
	notes += "; profile timing: " + TimingMode
	cores := mtl.GPUCores(b.dev)
	if gpu := gpuNote(b.dev.Name(), cores); gpu != "" {
		notes += "; " + gpu
	}
	return bridge.DeviceInfo{Backend: name, Name: b.dev.Name(), Cores: cores, MemoryBytes: ws, AvailableBytes: max(avail, 1),
		Emulated: b.dev.Emulated(), Notes: notes}
}

// gpuNote is the GPU's core count and the bin of applegpu's table its name
// and cores pick, with the bin's bandwidth, for the notes a run records:
// "GPU cores 32 (Apple M4 Max 32-core, 410 GB/s)"; the count alone for a
// chip the table lacks (the emulator given cores), "" for neither.
func gpuNote(name string, cores int) string {
	g, note, ok := applegpu.ForDevice(name, cores)
	if !ok && cores <= 0 {
		return ""
	}
	s := "GPU cores unknown"
	if cores > 0 {
		s = "GPU cores " + strconv.Itoa(cores)
	}
	if ok {
		s += fmt.Sprintf(" (%s, %s GB/s", g.Label(), strconv.FormatFloat(g.BandwidthGBs, 'f', -1, 64))
		if note != "" {
			s += "; " + note
		}
		s += ")"
	}
	return s
}

// ActDType: activations are f32, as on the CPU backend.
func (b *Backend) ActDType() bridge.DType { return bridge.F32 }

// KVDTypes are the dtypes the attention kernels read a KV cache in: the
// engine keeps a bf16 or f16 model's cache in its own dtype, which halves
// the bytes decode attention reads (docs/metal-kernels.md).
var KVDTypes = []bridge.DType{bridge.F32, bridge.F16, bridge.BF16}

// KVDTypes implements bridge.KVCacheDTypes.
func (b *Backend) KVDTypes() []bridge.DType { return KVDTypes }

func elems(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("metal: negative dimension in shape %v", shape)
		}
		n *= d
	}
	return n, nil
}

// dbuf is a device buffer the backend allocated, or with mapped one that
// aliases mmap'd weights (no-copy: not counted against the working set);
// dispatches compare them by pointer when they look for hazards.
type dbuf struct {
	mtl.Buffer
	mapped bool
	// released: a mapped buffer given back (release), which a tensor kept
	// by its host bytes may still point at; pooled buffers are reused and
	// their tensors let go of them instead (Free).
	released bool
	shared   int    // tensors pointing into it, a region of experts (share)
	size     int64  // the bytes asked for: the pool's key
	order    uint64 // when the device gave it (pool.Blocks)
}

// newBuffer returns a zeroed shared buffer of at least 16 bytes (Metal
// refuses empty ones), counted against the working set: a released one of
// the same size if the pool holds one. The pool gives its buffers back to
// the device before a new buffer would take the working set past its
// recommended size.
func (b *Backend) newBuffer(n int) (*dbuf, error) {
	size := int64(max(n, 16))
	b.mu.Lock()
	if buf, _, ok := b.pool.Take(size); ok {
		b.allocated += int64(buf.Length())
		b.mu.Unlock()
		clear(buf.Contents())
		return buf, nil
	}
	var drained []*dbuf
	if b.pool.Bytes() > 0 && b.allocated+b.pool.Bytes()+size > int64(b.dev.RecommendedMaxWorkingSetSize()) {
		drained = b.pool.Drain()
	}
	b.mu.Unlock()
	for _, d := range drained {
		d.Release()
	}
	buf, err := b.dev.NewBuffer(int(size))
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	b.mu.Lock()
	b.allocated += int64(buf.Length())
	d := &dbuf{Buffer: buf, size: size, order: b.pool.Stamp()}
	b.mu.Unlock()
	return d, nil
}

// release hands a buffer no command buffer still uses to the pool (a
// mapped one back to the system).
func (b *Backend) release(buf *dbuf) {
	if buf.mapped {
		buf.Release()
		buf.released = true
		return
	}
	b.mu.Lock()
	b.allocated -= int64(buf.Length())
	b.pool.Put(buf, buf.size, buf.order)
	b.mu.Unlock()
}

// own makes buf the backend's, released at Close: once, whichever layouts
// (experts, gathered regions) found it.
func (b *Backend) own(buf *dbuf) {
	if !slices.Contains(b.owned, buf) {
		b.owned = append(b.owned, buf)
	}
}

// Trim gives the pool's buffers back to the device (bridge.Trimmer), once
// the steps in flight have run and retired theirs to it.
func (b *Backend) Trim() {
	b.waitInFlight()
	b.releasePool()
}

// releasePool gives the pool's buffers back to the device.
func (b *Backend) releasePool() {
	b.mu.Lock()
	drained := b.pool.Drain()
	b.mu.Unlock()
	for _, d := range drained {
		d.Release()
	}
}

func (b *Backend) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if dt > bridge.I32 {
		return nil, fmt.Errorf("metal: unsupported dtype %v", dt)
	}
	buf, err := b.newBuffer(n * dt.Size())
	if err != nil {
		return nil, err
	}
	return &tensor{dt: dt, shape: append([]int(nil), shape...), n: n, buf: buf, owned: true}, nil
}

// WeightMapped aliases weights that live in mmap'd memory: the pages that
// hold the tensor become a no-copy buffer (newBufferWithBytesNoCopy) and the
// tensor sits at its offset inside it. Pages shared with a neighbouring
// tensor are wrapped by both buffers, which only read them. A device without
// no-copy buffers, or one that refuses the range, gets a copy.
func (b *Backend) WeightMapped(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	nc, ok := b.dev.(mtl.NoCopyDevice)
	if !ok || len(data) == 0 {
		return b.Weight(dt, shape, data)
	}
	key := bridge.KeyOf(dt, data)
	if t := b.kept(key, shape); t != nil {
		return t, nil
	}
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if len(data) != n*dt.Size() {
		return nil, fmt.Errorf("metal: %d bytes for a %v tensor of shape %v (want %d)", len(data), dt, shape, n*dt.Size())
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if p%weightAlign != 0 {
		// The kernels read weights 16 bytes at a time (kernels/metal/gemm.h):
		// a tensor the checkpoint left unaligned is copied into a buffer of
		// its own, which is.
		return b.Weight(dt, shape, data)
	}
	base := p &^ (page - 1)
	end := (p + uintptr(len(data)) + page - 1) &^ (page - 1)
	start := unsafe.Add(unsafe.Pointer(unsafe.SliceData(data)), -int(p-base))
	region := unsafe.Slice((*byte)(start), end-base)
	buf, err := nc.NewBufferNoCopy(region)
	if err != nil {
		return b.Weight(dt, shape, data)
	}
	t := &tensor{dt: dt, shape: append([]int(nil), shape...), n: n, buf: &dbuf{Buffer: buf, mapped: true}, off: int(p - base), owned: true}
	b.keep(key, t)
	return t, nil
}

// kept is the live tensor made of the host bytes key names, as shape, handed
// out once more (tensor.holders).
func (b *Backend) kept(key bridge.HostKey, shape []int) *tensor {
	b.mu.Lock()
	t := b.byHost[key]
	b.mu.Unlock()
	// A region of experts aliased in place is released with its last
	// expert, while its own tensor stays here: the same bytes mapped again
	// at the same place make a new one.
	if t == nil || t.buf == nil || t.buf.released || !slices.Equal(t.shape, shape) {
		return nil
	}
	t.holders.Add()
	return t
}

// keep remembers the tensor made of the host bytes key names.
func (b *Backend) keep(key bridge.HostKey, t *tensor) {
	b.mu.Lock()
	if b.byHost == nil {
		b.byHost = map[bridge.HostKey]*tensor{}
	}
	b.byHost[key] = t
	b.mu.Unlock()
}

// weightAlign is the alignment a mapped weight tensor needs to be used in
// place: the widest load the kernels make of it.
const weightAlign = 16

// Weight copies data into a new shared buffer; WeightMapped aliases mmap'd
// weights instead where the device allows.
func (b *Backend) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	n, err := elems(shape)
	if err != nil {
		return nil, err
	}
	if len(data) != n*dt.Size() {
		return nil, fmt.Errorf("metal: %d bytes for a %v tensor of shape %v (want %d)", len(data), dt, shape, n*dt.Size())
	}
	key := bridge.KeyOf(dt, data)
	if t := b.kept(key, shape); t != nil {
		return t, nil
	}
	t, err := b.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	copy(t.(*tensor).buf.Contents(), data)
	b.dropCopied(data)
	if n > 0 {
		b.keep(key, t.(*tensor))
	}
	return t, nil
}

// DropCopied takes the loader's drop (bridge.CopyDropper): a weight copied
// into a buffer, because it was not aligned for the kernels or not stacked
// as they read a layer's experts, no longer keeps its file's pages resident
// beside the copy.
func (b *Backend) DropCopied(drop func([]byte)) { b.drop = drop }

// dropCopied hands host bytes the backend has copied, and will not read
// again, to the loader's drop.
func (b *Backend) dropCopied(data []byte) {
	if b.drop != nil {
		b.drop(data)
	}
}

// contents is the tensor's bytes in its buffer.
func (t *tensor) contents() []byte {
	c := t.buf.Contents()
	return c[t.off : t.off+t.bytes()]
}

func (b *Backend) Read(t bridge.Tensor, dst []float32) error {
	x, ok := t.(*tensor)
	if !ok {
		return fmt.Errorf("metal: read: %T is not a metal tensor", t)
	}
	if len(dst) < x.n {
		return fmt.Errorf("metal: read: destination holds %d of %d elements", len(dst), x.n)
	}
	if err := b.flush(); err != nil {
		return err
	}
	b.waitInFlight()
	c := x.contents()
	switch x.dt {
	case bridge.F32:
		copy(dst, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(c))), x.n))
	case bridge.F16:
		half.F16ToF32(dst[:x.n], unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(c))), x.n))
	case bridge.BF16:
		half.BF16ToF32(dst[:x.n], unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(c))), x.n))
	case bridge.I32:
		for i := range x.n {
			dst[i] = float32(int32(binary.LittleEndian.Uint32(c[4*i:])))
		}
	}
	return nil
}

func (b *Backend) ReadI32(t bridge.Tensor, dst []int32) error {
	x, ok := t.(*tensor)
	if !ok || x.dt != bridge.I32 {
		return fmt.Errorf("metal: read: tensor is not i32")
	}
	if err := b.flush(); err != nil {
		return err
	}
	b.waitInFlight()
	c := x.contents()
	for i := range min(len(dst), x.n) {
		dst[i] = int32(binary.LittleEndian.Uint32(c[4*i:]))
	}
	return nil
}

// Free releases a tensor's buffer, with its last holder (tensor.holders);
// a packed matrix's parts; a tensor that points into a region it shares (a
// layer's experts), its share, the region going with the last (unshare).
func (b *Backend) Free(t bridge.Tensor) {
	if q, ok := t.(*qtensor); ok {
		for _, x := range []*tensor{q.data, q.scales, q.biases} {
			if x != nil {
				b.Free(x)
			}
		}
		return
	}
	x, ok := t.(*tensor)
	if !ok || x.buf == nil {
		return
	}
	if !x.holders.Drop() {
		return
	}
	if !x.owned {
		if x.buf.shared > 0 {
			b.unshare(x.buf)
			x.buf = nil
		}
		return
	}
	b.retire(x.buf)
	x.buf, x.owned = nil, false
}

// retire releases buf once no dispatch may still use it.
func (b *Backend) retire(buf *dbuf) {
	switch n := len(b.inFlight); {
	case b.step.active:
		// An encoded dispatch may still use it: release after the step.
		b.step.retired = append(b.step.retired, buf)
	case n > 0:
		// A committed step may: release it once the newest has run, before
		// the pool hands it out again.
		b.inFlight[n-1].retired = append(b.inFlight[n-1].retired, buf)
	default:
		b.release(buf)
	}
}

// share counts n more tensors pointing into region buf, which the backend
// owns (own) until the last of them is freed.
func (b *Backend) share(buf *dbuf, n int) {
	b.own(buf)
	buf.shared += n
}

// unshare drops one tensor's share of region buf, and the region with the
// last one.
func (b *Backend) unshare(buf *dbuf) {
	if buf.shared--; buf.shared > 0 {
		return
	}
	if i := slices.Index(b.owned, buf); i >= 0 {
		b.owned = slices.Delete(b.owned, i, i+1)
		b.retire(buf)
	}
}

func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.step.active {
		_, _ = b.EndStep()
	}
	for len(b.inFlight) > 0 { // their buffers are released below
		_, _, _ = b.inFlight[0].Wait()
	}
	for _, buf := range b.owned {
		b.release(buf)
	}
	b.owned = nil
	b.byHost, b.qbyHost = nil, nil
	b.step.releaseAll(b)
	b.releasePool()
	return nil
}

// pipeKey names a pipeline: kernel and function constants.
type pipeKey struct {
	name string
	fc   [12]int32 // values in specs order; bools as 0/1
	nfc  int8
}

// The function constant indices of mtlbench.h.
const (
	fcHasQKNorm      = 10
	fcNormVec        = 11
	fcHasBias        = 20
	fcMVRows         = 21
	fcMVCols         = 22
	fcMMBM           = 30
	fcMMBN           = 31
	fcMMBK           = 32
	fcMMSGM          = 33
	fcMMSGN          = 34
	fcMMStages       = 35
	fcAttnPartitions = 40
	fcAttnNewKV      = 41
	fcAttnRoPE       = 42
	fcMVSegs         = 23
	fcMVNorm         = 24
	fcMVResidual     = 25
	fcMVSwiGLU       = 26
	fcMVRoute        = 27
	fcMVLayerNorm    = 28
	fcMVGELU         = 29
	fcMoEResidual    = 50
	fcMoEZeroOut     = 51
	fcMVTiles        = 52
	fcMVBiases       = 53
	fcMVArgmax       = 54
	fcAttnKeys       = 43
	fcAttnStages     = 44
	fcAttnQBlocks    = 45
	fcAttnPadded     = 46
	fcQScaleDT       = 60
)

// fcSpec is one constant of a pipeline key: its index and whether it is a
// bool (else int).
type fcSpec struct {
	index int
	bool  bool
}

var (
	fcNone    []fcSpec
	fcRoPE    = []fcSpec{{fcHasQKNorm, true}}
	fcNorm    = []fcSpec{{fcNormVec, true}}
	fcMatVec  = []fcSpec{{fcHasBias, true}, {fcMVRows, false}, {fcMVCols, false}}
	fcQMatVec = []fcSpec{{fcMVBiases, false}, {fcMVRows, false}, {fcMVCols, false}, {fcMVNorm, true}, {fcMVResidual, true},
		{fcMVSegs, false}, {fcMVSwiGLU, true}, {fcQScaleDT, false}, {fcMVLayerNorm, true}, {fcMVGELU, true},
		{fcMVArgmax, true}}
	fcMatMul  = []fcSpec{{fcHasBias, true}, {fcMMBM, false}, {fcMMBN, false}, {fcMMBK, false}, {fcMMSGM, false}, {fcMMSGN, false}, {fcMMStages, false}}
	fcMoEMV   = []fcSpec{{fcMVRows, false}, {fcMVCols, false}}
	fcMoEMM   = []fcSpec{{fcMMBM, false}, {fcMMBN, false}, {fcMMBK, false}, {fcMMSGM, false}, {fcMMSGN, false}, {fcMMStages, false}}
	fcMoEDown = []fcSpec{{fcMMBM, false}, {fcMMBN, false}, {fcMMBK, false}, {fcMMSGM, false}, {fcMMSGN, false}, {fcMMStages, false},
		{fcMoEResidual, true}}
	fcRoute   = []fcSpec{{fcMoEZeroOut, true}}
	fcPrefill = []fcSpec{{fcAttnKeys, false}, {fcAttnStages, false}, {fcAttnQBlocks, false}}
	fcAttn    = []fcSpec{{fcAttnPartitions, true}, {fcAttnNewKV, true}, {fcAttnRoPE, true}, {fcHasQKNorm, true}, {fcAttnPadded, true}}
	fcMVFused = []fcSpec{{fcMVBiases, false}, {fcMVRows, false}, {fcMVCols, false}, {fcMVSegs, false}, {fcMVNorm, true},
		{fcMVResidual, true}, {fcMVSwiGLU, true}, {fcMVLayerNorm, true}, {fcMVGELU, true}, {fcMVArgmax, true}}
	fcCombine = []fcSpec{{fcMoEResidual, true}}
	// The packed kernels' tiles: the float ones' constants and the scale type.
	fcQMatMul  = append(fcMatMul[:len(fcMatMul):len(fcMatMul)], fcSpec{fcQScaleDT, false})
	fcQMoEMM   = append(fcMoEMM[:len(fcMoEMM):len(fcMoEMM)], fcSpec{fcQScaleDT, false})
	fcQMoEDown = append(fcMoEDown[:len(fcMoEDown):len(fcMoEDown)], fcSpec{fcQScaleDT, false})
	fcQEmbed   = []fcSpec{{fcQScaleDT, false}}
	boolInt    = map[bool]int32{false: 0, true: 1}
)

// pipeline returns the cached pipeline of kernel with constants vals (in
// specs order), building it on first use. A failure fails the step.
func (b *Backend) pipeline(kernel string, specs []fcSpec, vals ...int32) mtl.Pipeline {
	p, err := b.buildPipeline(kernel, specs, vals...)
	if err != nil {
		b.fail("%v", err)
		return nil
	}
	return p
}

// buildPipeline is pipeline returning its error.
func (b *Backend) buildPipeline(kernel string, specs []fcSpec, vals ...int32) (mtl.Pipeline, error) {
	k := pipeKey{name: kernel, nfc: int8(len(vals))}
	if len(vals) != len(specs) || len(vals) > len(k.fc) {
		return nil, fmt.Errorf("internal: %s: %d function constant values for %d constants (at most %d)", kernel, len(vals),
			len(specs), len(k.fc))
	}
	copy(k.fc[:], vals)
	if p := b.pipes[k]; p != nil {
		return p, nil
	}
	var fc mtl.FunctionConstants
	if len(specs) > 0 {
		fc = mtl.FunctionConstants{}
		for i, s := range specs {
			if s.bool {
				fc[s.index] = vals[i] != 0
			} else {
				fc[s.index] = vals[i]
			}
		}
	}
	p, err := b.lib.Pipeline(kernel, fc)
	if err != nil {
		return nil, err
	}
	b.pipes[k] = p
	return p, nil
}

// Pipelines is the number of pipelines built so far.
func (b *Backend) Pipelines() int { return len(b.pipes) }

// fail records the step's first error.
func (b *Backend) fail(format string, args ...any) {
	if b.step.err == nil {
		b.step.err = fmt.Errorf("metal: "+format, args...)
	}
}

// tt casts an op's tensor argument (nil stays nil).
func tt(x bridge.Tensor) *tensor {
	if x == nil {
		return nil
	}
	return x.(*tensor)
}

var _ bridge.Backend = (*Backend)(nil)
