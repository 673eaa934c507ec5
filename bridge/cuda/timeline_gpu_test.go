//go:build linux

package cuda_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// The in-place timeline (Options.Timeline): every launch of a run is
// matched to the times its kernels noted, and a profiled repetition's
// per-op times, taken from steps run as graphs with overlapped launches,
// add up to the device's span of a decode step. Without the option the
// timeline says it is off.
func TestInPlaceTimeline(t *testing.T) {
	if b := gpu(t); !b.TimelineOn() {
		if err := b.TimelineStart(); err == nil || !strings.Contains(err.Error(), "MTLBENCH_CUDA_TIMELINE") {
			t.Errorf("TimelineStart with the timeline off: %v", err)
		}
	}
	b := openWith(t, func(o *Options) { o.Timeline = true })
	for _, preset := range []string{"tinyllama-1.1b@q4", "qwen3-moe-mini@q4"} {
		t.Run(preset, func(t *testing.T) {
			name, quant, _ := strings.Cut(preset, "@")
			cfg, src, err := model.Open(model.Spec{Model: name, Quant: quant, Layers: 2, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			w := bench.Workload{Requests: 1, PromptLen: 32, GenLen: 24, Seed: 1}
			mc := &bench.ModelCase{Backend: b, Config: cfg, Source: src, Work: w,
				Engine: engine.Options{BlockSize: 16, KVTokens: w.KVTokens(16, 0)}}
			if _, err := mc.Rep(context.Background(), false); err != nil { // graphs, compiled kernels
				t.Fatal(err)
			}
			res, err := mc.Rep(context.Background(), true) // starts the timeline

			if err != nil {
				t.Fatal(err)
			}
			ls, err := b.Timeline()
			if err != nil {
				t.Fatal(err)
			}
			var dispatches, deviceMS, stepMS float64
			for _, s := range res.Samples {
				switch s.Metric {
				case "dispatches_per_step":
					dispatches = s.Value
				case "device_ms":
					deviceMS = s.Value
				case "step_ms":
					stepMS = s.Value
				}
			}
			steps := w.GenLen - 1 // the first token comes from the prefill step
			if min := int(dispatches) * (steps - 2); len(ls) < min {
				t.Errorf("%d launches in the timeline, want at least %d (%d decode steps of %.0f)", len(ls), min, steps, dispatches)
			}
			var sum float64
			timed := 0
			layers := map[int]bool{}
			for _, o := range res.Timings {
				timed = o.Calls
				if o.Seconds <= 0 {
					t.Errorf("%d %s/%s: %.3g s", o.Layer, o.Component, o.Op, o.Seconds)
				}
				sum += o.Seconds * 1e3
				layers[o.Layer] = true
			}
			if !layers[0] || !layers[1] {
				t.Errorf("timings of layers %v, want 0 and 1", layers)
			}
			// A step's launches run from its first release to the next
			// step's: the step's period on the device, at least its span
			// there, and over the steps timed no more than the repetition.
			wall := res.Wall.Seconds() * 1e3
			t.Logf("%d launches; per-op times add up to %.3f ms a decode step, the device's span %.3f ms, the step %.3f ms; %d steps timed in %.1f ms",
				len(ls), sum, deviceMS, stepMS, timed, wall)
			if deviceMS <= 0 || sum < 0.8*deviceMS || timed < steps-2 || sum*float64(timed) > wall {
				t.Errorf("per-op times add up to %.3f ms a step over %d steps, the device's span is %.3f ms, the repetition %.1f ms", sum, timed, deviceMS, wall)
			}
			var tab strings.Builder
			for _, c := range bridge.InPlaceCosts(ls) {
				fmt.Fprintf(&tab, "\n%-10s %-12s %-36s %5d %8.2f µs %6.2f early %6.2f spread %5.1f%%", c.Component, c.Op, c.Kernel, c.Launches,
					us(c.Cost), us(c.Early), us(c.Spread), 100*c.Share)
			}
			t.Log("component, op, kernel, launches, in-place cost, early, spread, share:" + tab.String())
		})
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
