package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The three files of ggml's Metal library, and where a ggml checkout
// (src/...), a llama.cpp checkout (ggml/src/...) or a flat folder keeps
// them.
var ggmlFiles = []struct {
	name string
	dirs []string
}{
	{"ggml-metal.metal", []string{"src/ggml-metal", "ggml/src/ggml-metal", "."}},
	{"ggml-metal-impl.h", []string{"src/ggml-metal", "ggml/src/ggml-metal", "."}},
	{"ggml-common.h", []string{"src", "ggml/src", "."}},
}

// readGGML reads ggml's Metal library from dir and pastes its two headers
// in as llama.cpp's build does when it embeds the library
// (GGML_METAL_EMBED_LIBRARY: src/ggml-metal/CMakeLists.txt's sed), so the
// source is the one llama.cpp compiles at run time.
func readGGML(dir string) (string, error) {
	if st, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("-ggml %s: %w", dir, err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("-ggml %s: not a folder", dir)
	}
	text := map[string]string{}
	for _, f := range ggmlFiles {
		var tried []string
		for _, d := range f.dirs {
			p := filepath.Join(dir, d, f.name)
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				tried = append(tried, p)
				continue
			}
			if err != nil {
				return "", fmt.Errorf("-ggml: %w", err)
			}
			text[f.name] = string(b)
			break
		}
		if _, ok := text[f.name]; !ok {
			return "", fmt.Errorf("-ggml %s: no %s (looked for %s)", dir, f.name, strings.Join(tried, ", "))
		}
	}
	src := embed(text["ggml-metal.metal"], "__embed_ggml-common.h__", text["ggml-common.h"])
	src = embed(src, `#include "ggml-metal-impl.h"`, text["ggml-metal-impl.h"])
	return src, nil
}

// embed replaces every line of src that holds marker with file, as
// `sed -e "/marker/r file" -e "/marker/d"` does.
func embed(src, marker, file string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(src, "\n") {
		if !strings.Contains(l, marker) {
			b.WriteString(l)
			continue
		}
		b.WriteString(file)
		if file != "" && !strings.HasSuffix(file, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// lockstepReads are the two places where kernel_flash_attn_ext_vec has
// lanes read threadgroup words that lane 0 then rewrites with no barrier
// between, which lanes in lockstep allow. The emulator's lanes run one
// after another between sync points (docs/msl-subset.md, "Not
// supported"), so lane 0 may rewrite them before another lane reads them.
var lockstepReads = []struct{ what, at, barrier string }{
	// After its last block of keys a lane has read every ss[c] for P*V;
	// lane 0 then stores S and M over ss[0] and ss[1]. Heads of 128 (NE = 1,
	// 4 head elements a lane over every key) have no simd operation after
	// those reads; heads of 64 shuffle their sums there, syncing the lanes.
	{"the store of S and M after the loop over the keys",
		"        // these are needed for reducing the results from the simdgroups (reuse the ss buffer)\n        if (tiisg == 0) {\n",
		"        simdgroup_barrier(mem_flags::mem_threadgroup);\n"},
	// The merge of two simdgroups: every lane has read ss[0] and ss[1]
	// (S0, M0), and lane 0 then rewrites them.
	{"the merge of the simdgroups",
		"            const float S = S0*ms0 + S1*ms1;\n\n            if (tiisg == 0) {\n",
		"            simdgroup_barrier(mem_flags::mem_threadgroup);\n"},
}

// insertMergeBarrier puts a simdgroup_barrier between those reads and
// writes: a barrier that loads and stores nothing, so the witness counts
// what it counts without it.
func insertMergeBarrier(src string) (string, error) {
	for _, l := range lockstepReads {
		if n := strings.Count(src, l.at); n != 1 {
			return "", fmt.Errorf("-merge-barrier: %s in the vec attention kernel (%q) is in ggml-metal.metal %d times, want once", l.what, l.at, n)
		}
		// The barrier goes before the line that opens lane 0's store.
		cut := strings.LastIndex(l.at, "if (tiisg == 0)")
		cut = strings.LastIndex(l.at[:cut], "\n") + 1
		src = strings.Replace(src, l.at, l.at[:cut]+l.barrier+l.at[cut:], 1)
	}
	return src, nil
}
