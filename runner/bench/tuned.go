package bench

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// Tuned kernel configs in suite runs: a model case without moe_strategy or
// moe_chunk lets the engine look its MoE dispatch (and the matmul split, or
// a GPU's launch configs) up in the tuned configs; the case records what it
// used, as "tuned.<kernel>" parameters, so a run says which config every
// kernel ran with and where that config came from.

// tunedStore is o.Tuned, or the default lookup (the user's cache, the
// shipped configs) with warnings on stderr.
func (o Options) tunedStore() *tune.Store {
	if o.Tuned != nil {
		return o.Tuned
	}
	return tune.Default("", func(msg string) { fmt.Fprintln(os.Stderr, "mtlbench: warning:", msg) })
}

// useTuned hands the store to every model case's engine.
func useTuned(cases []*prepared, s *tune.Store) {
	if s == nil {
		return
	}
	for _, p := range cases {
		if p.model != nil {
			p.model.Engine.Tuned = TunedLookup(s)
			p.model.tuned = s
		}
	}
}

// TunedLookup is the engine's lookup of s's tuned configs.
func TunedLookup(s *tune.Store) engine.TunedLookup {
	return func(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) engine.Tuned {
		return s.ForEngine(be, cfg, dt, moe)
	}
}

// lookUpTuned is tunedParams, a variable for tests that interrupt a run
// while its cases' tuned configs are looked up.
var lookUpTuned = tunedParams

// tunedParams adds what a model case's decode steps will use, e.g.
// "tuned.moe" = "chunked/16 (user cache)", and "tuned.moe.prefill" when its
// prefill steps use something else.
func tunedParams(params map[string]string, p *prepared) {
	m := p.model
	if m == nil || m.tuned == nil || m.Engine.Tuned == nil {
		return
	}
	dt := m.Source.DType()
	seqs := m.Work.Requests
	if m.Engine.MaxSeqs > 0 {
		seqs = min(seqs, m.Engine.MaxSeqs)
	}
	for k, v := range m.tuned.EngineChoices(m.Backend, m.Config, dt, m.Engine.MoE, seqs, seqs) {
		params["tuned."+k] = v
	}
	// Launch-tuned kernels (Metal, CUDA) at the first decode step's context.
	for k, v := range m.tuned.LaunchChoices(m.Backend, m.Config, dt, m.Engine.BlockSize, seqs, m.Work.PromptLen) {
		params["tuned."+k] = v
	}
	prefill := seqs * m.Work.PromptLen
	if m.Engine.TokenBudget > 0 {
		prefill = min(prefill, m.Engine.TokenBudget)
	}
	if v, ok := m.tuned.EngineChoices(m.Backend, m.Config, dt, m.Engine.MoE, prefill, seqs)[string(ops.MoE)]; ok && v != params["tuned.moe"] {
		params["tuned.moe.prefill"] = v
	}
}

// recordTunedUsed sets a model case's tuned.moe to the MoE dispatches its
// steps took, where they are not the ones it recorded before it ran: a
// serving case's steps hold as many tokens as requests are in flight, not
// its batch, and the tuned configs are looked up by a step's tokens.
func recordTunedUsed(rec *results.Recorder, p *prepared) error {
	if p.model == nil {
		return nil
	}
	used := p.model.TunedMoEUsed()
	if len(used) == 0 {
		return nil
	}
	predicted := slices.Clone(p.tunedMoE)
	slices.Sort(predicted)
	if slices.Equal(used, predicted) {
		return nil
	}
	return rec.SetCaseParams(p.id, map[string]string{"tuned.moe": strings.Join(used, "; ")})
}
