package tuner

import (
	"context"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// On metal-emu each timed candidate carries what the cost witness counted
// of its own launch (not the first candidate's), read against the chosen
// GPU; the bucket names the candidate moving the fewest bytes among those
// that keep an M1's cores busy, the verdict says so, and the witness's
// samples are stored with each candidate.
func TestEmulatedWitness(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	be, err := metal.New(emu.New(emu.Options{}), metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	b, err := ShapeBucket(be, "matmul", "bf16", tune.Shape{"m": 1, "n": 256, "k": 512}, "test")
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t)
	o := quick(be, db)
	o.Rounds, o.WitnessGPU = 1, "M1"
	rep, err := Run(context.Background(), []Bucket{b}, o)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	if !r.Emulated || r.Fewest == nil {
		t.Fatalf("emulated %v, fewest %v: %s", r.Emulated, r.Fewest, r.Verdict)
	}
	bytes := map[int64]bool{}
	var def *Candidate
	for _, c := range r.Candidates {
		if c.Status != StatusTimed {
			continue
		}
		if c.Witness == nil || c.Witness.GPU != "Apple M1" {
			t.Fatalf("%s: witness %+v, want one read against the Apple M1", b.Kernel.String(c.Config), c.Witness)
		}
		bytes[c.Witness.Bytes()] = true
		if c.Witness.SimdgroupsPerCore >= BusyCore && c.Witness.Bytes() < r.Fewest.Witness.Bytes() {
			t.Errorf("%s moves %d bytes, fewer than the fewest's %d", b.Kernel.String(c.Config), c.Witness.Bytes(), r.Fewest.Witness.Bytes())
		}
		if c.Default {
			def = c
		}
	}
	if r.Fewest.Witness.SimdgroupsPerCore < BusyCore {
		t.Errorf("the fewest bytes' launch has %.1f simdgroups a core, under %d", r.Fewest.Witness.SimdgroupsPerCore, BusyCore)
	}
	if len(bytes) < 2 {
		t.Errorf("every candidate counted the same bytes (%v): the witness was not taken per candidate", bytes)
	}
	if !strings.Contains(r.Verdict, "the cost witness: the default moves") || !strings.Contains(r.Verdict, "a core of the Apple M1") {
		t.Errorf("verdict %q", r.Verdict)
	}
	samples, err := db.Samples(def.caseID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range samples {
		if s.Metric == "traffic_efficiency" {
			found = s.Value == def.Witness.Efficiency
		}
	}
	if !found {
		t.Errorf("the default's stored samples lack its traffic_efficiency %v: %+v", def.Witness.Efficiency, samples)
	}
	// And its arguments, whose bytes add up to the count.
	ops, err := db.OperandTraffic(def.caseID)
	if err != nil {
		t.Fatal(err)
	}
	var moved int64
	for _, o := range ops {
		moved += o.Read + o.Written
	}
	if len(ops) == 0 || moved != def.Witness.Bytes() {
		t.Errorf("the default's stored arguments move %d bytes, its witness counted %d: %+v", moved, def.Witness.Bytes(), ops)
	}
	// Every case names the GPU, in its key too, and so does the run.
	cases, err := db.Cases(rep.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.Params["witness_gpu"] != "Apple M1" || !strings.HasSuffix(c.Key, "/witness_gpu=Apple M1") {
			t.Errorf("case %s: witness_gpu %q", c.Key, c.Params["witness_gpu"])
		}
	}
	run, err := db.GetRun(rep.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Notes, "witness_gpu=Apple M1") {
		t.Errorf("run notes %q do not name the witness GPU", run.Notes)
	}
	t.Logf("%s", r.Verdict)
}

// The verdict names the launch moving the fewest bytes among those keeping
// 2 simdgroups a core busy whenever it is not the default: a default that
// keeps fewer busy is not among them, however few bytes it moves.
func TestWitnessVerdict(t *testing.T) {
	launch := func(name string, bytes int64, perCore float64) *Candidate {
		w := &kbench.Witness{Ideal: 1000, GPU: "Apple M3 Ultra", SimdgroupsPerCore: perCore}
		w.BytesRead, w.FootprintRead = bytes, 1000
		w.Efficiency = w.TrafficEfficiency(w.Ideal)
		return &Candidate{Config: tune.Config{"name": name}, Status: StatusTimed, Witness: w, Default: name == "default"}
	}
	for _, tc := range []struct {
		name        string
		cands       []*Candidate
		fewest      string
		want, never []string
	}{
		{"idle default moving fewer", []*Candidate{launch("default", 1000, 0.8), launch("wide", 1400, 3.2)}, "wide",
			[]string{"; of the launches with 2 or more simdgroups a core, wide moves the fewest"},
			[]string{"the fewest of the launches"}},
		{"busy default moving fewest", []*Candidate{launch("default", 1000, 2.5), launch("wide", 1400, 3.2)}, "default",
			[]string{", the fewest of the launches with 2 or more simdgroups a core"}, []string{"wide"}},
		{"busy launch moving fewer", []*Candidate{launch("default", 1400, 2.5), launch("tile", 1000, 2)}, "tile",
			[]string{"; of the launches with 2 or more simdgroups a core, tile moves the fewest"}, nil},
		{"none busy", []*Candidate{launch("default", 1400, 0.5), launch("tile", 1000, 0.1)}, "tile",
			[]string{"; of all launches (none has 2 simdgroups a core), tile moves the fewest"}, nil},
		{"none busy, default fewest", []*Candidate{launch("default", 1000, 0.5), launch("tile", 1400, 0.1)}, "default",
			[]string{", the fewest of all launches (none has 2 simdgroups a core)"}, []string{"tile"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fewestBytes(tc.cands)
			if f == nil || f.Config["name"] != tc.fewest {
				t.Fatalf("fewest %v, want %s", f, tc.fewest)
			}
			v := witnessVerdict(tc.cands[0], f, f.Config["name"])
			for _, s := range tc.want {
				if !strings.Contains(v, s) {
					t.Errorf("verdict %q lacks %q", v, s)
				}
			}
			for _, s := range tc.never {
				if strings.Contains(v, s) {
					t.Errorf("verdict %q has %q", v, s)
				}
			}
		})
	}
}

// A verdict's figures keep their digits at small shapes, where launches
// differ by a few kilobytes and a core holds a fraction of a simdgroup.
func TestWitnessNoteFigures(t *testing.T) {
	for _, tc := range []struct {
		bytes   int64
		perCore float64
		want    string
	}{
		{9680, 0.3, "9.68 kB (traffic 100%, footprint 100%, 0.3 simdgroups a core of the Apple M3 Ultra)"},
		{12312, 0.025, "12.3 kB (traffic 100%, footprint 100%, 0.025 simdgroups a core of the Apple M3 Ultra)"},
		{999, 0.0125, "999 B (traffic 100%, footprint 100%, 0.013 simdgroups a core of the Apple M3 Ultra)"},
		{999_600, 8, "1.00 MB (traffic 100%, footprint 100%, 8.0 simdgroups a core of the Apple M3 Ultra)"},
		{42_106_880, 16, "42.1 MB (traffic 100%, footprint 100%, 16.0 simdgroups a core of the Apple M3 Ultra)"},
		{299_520, 0, "300 kB (traffic 100%, footprint 100%, 0.0 simdgroups a core of the Apple M3 Ultra)"},
	} {
		w := &kbench.Witness{Ideal: tc.bytes, GPU: "Apple M3 Ultra", SimdgroupsPerCore: tc.perCore}
		w.BytesRead, w.FootprintRead = tc.bytes, tc.bytes
		w.Efficiency = w.TrafficEfficiency(w.Ideal)
		if got := witnessNote(w); got != tc.want {
			t.Errorf("%d bytes, %v a core: %q, want %q", tc.bytes, tc.perCore, got, tc.want)
		}
	}
}
