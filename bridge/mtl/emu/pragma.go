package emu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Loop hints whose arguments clang's parser reads with macros expanded, as
// Metal's one-pass compiler does (llama.cpp's `#pragma unroll (MIN(DK8/2,
// 4*NSG))`). clang -E prints a pragma it does not handle itself as written,
// and the unit, compiled once its macros are gone, no longer knew MIN. So
// each such pragma is a marker, an ordinary identifier, through the
// preprocessor, which expands what follows it, and a pragma again after
// (docs/msl-subset.md, "How it works").
var loopHints = []struct{ words, marker string }{
	{"unroll", "__msl_emu_pragma_unroll"},
	{"nounroll", "__msl_emu_pragma_nounroll"},
	{"unroll_and_jam", "__msl_emu_pragma_unroll_and_jam"},
	{"nounroll_and_jam", "__msl_emu_pragma_nounroll_and_jam"},
	{"clang loop", "__msl_emu_pragma_clang_loop"},
}

var loopHintRE = regexp.MustCompile(`(?m)^([ \t]*)#[ \t]*pragma[ \t]+(unroll_and_jam|nounroll_and_jam|unroll|nounroll|clang[ \t]+loop)\b`)

// hideLoopHints turns each loop hint of a source file into its marker, on
// its own line as the pragma was, so that lines keep their numbers.
func hideLoopHints(src string) string {
	if !strings.Contains(src, "pragma") {
		return src
	}
	return loopHintRE.ReplaceAllStringFunc(src, func(m string) string {
		sub := loopHintRE.FindStringSubmatch(m)
		words := strings.Join(strings.Fields(sub[2]), " ")
		for _, h := range loopHints {
			if h.words == words {
				return sub[1] + h.marker
			}
		}
		return m
	})
}

// restoreLoopHints turns the markers in preprocessed text back into their
// pragmas, whose arguments now stand expanded. A marker after other tokens
// on its line came from a pragma within a macro's arguments, which clang
// refuses: it fails to build at the line of the macro's call, as the line
// markers of clang's output have it.
func restoreLoopHints(pre string) (string, error) {
	if !strings.Contains(pre, "__msl_emu_pragma_") {
		return pre, nil
	}
	var b strings.Builder
	file, line := "", 0
	for _, l := range strings.SplitAfter(pre, "\n") {
		if m := lineMarkerRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			file, line = m[2], n
			b.WriteString(l)
			continue
		}
		for _, h := range loopHints {
			i := indexIdent(l, h.marker)
			if i < 0 {
				continue
			}
			if strings.TrimSpace(l[:i]) != "" {
				return "", fmt.Errorf("%s:%d: error: embedding a #pragma directive within macro arguments is not supported (#pragma %s)", file, line, h.words)
			}
			l = l[:i] + "#pragma " + h.words + l[i+len(h.marker):]
		}
		b.WriteString(l)
		line++
	}
	return b.String(), nil
}

var lineMarkerRE = regexp.MustCompile(`^#\s*(\d+)\s+"([^"]*)"`)

// indexIdent is the index of the identifier id in s, standing alone, or -1.
func indexIdent(s, id string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], id)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(id)
		if (i == 0 || !isIdentChar(s[i-1])) && (end == len(s) || !isIdentChar(s[end])) {
			return i
		}
		off = end
	}
}
