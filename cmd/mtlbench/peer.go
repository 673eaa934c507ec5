package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/results"
)

// peerRun is the JSON a peer tool writes (tools/peers/hf_decode.py): another
// engine's figures for the cases of one of our suites, keyed as the suite
// keys them, so compare matches them case by case.
type peerRun struct {
	Format      string `json:"format"`
	Kind        string `json:"kind"`
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

const peerFormat = "mtlbench-peer-run/1"

func peerCommand() *cli.Command {
	return &cli.Command{
		Name:  "peer",
		Usage: "import another engine's figures as a peer run (see tools/peers)",
		Subcommands: []*cli.Command{{
			Name:      "import",
			Usage:     "store a peer run's JSON so compare can put it beside mtlbench's runs",
			ArgsUsage: "FILE.json",
			Flags:     []cli.Flag{dbFlag(), &cli.StringFlag{Name: "tag", Usage: "label for the peer run (default: the tool's name)"}},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fmt.Errorf("peer import needs one JSON file")
				}
				path := c.Args().First()
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				var p peerRun
				if err := json.Unmarshal(data, &p); err != nil {
					return fmt.Errorf("%s: not a peer run: %v", path, err)
				}
				if p.Format != peerFormat {
					return fmt.Errorf("%s: format %q, want %q", path, p.Format, peerFormat)
				}
				if len(p.Cases) == 0 {
					return fmt.Errorf("%s: the peer run has no cases", path)
				}
				db, err := openDB(c)
				if err != nil {
					return err
				}
				defer db.Close()
				tag := c.String("tag")
				if tag == "" {
					tag = p.Tool
				}
				m := p.Machine
				extra := map[string]string{"peer_tool": p.Tool + " " + p.ToolVersion}
				for k, v := range m.Extra {
					extra[k] = v
				}
				run := &results.Run{SuiteName: p.SuiteName, Tag: tag, Backend: p.Backend, TimingMode: p.TimingMode,
					Kind: results.KindPeer, ToolVersion: p.Tool + " " + p.ToolVersion, Notes: "imported from " + path,
					Machine: results.Machine{Hostname: m.Hostname, OS: m.OS, Arch: m.Arch, CPUModel: m.CPUModel, CPUCores: m.CPUCores,
						MemoryBytes: m.MemoryBytes, GPUName: m.GPUName, GPUMemoryBytes: m.GPUMemoryBytes, Driver: m.Driver, Extra: extra}}
				if t, err := time.Parse(time.RFC3339, p.StartedAt); err == nil {
					run.StartedAt = t
				}
				if _, err := db.CreateRun(run); err != nil {
					return err
				}
				var cases []results.Case
				for _, pc := range p.Cases {
					cases = append(cases, results.Case{Key: pc.Key, Name: pc.Name, Kind: pc.Kind, Params: pc.Params})
				}
				if err := db.AddCases(run.ID, cases); err != nil {
					return err
				}
				for i, pc := range p.Cases {
					if err := db.FinishCase(cases[i].ID, pc.Samples, nil, pc.LayersRun, pc.LayersTotal); err != nil {
						return fmt.Errorf("%s: case %s: %w", path, pc.Name, err)
					}
				}
				if err := db.FinishRun(run.ID, results.RunComplete); err != nil {
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "imported %s %s as run %d (tag %s): %d cases\n", p.Tool, p.ToolVersion, run.ID, tag, len(cases))
				return nil
			},
		}},
	}
}
