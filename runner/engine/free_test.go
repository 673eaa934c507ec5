package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/model"
)

// ledger is the CPU backend keeping every tensor it makes (weights, packed
// weights, allocations) until it is handed back, and every hand-back of a
// tensor it did not make or had already taken back.
type ledger struct {
	*cpu.Backend
	live    map[bridge.Tensor]string // what made it
	weights int                      // weights made, packed or not
	bad     []string
	// refuse and refuseAlloc, when positive, are the weight and the
	// allocation (counting from 1) the ledger refuses, as a device out of
	// memory would.
	refuse, refuseAlloc int
	allocs              int
	// shared, when set, hands out the tensor made of some host bytes again
	// for the same bytes, as the GPU backends do (bridge.HostKey), each
	// hand-out one more holder (held) that Free takes back.
	shared bool
	byKey  map[bridge.HostKey]bridge.Tensor
	held   map[bridge.Tensor]int
}

var errNoMemory = errors.New("out of device memory")

func newLedger() *ledger {
	return &ledger{Backend: cpu.New(cpu.Options{}), live: map[bridge.Tensor]string{},
		byKey: map[bridge.HostKey]bridge.Tensor{}, held: map[bridge.Tensor]int{}}
}

func (l *ledger) made(t bridge.Tensor, err error, how string, shape []int) (bridge.Tensor, error) {
	if err == nil {
		l.live[t] = fmt.Sprintf("%s %v", how, shape)
		l.held[t]++
	}
	return t, err
}

// again is the live tensor made of the bytes key names, handed out once
// more, when l is shared.
func (l *ledger) again(key bridge.HostKey) bridge.Tensor {
	t, ok := l.byKey[key]
	if !l.shared || !ok || l.held[t] == 0 {
		return nil
	}
	l.held[t]++
	return t
}

func (l *ledger) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	if l.weights++; l.weights == l.refuse {
		return nil, errNoMemory
	}
	key := bridge.KeyOf(dt, data)
	if t := l.again(key); t != nil {
		return t, nil
	}
	t, err := l.Backend.Weight(dt, shape, data)
	if err == nil {
		l.byKey[key] = t
	}
	return l.made(t, err, "weight", shape)
}

func (l *ledger) QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	if l.weights++; l.weights == l.refuse {
		return nil, errNoMemory
	}
	key := bridge.KeyOf(bridge.Packed, data)
	if t := l.again(key); t != nil {
		return t, nil
	}
	t, err := l.Backend.QuantWeight(spec, shape, data, scales, biases)
	if err == nil {
		l.byKey[key] = t
	}
	return l.made(t, err, "packed weight", shape)
}

func (l *ledger) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	if l.allocs++; l.allocs == l.refuseAlloc {
		return nil, errNoMemory
	}
	t, err := l.Backend.Alloc(dt, shape...)
	return l.made(t, err, "allocation", shape)
}

func (l *ledger) Free(t bridge.Tensor) {
	if _, ok := l.live[t]; !ok {
		l.bad = append(l.bad, fmt.Sprintf("freed a tensor not live (%v %v)", t.DType(), t.Shape()))
	}
	if l.held[t]--; l.held[t] > 0 {
		return
	}
	delete(l.held, t)
	delete(l.live, t)
	l.Backend.Free(t)
}

// stepThrough runs a request of a few tokens on e to its end.
func stepThrough(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.Add(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxNewTokens: 2}); err != nil {
		t.Fatal(err)
	}
	for e.Pending() {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
}

// left says what of l is still live or was freed wrongly, "" when nothing.
func (l *ledger) left() string {
	var b strings.Builder
	for _, s := range l.bad {
		fmt.Fprintf(&b, "%s; ", s)
	}
	if len(l.live) > 0 {
		fmt.Fprintf(&b, "%d tensors never freed, e.g.", len(l.live))
		n := 0
		for _, how := range l.live {
			if n++; n > 3 {
				break
			}
			fmt.Fprintf(&b, " %s;", how)
		}
	}
	return b.String()
}

// Every tensor the loaders make is handed back once by weights.free, and
// every other one (KV cache, workspaces) by Close: for dense models with
// each optional weight (biases of attention and MLP, QK-norm), MoE ones
// with float, packed and partly packed experts, GPT-2's own loader (q, k
// and v cut from c_attn, packed too), GGUF files, and builds stopped part
// way by their context. A weight field the release forgets leaks device
// memory on every build (docs/architecture.md).
func TestWeightsFreedAsMade(t *testing.T) {
	for _, path := range []string{
		"../testdata/hf/llama",
		"../testdata/hf/llama_bias",
		"../testdata/hf/llama_mlp_bias",
		"../testdata/hf/qwen2",
		"../testdata/hf/qwen3",
		"../testdata/hf/qwen3_moe",
		"../testdata/hf/mixtral",
		"../testdata/hf/gpt2",
		"../testdata/hf/gpt2_untied",
		"../testdata/mlx/llama-q4",
		"../testdata/mlx/llama_mlp_bias-q4",
		"../testdata/mlx/qwen3_moe-q4",
		"../testdata/mlx/qwen3_moe-q4-partial",
		"../testdata/mlx/gpt2-q4",
		"../testdata/gguf/llama-q4_k_m.gguf",
		"../testdata/gguf/llamacpp-gpt2-q8_0.gguf",
	} {
		cfg, src, err := model.Open(model.Spec{Model: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		all := len(cfg.Tensors())
		t.Run(path[len("../testdata/"):]+"/built", func(t *testing.T) {
			be := newLedger()
			e, err := New(be, cfg, src, Options{KVTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			stepThrough(t, e) // so that workspaces are made too
			e.Close()
			for tt, how := range be.live {
				if !strings.Contains(how, "weight") {
					t.Errorf("Close left a %s (%v) live", how, tt.DType())
				}
			}
			e.w.free(be)
			if s := be.left(); s != "" {
				t.Errorf("after Close and the weights' release: %s", s)
			}
		})
		for _, after := range []int{1, all / 2, all - 1} {
			t.Run(fmt.Sprintf("%s/stopped-after-%d-of-%d", path[len("../testdata/"):], after, all), func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				be := newLedger()
				var stop model.Source = &stopAfter{Source: src, after: after, cancel: cancel}
				if ps, ok := src.(model.PackedSource); ok {
					stop = &stopAfterPacked{stopAfter: stop.(*stopAfter), packed: ps}
				}
				_, err := NewContext(ctx, be, cfg, stop, Options{KVTokens: 64})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v, want the build stopped", err)
				}
				if be.weights == 0 {
					t.Fatal("stopped before any weight was made")
				}
				if s := be.left(); s != "" {
					t.Errorf("after the stopped build: %s", s)
				}
			})
		}
	}
}

// A build that fails part way (a weight the device has no memory for, a
// KV cache it cannot hold) returns no engine, so nothing would ever free
// what it made: it hands back every tensor it made, as a stopped build
// does, and a run's later cases on the backend load into that memory, not
// beside it.
func TestFailedBuildFreesWhatItMade(t *testing.T) {
	for _, path := range []string{
		"../testdata/hf/llama",
		"../testdata/hf/qwen3_moe",
		"../testdata/hf/gpt2",
		"../testdata/mlx/qwen3_moe-q4",
		"../testdata/mlx/gpt2-q4",
	} {
		cfg, src, err := model.Open(model.Spec{Model: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		all := len(cfg.Tensors())
		for _, c := range []struct {
			name                string
			refuse, refuseAlloc int
		}{
			{"weight 2 refused", 2, 0},
			{fmt.Sprintf("weight %d refused", all/2), all / 2, 0},
			{"first KV block refused", 0, 1},
			{"last KV block refused", 0, 2 * cfg.Layers},
		} {
			t.Run(path[len("../testdata/"):]+"/"+c.name, func(t *testing.T) {
				be := newLedger()
				be.refuse, be.refuseAlloc = c.refuse, c.refuseAlloc
				e, err := New(be, cfg, src, Options{KVTokens: 64})
				if err == nil {
					e.Close()
					t.Fatal("built, want the refusal")
				}
				if !errors.Is(err, errNoMemory) {
					t.Fatalf("got %v, want the backend's refusal", err)
				}
				if s := be.left(); s != "" {
					t.Errorf("after the failed build: %s", s)
				}
			})
		}
	}
}

// stopAfterPacked is stopAfter over a source that hands out packed
// matrices, counting those too.
type stopAfterPacked struct {
	*stopAfter
	packed model.PackedSource
}

func (s *stopAfterPacked) Packed(spec model.TensorSpec) (model.Packed, bool, error) {
	if s.made++; s.made == s.after {
		s.cancel(errors.New("interrupt signal received"))
	}
	return s.packed.Packed(spec)
}

// A step's workspace (its activations) that the device cannot hold in full
// fails the step; what of it was made is handed back, not left on the
// backend beside the engine's memory, and Close then leaves only the
// weights (which the backend keeps for the next engine).
func TestWorkspaceFreedWhenRefused(t *testing.T) {
	for _, path := range []string{"../testdata/hf/llama", "../testdata/hf/qwen3_moe", "../testdata/hf/gpt2"} {
		cfg, src, err := model.Open(model.Spec{Model: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		kv := 2 * cfg.Layers // the cache's allocations, made first
		for _, n := range []int{1, 2, 5, 9} {
			t.Run(fmt.Sprintf("%s/workspace allocation %d refused", path[len("../testdata/"):], n), func(t *testing.T) {
				be := newLedger()
				be.refuseAlloc = kv + n
				e, err := New(be, cfg, src, Options{KVTokens: 64})
				if err != nil {
					t.Fatal(err)
				}
				if err := e.Add(Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxNewTokens: 2}); err != nil {
					t.Fatal(err)
				}
				for err == nil && e.Pending() {
					_, err = e.Step()
				}
				if !errors.Is(err, errNoMemory) {
					t.Fatalf("got %v, want the refused allocation's error", err)
				}
				e.Close()
				for tt, how := range be.live {
					if !strings.Contains(how, "weight") {
						t.Errorf("a %s (%v) is left after Close", how, tt.DType())
					}
				}
			})
		}
	}
}

// sameNorms hands out each layer's input norm's bytes for its post-attention
// norm too (the same shape): two tensors of one build over the same host
// bytes, which a backend keeping weights by their bytes hands out as one.
type sameNorms struct{ model.Source }

func (s sameNorms) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	if p, ok := strings.CutSuffix(spec.Name, "post_attention_layernorm.weight"); ok {
		spec.Name = p + "input_layernorm.weight"
	}
	return s.Source.Tensor(spec)
}

// sameNormsPacked is sameNorms over a source that hands out packed
// matrices too.
type sameNormsPacked struct {
	sameNorms
	packed model.PackedSource
}

func (s sameNormsPacked) Packed(spec model.TensorSpec) (model.Packed, bool, error) {
	return s.packed.Packed(spec)
}

// A backend that gives builds over the same bytes one tensor (the GPU
// backends: bridge.HostKey, bridge.Holders) counts a holder for each
// hand-out. A second build that fails frees its holds and leaves the first
// engine's weights, which still runs; a tensor handed out twice within one
// build is freed twice, and nothing is left once both are done.
func TestWeightsHeldTwice(t *testing.T) {
	for _, path := range []string{"../testdata/hf/llama", "../testdata/hf/qwen3_moe", "../testdata/mlx/qwen3_moe-q4"} {
		cfg, src, err := model.Open(model.Spec{Model: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		all := len(cfg.Tensors())
		t.Run(path[len("../testdata/"):]+"/second build refused", func(t *testing.T) {
			be := newLedger()
			be.shared = true
			first, err := New(be, cfg, src, Options{KVTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			be.refuse = be.weights + all/2
			if _, err := New(be, cfg, src, Options{KVTokens: 64}); !errors.Is(err, errNoMemory) {
				t.Fatalf("got %v, want the backend's refusal", err)
			}
			for _, w := range first.w.made {
				if be.held[w] == 0 {
					t.Fatalf("the failed second build freed the first engine's %v %v", w.DType(), w.Shape())
				}
			}
			stepThrough(t, first)
			first.Close()
			first.w.free(be)
			if s := be.left(); s != "" {
				t.Errorf("after both builds: %s", s)
			}
		})
		t.Run(path[len("../testdata/"):]+"/one build, bytes twice", func(t *testing.T) {
			be := newLedger()
			be.shared = true
			var twice model.Source = sameNorms{src}
			if ps, ok := src.(model.PackedSource); ok {
				twice = sameNormsPacked{sameNorms{src}, ps}
			}
			e, err := New(be, cfg, twice, Options{KVTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			stepThrough(t, e)
			e.Close()
			e.w.free(be)
			if s := be.left(); s != "" {
				t.Errorf("after the build: %s", s)
			}
		})
	}
}
