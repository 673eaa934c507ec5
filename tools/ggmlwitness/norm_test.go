package main

import (
	"strings"
	"testing"
)

// The RMSNorm row of docs/metal-kernels.md ("Against llama.cpp's
// kernels"), mtlbench's half: one row of 4096 read as float4s (16 B/load,
// as llama.cpp's kernel_rms_norm_mul_f32_4), x read once (traffic
// efficiency 1.000), 1024 threads of one float4 each, so the busiest
// simdgroup issues 2 loads (x, w) and 32 simdgroups run, 0.4 a core of an
// M3 Ultra.
func TestOursRMSNormRow(t *testing.T) {
	c, o := oursFor(t, "-ops", "rms_norm", "-width", "4096")
	cs := c.cases()
	if len(cs) != 1 {
		t.Fatalf("%d cases, want the one rms_norm", len(cs))
	}
	r, err := o.run(cs[0])
	if err != nil {
		t.Fatal(err)
	}
	var tb strings.Builder
	writeTable(&tb, []row{r}, c.gpu)
	t.Log("\n" + tb.String())
	st := r.Stats
	if r.Kernels != "rms_norm" || st.Bytes() != r.Ideal || st.TrafficEfficiency(r.Ideal) != 1 || st.BytesPerLoad() != 16 ||
		st.CriticalLoads != 2 || st.Simdgroups != 32 {
		t.Errorf("%s %s: kernel %s, %d bytes counted of %d ideal (traffic efficiency %.3f), %.1f B/load, %d critical loads, "+
			"%d simdgroups; want rms_norm, 1.000, 16.0, 2, 32", r.Op, r.Shape, r.Kernels, st.Bytes(), r.Ideal,
			st.TrafficEfficiency(r.Ideal), st.BytesPerLoad(), st.CriticalLoads, st.Simdgroups)
	}
}
