package metal

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// Recorder wraps an mtl.Device and logs everything the backend encodes:
// pipelines (with their function constants), buffer bindings (buffers
// numbered in allocation order), argument bytes, threadgroup memory,
// dispatch shapes, barriers, encoders and command buffers. Two devices fed
// the same encoding code produce the same log, which is how the tests show
// that the emulated and the real device run one encoding path.
type Recorder struct {
	mtl.Device
	mu      sync.Mutex
	events  []Event
	buffers int
	off     bool
}

// Event is one call the backend made.
type Event struct {
	Kind   string // pipeline, buffer, bytes, tgmem, dispatch, dispatch-threads, barrier, encoder, end, commit, wait
	Name   string // pipeline: kernel and constants
	Index  int    // binding index
	Buffer int    // buffer number (allocation order)
	Offset int
	Length int
	Hash   uint64 // bytes: FNV-1a of the data
	Size   [2][3]int
}

func (e Event) String() string {
	switch e.Kind {
	case "pipeline":
		return "pipeline " + e.Name
	case "buffer":
		return fmt.Sprintf("buffer[%d] = #%d+%d", e.Index, e.Buffer, e.Offset)
	case "bytes":
		return fmt.Sprintf("bytes[%d] = %d bytes %016x", e.Index, e.Length, e.Hash)
	case "tgmem":
		return fmt.Sprintf("tgmem[%d] = %d", e.Index, e.Length)
	case "dispatch", "dispatch-threads":
		return fmt.Sprintf("%s %v x %v", e.Kind, e.Size[0], e.Size[1])
	}
	return e.Kind
}

// NewRecorder wraps dev.
func NewRecorder(dev mtl.Device) *Recorder { return &Recorder{Device: dev} }

// Events returns the log so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Len is the number of events so far, to cut a log at a step boundary.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Reset empties the log (buffer numbering goes on).
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = r.events[:0]
	r.mu.Unlock()
}

// SetEnabled turns logging on or off (buffers are numbered either way).
func (r *Recorder) SetEnabled(on bool) {
	r.mu.Lock()
	r.off = !on
	r.mu.Unlock()
}

func (r *Recorder) add(e Event) {
	r.mu.Lock()
	if !r.off {
		r.events = append(r.events, e)
	}
	r.mu.Unlock()
}

type recBuffer struct {
	mtl.Buffer
	id int
}

func (r *Recorder) NewBuffer(n int) (mtl.Buffer, error) {
	b, err := r.Device.NewBuffer(n)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.buffers++
	id := r.buffers
	r.mu.Unlock()
	return &recBuffer{b, id}, nil
}

type recLibrary struct {
	mtl.Library
	r *Recorder
}

func (r *Recorder) NewLibrary(files map[string]string, opts mtl.CompileOptions) (mtl.Library, error) {
	l, err := r.Device.NewLibrary(files, opts)
	if err != nil {
		return nil, err
	}
	return &recLibrary{l, r}, nil
}

type recPipeline struct {
	mtl.Pipeline
	desc string
}

func (l *recLibrary) Pipeline(kernel string, fc mtl.FunctionConstants) (mtl.Pipeline, error) {
	p, err := l.Library.Pipeline(kernel, fc)
	if err != nil {
		return nil, err
	}
	var parts []string
	for i, v := range fc {
		parts = append(parts, fmt.Sprintf("%d=%v", i, v))
	}
	sort.Strings(parts)
	return &recPipeline{p, kernel + "{" + strings.Join(parts, ",") + "}"}, nil
}

type recQueue struct {
	mtl.CommandQueue
	r *Recorder
}

func (r *Recorder) NewCommandQueue() (mtl.CommandQueue, error) {
	q, err := r.Device.NewCommandQueue()
	if err != nil {
		return nil, err
	}
	return &recQueue{q, r}, nil
}

type recCB struct {
	mtl.CommandBuffer
	r *Recorder
}

func (q *recQueue) CommandBuffer() (mtl.CommandBuffer, error) {
	cb, err := q.CommandQueue.CommandBuffer()
	if err != nil {
		return nil, err
	}
	return &recCB{cb, q.r}, nil
}

func (c *recCB) ComputeEncoder() (mtl.ComputeEncoder, error) {
	e, err := c.CommandBuffer.ComputeEncoder()
	if err != nil {
		return nil, err
	}
	c.r.add(Event{Kind: "encoder"})
	return &recEncoder{e, c.r}, nil
}

func (c *recCB) ConcurrentEncoder() (mtl.ComputeEncoder, error) {
	e, err := c.CommandBuffer.ConcurrentEncoder()
	if err != nil {
		return nil, err
	}
	c.r.add(Event{Kind: "concurrent encoder"})
	return &recEncoder{e, c.r}, nil
}

func (c *recCB) Commit() {
	c.r.add(Event{Kind: "commit"})
	c.CommandBuffer.Commit()
}

func (c *recCB) Wait() error {
	c.r.add(Event{Kind: "wait"})
	return c.CommandBuffer.Wait()
}

type recEncoder struct {
	mtl.ComputeEncoder
	r *Recorder
}

func (e *recEncoder) SetPipeline(p mtl.Pipeline) {
	rp := p.(*recPipeline)
	e.r.add(Event{Kind: "pipeline", Name: rp.desc})
	e.ComputeEncoder.SetPipeline(rp.Pipeline)
}

func (e *recEncoder) SetBuffer(b mtl.Buffer, offset, index int) {
	rb := b.(*recBuffer)
	e.r.add(Event{Kind: "buffer", Index: index, Buffer: rb.id, Offset: offset})
	e.ComputeEncoder.SetBuffer(rb.Buffer, offset, index)
}

func (e *recEncoder) SetBytes(data []byte, index int) {
	h := fnv.New64a()
	h.Write(data)
	e.r.add(Event{Kind: "bytes", Index: index, Length: len(data), Hash: h.Sum64()})
	e.ComputeEncoder.SetBytes(data, index)
}

func (e *recEncoder) SetThreadgroupMemoryLength(n, index int) {
	e.r.add(Event{Kind: "tgmem", Index: index, Length: n})
	e.ComputeEncoder.SetThreadgroupMemoryLength(n, index)
}

func (e *recEncoder) DispatchThreadgroups(groups, tpg [3]int) {
	e.r.add(Event{Kind: "dispatch", Size: [2][3]int{groups, tpg}})
	e.ComputeEncoder.DispatchThreadgroups(groups, tpg)
}

func (e *recEncoder) DispatchThreads(threads, tpg [3]int) {
	e.r.add(Event{Kind: "dispatch-threads", Size: [2][3]int{threads, tpg}})
	e.ComputeEncoder.DispatchThreads(threads, tpg)
}

func (e *recEncoder) MemoryBarrier() {
	e.r.add(Event{Kind: "barrier"})
	e.ComputeEncoder.MemoryBarrier()
}

func (e *recEncoder) End() {
	e.r.add(Event{Kind: "end"})
	e.ComputeEncoder.End()
}

// NullDevice is an mtl.Device that encodes and runs nothing: buffers
// take host memory only when their contents are touched, pipelines are
// names, command buffers complete at once. Wrapped in a Recorder, it
// measures the backend's encoding cost and shows its dispatch sequence
// without a GPU or the emulator.
type NullDevice struct{}

var _ mtl.Device = NullDevice{}

func (NullDevice) Name() string                        { return "null (encodes nothing, runs nothing)" }
func (NullDevice) UnifiedMemory() bool                 { return true }
func (NullDevice) RecommendedMaxWorkingSetSize() int64 { return 1 << 40 }
func (NullDevice) MaxBufferLength() int64              { return 1 << 40 }
func (NullDevice) MaxThreadgroupMemoryLength() int     { return 32 << 10 }
func (NullDevice) MaxThreadsPerThreadgroup() int       { return 1024 }
func (NullDevice) Emulated() bool                      { return true }

type nullBuffer struct {
	n    int
	once sync.Once
	mem  []byte
}

func (NullDevice) NewBuffer(n int) (mtl.Buffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("null device: buffer length %d", n)
	}
	return &nullBuffer{n: n}, nil
}

func (b *nullBuffer) Contents() []byte {
	b.once.Do(func() { b.mem = make([]byte, b.n) })
	return b.mem
}
func (b *nullBuffer) Length() int { return b.n }
func (b *nullBuffer) Release()    {}

type nullLibrary struct{}

func (NullDevice) NewLibrary(map[string]string, mtl.CompileOptions) (mtl.Library, error) {
	return nullLibrary{}, nil
}

type nullPipeline string

func (nullLibrary) Pipeline(kernel string, _ mtl.FunctionConstants) (mtl.Pipeline, error) {
	return nullPipeline(kernel), nil
}
func (nullLibrary) FunctionNames() []string { return nil }

func (p nullPipeline) Name() string                           { return string(p) }
func (nullPipeline) MaxTotalThreadsPerThreadgroup() int       { return 1024 }
func (nullPipeline) ThreadExecutionWidth() int                { return 32 }
func (nullPipeline) StaticThreadgroupMemoryLength() int       { return 0 }
func (NullDevice) NewCommandQueue() (mtl.CommandQueue, error) { return nullQueue{}, nil }

type nullQueue struct{}
type nullCB struct{}
type nullEncoder struct{}

func (nullQueue) CommandBuffer() (mtl.CommandBuffer, error)   { return nullCB{}, nil }
func (nullCB) ComputeEncoder() (mtl.ComputeEncoder, error)    { return nullEncoder{}, nil }
func (nullCB) ConcurrentEncoder() (mtl.ComputeEncoder, error) { return nullEncoder{}, nil }
func (nullCB) Commit()                                        {}
func (nullCB) Wait() error                                    { return nil }
func (nullCB) GPUTime() (float64, float64)                    { return 0, 0 }

func (nullEncoder) SetPipeline(mtl.Pipeline)            {}
func (nullEncoder) SetBuffer(mtl.Buffer, int, int)      {}
func (nullEncoder) SetBytes([]byte, int)                {}
func (nullEncoder) SetThreadgroupMemoryLength(int, int) {}
func (nullEncoder) DispatchThreadgroups(_, _ [3]int)    {}
func (nullEncoder) DispatchThreads(_, _ [3]int)         {}
func (nullEncoder) MemoryBarrier()                      {}
func (nullEncoder) End()                                {}
