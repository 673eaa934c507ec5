package kbench

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// unwindowed drops the window its caller asks for: attending to every
// earlier key, it must fail a windowed case's check.
type unwindowed struct{ bridge.Backend }

func (u unwindowed) Attention(out, q, k, v bridge.Tensor, c bridge.KVCache, h, kvh, d int, scale float32, window int) {
	u.Backend.Attention(out, q, k, v, c, h, kvh, d, scale, 0)
}

func (u unwindowed) RunsWindows() bool { return true }

// windowless is a backend whose attention does not slide (no
// bridge.WindowRunner).
type windowless struct{ bridge.Backend }

// An attention case takes a sliding window: the backend runs it (the CPU
// backend and metal-emu's kernels), the reference checks it, a backend
// that ignores it fails the check, and its bytes and FLOPs are the cost
// model's at that window (decode and a prefill chunk past the window, and
// a window longer than the context, which costs as none).
func TestAttentionWindow(t *testing.T) {
	attn := []any{"num_heads", 4, "num_kv_heads", 2, "head_size", 32, "block_size", 8}
	cases := []struct {
		name   string
		c      ops.Args
		desc   string
		past   bool // the window is shorter than the context
		noWind ops.Args
	}{
		{"decode past window", kcase("paged_attention_decode", append([]any{"seqs", 2, "context", 37, "window", 8}, attn...)...),
			"paged_attention_decode seqs=2 context=37 heads=4/2 head_size=32 block=8 window=8", true,
			kcase("paged_attention_decode", append([]any{"seqs", 2, "context", 37}, attn...)...)},
		{"prefill chunk past window", kcase("paged_attention_prefill", append([]any{"seqs", 2, "tokens", 9, "context", 13, "window", 6}, attn...)...),
			"paged_attention_prefill seqs=2 tokens=9 context=13 heads=4/2 head_size=32 block=8 window=6", true,
			kcase("paged_attention_prefill", append([]any{"seqs", 2, "tokens", 9, "context", 13}, attn...)...)},
		{"window longer than context", kcase("paged_attention_decode", append([]any{"seqs", 1, "context", 20, "window", 64}, attn...)...),
			"paged_attention_decode seqs=1 context=20 heads=4/2 head_size=32 block=8 window=64", false,
			kcase("paged_attention_decode", append([]any{"seqs", 1, "context", 20}, attn...)...)},
	}
	backends := []struct {
		name string
		new  func(t *testing.T) bridge.Backend
	}{
		{"cpu", func(*testing.T) bridge.Backend { return newCPU() }},
		{"metal-emu", func(t *testing.T) bridge.Backend {
			if _, err := emu.FindCompiler(""); err != nil {
				t.Skipf("skipping: %v", err)
			}
			be, err := metal.New(emu.New(emu.Options{}), metal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return be
		}},
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			be := bk.new(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					b, err := Prepare(be, c.c)
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close()
					if strings.TrimSuffix(b.Describe(), " kv=bf16") != c.desc {
						t.Errorf("Describe() = %q, want %q", b.Describe(), c.desc)
					}
					if _, err := b.Check(); err != nil {
						t.Fatal(err)
					}
					// The cache is kept in the case's dtype (bf16) where the
					// backend reads one so, else in its activations'.
					o, _ := ops.Lookup(c.c.Op)
					kv := bridge.AutoKVDType(be, bridge.BF16)
					want := o.Cost(o.Resolve(c.c), ops.Types{Act: opsDType(be.ActDType()), Weight: opsDType(kv)})
					if b.Bytes() != want.Bytes() || b.Flops() != want.FLOPs {
						t.Errorf("bytes %d flops %d, cost model %d %d", b.Bytes(), b.Flops(), want.Bytes(), want.FLOPs)
					}
					full, err := Prepare(be, c.noWind)
					if err != nil {
						t.Fatal(err)
					}
					defer full.Close()
					if shorter := b.Bytes() < full.Bytes() && b.Flops() < full.Flops(); shorter != c.past {
						t.Errorf("bytes %d flops %d against %d %d without the window", b.Bytes(), b.Flops(), full.Bytes(), full.Flops())
					}
				})
			}
		})
	}
	// A backend that ignores the window fails the check; one that does not
	// slide is refused past the window, naming it.
	c := cases[0].c
	b, err := Prepare(unwindowed{newCPU()}, c)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := b.Check(); err == nil {
		t.Errorf("attention over every key passed a windowed check (max error %g)", e)
	}
	if _, err := Prepare(windowless{newCPU()}, c); !errors.Is(err, errors.ErrUnsupported) || err.Error() != "window=8: the backend's attention does not slide past a window (bridge.WindowRunner)" {
		t.Errorf("a backend that does not slide: %v", err)
	}
	if b, err := Prepare(windowless{newCPU()}, cases[2].c); err != nil {
		t.Errorf("a backend that does not slide, within the window: %v", err)
	} else {
		b.Close()
	}
}
