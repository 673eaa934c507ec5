//go:build linux

package cuda

import (
	"cmp"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/host"
)

// TestCompileKernels compiles kernels/cuda for sm_90 with NVRTC alone: it
// needs no GPU, only libnvrtc (LD_LIBRARY_PATH can point at one).
func TestCompileKernels(t *testing.T) {
	a := &api{}
	dirs := searchDirs(nil)
	if err := a.loadNVRTC(dirs, strings.Join(dirs, ", ")); err != nil {
		t.Skip(err)
	}
	if err := a.checkNVRTC(); err != nil {
		t.Skip(err)
	}
	_, files, err := source()
	if err != nil {
		t.Fatal(err)
	}
	if files[0] != "common.cu" {
		t.Fatalf("common.cu must come first, got %v", files)
	}
	var notes []string
	o := Options{CacheDir: t.TempDir(), Notice: func(m string) { notes = append(notes, m) }}
	before := procStatusBytes(t, "VmRSS")
	host.ResetPeakRSS()
	start := time.Now()
	cubins, compiled, err := a.compileCached(o, 90, "test")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	// What the compile allocated is handed back once it is done (docs/cuda.md,
	// "Setup"): it kept about all of it, 2 GiB on 16 CPUs.
	peak, after := procStatusBytes(t, "VmHWM"), procStatusBytes(t, "VmRSS")
	t.Logf("resident set: %d MiB before the compile, %d MiB at its peak, %d MiB after", before>>20, peak>>20, after>>20)
	if took, kept := peak-before, after-before; took < 256<<20 {
		t.Logf("the compile took %d MiB: too little to tell what it keeps", took>>20)
	} else if kept > took/2 {
		t.Errorf("the compile keeps %d MiB of the %d MiB it took resident", kept>>20, took>>20)
	}
	if compiled != len(cubins) {
		t.Errorf("%d of %d programs compiled into an empty cache", compiled, len(cubins))
	}
	size := 0
	for _, c := range cubins {
		size += len(c)
	}
	t.Logf("NVRTC %s (%s): %d files in %d programs, %d cubin bytes, compiled in %v on %d CPUs",
		a.nvrtcVersionString(), a.nvrtcPath, len(files), len(cubins), size, took.Round(time.Millisecond), runtime.NumCPU())
	// The longest programs first: the first run waits for the longest.
	units := slices.Collect(maps.Keys(a.compileTimes))
	slices.SortFunc(units, func(x, y string) int { return cmp.Compare(a.compileTimes[y], a.compileTimes[x]) })
	for _, u := range units {
		t.Logf("%-16s %v", u, a.compileTimes[u].Round(100*time.Millisecond))
	}
	for _, n := range kernelNames() {
		in := 0
		for _, c := range cubins {
			if strings.Contains(string(c), "\x00"+n+"\x00") || strings.Contains(string(c), "."+n+"\x00") {
				in++
			}
		}
		if in != 1 {
			t.Errorf("kernel %s is in %d of the cubins, want 1", n, in)
		}
	}
	if _, again, err := a.compileCached(o, 90, "test"); err != nil || again != 0 {
		t.Errorf("second compile: %d programs compiled again (%v), want all from the cache", again, err)
	}
	// One notice before compiling, none when the cache serves.
	if len(notes) != 1 || !strings.Contains(notes[0], "compiling") {
		t.Errorf("notices %q: want one, before the compile", notes)
	}
}

// procStatusBytes reads a size field of /proc/self/status.
func procStatusBytes(t *testing.T, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n << 10
		}
	}
	t.Fatalf("/proc/self/status has no %s", field)
	return 0
}

// Without a driver the constructor says so and where it looked.
func TestNoDriverError(t *testing.T) {
	_, err := loadAPI(false, nil)
	if err == nil {
		t.Skip("a CUDA driver is installed here")
	}
	if !strings.HasPrefix(err.Error(), "no CUDA driver: libcuda.so.1 not found (searched") {
		t.Fatalf("error %q does not say what was missing and where it looked", err)
	}
	if _, err := New(Options{}); err == nil || !strings.HasPrefix(err.Error(), "no CUDA driver") {
		t.Fatalf("New: %v", err)
	}
}

// Every kernel the backend launches is defined by the sources, as
// kernels/cuda's TestClangSyntax sees them: the names (many made by
// macros) are looked up in the preprocessed translation unit, so a launch
// of a kernel no source defines fails here, on machines with no GPU or
// NVRTC.
func TestKernelNamesDefined(t *testing.T) {
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skip("clang++-19 not found (make clang installs it)")
	}
	src, _, err := source()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kernels.cu")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	shim := "../../kernels/cuda/testdata"
	out, err := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib",
		"-E", "-P", "-I"+shim+"/include", "-include", shim+"/nvrtc.h", path).Output()
	if err != nil {
		t.Fatalf("%s -E: %v", clang, err)
	}
	// The kernels' declarations: a name stands right before its
	// parameter list ("... void attributes name(").
	var decls strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `extern "C"`) {
			decls.WriteString(line)
			decls.WriteString("\n")
		}
	}
	if decls.Len() == 0 {
		t.Fatal("no extern \"C\" kernels found in the preprocessed sources")
	}
	defined := func(n string) bool {
		return strings.Contains(decls.String(), " "+n+"(") || strings.Contains(decls.String(), ")"+n+"(")
	}
	for _, n := range kernelNames() {
		if !defined(n) {
			t.Errorf("the backend launches %s, which no kernel source defines", n)
		}
	}
}

func TestNVRTCTooOld(t *testing.T) {
	for _, c := range []struct {
		maj, min int32
		old      bool
	}{{11, 8, true}, {12, 0, true}, {12, 1, false}, {12, 9, false}, {13, 0, false}} {
		if got := nvrtcTooOld(c.maj, c.min); got != c.old {
			t.Errorf("NVRTC %d.%d: too old %v, want %v", c.maj, c.min, got, c.old)
		}
	}
}
