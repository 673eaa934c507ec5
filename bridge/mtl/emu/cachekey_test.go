package emu

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// runtimeOnlyFiles are the package's files that run a built library and
// play no part in building one, so the cache key leaves them out.
var runtimeOnlyFiles = []string{
	"cputime_other.go", "cputime_unix.go", "emu.go", "exec.go", "footprint.go",
	"lib.go", "lib_dl.go", "lib_other.go", "mem_other.go", "mem_unix.go",
}

// TestCacheKeyCoversGenerator holds every Go file of the package to the
// cache key (generatorFS) or to runtimeOnlyFiles: spaceovl.go and pragma.go
// rewrite sources but were not in the key, so a change to either reused
// libraries built before it.
func TestCacheKeyCoversGenerator(t *testing.T) {
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	keyed := embeddedNames(generatorFS)
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		in, rt := slices.Contains(keyed, n), slices.Contains(runtimeOnlyFiles, n)
		switch {
		case !in && !rt:
			t.Errorf("%s is neither in the cache key (generatorFS) nor among runtimeOnlyFiles", n)
		case in && rt:
			t.Errorf("%s is both in the cache key and among runtimeOnlyFiles", n)
		}
	}
}
