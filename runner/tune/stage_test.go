package tune

import (
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A MoE tile of 128 weight rows fits threadgroup memory with bf16 staged
// in two bytes (MSL 3.1) but not in four (f32 weights, or bf16 before
// MSL 3.1, which has no bfloat): an entry tuned on a Mac with macOS 14
// is ignored, with a warning, on one that compiles 3.0, instead of
// failing every step there.
func TestTunedTileStagedWidth(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	shape := Shape{"tokens": 64, "experts": 8, "top_k": 2, "hidden": 2048, "intermediate": 768}
	for _, tc := range []struct {
		lang, dtype string
		tuned       bool
	}{
		{"3.1", "bf16", true},
		{"3.1", "f16", true},
		{"3.0", "bf16", false},
		{"3.0", "f16", true},
		{"3.1", "f32", false},
	} {
		be, err := metal.New(emu.New(emu.Options{}), metal.Options{LanguageVersion: tc.lang})
		if err != nil {
			t.Fatal(err)
		}
		q, k, err := NewQuery(be, "moe", tc.dtype, shape)
		be.Close()
		if err != nil {
			t.Fatal(err)
		}
		def := k.DefaultConfig(q.Shape, q.Limits)
		cfg := def.Clone()
		cfg["bn"], cfg["sgn"] = "128", "4"
		e := Entry{Device: q.Device, Backend: q.Backend, Kernel: "moe", DType: tc.dtype, Shape: q.Shape,
			Config: cfg, Default: def, Speedup: 1.2, P: 0.001, Samples: 20, SourceHash: q.SourceHash,
			ToolVersion: "test", TunedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		s := NewStore(layer(FromUser, e))
		c, err := s.Lookup(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := !c.IsDefault(); got != tc.tuned {
			t.Errorf("MSL %s, %s: took %s, want the tuned tile %v (warnings %q)", tc.lang, tc.dtype, c, tc.tuned, s.Warnings())
		}
		if !tc.tuned && (len(s.Warnings()) != 1 || !strings.Contains(s.Warnings()[0], "cannot run here: threadgroup memory")) {
			t.Errorf("MSL %s, %s: warnings %q, want one naming the threadgroup memory", tc.lang, tc.dtype, s.Warnings())
		}
	}
}
