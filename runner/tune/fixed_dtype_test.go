package tune

import (
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
)

// launchBackend is a backend that takes the Metal kernels' launch configs,
// recording the picks an engine installs.
type launchBackend struct {
	bridge.Backend
	picks map[string]bridge.LaunchPick
}

func (b *launchBackend) Info() bridge.DeviceInfo {
	in := b.Backend.Info()
	in.Backend, in.Name = "metal", "Test GPU"
	return in
}

func (b *launchBackend) Limits() Limits {
	return Limits{MaxThreads: 1024, ThreadgroupMemory: 32 << 10, SIMDWidth: 32}
}

func (b *launchBackend) SetLaunchConfig(kernel string, pick bridge.LaunchPick) {
	b.picks[kernel] = pick
}

var _ bridge.LaunchTuner = (*launchBackend)(nil)

// The norms and argmax read no weight matrix: `tune --kernel rms_norm`
// writes their configs at their own dtype (f32), a suite's tune does too,
// and a bf16 model's engine finds them there. A weight dtype for them is
// refused, not written where no lookup asks.
func TestFixedDTypeKernels(t *testing.T) {
	be := &launchBackend{Backend: cpu.New(cpu.Options{Threads: 2}), picks: map[string]bridge.LaunchPick{}}
	cfg, _ := model.Preset("qwen3-moe-mini")
	for _, c := range []struct {
		kernel string
		shape  Shape
		tuned  Config
	}{
		{"rms_norm", Shape{"tokens": 1, "width": cfg.Hidden}, Config{"threads": "64"}},
		{"argmax", Shape{"tokens": 1, "width": cfg.Vocab}, Config{"threads": "64", "part": "1024"}},
	} {
		k, err := Find("metal", c.kernel)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckDType(k, "bf16"); err == nil {
			t.Errorf("%s: dtype bf16 accepted", c.kernel)
		}
		if err := CheckDType(k, k.DType); err != nil {
			t.Errorf("%s: its own dtype %s refused: %v", c.kernel, k.DType, err)
		}
		q, _, err := NewQuery(be, c.kernel, "", c.shape)
		if err != nil {
			t.Fatal(err)
		}
		e := Entry{Device: "Test GPU", Backend: "metal", Kernel: c.kernel, DType: q.DType, Shape: q.Shape, Config: c.tuned,
			Default: k.DefaultConfig(q.Shape, q.Limits), Speedup: 1.2, P: 0.001, Samples: 20, ToolVersion: "test",
			TunedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
		store := NewStore(layer(FromUser, e))
		// What a bf16 model's run records before it starts, and then runs.
		if got := store.LaunchChoices(be, cfg, bridge.BF16, 16, 1, 16)[c.kernel]; !strings.Contains(got, "(user cache)") {
			t.Errorf("%s: a bf16 model's run records %q, want the %s entry", c.kernel, got, q.DType)
		}
		et := store.ForEngine(be, cfg, bridge.BF16, bridge.MoEParams{})
		_, undo := et.Step(1, bridge.MoEParams{})
		pick := be.picks[c.kernel]
		if pick == nil {
			t.Fatalf("%s: no pick installed", c.kernel)
		}
		launch := map[string]int{}
		for name, v := range q.Shape {
			launch[string(name)] = v
		}
		// As a backend asks: for the model's dtype, or naming the launch's
		// (which a kernel of no weights does not read).
		for _, weights := range []string{"", "bf16"} {
			got, ok := pick(weights, launch)
			if !ok || !Config(got).Equal(c.tuned) {
				t.Errorf("%s, weights %q: a bf16 model's lookup took %v (%v), want the %s entry's %v", c.kernel, weights, got, ok, q.DType, c.tuned)
			}
		}
		undo()
	}
}
