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
