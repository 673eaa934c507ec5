package emu_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// TestLlamaStyleMatVec runs a quantized matrix-vector kernel written the
// way llama.cpp writes them (testdata/llama_mv.metal) against Go.
func TestLlamaStyleMatVec(t *testing.T) {
	dev := newDevice(t, emu.Options{})
	lib := testLibrary(t, dev, "llama_mv.metal")
	const ne00, ne01, nsg, nr0 = 96, 7, 2, 2
	const nb, blockBytes = ne00 / 32, 18
	w := make([]byte, 0, ne01*nb*blockBytes)
	deq := make([]float32, ne01*ne00)
	for r := 0; r < ne01; r++ {
		for b := 0; b < nb; b++ {
			d := float32(r+b+1) * 0.125
			w = binary.LittleEndian.AppendUint16(w, f32ToF16(d))
			for j := 0; j < 16; j++ {
				lo, hi := (r*3+b*5+j)%16, (r*7+b+j*3)%16
				w = append(w, byte(lo|hi<<4))
				deq[r*ne00+b*32+j] = d * float32(lo-8)
				deq[r*ne00+b*32+16+j] = d * float32(hi-8)
			}
		}
	}
	x := make([]float32, ne00)
	for i := range x {
		x[i] = float32(i%11)*0.25 - 1
	}
	args := make([]byte, 16)
	binary.LittleEndian.PutUint32(args, ne00)
	binary.LittleEndian.PutUint32(args[4:], ne01)
	binary.LittleEndian.PutUint64(args[8:], nb*blockBytes)
	src0 := newBuf(t, dev, len(w))
	copy(src0.Contents(), w)
	dst := newBuf(t, dev, 4*ne01)
	p := pipe(t, lib, "kernel_mul_mv_q4_r2", mtl.FunctionConstants{200: int16(nsg)})
	groups := (ne01 + nsg*nr0 - 1) / (nsg * nr0)
	if err := run(t, dev, p, [3]int{groups, 1, 1}, [3]int{32 * nsg, 1, 1},
		arg{bytes: args}, arg{buf: src0}, arg{buf: f32Buf(t, dev, x)}, arg{buf: dst}); err != nil {
		t.Fatal(err)
	}
	for r, got := range f32s(dst) {
		var want float64
		for k := 0; k < ne00; k++ {
			want += float64(deq[r*ne00+k]) * float64(x[k])
		}
		if math.Abs(float64(got)-want) > 1e-4*math.Max(1, math.Abs(want)) {
			t.Errorf("dst[%d] = %v, want %v", r, got, want)
		}
	}
}
