package metal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// view is a byte range of a buffer that a dispatch binds.
type view struct {
	buf  *dbuf
	off  int
	size int
}

func (t *tensor) view() view { return view{t.buf, t.off, t.bytes()} }

// sameStart reports whether t and u begin at the same byte of one buffer:
// two tensors of one workspace slot, whichever op made them.
func (t *tensor) sameStart(u *tensor) bool { return t.buf == u.buf && t.off == u.off }

// binding is one argument of the dispatch being built.
type binding struct {
	index int
	v     view
	write bool
	bytes []byte
}

// span is a buffer range a dispatch since the last barrier read or wrote.
type span struct {
	buf    *dbuf
	lo, hi int
}

func (s span) overlaps(o span) bool { return s.buf == o.buf && s.lo < o.hi && o.lo < s.hi }

// opKey attributes time in profile mode.
type opKey struct {
	layer     int
	component string
	op        string
}

// committed is a command buffer of the step, with the op group it timed.
type committed struct {
	cb  mtl.CommandBuffer
	key opKey
}

// metaSections are the byte offsets of the step's metadata arrays in the
// meta buffer (int32 each).
type metaSections struct {
	tokens, positions, slots, queryStart, seqLens, blockTable, logitRows, tokenSeq int
	// tokenPos is each token's position as the attention kernels derive it
	// from its sequence's length and query start (not the caller's
	// positions, which RoPE takes).
	tokenPos                    int
	numTokens, numSeqs, numRows int
	// tiles[i] lists the first token of each query tile of
	// prefillQueries[i] tokens (numTiles[i] of them).
	tiles, numTiles [len(prefillQueries)]int
}

// prefillQueries are the query tiles paged_attention_prefill takes (one
// simdgroup per prefillRows of them and query head): the tiles are listed
// for each, so every dispatch of a step may take its own.
var prefillQueries = [...]int{8, 16, 32}

// prefillRows is the queries (and keys, per product) of one simdgroup's
// 8x8 tiles in paged_attention_prefill; the cache blocks it reads hold
// whole groups of them.
const prefillRows = 8

// countChunk is the MoE calls one expert-count buffer holds.
const countChunk = 1024

type stepState struct {
	active  bool
	profile bool
	meta    *bridge.StepMeta
	err     error

	// The buffers the host writes a step's inputs into and reads its
	// results from: one set per step in flight (async.go), the current
	// step's in metaBuf, errBuf and counts.
	slots    [2]stepSlot
	cur      int
	metaBuf  *dbuf
	sec      metaSections
	errBuf   *dbuf   // word 0: error code, word 1: its value
	counts   []*dbuf // distinct experts per MoE call, countChunk a buffer
	moeCalls int
	flags    *dbuf // per expert: routed to in the current MoE call
	flagsN   int

	// streaming: the step commits its dispatches piece by piece as they
	// are encoded (pieces), where no step of its own is in flight to keep
	// the GPU busy meanwhile; flushed counts those committed so far.
	streaming bool
	pieces    bridge.StreamPieces
	flushed   int

	cb      mtl.CommandBuffer
	enc     mtl.ComputeEncoder
	pipe    mtl.Pipeline // the encoder's current pipeline
	pending []committed
	mark    opKey
	timings map[opKey]time.Duration
	opCost  map[opKey]mtl.Cost // the witness's, in profile mode
	order   []opKey
	gpu     time.Duration
	devSpan gpuSpan

	// binds: a dispatch's arguments, at most Metal's 31 buffer indices.
	binds [maxBindings]binding
	nb    int
	tgmem int
	// tgmemSet: the open encoder holds a nonzero threadgroup memory length.
	tgmemSet bool
	reads    []span
	writes   []span

	scratch map[string]*dbuf
	retired []*dbuf

	dispatches, barriers, commandBuffers int
	// cost is what the device's cost witness counted of the step's
	// dispatches (the emulator; real Metal counts nothing).
	cost []mtl.DispatchStats
}

func (s *stepState) init() {
	s.scratch = map[string]*dbuf{}
	s.timings = map[opKey]time.Duration{}
	s.opCost = map[opKey]mtl.Cost{}
}

// releaseAll frees the step's buffers (Close).
func (s *stepState) releaseAll(b *Backend) {
	s.store()
	bufs := []*dbuf{s.flags}
	for _, sl := range s.slots {
		bufs = append(append(bufs, sl.metaBuf, sl.errBuf, sl.ids), sl.counts...)
	}
	for _, buf := range append(bufs, s.retired...) {
		if buf != nil {
			b.release(buf)
		}
	}
	for _, buf := range s.scratch {
		b.release(buf)
	}
	*s = stepState{}
	s.init()
}

// StepStats are counts of the last step's encoding, for tests and reports.
type StepStats struct {
	Dispatches, Barriers, CommandBuffers int
	GPUTime                              time.Duration
}

// LastStepCost is the cost witness's count of the last synchronous step's
// dispatches (docs/msl-subset.md); false on a device without one.
func (b *Backend) LastStepCost() ([]mtl.DispatchStats, bool) {
	return b.step.cost, len(b.step.cost) > 0
}

// LastStep describes the last finished step.
func (b *Backend) LastStep() StepStats {
	s := &b.step
	return StepStats{Dispatches: s.dispatches, Barriers: s.barriers, CommandBuffers: s.commandBuffers, GPUTime: s.gpu}
}

// int32Bytes views v as bytes.
func int32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

func align(n, a int) int { return (n + a - 1) / a * a }

func (b *Backend) BeginStep(meta *bridge.StepMeta, tokens []int32, profile bool) error {
	s := &b.step
	if s.active {
		// A step left open (its caller failed before EndStep): finish it
		// and drop its results, as a new command buffer would.
		_, _ = b.EndStep()
	}
	if err := s.take(); err != nil {
		return err
	}
	m := meta
	switch {
	case len(tokens) != m.NumTokens:
		return fmt.Errorf("metal: begin step: %d tokens for a step of %d", len(tokens), m.NumTokens)
	case len(m.Positions) != m.NumTokens || len(m.SlotMapping) != m.NumTokens:
		return fmt.Errorf("metal: begin step: %d positions and %d slots for %d tokens", len(m.Positions), len(m.SlotMapping), m.NumTokens)
	case len(m.QueryStartLoc) != m.NumSeqs+1 || len(m.SeqLens) != m.NumSeqs:
		return fmt.Errorf("metal: begin step: %d query starts and %d sequence lengths for %d sequences", len(m.QueryStartLoc), len(m.SeqLens), m.NumSeqs)
	case len(m.BlockTable) < m.NumSeqs*m.MaxBlocks:
		return fmt.Errorf("metal: begin step: block table of %d entries for %d sequences of %d blocks", len(m.BlockTable), m.NumSeqs, m.MaxBlocks)
	case m.NumSeqs > 0 && int(m.QueryStartLoc[m.NumSeqs]) != m.NumTokens:
		return fmt.Errorf("metal: begin step: query starts end at %d, not at the %d tokens", m.QueryStartLoc[m.NumSeqs], m.NumTokens)
	}
	// Sections 256-byte aligned: Metal's buffer offset alignment.
	sec := metaSections{numTokens: m.NumTokens, numSeqs: m.NumSeqs, numRows: len(m.LogitRows)}
	off := 0
	next := func(n int) int {
		o := off
		off += align(4*max(n, 1), 256)
		return o
	}
	sec.tokens = next(m.NumTokens)
	sec.positions = next(m.NumTokens)
	sec.slots = next(m.NumTokens)
	sec.queryStart = next(m.NumSeqs + 1)
	sec.seqLens = next(m.NumSeqs)
	sec.blockTable = next(m.NumSeqs * m.MaxBlocks)
	sec.logitRows = next(len(m.LogitRows))
	sec.tokenSeq = next(m.NumTokens)
	sec.tokenPos = next(m.NumTokens)
	for i, q := range prefillQueries {
		sec.tiles[i] = next(m.NumTokens/q + m.NumSeqs)
	}
	if s.metaBuf == nil || s.metaBuf.Length() < off {
		if s.metaBuf != nil {
			b.release(s.metaBuf) // the last step finished: nothing uses it
		}
		buf, err := b.newBuffer(max(off, 4096) * 5 / 4)
		if err != nil {
			return err
		}
		s.metaBuf = buf
	}
	c := s.metaBuf.Contents()
	copy(c[sec.tokens:], int32Bytes(tokens))
	copy(c[sec.positions:], int32Bytes(m.Positions))
	copy(c[sec.slots:], int32Bytes(m.SlotMapping))
	copy(c[sec.queryStart:], int32Bytes(m.QueryStartLoc))
	copy(c[sec.seqLens:], int32Bytes(m.SeqLens))
	copy(c[sec.blockTable:], int32Bytes(m.BlockTable[:m.NumSeqs*m.MaxBlocks]))
	copy(c[sec.logitRows:], int32Bytes(m.LogitRows))
	ts := unsafe.Slice((*int32)(unsafe.Pointer(&c[sec.tokenSeq])), m.NumTokens)
	tp := unsafe.Slice((*int32)(unsafe.Pointer(&c[sec.tokenPos])), m.NumTokens)
	for q := 0; q < m.NumSeqs; q++ {
		for t := m.QueryStartLoc[q]; t < m.QueryStartLoc[q+1]; t++ {
			ts[t] = int32(q)
			tp[t] = m.SeqLens[q] - m.QueryStartLoc[q+1] + t
		}
	}
	for i, n := range prefillQueries {
		tiles := unsafe.Slice((*int32)(unsafe.Pointer(&c[sec.tiles[i]])), m.NumTokens/n+m.NumSeqs)
		for q := 0; q < m.NumSeqs; q++ {
			for t := m.QueryStartLoc[q]; t < m.QueryStartLoc[q+1]; t += int32(n) {
				tiles[sec.numTiles[i]] = t
				sec.numTiles[i]++
			}
		}
	}
	if s.errBuf == nil {
		buf, err := b.newBuffer(16)
		if err != nil {
			return err
		}
		s.errBuf = buf
	}
	clear(s.errBuf.Contents())
	for _, c := range s.counts {
		clear(c.Contents())
	}
	s.sec, s.meta, s.err, s.profile = sec, meta, nil, profile
	s.active, s.moeCalls = true, 0
	s.dispatches, s.barriers, s.commandBuffers, s.gpu, s.devSpan = 0, 0, 0, 0, gpuSpan{}
	s.streaming = !profile && !b.opts.NoStream && len(b.inFlight) == 0
	s.pieces, s.flushed = bridge.StreamPieces{}, 0
	s.cost = s.cost[:0]
	s.mark = opKey{-1, bridge.CompOther, "begin"}
	if profile {
		clear(s.timings)
		clear(s.opCost)
		s.order = s.order[:0]
	}
	return nil
}

// metaView is a section of the metadata buffer.
func (b *Backend) metaView(off, n int) view { return view{b.step.metaBuf, off, 4 * max(n, 1)} }

func (b *Backend) Mark(layer int, component, op string) {
	s := &b.step
	if !s.profile || !s.active {
		return
	}
	key := opKey{layer, component, op}
	if key == s.mark {
		return
	}
	b.commit()
	s.mark = key
}

// commit ends the open encoder and commits its command buffer, without
// waiting.
func (b *Backend) commit() {
	s := &b.step
	if s.enc != nil {
		s.enc.End()
		s.enc = nil
	}
	if s.cb != nil {
		s.cb.Commit()
		s.pending = append(s.pending, committed{s.cb, s.mark})
		s.cb = nil
	}
	s.flushed = s.dispatches
	s.pipe = nil
	s.reads, s.writes = s.reads[:0], s.writes[:0]
}

// witnessStats is what a finished command buffer's cost witness counted of
// each of its dispatches; nil on a device without one.
func witnessStats(cb mtl.CommandBuffer) []mtl.DispatchStats {
	if w, ok := cb.(mtl.CostWitness); ok {
		return w.DispatchStats()
	}
	return nil
}

// operandBytes sums a step's dispatches by kernel argument
// (bridge.StepStats.Operands).
func operandBytes(ds []mtl.DispatchStats) []bridge.OperandBytes {
	var out []bridge.OperandBytes
	for _, o := range mtl.SumByOperand(ds) {
		out = append(out, bridge.OperandBytes{Kernel: o.Kernel, Operand: o.Name, Read: o.Read, Written: o.Written,
			DistinctRead: o.FootprintRead, DistinctWritten: o.FootprintWritten})
	}
	return out
}

// wait waits for the committed command buffers, in order, and books their
// GPU time.
func (b *Backend) wait() {
	s := &b.step
	for _, c := range s.pending {
		if err := c.cb.Wait(); err != nil && s.err == nil {
			s.err = fmt.Errorf("metal: command buffer: %w", err)
		}
		if w, ok := c.cb.(mtl.CostWitness); ok {
			ds := w.DispatchStats()
			s.cost = append(s.cost, ds...)
			if s.profile {
				s.opCost[c.key] = s.opCost[c.key].Add(mtl.Sum(ds).Cost)
			}
		}
		start, end := c.cb.GPUTime()
		d := time.Duration((end - start) * float64(time.Second))
		s.gpu += d
		s.devSpan.add(c.cb)
		if s.profile {
			if _, ok := s.timings[c.key]; !ok {
				s.order = append(s.order, c.key)
			}
			s.timings[c.key] += d
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
}

// gpuSpan is the device's clock from the first of a step's command buffers
// starting to the last one finishing: its DeviceTime, gaps included.
type gpuSpan struct {
	start, end float64
	seen       bool
}

func (g *gpuSpan) add(cb mtl.CommandBuffer) {
	start, end := cb.GPUTime()
	if end <= start {
		return // not run, or a device without a clock
	}
	if !g.seen || start < g.start {
		g.start = start
	}
	g.end, g.seen = max(g.end, end), true
}

func (g gpuSpan) duration() time.Duration {
	if !g.seen {
		return 0
	}
	return time.Duration((g.end - g.start) * float64(time.Second))
}

// flush runs what the step encoded so far (Read inside a step).
func (b *Backend) flush() error {
	if !b.step.active {
		return nil
	}
	b.commit()
	b.wait()
	return nil
}

func (b *Backend) EndStep() (bridge.StepStats, error) {
	s := &b.step
	if !s.active {
		return bridge.StepStats{}, errors.New("metal: EndStep without BeginStep")
	}
	b.commit()
	b.wait()
	s.active = false
	s.store()
	cost := mtl.Sum(s.cost)
	st := bridge.StepStats{Dispatches: s.dispatches, CountedBytes: cost.Bytes(), FootprintBytes: cost.Footprint(),
		Loads: cost.Loads, SimdgroupLoads: cost.SimdgroupLoads, CriticalLoads: cost.CriticalLoads, DeviceTime: s.devSpan.duration(),
		Operands: operandBytes(s.cost)}
	if s.err == nil {
		s.err = stepError(s.errBuf)
	}
	st.ExpertsTouched = expertCounts(s.counts, s.moeCalls)
	if s.profile {
		for _, k := range s.order {
			if k.op == "begin" {
				continue
			}
			cost := s.opCost[k]
			st.Timings = append(st.Timings, bridge.OpTiming{Layer: k.layer, Component: k.component, Op: k.op, Duration: s.timings[k],
				CountedBytes: cost.Bytes(), FootprintBytes: cost.Footprint(), CriticalLoads: cost.CriticalLoads})
		}
	}
	for _, buf := range s.retired {
		b.release(buf)
	}
	clear(s.retired)
	s.retired = s.retired[:0]
	return st, s.err
}

// stepError is the error a step's kernels recorded in its error buffer.
func stepError(errBuf *dbuf) error {
	c := errBuf.Contents()
	code := int32(binary.LittleEndian.Uint32(c[0:]))
	val := int32(binary.LittleEndian.Uint32(c[4:]))
	switch code {
	case 0:
		return nil
	case errTokenID:
		return fmt.Errorf("metal: embedding: token id %d outside the vocabulary", val)
	case errSlot:
		return fmt.Errorf("metal: attention: slot %d outside the KV cache", val)
	case errBlock:
		return fmt.Errorf("metal: attention: block %d outside the KV cache", val)
	case errPosition:
		return fmt.Errorf("metal: position embedding: position %d outside the position table", val)
	case errExpert:
		return fmt.Errorf("metal: moe: expert id %d outside the layer's experts", val)
	case errRouteNaN:
		return fmt.Errorf("metal: moe: %w (NaN) in the router's probabilities for token %d", bridge.ErrNonFinite, val)
	}
	return fmt.Errorf("metal: kernel error %d (value %d)", code, val)
}

// expertCounts reads the distinct experts of each of a step's MoE calls.
func expertCounts(counts []*dbuf, calls int) []int {
	if calls == 0 {
		return nil
	}
	out := make([]int, calls)
	for i := range out {
		out[i] = int(binary.LittleEndian.Uint32(counts[i/countChunk].Contents()[4*(i%countChunk):]))
	}
	return out
}

// Error codes of mtlbench.h.
const (
	errTokenID  = 1
	errSlot     = 2
	errBlock    = 3
	errExpert   = 4
	errPosition = 5 // gpt2.metal
	errRouteNaN = 6
)

// scratchBuf returns the step scratch buffer name of at least n bytes; a
// buffer outgrown mid-step is released when the step ends.
func (b *Backend) scratchBuf(name string, n int) *dbuf {
	s := &b.step
	buf := s.scratch[name]
	if buf != nil && buf.Length() >= n {
		return buf
	}
	if buf != nil {
		s.retired = append(s.retired, buf)
	}
	buf, err := b.newBuffer(align(max(n, 256), 256))
	if err != nil {
		b.fail("scratch %s: %v", name, err)
		return nil
	}
	s.scratch[name] = buf
	return buf
}

func (b *Backend) scratchView(name string, n int) view {
	return view{b.scratchBuf(name, n), 0, n}
}

// countSlot returns the buffer and word of the next MoE call's count.
func (b *Backend) countSlot() (*dbuf, int) {
	s := &b.step
	i := s.moeCalls
	s.moeCalls++
	if i/countChunk >= len(s.counts) {
		buf, err := b.newBuffer(4 * countChunk)
		if err != nil {
			b.fail("%v", err)
			return nil, 0
		}
		s.counts = append(s.counts, buf)
	}
	return s.counts[i/countChunk], i % countChunk
}

// expertFlags returns the per-expert flags buffer for e experts (zeroed
// on creation; each MoE call's combine clears what its route set).
func (b *Backend) expertFlags(e int) *dbuf {
	s := &b.step
	if s.flags == nil || s.flagsN < e {
		if s.flags != nil {
			s.retired = append(s.retired, s.flags)
		}
		buf, err := b.newBuffer(4 * max(e, 64))
		if err != nil {
			b.fail("%v", err)
			return nil
		}
		s.flags, s.flagsN = buf, max(e, 64)
	}
	return s.flags
}

// ---------------------------------------------------------------------------
// Building a dispatch: bind arguments, then run it.
// ---------------------------------------------------------------------------

// maxBindings is the buffer argument table of a Metal function: indices
// 0..30.
const maxBindings = 31

func (b *Backend) args(data []byte) { b.push(binding{index: 0, bytes: data}) }

func (b *Backend) bind(index int, v view, write bool) {
	b.push(binding{index: index, v: v, write: write})
}

// push adds a binding of the next dispatch; an index past the table fails
// the step (an encoding error, not a crash).
func (b *Backend) push(x binding) {
	s := &b.step
	if x.index < 0 || x.index >= maxBindings || s.nb == maxBindings {
		b.fail("internal: buffer index %d of a dispatch (Metal binds 0..%d)", x.index, maxBindings-1)
		return
	}
	s.binds[s.nb] = x
	s.nb++
}

func (b *Backend) in(index int, t *tensor)  { b.bind(index, t.view(), false) }
func (b *Backend) out(index int, t *tensor) { b.bind(index, t.view(), true) }

func (b *Backend) threadgroupMemory(n int) { b.step.tgmem = align(n, 16) }

// encoder returns the step's open compute encoder, starting a command
// buffer (and encoder) when there is none.
func (b *Backend) encoder() mtl.ComputeEncoder {
	s := &b.step
	if s.enc != nil {
		return s.enc
	}
	if s.cb == nil {
		cb, err := b.queue.CommandBuffer()
		if err != nil {
			b.fail("%v", err)
			return nil
		}
		s.cb = cb
		s.commandBuffers++
	}
	newEnc := s.cb.ConcurrentEncoder
	if b.opts.SerialDispatch {
		newEnc = s.cb.ComputeEncoder
	}
	enc, err := newEnc()
	if err != nil {
		b.fail("%v", err)
		return nil
	}
	s.enc = enc
	s.tgmemSet = false
	s.reads, s.writes = s.reads[:0], s.writes[:0] // ordered after the last encoder's
	return enc
}

// dispatch encodes the bound arguments with p: groups threadgroups of tpg
// threads, or (threads) a grid of groups threads. A memory barrier goes
// first when the dispatch reads or writes what an earlier dispatch since
// the last barrier wrote, or writes what one read.
func (b *Backend) dispatch(p mtl.Pipeline, groups, tpg [3]int, threads bool) {
	s := &b.step
	binds := s.binds[:s.nb]
	tg := s.tgmem
	s.nb, s.tgmem = 0, 0
	if !s.active {
		b.fail("op outside a step (BeginStep first)")
		return
	}
	if p == nil || s.err != nil {
		return
	}
	for _, bd := range binds {
		if bd.bytes == nil && bd.v.buf == nil {
			b.fail("kernel %s: buffer %d is missing", p.Name(), bd.index)
			return
		}
	}
	// Threadgroup memory past the device's, or threads past what the
	// pipeline's registers allow, is undefined behaviour on a GPU, not an
	// error Metal reports: the step fails here instead.
	if static, most := p.StaticThreadgroupMemoryLength(), b.dev.MaxThreadgroupMemoryLength(); tg+static > most {
		b.fail("kernel %s: %d bytes of threadgroup memory (%d of them its own), more than the device's %d", p.Name(), tg+static, static, most)
		return
	}
	if n, most := tpg[0]*tpg[1]*tpg[2], p.MaxTotalThreadsPerThreadgroup(); n > most || n < 1 {
		b.fail("kernel %s: threadgroups of %d threads, where the pipeline takes 1 to %d", p.Name(), n, most)
		return
	}
	enc := b.encoder()
	if enc == nil {
		return
	}
	// Dispatches run concurrently up to a barrier (Options.SerialDispatch):
	// one goes in before a dispatch that reads what an earlier one of the
	// run writes, or writes what it reads or writes. The stats buffer is
	// only updated atomically and read by the host, so it orders nothing.
	hazard := false
	for _, bd := range binds {
		if bd.bytes != nil || bd.v.buf == s.errBuf {
			continue
		}
		sp := span{bd.v.buf, bd.v.off, bd.v.off + bd.v.size}
		for _, w := range s.writes {
			if w.overlaps(sp) {
				hazard = true
			}
		}
		if bd.write {
			for _, r := range s.reads {
				if r.overlaps(sp) {
					hazard = true
				}
			}
		}
	}
	if hazard {
		enc.MemoryBarrier()
		s.barriers++
		s.reads, s.writes = s.reads[:0], s.writes[:0]
	}
	for _, bd := range binds {
		if bd.bytes != nil || bd.v.buf == s.errBuf {
			continue
		}
		sp := span{bd.v.buf, bd.v.off, bd.v.off + bd.v.size}
		if bd.write {
			s.writes = append(s.writes, sp)
		} else {
			s.reads = append(s.reads, sp)
		}
	}
	if p != s.pipe {
		enc.SetPipeline(p)
		s.pipe = p
	}
	for _, bd := range binds {
		if bd.bytes != nil {
			enc.SetBytes(bd.bytes, bd.index)
		} else {
			enc.SetBuffer(bd.v.buf.Buffer, bd.v.off, bd.index)
		}
	}
	// An encoder keeps a length until it is set again: a dispatch that needs
	// none after one that needed some clears it, so no device counts a
	// stale length against the next kernel's limit.
	if tg > 0 || s.tgmemSet {
		enc.SetThreadgroupMemoryLength(tg, 0)
		s.tgmemSet = tg > 0
	}
	if threads {
		enc.DispatchThreads(groups, tpg)
	} else {
		enc.DispatchThreadgroups(groups, tpg)
	}
	s.dispatches++
	if s.streaming && s.pieces.Take(s.dispatches-s.flushed) {
		b.commit() // the GPU starts on it while the host encodes the rest
	}
}

func (b *Backend) dispatchGroups(p mtl.Pipeline, groups, tpg [3]int) {
	b.dispatch(p, groups, tpg, false)
}

// dispatchThreads covers a grid of threads, each its own work, so its
// threadgroups may be as small as the pipeline needs.
func (b *Backend) dispatchThreads(p mtl.Pipeline, grid, tpg [3]int) {
	tpg[0] = threadsFor(p, tpg[0])
	b.dispatch(p, grid, tpg, true)
}
