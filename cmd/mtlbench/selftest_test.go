package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/reports/table"
	"github.com/mtlbench/mtlbench/runner/selftest"
)

// The selftest table shows the cost witness's efficiencies only where a
// check was counted (metal-emu), with a note giving the limits; the CPU's
// table has neither.
func TestSelftestTable(t *testing.T) {
	counted := []selftest.Result{
		{Case: "matvec", Shape: "matmul m=1 n=4096 k=2048 dtype=bf16", MaxErr: 0.004, Efficiency: 0.889, FootprintEfficiency: 0.998},
		{Case: "norm", Shape: "rms_norm tokens=4 width=2048", MaxErr: 2e-7},
		{Case: "attention", Shape: "paged_attention_decode seqs=1 context=512", MaxErr: 0.01, Efficiency: 0.5, FootprintEfficiency: 0.8,
			Err: errors.New("touches 1359360 distinct bytes, 1.25× the op's ideal 1087488 (a decode-path kernel may touch 1.10×)")},
	}
	var b strings.Builder
	for _, c := range []struct {
		backend string
		rs      []selftest.Result
	}{{"metal-emu", counted}, {"cpu", []selftest.Result{{Case: "norm", Shape: "rms_norm tokens=4 width=2048", MaxErr: 2e-7}}}} {
		tb, failed := selftestTable(c.backend, c.rs, false, false)
		if err := tb.Render(&b, table.FormatTable); err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"metal-emu": 1, "cpu": 0}[c.backend]; failed != want {
			t.Errorf("%s: %d failed, want %d", c.backend, failed, want)
		}
	}
	golden(t, "selftest-witness", b.String())
}
