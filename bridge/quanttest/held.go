package quanttest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// HeldTwice hands be the same host bytes twice, as two engines' builds over
// one cached checkpoint do (bridge.HostKey), a packed matrix and the float
// activations, frees the first hand-out of each, and runs a packed matmul
// on the second: a backend that gives both builds one tensor must keep it
// for the holder left (bridge.Holders), within tol of the reference.
func HeldTwice(t *testing.T, be bridge.Backend, tol float64) {
	t.Helper()
	qb, ok := be.(bridge.QuantBackend)
	if !ok {
		t.Fatalf("%T runs no packed weights", be)
	}
	r := rand.New(rand.NewPCG(3, 5))
	c := Shape{M: 1, N: 64, K: 256}
	for _, s := range []quant.Spec{{Type: quant.Q4_0}, {Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}} {
		d := draw(r, s, c)
		got, err := heldTwice(be, qb, c, packed{qb: qb, s: s, w: d.w}, d.x, d.bias)
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		e := RelErr(got, d.want)
		t.Logf("%v: the second hand-out after the first was freed: relative error %.2g", s, e)
		if !(e <= tol) {
			t.Errorf("%v: a matmul on the second hand-out of its weights after the first was freed: relative error %.3g > %g", s, e, tol)
		}
	}
}

func heldTwice(be bridge.Backend, qb bridge.QuantBackend, c Shape, p packed, x, bias []float32) (got []float32, err error) {
	// A backend that frees the tensor under the holder left may fail
	// anywhere it next reads it.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	firstW, err := p.upload(be, c)
	if err != nil {
		return nil, err
	}
	firstX, err := be.Weight(bridge.F32, []int{c.M, c.K}, F32Bytes(x))
	if err != nil {
		be.Free(firstW)
		return nil, err
	}
	second := func(be bridge.Backend, c Shape) (bridge.Tensor, error) {
		w, err := p.upload(be, c)
		be.Free(firstW)
		return w, err
	}
	return qmatmul(be, qb, c, second, x, bias, func() { be.Free(firstX) })
}
