package engine

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// stepTuned tunes the MoE of one-token steps only, as a store holding one
// bucket would, and records the params each step was looked up from.
type stepTuned struct{ got []bridge.MoEParams }

func (s *stepTuned) Step(tokens int, moe bridge.MoEParams) (bridge.MoEParams, func()) {
	s.got = append(s.got, moe)
	if tokens == 1 {
		return bridge.MoEParams{Strategy: bridge.MoELoop}, func() {}
	}
	return moe, func() {}
}

func (s *stepTuned) Used() map[string]string { return nil }

// Every step is looked up from the engine's own MoE params: a decode
// step's tuned ones do not carry into the prefill after it, which has no
// tuned entry of its own.
func TestTunedStepDoesNotCarryOver(t *testing.T) {
	st := &stepTuned{}
	own := bridge.MoEParams{Strategy: bridge.MoEGrouped}
	e := openFixture(t, "qwen3_moe", cpu.New(cpu.Options{}), Options{MoE: own,
		Tuned: func(bridge.Backend, *model.Config, bridge.DType, bridge.MoEParams) Tuned { return st }})
	for i := range 2 {
		if _, err := e.Generate([]Request{{ID: i, Prompt: []int32{5, 17, 300, 42}, MaxNewTokens: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(st.got) < 4 {
		t.Fatalf("%d steps looked up, want at least 4", len(st.got))
	}
	// the first step, a prefill, is looked up from the engine's own params
	// (the options' with their defaults filled in)
	if st.got[0].Strategy != own.Strategy {
		t.Fatalf("first step looked up from %+v, want strategy %s", st.got[0], own.Strategy)
	}
	for i, p := range st.got {
		if p != st.got[0] {
			t.Errorf("step %d looked up from %+v, want the engine's own %+v", i, p, st.got[0])
		}
	}
}
