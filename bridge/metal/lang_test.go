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

// compileRecorder is a NullDevice that keeps the options each library was
// compiled with.
type compileRecorder struct {
	metal.NullDevice
	opts *[]mtl.CompileOptions
}

func (d compileRecorder) NewLibrary(files map[string]string, o mtl.CompileOptions) (mtl.Library, error) {
	*d.opts = append(*d.opts, o)
	return d.NullDevice.NewLibrary(files, o)
}

// Options.NoFastMath reaches the device's compile (fastMathEnabled on a
// Mac, -ffp-contract=off on the emulator), and the notes a run records say
// it was off.
func TestNoFastMathReachesTheCompile(t *testing.T) {
	for _, c := range []struct {
		opts      metal.Options
		wantNotes string
	}{
		{metal.Options{}, "MSL 3.2; "},
		{metal.Options{NoFastMath: true}, "MSL 3.2, fast math off; "},
		{metal.Options{LanguageVersion: "3.0", NoFastMath: true}, "MSL 3.0, fast math off; "},
	} {
		var got []mtl.CompileOptions
		be, err := metal.New(compileRecorder{opts: &got}, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].NoFastMath != c.opts.NoFastMath {
			t.Errorf("%+v: compiled with %+v, want NoFastMath %v", c.opts, got, c.opts.NoFastMath)
		}
		if notes := be.Info().Notes; !strings.HasPrefix(notes, c.wantNotes) {
			t.Errorf("%+v: notes %q, want them to start %q", c.opts, notes, c.wantNotes)
		}
		be.Close()
	}
}

// A version before the oldest the kernels are written for is refused
// before any compile, on a Mac and on the emulator alike: the emulator
// would build the kernels there and run under a version no Mac could.
func TestLanguageVersionBeforeTheKernelsRefused(t *testing.T) {
	for _, c := range []struct {
		lang, want string
	}{
		{"2.0", "metal: MSL 2.0: the kernels need MSL 3.0 or newer"},
		{"2.4", "MSL 2.4: the kernels need MSL 3.0 or newer"},
		{"1.2", "MSL 1.2: the kernels need MSL 3.0 or newer"},
		{"3.0", ""},
		{"3.2", ""},
		{"4.0", ""}, // newer than the list: the device's to refuse or take
	} {
		var got []mtl.CompileOptions
		be, err := metal.New(compileRecorder{opts: &got}, metal.Options{LanguageVersion: c.lang})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("MSL %s: %v", c.lang, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("MSL %s: got %v, want %q", c.lang, err, c.want)
		case c.want != "" && len(got) > 0:
			t.Errorf("MSL %s: compiled %d times before it was refused", c.lang, len(got))
		}
		if be != nil {
			be.Close()
		}
	}
}
