package half

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// forPaths runs f on the Go path and, where this machine has them, on the
// assembly kernels.
func forPaths(t *testing.T, f func(t *testing.T)) {
	saved := accel
	defer func() { accel = saved }()
	accel = false
	t.Run("go", f)
	if hasAccel() {
		accel = true
		t.Run("asm", f)
	}
}

// Reference conversions: decode by arithmetic, encode by searching the sorted
// table of representable values, so they share no bit tricks with the code.

func refF16Value(h uint16) float64 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	f := float64(h & 0x3ff)
	switch e {
	case 0:
		return s * math.Ldexp(f, -24)
	case 0x1f:
		if f == 0 {
			return math.Inf(int(s))
		}
		return math.NaN()
	}
	return s * math.Ldexp(1024+f, e-25)
}

func refBF16Value(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }

// roundToTable returns the pattern in [0, maxFinite] nearest to a >= 0 (ties
// to the even pattern), or inf when a rounds beyond maxFinite, given val
// increasing over patterns and top = the value one step past maxFinite.
func roundToTable(a float64, maxFinite uint16, inf uint16, top float64, val func(uint16) float64) uint16 {
	p := uint16(sort.Search(int(maxFinite)+1, func(i int) bool { return val(uint16(i)) > a }) - 1)
	lo := val(p)
	if lo == a {
		return p
	}
	hi, next := top, inf
	if p < maxFinite {
		hi, next = val(p+1), p+1
	}
	mid := (lo + hi) / 2
	switch {
	case a < mid:
		return p
	case a > mid:
		return next
	}
	if p&1 == 0 {
		return p
	}
	return next
}

func refF32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		return sign | 0x7e00 | uint16(b&0x7fffff>>13)
	}
	return sign | roundToTable(math.Abs(float64(f)), 0x7bff, 0x7c00, 65536, refF16Value)
}

func refF32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	if f != f {
		return uint16(b>>16) | 0x40
	}
	return sign | roundToTable(math.Abs(float64(f)), 0x7f7f, 0x7f80, math.Ldexp(1, 128), refBF16Value)
}

func TestHalfToF32Exhaustive(t *testing.T) {
	src := make([]uint16, 1<<16+5)
	for i := range src {
		src[i] = uint16(i)
	}
	forPaths(t, func(t *testing.T) {
		for _, off := range []int{0, 5} {
			s := src[off:]
			db := make([]float32, len(s))
			dh := make([]float32, len(s))
			BF16ToF32(db, s)
			F16ToF32(dh, s)
			for i, h := range s {
				if got, want := math.Float32bits(db[i]), uint32(h)<<16; got != want {
					t.Fatalf("BF16ToF32(%#04x) = %#08x, want %#08x", h, got, want)
				}
				if got := math.Float32bits(BF16ToFloat(h)); got != uint32(h)<<16 {
					t.Fatalf("BF16ToFloat(%#04x) = %#08x", h, got)
				}
				var want uint32
				if v := refF16Value(h); v != v {
					want = uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(h&0x3ff)<<13 // quiet NaN, payload kept
				} else {
					want = math.Float32bits(float32(v))
				}
				if got := math.Float32bits(dh[i]); got != want {
					t.Fatalf("F16ToF32(%#04x) = %#08x, want %#08x", h, got, want)
				}
				if got := math.Float32bits(F16ToFloat(h)); got != want {
					t.Fatalf("F16ToFloat(%#04x) = %#08x, want %#08x", h, got, want)
				}
			}
		}
	})
}

// f32Patterns mixes uniform random bit patterns with the interesting ones:
// exact ties and near-ties for both targets, half subnormals and their
// underflow boundary, the overflow boundary, f32 subnormals, inf and NaNs.
func f32Patterns() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	var ps []float32
	add := func(b uint32) {
		ps = append(ps, math.Float32frombits(b), math.Float32frombits(b^0x80000000))
	}
	for i := 0; i < 200000; i++ {
		add(r.Uint32())
	}
	for i := 0; i < 20000; i++ {
		hi := r.Uint32() & 0xffff0000
		add(hi | 0x8000) // bf16 tie
		add(hi | 0x7fff)
		add(hi | 0x8001)
		// f16 ties between adjacent representable halves, subnormal ones too.
		h := uint16(r.IntN(0x7c00 - 1))
		mid := float32((refF16Value(h) + refF16Value(h+1)) / 2)
		add(math.Float32bits(mid))
		add(math.Float32bits(mid) + 1)
		add(math.Float32bits(mid) - 1)
		// Values in and just below the half subnormal range.
		add(math.Float32bits(float32(math.Ldexp(r.Float64(), -14-r.IntN(14)))))
		add(r.Uint32() & 0x807fffff) // f32 subnormals
		add(0x7f800000 | r.Uint32()&0x7fffff)
	}
	for _, v := range []float64{0, 65504, 65519, 65519.99, 65520, 65520.01, 65536, math.Ldexp(1, -24), math.Ldexp(1, -25),
		math.Ldexp(1.0000001, -25), math.Ldexp(1.5, -25), math.Ldexp(1, -26), math.Ldexp(1, -14), math.Ldexp(0.99999, -14),
		math.MaxFloat32, math.Inf(1), math.SmallestNonzeroFloat32} {
		add(math.Float32bits(float32(v)))
	}
	for _, b := range []uint32{0x7f800001, 0x7fc00000, 0x7fffffff, 0x7f802000, 0x7fa00000, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff} {
		add(b)
	}
	return ps
}

func TestF32ToHalf(t *testing.T) {
	ps := f32Patterns()
	wantB := make([]uint16, len(ps))
	wantH := make([]uint16, len(ps))
	for i, f := range ps {
		wantB[i] = refF32ToBF16(f)
		wantH[i] = refF32ToF16(f)
		if got := BF16(f); got != wantB[i] {
			t.Fatalf("BF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, wantB[i])
		}
		if got := F16(f); got != wantH[i] {
			t.Fatalf("F16(%#08x) = %#04x, want %#04x", math.Float32bits(f), got, wantH[i])
		}
	}
	forPaths(t, func(t *testing.T) {
		for _, off := range []int{0, 3} {
			s := ps[off:]
			gb := make([]uint16, len(s))
			gh := make([]uint16, len(s))
			F32ToBF16(gb, s)
			F32ToF16(gh, s)
			for i, f := range s {
				if gb[i] != wantB[off+i] {
					t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), gb[i], wantB[off+i])
				}
				if gh[i] != wantH[off+i] {
					t.Fatalf("F32ToF16(%#08x) = %#04x, want %#04x", math.Float32bits(f), gh[i], wantH[off+i])
				}
			}
		}
		// Short slices take only the tail paths.
		for n := 0; n < 40; n++ {
			gb := make([]uint16, n)
			F32ToBF16(gb, ps[:n])
			for i := range gb {
				if gb[i] != wantB[i] {
					t.Fatalf("n=%d: F32ToBF16 mismatch at %d", n, i)
				}
			}
		}
	})
}

func BenchmarkBF16ToF32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]uint16, 2048)
	for i := range src {
		src[i] = BF16(float32(r.Float64()*2 - 1))
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(len(src) * 2))
	for b.Loop() {
		BF16ToF32(dst, src)
	}
}
