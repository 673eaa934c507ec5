package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// LayerNorm against values worked by hand and against the textbook
// two-pass formula on random rows.
func TestLayerNorm(t *testing.T) {
	// [1 2 3 4]: mean 2.5, variance 1.25.
	inv := 1 / math.Sqrt(1.25+1e-5)
	out := make([]float32, 4)
	LayerNorm(out, []float32{1, 2, 3, 4}, []float32{1, 2, 1, 1}, []float32{0, 0, 1, -1}, 4, 1e-5)
	want := []float64{-1.5 * inv, 2 * -0.5 * inv, 0.5*inv + 1, 1.5*inv - 1}
	for i := range want {
		if math.Abs(float64(out[i])-want[i]) > 1e-6 {
			t.Errorf("element %d: %v, want %v", i, out[i], want[i])
		}
	}
	for _, dim := range []int{1, 7, 64, 771} {
		r := rand.New(rand.NewPCG(3, uint64(dim)))
		x, w, b := randSlice(r, 3*dim), randSlice(r, dim), randSlice(r, dim)
		for i := range x {
			x[i] = 10 + 3*x[i] // a mean far from zero
		}
		got := make([]float32, len(x))
		LayerNorm(got, x, w, b, dim, 1e-5)
		for row := 0; row < 3; row++ {
			xr := x[row*dim : (row+1)*dim]
			var mean, vr float64
			for _, v := range xr {
				mean += float64(v) / float64(dim)
			}
			for _, v := range xr {
				vr += (float64(v) - mean) * (float64(v) - mean) / float64(dim)
			}
			for i, v := range xr {
				want := (float64(v)-mean)/math.Sqrt(vr+1e-5)*float64(w[i]) + float64(b[i])
				if d := math.Abs(float64(got[row*dim+i]) - want); d > 1e-5*(1+math.Abs(want)) {
					t.Fatalf("dim %d row %d element %d: %v, want %v", dim, row, i, got[row*dim+i], want)
				}
			}
		}
		// AddLayerNorm is the add, then the norm of the sum.
		res, y := randSlice(r, 3*dim), randSlice(r, 3*dim)
		sum := make([]float32, len(res))
		Add(sum, res, y)
		want := make([]float32, len(res))
		LayerNorm(want, sum, w, b, dim, 1e-5)
		AddLayerNorm(got, res, y, w, b, dim, 1e-5)
		for i := range got {
			if got[i] != want[i] || res[i] != sum[i] {
				t.Fatalf("add_layer_norm dim %d element %d: %v (residual %v), want %v (%v)", dim, i, got[i], res[i], want[i], sum[i])
			}
		}
	}
}

// GELUTanh at points torch.nn.functional.gelu(x, approximate="tanh")
// gives (float64).
func TestGELUTanh(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{0, 0}, {1, 0.8411919906082768}, {-1, -0.15880800939172324}, {3, 2.9963625777605253},
		{-3, -0.0036374222394747}, {0.5, 0.34571400982514394}, {10, 10}, {-10, 0},
	} {
		if got := float64(GELUTanh(float32(c.x))); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("GELUTanh(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	x := []float32{-2, 0.25, 4}
	GELU(x, x)
	for i, v := range []float32{-2, 0.25, 4} {
		if x[i] != GELUTanh(v) {
			t.Errorf("GELU in place: element %d %v, want %v", i, x[i], GELUTanh(v))
		}
	}
}

// AddPositions adds the table row of each token's position.
func TestAddPositions(t *testing.T) {
	table := []float32{0, 0, 1, 10, 2, 20, 3, 30} // 4 positions of 2
	x := []float32{1, 1, 1, 1, 1, 1}
	AddPositions(x, table, []int32{3, 0, 1}, 2)
	want := []float32{4, 31, 1, 1, 2, 11}
	for i := range want {
		if x[i] != want[i] {
			t.Fatalf("got %v, want %v", x, want)
		}
	}
}
