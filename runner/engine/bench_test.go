package engine_test

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
)

// BenchmarkDecodeTinyLlama measures batch-1 and batch-8 decode of the
// tinyllama-1.1b preset (bf16 synthetic weights) on the CPU backend, with
// their steps interleaved, and the machine's read bandwidth in the same run,
// so the roofline fraction and the batch-8 speed-up are ratios taken
// together:
//
//	go test -run '^$' -bench DecodeTinyLlama -benchtime 20x ./runner/engine/
func BenchmarkDecodeTinyLlama(b *testing.B) {
	benchDecode(b, "tinyllama-1.1b", "bf16", []int{1, 8})
}

// BenchmarkDecodeTinyLlamaPacked is batch-1 decode with packed weights (MLX
// affine q8 and q4, GGUF q8_0 and q4_k_m), the roofline from the packed
// bytes a step reads (docs/quantization.md).
func BenchmarkDecodeTinyLlamaPacked(b *testing.B) {
	for _, dt := range []string{"q8", "q4", "q8_0", "q4_k_m"} {
		b.Run(dt, func(b *testing.B) { benchDecode(b, "tinyllama-1.1b", dt, []int{1}) })
	}
}

// BenchmarkDecodeQwen3MoeMini is the same for the small MoE preset.
func BenchmarkDecodeQwen3MoeMini(b *testing.B) {
	benchDecode(b, "qwen3-moe-mini", "bf16", []int{1, 4, 16})
}

func benchDecode(b *testing.B, preset, dtype string, batches []int) {
	threads := runtime.GOMAXPROCS(0)
	// Earlier calls' garbage (probe buffers) must not count in rss/need.
	debug.FreeOSMemory()
	host.ResetPeakRSS()
	f, err := model.ParseFormat(dtype)
	if err != nil {
		b.Fatal(err)
	}
	cfg, syn, err := model.Open(model.Spec{Model: preset, DType: &f.DType, Quant: f.Quant, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	src := model.NewCached(syn)
	defer src.Close()
	be := cpu.New(cpu.Options{Threads: threads})
	const prompt = 16
	engines := make([]*engine.Engine, len(batches))
	kvTokens := 0
	for i, batch := range batches {
		e, err := engine.New(be, cfg, src, engine.Options{KVTokens: batch * (prompt + b.N + 32)})
		if err != nil {
			b.Fatal(err)
		}
		kvTokens += e.Options().KVTokens
		for r := 0; r < batch; r++ {
			p := make([]int32, prompt)
			for j := range p {
				p[j] = int32((r*977 + j*131) % cfg.Vocab)
			}
			if err := e.Add(engine.Request{ID: r, Prompt: p, MaxNewTokens: b.N + 2}); err != nil {
				b.Fatal(err)
			}
		}
		// Prefill and one decode step outside the timing.
		for k := 0; k < 2; k++ {
			if _, err := e.Step(); err != nil {
				b.Fatal(err)
			}
		}
		engines[i] = e
	}
	rss := host.PeakRSS()
	// The roofline takes the best of two probes, before and after: a probe
	// slowed by a noisy neighbour would flatter the decode.
	bw := host.MeasureReadBandwidth(threads, 512<<20)
	// Steps of every batch size alternate, so a change in machine load
	// shifts them together and their ratio holds.
	elapsed := make([]time.Duration, len(batches))
	bytes := make([]float64, len(batches))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i, e := range engines {
			start := time.Now()
			res, err := e.Step()
			elapsed[i] += time.Since(start)
			if err != nil {
				b.Fatal(err)
			}
			if res.DecodeTokens != batches[i] {
				b.Fatalf("step decoded %d tokens, want %d", res.DecodeTokens, batches[i])
			}
			bytes[i] += stepBytes(cfg, f.DType, res)
		}
	}
	b.StopTimer()
	bw = max(bw, host.MeasureReadBandwidth(threads, 512<<20))
	b.ReportMetric(bw/1e9, "read-GB/s")
	need := float64(cfg.WeightBytes(f.DType) + cfg.KVBytesPerToken(bridge.F32)*int64(kvTokens))
	b.ReportMetric(float64(rss)/need, "rss/need")
	base := 0.0
	for i, batch := range batches {
		tokS := float64(batch*b.N) / elapsed[i].Seconds()
		sfx := "-b" + strconv.Itoa(batch)
		b.ReportMetric(tokS, "tok/s"+sfx)
		b.ReportMetric(bytes[i]/elapsed[i].Seconds()/bw, "roofline"+sfx)
		if i == 0 {
			base = tokS
		} else {
			b.ReportMetric(tokS/base, "x-b"+strconv.Itoa(batches[0])+sfx)
		}
	}
}

// stepBytes is the weights a decode step streamed: every dense weight once
// plus the experts it touched, and the LM head.
func stepBytes(cfg *model.Config, dt bridge.DType, res *engine.StepResult) float64 {
	n := float64(cfg.ActiveBytesPerToken(dt))
	if cfg.NumExperts > 0 {
		per := float64(cfg.ExpertBytes(dt))
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

// nullBackend runs no op: over it a step costs only the engine's own host
// work (the scheduler, the step's metadata, building the ops, sampling).
type nullBackend struct{ bridge.Backend }

func (nullBackend) Embedding(out, table bridge.Tensor)                                 {}
func (nullBackend) GatherRows(out, x bridge.Tensor)                                    {}
func (nullBackend) RMSNorm(out, x, w bridge.Tensor, eps float32)                       {}
func (nullBackend) AddRMSNorm(out, residual, x, w bridge.Tensor, eps float32)          {}
func (nullBackend) MatMul(out, x, w, bias bridge.Tensor)                               {}
func (nullBackend) SiLUMul(out, gate, up bridge.Tensor)                                {}
func (nullBackend) Add(out, a, b bridge.Tensor)                                        {}
func (nullBackend) Argmax(out, logits bridge.Tensor)                                   {}
func (nullBackend) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, p bridge.MoEParams) {}
func (nullBackend) RoPE(q, k, qNorm, kNorm bridge.Tensor, heads, kvHeads, headDim int, rot kernels.Rotary, eps float32) {
}
func (nullBackend) Attention(out, q, k, v bridge.Tensor, c bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int) {
}

// BenchmarkStepHost is the engine's host cost of a batch-1 decode step
// over a backend that runs nothing, at 2 and 6 layers, so the difference
// is the cost a layer: the part of a step's encode_ms (docs/architecture.md,
// "The host's share of a step") that is the engine's, not the backend's.
//
//	go test -run '^$' -bench StepHost ./runner/engine/
func BenchmarkStepHost(b *testing.B) {
	for _, preset := range []string{"qwen3-moe-mini", "tinyllama-1.1b"} {
		for _, layers := range []int{2, 6} {
			b.Run(preset+"/layers="+strconv.Itoa(layers), func(b *testing.B) {
				cfg, src, err := model.Open(model.Spec{Model: preset, Layers: layers, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				defer src.Close()
				// A request decodes at most per steps, within the model's
				// positions; the next one starts (prefill and first decode
				// untimed) when it ends.
				per := min(b.N, cfg.MaxPos-8)
				e, err := engine.New(nullBackend{cpu.New(cpu.Options{Threads: 1})}, cfg, src, engine.Options{KVTokens: 64 + per})
				if err != nil {
					b.Fatal(err)
				}
				id, left := 0, 0
				start := func() {
					for e.Pending() { // the last request's final step
						if _, err := e.Step(); err != nil {
							b.Fatal(err)
						}
					}
					id++
					if err := e.Add(engine.Request{ID: id, Prompt: []int32{1, 2, 3}, MaxNewTokens: per + 2}); err != nil {
						b.Fatal(err)
					}
					for range 2 { // prefill and the first decode step
						if _, err := e.Step(); err != nil {
							b.Fatal(err)
						}
					}
					left = per
				}
				start()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if left == 0 {
						b.StopTimer()
						start()
						b.StartTimer()
					}
					left--
					if res, err := e.Step(); err != nil || res.DecodeTokens != 1 {
						b.Fatalf("step: %+v, %v", res, err)
					}
				}
			})
		}
	}
}
