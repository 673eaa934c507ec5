// Package cuda embeds the CUDA kernel sources of the CUDA backend
// (bridge/cuda), which compiles them at run time with NVRTC. common.cu holds
// the helpers every other file uses and is compiled first; the rest follow in
// name order, all as one translation unit (Source).
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

// Source is the kernels as one translation unit: common.cu first, then the
// other files in name order, each after a #line directive so compiler
// messages name the .cu file and line. It also returns the file names.
func Source() (string, []string, error) {
	names, err := fs.Glob(Sources, "*.cu")
	if err != nil {
		return "", nil, err
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "common.cu") != (names[j] == "common.cu") {
			return names[i] == "common.cu"
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	for _, n := range names {
		data, err := Sources.ReadFile(n)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "#line 1 \"kernels/cuda/%s\"\n", n)
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String(), names, nil
}
