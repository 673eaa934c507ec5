package main

import (
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// ours runs mtlbench's kernels as a kernel case does (runner/kbench on the
// metal-emu backend): the case's own data, check and cost witness.
type ours struct {
	be  bridge.Backend
	gpu string
}

func openOurs(c *config) (*ours, error) {
	be, err := backends.Open("metal-emu", backends.Options{Emu: emu.Options{}})
	if err != nil {
		return nil, fmt.Errorf("metal-emu: %w", err)
	}
	return &ours{be: be, gpu: c.gpu}, nil
}

func (o *ours) Close() {
	if c, ok := o.be.(interface{ Close() error }); ok {
		c.Close()
	}
}

func (o *ours) run(c opCase) (row, error) {
	b, err := kbench.Prepare(o.be, c.args)
	if err != nil {
		return row{}, fmt.Errorf("mtlbench %s %s: %w", c.name, c.shape, err)
	}
	defer b.Close()
	if err := b.SetAppleGPU(o.gpu); err != nil {
		return row{}, err
	}
	maxErr, err := b.Check()
	if err != nil {
		return row{}, fmt.Errorf("mtlbench %s %s: %w", c.name, c.shape, err)
	}
	w, ok, err := b.Witness()
	if err != nil {
		return row{}, fmt.Errorf("mtlbench %s %s: %w", c.name, c.shape, err)
	}
	if !ok {
		return row{}, fmt.Errorf("mtlbench %s %s: the backend counted no cost witness", c.name, c.shape)
	}
	names := make([]string, len(w.Kernels))
	for i, k := range w.Kernels {
		names[i] = k.Kernel
	}
	return row{Op: c.name, Shape: c.shape, Impl: "mtlbench", Kernels: strings.Join(names, "+"), MaxErr: maxErr,
		Ideal: w.Ideal, Stats: w.StepStats, SimdgroupsPerCore: w.SimdgroupsPerCore}, nil
}
