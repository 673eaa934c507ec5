package metal_test

import (
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// chained counts the steps begun from token ids on the device.
type chained struct {
	*metal.Backend
	fromGPU int
}

func (c *chained) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	c.fromGPU++
	return c.Backend.BeginStepFrom(meta, src)
}

// Overlapped steps (the next decode step committed while the last runs, its
// tokens copied on the GPU from the last step's argmax) give the tokens of
// synchronous steps, for fused and unfused steps alike.
func TestOverlappedStepsMatchSynchronous(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	spec := model.Spec{Model: "qwen3-moe-mini", Seed: 5, Layers: 2}
	gen := func(be bridge.Backend, o engine.Options) [][]int32 {
		e := openEngine(t, be, spec, o)
		var reqs []engine.Request
		for i := range 3 {
			reqs = append(reqs, engine.Request{ID: i, Prompt: []int32{int32(7 + i), 100, int32(3 * i)}, MaxNewTokens: 8 + 2*i})
		}
		return generatedTokens(t, e, reqs)
	}
	for _, noFusion := range []bool{false, true} {
		t.Run(fmt.Sprintf("fusion=%v", !noFusion), func(t *testing.T) {
			be := &chained{Backend: newEmu(t, metal.Tuning{})}
			sync := gen(be, engine.Options{Synchronous: true, NoFusion: noFusion})
			if be.fromGPU != 0 {
				t.Fatalf("synchronous steps began %d steps from device tokens", be.fromGPU)
			}
			over := gen(be, engine.Options{NoFusion: noFusion})
			if fmt.Sprint(over) != fmt.Sprint(sync) {
				t.Errorf("overlapped %v, synchronous %v", over, sync)
			}
			// 3 requests of 8, 10 and 12 tokens, 11 decode steps: each takes
			// its tokens from the GPU, the first from the prefill's argmax,
			// but the two after a request ends (the batch changes).
			if be.fromGPU != 9 {
				t.Errorf("%d steps took their tokens from the GPU's argmax, want 9", be.fromGPU)
			}
			t.Logf("%d of the decode steps began from the GPU's argmax", be.fromGPU)
		})
	}
}

// pieces records how many command buffers each step was committed in, and
// whether it began behind a step in flight (from the GPU's argmax).
type pieces struct {
	*metal.Backend
	next   bool // the step being encoded began from the GPU's argmax
	steps  []int
	behind []bool
}

func (p *pieces) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	p.next = true
	return p.Backend.BeginStepFrom(meta, src)
}

func (p *pieces) done() {
	p.steps = append(p.steps, p.LastStep().CommandBuffers)
	p.behind = append(p.behind, p.next)
	p.next = false
}

func (p *pieces) EndStep() (bridge.StepStats, error) {
	st, err := p.Backend.EndStep()
	p.done()
	return st, err
}

func (p *pieces) SubmitStep(ids bridge.Tensor) (bridge.PendingStep, error) {
	ps, err := p.Backend.SubmitStep(ids)
	p.done()
	return ps, err
}

// A step that no step of its own runs ahead of commits its dispatches in
// pieces as they are encoded (bridge.StreamPieces): the first 24, then 48
// more, ...; a step queued behind one in flight, and every step with
// NoStream, is one command buffer. The tokens and logits are the same bit
// for bit either way.
func TestStreamedStepsMatchWhole(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	// 4 layers: a fused decode step is 28 dispatches, two pieces.
	spec := model.Spec{Model: "qwen3-moe-mini", Seed: 3, Layers: 4}
	gen := func(be *pieces, o engine.Options) []engine.Output {
		e := openEngine(t, be, spec, o)
		var reqs []engine.Request
		for i := range 2 {
			reqs = append(reqs, engine.Request{ID: i, Prompt: []int32{int32(11 + i), 200, int32(5 * i)}, MaxNewTokens: 5 + 2*i, WantLogits: true})
		}
		out, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	streamed := &pieces{Backend: newEmu(t, metal.Tuning{})}
	whole := &pieces{Backend: newEmuWith(t, metal.Options{NoStream: true})}
	for _, sync := range []bool{true, false} {
		streamed.steps, whole.steps, streamed.behind, whole.behind = nil, nil, nil, nil
		s := gen(streamed, engine.Options{Synchronous: sync})
		w := gen(whole, engine.Options{Synchronous: sync})
		for i := range s {
			if fmt.Sprint(s[i].Tokens) != fmt.Sprint(w[i].Tokens) || kernels.MaxAbsDiff(s[i].Logits, w[i].Logits) != 0 || len(s[i].Logits) == 0 {
				t.Errorf("synchronous=%v, request %d: streamed steps gave %v, whole ones %v (logits %.3g apart)", sync, i, s[i].Tokens,
					w[i].Tokens, kernels.MaxAbsDiff(s[i].Logits, w[i].Logits))
			}
		}
		queued := 0
		for j, n := range streamed.steps {
			switch want := 2; {
			case streamed.behind[j]:
				queued++
				if n != 1 {
					t.Errorf("synchronous=%v, step %d: queued behind a step in flight, it was committed in %d command buffers", sync, j, n)
				}
			case n < want:
				t.Errorf("synchronous=%v, step %d: %d command buffer(s), want at least %d", sync, j, n, want)
			}
		}
		for j, n := range whole.steps {
			if n != 1 {
				t.Errorf("synchronous=%v, NoStream: step %d was committed in %d command buffers", sync, j, n)
			}
		}
		if sync != (queued == 0) {
			t.Errorf("synchronous=%v: %d steps were queued behind one in flight", sync, queued)
		}
		t.Logf("synchronous=%v: command buffers a step %v", sync, streamed.steps)
	}
}

// lateHost is a host that reaches a step's tokens only after every step
// committed behind it has run, as one descheduled for a step's length
// would: the step queued behind writes its own argmax into the tensor the
// step before it was submitted with.
type lateHost struct {
	*metal.Backend
	probe   bridge.Tensor
	fromGPU int
}

func (h *lateHost) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	h.fromGPU++
	return h.Backend.BeginStepFrom(meta, src)
}

type latePending struct {
	bridge.PendingStep
	h *lateHost
}

func (p latePending) Wait() (bridge.StepStats, []int32, error) {
	// A host read waits for every step in flight.
	if err := p.h.ReadI32(p.h.probe, make([]int32, 1)); err != nil {
		return bridge.StepStats{}, nil, err
	}
	return p.PendingStep.Wait()
}

func (h *lateHost) SubmitStep(ids bridge.Tensor) (bridge.PendingStep, error) {
	p, err := h.Backend.SubmitStep(ids)
	if err != nil {
		return nil, err
	}
	return latePending{p, h}, nil
}

// A step's tokens are the ones it computed however late the host waits for
// it: the step queued behind it does not change them.
func TestOverlappedTokensSurviveTheNextStep(t *testing.T) {
	for _, c := range []struct {
		fixture  string
		batch    int
		noFusion bool
	}{
		{"llama", 1, false},
		{"llama", 3, false},
		{"llama", 3, true},
		{"qwen3_moe", 2, false},
	} {
		t.Run(fmt.Sprintf("%s/batch%d/fusion=%v", c.fixture, c.batch, !c.noFusion), func(t *testing.T) {
			spec := model.Spec{Model: filepath.Join(fixtureDir, c.fixture)}
			var reqs []engine.Request
			for i := range c.batch {
				reqs = append(reqs, engine.Request{ID: i, Prompt: []int32{int32(7 + i), 100, int32(3 * i)}, MaxNewTokens: 8})
			}
			gen := func(be bridge.Backend, o engine.Options) [][]int32 {
				o.NoFusion = c.noFusion
				e := openEngine(t, be, spec, o)
				defer e.Close()
				return generatedTokens(t, e, reqs)
			}
			mb := newEmu(t, metal.Tuning{})
			probe, err := mb.Alloc(bridge.I32, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer mb.Free(probe)
			want := gen(mb, engine.Options{Synchronous: true})
			be := &lateHost{Backend: mb, probe: probe}
			if got := gen(be, engine.Options{}); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("overlapped, host late: %v, synchronous %v", got, want)
			}
			if be.fromGPU == 0 {
				t.Error("no step was queued behind another")
			}
		})
	}
}

// generatedTokens runs reqs on e and returns each request's new tokens.
func generatedTokens(t *testing.T, e *engine.Engine, reqs []engine.Request) [][]int32 {
	t.Helper()
	out, err := e.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	var toks [][]int32
	for _, o := range out {
		toks = append(toks, o.Tokens)
	}
	return toks
}
