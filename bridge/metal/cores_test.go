package metal_test

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
)

// namedGPU is a NullDevice that says it is an Apple GPU of some cores.
type namedGPU struct {
	metal.NullDevice
	name  string
	cores int
}

func (d namedGPU) Name() string  { return d.name }
func (d namedGPU) GPUCores() int { return d.cores }

// TestInfoCores reports the core count a device knows, and records the bin
// of applegpu's table its name and cores pick in the notes: the chip's
// default bin, said so, where the count is unknown or names no bin.
func TestInfoCores(t *testing.T) {
	for _, c := range []struct {
		name  string
		cores int
		notes string // the notes' end
	}{
		{"Apple M4 Max", 32, "; GPU cores 32 (Apple M4 Max 32-core, 410 GB/s)"},
		{"Apple M4 Max", 40, "; GPU cores 40 (Apple M4 Max, 546 GB/s)"},
		{"Apple M4 Max", 0, "; GPU cores unknown (Apple M4 Max, 546 GB/s; GPU core count unknown: figures of the 40-core bin)"},
		{"Apple M4 Max", 36, "; GPU cores 36 (Apple M4 Max, 546 GB/s; no 36-core bin of the M4 Max in the table: figures of the 40-core bin)"},
		{"Apple M1", 7, "; GPU cores 7 (Apple M1 7-core, 68.25 GB/s)"},
		{"Apple M9 Max", 48, "; GPU cores 48"},
		{"msl-emu (Apple GPU emulated on the CPU)", 8, "; GPU cores 8"},
		{"null", 0, "; profile timing: " + metal.TimingMode},
	} {
		be, err := metal.New(namedGPU{name: c.name, cores: c.cores}, metal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		info := be.Info()
		if info.Cores != c.cores || len(info.Notes) < len(c.notes) || info.Notes[len(info.Notes)-len(c.notes):] != c.notes {
			t.Errorf("%s with %d cores: Info cores %d, notes %q; want %d, notes ending %q", c.name, c.cores, info.Cores, info.Notes, c.cores, c.notes)
		}
		be.Close()
	}
}
