package metal

import (
	"regexp"
	"strings"
	"testing"
)

// gridAttrs are the thread-position attributes that may be declared as a
// scalar or as a 2- or 3-component vector; Metal's compiler wants every one
// of them in a kernel declared alike (MSL specification, "Attributes for
// kernel function input arguments"), as MLX and ggml declare them.
var gridAttrs = []string{"thread_position_in_grid", "thread_position_in_threadgroup", "threadgroup_position_in_grid",
	"threads_per_threadgroup", "threadgroups_per_grid", "threads_per_grid", "grid_size", "grid_origin",
	"dispatch_threads_per_threadgroup"}

var (
	kernelRE = regexp.MustCompile(`(?s)kernel void (\w+)\((.*?)\)\s*\{`)
	paramRE  = regexp.MustCompile(`(\w+)\s+\w+\s*\[\[(\w+)\]\]`)
)

// components is 1 for a scalar type, n for an n-vector (uint2, ushort3).
func components(typ string) int {
	if n := typ[len(typ)-1]; n >= '2' && n <= '4' {
		return int(n - '0')
	}
	return 1
}

// Every kernel declares its thread-position attributes all as scalars or
// all as vectors of one size.
func TestThreadPositionAttributesAlike(t *testing.T) {
	for name, src := range Files() {
		if !strings.HasSuffix(name, ".metal") {
			continue
		}
		for _, k := range kernelRE.FindAllStringSubmatch(src, -1) {
			seen := map[int][]string{}
			for _, p := range paramRE.FindAllStringSubmatch(k[2], -1) {
				for _, a := range gridAttrs {
					if p[2] == a {
						c := components(p[1])
						seen[c] = append(seen[c], p[1]+" "+a)
					}
				}
			}
			if len(seen) > 1 {
				t.Errorf("%s: kernel %s mixes thread-position types: %v", name, k[1], seen)
			}
		}
	}
}
