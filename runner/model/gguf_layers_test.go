package model

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/gguf"
)

// withArrayKV is the GGUF file at src with its u32 metadata key made an
// array of elem values vals (u32 or i32), the data moved to the new
// alignment boundary: as gguf-py writes a list given to add_head_count.
func withArrayKV(t *testing.T, src, key string, elem gguf.ValueType, vals []int32) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v := f.KV[key]; v.Type != gguf.U32 {
		t.Fatalf("%s is %v, want u32", key, v.Type)
	}
	up := func(n uint64) uint64 { return (n + f.Alignment - 1) / f.Alignment * f.Alignment }
	end := uint64(0)
	for _, ti := range f.Tensors {
		end = max(end, up(ti.Offset+ti.Size))
	}
	data := uint64(len(b)) - end
	named := func(s string) int { // where s, as the header spells it, starts
		i := strings.LastIndex(string(b[:data]), string(binary.LittleEndian.AppendUint64(nil, uint64(len(s))))+s)
		if i < 0 {
			t.Fatalf("no %s in %s", s, src)
		}
		return i
	}
	k0 := named(key)
	k1 := k0 + 8 + len(key) + 4 + 4 // its name, value type and u32
	infos := named(f.Tensors[0].Name)
	last := f.Tensors[len(f.Tensors)-1]
	l := named(last.Name) + 8 + len(last.Name)
	h := l + 4 + 8*int(binary.LittleEndian.Uint32(b[l:])) + 4 + 8 // dims, type, offset
	kv := binary.LittleEndian.AppendUint64(nil, uint64(len(key)))
	kv = append(kv, key...)
	kv = binary.LittleEndian.AppendUint32(kv, uint32(gguf.Array))
	kv = binary.LittleEndian.AppendUint32(kv, uint32(elem))
	kv = binary.LittleEndian.AppendUint64(kv, uint64(len(vals)))
	for _, v := range vals {
		kv = binary.LittleEndian.AppendUint32(kv, uint32(v))
	}
	out := slices.Concat(b[:k0], b[k1:infos], kv, b[infos:h])
	out = append(out, make([]byte, up(uint64(len(out)))-uint64(len(out)))...)
	out = append(out, b[data:]...)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The counts llama.cpp also reads as one value a layer (head_count,
// head_count_kv, feed_forward_length) open from an array whose values all
// agree, as the model their one value gives; one whose values differ, or
// whose length is not block_count, and an array where one integer is
// wanted, are refused by key.
func TestGGUFPerLayerArrays(t *testing.T) {
	const src = "../testdata/gguf/llamacpp-qwen3-q8_0.gguf" // 2 layers, 4 heads, 2 KV heads, ffn 512
	want, s, err := Open(Spec{Model: src})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cases := []struct {
		key  string
		elem gguf.ValueType
		vals []int32
		err  string // "" opens
	}{
		{"qwen3.attention.head_count_kv", gguf.U32, []int32{2, 2}, ""},
		{"qwen3.attention.head_count", gguf.I32, []int32{4, 4}, ""},
		{"qwen3.feed_forward_length", gguf.U32, []int32{512, 512}, ""},
		{"qwen3.attention.head_count_kv", gguf.U32, []int32{2, 4}, "qwen3.attention.head_count_kv differs between layers (layer 0: 2, layer 1: 4)"},
		{"qwen3.attention.head_count_kv", gguf.U32, []int32{2}, "qwen3.attention.head_count_kv is an array of 1 values, one a layer, but qwen3.block_count is 2"},
		{"qwen3.attention.head_count_kv", gguf.I32, []int32{-2, -2}, "qwen3.attention.head_count_kv = -2 is out of range"},
		{"qwen3.attention.head_count_kv", gguf.F32Value, []int32{0x40000000, 0x40000000}, "qwen3.attention.head_count_kv is an array of f32, not of integers"},
		{"qwen3.context_length", gguf.U32, []int32{256, 256}, "qwen3.context_length is an array of 2 values, not an integer"},
	}
	for _, c := range cases {
		t.Run(c.key+" "+c.err, func(t *testing.T) {
			p := withArrayKV(t, src, c.key, c.elem, c.vals)
			if c.err != "" {
				openRefused(t, p, c.err)
				return
			}
			if err := openAll(p); err != nil {
				t.Fatal(err)
			}
			got, s, err := Open(Spec{Model: p})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if got.Heads != want.Heads || got.KVHeads != want.KVHeads || got.Inter != want.Inter || got.HeadDim != want.HeadDim {
				t.Fatalf("heads %d/%d of %d, ffn %d; want %d/%d of %d, ffn %d",
					got.Heads, got.KVHeads, got.HeadDim, got.Inter, want.Heads, want.KVHeads, want.HeadDim, want.Inter)
			}
		})
	}
}

// A per-layer array far longer than block_count is refused by its length
// before its values are read (a float64 each, twice an i32's bytes).
func TestGGUFPerLayerArrayLength(t *testing.T) {
	const src = "../testdata/gguf/llamacpp-qwen3-q8_0.gguf" // 2 layers
	for _, tc := range []struct {
		key  string
		n    int
		want string
	}{
		{"qwen3.attention.head_count", 4 << 20, "qwen3.attention.head_count is an array of 4194304 values, one a layer, but qwen3.block_count is 2"},
		{"qwen3.feed_forward_length", 3, "qwen3.feed_forward_length is an array of 3 values, one a layer, but qwen3.block_count is 2"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			p := withArrayKV(t, src, tc.key, gguf.I32, make([]int32, tc.n))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			openRefused(t, p, tc.want)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > uint64(tc.n)*4/2+4<<20 {
				t.Errorf("allocated %d KB for an array of %d KB", got>>10, tc.n*4>>10)
			}
		})
	}
}
