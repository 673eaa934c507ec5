package ops

import (
	"maps"
	"reflect"
	"testing"
)

// The names are what suites and stored results hold: they never change.
func TestNamesStable(t *testing.T) {
	want := []ID{"paged_attention_decode", "paged_attention_prefill", "kv_write", "rms_norm", "add_rms_norm",
		"rope", "silu_mul", "matmul", "moe", "argmax", "embedding", "layer_norm", "add_layer_norm", "gelu_tanh",
		"position_embedding", "qmatmul", "qmoe", "qembedding"}
	if got := IDs(); !reflect.DeepEqual(got, want) {
		t.Errorf("IDs() = %v, want %v", got, want)
	}
	for _, id := range want {
		if o, ok := Lookup(id); !ok || o.ID != id {
			t.Errorf("Lookup(%s) = %v, %v", id, o, ok)
		}
	}
	if _, ok := Lookup("softmax"); ok {
		t.Error("Lookup found an undeclared op")
	}
}

// A tuning space's shape dimensions are its op's parameters, with the op's
// defaults, so a tuned config keys the same shape a kernel case runs.
func TestSpacesMatchTheirOps(t *testing.T) {
	n := 0
	for _, o := range All() {
		for b, s := range o.Tuning {
			n++
			if s.Backend != b || s.Op != o.ID {
				t.Errorf("%s/%s: space says %s/%s", o.ID, b, s.Backend, s.Op)
			}
			for _, d := range s.Dims {
				if d.Device {
					continue
				}
				u, ok := o.Use(d.Name)
				if !ok {
					t.Errorf("%s/%s: dimension %s is not a parameter of the op", o.ID, b, d.Name)
				} else if u.Default != d.Default {
					t.Errorf("%s/%s: dimension %s defaults to %d, the op to %d", o.ID, b, d.Name, d.Default, u.Default)
				}
			}
		}
	}
	if n != 17 {
		t.Errorf("%d tuning spaces, want 17 (cpu moe, matmul; cuda matmul, qmatmul, attention, moe; metal decode and prefill attention, rms_norm, add_rms_norm, layer_norm, add_layer_norm, matmul, moe, qmatmul, qmoe, argmax)", n)
	}
}

// Cost models at hand-computed shapes; kbench's tests check the same
// numbers through Bytes and Flops.
func TestCosts(t *testing.T) {
	f32 := Types{Act: F32, Weight: F32}
	tests := []struct {
		op   ID
		a    Args
		t    Types
		want Cost
	}{
		{MatMul, Args{Ints: Shape{M: 2, N: 3, K: 4}}, f32, Cost{Read: 48 + 32, Written: 24, FLOPs: 48}},
		// K alias: hidden spells k.
		{MatMul, Args{Ints: Shape{Tokens: 2, N: 3, Hidden: 4}}, f32, Cost{Read: 48 + 32, Written: 24, FLOPs: 48}},
		{RMSNorm, Args{Ints: Shape{Tokens: 2, Width: 8}}, Types{Act: BF16}, Cost{Read: 2*8*2 + 32, Written: 2 * 8 * 2, FLOPs: 64}},
		{PagedAttentionDecode, Args{Ints: Shape{Seqs: 2, Context: 10, NumHeads: 2, NumKVHeads: 1, HeadSize: 32}}, f32,
			Cost{Read: 4 * (2*64 + 2*2*32 + 2*2*10*32), Written: 4 * (2*64 + 2*2*32), FLOPs: 2 * 11 * 4 * 64}},
		{Embedding, Args{Ints: Shape{Tokens: 3, Width: 8, N: 50}}, Types{Act: F32, Weight: BF16}, Cost{Read: 3*8*2 + 12, Written: 3 * 8 * 4}},
		{LayerNorm, Args{Ints: Shape{Tokens: 2, Width: 8}}, f32, Cost{Read: 2*8*4 + 2*32, Written: 2 * 8 * 4, FLOPs: 7 * 16}},
		{AddLayerNorm, Args{Ints: Shape{Tokens: 2, Hidden: 8}}, f32, Cost{Read: 2*2*8*4 + 2*32, Written: 2 * 2 * 8 * 4, FLOPs: 8 * 16}},
		{GELU, Args{Ints: Shape{Tokens: 3, Intermediate: 10}}, Types{Act: F16}, Cost{Read: 60, Written: 60, FLOPs: 240}},
		{PositionEmbedding, Args{Ints: Shape{Tokens: 3, Width: 8, N: 64}}, Types{Act: F32, Weight: BF16},
			Cost{Read: 3*8*2 + 3*8*4 + 12, Written: 3 * 8 * 4, FLOPs: 24}},
		// Unknown routing: every pair a new expert, capped at experts.
		{MoE, Args{Ints: Shape{Tokens: 1, Experts: 4, TopK: 2, Hidden: 8, Intermediate: 4}}, f32,
			Cost{Read: 4*8*4 + 2*3*8*4*4 + 8*4, Written: 8 * 4, FLOPs: 2*4*8 + 2*(6*8*4+5*4+2*8)}},
	}
	for _, tt := range tests {
		o, _ := Lookup(tt.op)
		if got := o.Cost(o.Resolve(tt.a), tt.t); got != tt.want {
			t.Errorf("%s %v: cost %+v, want %+v", tt.op, tt.a.Ints, got, tt.want)
		}
	}
	// Estimate applies the op's dtype default (bf16 weights).
	o, _ := Lookup(MatMul)
	if got := o.Estimate(Args{Ints: Shape{M: 1, N: 2, K: 2}}, F32); got.Read != 2*2*2+2*4 {
		t.Errorf("Estimate: %+v", got)
	}
}

// Attention past a sliding window reads and attends to the window's keys
// alone: decode and a prefill chunk, with no window, one longer than the
// context and one shorter (f32, 2 query heads and 1 KV head of 32).
func TestAttentionCostWindow(t *testing.T) {
	f32 := Types{Act: F32, Weight: F32}
	const qw, kvw = 64, 32
	// cost is the cost of seqs sequences of tok new tokens whose queries
	// attend to keys keys in all and read cached cached keys each.
	cost := func(seqs, tok, keys, cached int64) Cost {
		return Cost{
			Read:    4 * (seqs*tok*qw + 2*seqs*tok*kvw + 2*seqs*cached*kvw),
			Written: 4 * (seqs*tok*qw + 2*seqs*tok*kvw),
			FLOPs:   seqs * keys * 4 * qw,
		}
	}
	for _, c := range []struct {
		name string
		op   ID
		s    Shape
		want Cost
	}{
		{"decode no window", PagedAttentionDecode, Shape{Seqs: 2, Context: 10}, cost(2, 1, 11, 10)},
		{"decode window longer", PagedAttentionDecode, Shape{Seqs: 2, Context: 10, Window: 64}, cost(2, 1, 11, 10)},
		{"decode window shorter", PagedAttentionDecode, Shape{Seqs: 2, Context: 10, Window: 4}, cost(2, 1, 4, 3)},
		{"prefill no window", PagedAttentionPrefill, Shape{Seqs: 1, Tokens: 4, Context: 20}, cost(1, 4, 4*20+10, 20)},
		{"prefill window longer", PagedAttentionPrefill, Shape{Seqs: 1, Tokens: 4, Context: 20, Window: 30}, cost(1, 4, 4*20+10, 20)},
		// Each of the 4 queries attends to 8 keys; the first reads the
		// cached positions 13..19.
		{"prefill chunk past window", PagedAttentionPrefill, Shape{Seqs: 1, Tokens: 4, Context: 20, Window: 8}, cost(1, 4, 32, 7)},
		// From 0: the queries at 0..7 see 1..8 keys, the rest 8.
		{"prefill from 0 past window", PagedAttentionPrefill, Shape{Seqs: 3, Tokens: 12, Window: 8}, cost(3, 12, 36+4*8, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, _ := Lookup(c.op)
			s := Shape{NumHeads: 2, NumKVHeads: 1, HeadSize: 32}
			maps.Copy(s, c.s)
			if got := o.Cost(s, f32); got != c.want {
				t.Errorf("cost %+v, want %+v", got, c.want)
			}
		})
	}
}
