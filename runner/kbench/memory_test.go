package kbench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// limited is a CPU backend that says it has avail bytes (and cache bytes
// of last-level cache) and counts what it is handed: a small memory limit
// injected, so oversized cases are tested without allocating them.
type limited struct {
	*cpu.Backend
	avail, cache int64
	handed       int // tensors handed to Weight, Alloc or QuantWeight
}

func newLimited(avail int64) *limited { return &limited{Backend: newCPU(), avail: avail} }

func (l *limited) Info() bridge.DeviceInfo {
	i := l.Backend.Info()
	i.AvailableBytes, i.CacheBytes = l.avail, l.cache
	return i
}

func (l *limited) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	l.handed++
	return l.Backend.Weight(dt, shape, data)
}

func (l *limited) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	l.handed++
	return l.Backend.Alloc(dt, shape...)
}

func (l *limited) QuantWeight(s quant.Spec, shape []int, data, scales, biases []byte) (bridge.Tensor, error) {
	l.handed++
	return l.Backend.QuantWeight(s, shape, data, scales, biases)
}

// A case that does not fit fails before its first tensor is allocated,
// naming the op and its shape, what it needs and what is available; the
// last rows fit their tensors but not the reference check that reads them.
func TestCaseMemoryCheckedBeforeAllocating(t *testing.T) {
	const MiB = 1 << 20
	for _, tc := range []struct {
		c     ops.Args
		avail int64
		desc  string // how the error names the case
	}{
		// x (1 MiB) fits, the weight (64 MiB) does not.
		{kcase("matmul", "m", 64, "n", 4096, "k", 4096, "dtype", "f32"), 32 * MiB, "matmul m=64 n=4096 k=4096 dtype=f32"},
		// x alone (64 MiB) fills most of it, the weight pushes it over.
		{kcase("matmul", "m", 4096, "n", 2048, "k", 4096), 96 * MiB, "matmul m=4096 n=2048 k=4096 dtype=bf16"},
		// The K cache (16 MiB) fits, the V cache does not.
		{kcase("paged_attention_decode", "seqs", 1, "context", 4096, "num_heads", 8, "num_kv_heads", 8, "head_size", 128),
			24 * MiB, "paged_attention_decode seqs=1 context=4096 heads=8/8 head_size=128 block=16"},
		// Input and router fit, the experts do not.
		{kcase("moe", "tokens", 8, "experts", 64, "top_k", 2, "hidden", 512, "intermediate", 512), 40 * MiB,
			"moe tokens=8 experts=64 top_k=2 hidden=512 intermediate=512 dtype=bf16"},
		// The table fits, the gathered rows do not.
		{kcase("embedding", "tokens", 100000, "width", 64, "n", 1000), 10 * MiB, "embedding tokens=100000 vocab=1000 hidden=64 dtype=bf16"},
		{kcase("add_rms_norm", "tokens", 4096, "width", 1024), 40 * MiB, "add_rms_norm tokens=4096 width=1024"},
		{kcase("qmatmul", "m", 512, "n", 8192, "k", 4096, "dtype", "q8"), 32 * MiB, "qmatmul m=512 n=8192 k=4096 dtype=q8"},
		// Tensors 32 MiB; the check reads both caches before and after
		// the call, another 64 MiB.
		{kcase("paged_attention_decode", "seqs", 1, "context", 4096, "num_heads", 8, "num_kv_heads", 8, "head_size", 128),
			48 * MiB, "paged_attention_decode seqs=1 context=4096"},
		// Tensors 32 MiB; the check reads x, res and the outputs back.
		{kcase("add_rms_norm", "tokens", 2048, "width", 1024), 48 * MiB, "add_rms_norm tokens=2048 width=1024"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			be := newLimited(tc.avail)
			b, err := Prepare(be, tc.c)
			if err == nil {
				b.Close()
				t.Fatalf("prepared in %d MiB", tc.avail/MiB)
			}
			avail := fmt.Sprintf("%d MiB", tc.avail/MiB)
			for _, want := range []string{tc.desc, "needs", "available", avail} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if be.handed != 0 {
				t.Errorf("%d tensors handed to the backend before failing", be.handed)
			}
		})
	}
}

// The reference check widens what it reads a block at a time: a bf16
// weight is never copied whole to f32 (16 GiB for a 64k x 64k matmul),
// nor are all of a MoE's experts.
func TestCheckAllocatesLittle(t *testing.T) {
	for _, tc := range []struct {
		c      ops.Args
		weight int64 // bytes of the case's weights, as stored
	}{
		{kcase("matmul", "m", 1, "n", 1024, "k", 4096), 1024 * 4096 * 2},
		{kcase("matmul", "m", 3, "n", 4096, "k", 1024, "dtype", "f16"), 4096 * 1024 * 2},
		{kcase("moe", "tokens", 32, "experts", 32, "top_k", 4, "hidden", 512, "intermediate", 256), 32 * 3 * 512 * 256 * 2},
	} {
		t.Run(string(tc.c.Op), func(t *testing.T) {
			b, err := Prepare(newCPU(), tc.c)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got := allocated(func() {
				if _, err := b.Check(); err != nil {
					t.Fatal(err)
				}
			})
			if got > tc.weight/2 {
				t.Errorf("%s: the check allocated %d KiB, more than half the %d KiB of weights", b.Describe(), got>>10, tc.weight>>10)
			}
		})
	}
}

// allocated is the heap bytes f allocates.
func allocated(f func()) int64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// The plan counts what preparing allocates: every tensor and piece of
// metadata, the copies rotation makes (a cache set to force them), and at
// least what the reference check allocates.
func TestNeedMatchesPrepare(t *testing.T) {
	attn := []any{"num_heads", 4, "num_kv_heads", 2, "head_size", 32, "block_size", 8}
	for _, c := range []ops.Args{
		kcase("paged_attention_decode", append([]any{"seqs", 3, "context", 37}, attn...)...),
		kcase("paged_attention_prefill", append([]any{"seqs", 2, "tokens", 40, "context", 13}, attn...)...),
		kcase("rms_norm", "tokens", 3, "width", 96),
		kcase("add_rms_norm", "tokens", 3, "width", 96),
		kcase("rope", "tokens", 3, "num_heads", 4, "num_kv_heads", 2, "head_size", 96),
		kcase("silu_mul", "tokens", 2, "intermediate", 100),
		kcase("matmul", "m", 3, "n", 17, "k", 33, "dtype", "f32"),
		kcase("matmul", "m", 20, "n", 300, "k", 1024),
		kcase("moe", "tokens", 40, "experts", 8, "top_k", 3, "hidden", 32, "intermediate", 16),
		kcase("moe", "tokens", 5, "experts", 8, "top_k", 2, "hidden", 32, "intermediate", 24, "dtype", "f32"),
		kcase("argmax", "tokens", 3, "width", 1000),
		kcase("embedding", "tokens", 4, "width", 48, "n", 100, "dtype", "f16"),
		kcase("layer_norm", "tokens", 3, "width", 64),
		kcase("add_layer_norm", "tokens", 3, "width", 64),
		kcase("gelu_tanh", "tokens", 2, "intermediate", 100),
		kcase("position_embedding", "tokens", 3, "width", 32, "n", 50),
		kcase("qmatmul", "m", 3, "n", 64, "k", 128, "dtype", "q8"),
		kcase("qembedding", "tokens", 3, "width", 64, "n", 40, "dtype", "q4"),
		kcase("qmoe", "tokens", 5, "experts", 4, "top_k", 2, "hidden", 64, "intermediate", 64, "dtype", "q8_0"),
	} {
		t.Run(string(c.Op), func(t *testing.T) {
			be := newLimited(0)
			be.cache = 64 << 10
			m, err := Need(be, c)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Prepare(be, c)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			// MoE plans with the fewest experts routed, so the most copies.
			if lo, hi := m.Tensors, m.Total()-m.Scratch; b.used < lo || b.used > hi || c.Op != "moe" && b.used != hi {
				t.Errorf("%s: prepared %d bytes, planned %d (%d copies of %d) plus %d", b.Describe(), b.used, hi, m.Fit, m.Copy, m.Scratch)
			}
			got := allocated(func() {
				if _, err := b.Check(); err != nil {
					t.Fatal(err)
				}
			})
			t.Logf("%s: the check allocated %d bytes of %d planned", b.Describe(), got, m.Scratch)
			if got > m.Scratch+64<<10 {
				t.Errorf("%s: the check allocated %d bytes, planned %d", b.Describe(), got, m.Scratch)
			}
		})
	}
}

// A plan never allocates what it counts: the largest shapes each op takes
// come out too large for any machine, at once.
func TestNeedOfHugeCases(t *testing.T) {
	const huge = 1 << 30
	for _, c := range []ops.Args{
		kcase("matmul", "m", huge, "n", huge, "k", huge),
		kcase("paged_attention_prefill", "seqs", huge, "tokens", huge, "context", huge),
		kcase("moe", "tokens", huge, "experts", huge, "top_k", 8, "hidden", huge, "intermediate", huge),
		kcase("qmoe", "tokens", 1, "experts", huge, "top_k", 8, "hidden", 4096, "intermediate", 4096, "dtype", "q4"),
		kcase("embedding", "tokens", huge, "width", huge, "n", huge),
		kcase("rope", "tokens", huge, "num_heads", 64, "num_kv_heads", 8, "head_size", 128),
		kcase("position_embedding", "tokens", huge, "width", huge, "n", huge),
	} {
		be := newLimited(23 << 30)
		m, err := Need(be, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Op, err)
		}
		var me *MemoryError
		if err := m.Err(); !errors.As(err, &me) || m.Tensors < 1<<40 {
			t.Errorf("%s: %s: %v", c.Op, m, err)
		}
		if be.handed != 0 {
			t.Errorf("%s: %d tensors handed to the backend", c.Op, be.handed)
		}
	}
}

// Rotated copies are cut to what fits in half the memory available, and
// Memory says so.
func TestCopiesCutToMemory(t *testing.T) {
	const MiB = 1 << 20
	mm := kcase("matmul", "m", 1, "n", 512, "k", 1024) // a 1 MiB bf16 weight
	for _, tc := range []struct {
		avail  int64
		copies int
		capped bool
	}{
		{0, 48, false},         // unknown memory: as many as the cache asks
		{200 * MiB, 48, false}, // room for all
		{40 * MiB, 19, true},   // half is 20 MiB: 1.3 of case and check, the first copy and 18 more
		{3 * MiB, 1, true},     // no room for a second
	} {
		be := newLimited(tc.avail)
		be.cache = 16 * MiB // 48 MiB of weights to outgrow it
		b, err := Prepare(be, mm)
		if err != nil {
			t.Fatal(err)
		}
		m := b.Memory()
		if m.Fit != tc.copies || be.handed != tc.copies+2 || (m.Fit < m.Copies) != tc.capped {
			t.Errorf("%d MiB: %d of %d copies (%d handed), want %d", tc.avail/MiB, m.Fit, m.Copies, be.handed, tc.copies)
		}
		if says := strings.Contains(m.String(), "48 wanted"); says != tc.capped {
			t.Errorf("%d MiB: %q", tc.avail/MiB, m)
		}
		b.Close()
	}
}

// An interrupt stops a case while its tensors fill, and its check.
func TestPrepareInterrupted(t *testing.T) {
	mm := kcase("matmul", "m", 1, "n", 2048, "k", 2048)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	be := newLimited(0)
	if _, err := PrepareContext(ctx, be, mm); !errors.Is(err, context.Canceled) || be.handed != 0 {
		t.Errorf("cancelled first: %v after %d tensors", err, be.handed)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cb := &cancelling{limited: newLimited(0), cancel: cancel}
	if _, err := PrepareContext(ctx, cb, mm); !errors.Is(err, context.Canceled) || cb.handed != 1 {
		t.Errorf("cancelled at the first tensor: %v after %d tensors", err, cb.handed)
	}

	ctx, cancel = context.WithCancel(context.Background())
	b, err := PrepareContext(ctx, newCPU(), mm)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cancel()
	if _, err := b.Check(); !errors.Is(err, context.Canceled) {
		t.Errorf("check after the interrupt: %v", err)
	}
}

// cancelling cancels its context when handed its first tensor.
type cancelling struct {
	*limited
	cancel func()
}

func (c *cancelling) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	c.cancel()
	return c.limited.Weight(dt, shape, data)
}
