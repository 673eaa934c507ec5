package selftest

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
)

func TestCPUPassesEveryCheck(t *testing.T) {
	rs, err := Run(cpu.New(cpu.Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 150 {
		t.Fatalf("only %d checks", len(rs))
	}
	_, failed := Table("cpu", rs, true)
	for _, r := range rs {
		if !r.Passed() {
			t.Errorf("%s %s: %v", r.Case, r.Shape, r.Err)
		}
	}
	if failed != 0 {
		t.Fatalf("%d checks failed", failed)
	}
}

// A backend with a broken op fails the selftest.
type brokenNorm struct{ *cpu.Backend }

func (b brokenNorm) RMSNorm(out, x, w bridge.Tensor, eps float32) {
	b.Backend.RMSNorm(out, x, w, eps*1e6+1)
}

func TestBrokenBackendFails(t *testing.T) {
	rs, err := Run(brokenNorm{cpu.New(cpu.Options{})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, failed := Table("broken", rs, true); failed == 0 {
		t.Fatal("a broken RMSNorm passed the selftest")
	}
}
