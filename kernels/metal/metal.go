// Package metal holds the Metal kernels of mtlbench (MSL sources, compiled
// at run time by the device: Metal on a Mac, bridge/mtl/emu elsewhere).
// mtlbench.h defines the argument structs the host mirrors
// (bridge/metal/args.go).
package metal

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.metal *.h
var Sources embed.FS

// Files returns every source by file name, as mtl.Device.NewLibrary takes
// them.
func Files() map[string]string {
	out := map[string]string{}
	ents, _ := fs.ReadDir(Sources, ".")
	for _, e := range ents {
		b, err := Sources.ReadFile(e.Name())
		if err != nil {
			panic(err) // embedded at build time: cannot fail
		}
		out[e.Name()] = string(b)
	}
	return out
}

// Amalgamation is every source as one translation unit, for a device whose
// compiler takes a single source string (newLibraryWithSource): the
// headers first, then the .metal files in name order, with the includes of
// local headers dropped (the headers' guards make the order safe).
func Amalgamation() string {
	files := Files()
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		hi, hj := strings.HasSuffix(names[i], ".h"), strings.HasSuffix(names[j], ".h")
		if hi != hj {
			return hi
		}
		if hi && (names[i] == "mtlbench.h") != (names[j] == "mtlbench.h") {
			return names[i] == "mtlbench.h" // the others include it
		}
		return names[i] < names[j]
	})
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "// ---- %s\n", n)
		for _, line := range strings.SplitAfter(files[n], "\n") {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "#include \"") {
				if _, local := files[strings.Trim(strings.TrimPrefix(t, "#include"), " \"")]; local {
					continue
				}
			}
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}
