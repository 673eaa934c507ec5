package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/sample"
)

// queued puts the CPU backend behind the AsyncStepper contract, checking
// that the engine keeps it: at most two steps in flight, each waited for
// once, and token sources that are I32 tensors of the step's length.
type queued struct {
	bridge.Backend
	t        *testing.T
	inFlight int
	chained  int // steps begun from the device's tokens
}

type queuedStep struct {
	q      *queued
	st     bridge.StepStats
	ids    []int32
	waited bool
}

func (s *queuedStep) Wait() (bridge.StepStats, []int32, error) {
	if s.waited {
		s.q.t.Error("a step was waited for twice")
	}
	s.waited = true
	s.q.inFlight--
	return s.st, s.ids, nil
}

func (q *queued) BeginStep(meta *bridge.StepMeta, tokens []int32, profile bool) error {
	if q.inFlight >= 2 {
		q.t.Error("a third step begun with two in flight")
	}
	return q.Backend.BeginStep(meta, tokens, profile)
}

// BeginStepFrom reads the tokens now: on the CPU the step that computes
// them has already run.
func (q *queued) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	if src.DType() != bridge.I32 || src.Len() < meta.NumTokens {
		return fmt.Errorf("token source %v of %d values for %d tokens", src.DType(), src.Len(), meta.NumTokens)
	}
	tokens := make([]int32, src.Len())
	if err := q.ReadI32(src, tokens); err != nil {
		return err
	}
	q.chained++
	return q.BeginStep(meta, tokens[:meta.NumTokens], false)
}

func (q *queued) SubmitStep(ids bridge.Tensor) (bridge.PendingStep, error) {
	st, err := q.EndStep()
	if err != nil {
		return nil, err
	}
	s := &queuedStep{q: q, st: st}
	if ids != nil {
		s.ids = make([]int32, ids.Len())
		if err := q.ReadI32(ids, s.ids); err != nil {
			return nil, err
		}
	}
	q.inFlight++
	return s, nil
}

// Queuing each decode step behind the one computing its tokens changes no
// token: with preemption, chunked prefill, seat caps, requests arriving
// between steps, and a sampled request in the mix (whose steps need the
// logits on the host, so nothing is queued ahead of them).
func TestOverlappedStepsMatchSynchronous(t *testing.T) {
	mix := raggedRequests(512, 12)
	mix[3].Sampling = sample.Params{Temperature: 0.8, TopK: 20, Seed: 7}
	for _, arch := range []string{"llama", "qwen3_moe"} {
		for _, c := range []struct {
			name    string
			opts    Options
			reqs    []Request
			stagger int
		}{
			{"greedy", Options{}, raggedRequests(512, 12), 0},
			{"preempting", Options{BlockSize: 8, KVTokens: 80}, raggedRequests(512, 12), 0},
			{"chunked-max-seqs", Options{TokenBudget: 7, MaxSeqs: 3}, raggedRequests(512, 9), 0},
			{"arriving", Options{}, raggedRequests(512, 10), 3},
			{"sampled", Options{}, mix, 2},
			// Without first-token logits, each prompt's last chunk has the
			// first decode step queued behind it.
			{"no-logits", Options{}, withoutLogits(raggedRequests(512, 12)), 0},
			{"no-logits-chunked", Options{TokenBudget: 7, MaxSeqs: 3}, withoutLogits(raggedRequests(512, 9)), 0},
			{"no-logits-arriving", Options{}, withoutLogits(raggedRequests(512, 10)), 3},
		} {
			t.Run(arch+"/"+c.name, func(t *testing.T) {
				run := func(be bridge.Backend) [][]int32 {
					e := openFixture(t, arch, be, c.opts)
					out := make([][]int32, len(c.reqs))
					next := 0
					for step := 0; next < len(c.reqs) || e.Pending(); step++ {
						for next < len(c.reqs) && step >= next*c.stagger {
							if err := e.Add(c.reqs[next]); err != nil {
								t.Fatal(err)
							}
							next++
						}
						res, err := e.Step()
						if err != nil {
							t.Fatal(err)
						}
						for _, s := range res.Sampled {
							out[s.ReqID] = append(out[s.ReqID], s.Token)
						}
					}
					return out
				}
				want := run(cpu.New(cpu.Options{}))
				q := &queued{Backend: cpu.New(cpu.Options{}), t: t}
				got := run(q)
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("request %d: overlapped %v, synchronous %v", i, got[i], want[i])
					}
				}
				if q.chained == 0 {
					t.Error("no step was queued behind another")
				}
				if q.inFlight != 0 {
					t.Errorf("%d steps left in flight", q.inFlight)
				}
			})
		}
	}
}

func withoutLogits(reqs []Request) []Request {
	for i := range reqs {
		reqs[i].WantLogits = false
	}
	return reqs
}

// A greedy request that asks for no logits has every decode step queued
// behind the step computing its token, the first one behind its prompt's
// last chunk: the device never waits for the host between them.
func TestEveryDecodeStepQueuedBehind(t *testing.T) {
	for _, c := range []struct {
		name   string
		opts   Options
		prompt int
	}{
		{"one prefill step", Options{}, 9},
		{"chunked prefill", Options{TokenBudget: 4}, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &queued{Backend: cpu.New(cpu.Options{}), t: t}
			e := openFixture(t, "llama", q, c.opts)
			const gen = 6
			req := withoutLogits(raggedRequests(512, gen))[0]
			req.Prompt = make([]int32, c.prompt)
			for i := range req.Prompt {
				req.Prompt[i] = int32(3 + 5*i)
			}
			out, err := e.Generate([]Request{req})
			if err != nil {
				t.Fatal(err)
			}
			if len(out[0].Tokens) != gen {
				t.Fatalf("%d tokens, want %d", len(out[0].Tokens), gen)
			}
			if q.chained != gen-1 {
				t.Errorf("%d of %d decode steps were queued behind the step computing their token", q.chained, gen-1)
			}
		})
	}
}

// freeing is queued noting the tensors the engine frees, and failing a step
// begun from one: the device would read memory handed back, or reused.
type freeing struct {
	*queued
	freed map[bridge.Tensor]bool
}

func (f *freeing) Free(t bridge.Tensor) {
	f.freed[t] = true
	f.queued.Free(t)
}

func (f *freeing) BeginStepFrom(meta *bridge.StepMeta, src bridge.Tensor) error {
	if f.freed[src] {
		f.t.Error("a step was begun from the token ids of a freed workspace")
	}
	return f.queued.BeginStepFrom(meta, src)
}

// A step queued behind one whose workspace is the last of the engine's
// cache of step shapes does not free that workspace to make room: the step
// before still runs in it, and the new one reads its tokens from it.
func TestQueuedStepKeepsTheWorkspaceInFlight(t *testing.T) {
	be := &freeing{queued: &queued{Backend: cpu.New(cpu.Options{}), t: t}, freed: map[bridge.Tensor]bool{}}
	e := openFixture(t, "llama", be, Options{})
	// Prompts of maxWorkspaces lengths, one token each: every step shape
	// the cache holds is a prefill's.
	for n := range maxWorkspaces {
		if _, err := e.Generate([]Request{{ID: n, Prompt: make([]int32, 3+n), MaxNewTokens: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// A prompt of a shape held, then decode steps of one not held.
	req := withoutLogits(raggedRequests(512, 4))[1]
	req.Prompt = req.Prompt[:5]
	out, err := e.Generate([]Request{req})
	if err != nil {
		t.Fatal(err)
	}
	if be.chained == 0 {
		t.Fatal("no step was queued behind another")
	}
	if len(be.freed) == 0 {
		t.Fatal("no workspace was freed: the test does not fill the cache of step shapes")
	}
	sameOutputs(t, "past the workspace cache", out, aloneOutputs(t, "llama", []Request{req}), 0)
}

// A step's Encode is the host's time up to handing the step to a backend
// that runs it apart from the host: set on an AsyncStepper, overlapped or
// synchronous (where it ends before EndStep's wait, within the step's
// Duration), and 0 on the CPU, whose ops run as they are encoded.
func TestStepEncodeTime(t *testing.T) {
	for _, c := range []struct {
		name  string
		be    func() bridge.Backend
		opts  Options
		async bool
	}{
		{"cpu", func() bridge.Backend { return cpu.New(cpu.Options{}) }, Options{}, false},
		{"overlapped", func() bridge.Backend { return &queued{Backend: cpu.New(cpu.Options{}), t: t} }, Options{}, true},
		{"synchronous", func() bridge.Backend { return &queued{Backend: cpu.New(cpu.Options{}), t: t} }, Options{Synchronous: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := openFixture(t, "llama", c.be(), c.opts)
			for _, r := range raggedRequests(512, 3) {
				if err := e.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			steps := 0
			for e.Pending() {
				res, err := e.Step()
				if err != nil {
					t.Fatal(err)
				}
				if res.Tokens == 0 {
					continue
				}
				steps++
				switch {
				case !c.async && res.Encode != 0:
					t.Errorf("step %d: encode %v on a backend that runs ops as they are encoded", steps, res.Encode)
				case c.async && res.Encode <= 0:
					t.Errorf("step %d: no encode time", steps)
				case c.opts.Synchronous && res.Encode > res.Duration:
					t.Errorf("step %d: encode %v longer than the step's %v", steps, res.Encode, res.Duration)
				}
			}
			if steps < 3 {
				t.Fatalf("%d steps", steps)
			}
		})
	}
}

// Prefill steps of different lengths are each a workspace shape; the
// engine kept up to maxWorkspaces of them, several times the one step the
// fit check counts. The idle ones it keeps stay within the largest step's
// workspace (StepBytes counts that and the one in flight).
func TestWorkspacesKeptWithinTheLargestStep(t *testing.T) {
	be := cpu.New(cpu.Options{})
	e := openFixture(t, "llama", be, Options{KVTokens: 128})
	largest := workspaceBytes(e.cfg, be.ActDType(), 128, 128)
	for n := range maxWorkspaces {
		if _, err := e.Generate([]Request{{ID: n, Prompt: make([]int32, 120-n), MaxNewTokens: 1}}); err != nil {
			t.Fatal(err)
		}
		var held int64
		for k := range e.ws {
			held += workspaceBytes(e.cfg, be.ActDType(), k[0], k[1])
		}
		if held > largest {
			t.Fatalf("after a prompt of %d tokens: %d workspaces of %d bytes kept, more than the largest step's %d", 120-n, len(e.ws), held, largest)
		}
	}
}
