package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// failingWeights is the CPU backend refusing the float matrices refuse
// picks, as a device out of memory (or past its largest buffer) would.
type failingWeights struct {
	*cpu.Backend
	refuse func(shape []int) bool
}

func (f failingWeights) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	if dt == bridge.F32 && f.refuse(shape) {
		return nil, errors.New("out of device memory")
	}
	return f.Backend.Weight(dt, shape, data)
}

// A checkpoint whose experts are packed in part runs them in f32
// (model.Config.ExpertsInF32), converted as they load: a backend's refusal
// of one (an expert's down projection here) named no tensor, where every
// other weight's names it.
func TestFloatWeightErrorsNameTheTensor(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "../testdata/mlx/qwen3_moe-q4-partial"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		name   string
		refuse func(shape []int) bool
		want   string
	}{
		{"down", func(s []int) bool { return len(s) == 2 && s[0] == cfg.Hidden && s[1] == cfg.MoEInter }, "model.layers.0.mlp.experts.0.down_proj.weight: out of device memory"},
	} {
		_, err := engine.New(failingWeights{cpu.New(cpu.Options{}), c.refuse}, cfg, src, engine.Options{KVTokens: 64})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
