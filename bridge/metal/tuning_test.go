package metal_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/runner/tune/tuner"
)

// metalShapes are ragged shapes for every Metal tuning space: outputs and
// k off the tiles, odd token counts, contexts crossing partitions, blocks
// too small for the prefill tiles.
var metalShapes = map[ops.ID][]tune.Shape{
	ops.MatMul: {{ops.M: 1, ops.N: 200, ops.K: 72}, {ops.M: 5, ops.N: 100, ops.K: 40}, {ops.M: 13, ops.N: 72, ops.K: 40}},
	ops.PagedAttentionDecode: {
		{ops.Seqs: 3, ops.Context: 300, ops.NumHeads: 8, ops.NumKVHeads: 2, ops.HeadSize: 32, ops.BlockSize: 16},
		{ops.Seqs: 1, ops.Context: 77, ops.NumHeads: 4, ops.NumKVHeads: 4, ops.HeadSize: 64, ops.BlockSize: 8}},
	ops.PagedAttentionPrefill: {
		{ops.Seqs: 2, ops.Tokens: 13, ops.NumHeads: 4, ops.NumKVHeads: 2, ops.HeadSize: 32, ops.BlockSize: 8},
		{ops.Seqs: 1, ops.Tokens: 5, ops.NumHeads: 2, ops.NumKVHeads: 1, ops.HeadSize: 64, ops.BlockSize: 16},
		{ops.Seqs: 3, ops.Tokens: 37, ops.NumHeads: 4, ops.NumKVHeads: 1, ops.HeadSize: 128, ops.BlockSize: 32}},
	ops.RMSNorm:    {{ops.Tokens: 3, ops.Width: 200}, {ops.Tokens: 1, ops.Width: 1100}},
	ops.AddRMSNorm: {{ops.Tokens: 3, ops.Width: 200}},
	ops.MoE: {{ops.Tokens: 1, ops.Experts: 6, ops.TopK: 2, ops.Hidden: 72, ops.Intermediate: 40},
		{ops.Tokens: 5, ops.Experts: 6, ops.TopK: 2, ops.Hidden: 40, ops.Intermediate: 24},
		{ops.Tokens: 11, ops.Experts: 5, ops.TopK: 3, ops.Hidden: 48, ops.Intermediate: 40}},
}

// moeOverride runs every MoE call with p's dispatch, as the tuner does.
type moeOverride struct {
	*metal.Backend
	p *bridge.MoEParams
}

func (m *moeOverride) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {
	if m.p != nil {
		p = *m.p
	}
	m.Backend.MoE(out, x, w, p)
}

// Every config in the declared space of every Metal tunable kernel
// computes what the reference does at ragged shapes, on the emulator: a
// candidate the tuner might pick must never be wrong. -short checks the
// first shape of each.
func TestLaunchConfigsMatchReference(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	start := time.Now()
	total := 0
	pipes := map[ops.ID]int{}
	for _, k := range tune.Kernels("metal-emu") {
		before := be.Pipelines()
		shapes := metalShapes[k.Op]
		if len(shapes) == 0 {
			t.Errorf("%s: no test shapes", k.Op)
		}
		if testing.Short() {
			shapes = shapes[:1]
		}
		lim := tune.LimitsFor(be, string(k.Op))
		for _, s := range shapes {
			s, err := k.Normalize(s, lim)
			if err != nil {
				t.Fatal(err)
			}
			a := ops.Args{Op: k.Op, Ints: k.OpParams(s), DType: ops.DType(k.DType)}
			if k.Op == ops.MatMul || k.Op == ops.MoE {
				a.DType = ops.BF16
			}
			run := &moeOverride{Backend: be}
			bench, err := kbench.Prepare(run, a)
			if err != nil {
				t.Fatal(err)
			}
			cands, pruned := k.Candidates(s, lim)
			for _, cfg := range cands {
				be.SetLaunchConfig(string(k.Op), func(map[string]int) (map[string]string, bool) { return cfg, true })
				if k.Op == ops.MoE {
					p := tune.MoEParams(cfg)
					run.p = &p
				}
				if _, err := bench.Check(); err != nil {
					t.Errorf("%s %s config %s: %v", k.Op, s.Key(), k.String(cfg), err)
				}
			}
			be.SetLaunchConfig(string(k.Op), nil)
			bench.Close()
			total += len(cands)
			t.Logf("%s %s: %d configs checked, %d pruned", k.Op, s.Key(), len(cands), len(pruned))
		}
		pipes[k.Op] = be.Pipelines() - before
	}
	// The configs reach the kernels: each variant is a pipeline of its own
	// (function constants), built on first use.
	for op, least := range map[ops.ID]int{ops.MatMul: 10, ops.MoE: 10, ops.PagedAttentionDecode: 4} {
		if pipes[op] < least {
			t.Errorf("%s: %d new pipelines over its configs; the tuned variants did not run", op, pipes[op])
		}
	}
	t.Logf("%d configs checked in %v", total, time.Since(start).Round(time.Millisecond))
}

// A config the kernels cannot run is refused at its dispatch, and the
// tuner disqualifies it and says why; on the emulator nothing is written
// as a tuned config.
func TestTunerDisqualifiesOnEmulator(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	base, err := tune.Find("metal", string(ops.MatMul))
	if err != nil {
		t.Fatal(err)
	}
	// A test-only space: the matvec with 5 rows per simdgroup (the kernel
	// takes 1 to 4) or 64 simdgroups (2048 threads, past Apple's 1024).
	bad := *base
	bad.Params = []tune.Param{
		{Name: ops.KnobRows, Values: tune.Enum("4", "5")},
		{Name: ops.KnobSimdgroups, Values: tune.Enum("4", "64")},
	}
	bad.Constraints, bad.Canonical = nil, nil
	bad.Default = func(tune.Shape, tune.Limits) tune.Config {
		return tune.Config{ops.KnobRows: "4", ops.KnobSimdgroups: "4"}
	}
	bad.Format = nil
	defer tune.Register(&bad)()

	b, err := tuner.ShapeBucket(be, string(ops.MatMul), "bf16", tune.Shape{ops.M: 3, ops.N: 100, ops.K: 40}, "test")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tuner.Run(context.Background(), []tuner.Bucket{b}, tuner.Options{Backend: be, Rounds: 2, Confirm: 2,
		SampleTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !r.Emulated || r.Entry != nil || !strings.HasPrefix(r.Verdict, "emulated") {
		t.Errorf("emulated %v, entry %v, verdict %q: want an emulated result without a tuned config", r.Emulated, r.Entry, r.Verdict)
	}
	status := map[string]string{}
	for _, c := range r.Candidates {
		status[c.Config.Key()] = c.Status + ": " + c.Reason
		t.Logf("%s: %s %s", c.Config.Key(), c.Status, c.Reason)
	}
	for key, why := range map[string]string{
		"rows=5,simdgroups=4":  "MatVecRows=5",
		"rows=4,simdgroups=64": "MatVecSimdgroups=2048",
		"rows=5,simdgroups=64": "refused",
	} {
		if !strings.HasPrefix(status[key], tuner.StatusDisqualified) || !strings.Contains(status[key], why) {
			t.Errorf("%s: %q, want disqualified (%s)", key, status[key], why)
		}
	}
	if s := status["rows=4,simdgroups=4"]; !strings.HasPrefix(s, tuner.StatusTimed) {
		t.Errorf("the default: %q, want timed", s)
	}
}
