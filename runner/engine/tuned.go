package engine

import (
	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Tuned is one engine's tuned kernel configs: per step, it installs what
// the backend should run with. runner/tune's Store.ForEngine gives one.
type Tuned interface {
	// Step sets up a step of tokens tokens: it returns the MoE params the
	// step runs with (moe when none is tuned or moe was explicit) and what
	// undoes the rest.
	Step(tokens int, moe bridge.MoEParams) (bridge.MoEParams, func())
	// Used lists, per kernel, the tuned configs the steps used so far with
	// where each came from ("moe": "chunked/16 (user cache)").
	Used() map[string]string
}

// TunedLookup returns the Tuned of an engine on be running cfg with dt
// weights; moe are the options' MoE params as given, before defaults (a
// strategy set there is explicit and never looked up). nil: nothing tuned.
type TunedLookup func(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) Tuned

// applyTuned sets up a step's tuned configs and returns what undoes them.
// The options' MoE params come back with the rest, so the next step is
// looked up from the engine's own, not from this step's tuned ones.
func (e *Engine) applyTuned(tokens int) (restore func()) {
	if e.tuned == nil {
		return func() {}
	}
	own := e.opts.MoE
	moe, undo := e.tuned.Step(tokens, own)
	e.opts.MoE = moe
	return func() {
		undo()
		e.opts.MoE = own
	}
}

// TunedUsed lists, per kernel, the tuned configs the engine's steps used so
// far with where each came from ("moe": "chunked/16 (user cache)"),
// several joined by "; ". Empty without Options.Tuned.
func (e *Engine) TunedUsed() map[string]string {
	if e.tuned == nil {
		return map[string]string{}
	}
	return e.tuned.Used()
}
