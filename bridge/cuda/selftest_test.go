package cuda

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
)

// The selftest's cases and table, on the CPU backend: every case must pass
// there, so a failure on a GPU is the GPU's.
func TestSelftestOnCPU(t *testing.T) {
	cases := SelftestCases
	if testing.Short() || os.Getenv("CI") != "" {
		// The model-size cases take half a minute of reference loops.
		cases = nil
		for _, c := range SelftestCases {
			if !matches(c, "experts=128|n=151936|width=151936|context=1000|tokens=128 |n=5120|k=4096") {
				cases = append(cases, c)
			}
		}
	}
	var buf bytes.Buffer
	rs := RunSelftest(cpu.New(cpu.Options{}), &buf, cases)
	t.Log("\n" + buf.String())
	if err := Failed(rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), " passed, 0 failed") {
		t.Fatal("no summary line")
	}
}
