package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/cache"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
	"github.com/mtlbench/mtlbench/runner/sched"
)

// Options configure an engine.
type Options struct {
	BlockSize int // KV block size in tokens (default 16)
	// KVTokens is the cache capacity in tokens (default 4096), rounded up to
	// whole blocks.
	KVTokens    int
	TokenBudget int // chunked-prefill budget per step; 0: unlimited
	MaxSeqs     int // 0: unlimited
	MoE         bridge.MoEParams
	Profile     bool
	// Synchronous runs each step to its end before recording the next, on
	// a backend that could overlap them (bridge.AsyncStepper): the cost of
	// the host's time between steps, measured.
	Synchronous bool
	// NoFusion runs every op of a step as its own kernel: the backend's
	// fusion table is not consulted (suites: fusion: off).
	NoFusion bool
	// KVDType is the KV cache's dtype: "auto" (or empty) keeps it in the
	// model's dtype where the backend reads one and keeps its default so
	// (bridge.AutoKVDType: not the CPU), else in the backend's activation
	// dtype; f32, f16 or bf16 ask for that one.
	KVDType string
	// AvailableMemory, when positive, is checked against weights + KV cache
	// + the largest step's activations before anything is allocated.
	AvailableMemory int64
	MemoryWhere     string
	// Tuned, when set, supplies tuned kernel configs (tuned.go); an explicit
	// MoE strategy still wins.
	Tuned TunedLookup
	// CheckLogits reads back the logits of every row a step samples, greedy
	// ones too (their token then the argmax of what was read), and fails
	// the step with a NonFiniteError where one holds a NaN or an infinity.
	// Without it only sampled rows and a request's first prompt logits
	// (WantLogits) are read; a greedy row's token is the device's argmax,
	// which gives bridge.NoToken for a row of no number (every logit NaN,
	// as a NaN met later, by a generated token's embedding row, leaves
	// them), failing the step the same way at no cost; a NaN or an
	// infinity among finite logits it passes over. The read back costs
	// what sampling's does, and the next step is not queued behind it:
	// generate sets it, benchmarks do not.
	CheckLogits bool
	// Slowdown lengthens every step by this fraction of its own time,
	// spinning after it: a known slowdown for measuring the perf gate's
	// power (MTLBENCH_TEST_SLOWDOWN, docs/perf-gate.md). 0 in real runs.
	Slowdown float64
}

func (o *Options) defaults() {
	if o.BlockSize == 0 {
		o.BlockSize = 16
	}
	if o.KVTokens == 0 {
		o.KVTokens = 4096
	}
	if o.MoE.Strategy == "" {
		o.MoE.Strategy = bridge.MoEGrouped
	}
	if o.MoE.ChunkSize == 0 {
		o.MoE.ChunkSize = 64
	}
}

// Request is one generation request.
type Request struct {
	ID           int
	Prompt       []int32
	MaxNewTokens int
	Sampling     sample.Params
	// WantLogits asks for the logits of the last prompt position.
	WantLogits bool
	// PrefillSplit, when positive, is a prompt position no prefill chunk
	// crosses; sequences that reach it wait for the others, so the rest of
	// the prompts is prefilled in one step and decoded together
	// (sched.Seq.Split: prefill at a depth).
	PrefillSplit int
	// Stop are tokens that end the request when sampled, kept as its last
	// token (the model's end-of-sequence tokens, model.Config.EOS); nil:
	// it generates MaxNewTokens, as a benchmark does.
	Stop []int32
	// Name is what errors call the request, as its user gave it
	// ("generate --tokens"); "" calls it "request <ID>", an id the caller
	// chose.
	Name string
}

// label is the request as errors name it (Name).
func (r Request) label() string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("request %d", r.ID)
}

// Sampled is a token a step produced for a request.
type Sampled struct {
	ReqID    int
	Token    int32
	First    bool // the request's first generated token (ends its prefill)
	Finished bool
	Logits   []float32 // last prompt position, when asked for
}

// StepResult describes one step.
type StepResult struct {
	Tokens        int // tokens computed
	PrefillTokens int
	// PrefillFrom is the first position the step's prefill chunks start at
	// (the smallest, across sequences); 0 when it prefills nothing.
	PrefillFrom  int
	DecodeTokens int
	// RecomputeTokens are tokens a preempted sequence computes again (its
	// cache was freed), prompt or generated: neither prefill nor decode.
	RecomputeTokens int
	Seqs            int
	Sampled         []Sampled
	Preempted       int
	// ContextTokens is the sum of the step's sequence lengths: the cached
	// positions its attention read on a layer that attends to every one;
	// WindowTokens those a layer that slides read, from each sequence's
	// first query's window on (kernels.KeysRead; ContextTokens without a
	// window).
	ContextTokens, WindowTokens int
	// Attended is the sum over the step's tokens of the positions each
	// attends to (causal), on either kind of layer: attention's work, for
	// the FLOP count.
	Attended model.Attended
	// LogitRows are the rows the LM head ran on.
	LogitRows int
	Duration  time.Duration
	// Encode is the host's time building and encoding the step, up to its
	// hand-off to the device, on backends that run steps apart from the
	// host (bridge.AsyncStepper); 0 on the others, whose ops run as they
	// are encoded. A step whose Encode is most of its Duration is
	// host-bound: the device waits for the host (docs/architecture.md).
	Encode time.Duration
	// Sample is the host's time drawing the step's sampled tokens: reading
	// its logits back and running each sampling row's sampler
	// (runner/sample); 0 for steps whose tokens are the device's argmax.
	// The next step waits for it.
	Sample time.Duration
	Stats  bridge.StepStats
}

// Engine runs one model on one backend.
type Engine struct {
	be    bridge.Backend
	cfg   *model.Config
	src   model.Source // its weights, read again only to explain non-finite logits
	opts  Options
	w     *weights
	kv    *cache.Manager
	cache []bridge.KVCache
	kvdt  bridge.DType
	sched *sched.Scheduler
	reqs  map[int]*reqState
	ws    map[[2]int]*workspace
	meta  bridge.StepMeta
	tuned Tuned
	run   bridge.Runner
	// wdt is the weights' dtype, which a backend may round prefill
	// attention's operands to (bridge.AttentionOp.Operand).
	wdt bridge.DType
	// rotary is the model's RoPE frequencies (model.Config.Rotary), made
	// once.
	rotary kernels.Rotary
	// flight is a step queued ahead of the one Step last returned (Step).
	flight *flight
	// wsCap bounds the bytes of the workspaces kept for reuse, the one in
	// flight aside: the largest step's (StepBytes counts two).
	wsCap int64
	// logits is the host's copy of a sampling step's logits, kept for the
	// next (a row of Qwen3's vocabulary is 600 KB).
	logits []float32
	// scratch is what every request's sampler draws in, one after another
	// (finish): one vocabulary's, not one per sampled sequence.
	scratch *sample.Scratch
}

type reqState struct {
	req     Request
	seq     *sched.Seq
	sampler *sample.Sampler
}

// RunsWindows reports whether be's attention slides a model's window past
// its length (bridge.WindowRunner).
func RunsWindows(be bridge.Backend) bool {
	w, ok := be.(bridge.WindowRunner)
	return ok && w.RunsWindows()
}

// KVDType resolves a requested KV cache dtype (Options.KVDType) for a model
// of dtype model on be.
func KVDType(be bridge.Backend, model bridge.DType, requested string) (bridge.DType, error) {
	var have []bridge.DType
	if k, ok := be.(bridge.KVCacheDTypes); ok {
		have = k.KVDTypes()
	}
	if requested == "" || requested == "auto" {
		return bridge.AutoKVDType(be, model), nil
	}
	dt, err := bridge.ParseDType(requested)
	if err != nil {
		return 0, fmt.Errorf("kv_dtype %q: want auto, f32, f16 or bf16", requested)
	}
	if dt != be.ActDType() && !slices.Contains(have, dt) {
		return 0, fmt.Errorf("kv_dtype %s: the %s backend keeps its KV cache in %v", dt, be.Info().Backend, be.ActDType())
	}
	return dt, nil
}

// LargestStep is the most tokens, and sampled rows, one step can hold: each
// of its tokens takes a KV cache slot, so no more than the cache's kvTokens,
// nor than the prefill budget (which the running sequences' decode tokens
// may fill past when it is below maxSeqs). A row is a sequence's last token
// (buildMeta samples no other), so there are at most seqs of them
// (the sequences there can be: each holds a block of the cache at least)
// and maxSeqs (0: no limit).
func LargestStep(kvTokens, budget, maxSeqs, seqs int) (tokens, rows int) {
	tokens = kvTokens
	if budget > 0 {
		tokens = min(tokens, max(budget, maxSeqs))
	}
	rows = min(tokens, seqs)
	if maxSeqs > 0 {
		rows = min(rows, maxSeqs)
	}
	return max(tokens, 0), max(rows, 0)
}

// StepBytes is what the steps of at most tokens tokens, rows of them
// sampled, hold beside the weights and the KV cache, in the backend's
// activation dtype act: two workspaces (workspaceBytes; the step in flight
// keeps its own while the next is made, and the engine keeps no more
// than one more step's worth cached, Engine.workspace) and a MoE layer's
// router logits and per (token, expert) outputs, which every backend keeps
// for the step. A prefill of a large batch holds gigabytes of these, so
// the fit check counts them.
func StepBytes(cfg *model.Config, act bridge.DType, tokens, rows int) int64 {
	step := 2 * workspaceBytes(cfg, act, tokens, rows)
	for l := 0; l < cfg.Layers; l++ {
		if cfg.IsMoELayer(l) {
			return step + int64(tokens)*(4*int64(cfg.NumExperts)+4*int64(cfg.TopK)*int64(cfg.Hidden))
		}
	}
	return step
}

// workspaceBytes is what workspace allocates for a step of tokens tokens,
// rows of them sampled: every layer's activations and the rows' logits.
func workspaceBytes(cfg *model.Config, act bridge.DType, tokens, rows int) int64 {
	a := int64(act.Size())
	q, kv := int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim)
	// resid, h, o and mlp are hidden wide; q and attn the query heads'.
	per := a * (4*int64(cfg.Hidden) + 2*q + 2*kv)
	for l := 0; l < cfg.Layers; l++ {
		if !cfg.IsMoELayer(l) {
			per += a * 2 * int64(cfg.Inter) // gate, up
			break
		}
	}
	var sampled int64
	if rows > 0 {
		sampled = int64(rows) * (a*int64(cfg.Hidden) + 4*int64(cfg.Vocab) + 4)
	}
	return int64(tokens)*per + sampled
}

// CheckFit returns a *FitError when weights plus a KV cache of dtype kvdt
// plus step bytes of a step's activations (StepBytes) exceed available
// bytes.
func CheckFit(cfg *model.Config, dt, kvdt bridge.DType, kvTokens int, step, available int64, where string) error {
	if available <= 0 {
		return nil
	}
	w, kv := cfg.WeightBytes(dt), cfg.KVBytesPerToken(kvdt)*int64(kvTokens)
	if w+kv+step <= available {
		return nil
	}
	e := &FitError{Model: cfg.Name, Weights: w, KV: kv, Step: step, Has: available, Where: where}
	// The layers offered leave a tenth of the memory for activations, the
	// runtime and the rest of the machine: filled to the byte, a truncated
	// model would leave the system nothing.
	room := available - available/10
	for n := cfg.Layers - 1; n >= 1; n-- {
		c, _ := cfg.WithLayers(n)
		if c.WeightBytes(dt)+c.KVBytesPerToken(kvdt)*int64(kvTokens)+step <= room {
			e.MaxLayers = n
			break
		}
	}
	return e
}

// New loads cfg's weights from src onto be and sets up the cache.
func New(be bridge.Backend, cfg *model.Config, src model.Source, opts Options) (*Engine, error) {
	return NewContext(context.Background(), be, cfg, src, opts)
}

// NewContext is New stopped by ctx between the weights' tensors: a large
// model's build takes minutes, and a signal stops it at the next tensor,
// the tensors made freed, with an error that is ctx's (stoppedError).
func NewContext(ctx context.Context, be bridge.Backend, cfg *model.Config, src model.Source, opts Options) (*Engine, error) {
	cfg = RunConfig(be, cfg)
	var tuned Tuned
	if opts.Tuned != nil {
		tuned = opts.Tuned(be, cfg, src.DType(), opts.MoE) // before defaults: it must see what was explicit
	}
	opts.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	if sc, ok := be.(bridge.ShapeChecker); ok {
		if err := sc.CheckShape(ShapeOf(cfg)); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Name, err)
		}
	}
	switch opts.MoE.Strategy {
	case bridge.MoELoop, bridge.MoEChunked, bridge.MoEGrouped:
	default:
		return nil, fmt.Errorf("unknown MoE strategy %q (want loop, chunked or grouped)", opts.MoE.Strategy)
	}
	// The block sizes the attention kernels take (ops.Specs); any other
	// would also size the cache past what the fit check counts.
	if bs := ops.Specs[ops.BlockSize].OneOf; !slices.Contains(bs, opts.BlockSize) {
		return nil, fmt.Errorf("KV cache block size %d is not supported (block sizes: %v tokens)", opts.BlockSize, bs)
	}
	if opts.MoE.ChunkSize < 0 {
		return nil, fmt.Errorf("MoE chunk of %d pairs: want a positive size (0: the default)", opts.MoE.ChunkSize)
	}
	if opts.KVTokens < 0 {
		return nil, fmt.Errorf("KV cache of %d tokens: want a positive size (0: the default)", opts.KVTokens)
	}
	// The scheduler reads 0 as no cap: a negative budget would run
	// unbounded and a negative seat count admit no request.
	if opts.TokenBudget < 0 {
		return nil, fmt.Errorf("prefill budget of %d tokens a step: want a positive budget (0: no limit)", opts.TokenBudget)
	}
	if opts.MaxSeqs < 0 {
		return nil, fmt.Errorf("%d sequences at once: want a positive count (0: no limit)", opts.MaxSeqs)
	}
	kvdt, err := KVDType(be, src.DType(), opts.KVDType)
	if err != nil {
		return nil, err
	}
	// The cache is allocated in whole blocks: the check counts them all.
	blocks := (opts.KVTokens + opts.BlockSize - 1) / opts.BlockSize
	tokens, rows := LargestStep(blocks*opts.BlockSize, opts.TokenBudget, opts.MaxSeqs, blocks)
	step := StepBytes(cfg, be.ActDType(), tokens, rows)
	wsCap := workspaceBytes(cfg, be.ActDType(), tokens, rows)
	if err := CheckFit(cfg, src.DType(), kvdt, blocks*opts.BlockSize, step, opts.AvailableMemory, opts.MemoryWhere); err != nil {
		return nil, err
	}
	w, err := uploadWeights(ctx, be, cfg, src)
	if err != nil {
		// No engine runs a failed or stopped build's weights, and none
		// could free them: nothing of it is left on the backend, where a
		// run's later cases would load beside it.
		if w != nil {
			w.free(be)
		}
		return nil, err
	}
	kv, err := cache.New(blocks, opts.BlockSize)
	if err != nil {
		w.free(be)
		return nil, err
	}
	e := &Engine{be: be, cfg: cfg, src: src, opts: opts, w: w, kv: kv, rotary: cfg.Rotary(), reqs: map[int]*reqState{}, ws: map[[2]int]*workspace{}, scratch: new(sample.Scratch), wsCap: wsCap, tuned: tuned, kvdt: kvdt,
		wdt: src.DType()}
	for l := 0; l < cfg.Layers; l++ {
		k, err := be.Alloc(kvdt, blocks, cfg.KVHeads, opts.BlockSize, cfg.HeadDim)
		if err != nil {
			e.Close()
			w.free(be)
			return nil, fmt.Errorf("KV cache: %w", err)
		}
		v, err := be.Alloc(kvdt, blocks, cfg.KVHeads, opts.BlockSize, cfg.HeadDim)
		if err != nil {
			be.Free(k)
			e.Close()
			w.free(be)
			return nil, fmt.Errorf("KV cache: %w", err)
		}
		e.cache = append(e.cache, bridge.KVCache{K: k, V: v, BlockSize: opts.BlockSize})
	}
	e.sched = sched.New(sched.Config{TokenBudget: opts.TokenBudget, MaxSeqs: opts.MaxSeqs}, kv)
	return e, nil
}

// Config is the model the engine runs.
func (e *Engine) Config() *model.Config { return e.cfg }

// Backend is the backend the engine runs on.
func (e *Engine) Backend() bridge.Backend { return e.be }

// KVDType is the dtype the KV cache is kept in.
func (e *Engine) KVDType() bridge.DType { return e.kvdt }

// Options are the engine's settings after defaults.
func (e *Engine) Options() Options { return e.opts }

// KV is the cache manager.
func (e *Engine) KV() *cache.Manager { return e.kv }

// Add queues a request. Bad requests (token ids outside the vocabulary,
// nothing to generate, more than the cache holds, sampling parameters the
// sampler cannot draw by) are refused here.
func (e *Engine) Add(r Request) error {
	if _, dup := e.reqs[r.ID]; dup {
		return fmt.Errorf("request %d: id already in use", r.ID)
	}
	seq, err := e.check(r)
	if err != nil {
		return err
	}
	if err := e.sched.Add(seq); err != nil {
		return err
	}
	e.reqs[r.ID] = &reqState{req: r, seq: seq, sampler: sample.NewIn(r.Sampling, uint64(r.ID), e.scratch)}
	return nil
}

// check refuses a bad request, as Add does, and returns its sequence
// without queuing it.
func (e *Engine) check(r Request) (*sched.Seq, error) {
	if len(r.Prompt) == 0 {
		return nil, fmt.Errorf("%s: empty prompt", r.label())
	}
	if r.MaxNewTokens < 1 {
		return nil, fmt.Errorf("%s: max new tokens must be at least 1, got %d", r.label(), r.MaxNewTokens)
	}
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= e.cfg.Vocab {
			return nil, fmt.Errorf("%s: token id %d at position %d is outside the vocabulary (0..%d)", r.label(), t, i, e.cfg.Vocab-1)
		}
	}
	// Against the room the prompt leaves, which cannot wrap as a sum can.
	if n, what := e.cfg.Context(); n > 0 && r.MaxNewTokens > n-len(r.Prompt) {
		return nil, fmt.Errorf("%s: %d prompt + %d new tokens exceed the model's %s", r.label(), len(r.Prompt), r.MaxNewTokens, what)
	}
	// Within its window a sliding layer attends to every position, so a
	// backend that does not slide runs a request that fits it exactly.
	if w := e.cfg.Window; w > 0 && !RunsWindows(e.be) && r.MaxNewTokens > w-len(r.Prompt) {
		return nil, fmt.Errorf("%s: %d prompt + %d new tokens exceed the model's %d-token sliding window, which the %s backend does not run past",
			r.label(), len(r.Prompt), r.MaxNewTokens, w, e.be.Info().Backend)
	}
	if err := r.Sampling.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", r.label(), err)
	}
	if r.PrefillSplit < 0 || r.PrefillSplit >= len(r.Prompt) {
		return nil, fmt.Errorf("%s: prefill split %d is not inside its %d-token prompt", r.label(), r.PrefillSplit, len(r.Prompt))
	}
	seq := &sched.Seq{ID: r.ID, Tokens: append([]int32(nil), r.Prompt...), Prompt: len(r.Prompt), MaxNew: r.MaxNewTokens,
		Split: r.PrefillSplit, Stop: r.Stop}
	if err := e.sched.Check(seq); err != nil {
		return nil, fmt.Errorf("%s: %w", r.label(), err)
	}
	return seq, nil
}

// Waiting is the number of requests queued and not yet running (preempted
// ones included).
func (e *Engine) Waiting() int { return e.sched.Waiting() }

// Pending reports whether requests remain.
func (e *Engine) Pending() bool { return e.flight != nil || e.sched.Pending() }

// flight is a step handed to the backend whose sampled tokens are not yet
// known.
type flight struct {
	b          *sched.Batch
	res        *StepResult
	ws         *workspace
	argmax     bool // sampled on the device: ids hold the tokens
	needLogits bool
	pend       bridge.PendingStep // nil: ended synchronously
	stats      bridge.StepStats
	ids        []int32
}

// Step runs one scheduler step and returns what it sampled. On a backend
// that can run a step while the host records the next (bridge.AsyncStepper),
// a decode step of greedy sequences also queues the step after it, whose
// tokens it is still computing, so the device never waits on the host
// between the two; that step's result is the next call's.
func (e *Engine) Step() (*StepResult, error) {
	res, err := e.step()
	if errors.Is(err, bridge.ErrNonFinite) {
		return nil, e.explainNonFinite(&NonFiniteError{Step: err, Model: e.src.Describe()})
	}
	return res, err
}

func (e *Engine) step() (*StepResult, error) {
	start := time.Now()
	p := e.flight
	e.flight = nil
	if p == nil {
		b, err := e.sched.Next()
		if err != nil {
			return nil, err
		}
		if b.NumTokens == 0 {
			return &StepResult{Preempted: len(b.Preempted)}, nil
		}
		if p, err = e.launch(b, nil); err != nil {
			return nil, err
		}
	}
	if p.pend != nil && p.argmax && !p.needLogits {
		next, err := e.sched.Ahead(p.b)
		if err == nil && next != nil {
			e.flight, err = e.launch(next, p)
		}
		if err != nil {
			e.flight = nil
			p.pend.Wait() // before its buffers are touched again
			return nil, err
		}
	}
	res, err := e.finish(p)
	if err != nil {
		e.Drain()
		return nil, err
	}
	res.Duration = lengthen(start, e.opts.Slowdown)
	return res, nil
}

// lengthen spins until the time since start has grown by frac and returns
// the whole elapsed time (frac 0: no wait). Spinning, not sleeping: a sleep
// overshoots by far more than a sub-millisecond step's tenth.
func lengthen(start time.Time, frac float64) time.Duration {
	d := time.Since(start)
	if frac <= 0 {
		return d
	}
	until := start.Add(d + time.Duration(frac*float64(d)))
	for time.Now().Before(until) {
	}
	return time.Since(start)
}

// Close waits for a step still in flight and hands the backend back the
// engine's KV cache and workspaces, so that an engine made after it on the
// same backend allocates into that memory instead of beside it, waiting
// for the garbage collector (the weights stay: the backend keeps them).
// The engine is not used after Close.
func (e *Engine) Close() {
	e.Drain()
	for k, w := range e.ws {
		e.freeWorkspace(w)
		delete(e.ws, k)
	}
	for _, c := range e.cache {
		e.be.Free(c.K)
		e.be.Free(c.V)
	}
	e.cache = nil
}

// Drain waits for a step still in flight and drops its result, for an
// engine abandoned mid-run: its backend may then be given to another.
func (e *Engine) Drain() {
	if f := e.flight; f != nil {
		e.flight = nil
		if f.pend != nil {
			f.pend.Wait()
		}
	}
}

// launch records batch b and hands it to the backend: submitted when the
// backend runs steps asynchronously, run to its end otherwise. prev, when
// set, is the step still in flight whose argmax holds b's token ids on the
// device.
func (e *Engine) launch(b *sched.Batch, prev *flight) (*flight, error) {
	start := time.Now()
	res := &StepResult{Tokens: b.NumTokens, Seqs: len(b.Items), Preempted: len(b.Preempted)}
	f := &flight{b: b, res: res}
	for _, it := range b.Items {
		// A preempted sequence's positions computed before are recompute;
		// of the rest, those before the prompt's end are prefill and the
		// one past it that samples the next token is a decode token.
		from := it.Start + it.Recompute
		prefill := max(min(it.Seq.Prompt-from, it.Start+it.N-from), 0)
		res.RecomputeTokens += it.Recompute
		if gen := it.N - it.Recompute - prefill; gen > 0 {
			decode := 0
			if it.Sample {
				decode = 1
			}
			res.DecodeTokens += decode
			res.RecomputeTokens += gen - decode
		}
		if prefill > 0 {
			if res.PrefillTokens == 0 || from < res.PrefillFrom {
				res.PrefillFrom = from
			}
			res.PrefillTokens += prefill
		}
		st := e.reqs[it.Seq.ID]
		if it.Sample && (e.opts.CheckLogits || !st.req.Sampling.Greedy() || (st.req.WantLogits && it.Start+it.N == it.Seq.Prompt)) {
			f.needLogits = true
		}
	}
	tokens := e.buildMeta(b)
	for s, l := range e.meta.SeqLens {
		// The n new tokens sit at positions l-n..l-1.
		n := int(e.meta.QueryStartLoc[s+1] - e.meta.QueryStartLoc[s])
		ctx := int(l) - n
		res.ContextTokens += int(l)
		res.WindowTokens += int(kernels.KeysRead(ctx, n, e.cfg.Window))
		res.Attended.All += kernels.AttendedKeys(ctx, n, 0)
		res.Attended.Window += kernels.AttendedKeys(ctx, n, e.cfg.Window)
	}
	res.LogitRows = len(e.meta.LogitRows)
	defer e.applyTuned(b.NumTokens)()
	var busy *workspace
	if prev != nil {
		busy = prev.ws
	}
	ws, err := e.workspace(b.NumTokens, len(e.meta.LogitRows), busy)
	if err != nil {
		return nil, err
	}
	f.ws = ws
	async, _ := e.be.(bridge.AsyncStepper)
	if e.opts.Profile || e.opts.Synchronous {
		async = nil
	}
	if prev != nil {
		err = async.BeginStepFrom(&e.meta, prev.ws.argmax)
	} else {
		err = e.be.BeginStep(&e.meta, tokens, e.opts.Profile)
	}
	if err != nil {
		return nil, err
	}
	f.argmax = len(e.meta.LogitRows) > 0 && !f.needLogits
	e.run.Run(e.be, e.stepOps(ws, ws.hl != nil && !e.allRowsSample(), f.argmax), !e.opts.NoFusion, e.opts.Profile)
	var ids bridge.Tensor
	if f.argmax {
		ids = ws.argmax
	}
	if async != nil {
		if f.pend, err = async.SubmitStep(ids); err != nil {
			return nil, err
		}
		res.Encode = time.Since(start)
		return f, nil
	}
	if _, ok := e.be.(bridge.AsyncStepper); ok {
		res.Encode = time.Since(start) // synchronous or profiled: EndStep waits
	}
	if f.stats, err = e.be.EndStep(); err != nil {
		return nil, err
	}
	if f.argmax {
		f.ids = make([]int32, len(e.meta.LogitRows))
		err = e.be.ReadI32(ws.argmax, f.ids)
	}
	return f, err
}

// finish waits for a launched step and gives each sampling sequence its
// token.
func (e *Engine) finish(f *flight) (*StepResult, error) {
	res := f.res
	ids, stats := f.ids, f.stats
	if f.pend != nil {
		var err error
		if stats, ids, err = f.pend.Wait(); err != nil {
			return nil, err
		}
	}
	res.Stats = stats
	var logits []float32
	if f.needLogits {
		defer func(start time.Time) { res.Sample = time.Since(start) }(time.Now())
		e.logits = slices.Grow(e.logits[:0], f.ws.logits.Len())[:f.ws.logits.Len()]
		logits = e.logits
		if err := e.be.Read(f.ws.logits, logits); err != nil {
			return nil, err
		}
	}
	row := 0
	for _, it := range f.b.Items {
		if !it.Sample {
			continue
		}
		st := e.reqs[it.Seq.ID]
		at := it.Start + it.N // the position this row samples
		s := Sampled{ReqID: it.Seq.ID, First: at == it.Seq.Prompt}
		if logits != nil {
			lr := logits[row*e.cfg.Vocab : (row+1)*e.cfg.Vocab]
			if i, v, bad := model.NonFinite(lr); bad {
				return nil, e.nonFiniteError(it.Seq.ID, at-1, i, v)
			}
			s.Token = st.sampler.Next(lr)
			if st.req.WantLogits && s.First {
				s.Logits = append([]float32(nil), lr...)
			}
		} else {
			if row >= len(ids) {
				return nil, fmt.Errorf("internal: the step returned %d tokens, want more than %d", len(ids), row)
			}
			if ids[row] == bridge.NoToken {
				// The device's argmax found no number among the row's
				// logits, reading each as it does every step: what the
				// host's check of logits it reads back finds, at no cost.
				return nil, e.explainNonFinite(&NonFiniteError{Req: it.Seq.ID, ReqName: e.reqName(it.Seq.ID), Pos: at - 1, Token: -1,
					Value: float32(math.NaN()), Model: e.src.Describe()})
			}
			s.Token = ids[row]
		}
		row++
		e.sched.Put(it.Seq, at, s.Token)
		s.Finished = it.Seq.Finished
		if s.Finished {
			delete(e.reqs, it.Seq.ID)
		}
		res.Sampled = append(res.Sampled, s)
	}
	return res, nil
}

// NonFiniteError: a step computed NaN or infinite logits, or its backend
// met NaN inside it (Step, wrapping bridge.ErrNonFinite: a MoE router's
// probabilities), so the model's weights or configuration are broken and
// any figure from it is garbage. Model is its source and Tensor the first
// weight holding a NaN or an infinity ("" when every weight is finite).
// Token is -1 where the device's argmax found them (bridge.NoToken), which
// leaves the logits unread: Value is then NaN, standing for them all.
type NonFiniteError struct {
	Req, Pos, Token int
	ReqName         string // Request.Name, "" for "request <Req>"
	Value           float32
	Step            error
	Model, Tensor   string
}

func (e *NonFiniteError) Error() string {
	req := Request{ID: e.Req, Name: e.ReqName}.label()
	msg := fmt.Sprintf("%s: the model computed non-finite logits (%v for token %d at position %d of %s)", e.Model, e.Value, e.Token, e.Pos, req)
	if e.Token < 0 {
		msg = fmt.Sprintf("%s: the model computed non-finite logits (every one NaN or -inf, as the device's argmax found them, at position %d of %s)", e.Model, e.Pos, req)
	}
	if e.Step != nil {
		msg = fmt.Sprintf("%s: %v", e.Model, e.Step)
	}
	if e.Tensor != "" {
		return msg + fmt.Sprintf(": its tensor %s holds a NaN or an infinity", e.Tensor)
	}
	return msg + ": every weight is finite, so its configuration (rope_theta, rms_norm_eps) or weights too large for the arithmetic are to blame"
}

func (e *NonFiniteError) Unwrap() error { return e.Step }

// nonFiniteError explains non-finite logits by the first weight that holds
// a NaN or an infinity: the whole model is read, once, on the way out.
func (e *Engine) nonFiniteError(req, pos, token int, v float32) error {
	return e.explainNonFinite(&NonFiniteError{Req: req, ReqName: e.reqName(req), Pos: pos, Token: token, Value: v, Model: e.src.Describe()})
}

// reqName is request id's Name, "" where it has none or is gone.
func (e *Engine) reqName(id int) string {
	if st := e.reqs[id]; st != nil {
		return st.req.Name
	}
	return ""
}

// explainNonFinite names the first weight holding a NaN or an infinity in
// err.
func (e *Engine) explainNonFinite(err *NonFiniteError) error {
	name, scanErr := model.FindNonFinite(e.cfg, e.src)
	if scanErr != nil {
		return fmt.Errorf("%w (and its weights could not be read again: %v)", err, scanErr)
	}
	err.Tensor = name
	return err
}

// CheckFinite runs a short request through a fresh engine and fails with a
// NonFiniteError if its logits are not all finite: a model computing NaN
// runs as fast as any other, so a benchmark checks before it times.
// ctx stops the engine's build (NewContext).
func CheckFinite(ctx context.Context, be bridge.Backend, cfg *model.Config, src model.Source, opts Options) error {
	opts.Profile = false
	opts.AvailableMemory = 0
	e, err := NewContext(ctx, be, cfg, src, opts)
	if err != nil {
		return err
	}
	defer e.Close()
	prompt := make([]int32, min(4, cfg.Vocab))
	for i := range prompt {
		prompt[i] = int32((i*7919 + 1) % cfg.Vocab)
	}
	_, err = e.Generate([]Request{{Prompt: prompt, MaxNewTokens: 1, WantLogits: true}})
	return err
}

// buildMeta fills the step's attention metadata from the batch and returns
// the token ids to embed.
func (e *Engine) buildMeta(b *sched.Batch) []int32 {
	m := &e.meta
	maxBlocks := 0
	for _, it := range b.Items {
		maxBlocks = max(maxBlocks, len(e.kv.BlockTable(it.Seq.ID)))
	}
	*m = bridge.StepMeta{
		NumTokens: b.NumTokens, NumSeqs: len(b.Items), MaxBlocks: maxBlocks, BlockSize: e.opts.BlockSize,
		Positions: m.Positions[:0], SlotMapping: m.SlotMapping[:0], QueryStartLoc: append(m.QueryStartLoc[:0], 0),
		SeqLens: m.SeqLens[:0], BlockTable: m.BlockTable[:0], LogitRows: m.LogitRows[:0],
	}
	tokens := make([]int32, 0, b.NumTokens)
	for _, it := range b.Items {
		q := it.Seq
		tokens = append(tokens, q.Tokens[it.Start:it.Start+it.N]...)
		for p := it.Start; p < it.Start+it.N; p++ {
			m.Positions = append(m.Positions, int32(p))
		}
		m.SlotMapping = append(m.SlotMapping, it.Slots...)
		end := m.QueryStartLoc[len(m.QueryStartLoc)-1] + int32(it.N)
		m.QueryStartLoc = append(m.QueryStartLoc, end)
		// The full length: everything cached before plus this chunk.
		seqLen := int32(it.Start + it.N)
		m.SeqLens = append(m.SeqLens, seqLen)
		m.MaxSeqLen = max(m.MaxSeqLen, int(seqLen))
		m.MaxQueryLen = max(m.MaxQueryLen, it.N)
		if it.N == 1 {
			m.NumDecodeTokens++
		}
		tab := e.kv.BlockTable(q.ID)
		m.BlockTable = append(m.BlockTable, tab...)
		for i := len(tab); i < maxBlocks; i++ {
			m.BlockTable = append(m.BlockTable, 0)
		}
		if it.Sample {
			m.LogitRows = append(m.LogitRows, end-1)
		}
	}
	return tokens
}

// Output is a finished request.
type Output struct {
	ID     int
	Tokens []int32
	Logits []float32 // last prompt position, when asked for
}

// Generate runs requests to completion on an engine with nothing else
// queued and returns their outputs in the order given. Every request is
// checked before any is queued: one refused leaves the engine as it was.
func (e *Engine) Generate(reqs []Request) ([]Output, error) {
	if e.Pending() {
		// Their tokens would run in these steps, with no output to go to.
		return nil, fmt.Errorf("generate: the engine already has requests queued (%d); Generate runs its own alone", len(e.reqs))
	}
	idx := map[int]int{}
	out := make([]Output, len(reqs))
	for i, r := range reqs {
		if j, dup := idx[r.ID]; dup {
			return nil, fmt.Errorf("request %d: id given twice (requests %d and %d of %d)", r.ID, j+1, i+1, len(reqs))
		}
		if _, err := e.check(r); err != nil {
			return nil, err
		}
		idx[r.ID] = i
		out[i].ID = r.ID
	}
	for _, r := range reqs {
		if err := e.Add(r); err != nil {
			return nil, err
		}
	}
	for e.Pending() {
		res, err := e.Step()
		if err != nil {
			return nil, err
		}
		for _, s := range res.Sampled {
			o := &out[idx[s.ReqID]]
			o.Tokens = append(o.Tokens, s.Token)
			if s.Logits != nil {
				o.Logits = s.Logits
			}
		}
	}
	return out, nil
}

// ErrNoBlocks is the cache's out-of-blocks error, for callers to test with
// errors.Is.
var ErrNoBlocks = cache.ErrNoBlocks
