// Package cuda embeds the CUDA kernel sources of the CUDA backend
// (bridge/cuda), which compiles them at run time with NVRTC. common.cu holds
// the helpers every other file uses and is compiled first; the rest follow in
// name order, all as one translation unit.
package cuda

import "embed"

// Sources are the kernel files, *.cu.
//
//go:embed *.cu
var Sources embed.FS
