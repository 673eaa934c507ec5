package metal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// olderOS is an emulated device whose compiler accepts MSL up to max, as an
// older macOS's does.
type olderOS struct {
	mtl.Device
	max string
}

func (d olderOS) NewLibrary(files map[string]string, o mtl.CompileOptions) (mtl.Library, error) {
	if o.LanguageVersion > d.max {
		return nil, errors.New("program_source:1:1: error: unsupported language version")
	}
	return d.Device.NewLibrary(files, o)
}

// Without an explicit version the backend compiles for the newest MSL the
// device accepts, retrying down to 3.0, and says which in its notes (a run
// records them).
func TestLanguageVersionNegotiated(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping: %v", err)
	}
	for _, c := range []struct{ max, want string }{{"3.2", "3.2"}, {"3.1", "3.1"}, {"3.0", "3.0"}} {
		be, err := metal.New(olderOS{emu.New(emu.Options{}), c.max}, metal.Options{})
		if err != nil {
			t.Fatalf("up to MSL %s: %v", c.max, err)
		}
		if notes := be.Info().Notes; !strings.Contains(notes, "MSL "+c.want+";") {
			t.Errorf("up to MSL %s: notes %q, want MSL %s", c.max, notes, c.want)
		}
		be.Close()
	}
	if _, err := metal.New(olderOS{emu.New(emu.Options{}), "2.4"}, metal.Options{}); err == nil ||
		!strings.Contains(err.Error(), "MSL 3.2, 3.1, 3.0: program_source") {
		t.Errorf("no version accepted: %v", err)
	}
}
