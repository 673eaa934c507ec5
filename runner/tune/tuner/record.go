package tuner

import (
	"os"
	"runtime"
	"strconv"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/suites"
)

// record stores a bucket's candidates as cases of the tune run, all or
// none: timed ones with every sample, disqualified ones failed with their
// error, pruned and unvisited ones skipped with the reason.
func record(rec *results.Recorder, r *Result) error {
	k := r.Bucket.Kernel
	recs := make([]results.CaseRecord, len(r.Candidates))
	seen := map[string]int{}
	// The witness's figures are the GPU's it read them against: a case
	// names it, in its key too, so compare pairs the same GPU's figures
	// only, as a run's kernel cases do.
	gpu := ""
	for _, c := range r.Candidates {
		if c.Witness != nil {
			gpu = c.Witness.GPU
			break
		}
	}
	for i, c := range r.Candidates {
		// tune.status, tune.role, tune.max_abs_err and tune.iters are what
		// the run found, not settings: compare does not note them as
		// differing parameters (compare.FoundParams).
		params := map[string]string{suites.ParamOp: string(k.Op), "dtype": r.Bucket.DType, "config": k.String(c.Config),
			"tune.status": c.Status, "tune.role": role(c)}
		if r.Bucket.Label != "" {
			params["bucket"] = r.Bucket.Label
		}
		if gpu != "" {
			params[suites.ParamWitnessGPU] = gpu
		}
		if r.Emulated {
			params["tune.emulated"] = "true"
		}
		for d, v := range r.Bucket.Shape {
			params[string(d)] = strconv.Itoa(v)
		}
		for p, v := range c.Config {
			params["tune."+p] = v
		}
		if c.Status == StatusTimed || c.Status == StatusDisqualified {
			params["tune.max_abs_err"] = strconv.FormatFloat(c.MaxErr, 'g', 3, 64)
		}
		if c.Iters > 0 {
			params["tune.iters"] = strconv.Itoa(c.Iters)
		}
		// The key leaves the outcome out, so the same candidate matches
		// across tune runs.
		key := "tune/" + string(k.Op) + "/" + r.Bucket.DType + "/" + r.Bucket.Shape.Key() + "/" + c.Config.Key()
		if gpu != "" {
			key += "/" + suites.ParamWitnessGPU + "=" + gpu
		}
		if n := seen[key]; n > 0 {
			key += "#" + strconv.Itoa(n)
		}
		seen[key]++
		recs[i].Case = results.Case{Key: key, Name: r.Bucket.Describe() + " " + k.String(c.Config), Kind: results.CaseKernel, Params: params}
		switch {
		case c.Status == StatusTimed && len(c.Samples)+len(c.Confirm) > 0:
			var ss []results.Sample
			for rep, v := range c.Samples {
				ss = append(ss, results.Sample{Rep: rep, Metric: "us_per_call", Value: v, Unit: "us"})
			}
			for rep, v := range c.Confirm {
				ss = append(ss, results.Sample{Rep: rep, Metric: "confirm_us_per_call", Value: v, Unit: "us"})
			}
			var ops []results.OperandTraffic
			if c.Witness != nil { // exact and repeatable: one count
				for _, x := range c.Witness.Samples() {
					ss = append(ss, results.Sample{Metric: x.Metric, Value: x.Value, Unit: x.Unit})
				}
				ops = c.Witness.OperandTraffic(0)
			}
			recs[i].Case.Status, recs[i].Samples, recs[i].Operands = results.CaseDone, ss, ops
		case c.Status == StatusDisqualified:
			recs[i].Case.Status, recs[i].Case.Error = results.CaseFailed, c.Reason
		default:
			reason := c.Reason
			if reason == "" && r.Err != nil {
				reason = "bucket not tuned: " + r.Err.Error()
			}
			recs[i].Case.Status, recs[i].Case.Error = results.CaseSkipped, reason
		}
	}
	if err := rec.AddFinishedCases(recs); err != nil {
		return err
	}
	for i, c := range r.Candidates {
		c.caseID = recs[i].Case.ID
	}
	return nil
}

func role(c *Candidate) string {
	switch {
	case c.Winner && c.Default:
		return "default (kept)"
	case c.Winner:
		return "winner"
	case c.Default:
		return "default"
	case len(c.Confirm) > 0:
		return "finalist"
	}
	return "candidate"
}

// machineOf is the machine's stable facts. The backend's notes go with the
// run (Run.BackendNotes): a machine row keeps its first run's fields.
func machineOf(info bridge.DeviceInfo) results.Machine {
	host, _ := os.Hostname()
	m := results.Machine{Hostname: host, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUModel: info.Name,
		CPUCores: runtime.NumCPU(), MemoryBytes: info.MemoryBytes}
	if info.Backend != "cpu" {
		m.GPUName = info.Name
	}
	return m
}

// witnessGPU is the label of the Apple GPU the cost witness reads its
// counts against, for a name as given ("" is the default): "Apple M4 Max
// 32-core" for that bin, so the record names the bin its figures are of.
func witnessGPU(name string) string {
	if name == "" {
		name = kbench.DefaultAppleGPU
	}
	if g, ok := applegpu.Lookup(name); ok {
		return g.Label()
	}
	return name
}
