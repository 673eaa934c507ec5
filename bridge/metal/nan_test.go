package metal_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// nanNorm hands out one float tensor with every value NaN, and the packed
// tensors of the source it wraps as they are.
type nanNorm struct {
	model.Source
	name string
}

func (n nanNorm) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	dt, b, err := n.Source.Tensor(spec)
	if err != nil || spec.Name != n.name {
		return dt, b, err
	}
	out := make([]byte, len(b))
	switch dt {
	case bridge.F32:
		for i := 0; i+4 <= len(out); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(float32(math.NaN())))
		}
	case bridge.F16:
		for i := 0; i+2 <= len(out); i += 2 {
			binary.LittleEndian.PutUint16(out[i:], 0x7e00)
		}
	default:
		for i := 0; i+2 <= len(out); i += 2 {
			binary.LittleEndian.PutUint16(out[i:], 0x7fc0)
		}
	}
	return dt, out, nil
}

func (n nanNorm) Packed(spec model.TensorSpec) (model.Packed, bool, error) {
	if ps, ok := n.Source.(model.PackedSource); ok {
		return ps.Packed(spec)
	}
	return model.Packed{}, false, nil
}

// A NaN that reaches a MoE router makes every routing probability NaN: the
// routing kernels (moe_route for prompts, the decode block's moe_mv_pair
// and qmoe_mv for single tokens) still pick experts in bounds, which the
// emulator would report otherwise, and fail the step with
// bridge.ErrNonFinite, which the engine explains by the weight holding the
// NaN, for float and packed experts.
func TestNaNRoutingFailsClearly(t *testing.T) {
	be := newEmu(t, metal.Tuning{})
	const norm = "model.layers.0.input_layernorm.weight"
	for _, fx := range []string{"../../runner/testdata/hf/qwen3_moe", "../../runner/testdata/hf/mixtral", "../../runner/testdata/mlx/qwen3_moe-q4"} {
		for _, prompt := range []int{4, 1} {
			name := filepath.Base(fx) + map[int]string{4: ", a prompt of 4", 1: ", one token"}[prompt]
			cfg, src, err := model.Open(model.Spec{Model: fx})
			if err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(be, cfg, nanNorm{Source: src, name: norm}, engine.Options{KVTokens: 64, KVDType: "f32"})
			if err != nil {
				src.Close()
				t.Fatal(err)
			}
			_, err = e.Generate([]engine.Request{{Prompt: []int32{3, 5, 7, 9}[:prompt], MaxNewTokens: 2}})
			e.Close()
			src.Close()
			var nf *engine.NonFiniteError
			if !errors.As(err, &nf) || !errors.Is(err, bridge.ErrNonFinite) || nf.Tensor != norm ||
				!strings.Contains(err.Error(), "router") || !strings.Contains(err.Error(), norm) {
				t.Errorf("%s: %v, want the router's NaN reported with %s named", name, err, norm)
				continue
			}
			t.Logf("%s: %v", name, err)
		}
	}
}
