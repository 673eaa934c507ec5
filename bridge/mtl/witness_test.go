package mtl

import (
	"reflect"
	"testing"
)

// SumByOperand adds each kernel's operands over its dispatches, keeps two
// kernels' operands of one name apart, and lists the largest excess (bytes
// beyond the distinct ones) first.
func TestSumByOperand(t *testing.T) {
	ds := []DispatchStats{
		{Kernel: "matvec", Operands: []Operand{
			{Name: "x", Read: 640, FootprintRead: 64},
			{Name: "w", Read: 1000, FootprintRead: 1000},
			{Name: "out", Written: 40, FootprintWritten: 40}}},
		{Kernel: "matvec", Operands: []Operand{{Name: "x", Read: 640, FootprintRead: 64}, {Name: "w", Read: 1000, FootprintRead: 1000}}},
		{Kernel: "norm", Operands: []Operand{{Name: "x", Read: 100, FootprintRead: 50}}},
	}
	got := SumByOperand(ds)
	want := []KernelOperand{
		{"matvec", Operand{Name: "x", Read: 1280, FootprintRead: 128}},
		{"norm", Operand{Name: "x", Read: 100, FootprintRead: 50}},
		{"matvec", Operand{Name: "w", Read: 2000, FootprintRead: 2000}},
		{"matvec", Operand{Name: "out", Written: 40, FootprintWritten: 40}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SumByOperand:\n got %+v\nwant %+v", got, want)
	}
	if r, e := got[0].Rereads(), got[0].Excess(); r != 10 || e != 1152 {
		t.Errorf("x: %v re-reads, %d bytes of excess; want 10 and 1152", r, e)
	}
	if r, w := got[3].Rereads(), got[3].Rewrites(); r != 0 || w != 1 {
		t.Errorf("an operand written once: %v re-reads, %v re-writes; want 0 and 1", r, w)
	}
}
