package selftest

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/runner/envconfig"
)

// Every check, at the edge cases and the model shapes, on the GPU: checked,
// timed (graph capture and replay) and checked again.
func TestCUDA(t *testing.T) {
	o, err := envconfig.CUDA()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cuda.New(o)
	if err != nil {
		if strings.HasPrefix(err.Error(), "no CUDA") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer b.Close()
	rs, err := RunWith(b, Options{ModelShapes: true, Timed: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Logf("%s %s: max err %.2g, %.1f us/call", r.Case, r.Shape, r.MaxErr, r.UsPerCall)
	}
	if err := Err(rs); err != nil {
		t.Fatal(err)
	}
}
