package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// stopAfter is a source whose context is cancelled, with a cause, once it
// has handed out after tensors: a signal that comes as a model is built.
type stopAfter struct {
	model.Source
	after, made int
	cancel      context.CancelCauseFunc
}

func (s *stopAfter) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	if s.made++; s.made == s.after {
		s.cancel(errors.New("interrupt signal received"))
	}
	return s.Source.Tensor(spec)
}

// countFrees is a backend that counts the weights it makes and the
// tensors handed back.
type countFrees struct {
	bridge.Backend
	weights, frees int
}

func (b *countFrees) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	b.weights++
	return b.Backend.Weight(dt, shape, data)
}

func (b *countFrees) Free(t bridge.Tensor) {
	b.frees++
	b.Backend.Free(t)
}

// A build whose context ends as its first tensors are made stops at the
// next tensor, not at the model's end (minutes for a large one): it reads
// no more, hands back what it made, and says why it stopped (docs/data.md).
func TestBuildStopsOnItsContext(t *testing.T) {
	for _, tc := range []struct {
		preset string
		layers int
	}{
		{"qwen3-moe-mini", 0}, // a MoE: every expert a tensor
		{"qwen2-0.5b", 4},
		{"gpt2", 2}, // its own loader (gpt2.go)
	} {
		t.Run(tc.preset, func(t *testing.T) {
			cfg, err := model.Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			if tc.layers > 0 {
				if cfg, err = cfg.WithLayers(tc.layers); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			src := &stopAfter{Source: model.NewSynthetic(1, bridge.F16), after: 3, cancel: cancel}
			be := &countFrees{Backend: cpu.New(cpu.Options{})}
			e, err := NewContext(ctx, be, cfg, src, Options{KVTokens: 64})
			if err == nil {
				e.Close()
				t.Fatalf("built all %d tensors past its context's end", src.made)
			}
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupt signal received") {
				t.Errorf("error %q: want context.Canceled, saying its cause", err)
			}
			if all := len(cfg.Tensors()); src.made != src.after {
				t.Errorf("read %d of %d tensors, want %d: the build stops at the next tensor", src.made, all, src.after)
			}
			if be.weights == 0 || be.frees != be.weights {
				t.Errorf("%d tensors freed of the %d made, want all", be.frees, be.weights)
			}
		})
	}
}
