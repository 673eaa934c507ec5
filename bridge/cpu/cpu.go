// Package cpu is the pure-Go backend: every op of the contract on host
// memory, parallel across cores, with SIMD inner loops from package vec. It
// is the default where no GPU backend exists and the fastest path to a
// correct answer for tests.
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu/vec"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/bridge/host"
	"github.com/mtlbench/mtlbench/kernels"
)

// Options configure the backend.
type Options struct {
	// Threads is the number of goroutines ops run on (default: GOMAXPROCS).
	Threads int
}

// Backend implements bridge.Backend on the CPU.
type Backend struct {
	QuantRules
	pool pool
	// threads is the goroutine count the backend was opened with.
	threads int
	meta    *bridge.StepMeta
	ids     []int32
	err     error
	stats   bridge.StepStats

	profile  bool
	mark     bridge.OpTiming
	markTime time.Time
	timings  map[opKey]time.Duration
	order    []opKey

	// scratch reused across steps to keep the hot path allocation-free
	scratch map[string][]float32

	// matmulSplit, when set, chooses MatMul's work split (tunables.go).
	matmulSplit MatMulSplitFunc
}

type opKey struct {
	layer           int
	component, name string
}

// New returns a CPU backend.
func New(o Options) *Backend {
	t := o.Threads
	if t <= 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return &Backend{pool: pool{threads: t}, threads: t, scratch: map[string][]float32{}}
}

// SetThreads sets the goroutines later ops run on (bridge.Threader); 0
// restores the count the backend was opened with.
func (b *Backend) SetThreads(n int) {
	if n <= 0 {
		n = b.threads
	}
	b.pool.threads = n
}

// Threads is the number of goroutines ops use.
func (b *Backend) Threads() int { return b.pool.threads }

func (b *Backend) Info() bridge.DeviceInfo {
	return bridge.DeviceInfo{Backend: "cpu", Name: cpuModel(), Cores: b.pool.threads,
		MemoryBytes: host.TotalMemory(), AvailableBytes: host.AvailableMemory(), Notes: "simd: " + vec.Features()}
}

func (b *Backend) ActDType() bridge.DType { return bridge.F32 }

func (b *Backend) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	return alloc(dt, shape)
}

func (b *Backend) Weight(dt bridge.DType, shape []int, data []byte) (bridge.Tensor, error) {
	return view(dt, shape, data)
}

func (b *Backend) Read(t bridge.Tensor, dst []float32) error {
	x := t.(*tensor)
	if len(dst) < x.n {
		return fmt.Errorf("read: destination holds %d of %d elements", len(dst), x.n)
	}
	toF32(dst[:x.n], x, 0, x.n)
	return nil
}

func (b *Backend) ReadI32(t bridge.Tensor, dst []int32) error {
	x := t.(*tensor)
	if x.dt != bridge.I32 {
		return fmt.Errorf("read: tensor is %v, not i32", x.dt)
	}
	copy(dst, x.i32)
	return nil
}

func (b *Backend) Free(bridge.Tensor) {}
func (b *Backend) Close() error       { return nil }

// toF32 converts elements [lo,hi) of x into dst.
func toF32(dst []float32, x *tensor, lo, hi int) {
	switch x.dt {
	case bridge.F32:
		copy(dst, x.f32[lo:hi])
	case bridge.BF16:
		half.BF16ToF32(dst, x.u16[lo:hi])
	case bridge.F16:
		half.F16ToF32(dst, x.u16[lo:hi])
	case bridge.I32:
		for i, v := range x.i32[lo:hi] {
			dst[i] = float32(v)
		}
	}
}

func (b *Backend) BeginStep(meta *bridge.StepMeta, tokens []int32, profile bool) error {
	if len(tokens) != meta.NumTokens {
		return fmt.Errorf("begin step: %d tokens for a step of %d", len(tokens), meta.NumTokens)
	}
	b.meta, b.ids, b.err = meta, tokens, nil
	b.stats = bridge.StepStats{}
	b.profile = profile
	if profile {
		b.timings = map[opKey]time.Duration{}
		b.order = b.order[:0]
		b.mark = bridge.OpTiming{Layer: -1, Component: bridge.CompOther, Op: "begin"}
		b.markTime = time.Now()
	}
	return nil
}

func (b *Backend) Mark(layer int, component, op string) {
	if !b.profile {
		return
	}
	b.closeMark(time.Now())
	b.mark = bridge.OpTiming{Layer: layer, Component: component, Op: op}
}

func (b *Backend) closeMark(now time.Time) {
	k := opKey{b.mark.Layer, b.mark.Component, b.mark.Op}
	if _, ok := b.timings[k]; !ok {
		b.order = append(b.order, k)
	}
	b.timings[k] += now.Sub(b.markTime)
	b.markTime = now
}

func (b *Backend) EndStep() (bridge.StepStats, error) {
	if b.profile {
		b.closeMark(time.Now())
		for _, k := range b.order {
			if k.name == "begin" {
				continue
			}
			b.stats.Timings = append(b.stats.Timings, bridge.OpTiming{Layer: k.layer, Component: k.component, Op: k.name, Duration: b.timings[k]})
		}
	}
	return b.stats, b.err
}

func (b *Backend) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("cpu: "+format, args...)
	}
}

func f32s(t bridge.Tensor) []float32 { return t.(*tensor).f32 }

// buf returns a scratch slice of n floats for name, reused across calls.
func (b *Backend) buf(name string, n int) []float32 {
	s := b.scratch[name]
	if cap(s) < n {
		s = make([]float32, n)
		b.scratch[name] = s
	}
	return s[:n]
}

func (b *Backend) Embedding(out, table bridge.Tensor) {
	t := table.(*tensor)
	dim := t.shape[1]
	o := f32s(out)
	for i, id := range b.ids {
		if id < 0 || int(id) >= t.shape[0] {
			b.fail("embedding: token id %d outside the vocabulary (0..%d)", id, t.shape[0]-1)
			return
		}
		toF32(o[i*dim:(i+1)*dim], t, int(id)*dim, (int(id)+1)*dim)
	}
}

func (b *Backend) GatherRows(out, x bridge.Tensor) {
	dim := x.Len() / b.meta.NumTokens
	kernels.Gather(f32s(out), f32s(x), b.meta.LogitRows, dim)
}

func (b *Backend) RMSNorm(out, x, w bridge.Tensor, eps float32) {
	dim := w.Len()
	o, xs, ws := f32s(out), f32s(x), f32s(w)
	b.pool.forRange(x.Len()/dim, 8, func(lo, hi int) {
		rmsNormRows(o[lo*dim:hi*dim], xs[lo*dim:hi*dim], ws, dim, eps)
	})
}

func rmsNormRows(out, x, w []float32, dim int, eps float32) {
	for r := 0; r < len(x)/dim; r++ {
		row := x[r*dim : (r+1)*dim]
		ss := vec.DotF32(row, row)
		inv := float32(1 / math.Sqrt(float64(ss)/float64(dim)+float64(eps)))
		o := out[r*dim : (r+1)*dim]
		for i, v := range row {
			o[i] = v * inv * w[i]
		}
	}
}

func (b *Backend) AddRMSNorm(out, residual, x, w bridge.Tensor, eps float32) {
	dim := w.Len()
	o, r, xs, ws := f32s(out), f32s(residual), f32s(x), f32s(w)
	b.pool.forRange(x.Len()/dim, 8, func(lo, hi int) {
		rr := r[lo*dim : hi*dim]
		for i, v := range xs[lo*dim : hi*dim] {
			rr[i] += v
		}
		rmsNormRows(o[lo*dim:hi*dim], rr, ws, dim, eps)
	})
}

// matmulGrain keeps each goroutine's slice of weight rows large enough to
// stream, and a multiple of the kernels' row blocking.
const matmulGrain = 16

func (b *Backend) MatMul(out, x, w, bias bridge.Tensor) {
	wt := w.(*tensor)
	n, k := wt.shape[0], wt.shape[1]
	m := x.Len() / k
	o, xs := f32s(out), f32s(x)
	b.matmulRows(m, n, k, wt.dt, func(lo, hi int) { gemmRows(o, n, xs, wt, m, lo, hi, k) })
	b.addBias("matmul", o, bias, m, n)
}

// gemmRows computes output columns [lo,hi) of out[m][ldo] = x · wᵀ.
func gemmRows(out []float32, ldo int, x []float32, w *tensor, m, lo, hi, k int) {
	dst := out[lo:]
	switch w.dt {
	case bridge.BF16:
		vec.GemmBF16(dst, ldo, x, w.u16[lo*k:hi*k], m, hi-lo, k)
	case bridge.F16:
		vec.GemmF16(dst, ldo, x, w.u16[lo*k:hi*k], m, hi-lo, k)
	default:
		vec.GemmF32(dst, ldo, x, w.f32[lo*k:hi*k], m, hi-lo, k)
	}
}

func (b *Backend) RoPE(q, k, qNorm, kNorm bridge.Tensor, heads, kvHeads, headDim int, rot kernels.Rotary, eps float32) {
	if err := rot.Check(headDim); err != nil {
		b.fail("rope: %v", err)
		return
	}
	inv := rot.InvFreq(headDim)
	pos := b.meta.Positions
	apply := func(x []float32, norm bridge.Tensor, nh int) {
		var nw []float32
		if norm != nil {
			nw = f32s(norm)
		}
		b.pool.forRange(len(pos), 1, func(lo, hi int) {
			cs := make([]float32, headDim) // cos | sin
			for t := lo; t < hi; t++ {
				half := headDim / 2
				for i := 0; i < half; i++ {
					ang := float64(float32(pos[t]) * inv[i])
					cs[i], cs[half+i] = float32(math.Cos(ang)), float32(math.Sin(ang))
				}
				for h := 0; h < nh; h++ {
					v := x[(t*nh+h)*headDim : (t*nh+h+1)*headDim]
					if nw != nil {
						rmsNormRows(v, v, nw, headDim, eps)
					}
					for i := 0; i < half; i++ {
						a, c := v[i], v[i+half]
						v[i] = a*cs[i] - c*cs[half+i]
						v[i+half] = c*cs[i] + a*cs[half+i]
					}
				}
			}
		})
	}
	apply(f32s(q), qNorm, heads)
	apply(f32s(k), kNorm, kvHeads)
}

// RunsWindows: Attention reads a sliding window's keys alone
// (bridge.WindowRunner).
func (b *Backend) RunsWindows() bool { return true }

// KVDTypes are the dtypes Attention keeps a KV cache in: f32, and f16 and
// bf16 stored as 2-byte values, written rounded to nearest even as the Metal
// and CUDA kernels write them and read back exactly, so a half-float cache
// has a like-for-like reference here (bridge.KVCacheDTypes).
func (b *Backend) KVDTypes() []bridge.DType {
	return []bridge.DType{bridge.F32, bridge.F16, bridge.BF16}
}

// ExactKVByDefault: the reference keeps a cache of no chosen dtype in f32,
// a half-float one only where kv_dtype asks (bridge.ExactKVByDefault).
func (b *Backend) ExactKVByDefault() bool { return true }

func (b *Backend) Attention(out, q, k, v bridge.Tensor, cache bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int) {
	m := b.meta
	l := kernels.PagedLayout{BlockSize: cache.BlockSize, KVHeads: kvHeads, HeadDim: headDim}
	kt, vt := cache.K.(*tensor), cache.V.(*tensor)
	if kt.dt != vt.dt || (kt.dt != bridge.F32 && kt.dt != bridge.F16 && kt.dt != bridge.BF16) {
		b.fail("attention: a KV cache of %v keys and %v values (want f32, f16 or bf16, both alike)", kt.dt, vt.dt)
		return
	}
	halfKV := kt.dt != bridge.F32
	if halfKV {
		kvWriteHalf(kt, vt, f32s(k), f32s(v), m.SlotMapping, l)
	} else {
		kernels.KVWrite(kt.f32, vt.f32, f32s(k), f32s(v), m.SlotMapping, l)
	}
	qs, o := f32s(q), f32s(out)
	// One work item per (sequence, kv head): the query heads of a GQA group
	// share the K and V rows they read, so a token's scores are one GEMM of
	// the group's q rows with each block's keys (a kv head's rows of a block
	// are contiguous), and each head's output the block's value rows
	// weighted by its probabilities (vec.AxpyRows), in position order. A
	// sliding window starts a token's keys at lo, a whole number of
	// blocks in and then some rows of its first block. A half-float cache
	// is widened once per work item, the positions its tokens read, into
	// f32 rows the same loops then read.
	group, bs := heads/kvHeads, l.BlockSize
	b.pool.forEach(m.NumSeqs*kvHeads, func(item int) {
		s, kh := item/kvHeads, item%kvHeads
		q0, q1 := int(m.QueryStartLoc[s]), int(m.QueryStartLoc[s+1])
		n := int(m.SeqLens[s])
		table := m.BlockTable[s*m.MaxBlocks : (s+1)*m.MaxBlocks]
		// first is the first position any of the item's tokens reads.
		first := kernels.WindowStart(n-(q1-q0), window)
		wide := 0
		if halfKV {
			wide = (n - first) * headDim
		}
		buf := attnScratch.Get().(*[]float32)
		defer attnScratch.Put(buf)
		if cap(*buf) < group*n+2*wide {
			*buf = make([]float32, group*n+2*wide)
		}
		p := (*buf)[:group*n]
		kw, vw := (*buf)[group*n:group*n+wide], (*buf)[group*n+wide:group*n+2*wide]
		if halfKV {
			for j0 := first; j0 < n; {
				w := min(bs-j0%bs, n-j0)
				o := l.Index(table[j0/bs]*int32(bs)+int32(j0%bs), kh)
				widen(kw[(j0-first)*headDim:(j0-first+w)*headDim], kt, o)
				widen(vw[(j0-first)*headDim:(j0-first+w)*headDim], vt, o)
				j0 += w
			}
		}
		// rows are the w key or value rows from position j0, inside one
		// block.
		rows := func(c *tensor, wc []float32, j0, w int) []float32 {
			if halfKV {
				return wc[(j0-first)*headDim : (j0-first+w)*headDim]
			}
			o := l.Index(table[j0/bs]*int32(bs)+int32(j0%bs), kh)
			return c.f32[o : o+w*headDim]
		}
		for t := q0; t < q1; t++ {
			valid := n - (q1 - q0) + (t - q0) + 1 // the token's own position and those before
			lo := kernels.WindowStart(valid-1, window)
			qt := qs[(t*heads+kh*group)*headDim : (t*heads+(kh+1)*group)*headDim]
			for j0 := lo; j0 < valid; {
				w := min(bs-j0%bs, valid-j0)
				vec.GemmF32(p[j0:], n, qt, rows(kt, kw, j0, w), group, w, headDim)
				j0 += w
			}
			for h := 0; h < group; h++ {
				row := p[h*n+lo : h*n+valid]
				mx := float32(math.Inf(-1))
				for j := range row {
					row[j] *= scale
					if row[j] > mx {
						mx = row[j]
					}
				}
				sum := vec.ExpSub(row, mx)
				for j := range row {
					row[j] /= sum
				}
				acc := o[(t*heads+kh*group+h)*headDim : (t*heads+kh*group+h+1)*headDim]
				clear(acc)
				for j0 := lo; j0 < valid; {
					w := min(bs-j0%bs, valid-j0)
					vec.AxpyRows(acc, row[j0-lo:j0-lo+w], rows(vt, vw, j0, w), headDim)
					j0 += w
				}
			}
		}
	})
}

// kvWriteHalf is kernels.KVWrite into an f16 or bf16 cache: each value
// rounded to nearest even (half.F32ToF16, half.F32ToBF16), as the GPU
// kernels store it.
func kvWriteHalf(kc, vc *tensor, k, v []float32, slots []int32, l kernels.PagedLayout) {
	conv := half.F32ToF16
	if kc.dt == bridge.BF16 {
		conv = half.F32ToBF16
	}
	w, d := l.KVHeads*l.HeadDim, l.HeadDim
	for t, s := range slots {
		if s < 0 {
			continue
		}
		for h := 0; h < l.KVHeads; h++ {
			o := l.Index(s, h)
			conv(kc.u16[o:o+d], k[t*w+h*d:t*w+(h+1)*d])
			conv(vc.u16[o:o+d], v[t*w+h*d:t*w+(h+1)*d])
		}
	}
}

// widen reads len(dst) values of a half-float cache from offset o, exactly.
func widen(dst []float32, c *tensor, o int) {
	if c.dt == bridge.BF16 {
		half.BF16ToF32(dst, c.u16[o:o+len(dst)])
	} else {
		half.F16ToF32(dst, c.u16[o:o+len(dst)])
	}
}

// attnScratch holds a work item's scores, then probabilities.
var attnScratch = sync.Pool{New: func() any { return new([]float32) }}

func (b *Backend) SiLUMul(out, gate, up bridge.Tensor) {
	vec.SiLUMul(f32s(out), f32s(gate), f32s(up))
}

func (b *Backend) Add(out, a, c bridge.Tensor) { kernels.Add(f32s(out), f32s(a), f32s(c)) }

func (b *Backend) Argmax(out, logits bridge.Tensor) {
	o := out.(*tensor).i32
	l := f32s(logits)
	n := len(l) / len(o)
	for i := range o {
		o[i] = int32(kernels.Argmax(l[i*n : (i+1)*n]))
	}
}

// cpuModel is the CPU's marketing name where the OS tells it.
func cpuModel() string {
	if m := host.CPUModel(); m != "" {
		return m
	}
	return runtime.GOARCH
}

var _ bridge.Backend = (*Backend)(nil)

// sortedUnique returns the distinct values of ids, sorted.
func sortedUnique(ids []int32) []int32 {
	u := slices.Clone(ids)
	slices.Sort(u)
	return slices.Compact(u)
}
