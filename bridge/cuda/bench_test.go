//go:build linux

package cuda_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/model"
)

// prefetched generates a synthetic model's tensors on every core ahead of
// the engine asking for them, and keeps them for later repetitions: the
// engine uploads tensors one at a time, and a 57 GiB model generated on one
// goroutine at a time takes minutes.
type prefetched struct {
	model.Source
	mu    sync.Mutex
	ready map[string]chan struct{}
	data  map[string][]byte
	dts   map[string]bridge.DType
}

func prefetch(src model.Source, specs []model.TensorSpec) *prefetched {
	p := &prefetched{Source: src, ready: map[string]chan struct{}{}, data: map[string][]byte{}, dts: map[string]bridge.DType{}}
	for _, s := range specs {
		p.ready[s.Name] = make(chan struct{})
	}
	work := make(chan model.TensorSpec)
	for w := 0; w < runtime.NumCPU(); w++ {
		go func() {
			for s := range work {
				dt, d, err := src.Tensor(s)
				p.mu.Lock()
				if err == nil {
					p.data[s.Name], p.dts[s.Name] = d, dt
				}
				p.mu.Unlock()
				close(p.ready[s.Name])
			}
		}()
	}
	go func() {
		for _, s := range specs {
			work <- s
		}
		close(work)
	}()
	return p
}

func (p *prefetched) Tensor(s model.TensorSpec) (bridge.DType, []byte, error) {
	if ch, ok := p.ready[s.Name]; ok {
		<-ch
		p.mu.Lock()
		d, dt := p.data[s.Name], p.dts[s.Name]
		p.mu.Unlock()
		if d != nil {
			return dt, d, nil
		}
	}
	return p.Source.Tensor(s)
}

// TestDecodeSpeed measures decode throughput through runner/bench's model
// case, as `mtlbench run` does, on synthetic bf16 weights. It runs only when
// MTLBENCH_CUDA_BENCH lists cases: preset@batch,batch;... (e.g.
// "qwen3-30b-a3b@1,16;tinyllama-1.1b@1"); MTLBENCH_CUDA_BENCH_GEN sets the
// generated tokens (default 64), MTLBENCH_CUDA_BENCH_PROMPT the prompt
// (default 128), MTLBENCH_CUDA_BENCH_STEPS the step modes to compare
// (overlapped,synchronous).
func TestDecodeSpeed(t *testing.T) {
	spec := envconfig.Get("MTLBENCH_CUDA_BENCH")
	if spec == "" {
		t.Skip("set MTLBENCH_CUDA_BENCH=preset@batch,batch;... to run")
	}
	b := gpu(t)
	gen, prompt := envconfig.Int("MTLBENCH_CUDA_BENCH_GEN", 64), envconfig.Int("MTLBENCH_CUDA_BENCH_PROMPT", 128)
	modes := strings.Split(envconfig.Get("MTLBENCH_CUDA_BENCH_STEPS"), ",")
	if modes[0] == "" {
		modes = []string{"overlapped"}
	}
	for _, item := range strings.Split(spec, ";") {
		name, batches, _ := strings.Cut(item, "@")
		layers := 0
		if n, l, ok := strings.Cut(name, ":"); ok {
			name, layers = n, atoi(l)
		}
		cfg, src, err := model.Open(model.Spec{Model: name, Seed: 1, Layers: layers})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ps := prefetch(src, cfg.Tensors())
		for _, bs := range strings.Split(batches, ",") {
			batch := atoi(bs)
			w := bench.Workload{Requests: batch, PromptLen: prompt, GenLen: gen, Seed: 1}
			mc := &bench.ModelCase{Backend: b, Config: cfg, Source: ps, Work: w,
				Engine: engine.Options{BlockSize: 16, KVTokens: w.KVTokens(16, 0)}}
			if _, err := mc.Rep(context.Background(), false); err != nil { // warm-up: upload, compile, graphs
				t.Fatal(err)
			}
			if batch == atoi(strings.Split(batches, ",")[0]) {
				t.Logf("%s: weights generated and uploaded, first repetition done in %v", name, time.Since(start).Round(time.Second))
			}
			// Repetitions alternate between the step modes, so drift on a
			// shared machine falls on each alike.
			type sums struct {
				toks, gbs, steps []float64
			}
			got := map[string]*sums{}
			for r := 0; r < 3; r++ {
				for _, mode := range modes {
					mc.Engine.Synchronous = mode == "synchronous"
					res, err := mc.Rep(context.Background(), false)
					if err != nil {
						t.Fatal(err)
					}
					m := got[mode]
					if m == nil {
						m = &sums{}
						got[mode] = m
					}
					for _, s := range res.Samples {
						switch s.Metric {
						case "decode_tok_s":
							m.toks = append(m.toks, s.Value)
						case "achieved_gb_s":
							m.gbs = append(m.gbs, s.Value)
						case "step_ms":
							m.steps = append(m.steps, s.Value)
						}
					}
				}
			}
			for _, mode := range modes {
				m := got[mode]
				sort.Float64s(m.toks)
				sort.Float64s(m.gbs)
				sort.Float64s(m.steps)
				t.Logf("BENCH %s layers=%d batch=%d prompt=%d gen=%d steps=%s: decode %.1f tok/s (reps %v), step %.3f ms, %.0f GB/s",
					name, cfg.Layers, batch, prompt, gen, mode, m.toks[1], round1(m.toks), m.steps[1], m.gbs[1])
			}
			mc.Engine.Synchronous = false
			prof, err := mc.Rep(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("profile %s batch=%d (per decode step): %s", name, batch, breakdown(prof))
		}
		src.Close()
	}
}

func breakdown(r *bench.RepResult) string {
	byOp := map[string]float64{}
	total := 0.0
	for _, tm := range r.Timings {
		byOp[tm.Component+"/"+tm.Op] += tm.Seconds
		total += tm.Seconds
	}
	type kv struct {
		k string
		v float64
	}
	var s []kv
	for k, v := range byOp {
		s = append(s, kv{k, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v })
	var parts []string
	for _, x := range s {
		parts = append(parts, fmt.Sprintf("%s %.3fms", x.k, x.v*1e3))
	}
	return fmt.Sprintf("total %.3fms: %s", total*1e3, strings.Join(parts, ", "))
}

func round1(v []float64) []string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', 1, 64))
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

// A chain is n copies of one op, each reading the one before's output.
type chain struct {
	name  string
	n     int
	bytes float64 // read per op
	op    func(i int)
}

// TestOpChain measures what one op costs inside a replayed decode graph: a
// step of n copies of the op, each reading the one before's output, timed
// over repeated steps. It runs only with MTLBENCH_CUDA_CHAIN set: 1 for
// every chain, otherwise the chains whose names contain its value (q4, say,
// for a profiler's run).
func TestOpChain(t *testing.T) {
	only := envconfig.Get("MTLBENCH_CUDA_CHAIN")
	if only == "" || only == "0" {
		t.Skip("set MTLBENCH_CUDA_CHAIN=1 to run")
	}
	b := gpu(t)
	alloc := func(dt bridge.DType, shape ...int) bridge.Tensor {
		x, err := b.Alloc(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	weight := func(n, k int) bridge.Tensor {
		data := make([]byte, n*k*2)
		for i := 0; i < len(data); i += 2 {
			data[i+1] = 0x3c // bf16 ≈ 0.0117: values stay finite along a chain
		}
		w, err := b.Weight(bridge.BF16, []int{n, k}, data)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	meta := &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, MaxQueryLen: 1, MaxSeqLen: 1, NumDecodeTokens: 1,
		Positions: []int32{0}, SlotMapping: []int32{0}, QueryStartLoc: []int32{0, 1}, SeqLens: []int32{1},
		BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16, LogitRows: []int32{0}}
	const H, I = 2048, 5632
	xs := []bridge.Tensor{alloc(bridge.F32, 1, H), alloc(bridge.F32, 1, H)}
	xi := alloc(bridge.F32, 1, I)
	res, nw := alloc(bridge.F32, 1, H), alloc(bridge.F32, H)
	small := alloc(bridge.F32, 16)
	var sq, wide, tall []bridge.Tensor
	for i := 0; i < 64; i++ {
		sq = append(sq, weight(H, H))
	}
	for i := 0; i < 16; i++ {
		wide, tall = append(wide, weight(I, H)), append(tall, weight(H, I))
	}
	chains := []chain{
		{"add 16 floats", 256, 0, func(i int) { b.Add(small, small, small) }},
		{"add_rms_norm 2048", 256, 3 * H * 4, func(i int) { b.AddRMSNorm(xs[(i+1)%2], res, xs[i%2], nw, 1e-6) }},
		{"gemv 2048x2048", 64, H * H * 2, func(i int) { b.MatMul(xs[(i+1)%2], xs[i%2], sq[i], nil) }},
		{"gemv 2048x2048 + add_rms_norm", 64, H * H * 2, func(i int) {
			b.MatMul(xs[1], xs[0], sq[i], nil)
			b.AddRMSNorm(xs[0], res, xs[1], nw, 1e-6)
		}},
		{"gemv 5632x2048, 2048x5632", 32, I * H * 2, func(i int) {
			if i%2 == 0 {
				b.MatMul(xi, xs[0], wide[i/2], nil)
			} else {
				b.MatMul(xs[0], xi, tall[i/2], nil)
			}
		}},
	}
	chains = append(chains, batchedChains(t, b, weight)...)
	chains = append(chains, packedChains(t, b)...)
	for _, c := range chains {
		if only != "1" && !strings.Contains(c.name, only) {
			continue
		}
		var best time.Duration
		for rep := 0; rep < 12; rep++ {
			start := time.Now()
			if err := b.BeginStep(meta, []int32{0}, false); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.n; i++ {
				c.op(i)
			}
			if _, err := b.EndStep(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); rep >= 2 && (best == 0 || d < best) {
				best = d
			}
		}
		us := best.Seconds() * 1e6 / float64(c.n)
		t.Logf("CHAIN %-32s %7.2f µs/op  %6.0f GB/s", c.name, us, c.bytes/us/1e3)
	}
}

// batchedChains are the q (4096×2048) and o (2048×4096) projections of a
// 16-token decode step, taking turns, on cuBLAS (the default) and on the
// tensor-core GEMV (Options.GemvMMA): docs/cuda.md, "Where batch-16 bf16
// decode time goes".
func batchedChains(t *testing.T, b *Backend, weight func(n, k int) bridge.Tensor) []chain {
	const T, H, Q = 16, 2048, 4096
	x, y := zeros(t, b, T, H), zeros(t, b, T, Q)
	var wide, tall []bridge.Tensor
	for i := 0; i < 16; i++ {
		wide, tall = append(wide, weight(Q, H)), append(tall, weight(H, Q))
	}
	var chains []chain
	for _, mma := range []bool{false, true} {
		name := "b16 q/o cublas"
		if mma {
			name = "b16 q/o gemv_mma"
		}
		chains = append(chains, chain{name, 32, Q * H * 2, func(i int) {
			defer b.SetGemvMMA(mma)()
			if i%2 == 0 {
				b.MatMul(y, x, wide[i/2], nil)
			} else {
				b.MatMul(x, y, tall[i/2], nil)
			}
		}})
	}
	return chains
}

// fastPacked is a packed [rows][k] affine matrix of random codes and fixed
// scales, drawn a word at a time: the chains need gigabytes of experts,
// not values a reference checks.
func fastPacked(r *rand.Rand, s quant.Spec, rows, k int) *quant.Matrix {
	data := make([]byte, rows*s.RowBytes(k))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	g := rows * s.Groups(k)
	sc, bi := make([]byte, 2*g), make([]byte, 2*g)
	for i := 0; i < g; i++ {
		binary.LittleEndian.PutUint16(sc[2*i:], 0x3c00) // bf16 0.0078
		binary.LittleEndian.PutUint16(bi[2*i:], 0xbd80) // bf16 -0.0625: codes centred on 0
	}
	return &quant.Matrix{Spec: s, Rows: rows, K: k, Data: data, Scales: sc, Biases: bi}
}

// packedChains are Qwen3-30B-A3B's decode ops at 4 bits (MLX affine, group
// 64, bf16 scales; the router at 8 bits), one token: q/k/v, the output
// projection and a routed MoE block, and TinyLlama's q/k/v, each over
// weights distinct enough that the L2 holds none of them from one op to
// the next.
func packedChains(t *testing.T, b *Backend) []chain {
	const H, Q, KV, E, K, I = 2048, 4096, 512, 128, 8, 768
	q4 := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	q8 := quant.Spec{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.BF16}
	r := rand.New(rand.NewPCG(1, 2))
	x, xq, y := zeros(t, b, 1, H), zeros(t, b, 1, Q), zeros(t, b, 1, H)
	out := zeros(t, b, 1, Q+2*KV)
	out2 := zeros(t, b, 1, H+2*256)
	var qkv, o, tl []bridge.Tensor
	for i := 0; i < 16; i++ {
		qkv = append(qkv, uploadPacked(t, b, fastPacked(r, q4, Q+2*KV, H)))
		o = append(o, uploadPacked(t, b, fastPacked(r, q4, H, Q)))
		tl = append(tl, uploadPacked(t, b, fastPacked(r, q4, H+2*256, H)))
	}
	var moe []*bridge.MoEWeights
	for l := 0; l < 4; l++ {
		w := &bridge.MoEWeights{Router: uploadPacked(t, b, fastPacked(r, q8, E, H)), TopK: K, NormTopK: true, Hidden: H, Inter: I}
		for e := 0; e < E; e++ {
			w.Gate = append(w.Gate, uploadPacked(t, b, fastPacked(r, q4, I, H)))
			w.Up = append(w.Up, uploadPacked(t, b, fastPacked(r, q4, I, H)))
			w.Down = append(w.Down, uploadPacked(t, b, fastPacked(r, q4, H, I)))
		}
		moe = append(moe, w)
	}
	row := func(s quant.Spec, rows, k int) float64 { return float64(rows * (s.RowBytes(k) + 4*s.Groups(k))) }
	return []chain{
		{"q4 gemv q/k/v 5120x2048", 64, row(q4, Q+2*KV, H), func(i int) { b.QMatMul(out, x, qkv[i%16], nil) }},
		{"q4 gemv o 2048x4096", 64, row(q4, H, Q), func(i int) { b.QMatMul(y, xq, o[i%16], nil) }},
		{"q4 gemv q/k/v 2560x2048 (TinyLlama)", 64, row(q4, H+2*256, H), func(i int) { b.QMatMul(out2, x, tl[i%16], nil) }},
		{"q4 moe 128 experts top-8", 48, row(q8, E, H) + K*(2*row(q4, I, H)+row(q4, H, I)), func(i int) {
			b.QMoE(y, x, moe[i%4], bridge.MoEParams{})
		}},
	}
}

// zeros is an f32 activation tensor of n rows of k, zeroed.
func zeros(t *testing.T, b *Backend, n, k int) bridge.Tensor {
	return upload(t, b, bridge.F32, make([]byte, 4*n*k), n, k)
}
