package peers

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mtlbench/mtlbench/results"
)

// MtlbenchFormat is the format tag of mtlbench's own peer-run JSON, which
// tools/peers/hf_decode.py writes: another engine's figures already keyed
// as a suite keys its cases.
const MtlbenchFormat = "mtlbench-peer-run/1"

type peerRun struct {
	Format      string `json:"format"`
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version"`
	SuiteName   string `json:"suite_name"`
	Backend     string `json:"backend"`
	TimingMode  string `json:"timing_mode"`
	StartedAt   string `json:"started_at"`
	Machine     struct {
		Hostname       string            `json:"hostname"`
		OS             string            `json:"os"`
		Arch           string            `json:"arch"`
		CPUModel       string            `json:"cpu_model"`
		CPUCores       int               `json:"cpu_cores"`
		MemoryBytes    int64             `json:"memory_bytes"`
		GPUName        string            `json:"gpu_name"`
		GPUMemoryBytes int64             `json:"gpu_memory_bytes"`
		Driver         string            `json:"driver"`
		Extra          map[string]string `json:"extra"`
	} `json:"machine"`
	Cases []struct {
		Key         string            `json:"key"`
		Name        string            `json:"name"`
		Kind        string            `json:"kind"`
		Params      map[string]string `json:"params"`
		LayersRun   int               `json:"layers_run"`
		LayersTotal int               `json:"layers_total"`
		Samples     []results.Sample  `json:"samples"`
	} `json:"cases"`
}

func parseMtlbench(data []byte) ([]*Run, error) {
	var p peerRun
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("not a peer run: %v", err)
	}
	if p.Format != MtlbenchFormat {
		return nil, fmt.Errorf("format %q, want %q", p.Format, MtlbenchFormat)
	}
	m := p.Machine
	run := &Run{Tool: p.Tool, ToolVersion: p.ToolVersion, SuiteName: p.SuiteName, Backend: p.Backend, TimingMode: p.TimingMode,
		HasMachine: true, Machine: results.Machine{Hostname: m.Hostname, OS: m.OS, Arch: m.Arch, CPUModel: m.CPUModel,
			CPUCores: m.CPUCores, MemoryBytes: m.MemoryBytes, GPUName: m.GPUName, GPUMemoryBytes: m.GPUMemoryBytes,
			Driver: m.Driver, Extra: m.Extra}}
	if t, err := time.Parse(time.RFC3339, p.StartedAt); err == nil {
		run.StartedAt = t
	}
	for _, c := range p.Cases {
		run.Cases = append(run.Cases, Case{Key: c.Key, Name: c.Name, Kind: c.Kind, Params: c.Params,
			LayersRun: c.LayersRun, LayersTotal: c.LayersTotal, Samples: c.Samples})
	}
	return []*Run{run}, nil
}
