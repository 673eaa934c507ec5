package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestClangSyntax checks the kernels as NVRTC compiles them (Source, one
// translation unit) with clang's CUDA front end, so a kernel that would not
// compile fails here, on machines with no GPU. testdata/nvrtc.h declares
// what NVRTC predefines; it is written for clang 19 (make clang).
func TestClangSyntax(t *testing.T) {
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skip("clang++-19 not found (make clang installs it)")
	}
	src, names, err := Source()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 || names[0] != "common.cu" {
		t.Fatalf("kernel files %v: want common.cu first", names)
	}
	path := filepath.Join(t.TempDir(), "kernels.cu")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch=sm_90", "-nocudainc", "-nocudalib",
		"-fsyntax-only", "-ferror-limit=20", "-Wno-unknown-cuda-version", "-Wno-cuda-compat", "-Itestdata/include", "-include", "testdata/nvrtc.h",
		path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", clang, err, clip(string(out), 6000))
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[…]"
}
