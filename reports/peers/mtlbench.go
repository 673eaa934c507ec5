package peers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// MtlbenchFormat is the format tag of mtlbench's own peer-run JSON, which
// tools/peers/hf_decode.py writes: another engine's figures already keyed
// as a suite keys its cases.
const MtlbenchFormat = "mtlbench-peer-run/1"

type peerRun struct {
	Format      string `json:"format"`
	Kind        string `json:"kind"` // "peer", as tools/peers/hf_decode.py writes it
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version"`
	SuiteName   string `json:"suite_name"`
	Backend     string `json:"backend"`
	TimingMode  string `json:"timing_mode"`
	StartedAt   string `json:"started_at"`
	EndedAt     string `json:"ended_at"`
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
	// An export (one run a line, then its closing line) is another
	// command's: said so, not as JSON that goes on after its first value.
	var head struct {
		Format string `json:"format"`
	}
	if json.NewDecoder(bytes.NewReader(data)).Decode(&head) == nil && strings.HasPrefix(head.Format, "mtlbench-run/") {
		return nil, fmt.Errorf("format %q is an mtlbench export, not a peer run: `mtlbench import` reads it", head.Format)
	}
	var p peerRun
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("not a peer run: %w", jsonerr.Explain(err, data)) // the file's keys, not Go's types
	}
	if p.Format != MtlbenchFormat {
		return nil, fmt.Errorf("format %q, want %q", p.Format, MtlbenchFormat)
	}
	// A field is added only with a later format, refused above, so a key
	// this one lacks is a mistake (a misspelt "vlaue" would be dropped), as
	// import refuses in an export line (docs/data.md).
	if err := jsonerr.Unknown(data, &p); err != nil {
		return nil, fmt.Errorf("%v: a peer run of format %q has no such field", err, p.Format)
	}
	// So is a key one object gives twice, whose last value would be taken
	// without a word (a sample's), as import refuses it in an export line.
	if err := jsonerr.Once(data); err != nil {
		return nil, fmt.Errorf("%v: a peer run gives each key once", err)
	}
	if p.Kind != "" && p.Kind != "peer" {
		return nil, fmt.Errorf("kind %q: a peer run is of kind \"peer\"", p.Kind)
	}
	names := make([]string, len(p.Cases))
	for i, c := range p.Cases {
		names[i] = c.Name
	}
	// a sample with no value read as 0, a figure never measured
	if err := results.UnsetSample(data, names); err != nil {
		return nil, err
	}
	m := p.Machine
	// A file that names no machine ran on the one importing it.
	run := &Run{Tool: p.Tool, ToolVersion: p.ToolVersion, SuiteName: p.SuiteName, Backend: p.Backend, TimingMode: p.TimingMode,
		HasMachine: m.Hostname != "" || m.CPUModel != "" || m.GPUName != "",
		Machine: results.Machine{Hostname: m.Hostname, OS: m.OS, Arch: m.Arch, CPUModel: m.CPUModel,
			CPUCores: m.CPUCores, MemoryBytes: m.MemoryBytes, GPUName: m.GPUName, GPUMemoryBytes: m.GPUMemoryBytes,
			Driver: m.Driver, Extra: m.Extra}}
	if t, err := time.Parse(time.RFC3339, p.StartedAt); err == nil {
		run.StartedAt = t
	} else if p.StartedAt != "" {
		run.Warnings = append(run.Warnings, fmt.Sprintf("started_at %q is not an RFC 3339 time: the run is dated by the file's modification time (from standard input, by the import)", p.StartedAt))
	}
	if t, err := time.Parse(time.RFC3339, p.EndedAt); err == nil && !run.StartedAt.IsZero() && !t.Before(run.StartedAt) {
		run.EndedAt = t
	} else if p.EndedAt != "" {
		run.Warnings = append(run.Warnings, fmt.Sprintf("ended_at %q is not an RFC 3339 time at or after started_at: the run is recorded as ending when it started", p.EndedAt))
	}
	for i, c := range p.Cases {
		if err := keyMatchesParams(c.Key, c.Params); err != nil {
			return nil, fmt.Errorf("case %d (%s): %w", i+1, c.Key, err)
		}
	}
	// Keyed as a run of the suite it mirrors keys its cases now, by the
	// rule compare reads stored keys by (suites.RunKeys): a value at its
	// default written in a key (batch=1) is left out, as the other formats'
	// keys (benchKey) and mtlbench's own leave it.
	keys := make([]string, len(p.Cases))
	params := make([]map[string]string, len(p.Cases))
	for i, c := range p.Cases {
		keys[i], params[i] = c.Key, c.Params
	}
	keys = suites.RunKeys(keys, params)
	for i, c := range p.Cases {
		run.Cases = append(run.Cases, Case{Key: keys[i], Name: c.Name, Kind: c.Kind, Params: c.Params,
			LayersRun: c.LayersRun, LayersTotal: c.LayersTotal, Samples: c.Samples})
	}
	return []*Run{run}, nil
}

// keyMatchesParams refuses a case whose key says another value than its
// params: compare pairs cases by key, so its figures would pair with
// another case's.
func keyMatchesParams(key string, params map[string]string) error {
	parts := strings.Split(key, "/")
	if len(parts) < 2 {
		return fmt.Errorf("key %q is not kind/group/name=value/...", key)
	}
	for _, seg := range parts[2:] {
		k, v, ok := strings.Cut(seg, "=")
		if !ok {
			return fmt.Errorf("key segment %q is not name=value", seg)
		}
		if u, err := url.PathUnescape(v); err == nil {
			v = u
		}
		if p, given := params[k]; given && p != v {
			return fmt.Errorf("the key says %s=%s, the params %s=%s", k, v, k, p)
		}
	}
	return nil
}
