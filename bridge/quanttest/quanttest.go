// Package quanttest holds the packed-GEMV check every backend's tests run
// (bridge/cpu, bridge/metal on the emulator, bridge/cuda): a packed matmul
// at each affine group size and scale type, and at every GGUF format, at a
// decode row and at several rows whose depth crosses the GPU kernels'
// staging chunks, against kernels/quant's reference on the same packed
// bytes. The GPU kernels find an affine unit's group by a shift and are
// compiled for each scale type apart (docs/quantization.md), so each of
// those paths has a case here.
package quanttest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Specs: every affine group size with each scale type among them, at 4 and
// 8 bits and at the widths whose codes cross word boundaries (3, 5, 6) or
// fill them (2), the formats GGUF's transcoded types run as
// (quant.Transcoders), the GGUF formats, and mlx's floating-point ones.
var Specs = []quant.Spec{
	{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F32},
	{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 4, Group: 128, Scale: quant.F16},
	{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F16},
	{Type: quant.Affine, Bits: 8, Group: 64, Scale: quant.F32},
	{Type: quant.Affine, Bits: 8, Group: 128, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 4, Group: 32, Scale: quant.F16}, // Q4_1
	{Type: quant.Affine, Bits: 8, Group: 32, Scale: quant.F32}, // Q5_K, MXFP4 widened
	{Type: quant.Affine, Bits: 5, Group: 32, Scale: quant.F32}, // Q5_K, MXFP4
	{Type: quant.Affine, Bits: 5, Group: 32, Scale: quant.F16}, // Q5_0, Q5_1
	{Type: quant.Affine, Bits: 2, Group: 64, Scale: quant.BF16},
	{Type: quant.Affine, Bits: 3, Group: 32, Scale: quant.F16},
	{Type: quant.Affine, Bits: 5, Group: 128, Scale: quant.F32},
	{Type: quant.Affine, Bits: 6, Group: 64, Scale: quant.BF16},
	{Type: quant.Q8_0},
	{Type: quant.Q4_0},
	{Type: quant.Q4_K},
	{Type: quant.Q5_K},
	{Type: quant.Q6_K},
	{Type: quant.Q3_K},
	{Type: quant.IQ4_XS},
	{Type: quant.IQ4_NL},
	{Type: quant.MXFP4},
	{Type: quant.NVFP4},
	{Type: quant.MXFP8},
	{Type: quant.Q2_K},
	{Type: quant.IQ2_XXS}, {Type: quant.IQ2_XS}, {Type: quant.IQ2_S},
	{Type: quant.IQ3_XXS}, {Type: quant.IQ3_S}, {Type: quant.IQ1_S}, {Type: quant.IQ1_M},
}

// Shape is a matmul of M activation rows by an N×K packed matrix.
type Shape struct{ M, N, K int }

// Shapes: one decode row over a matrix whose height fills no warp or
// simdgroup evenly, and five rows over a depth of 4608 values, which the
// GPU kernels stage in several chunks.
var Shapes = []Shape{{1, 300, 768}, {5, 37, 4608}}

// GEMV runs every spec and shape on be (a bridge.QuantBackend), skipping
// the formats it reports it cannot run, and fails where the output's
// relative error (root of summed squares) exceeds tol.
func GEMV(t *testing.T, be bridge.Backend, tol float64) {
	t.Helper()
	qb, ok := be.(bridge.QuantBackend)
	if !ok {
		t.Fatalf("%T runs no packed weights", be)
	}
	r := rand.New(rand.NewPCG(7, 11))
	for _, s := range Specs {
		if qs, ok := be.(bridge.QuantSupport); ok {
			if err := qs.SupportsQuant(s); err != nil {
				t.Logf("%v: %v", s, err)
				continue
			}
		}
		for _, c := range Shapes {
			name := fmt.Sprintf("%v, m=%d n=%d k=%d", s, c.M, c.N, c.K)
			got, want, err := run(be, qb, r, s, c)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			e := RelErr(got, want)
			t.Logf("%s: relative error %.2g", name, e)
			if !(e <= tol) {
				t.Errorf("%s: relative error %.3g > %g", name, e, tol)
			}
		}
	}
}

// Run runs one packed matmul of spec s and shape c on be, its weights,
// activations and bias drawn from seed, and returns its output and the
// reference's.
func Run(be bridge.Backend, s quant.Spec, c Shape, seed uint64) (got, want []float32, err error) {
	qb, ok := be.(bridge.QuantBackend)
	if !ok {
		return nil, nil, fmt.Errorf("%T runs no packed weights", be)
	}
	return run(be, qb, rand.New(rand.NewPCG(seed, 11)), s, c)
}

func run(be bridge.Backend, qb bridge.QuantBackend, r *rand.Rand, s quant.Spec, c Shape) (got, want []float32, err error) {
	d := draw(r, s, c)
	got, err = qmatmul(be, qb, c, packed{qb: qb, s: s, w: d.w}.upload, d.x, d.bias, nil)
	return got, d.want, err
}

// drawn is a packed matmul's matrix, activations and bias, and the
// reference's output for them.
type drawn struct {
	w             *quant.Matrix
	x, bias, want []float32
}

// draw draws a packed matmul of spec s and shape c from r.
func draw(r *rand.Rand, s quant.Spec, c Shape) drawn {
	g := c.N * s.Groups(c.K) * s.Scale.Size()
	var sc, bi []byte
	if s.Type == quant.Affine {
		sc, bi = make([]byte, g), make([]byte, g)
	}
	d := drawn{w: quant.Random(s, c.N, c.K, 0.1, r, make([]byte, c.N*s.RowBytes(c.K)), sc, bi)}
	d.x, d.bias = randn(r, c.M*c.K), randn(r, c.N)
	d.want = make([]float32, c.M*c.N)
	quant.MatMul(d.want, d.x, d.bias, d.w, c.M)
	return d
}

// qmatmul runs one packed matmul of shape c on be, its weights put there by
// weight, and returns its output; uploaded, when set, runs once every
// tensor is on be.
func qmatmul(be bridge.Backend, qb bridge.QuantBackend, c Shape, weight func(bridge.Backend, Shape) (bridge.Tensor, error),
	x, bias []float32, uploaded func()) ([]float32, error) {
	m, err := upload(be, c, weight, x, bias)
	defer m.free()
	if err != nil {
		return nil, err
	}
	if uploaded != nil {
		uploaded()
	}
	if err := be.BeginStep(stepMeta(c.M), make([]int32, c.M), false); err != nil {
		return nil, err
	}
	qb.QMatMul(m.out, m.x, m.w, m.bias)
	if _, err := be.EndStep(); err != nil {
		return nil, err
	}
	got := make([]float32, c.M*c.N)
	if err := be.Read(m.out, got); err != nil {
		return nil, err
	}
	return got, nil
}

func randn(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// F32Bytes is v's memory as bytes, as backends take float weights.
func F32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// RelErr is ‖got − want‖ / ‖want‖; +Inf when got holds a NaN or an Inf.
// The GPU backends' tests measure their errors with it too.
func RelErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		g := float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return math.Inf(1)
		}
		d := g - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// ArgmaxShapes: decode rows over vocabularies that fill no warp evenly and
// that the GPU kernels take 1, 2 and 4 rows a warp of (on the GPUs tested:
// 1 and 4 fold the argmax in), and rows enough for two of their four-row
// blocks.
var ArgmaxShapes = []Shape{{1, 4099, 768}, {1, 5003, 256}, {1, 9001, 256}, {6, 1031, 512}}

// ArgmaxPlant is what an ArgmaxCase plants in its weights.
type ArgmaxPlant int

const (
	// PlantTie copies the first activation row's winner into row 1 (row 0
	// if the winner is row 1): the two tie and the lower index must win.
	PlantTie ArgmaxPlant = iota
	// PlantLast copies the winner into the last row with its bias 1
	// larger: the winner sits in a GEMV's last threadgroup, alone.
	PlantLast
	// PlantEqual makes every row and bias the same: all tie, 0 wins.
	PlantEqual
	// PlantZeros zeroes every weight, biases -0 and +0 in turn: every
	// logit a zero, so 0 wins (a GEMV whose sums start at +0 writes each
	// as +0; -0 would equal it).
	PlantZeros
	// PlantNaN puts a NaN in the activation row: every logit NaN, which
	// never wins, so -1 (bridge.NoToken: the engine's sign of non-finite
	// logits).
	PlantNaN
)

// ArgmaxCase is one LM head and greedy pick GEMVArgmax runs.
type ArgmaxCase struct {
	Name string
	Shape
	Plant ArgmaxPlant
}

// ArgmaxEdges: vocabularies of 5 (under a GEMV threadgroup's rows), 4097
// (a row past a multiple of them and of 4096, an argmax partition) and
// Qwen3's 151,936, the winner alone in the last threadgroup, every value
// equal, zeros of both signs, and logits all NaN.
var ArgmaxEdges = []ArgmaxCase{
	{"vocabulary 5", Shape{1, 5, 256}, PlantTie},
	{"vocabulary 4097", Shape{1, 4097, 256}, PlantTie},
	{"vocabulary 151936", Shape{1, 151936, 256}, PlantTie},
	{"winner last of 4097", Shape{1, 4097, 256}, PlantLast},
	{"winner last of 151936", Shape{1, 151936, 256}, PlantLast},
	{"winner last of 5", Shape{1, 5, 256}, PlantLast},
	{"all equal", Shape{1, 1000, 256}, PlantEqual},
	{"-0 and +0", Shape{1, 4097, 256}, PlantZeros},
	{"NaN activation", Shape{1, 4097, 256}, PlantNaN},
}

// GEMVArgmax runs a packed matmul and the ArgmaxOp after it through the
// backend's fusion table (the LM head and the greedy pick of a decode
// step), at each affine spec, and checks the indices against the
// reference argmax of the outputs the backend wrote: a tie between a
// row's planted copy and the winner goes to the lower index, and a row of
// NaN (an activation row holding one) gives bridge.NoToken.
func GEMVArgmax(t *testing.T, be bridge.Backend) {
	t.Helper()
	GEMVArgmaxSaved(t, be, nil)
}

// GEMVArgmaxSaved is GEMVArgmax, then ArgmaxEdges at the first spec; with
// saved, each case also runs with fusion off (only Always patterns) and
// its fused step must take saved(shape) dispatches fewer.
func GEMVArgmaxSaved(t *testing.T, be bridge.Backend, saved func(Shape) int) {
	t.Helper()
	qb, ok := be.(bridge.QuantBackend)
	if !ok {
		t.Fatalf("%T runs no packed weights", be)
	}
	var heads, edges []lmKind
	for _, s := range Specs[:6] {
		heads = append(heads, packedKind(qb, s))
	}
	if saved != nil {
		edges = heads[1:2]
	}
	argmaxCases(t, be, heads, edges, saved)
}

// FloatDTypes are the float weights a float LM head holds.
var FloatDTypes = []bridge.DType{bridge.F32, bridge.F16, bridge.BF16}

// FloatGEMVArgmaxSaved is GEMVArgmaxSaved with float weights (a MatMulOp):
// ArgmaxShapes and ArgmaxEdges at each of FloatDTypes.
func FloatGEMVArgmaxSaved(t *testing.T, be bridge.Backend, saved func(Shape) int) {
	t.Helper()
	var heads []lmKind
	for _, dt := range FloatDTypes {
		heads = append(heads, floatKind(dt))
	}
	argmaxCases(t, be, heads, heads, saved)
}

// argmaxCases runs ArgmaxShapes (a planted tie) at each of heads and
// ArgmaxEdges at each of edges, fused and, with saved, unfused.
func argmaxCases(t *testing.T, be bridge.Backend, heads, edges []lmKind, saved func(Shape) int) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 3))
	run := func(k lmKind, c ArgmaxCase) {
		name := fmt.Sprintf("%s, %s, m=%d n=%d k=%d", k.name, c.Name, c.M, c.N, c.K)
		fused, err := gemvArgmax(be, r, k, c, true)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if saved == nil {
			return
		}
		unfused, err := gemvArgmax(be, r, k, c, false)
		if err != nil {
			t.Errorf("%s (unfused): %v", name, err)
			return
		}
		t.Logf("%s: %d dispatches fused, %d unfused", name, fused, unfused)
		if want := saved(c.Shape); unfused-fused != want {
			t.Errorf("%s: %d dispatches fused, %d unfused: want %d fewer", name, fused, unfused, want)
		}
	}
	for _, k := range heads {
		for _, c := range ArgmaxShapes {
			run(k, ArgmaxCase{Name: "tie", Shape: c})
		}
	}
	for _, k := range edges {
		for _, c := range ArgmaxEdges {
			run(k, c)
		}
	}
}

// lmKind names an LM head's weights and makes them, n rows of depth k.
type lmKind struct {
	name string
	make func(r *rand.Rand, n, k int) lmWeights
}

// lmWeights is an LM head's weights on the host, which gemvArgmax plants
// its cases in: packed (QMatMulOp) or float (MatMulOp).
type lmWeights interface {
	copyRow(dst, src int)
	clear()
	// matmul is the reference of one activation row: x·wᵀ + bias.
	matmul(want, x, bias []float32)
	upload(be bridge.Backend, c Shape) (bridge.Tensor, error)
	op(at bridge.At, out, x, w, bias bridge.Tensor) bridge.Op
}

func packedKind(qb bridge.QuantBackend, s quant.Spec) lmKind {
	return lmKind{s.String(), func(r *rand.Rand, n, k int) lmWeights {
		g := s.Groups(k) * s.Scale.Size()
		w := quant.Random(s, n, k, 0.1, r, make([]byte, n*s.RowBytes(k)), make([]byte, n*g), make([]byte, n*g))
		return packed{qb: qb, s: s, w: w}
	}}
}

// packed is an affine packed matrix.
type packed struct {
	qb bridge.QuantBackend
	s  quant.Spec
	w  *quant.Matrix
}

func (p packed) copyRow(dst, src int) {
	rb, g := p.s.RowBytes(p.w.K), p.s.Groups(p.w.K)*p.s.Scale.Size()
	copy(p.w.Data[dst*rb:(dst+1)*rb], p.w.Data[src*rb:(src+1)*rb])
	copy(p.w.Scales[dst*g:(dst+1)*g], p.w.Scales[src*g:(src+1)*g])
	copy(p.w.Biases[dst*g:(dst+1)*g], p.w.Biases[src*g:(src+1)*g])
}

func (p packed) clear() {
	clear(p.w.Data)
	clear(p.w.Scales)
	clear(p.w.Biases)
}

func (p packed) matmul(want, x, bias []float32) { quant.MatMul(want, x, bias, p.w, 1) }

func (p packed) upload(_ bridge.Backend, c Shape) (bridge.Tensor, error) {
	return p.qb.QuantWeight(p.s, []int{c.N, c.K}, p.w.Data, p.w.Scales, p.w.Biases)
}

func (p packed) op(at bridge.At, out, x, w, bias bridge.Tensor) bridge.Op {
	return &bridge.QMatMulOp{At: at, Out: out, X: x, W: w, Bias: bias}
}

func floatKind(dt bridge.DType) lmKind {
	return lmKind{dt.String(), func(r *rand.Rand, n, k int) lmWeights {
		f := floats{dt: dt, k: k, w: randn(r, n*k)}
		for i, v := range f.w {
			f.w[i] = f.round(0.1 * v)
		}
		return f
	}}
}

// floats is a float matrix of dt, its values held as dt rounds them.
type floats struct {
	dt bridge.DType
	k  int
	w  []float32
}

func (f floats) round(v float32) float32 {
	switch f.dt {
	case bridge.F16:
		return quant.HalfToF32(quant.ToF16(v))
	case bridge.BF16:
		return quant.BF16ToF32(quant.ToBF16(v))
	}
	return v
}

func (f floats) copyRow(dst, src int) { copy(f.w[dst*f.k:(dst+1)*f.k], f.w[src*f.k:(src+1)*f.k]) }

func (f floats) clear() { clear(f.w) }

func (f floats) matmul(want, x, bias []float32) {
	for i := range want {
		sum := float64(bias[i])
		for j, v := range f.w[i*f.k : (i+1)*f.k] {
			sum += float64(x[j]) * float64(v)
		}
		want[i] = float32(sum)
	}
}

func (f floats) upload(be bridge.Backend, c Shape) (bridge.Tensor, error) {
	if f.dt == bridge.F32 {
		return be.Weight(f.dt, []int{c.N, c.K}, F32Bytes(f.w))
	}
	b := make([]byte, 2*len(f.w))
	for i, v := range f.w {
		h := quant.ToF16(v)
		if f.dt == bridge.BF16 {
			h = quant.ToBF16(v)
		}
		b[2*i], b[2*i+1] = byte(h), byte(h>>8)
	}
	return be.Weight(f.dt, []int{c.N, c.K}, b)
}

func (f floats) op(at bridge.At, out, x, w, bias bridge.Tensor) bridge.Op {
	return &bridge.MatMulOp{At: at, Out: out, X: x, W: w, Bias: bias}
}

// gemvArgmax runs c once (twice in a row, checking each), fused or not,
// and returns the step's dispatches.
func gemvArgmax(be bridge.Backend, r *rand.Rand, kind lmKind, c ArgmaxCase, fuse bool) (int, error) {
	w := kind.make(r, c.N, c.K)
	x, bias := randn(r, c.M*c.K), randn(r, c.N)
	if c.M > 1 {
		x[c.K+7] = float32(math.NaN()) // activation row 1: every output NaN
	}
	want := make([]float32, c.N)
	w.matmul(want, x[:c.K], bias)
	top := kernels.Argmax(want)
	copyRow := func(dst int) {
		w.copyRow(dst, top)
		bias[dst] = bias[top]
	}
	tie, pick, picked := -1, 0, false // rows that must tie; the index that must win, if one must
	switch c.Plant {
	case PlantTie:
		tie = 1
		if top == 1 {
			tie = 0
		}
		copyRow(tie)
		if c.N == 1 {
			tie = -1
		}
	case PlantLast:
		copyRow(c.N - 1)
		bias[c.N-1]++
		pick, picked = c.N-1, true
	case PlantEqual:
		for i := range c.N {
			copyRow(i)
		}
		pick, picked = 0, true
	case PlantZeros:
		w.clear()
		for i := range bias {
			bias[i] = float32(math.Copysign(0, float64(i%2*2-1)))
		}
		pick, picked = 0, true
	case PlantNaN:
		x[c.K/2] = float32(math.NaN())
		pick, picked = bridge.NoToken, true
	}

	m, err := upload(be, c.Shape, w.upload, x, bias)
	defer m.free()
	if err != nil {
		return 0, err
	}
	ids, err := m.keep(be.Alloc(bridge.I32, c.M))
	if err != nil {
		return 0, err
	}
	at := bridge.At{Layer: -1, Component: bridge.CompOther, Name: "lm_head"}
	ops := []bridge.Op{
		w.op(at, m.out, m.x, m.w, m.bias),
		&bridge.ArgmaxOp{At: at, Out: ids, Logits: m.out},
	}
	// Twice: a GPU kernel that keeps state between launches must leave it
	// as it found it.
	dispatches := 0
	for range 2 {
		if err := be.BeginStep(stepMeta(c.M), make([]int32, c.M), false); err != nil {
			return 0, err
		}
		var run bridge.Runner
		run.Run(be, ops, fuse, false)
		st, err := be.EndStep()
		if err != nil {
			return 0, err
		}
		dispatches = st.Dispatches
		logits := make([]float32, c.M*c.N)
		if err := be.Read(m.out, logits); err != nil {
			return 0, err
		}
		got := make([]int32, c.M)
		if err := be.ReadI32(ids, got); err != nil {
			return 0, err
		}
		for i := range c.M {
			row := logits[i*c.N : (i+1)*c.N]
			if want := kernels.Argmax(row); int(got[i]) != want {
				return 0, fmt.Errorf("row %d: argmax %d (%g), want %d (%g)", i, got[i], at32(row, got[i]), want, at32(row, int32(want)))
			}
		}
		if tie >= 0 && logits[tie] != logits[top] {
			return 0, fmt.Errorf("row 0: rows %d and %d hold the same weights but gave %g and %g", tie, top, logits[tie], logits[top])
		}
		if picked && int(got[0]) != pick {
			return 0, fmt.Errorf("row 0: argmax %d (%g), want %d (%g)", got[0], at32(logits, got[0]), pick, at32(logits, int32(pick)))
		}
		if c.M > 1 && got[1] != bridge.NoToken {
			return 0, fmt.Errorf("row 1 is all NaN: argmax %d, want %d (bridge.NoToken)", got[1], bridge.NoToken)
		}
	}
	return dispatches, nil
}

func at32(v []float32, i int32) float32 {
	if i < 0 || int(i) >= len(v) {
		return float32(math.NaN())
	}
	return v[i]
}

// matmul is a packed matmul's tensors on a backend, freed together.
type matmul struct {
	be              bridge.Backend
	w, x, bias, out bridge.Tensor
	kept            []bridge.Tensor
}

// keep records t to be freed with the rest.
func (m *matmul) keep(t bridge.Tensor, err error) (bridge.Tensor, error) {
	if err == nil {
		m.kept = append(m.kept, t)
	}
	return t, err
}

func (m *matmul) free() {
	for _, t := range m.kept {
		m.be.Free(t)
	}
}

// upload puts a shape c matmul's weights (weight puts them), activations x
// and bias on be, with an output for it.
func upload(be bridge.Backend, c Shape, weight func(bridge.Backend, Shape) (bridge.Tensor, error), x, bias []float32) (*matmul, error) {
	m := &matmul{be: be}
	var err error
	if m.w, err = m.keep(weight(be, c)); err != nil {
		return m, err
	}
	if m.x, err = m.keep(be.Weight(bridge.F32, []int{c.M, c.K}, F32Bytes(x))); err != nil {
		return m, err
	}
	if m.bias, err = m.keep(be.Weight(bridge.F32, []int{c.N}, F32Bytes(bias))); err != nil {
		return m, err
	}
	m.out, err = m.keep(be.Alloc(bridge.F32, c.M, c.N))
	return m, err
}

// stepMeta is the metadata of a step of T tokens of one sequence.
func stepMeta(T int) *bridge.StepMeta {
	return &bridge.StepMeta{NumTokens: T, NumSeqs: 1, MaxQueryLen: T, MaxSeqLen: T, Positions: make([]int32, T),
		SlotMapping: make([]int32, T), QueryStartLoc: []int32{0, int32(T)}, SeqLens: []int32{int32(T)},
		BlockTable: make([]int32, (T+15)/16), MaxBlocks: (T + 15) / 16, BlockSize: 16}
}
