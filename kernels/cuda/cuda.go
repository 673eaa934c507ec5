// Package cuda embeds the CUDA kernel sources of the CUDA backend
// (bridge/cuda), which compiles them at run time with NVRTC. common.cu holds
// the helpers every other file uses and comes first; the rest follow in name
// order, so a file sees the helpers of the files before it.
//
// Kernels are declared with MTLB_KERNEL rather than extern "C" __global__.
// Source defines it as the latter for every file: the kernels as one
// translation unit. Units gives one program per file, each with every file's
// helpers but only its own file's kernels generated, so NVRTC compiles the
// files side by side (bridge/cuda compile_linux.go).
package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Sources are the kernel files, *.cu.
//
//go:embed *.cu
var Sources embed.FS

// The two meanings of MTLB_KERNEL. A kernel of another unit becomes a
// template that is never instantiated: parsed and checked, never generated.
const (
	kernelOn  = `extern "C" __global__`
	kernelOff = `template <int mtlb_other_unit_> __global__`
)

// A Unit is one NVRTC program: Name's kernels, with the helpers of every
// file.
type Unit struct {
	Name   string // the .cu file whose kernels it generates
	Source string
}

// Source is the kernels as one translation unit: common.cu first, then the
// other files in name order, each after a #line directive so compiler
// messages name the .cu file and line. It also returns the file names.
func Source() (string, []string, error) {
	names, err := files()
	if err != nil {
		return "", nil, err
	}
	src, err := assemble(names, func(string) bool { return true })
	return src, names, err
}

// Units are the programs that together hold every kernel once: one for each
// file that declares kernels.
func Units() ([]Unit, error) {
	names, err := files()
	if err != nil {
		return nil, err
	}
	var units []Unit
	for _, n := range names {
		data, err := Sources.ReadFile(n)
		if err != nil {
			return nil, err
		}
		if !strings.Contains(string(data), "MTLB_KERNEL") {
			continue
		}
		src, err := assemble(names, func(f string) bool { return f == n })
		if err != nil {
			return nil, err
		}
		units = append(units, Unit{Name: n, Source: src})
	}
	return units, nil
}

// files are the .cu names, common.cu first, then in name order.
func files() ([]string, error) {
	names, err := fs.Glob(Sources, "*.cu")
	if err != nil {
		return nil, err
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "common.cu") != (names[j] == "common.cu") {
			return names[i] == "common.cu"
		}
		return names[i] < names[j]
	})
	return names, nil
}

// assemble concatenates the files, each after the MTLB_KERNEL meaning emit
// gives it and a #line directive.
func assemble(names []string, emit func(string) bool) (string, error) {
	var b strings.Builder
	for _, n := range names {
		data, err := Sources.ReadFile(n)
		if err != nil {
			return "", err
		}
		k := kernelOff
		if emit(n) {
			k = kernelOn
		}
		fmt.Fprintf(&b, "#undef MTLB_KERNEL\n#define MTLB_KERNEL %s\n#line 1 \"kernels/cuda/%s\"\n", k, n)
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String(), nil
}
