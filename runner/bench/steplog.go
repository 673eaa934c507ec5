package bench

import (
	"time"

	"github.com/mtlbench/mtlbench/runner/engine"
)

// StepRecord is one engine step of a model case's repetition, as the step
// log writes it (Options.Steps, one JSON object a line): where a
// repetition's slow steps are, behind its ITL tail and the gap between its
// median step and its mean (docs/data.md, "Step logs").
type StepRecord struct {
	Case string `json:"case"`
	Rep  int    `json:"rep"` // -1: the warm-up
	Step int    `json:"step"`
	// Kind is prefill, decode, mixed (prompt chunks beside decodes) or
	// recompute (a preempted sequence's generated tokens computed again).
	Kind   string  `json:"kind"`
	Tokens int     `json:"tokens"`
	Seqs   int     `json:"seqs"`
	Ms     float64 `json:"ms"`
	// EncodeMs and DeviceMs are the host's and the device's share of the
	// step (engine.StepResult.Encode, bridge.StepStats.DeviceTime); absent
	// where the backend keeps neither.
	EncodeMs float64 `json:"encode_ms,omitempty"`
	DeviceMs float64 `json:"device_ms,omitempty"`
	// SampleMs is the host's time drawing the step's sampled tokens
	// (engine.StepResult.Sample); absent where the device's argmax gave
	// them.
	SampleMs float64 `json:"sample_ms,omitempty"`
	// GraphMisses are the step's launch lists that ran without a graph held
	// for them (CUDA: launched directly or captured).
	GraphMisses int `json:"graph_misses,omitempty"`
}

func stepRecord(step int, res *engine.StepResult) StepRecord {
	kind := "decode"
	switch {
	case res.RecomputeTokens > 0:
		kind = "recompute"
	case res.PrefillTokens > 0 && res.DecodeTokens > 0:
		kind = "mixed"
	case res.PrefillTokens > 0:
		kind = "prefill"
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return StepRecord{Step: step, Kind: kind, Tokens: res.Tokens, Seqs: res.Seqs, Ms: ms(res.Duration),
		EncodeMs: ms(res.Encode), DeviceMs: ms(res.Stats.DeviceTime), SampleMs: ms(res.Sample), GraphMisses: res.Stats.GraphMisses}
}
