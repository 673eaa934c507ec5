package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// maxStatus is how long a device's status may be in `devices`: a compiler's
// whole log belongs to selftest, not to a table row.
const maxStatus = 400

// backendStatus is a backend that did not open, in one readable cell: for
// kernels the emulator's compiler rejects, the first error and what to
// install; for any other long message, its first line.
func backendStatus(name string, err error) string {
	msg := err.Error()
	var ce *emu.CompileError
	if errors.As(err, &ce) {
		lines := strings.Split(ce.Msg, "\n")
		first, n := "", 0
		for _, l := range lines {
			if strings.Contains(l, "error:") {
				if first == "" {
					first = strings.TrimSpace(l)
				}
				n++
			}
		}
		if first == "" {
			first = strings.TrimSpace(lines[0])
		}
		more := ""
		if n > 1 {
			more = fmt.Sprintf(" (and %d more errors)", n-1)
		}
		return truncate(fmt.Sprintf("the Metal kernels do not compile with this clang: %s%s. "+
			"The emulator needs a clang that takes bf16 arithmetic and casts (clang-19 is tested): "+
			"install it (apt-get install clang-19, or make clang) or point MTLBENCH_CLANG at one; "+
			"mtlbench selftest --backend %s prints the whole log", first, more, name))
	}
	if first, _, multi := strings.Cut(msg, "\n"); multi {
		msg = strings.TrimSpace(first) + " (more: mtlbench selftest --backend " + name + ")"
	}
	if name == "metal-emu" && strings.Contains(msg, "compiling the kernels") {
		// The hint goes first: a long first error must not truncate it away.
		return truncate("install a clang that takes the kernels' bf16 arithmetic and casts (clang-19 is tested: " +
			"apt-get install clang-19, or make clang; or point MTLBENCH_CLANG at one). " + msg)
	}
	return truncate(msg)
}

func truncate(s string) string {
	if len(s) <= maxStatus {
		return s
	}
	return s[:maxStatus-3] + "..."
}
