// Package kbench runs the "kernel" kind of benchmark case: one op of the
// backend contract (bridge.Backend) on synthetic tensors, timed in isolation,
// as an op is measured before it is integrated into a model.
//
// A case is prepared once (parameters validated, its whole memory worked out
// and checked against what the backend has before anything is allocated,
// tensors allocated and filled from a fixed seed), checked once against the
// pure-Go reference in package kernels on the very values the backend
// holds, then timed: each repetition calls the op Iters times inside one
// BeginStep/EndStep, so a GPU backend pays one synchronisation per
// repetition, not per call.
//
// Parameters and their defaults (kernels/ops declares them, with the
// cost model that gives Bytes and Flops):
//
//	paged_attention_decode   seqs=1 context=1024 num_heads=32 num_kv_heads=8 head_size=128 block_size=16
//	paged_attention_prefill  seqs=1 tokens=256 context=0 (chunked prefill when > 0), same heads
//	rms_norm, add_rms_norm   tokens=1 width=2048 (hidden is accepted for width)
//	rope                     tokens=1 num_heads num_kv_heads head_size, QK-norm on, positions from context=1024
//	silu_mul                 tokens=1 intermediate=6144
//	matmul                   m=tokens=1 n=2048 k=hidden=2048 dtype=bf16 (the weight's)
//	moe                      tokens=1 experts=128 top_k=8 hidden=2048 intermediate=768 dtype=bf16
//	                         moe_strategy=grouped moe_chunk=64
//	argmax                   tokens=1 width=32000 (the vocabulary; f32 logits, as the engine's)
//	embedding                tokens=1 width=hidden=2048 n=32000 (the vocabulary) dtype=bf16
//
// kv_write is not prepared: the backend contract fuses the cache write into
// Attention, so there is no separate op to time (Prepare returns an error
// that matches errors.ErrUnsupported, for the runner to report a skip).
// Activations and the KV cache use the backend's ActDType; matrices use
// dtype; norm weights are f32, as the engine loads them.
//
// Bytes is the compulsory traffic of one call (every input read once, every
// output written once; for MoE only the experts the tokens route to), so
// gb_s is an effective bandwidth comparable across strategies and backends.
package kbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Sample is one measured value of a repetition.
type Sample struct {
	Metric string
	Value  float64
	Unit   string
}

// Calibration: a repetition should last about targetRep so timer and
// step overheads vanish while a suite of many cases stays quick.
const (
	targetRep   = 30 * time.Millisecond
	minCalibRep = 5 * time.Millisecond
	maxIters    = 1 << 20
)

// Bench is one prepared kernel case: tensors allocated and filled once.
type Bench struct {
	open bool // prepared and not closed: counted in live
	be   bridge.Backend
	act  bridge.DType
	op   ops.ID
	desc string

	meta   *bridge.StepMeta
	ids    []int32
	tokens int // the step's tokens (len(ids), also while planning)
	// call runs the op once; i counts the calls of the step, so ops that
	// update an input in place can alternate inputs to keep it bounded, and
	// ops can rotate through copies of their inputs.
	call func(i int)
	// check runs the op once (through b.once) and returns the max abs error
	// and the scale the tolerance is relative to.
	check func() (maxErr, scale float64, err error)
	tol   float64
	tolDT bridge.DType

	bytes, flops int64
	iters        int
	// Slowdown lengthens every timed step by this fraction of its time
	// (MTLBENCH_TEST_SLOWDOWN: the perf gate's known slowdown; 0 in real runs).
	Slowdown float64

	rng     *rand.Rand
	tensors []bridge.Tensor
	hosts   []*host // keeps host memory alive: Weight may alias it
	// frees give back the off-heap memory of large inputs (offHeap), once
	// the tensors that may alias it are freed.
	frees []func()

	// ctx ends filling tensors and checking early (an interrupt).
	ctx context.Context
	// plan: count what the case needs, allocate nothing (memory.go).
	plan    bool
	used    int64 // bytes of tensors and step metadata
	scratch int64 // the most the check or routing allocates at once
	// want copies of perCopy bytes rotation asks for; fit the copies
	// memory allows (0: no limit, while planning).
	want, fit int
	perCopy   int64
	mem       Memory
	// refExperts are the MoE check's widened experts, kept between checks.
	refExperts []kernels.Expert

	gpu   string   // witness.go: the Apple GPU of simdgroups per core
	wit   *Witness // one call as the cost witness counted it
	noWit bool     // the device counted nothing: no need to ask again
}

// Prepare validates the case's parameters against what the op supports and
// allocates its tensors on be. Errors name the parameter, as *ParamError
// values (joined when there are several), so a runner can point at the
// value in the suite file.
func Prepare(be bridge.Backend, a ops.Args) (*Bench, error) {
	return PrepareContext(context.Background(), be, a)
}

// PrepareContext is Prepare that stops filling tensors when ctx ends. The
// whole case's memory (Need) is checked before the first allocation: a
// case that cannot fit fails with a *MemoryError, and rotated copies are
// cut to what fits (Memory says so).
func PrepareContext(ctx context.Context, be bridge.Backend, a ops.Args) (*Bench, error) {
	m, err := Need(be, a)
	if err != nil {
		return nil, err
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	b, err := newBench(ctx, be, a.Op)
	if err != nil {
		return nil, err
	}
	b.fit, b.mem = m.Fit, m
	b.open = true
	live.Add(1)
	if err := b.prepare(a); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// newBench is an empty case of op on be, its data seeded.
func newBench(ctx context.Context, be bridge.Backend, op ops.ID) (*Bench, error) {
	_, ok := ops.Lookup(op)
	switch {
	case op == "":
		return nil, &ParamError{Param: "op", Msg: "a kernel case needs an op (one of " + joinIDs(ops.IDs()) + ")"}
	case !ok:
		return nil, &ParamError{Param: "op", Value: string(op), Msg: "unknown op (want one of " + joinIDs(ops.IDs()) + ")"}
	}
	return &Bench{
		be: be, act: be.ActDType(), op: op, ctx: ctx,
		rng: rand.New(rand.NewPCG(1, 0x6b62656e6368)), // fixed: every run sees the same data
	}, nil
}

// prepare reads the case's parameters and allocates its tensors (counts
// them when planning).
func (b *Bench) prepare(a ops.Args) error {
	op, _ := ops.Lookup(a.Op)
	p := &params{op: op, a: a}
	var err error
	switch a.Op {
	case ops.PagedAttentionDecode:
		err = b.prepareAttention(p, false)
	case ops.PagedAttentionPrefill:
		err = b.prepareAttention(p, true)
	case ops.KVWrite:
		return unsupported("op=kv_write: kv_write is fused into attention on this backend (time paged_attention_prefill instead)")
	case ops.RMSNorm, ops.AddRMSNorm:
		err = b.prepareNorm(p, a.Op == ops.AddRMSNorm)
	case ops.RoPE:
		err = b.prepareRoPE(p)
	case ops.SiLUMul:
		err = b.prepareSiLUMul(p)
	case ops.MatMul:
		err = b.prepareMatMul(p)
	case ops.MoE:
		err = b.prepareMoE(p)
	case ops.Argmax:
		err = b.prepareArgmax(p)
	case ops.Embedding:
		err = b.prepareEmbedding(p)
	case ops.LayerNorm, ops.AddLayerNorm:
		err = b.prepareLayerNorm(p, a.Op == ops.AddLayerNorm)
	case ops.GELU:
		err = b.prepareGELU(p)
	case ops.PositionEmbedding:
		err = b.preparePositionEmbedding(p)
	case ops.QMatMul:
		err = b.prepareQMatMul(p)
	case ops.QMoE:
		err = b.prepareQMoE(p)
	case ops.QEmbedding:
		err = b.prepareQEmbedding(p)
	default:
		return unsupported("op=" + string(a.Op) + ": kbench does not time it")
	}
	if err != nil {
		return err
	}
	if b.meta == nil {
		b.meta = b.plainMeta(b.tokens)
	}
	return nil
}

// unsupportedError is an op the backend cannot run in isolation.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string        { return e.msg }
func (e *unsupportedError) Is(target error) bool { return target == errors.ErrUnsupported }

func unsupported(msg string) error { return &unsupportedError{msg} }

// plainMeta is the metadata of a step of n tokens of one fresh sequence
// that writes no cache: what ops other than attention need (positions, a
// token count), complete so a GPU backend's BeginStep finds it consistent.
// A plan counts its slices and gets an empty one.
func (b *Bench) plainMeta(n int) *bridge.StepMeta {
	b.reserve(mulSat(int64(n), 8))
	if b.plan {
		return &bridge.StepMeta{}
	}
	m := &bridge.StepMeta{
		NumTokens: n, NumSeqs: 1, MaxQueryLen: n, MaxSeqLen: n, BlockSize: 16,
		Positions: make([]int32, n), SlotMapping: make([]int32, n),
		QueryStartLoc: []int32{0, int32(n)}, SeqLens: []int32{int32(n)},
	}
	if n == 1 {
		m.NumDecodeTokens = 1
	}
	for i := range n {
		m.Positions[i], m.SlotMapping[i] = int32(i), -1
	}
	return m
}

// Describe names the op and its shape, e.g. "paged_attention_decode seqs=8
// context=1000 heads=32/8 head_size=128 block=16".
func (b *Bench) Describe() string { return b.desc }

// Bytes is the memory traffic one call must cause: weights, activations
// and KV read plus outputs written, each once.
func (b *Bench) Bytes() int64 { return b.bytes }

// Flops is the arithmetic of one call (multiply and add count as two).
func (b *Bench) Flops() int64 { return b.flops }

// Iters is the number of op calls per repetition: 0 until the first Run
// calibrates it (or SetIters fixes it).
func (b *Bench) Iters() int { return b.iters }

// SetIters fixes the calls per repetition instead of calibrating, to repeat
// an earlier run's setting or to keep a test short.
func (b *Bench) SetIters(n int) { b.iters = max(n, 1) }

// Close frees the case's tensors.
func (b *Bench) Close() {
	for _, t := range b.tensors {
		b.be.Free(t)
	}
	b.tensors, b.hosts, b.refExperts = nil, nil, nil
	// Every step ran to its end (EndStep waits), and Free released what
	// aliased this memory.
	for _, free := range b.frees {
		free()
	}
	b.frees = nil
	if b.open {
		b.open = false
		live.Add(-1)
	}
}

// live counts the cases prepared and not yet closed (Live).
var live atomic.Int64

// Live is how many cases' data are allocated now, in this process: what a
// runner holds at once.
func Live() int64 { return live.Load() }

// Check runs the op once and compares its output against the kernels
// reference on the same inputs. It returns the max abs error, and an error
// when that exceeds the tolerance: relative to max(1, max|reference|), 1e-4
// when every dtype involved is f32, 5e-3 with f16 and 3e-2 with bf16
// weights or activations (where a GPU backend may also compute in that
// precision). Argmax must pick a largest logit exactly.
func (b *Bench) Check() (float64, error) {
	maxErr, scale, err := b.check()
	if err != nil {
		return maxErr, fmt.Errorf("%s: %w", b.desc, err)
	}
	limit := b.tol * max(1, scale)
	if !(maxErr <= limit) { // also catches NaN
		return maxErr, fmt.Errorf("%s: max abs error %.3g exceeds the %v tolerance %.3g (%.0e relative to %.3g)",
			b.desc, maxErr, b.tolDT, limit, b.tol, max(1, scale))
	}
	return maxErr, nil
}

// Run times one repetition: the op called Iters times inside one
// BeginStep/EndStep. The first Run calibrates Iters so a repetition takes
// about 30 ms; the calibration steps double as warm-up.
func (b *Bench) Run() ([]Sample, error) {
	if b.iters == 0 {
		if err := b.calibrate(); err != nil {
			return nil, err
		}
	}
	d, err := b.steps(b.iters)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.desc, err)
	}
	per := d.Seconds() / float64(b.iters)
	if per <= 0 { // a clock too coarse for the repetition: not a measurement
		return nil, fmt.Errorf("%s: repetition of %d calls measured %v", b.desc, b.iters, d)
	}
	out := []Sample{{"us_per_call", per * 1e6, "us"}}
	if b.bytes > 0 {
		out = append(out, Sample{"gb_s", float64(b.bytes) / per / 1e9, "GB/s"})
	}
	if b.flops > 0 {
		out = append(out, Sample{"gflop_s", float64(b.flops) / per / 1e9, "GFLOP/s"})
	}
	w, ok, err := b.Witness()
	if err != nil {
		return nil, err
	}
	if ok {
		out = append(out, w.Samples()...)
	}
	return out, nil
}

// calibrate grows the call count until a repetition is long enough to time
// well, then scales it to the target.
func (b *Bench) calibrate() error {
	if _, err := b.steps(1); err != nil { // warm-up: first-touch, kernel compiles
		return fmt.Errorf("%s: %w", b.desc, err)
	}
	n := 1
	for {
		d, err := b.steps(n)
		if err != nil {
			return fmt.Errorf("%s: %w", b.desc, err)
		}
		if d >= minCalibRep || n >= maxIters {
			iters := math.Round(float64(n) * float64(targetRep) / float64(max(d, 1)))
			b.iters = int(min(max(iters, 1), maxIters))
			return nil
		}
		// Jump straight to about minCalibRep when the estimate is usable, at
		// most 100x so one noisy sample cannot make the next step enormous.
		grow := 2.0
		if d > 0 {
			grow = min(max(float64(minCalibRep)/float64(d)*1.2, 2), 100)
		}
		n = min(int(float64(n)*grow), maxIters)
	}
}

// steps runs one step of n calls and returns the time from the first call
// to the end of EndStep (BeginStep's metadata upload is not the op's).
func (b *Bench) steps(n int) (time.Duration, error) {
	if err := b.be.BeginStep(b.meta, b.ids, false); err != nil {
		return 0, err
	}
	start := time.Now()
	// The call index restarts each step, so a step of n calls issues the
	// same ops on the same tensors every time: a GPU backend replays it as
	// one captured graph instead of timing launches.
	for i := range n {
		b.call(i)
	}
	_, err := b.be.EndStep()
	d := time.Since(start)
	if b.Slowdown > 0 {
		// Spin, not sleep: a sleep overshoots short steps by far more.
		until := start.Add(d + time.Duration(b.Slowdown*float64(d)))
		for time.Now().Before(until) {
		}
		d = time.Since(start)
	}
	return d, err
}

// once runs the op once in its own step, for Check, on the inputs the
// reference reads (call 0's: the first of any rotated copies).
func (b *Bench) once() error {
	if err := b.be.BeginStep(b.meta, b.ids, false); err != nil {
		return err
	}
	b.call(0)
	_, err := b.be.EndStep()
	return err
}

// ParamError is a case parameter the op does not support.
type ParamError struct {
	Param string
	Value string // as written in the suite; "" when the parameter is absent
	Msg   string
}

func (e *ParamError) Error() string {
	if e.Value == "" {
		return e.Param + ": " + e.Msg
	}
	return e.Param + "=" + e.Value + ": " + e.Msg
}
