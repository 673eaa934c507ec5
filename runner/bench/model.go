package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/internal/quantile"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// Workload is what one model case asks of the engine.
type Workload struct {
	Requests  int
	PromptLen int
	GenLen    int
	// Depth is the context before each prompt (suites.ModelParams.Depth):
	// prompts are Depth+PromptLen tokens and prefill figures count the
	// steps at or after it.
	Depth int
	// Stagger, when positive, adds one request every Stagger steps instead
	// of all at once.
	Stagger  int
	Sampling sample.Params
	Seed     uint64
}

// Prompts are the workload's prompts: seeded random token ids, the same for
// every repetition.
func (w Workload) Prompts(vocab int) [][]int32 {
	rng := rand.New(rand.NewPCG(w.Seed, 7))
	out := make([][]int32, w.Requests)
	for i := range out {
		out[i] = make([]int32, w.Depth+w.PromptLen)
		for j := range out[i] {
			out[i][j] = int32(rng.IntN(vocab))
		}
	}
	return out
}

// KVTokens is the cache a workload needs to run without preemption.
func (w Workload) KVTokens(blockSize int) int {
	per := (w.Depth + w.PromptLen + w.GenLen + blockSize - 1) / blockSize * blockSize
	return w.Requests * per
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

type reqTimes struct {
	added  time.Time
	tokens []time.Time
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
	opts.AvailableMemory = 0 // checked once before the run
	e, err := engine.New(m.Backend, m.Config, m.Source, opts)
	if err != nil {
		return nil, err
	}
	if m.bytes == nil {
		m.bytes = newStepCost(e.Config(), m.Source.DType(), e.KVDType()) // the formats as the backend runs them
	}
	// A cancelled run may leave a step in flight; the next repetition's
	// engine takes this one's memory.
	defer e.Close()
	w := m.Work
	reqs := make([]engine.Request, w.Requests)
	for i, p := range w.Prompts(m.Config.Vocab) {
		sp := w.Sampling
		sp.Seed += uint64(i)
		reqs[i] = engine.Request{ID: i, Prompt: p, MaxNewTokens: w.GenLen, Sampling: sp}
	}
	times := make([]reqTimes, len(reqs))
	next := 0
	admit := func(step int) error {
		for next < len(reqs) && (w.Stagger == 0 || step >= next*w.Stagger) {
			if err := e.Add(reqs[next]); err != nil {
				return err
			}
			times[next].added = time.Now()
			next++
		}
		return nil
	}
	var (
		decodeTokens, prefillTokens, preempted int
		decodeTime, prefillTime                time.Duration
		prefillFLOPs                           float64
		decodeSteps, encodes, devices          []time.Duration
		decodeBytes                            float64
		dispatches                             []float64
		witness                                witnessSum
		opSum                                  = map[[3]string]time.Duration{}
		opBytes                                = map[[3]string]opWitness{}
		opOrder                                [][3]string
		profiledSteps                          int
	)
	logged := 0          // steps given to StepLog
	var spans []stepSpan // each step's launches, for the in-place timeline
	launched := 0        // launches since the timeline started
	if inPlace {
		if err := tl.TimelineStart(); err != nil {
			return nil, err
		}
	}
	host.ResetPeakRSS()
	start := time.Now()
	for step := 0; next < len(reqs) || e.Pending(); step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.Pending() && next < len(reqs) {
			// Nothing runs until the next arrival: its steps would be
			// empty, so the clock jumps to it.
			step = max(step, next*w.Stagger)
		}
		if err := admit(step); err != nil {
			return nil, err
		}
		res, err := e.Step()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		if m.StepLog != nil && res.Tokens > 0 {
			m.StepLog(stepRecord(logged, res))
			logged++
		}
		for _, s := range res.Sampled {
			times[s.ReqID].tokens = append(times[s.ReqID].tokens, now)
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
				opBytes[k] = opWitness{opBytes[k].counted + t.CountedBytes, opBytes[k].footprint + t.FootprintBytes}
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
	generated := 0
	var ttft, tpot, itl []float64
	for _, t := range times {
		generated += len(t.tokens)
		if len(t.tokens) == 0 {
			continue
		}
		ttft = append(ttft, ms(t.tokens[0].Sub(t.added)))
		if n := len(t.tokens); n > 1 {
			tpot = append(tpot, ms(t.tokens[n-1].Sub(t.tokens[0]))/float64(n-1))
		}
		for i := 1; i < len(t.tokens); i++ {
			itl = append(itl, ms(t.tokens[i].Sub(t.tokens[i-1])))
		}
	}
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
		if len(devices) > 0 {
			dev := quantile.Duration(devices, 0.5)
			add("device_ms", ms(dev), "ms")
			add("device_frac", float64(dev)/float64(med), "ratio")
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
	add("output_tok_s", float64(generated)/wall.Seconds(), "tok/s")
	if len(ttft) > 0 {
		add("ttft_ms", quantile.Of(ttft, 0.5), "ms")
	}
	if len(tpot) > 0 {
		add("tpot_ms", quantile.Of(tpot, 0.5), "ms")
	}
	if len(itl) > 0 {
		add("itl_p50_ms", quantile.Of(itl, 0.5), "ms")
		add("itl_p90_ms", quantile.Of(itl, 0.9), "ms")
		add("itl_p99_ms", quantile.Of(itl, 0.99), "ms")
	}
	if rss := host.PeakRSS(); rss > 0 {
		add("peak_rss_bytes", float64(rss), "B")
	}
	add("preemptions", float64(preempted), "count")
	if profile && profiledSteps > 0 {
		for _, k := range opOrder {
			layer, _ := strconv.Atoi(k[0])
			w, n := opBytes[k], int64(profiledSteps)
			r.Timings = append(r.Timings, results.OpTiming{Layer: layer, Component: k[1], Op: k[2],
				Seconds: opSum[k].Seconds() / float64(profiledSteps), Calls: profiledSteps,
				Bytes: (w.counted + n/2) / n, Footprint: (w.footprint + n/2) / n})
		}
	}
	return r, nil
}

// opWitness sums what the cost witness counted an op moving over the
// profiled steps: every access and the distinct bytes.
type opWitness struct{ counted, footprint int64 }

// stepBytes is what a decode step had to read: the dense weights, the
// experts it routed to, and each sequence's cached K and V.
func (m *ModelCase) stepBytes(res *engine.StepResult) int64 {
	n := m.bytes.dense
	for _, t := range res.Stats.ExpertsTouched {
		n += int64(t) * m.bytes.perExpert
	}
	n += int64(res.ContextTokens) * m.bytes.kvPerToken
	return n
}

// stepCost holds the per-step byte counts that do not change during a case,
// computed once: walking the model's tensor list every step would cost more
// than the bookkeeping it feeds.
type stepCost struct {
	dense, perExpert, kvPerToken int64
}

func newStepCost(c *model.Config, dt, kvdt bridge.DType) *stepCost {
	sc := &stepCost{dense: c.ActiveBytesPerToken(dt), kvPerToken: c.KVBytesPerToken(kvdt)}
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
