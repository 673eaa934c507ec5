package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// BenchmarkRunnerOverhead compares a workload run by a bare engine loop with
// the same workload driven by the runner (request timing, per-step metrics),
// interleaved in one run, and reports the runner's cost in percent:
//
//	go test -run '^$' -bench RunnerOverhead -benchtime 20x ./runner/bench/
func BenchmarkRunnerOverhead(b *testing.B) {
	cfg, _ := model.Preset("qwen3-moe-mini")
	src := model.NewCached(model.NewSynthetic(1, bridge.BF16))
	be := cpu.New(cpu.Options{})
	mc := &ModelCase{Backend: be, Config: cfg, Source: src, Work: Workload{Requests: 4, PromptLen: 16, GenLen: 32, Seed: 1},
		Engine: engine.Options{KVTokens: 4 * 64, MaxSeqs: 4}}
	bare := func() time.Duration {
		start := time.Now()
		e, err := engine.New(be, cfg, src, mc.Engine)
		if err != nil {
			b.Fatal(err)
		}
		for i, p := range mc.Work.Prompts(cfg.Vocab) {
			e.Add(engine.Request{ID: i, Prompt: p, MaxNewTokens: 32})
		}
		for e.Pending() {
			if _, err := e.Step(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var withRunner, alone []time.Duration
	for i := 0; i < b.N; i++ {
		alone = append(alone, bare())
		r, err := mc.Rep(context.Background(), false)
		if err != nil {
			b.Fatal(err)
		}
		withRunner = append(withRunner, r.Wall)
	}
	slices.Sort(alone)
	slices.Sort(withRunner)
	a, w := alone[len(alone)/2], withRunner[len(withRunner)/2]
	b.ReportMetric(float64(a.Microseconds())/1e3, "engine-ms/workload")
	b.ReportMetric(float64(w.Microseconds())/1e3, "runner-ms/workload")
	b.ReportMetric(100*(w.Seconds()/a.Seconds()-1), "overhead-%")
}

// device_frac is a share of the step: a device busy through overlapped
// steps whose timestamps come out a little past the host's step is 1.
func TestBusyFrac(t *testing.T) {
	for _, c := range []struct {
		device, step time.Duration
		want         float64
	}{
		{500 * time.Microsecond, time.Millisecond, 0.5},
		{time.Millisecond, time.Millisecond, 1},
		{1000500 * time.Nanosecond, time.Millisecond, 1},
		{time.Millisecond, 0, 0},
	} {
		if got := busyFrac(c.device, c.step); got != c.want {
			t.Errorf("busyFrac(%v, %v) = %g, want %g", c.device, c.step, got, c.want)
		}
	}
}
