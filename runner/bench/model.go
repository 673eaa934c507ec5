package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/internal/quantile"
	"github.com/mtlbench/mtlbench/internal/reqlen"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
	"github.com/mtlbench/mtlbench/runner/tune"
	"gonum.org/v1/gonum/stat/distuv"
)

// Workload is what one model case asks of the engine.
type Workload struct {
	Requests  int
	PromptLen int
	GenLen    int
	// Depth is the context before each prompt (suites.ModelParams.Depth):
	// prompts are Depth+PromptLen tokens, filled up to the depth first
	// (engine.Request.PrefillSplit), and prefill figures count the steps at
	// or after it.
	Depth int
	// Stagger, when positive, adds one request every Stagger steps instead
	// of all at once.
	Stagger int
	// Rate, when positive, has the requests arrive on the wall clock as a
	// Poisson process of Rate a second (Arrivals), each added to the
	// engine at its first step boundary after it arrives.
	Rate float64
	// Burstiness, other than 0 and 1, draws the gaps from a gamma
	// distribution of that shape instead (vLLM's --burstiness).
	Burstiness float64
	// SLO bounds a request's latencies in ms by target (ttft, tpot, e2el):
	// the requests meeting every bound make goodput_per_s.
	SLO map[string]float64
	// RangeRatio, when positive, draws each request's prompt and output
	// lengths around PromptLen and GenLen (reqlen.Bounds, Lengths).
	RangeRatio float64
	Sampling   sample.Params
	Seed       uint64
}

// Lengths are each request's prompt (after the depth) and output lengths:
// PromptLen and GenLen, or with a range ratio drawn uniformly from their
// bounds, seeded so every repetition and build runs the same requests.
func (w Workload) Lengths() (prompt, gen []int) {
	return reqlen.Draw(w.Requests, w.PromptLen, w.GenLen, w.RangeRatio, w.Seed)
}

// longest is the request of the most tokens Lengths draws (the first of
// them): its prompt (after the depth) and output lengths. A range's largest
// lengths may be drawn by no request, so what must hold every request the
// run makes (a cache, the model's positions) is checked against this one.
func (w Workload) longest() (i, prompt, gen int) {
	return w.longestWithin(func() bool { return true })
}

// longestWithin is longest, drawing a request only while more says so
// (a check's bound of work): what it found before then where it stops.
func (w Workload) longestWithin(more func() bool) (i, prompt, gen int) {
	if w.RangeRatio <= 0 {
		return 0, w.PromptLen, w.GenLen // every request's, with nothing drawn
	}
	// Stopped at the first request as long as the range allows: none
	// after it is longer, and a million need not be drawn to know it.
	mp, mg := w.maxLens()
	j := 0
	reqlen.Each(w.Requests, w.PromptLen, w.GenLen, w.RangeRatio, w.Seed, func(p, g int) bool {
		if p+g > prompt+gen {
			i, prompt, gen = j, p, g
		}
		j++
		return prompt+gen < mp+mg && more()
	})
	return i, prompt, gen
}

// maxLens are the longest prompt and output Lengths may draw.
func (w Workload) maxLens() (prompt, gen int) {
	_, prompt = reqlen.Bounds(w.PromptLen, w.RangeRatio, 1)
	_, gen = reqlen.Bounds(w.GenLen, w.RangeRatio, 1)
	return prompt, gen
}

// Arrivals are the requests' arrival times from the workload's start: the
// first at once, the gaps after it exponential with mean 1/Rate, or gamma
// of shape Burstiness and the same mean as vLLM draws them, seeded so every
// repetition and every build sees the same ones; nil unless Rate is set.
func (w Workload) Arrivals() []time.Duration {
	if w.Rate <= 0 {
		return nil
	}
	src := rand.NewPCG(w.Seed, 11)
	gap := rand.New(src).ExpFloat64 // Poisson: the draws recorded runs were made with
	if w.Burstiness > 0 && w.Burstiness != 1 {
		gap = distuv.Gamma{Alpha: w.Burstiness, Beta: w.Burstiness, Src: src}.Rand
	}
	out := make([]time.Duration, w.Requests)
	var t float64 // seconds
	for i := range out {
		if i > 0 {
			t += gap() / w.Rate
		}
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out
}

// Prompts are the workload's prompts: seeded random token ids, the same for
// every repetition.
func (w Workload) Prompts(vocab int) [][]int32 {
	next := w.prompts(vocab)
	out := make([][]int32, w.Requests)
	for i := range out {
		out[i] = next()
	}
	return out
}

// prompts returns Prompts one at a time, in order, each made when asked
// for: a case of a million requests never holds them all.
func (w Workload) prompts(vocab int) func() []int32 {
	rng := rand.New(rand.NewPCG(w.Seed, 7))
	lens, _ := w.Lengths()
	i := 0
	return func() []int32 {
		p := make([]int32, w.Depth+lens[i])
		for j := range p {
			p[j] = int32(rng.IntN(vocab))
		}
		i++
		return p
	}
}

// requests returns the workload's engine requests one at a time, in order:
// its prompts, each to its output length, each sampling from a seed of its
// own.
func (w Workload) requests(vocab int) func() engine.Request {
	_, gens := w.Lengths()
	prompt := w.prompts(vocab)
	i := 0
	return func() engine.Request {
		sp := w.Sampling
		sp.Seed += uint64(i)
		// The context before the prompt is filled first, in chunks that
		// end at the depth, so the prompt is a step of its own.
		r := engine.Request{ID: i, Prompt: prompt(), MaxNewTokens: gens[i], Sampling: sp, PrefillSplit: w.Depth}
		i++
		return r
	}
}

// KVTokens is the cache a workload needs to run without preemption: its
// longest request's blocks for each request running at once, at most
// maxSeqs of them (0: every request). A finished request's blocks go to
// the next, so requests queued past maxSeqs need none of their own.
func (w Workload) KVTokens(blockSize, maxSeqs int) int {
	p, g := w.maxLens()
	per := (w.Depth + p + g + blockSize - 1) / blockSize * blockSize
	n := w.Requests
	if maxSeqs > 0 {
		n = min(n, maxSeqs)
	}
	return n * per
}

// ModelCase runs a workload end to end through the scheduler.
type ModelCase struct {
	Backend bridge.Backend
	Config  *model.Config
	Source  model.Source
	Engine  engine.Options
	Work    Workload
	// Bandwidth is the device's read bandwidth in bytes/s (0: unknown).
	Bandwidth float64
	// MatmulPeak is the device's measured matrix-multiply rate for the
	// model's weight dtype, in FLOP/s (0: unknown): prefill's roofline.
	MatmulPeak float64
	// WitnessGPU is the Apple GPU whose bandwidth turns the bytes the cost
	// witness counts into witness_tok_s (the case's witness_gpu).
	WitnessGPU applegpu.GPU

	// StepLog, when set, is given every step of a repetition that ran
	// tokens, in order (Case and Rep left for the caller to fill).
	StepLog func(StepRecord)

	bytes *stepCost
	tuned *tune.Store // what Engine.Tuned looks up, for the case's parameters
	// moeUsed are the MoE dispatches the repetitions' steps took from the
	// tuned configs, as the engine names them ("chunked/16 (user cache)").
	moeUsed map[string]bool
	// others are the weights of the run's other models, held in the
	// process while this case runs: their resident share is not its peak.
	others []model.Source
}

// noteTuned keeps the MoE dispatches e's steps took from the tuned configs.
func (m *ModelCase) noteTuned(e *engine.Engine) {
	used := e.TunedUsed()[string(ops.MoE)]
	if used == "" {
		return
	}
	if m.moeUsed == nil {
		m.moeUsed = map[string]bool{}
	}
	for _, c := range strings.Split(used, "; ") {
		m.moeUsed[c] = true
	}
}

// TunedMoEUsed lists the MoE dispatches the case's steps took from the
// tuned configs so far, sorted; nil when it looked none up.
func (m *ModelCase) TunedMoEUsed() []string {
	return slices.Sorted(maps.Keys(m.moeUsed))
}

// othersResident is the memory the run's other models hold resident now
// (host.Resident), 0 where the kernel does not say.
func (m *ModelCase) othersResident() int64 {
	var n int64
	for _, src := range m.others {
		for _, b := range model.Memory(src) {
			if r := host.Resident(b); r > 0 {
				n += r
			}
		}
	}
	return n
}

// RepResult is one repetition's record.
type RepResult struct {
	Samples []results.Sample
	Timings []results.OpTiming
	// Operands are the kernel arguments as the cost witness counted them
	// (the Metal emulator): a kernel case's call, or a model case's decode
	// step (the mean over its decode steps).
	Operands []results.OperandTraffic
	// DecodeStepTime is the median pure-decode step, for overhead checks.
	DecodeStepTime time.Duration
	// Wall is the whole workload, from the first request to the last token.
	Wall time.Duration
}

// reqTimes are a request's arrival and token times as offsets from the
// repetition's start: 8 bytes a token where a time.Time takes 24, for every
// token of the repetition, and the same differences (both read the
// monotonic clock).
type reqTimes struct {
	added  time.Duration
	tokens []time.Duration
}

// Rep runs the workload once on a fresh engine (the weights are shared).
func (m *ModelCase) Rep(ctx context.Context, profile bool) (*RepResult, error) {
	opts := m.Engine
	// A backend keeping an in-place timeline gives the per-op times from
	// the steps as they run, graphs and overlapped launches and all,
	// instead of profiling them one op at a time.
	tl, _ := m.Backend.(bridge.Timeliner)
	inPlace := profile && tl != nil && tl.TimelineOn()
	opts.Profile = profile && !inPlace
	opts.AvailableMemory = 0 // every case was checked before the run
	e, err := engine.NewContext(ctx, m.Backend, m.Config, m.Source, opts)
	if err != nil {
		return nil, err
	}
	if m.bytes == nil {
		m.bytes = newStepCost(e.Config(), m.Source.DType(), e.KVDType()) // the formats as the backend runs them
	}
	// A cancelled run may leave a step in flight; the next repetition's
	// engine takes this one's memory.
	defer e.Close()
	defer m.noteTuned(e)
	w := m.Work
	request := w.requests(m.Config.Vocab)
	n := w.Requests
	times := make([]reqTimes, n)
	// Requests arrive (arrived: their times start) and are handed to the
	// engine (next) as the scheduler can seat them: its queue holds as
	// many as one step admits (every one without a seat limit), so each
	// step admits what it would from all of them, while a case of a
	// million requests holds a handful of prompts and samplers, not all.
	arrived, next := 0, 0
	queue := n
	if m.Engine.MaxSeqs > 0 {
		queue = m.Engine.MaxSeqs
	}
	arrivals := w.Arrivals()
	var start time.Time
	// due says whether request i has arrived by step (or, on the wall
	// clock, by now), and when it did.
	due := func(i, step int) (bool, time.Time) {
		if arrivals != nil {
			at := start.Add(arrivals[i])
			return !time.Now().Before(at), at
		}
		return w.Stagger == 0 || step >= i*w.Stagger, time.Now()
	}
	admit := func(step int) error {
		for arrived < n {
			ok, at := due(arrived, step)
			if !ok {
				break
			}
			// A request's latencies count from its arrival: waiting for
			// the step in flight to end, or for a seat, is part of its
			// time to first token.
			times[arrived].added = at.Sub(start)
			arrived++
		}
		for next < arrived && e.Waiting() < queue {
			if err := e.Add(request()); err != nil {
				return err
			}
			next++
		}
		return nil
	}
	var (
		decodeTokens, prefillTokens, preempted int
		decodeTime, prefillTime                time.Duration
		prefillFLOPs                           float64
		decodeSteps, encodes, devices, draws   []time.Duration
		decodeBytes                            float64
		dispatches                             []float64
		witness                                witnessSum
		opSum                                  = map[[3]string]time.Duration{}
		opBytes                                = map[[3]string]opWitness{}
		opOrder                                [][3]string
		profiledSteps                          int
	)
	ran := 0             // steps that ran tokens: StepLog's and an error's numbering
	var spans []stepSpan // each step's launches, for the in-place timeline
	launched := 0        // launches since the timeline started
	if inPlace {
		if err := tl.TimelineStart(); err != nil {
			return nil, err
		}
	}
	host.ResetPeakRSS()
	others := m.othersResident() // in the peak from its start: not this case's
	start = time.Now()
	for step := 0; next < n || e.Pending(); step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.Pending() && next == arrived && arrived < n {
			// Nothing runs until the next arrival: its steps would be
			// empty, so the clock jumps to it (on the wall clock, waits).
			if arrivals != nil {
				if err := sleepUntil(ctx, start.Add(arrivals[arrived])); err != nil {
					return nil, err
				}
			} else {
				step = max(step, arrived*w.Stagger)
			}
		}
		if err := admit(step); err != nil {
			return nil, err
		}
		res, err := e.Step()
		if nf := (*engine.NonFiniteError)(nil); errors.As(err, &nf) {
			// Which step of the repetition (as --steps numbers them): a
			// model fine at its first logits (CheckFinite) may compute NaN
			// only later.
			return nil, fmt.Errorf("step %d of the repetition: %w", ran, err)
		}
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if res.Tokens > 0 {
			if m.StepLog != nil {
				m.StepLog(stepRecord(ran, res))
			}
			ran++
		}
		for _, s := range res.Sampled {
			times[s.ReqID].tokens = append(times[s.ReqID].tokens, now.Sub(start))
		}
		preempted += res.Preempted
		if inPlace {
			spans = append(spans, stepSpan{from: launched, to: launched + res.Stats.Dispatches,
				decode: res.PrefillTokens == 0 && res.Tokens > 0})
			launched += res.Stats.Dispatches
		}
		if res.PrefillTokens > 0 && res.PrefillFrom < w.Depth {
			continue // filling the context before the measured prompt
		}
		if res.RecomputeTokens > 0 {
			continue // a preempted sequence's tokens again: neither figure's work
		}
		if res.PrefillTokens > 0 {
			prefillTokens += res.PrefillTokens
			prefillTime += res.Duration
			prefillFLOPs += m.Config.StepFLOPs(int64(res.Tokens), res.Attended, int64(res.LogitRows))
			continue
		}
		if res.Tokens == 0 {
			continue
		}
		decodeTokens += res.DecodeTokens
		decodeTime += res.Duration
		decodeSteps = append(decodeSteps, res.Duration)
		if res.Encode > 0 {
			encodes = append(encodes, res.Encode)
		}
		if res.Sample > 0 {
			draws = append(draws, res.Sample)
		}
		if res.Stats.DeviceTime > 0 {
			devices = append(devices, res.Stats.DeviceTime)
		}
		ideal := m.stepBytes(res)
		decodeBytes += float64(ideal)
		witness.add(res, ideal)
		if res.Stats.Dispatches > 0 {
			dispatches = append(dispatches, float64(res.Stats.Dispatches))
		}
		if opts.Profile {
			profiledSteps++
			for _, t := range res.Stats.Timings {
				k := [3]string{strconv.Itoa(t.Layer), t.Component, t.Op}
				if _, ok := opSum[k]; !ok {
					opOrder = append(opOrder, k)
				}
				opSum[k] += t.Duration
				opBytes[k] = opWitness{opBytes[k].counted + t.CountedBytes, opBytes[k].footprint + t.FootprintBytes,
					opBytes[k].critical + t.CriticalLoads}
			}
		}
	}
	wall := time.Since(start)
	if inPlace {
		ls, err := tl.Timeline()
		if err != nil {
			return nil, fmt.Errorf("in-place timeline: %w", err)
		}
		var ts []bridge.OpTiming
		ts, profiledSteps = inPlaceTimings(ls, spans)
		for _, t := range ts {
			k := [3]string{strconv.Itoa(t.Layer), t.Component, t.Op}
			if _, ok := opSum[k]; !ok {
				opOrder = append(opOrder, k)
			}
			opSum[k] += t.Duration
		}
	}

	r := &RepResult{Wall: wall}
	add := func(metric string, v float64, unit string) {
		r.Samples = append(r.Samples, results.Sample{Metric: metric, Value: v, Unit: unit})
	}
	req := requestLatencies(times, w.SLO)
	if decodeTime > 0 {
		add("decode_tok_s", float64(decodeTokens)/decodeTime.Seconds(), "tok/s")
		med := quantile.Duration(decodeSteps, 0.5)
		r.DecodeStepTime = med
		add("step_ms", ms(med), "ms")
		if len(encodes) > 0 {
			enc := quantile.Duration(encodes, 0.5)
			add("encode_ms", ms(enc), "ms")
			add("encode_frac", float64(enc)/float64(med), "ratio")
		}
		if len(draws) > 0 {
			add("sample_ms", ms(quantile.Duration(draws, 0.5)), "ms")
		}
		if len(devices) > 0 {
			dev := quantile.Duration(devices, 0.5)
			add("device_ms", ms(dev), "ms")
			add("device_frac", busyFrac(dev, med), "ratio")
		}
		bytesPerStep := decodeBytes / float64(len(decodeSteps))
		add("bytes_per_step", bytesPerStep, "B")
		gbs := bytesPerStep / (decodeTime.Seconds() / float64(len(decodeSteps)))
		add("achieved_gb_s", gbs/1e9, "GB/s")
		if m.Bandwidth > 0 {
			add("roofline_frac", gbs/m.Bandwidth, "ratio")
		}
	}
	if len(dispatches) > 0 {
		// Kernel launches (CUDA) or dispatches (Metal) of a decode step:
		// what fusion saves.
		add("dispatches_per_step", quantile.Of(dispatches, 0.5), "count")
	}
	if witness.steps > 0 && witness.steps == len(decodeSteps) {
		for _, s := range witness.samples(m.WitnessGPU) {
			add(s.Metric, s.Value, s.Unit)
		}
		r.Operands = witness.operands()
	}
	if prefillTime > 0 {
		add("prefill_tok_s", float64(prefillTokens)/prefillTime.Seconds(), "tok/s")
		// Prefill against the compute roofline: the steps' matmul and
		// attention FLOPs (model.Config.StepFLOPs) over their time.
		rate := prefillFLOPs / prefillTime.Seconds()
		add("prefill_gflop_s", rate/1e9, "GFLOP/s")
		if m.MatmulPeak > 0 {
			add("prefill_roofline_frac", rate/m.MatmulPeak, "ratio")
		}
	}
	for _, smp := range req.samples(wall) {
		add(smp.Metric, smp.Value, smp.Unit)
	}
	if rss := host.PeakRSS(); rss > 0 {
		add("peak_rss_bytes", float64(max(rss-others, 0)), "B")
	}
	add("preemptions", float64(preempted), "count")
	if profile && profiledSteps > 0 {
		for _, k := range opOrder {
			layer, _ := strconv.Atoi(k[0])
			w, n := opBytes[k], int64(profiledSteps)
			r.Timings = append(r.Timings, results.OpTiming{Layer: layer, Component: k[1], Op: k[2],
				Seconds: opSum[k].Seconds() / float64(profiledSteps), Calls: profiledSteps,
				Bytes: (w.counted + n/2) / n, Footprint: (w.footprint + n/2) / n, CriticalLoads: (w.critical + n/2) / n})
		}
	}
	return r, nil
}

// opWitness sums what the cost witness counted an op moving over the
// profiled steps: every access and the distinct bytes, and its critical
// loads.
type opWitness struct{ counted, footprint, critical int64 }

// stepBytes is what a decode step had to read: the dense weights, the
// experts it routed to, and each sequence's cached K and V, over the
// window alone on a layer that slides.
func (m *ModelCase) stepBytes(res *engine.StepResult) int64 {
	n := m.bytes.dense
	for _, t := range res.Stats.ExpertsTouched {
		n += int64(t) * m.bytes.perExpert
	}
	n += m.bytes.cfg.KVReadBytes(int64(res.ContextTokens), int64(res.WindowTokens), m.bytes.kvdt)
	return n
}

// stepCost holds the per-step byte counts that do not change during a case,
// computed once: walking the model's tensor list every step would cost more
// than the bookkeeping it feeds.
type stepCost struct {
	dense, perExpert int64
	cfg              *model.Config
	kvdt             bridge.DType
}

func newStepCost(c *model.Config, dt, kvdt bridge.DType) *stepCost {
	sc := &stepCost{dense: c.ActiveBytesPerToken(dt), cfg: c, kvdt: kvdt}
	if c.NumExperts > 0 {
		// ActiveBytesPerToken counts top_k experts per MoE layer; the step
		// adds the distinct experts it really touched instead.
		sc.perExpert = c.ExpertBytes(dt)
		for l := 0; l < c.Layers; l++ {
			if c.IsMoELayer(l) {
				sc.dense -= int64(c.TopK) * sc.perExpert
			}
		}
	}
	return sc
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// sleepUntil waits for t or for ctx to end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// latencies are a repetition's per-request figures, in ms: each request's
// time to first token and end-to-end latency from its arrival, its time
// per output token after the first, and every gap between its tokens.
type latencies struct {
	ttft, tpot, e2el, itl []float64
	generated, completed  int
	// good counts the completed requests that met every bound of the
	// case's slo; -1 when it sets none.
	good int
}

// requestLatencies reads the latencies off each request's arrival and
// token times. A request of one token has no time per output token and
// meets any tpot bound, as vLLM counts it.
func requestLatencies(times []reqTimes, slo map[string]float64) latencies {
	l := latencies{good: -1}
	if slo != nil {
		l.good = 0
	}
	for _, t := range times {
		n := len(t.tokens)
		l.generated += n
		if n == 0 {
			continue
		}
		l.completed++
		ttft, e2el := ms(t.tokens[0]-t.added), ms(t.tokens[n-1]-t.added)
		l.ttft, l.e2el = append(l.ttft, ttft), append(l.e2el, e2el)
		tpot := 0.0
		if n > 1 {
			tpot = (e2el - ttft) / float64(n-1)
			l.tpot = append(l.tpot, tpot)
		}
		for i := 1; i < n; i++ {
			l.itl = append(l.itl, ms(t.tokens[i]-t.tokens[i-1]))
		}
		if slo != nil && meets(slo, ttft, tpot, e2el) {
			l.good++
		}
	}
	return l
}

// meets says whether a request's latencies are within every bound of slo.
func meets(slo map[string]float64, ttft, tpot, e2el float64) bool {
	got := map[string]float64{"ttft": ttft, "tpot": tpot, "e2el": e2el}
	for target, bound := range slo {
		if got[target] > bound {
			return false
		}
	}
	return true
}

// samples are the latencies as a case's metrics, under the names vLLM's
// bench serve results take in mtlbench (reports/peers), so a serving case
// pairs with an imported vLLM run in compare. wall is the repetition's,
// from the first arrival to the last token.
func (l latencies) samples(wall time.Duration) []results.Sample {
	var out []results.Sample
	add := func(metric string, v float64, unit string) {
		out = append(out, results.Sample{Metric: metric, Value: v, Unit: unit})
	}
	add("output_tok_s", float64(l.generated)/wall.Seconds(), "tok/s")
	add("request_per_s", float64(l.completed)/wall.Seconds(), "req/s")
	if l.good >= 0 {
		add("goodput_per_s", float64(l.good)/wall.Seconds(), "req/s")
	}
	for _, m := range []struct {
		name string
		xs   []float64
		p    float64
	}{
		{"ttft_ms", l.ttft, 0.5}, {"ttft_p99_ms", l.ttft, 0.99},
		{"tpot_ms", l.tpot, 0.5}, {"tpot_p99_ms", l.tpot, 0.99},
		{"itl_p50_ms", l.itl, 0.5}, {"itl_p90_ms", l.itl, 0.9}, {"itl_p99_ms", l.itl, 0.99},
		{"e2el_ms", l.e2el, 0.5}, {"e2el_p99_ms", l.e2el, 0.99},
	} {
		if len(m.xs) > 0 {
			add(m.name, quantile.Of(m.xs, m.p), "ms")
		}
	}
	return out
}

// busyFrac is the share of a step the device was busy: its median device
// time over the median step. The two come from different clocks (the
// device's timestamps, the host's step ends), so a device never idle
// between overlapped steps can come out a hair over its step; it is
// busy for all of it, not more.
func busyFrac(device, step time.Duration) float64 {
	if step <= 0 {
		return 0
	}
	return min(1, float64(device)/float64(step))
}
