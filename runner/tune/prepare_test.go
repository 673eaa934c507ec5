package tune

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// run records what every model case will use before the first runs
// (EngineChoices), for up to a suite's 10000 cases: the store reads a
// model's tensor list once for all its cases, not once for each of its
// matmul shapes nor once a case (12 ms a case of Qwen3-30B-A3B), and the
// CPU backend's Info is cheap, or such a suite sat silent for minutes
// before its first case.
func TestEngineChoicesCost(t *testing.T) {
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(cpu.Options{Threads: 1})
	s := NewStore()
	if len(matmulShapes(cfg, 8, 8)) < 3 {
		t.Fatal("the model has too few matmul shapes to tell")
	}
	tensors := testing.AllocsPerRun(3, func() { cfg.Tensors() })
	choices := testing.AllocsPerRun(3, func() { s.EngineChoices(be, cfg, bridge.F32, bridge.MoEParams{}, 8, 8) })
	if choices > tensors/4 {
		t.Errorf("EngineChoices made %.0f allocations a call of a config it was asked of, the tensor list alone %.0f: each call lists the tensors again", choices, tensors)
	}
	if info := testing.AllocsPerRun(10, func() { be.Info() }); info > 20 {
		t.Errorf("the cpu backend's Info made %.0f allocations, want few (its CPU model and memory are read once)", info)
	}
}
