package engine_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// BenchmarkDecodeTinyLlama measures batch-1 and batch-8 decode of the
// tinyllama-1.1b preset (bf16 synthetic weights) on the CPU backend, and the
// machine's read bandwidth in the same run, so the roofline fraction and the
// batch-8 speed-up are ratios taken together:
//
//	go test -run '^$' -bench DecodeTinyLlama -benchtime 20x ./runner/engine/
func BenchmarkDecodeTinyLlama(b *testing.B) {
	benchDecode(b, "tinyllama-1.1b", []int{1, 8})
}

// BenchmarkDecodeQwen3MoeMini is the same for the small MoE preset.
func BenchmarkDecodeQwen3MoeMini(b *testing.B) {
	benchDecode(b, "qwen3-moe-mini", []int{1, 4, 16})
}

func benchDecode(b *testing.B, preset string, batches []int) {
	threads := runtime.GOMAXPROCS(0)
	bw := cpu.MeasureReadBandwidth(threads, 512<<20)
	b.Run("read-bandwidth", func(b *testing.B) {
		b.ReportMetric(bw/1e9, "GB/s")
		b.ReportMetric(0, "ns/op")
	})
	cfg, err := model.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	src := model.NewCached(model.NewSynthetic(1, bridge.BF16))
	be := cpu.New(cpu.Options{Threads: threads})
	bytesPerToken := float64(cfg.ActiveBytesPerToken(bridge.BF16))
	var base float64
	for _, batch := range batches {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			const prompt = 16
			e, err := engine.New(be, cfg, src, engine.Options{KVTokens: batch * (prompt + b.N + 32)})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < batch; i++ {
				p := make([]int32, prompt)
				for j := range p {
					p[j] = int32((i*977 + j*131) % cfg.Vocab)
				}
				if err := e.Add(engine.Request{ID: i, Prompt: p, MaxNewTokens: b.N + 2}); err != nil {
					b.Fatal(err)
				}
			}
			// Prefill and one decode step outside the timer.
			for i := 0; i < 2; i++ {
				if _, err := e.Step(); err != nil {
					b.Fatal(err)
				}
			}
			var bytes float64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				res, err := e.Step()
				if err != nil {
					b.Fatal(err)
				}
				if res.DecodeTokens != batch {
					b.Fatalf("step decoded %d tokens, want %d", res.DecodeTokens, batch)
				}
				bytes += stepBytes(cfg, res)
			}
			el := time.Since(start).Seconds()
			b.StopTimer()
			tokS := float64(batch*b.N) / el
			b.ReportMetric(tokS, "tok/s")
			b.ReportMetric(bytes/el/1e9, "GB/s")
			if batch == 1 {
				base = tokS
				b.ReportMetric(bytesPerToken*tokS/bw, "roofline")
			} else if base > 0 {
				b.ReportMetric(tokS/base, "x-batch1")
			}
			if rss := peakRSS(); rss > 0 {
				need := float64(cfg.WeightBytes(bridge.BF16) + cfg.KVBytesPerToken(bridge.F32)*int64(e.Options().KVTokens))
				b.ReportMetric(float64(rss)/need, "rss/need")
			}
		})
	}
}

// stepBytes is the weights a decode step streamed: every dense weight once
// plus the experts it touched, and the LM head.
func stepBytes(cfg *model.Config, res *engine.StepResult) float64 {
	n := float64(cfg.ActiveBytesPerToken(bridge.BF16))
	if cfg.NumExperts > 0 {
		per := float64(3*cfg.Hidden*cfg.MoEInter) * 2
		moe := 0
		for l := 0; l < cfg.Layers; l++ {
			if cfg.IsMoELayer(l) {
				moe++
			}
		}
		n -= float64(moe*cfg.TopK) * per
		for _, t := range res.Stats.ExpertsTouched {
			n += float64(t) * per
		}
	}
	return n
}

func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb * 1024
		}
	}
	return 0
}
