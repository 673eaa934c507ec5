package bench

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/internal/metrics"
	"github.com/mtlbench/mtlbench/results"
)

// On the Metal emulator a model case records the step witness: the bytes
// its decode steps' kernels moved, the ideal bytes over them, and the rate
// those bytes allow at the bandwidth of the case's witness_gpu (the M3
// Ultra's by default); overlapped and synchronous steps (pendingStep.Wait
// and EndStep) count the same kernels. The CPU counts nothing, so its cases
// record none of it (and it refuses witness_gpu: TestRunRefusesWitnessGPUElsewhere).
func TestStepWitness(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	suite := `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: %BACKEND%
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 2, prompt_len: 8, gen_len: 4, steps: overlapped }
  - name: s
    params: { batch: 2, prompt_len: 8, gen_len: 4, steps: synchronous%WITNESS% }
`
	var caseOps [][]results.OperandTraffic // the last backend's
	got := func(backend string) []map[string]float64 {
		db := openDB(t)
		witness := ""
		if backend == "metal-emu" {
			witness = ", witness_gpu: M2 Pro"
		}
		sum, err := Run(context.Background(), loadSuite(t, suite, "%BACKEND%", backend, "%WITNESS%", witness), Options{DB: db, BandwidthBuffer: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]float64
		caseOps = nil
		for _, c := range sum.Cases {
			out = append(out, caseMetrics(t, db, c.ID))
			ops, err := db.OperandTraffic(c.ID)
			if err != nil {
				t.Fatal(err)
			}
			caseOps = append(caseOps, ops)
		}
		if g := sum.Cases[1].Params["witness_gpu"]; g != "M2 Pro" && witness != "" {
			t.Errorf("case s recorded witness_gpu %q", g)
		}
		return out
	}
	gbs := []float64{819, 200} // the M3 Ultra's, the M2 Pro's
	for _, m := range got("cpu") {
		for _, k := range []string{"witness_bytes_per_step", "witness_traffic_efficiency", "witness_tok_s",
			"witness_footprint_bytes_per_step", "witness_footprint_efficiency", "encode_ms", "encode_frac", "device_ms", "device_frac"} {
			if _, ok := m[k]; ok {
				t.Errorf("the CPU recorded %s", k)
			}
		}
	}
	for i, ops := range caseOps {
		if len(ops) != 0 {
			t.Errorf("the CPU's case %d stored %d kernel arguments", i, len(ops))
		}
	}
	cases := got("metal-emu")
	for i, m := range cases {
		// A decode step's kernel arguments add up to its counted bytes
		// (each a mean over the steps, rounded down).
		var moved, distinct float64
		for _, o := range caseOps[i] {
			moved += float64(o.Read + o.Written)
			distinct += float64(o.DistinctRead + o.DistinctWritten)
		}
		if n := float64(2 * len(caseOps[i])); len(caseOps[i]) == 0 || math.Abs(moved-m["witness_bytes_per_step"]) > n ||
			math.Abs(distinct-m["witness_footprint_bytes_per_step"]) > n {
			t.Errorf("case %d: %d kernel arguments move %.0f bytes a step (%.0f distinct); the witness counted %.0f (%.0f)", i,
				len(caseOps[i]), moved, distinct, m["witness_bytes_per_step"], m["witness_footprint_bytes_per_step"])
		}
		// The host's encoding of a step, which the GPU runs apart from it.
		if enc, f := m["encode_ms"], m["encode_frac"]; enc <= 0 || f <= 0 || math.Abs(f-enc/m["step_ms"]) > 1e-9 {
			t.Errorf("case %d: encode_ms %g, encode_frac %g against step_ms %g", i, enc, f, m["step_ms"])
		}
		// The device's span of a step: the emulator's command buffers, its
		// share of the step at most 1 (busyFrac).
		if dev, f := m["device_ms"], m["device_frac"]; dev <= 0 || f <= 0 || math.Abs(f-min(1, dev/m["step_ms"])) > 1e-9 {
			t.Errorf("case %d: device_ms %g, device_frac %g against step_ms %g", i, dev, f, m["step_ms"])
		}
		counted, ideal := m["witness_bytes_per_step"], m["bytes_per_step"]
		eff := m["witness_traffic_efficiency"]
		t.Logf("case %d: %.0f bytes counted a step, %.0f ideal, efficiency %.3f, %.1f tok/s at %g GB/s", i, counted, ideal, eff,
			m["witness_tok_s"], gbs[i])
		if counted < ideal/2 || eff <= 0.3 || eff > 1.05 {
			t.Errorf("case %d: %.0f bytes counted against %.0f ideal (efficiency %.3f)", i, counted, ideal, eff)
		}
		if math.Abs(eff-ideal/counted) > 1e-9 {
			t.Errorf("case %d: efficiency %.6f, want ideal/counted %.6f", i, eff, ideal/counted)
		}
		// The footprint counts each dispatch's bytes once: at most what was
		// counted, near the ideal, and the ceiling's bytes.
		fp, fpEff := m["witness_footprint_bytes_per_step"], m["witness_footprint_efficiency"]
		t.Logf("case %d: footprint %.0f bytes a step, efficiency %.3f", i, fp, fpEff)
		if fp <= 0 || fp > counted || fpEff < eff || fpEff > 1.05 {
			t.Errorf("case %d: footprint %.0f bytes (efficiency %.3f) against %.0f counted (%.3f)", i, fp, fpEff, counted, eff)
		}
		if math.Abs(fpEff-ideal/fp) > 1e-9 {
			t.Errorf("case %d: footprint efficiency %.6f, want ideal/footprint %.6f", i, fpEff, ideal/fp)
		}
		if want := 2 * gbs[i] * 1e9 / fp; math.Abs(m["witness_tok_s"]-want) > 1e-6*want {
			t.Errorf("case %d: witness_tok_s %.3f, want two tokens a step of the footprint at %g GB/s: %.3f", i, m["witness_tok_s"], gbs[i], want)
		}
	}
	if len(cases) == 2 {
		for _, k := range []string{"witness_bytes_per_step", "witness_footprint_bytes_per_step"} {
			a, b := cases[0][k], cases[1][k]
			if math.Abs(a-b) > 0.01*b {
				t.Errorf("%s: overlapped steps %.0f, synchronous %.0f", k, a, b)
			}
		}
	}
}

// In profile mode on the emulator each op's timings carry what the witness
// counted it moving, and the ops add up to the step's witness.
func TestOpWitness(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	suite := `name: x
model: { preset: qwen3-moe-mini, layers: 2 }
backend: metal-emu
timing: profile
repetitions: 1
warmup: 0
cases:
  - name: c
    params: { batch: 1, prompt_len: 8, gen_len: 4 }
`
	db := openDB(t)
	sum, err := Run(context.Background(), loadSuite(t, suite), Options{DB: db, BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := sum.Cases[0]
	ts, err := db.OpTimings(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	var counted, footprint, critical int64
	for _, x := range ts {
		if x.Footprint > x.Bytes {
			t.Errorf("%s layer %d: footprint %d above the %d bytes counted", x.Op, x.Layer, x.Footprint, x.Bytes)
		}
		counted += x.Bytes
		footprint += x.Footprint
		critical += x.CriticalLoads
	}
	m := caseMetrics(t, db, c.ID)
	t.Logf("%d op timings: %d bytes counted, %d footprint; the step's witness %.0f and %.0f",
		len(ts), counted, footprint, m["witness_bytes_per_step"], m["witness_footprint_bytes_per_step"])
	if counted <= 0 || footprint <= 0 || critical <= 0 {
		t.Fatalf("no witness bytes in the op timings: %+v", ts)
	}
	for _, c := range []struct {
		name     string
		ops, all float64
	}{{"counted", float64(counted), m["witness_bytes_per_step"]}, {"footprint", float64(footprint), m["witness_footprint_bytes_per_step"]},
		{"critical loads", float64(critical), m["witness_critical_loads"]}} {
		// Each op's bytes are a mean over the profiled steps, rounded.
		if math.Abs(c.ops-c.all) > float64(len(ts)) {
			t.Errorf("%s: the ops add up to %.0f bytes a step, the step's witness %.0f", c.name, c.ops, c.all)
		}
	}
}

// caseMetrics is a case's samples by metric (the last repetition's value).
func caseMetrics(t *testing.T, db *results.DB, caseID int64) map[string]float64 {
	t.Helper()
	samples, err := db.Samples(caseID)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for _, s := range samples {
		if !slices.Contains(metrics.Recorded, s.Metric) {
			t.Errorf("case %d records %s, which metrics.Recorded does not list", caseID, s.Metric)
		}
		m[s.Metric] = s.Value
	}
	return m
}

// A kernel case on the Metal emulator records the witness's traffic and
// footprint of one call, both against the op's ideal bytes: the two
// efficiencies times their bytes give the same ideal, and the distinct
// bytes are at most the counted ones.
func TestKernelWitness(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	suite := `name: x
backend: metal-emu
repetitions: 1
warmup: 0
cases:
  - name: gemv
    kind: kernel
    op: matmul
    params: { m: 1, n: 256, k: 512, dtype: bf16 }
    matrix:
      witness_gpu: [M3 Ultra, M1 7-core]
`
	db := openDB(t)
	sum, err := Run(context.Background(), loadSuite(t, suite), Options{DB: db, BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := caseMetrics(t, db, sum.Cases[0].ID)
	counted, fp := m["bytes_counted"], m["bytes_footprint"]
	ideal, fpIdeal := m["traffic_efficiency"]*counted, m["footprint_efficiency"]*fp
	t.Logf("%.0f bytes counted, %.0f distinct, %.0f ideal", counted, fp, ideal)
	if fp <= 0 || fp > counted || math.Abs(ideal-fpIdeal) > 1e-6*ideal || ideal < 256*512*2 {
		t.Errorf("counted %.0f bytes (efficiency %.4f), footprint %.0f (efficiency %.4f)", counted, m["traffic_efficiency"], fp,
			m["footprint_efficiency"])
	}
	// Its arguments as the kernel names them: the weights read once, the
	// activations as often as the launch reads them, the output written;
	// their bytes add up to what was counted.
	ops, err := db.OperandTraffic(sum.Cases[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]results.OperandTraffic{}
	var moved, distinct int64
	for _, o := range ops {
		t.Logf("%s %s: read %d (%d distinct), written %d (%d distinct)", o.Kernel, o.Operand, o.Read, o.DistinctRead, o.Written, o.DistinctWritten)
		byName[o.Operand] = o
		moved += o.Read + o.Written
		distinct += o.DistinctRead + o.DistinctWritten
	}
	if w, x := byName["w"], byName["x"]; w.DistinctRead != 256*512*2 || w.Read != w.DistinctRead || x.DistinctRead != 512*4 || x.Read < x.DistinctRead {
		t.Errorf("operands %+v: want w read once (%d bytes) and x's %d bytes read at least once", ops, 256*512*2, 512*4)
	}
	if float64(moved) != counted || float64(distinct) != fp {
		t.Errorf("operands moved %d bytes (%d distinct), the witness counted %.0f (%.0f)", moved, distinct, counted, fp)
	}
	// The same launch over the cores of each case's witness_gpu.
	m1 := caseMetrics(t, db, sum.Cases[1].ID)
	if a, b := m["simdgroups_per_core"], m1["simdgroups_per_core"]; a <= 0 || math.Abs(b/a-80.0/7) > 1e-9 {
		t.Errorf("simdgroups per core %g on an M3 Ultra (80 cores), %g on an M1 (7): want a ratio of 80/7", a, b)
	}
}
