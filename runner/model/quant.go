package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// QuantScheme says which of a model's matrices are packed, and how: from a
// quantized preset's name, an mlx-lm config's "quantization", or a GGUF
// file's tensor types. docs/quantization.md describes the formats.
type QuantScheme struct {
	// Name is the preset format (q4, q6, q4_k_m, q8_0, ...), "mlx" or
	// "gguf"; "safetensors" for a float folder's, which packs nothing and
	// only names its F32 matrices.
	Name string
	// Default packs every matrix not in Per.
	Default *quant.Spec
	// Per overrides Default by tensor name; a nil entry keeps the tensor
	// in floats.
	Per map[string]*quant.Spec
	// F32 names float matrices held in f32 whatever the run's dtype:
	// llama.cpp's files keep MoE routers (ffn_gate_inp) in F32, and a
	// checkpoint kept as stored may hold any matrix in F32 beside
	// half-precision ones.
	F32 map[string]bool
}

// For returns how the tensor called name is packed; ok false for floats.
func (q *QuantScheme) For(name string) (quant.Spec, bool) {
	if q == nil {
		return quant.Spec{}, false
	}
	if s, ok := q.Per[name]; ok {
		if s == nil {
			return quant.Spec{}, false
		}
		return *s, true
	}
	if q.Default == nil {
		return quant.Spec{}, false
	}
	return *q.Default, true
}

// RunFormat is the format a backend with rules (a backend, or its
// QuantRules) runs a packed format s in: s itself, or where the backend
// lacks s or runs it faster wider (bridge.QuantPreference), the first
// format that holds s's values exactly (quant.Forms: an affine 3-bit
// matrix at 4 bits, a 5-bit one at 8, Q5_K as 5- or 8-bit affine groups)
// that it runs and does not prefer wider; failing that, the last it runs.
// A format neither it nor a form runs is returned as it is, for the load
// to refuse with the backend's reason.
func RunFormat(rules bridge.QuantSupport, s quant.Spec) quant.Spec {
	if rules == nil {
		return s
	}
	pref, _ := rules.(bridge.QuantPreference)
	good := func(f quant.Spec) bool {
		return rules.SupportsQuant(f) == nil && (pref == nil || !pref.PrefersWider(f))
	}
	if good(s) {
		return s
	}
	run := s
	for _, f := range quant.Forms(s) {
		if good(f) {
			return f
		}
		if rules.SupportsQuant(f) == nil {
			run = f
		}
	}
	return run
}

// RunOn is c as a backend with rules runs it (RunFormat for every packed
// tensor): c itself when nothing changes, else a copy, c left as it is.
func (c *Config) RunOn(rules bridge.QuantSupport) *Config {
	if rules == nil || c.Quant == nil {
		return c
	}
	run := func(s *quant.Spec) *quant.Spec {
		if s == nil {
			return nil
		}
		if r := RunFormat(rules, *s); r != *s {
			return &r
		}
		return s
	}
	q := &QuantScheme{Name: c.Quant.Name, Default: run(c.Quant.Default), Per: make(map[string]*quant.Spec, len(c.Quant.Per)), F32: c.Quant.F32}
	changed := q.Default != c.Quant.Default
	for n, s := range c.Quant.Per {
		q.Per[n] = run(s)
		changed = changed || q.Per[n] != s
	}
	if !changed {
		return c
	}
	out := *c
	out.Quant = q
	return &out
}

// QuantFormats are the synthetic quantized formats a preset runs in: MLX
// affine at 2, 3, 4, 5, 6 and 8 bits (group 64, the checkpoint's float
// dtype for scales), mlx's nvfp4 and mxfp8 modes, GGUF's Q4_K_M and Q5_K_M
// mixes and Q8_0, and the IQ2_XXS and IQ3_XXS grid types. suites/parse.go
// lists the same names.
var QuantFormats = []string{"q2", "q3", "q4", "q5", "q6", "q8", "nvfp4", "mxfp8", "q4_k_m", "q5_k_m", "q8_0", "iq2_xxs", "iq3_xxs"}

// ggufFormats are the QuantFormats that stand for llama.cpp's files.
var ggufFormats = []string{"q4_k_m", "q5_k_m", "q8_0", "iq2_xxs", "iq3_xxs"}

// Format is the dtype a preset's weights take: a float dtype, or a packed
// format with its floats (norms stay f32; affine scales and unpacked
// matrices take DType).
type Format struct {
	DType bridge.DType
	Quant string // "" for float weights; else one of QuantFormats
}

func (f Format) String() string {
	if f.Quant != "" {
		return f.Quant
	}
	return f.DType.String()
}

// ParseFormat reads a dtype as suites and flags spell it.
func ParseFormat(s string) (Format, error) {
	if slices.Contains(QuantFormats, strings.ToLower(s)) {
		return Format{DType: bridge.BF16, Quant: strings.ToLower(s)}, nil
	}
	dt, err := bridge.ParseDType(s)
	if err != nil || dt == bridge.I32 {
		return Format{}, fmt.Errorf("unknown dtype %q (want f32, f16, bf16, %s)", s, strings.Join(QuantFormats, ", "))
	}
	return Format{DType: dt}, nil
}

// sixBitHead puts the LM head (and a tied embedding, GPT-2's wte) in Q6_K.
func sixBitHead(cfg *Config, q *QuantScheme) {
	q6 := &quant.Spec{Type: quant.Q6_K}
	q.Per["lm_head.weight"] = q6
	if cfg.TieEmbed {
		q.Per["model.embed_tokens.weight"] = q6
	}
	if cfg.GPT2() {
		q.Per[GPT2Embed] = q6
	}
}

// presetScheme is a quantized preset's scheme for cfg. Q4_K_M follows
// llama.cpp's mix: Q4_K everywhere, Q6_K for the LM head and for the value
// projections and down projections of the layers its use_more_bits picks.
// Q5_K_M is the same mix around Q5_K.
func presetScheme(cfg *Config, name string, scale bridge.DType) *QuantScheme {
	sf := quant.BF16
	switch scale {
	case bridge.F16:
		sf = quant.F16
	case bridge.F32:
		sf = quant.F32
	}
	q := &QuantScheme{Name: name, Per: map[string]*quant.Spec{}}
	// The MLX formats are the affine kernel dtypes of the same names.
	if a, ok := ops.DType(name).Quant(); ok && a.Type == quant.Affine {
		bits := a.Bits
		q.Default = &quant.Spec{Type: quant.Affine, Bits: bits, Group: 64, Scale: sf}
		// mlx-lm keeps MoE routers at 8 bits (its quant_predicate).
		for l := 0; l < cfg.ModelLayers && bits < 8; l++ {
			q.Per[LayerPrefix(l)+"mlp.gate.weight"] = &quant.Spec{Type: quant.Affine, Bits: 8, Group: 64, Scale: sf}
		}
	}
	switch name {
	case "nvfp4", "mxfp8":
		// As mlx-lm's --q-mode writes them: every matrix in the mode, the
		// MoE routers affine at 8 bits (its quant_predicate).
		s := quant.MLXFPModes[name].Spec
		q.Default = &s
		for l := 0; l < cfg.ModelLayers; l++ {
			q.Per[LayerPrefix(l)+"mlp.gate.weight"] = &quant.Spec{Type: quant.Affine, Bits: 8, Group: 64, Scale: sf}
		}
	case "q8_0":
		q.Default = &quant.Spec{Type: quant.Q8_0}
	case "q4_k_m", "q5_k_m":
		// Rows that 256 does not divide fall back as llama.cpp's
		// tensor_type_fallback has it: Q4_K to Q5_0, Q5_K to Q5_1, each
		// run as it is transcoded (Q6_K's fallback, Q8_0, comes below).
		main, fallback := quant.Spec{Type: quant.Q4_K}, quant.Transcoders["Q5_0"].Into
		if name == "q5_k_m" {
			main, fallback = quant.Spec{Type: quant.Q5_K}, quant.Transcoders["Q5_1"].Into
		}
		q.Default = &main
		for _, t := range cfg.Tensors() {
			if t.Matrix && t.Shape[len(t.Shape)-1]%256 != 0 {
				q.Per[t.Name] = &fallback
			}
		}
		q6 := &quant.Spec{Type: quant.Q6_K}
		n := cfg.ModelLayers
		for l := 0; l < n; l++ {
			if useMoreBits(l, n) {
				p := LayerPrefix(l)
				q.Per[p+"self_attn.v_proj.weight"] = q6
				q.Per[p+"mlp.down_proj.weight"] = q6
				for e := 0; e < cfg.NumExperts; e++ {
					q.Per[fmt.Sprintf("%smlp.experts.%d.down_proj.weight", p, e)] = q6
				}
			}
		}
		sixBitHead(cfg, q)
		if cfg.GPT2() {
			// GPT-2's MLP's c_proj is the down projection (llama.cpp's
			// ffn_down). c_attn holds v with q and k, so it stays Q4_K as
			// llama.cpp's fused attn_qkv does.
			for l := 0; l < n; l++ {
				if useMoreBits(l, n) {
					q.Per[GPT2LayerPrefix(l)+"mlp.c_proj.weight"] = q6
				}
			}
		}
	case "iq2_xxs", "iq3_xxs":
		// The grid type everywhere but the LM head, in Q6_K as llama.cpp's
		// low-bit mixes keep it in six bits or so.
		t := quant.IQ2_XXS
		if name == "iq3_xxs" {
			t = quant.IQ3_XXS
		}
		q.Default = &quant.Spec{Type: t}
		sixBitHead(cfg, q)
	}
	if cfg.GPT2() {
		// The learned positions are added as floats (PositionEmbeddingOp).
		q.Per[GPT2Positions] = nil
	}
	if slices.Contains(ggufFormats, name) {
		// llama.cpp's converter writes MoE routers in F32 and llama-quantize
		// leaves them so, in every mix.
		for l := 0; l < cfg.ModelLayers; l++ {
			if cfg.IsMoELayer(l) {
				r := LayerPrefix(l) + "mlp.gate.weight"
				q.Per[r] = nil
				if q.F32 == nil {
					q.F32 = map[string]bool{}
				}
				q.F32[r] = true
			}
		}
	}
	// A matrix whose rows do not divide into blocks: llama.cpp falls back
	// to a 32-value type (Q8_0 here), mlx-lm leaves it in floats.
	q8 := &quant.Spec{Type: quant.Q8_0}
	for _, t := range cfg.Tensors() {
		k := t.Shape[len(t.Shape)-1]
		if s, ok := q.For(t.Name); ok && t.Matrix && s.Validate(k) != nil {
			q.Per[t.Name] = nil
			if s.Type == quant.Q4_K || s.Type == quant.Q6_K || quant.IsIQ(s.Type) {
				if q8.Validate(k) == nil {
					q.Per[t.Name] = q8
				}
			}
		}
	}
	return q
}

// useMoreBits is llama.cpp's choice of layers that get more bits in its _M
// mixes: the first and last eighth, and every third in between.
func useMoreBits(l, n int) bool {
	return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2
}

// PresetFormat is a preset's config with its matrices in f: packed formats
// set Quant, so memory figures count packed bytes.
func PresetFormat(name string, f Format) (*Config, error) {
	c, err := Preset(name)
	if err != nil {
		return nil, err
	}
	if f.Quant != "" {
		c.Quant = presetScheme(c, f.Quant, f.DType)
	}
	return c, nil
}
