package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// poisoned hands out one tensor's bytes with every value set to v.
type poisoned struct {
	model.Source
	name string
	v    float32
}

func (p poisoned) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	dt, b, err := p.Source.Tensor(spec)
	if err != nil || spec.Name != p.name {
		return dt, b, err
	}
	out := make([]byte, len(b))
	switch dt {
	case bridge.F32:
		for i := 0; i+4 <= len(out); i += 4 {
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(p.v))
		}
	default: // f16/bf16: all ones in the exponent is Inf or NaN in both
		for i := 0; i+2 <= len(out); i += 2 {
			bits := uint16(0x7fc0) // bf16 NaN
			if dt == bridge.F16 {
				bits = 0x7e00
			}
			if math.IsInf(float64(p.v), 1) {
				bits = map[bridge.DType]uint16{bridge.F16: 0x7c00, bridge.BF16: 0x7f80}[dt]
			}
			binary.LittleEndian.PutUint16(out[i:], bits)
		}
	}
	return dt, out, nil
}

// llamaFixture is the llama fixture's configuration and checkpoint,
// closed with the test.
func llamaFixture(t *testing.T) (*model.Config, model.Source) {
	t.Helper()
	dir := filepath.Join(fixtureDir, "llama")
	cfg, err := model.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenCheckpoint(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if !src.Has("lm_head.weight") {
		cfg.TieEmbed = true
	}
	return cfg, src
}

// NaN or Inf weights make non-finite logits: CheckFinite (run, before
// timing) and Generate (the generate command) fail with a NonFiniteError
// instead of returning tokens.
func TestNonFiniteLogitsFail(t *testing.T) {
	cfg, src := llamaFixture(t)
	be := cpu.New(cpu.Options{})
	if err := CheckFinite(context.Background(), be, cfg, src, Options{}); err != nil {
		t.Fatalf("the healthy fixture: %v", err)
	}
	const q = "model.layers.0.self_attn.q_proj.weight"
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		bad := poisoned{Source: src, name: q, v: v}
		err := CheckFinite(context.Background(), be, cfg, bad, Options{})
		var nf *NonFiniteError
		if !errors.As(err, &nf) {
			t.Errorf("weights of %v: %v, want a NonFiniteError", v, err)
			continue
		}
		// The error names the model and the tensor at fault.
		if nf.Tensor != q || !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), src.Describe()) {
			t.Errorf("weights of %v: %q, want it to name %s and %s", v, err, src.Describe(), q)
		}
	}
}

// poisonedPacked hands out one packed tensor with its first block's f16
// scale (Q8_0, Q4_0: the block's first two bytes) set to NaN.
type poisonedPacked struct {
	model.Source
	name string
}

func (p poisonedPacked) Packed(spec model.TensorSpec) (model.Packed, bool, error) {
	pk, ok, err := p.Source.(model.PackedSource).Packed(spec)
	if err != nil || !ok || spec.Name != p.name {
		return pk, ok, err
	}
	pk.Data = append([]byte(nil), pk.Data...)
	binary.LittleEndian.PutUint16(pk.Data, 0x7e00)
	return pk, ok, nil
}

// A NaN scale in a packed GGUF tensor is found where it is, not blamed on
// the configuration.
func TestNonFinitePackedNamesTheTensor(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "../testdata/gguf/qwen3_moe-q4_0.gguf"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const k = "model.layers.1.self_attn.k_proj.weight"
	err = CheckFinite(context.Background(), cpu.New(cpu.Options{}), cfg, poisonedPacked{Source: src, name: k}, Options{})
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Tensor != k || !strings.Contains(err.Error(), "qwen3_moe-q4_0.gguf") {
		t.Fatalf("got %v, want a NonFiniteError naming the file and %s", err, k)
	}
}

// poisonedRow hands out one tensor with one row's values set to NaN: an
// embedding row a prompt need not hold, met only once the model generates
// that token.
type poisonedRow struct {
	model.Source
	name string
	row  int
}

func (p poisonedRow) Tensor(spec model.TensorSpec) (bridge.DType, []byte, error) {
	dt, b, err := p.Source.Tensor(spec)
	if err != nil || spec.Name != p.name {
		return dt, b, err
	}
	if dt != bridge.F32 {
		return dt, b, fmt.Errorf("poisonedRow: %s is %v, want f32", spec.Name, dt)
	}
	out := slices.Clone(b)
	dim := spec.Shape[len(spec.Shape)-1]
	for i := p.row * dim; i < (p.row+1)*dim; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(math.NaN())))
	}
	return dt, out, nil
}

// A NaN met only by a generated token (its embedding row) makes the next
// decode step's logits NaN, which the first prompt position's check
// (WantLogits, CheckFinite) does not see. With Options.CheckLogits every
// sampled row's logits are read and checked; without it (a benchmark's
// greedy steps) the device's argmax gives bridge.NoToken for a row of no
// number, at no cost. Either way the request fails there with a
// NonFiniteError naming the position and the tensor, instead of going on
// with garbage tokens (token 0, the argmax of a row of NaN, before).
func TestCheckLogitsCatchesNonFiniteDecodeSteps(t *testing.T) {
	cfg, src := llamaFixture(t)
	be := cpu.New(cpu.Options{})
	prompt := []int32{1, 2, 3}
	req := Request{Prompt: prompt, MaxNewTokens: 6, WantLogits: true}
	gen := func(src model.Source, opts Options) ([]Output, error) {
		e, err := New(be, cfg, src, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.Generate([]Request{req})
	}
	clean, err := gen(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := clean[0].Tokens[0]
	if slices.Contains(prompt, first) {
		t.Fatalf("the first token %d is in the prompt %v: pick another prompt", first, prompt)
	}
	const embed = "model.embed_tokens.weight"
	bad := poisonedRow{Source: src, name: embed, row: int(first)}
	if err := CheckFinite(context.Background(), be, cfg, bad, Options{}); err != nil {
		t.Fatalf("the first prompt position's logits are finite, yet: %v", err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		says string
	}{
		{"CheckLogits", Options{CheckLogits: true}, "NaN for token 0 at position 3 of request 0"},
		{"the device's argmax", Options{}, "every one NaN or -inf, as the device's argmax found them, at position 3 of request 0"},
	} {
		got, err := gen(bad, tc.opts)
		var nf *NonFiniteError
		if !errors.As(err, &nf) {
			var tokens []int32
			if len(got) > 0 {
				tokens = got[0].Tokens
			}
			t.Errorf("%s: tokens %v, err %v: want a NonFiniteError", tc.name, tokens, err)
			continue
		}
		if nf.Tensor != embed || nf.Pos != len(prompt) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v: want the error at position %d saying %q and naming %s", tc.name, err, len(prompt), tc.says, embed)
		}
	}
}
