package cuda

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Library lookup. The driver (libcuda.so.1) comes with the NVIDIA driver and
// is found by the dynamic loader; NVRTC and cuBLAS come with the CUDA
// toolkit or with Python's nvidia-* wheels (PyTorch installs them), which
// the loader does not know about, so they are searched for in:
//
//  1. Options.Libs (MTLBENCH_CUDA_LIBS; searched first, for every library,
//     the driver included);
//  2. LD_LIBRARY_PATH;
//  3. CUDA_HOME / CUDA_PATH, /usr/local/cuda, /usr/local/cuda-*, /opt/cuda
//     (lib64 and targets/<arch>-linux/lib);
//  4. site-packages/nvidia/*/lib of the Python environments on the machine
//     (VIRTUAL_ENV, CONDA_PREFIX, /opt/*/.venv, /usr/local/lib, ~/.local);
//  5. the system library directories, then the loader's own search.

// Library names, newest first: the first one found wins.
var (
	driverNames  = []string{"libcuda.so.1", "libcuda.so"}
	nvrtcNames   = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}
	cublasNames  = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}
	cublasLtName = map[string]string{"libcublas.so.13": "libcublasLt.so.13", "libcublas.so.12": "libcublasLt.so.12",
		"libcublas.so.11": "libcublasLt.so.11", "libcublas.so": "libcublasLt.so"}
)

// searchDirs lists the directories to look in, libs first, in order,
// without duplicates; only existing directories are kept.
func searchDirs(libs []string) []string {
	var dirs []string
	add := func(ds ...string) {
		for _, d := range ds {
			if d != "" {
				dirs = append(dirs, filepath.Clean(d))
			}
		}
	}
	split := func(v string) []string { return strings.Split(v, ":") }
	add(libs...)
	add(split(os.Getenv("LD_LIBRARY_PATH"))...)
	arch := map[string]string{"amd64": "x86_64", "arm64": "sbsa"}[runtime.GOARCH]
	var roots []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if r := os.Getenv(v); r != "" {
			roots = append(roots, r)
		}
	}
	roots = append(roots, "/usr/local/cuda", "/opt/cuda")
	more, _ := filepath.Glob("/usr/local/cuda-*")
	sort.Sort(sort.Reverse(sort.StringSlice(more))) // newest version first
	roots = append(roots, more...)
	for _, r := range roots {
		add(filepath.Join(r, "lib64"), filepath.Join(r, "targets", arch+"-linux", "lib"), filepath.Join(r, "lib"))
	}
	add(pythonNvidiaDirs()...)
	add("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/"+archTriple(), "/lib/"+archTriple(), "/usr/lib64", "/usr/lib", "/lib64")
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

func archTriple() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-linux-gnu"
	}
	return "x86_64-linux-gnu"
}

// pythonNvidiaDirs finds the lib folders of nvidia-* wheels (nvidia/<pkg>/lib,
// and nvidia/cu13/lib where CUDA 13 wheels put everything).
func pythonNvidiaDirs() []string {
	var sites []string
	home, _ := os.UserHomeDir()
	patterns := []string{
		os.Getenv("VIRTUAL_ENV") + "/lib/python3*/site-packages",
		os.Getenv("CONDA_PREFIX") + "/lib/python3*/site-packages",
		"/opt/*/.venv/lib/python3*/site-packages",
		"/opt/*/lib/python3*/site-packages",
		"/opt/conda/lib/python3*/site-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages",
		"/usr/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages",
		home + "/.local/lib/python3*/site-packages",
		home + "/.venv/lib/python3*/site-packages",
	}
	for _, p := range patterns {
		if strings.HasPrefix(p, "/lib/") { // an unset variable
			continue
		}
		m, _ := filepath.Glob(p)
		sites = append(sites, m...)
	}
	var dirs []string
	for _, s := range sites {
		m, _ := filepath.Glob(filepath.Join(s, "nvidia", "*", "lib"))
		sort.Strings(m)
		dirs = append(dirs, m...)
	}
	return dirs
}

// findLib returns the path of the first of names found in dirs, or "" if
// none is (the caller then tries the loader's own search).
func findLib(names, dirs []string) string {
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
	}
	return ""
}
