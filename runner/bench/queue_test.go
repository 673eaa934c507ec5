package bench

import (
	"context"
	"runtime"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
)

// A case of many requests (a suite takes up to 1048576) holds only those
// the scheduler can seat next: every request made and queued at once held
// each one's prompt, its copy and its sampler (4 KiB of tables) before the
// first step, memory no fit check counts: some 5 KiB a request, 5 GiB for
// a million.
func TestManyRequestsQueueAsTheyRun(t *testing.T) {
	cfg, src := miniMoE(t)
	be := cpu.New(cpu.Options{})
	for _, c := range []struct {
		name string
		work Workload
	}{
		{"greedy", Workload{Requests: 40000, PromptLen: 16, GenLen: 1, Seed: 1}},
		{"sampled", Workload{Requests: 40000, PromptLen: 16, GenLen: 1, Seed: 1,
			Sampling: sample.Params{Temperature: 1, TopP: 0.9}}},
		{"staggered", Workload{Requests: 40000, PromptLen: 16, GenLen: 1, Seed: 1, Stagger: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mc := &ModelCase{Backend: be, Config: cfg, Source: src, Work: Workload{Requests: 4, PromptLen: 16, GenLen: 2, Seed: 1},
				Engine: engine.Options{KVTokens: 4 * 32, MaxSeqs: 4}}
			// A first repetition loads the weights, which stay.
			if _, err := mc.Rep(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			mc.Work = c.work
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			var grew uint64
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			steps := 0
			mc.StepLog = func(StepRecord) {
				if steps++; steps == 3 {
					runtime.GC()
					runtime.ReadMemStats(&ms)
					grew = ms.HeapAlloc - min(before, ms.HeapAlloc)
					cancel()
				}
			}
			if _, err := mc.Rep(ctx, false); err == nil {
				t.Fatal("the repetition ran to its end past the cancel")
			}
			// The workload's own record of each request (its lengths and
			// times) is some 80 bytes a request.
			if limit := uint64(c.work.Requests) * 160; grew > limit {
				t.Errorf("%d requests held %d MiB after three steps, want at most %d MiB", c.work.Requests, grew>>20, limit>>20)
			}
		})
	}
}

// Requests handed to the engine as it can seat them run the steps they ran
// queued all at once: seats, budgets, preemption and arrivals alike.
func TestQueuedRequestsRunTheSameSteps(t *testing.T) {
	cfg, src := miniMoE(t)
	be := cpu.New(cpu.Options{})
	for _, c := range []struct {
		name string
		work Workload
		opts engine.Options
	}{
		{"seats", Workload{Requests: 9, PromptLen: 5, GenLen: 4, Seed: 1}, engine.Options{MaxSeqs: 2, KVTokens: 64}},
		{"budget", Workload{Requests: 7, PromptLen: 9, GenLen: 3, Seed: 2, RangeRatio: 0.5}, engine.Options{MaxSeqs: 3, TokenBudget: 4, BlockSize: 8, KVTokens: 96}},
		{"preempting", Workload{Requests: 8, PromptLen: 12, GenLen: 6, Seed: 3}, engine.Options{MaxSeqs: 4, BlockSize: 8, KVTokens: 48}},
		{"unseated", Workload{Requests: 5, PromptLen: 7, GenLen: 3, Seed: 6}, engine.Options{BlockSize: 8, KVTokens: 40}},
		{"staggered", Workload{Requests: 6, PromptLen: 3, GenLen: 5, Seed: 4, Stagger: 2}, engine.Options{MaxSeqs: 2, KVTokens: 64}},
		{"sampled", Workload{Requests: 6, PromptLen: 4, GenLen: 5, Seed: 5, Sampling: sample.Params{Temperature: 1, TopK: 8}}, engine.Options{MaxSeqs: 2, KVTokens: 64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// What every request queued at once at its arrival runs.
			e, err := engine.New(be, cfg, src, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompts, gens := c.work.Prompts(cfg.Vocab), func() []int { _, g := c.work.Lengths(); return g }()
			var want []StepRecord
			preempted := 0
			next := 0
			for step := 0; next < len(prompts) || e.Pending(); step++ {
				if !e.Pending() {
					step = max(step, next*c.work.Stagger)
				}
				for next < len(prompts) && (c.work.Stagger == 0 || step >= next*c.work.Stagger) {
					sp := c.work.Sampling
					sp.Seed += uint64(next)
					if err := e.Add(engine.Request{ID: next, Prompt: prompts[next], MaxNewTokens: gens[next], Sampling: sp}); err != nil {
						t.Fatal(err)
					}
					next++
				}
				res, err := e.Step()
				if err != nil {
					t.Fatal(err)
				}
				if res.Tokens > 0 {
					want = append(want, StepRecord{Kind: stepRecord(0, res).Kind, Tokens: res.Tokens, Seqs: res.Seqs})
				}
				preempted += res.Preempted
			}
			mc := &ModelCase{Backend: be, Config: cfg, Source: src, Work: c.work, Engine: c.opts}
			var got []StepRecord
			mc.StepLog = func(r StepRecord) { got = append(got, StepRecord{Kind: r.Kind, Tokens: r.Tokens, Seqs: r.Seqs}) }
			if _, err := mc.Rep(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d steps, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("step %d: %+v, want %+v", i, got[i], want[i])
				}
			}
			if c.name == "preempting" && preempted == 0 {
				t.Error("no sequence was preempted")
			}
		})
	}
}

// miniMoE is qwen3-moe-mini cut to one layer, with synthetic weights made
// once: the smallest model whose steps route through MoE.
func miniMoE(t *testing.T) (*model.Config, model.Source) {
	t.Helper()
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithLayers(1); err != nil {
		t.Fatal(err)
	}
	return cfg, model.NewCached(model.NewSynthetic(1, bridge.BF16))
}
