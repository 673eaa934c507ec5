package darwin

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// CompileError is a library that did not build. Error names the .metal file
// (or header) and line of each problem, as the emulator's CompileError does.
type CompileError struct {
	Msg string
}

func (e *CompileError) Error() string { return e.Msg }

// srcPos is where one line of a compilation unit came from.
type srcPos struct {
	file string
	line int
}

// unit is one .metal file with the library's headers it includes inlined:
// newLibraryWithSource: compiles a single string and cannot open files, so
// `#include "common.h"` is resolved here, and lines maps the compiler's
// program_source:LINE back to a file and line.
type unit struct {
	name  string
	text  string
	lines []srcPos // lines[i] is the origin of line i+1 of text
}

// maxIncludeDepth stops an include cycle without include guards.
const maxIncludeDepth = 32

var (
	includeLine = regexp.MustCompile(`^\s*#\s*include\s*"([^"]+)"`)
	pragmaOnce  = regexp.MustCompile(`^\s*#\s*pragma\s+once\b`)
)

// checkFileNames rejects names the emulator rejects too, so a library that
// builds on one builds on the other, and sources that are not UTF-8.
func checkFileNames(files map[string]string) error {
	for n, src := range files {
		if n == "" || path.IsAbs(n) || strings.Contains(n, "..") || strings.ContainsAny(n, "\\\"\n") {
			return fmt.Errorf("metal: bad source file name %q", n)
		}
		if !utf8.ValidString(src) {
			// NSString would refuse it, and the compiler would get no source.
			return &CompileError{Msg: fmt.Sprintf("%s: not valid UTF-8", n)}
		}
	}
	return nil
}

// buildUnits makes one unit per .metal file, in name order. Headers reach
// the compiler through the units that include them.
func buildUnits(files map[string]string) ([]unit, error) {
	if err := checkFileNames(files); err != nil {
		return nil, err
	}
	var names []string
	for n := range files {
		if strings.HasSuffix(n, ".metal") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, &CompileError{Msg: "metal: the library has no .metal file"}
	}
	units := make([]unit, 0, len(names))
	for _, n := range names {
		u, err := expandIncludes(files, n)
		if err != nil {
			return nil, err
		}
		units = append(units, u)
	}
	return units, nil
}

// expandIncludes inlines the quoted #includes of main that name files of the
// library, searching the including file's folder first and the library's
// root second, as clang searches the emulator's build folder. Includes of
// other files (<metal_stdlib>, or a header the library lacks) stay for the
// Metal compiler, which resolves the system headers and reports the rest at
// a line this unit maps back. A header with #pragma once is inlined once per
// unit; include guards work as written.
func expandIncludes(files map[string]string, main string) (unit, error) {
	u := unit{name: main}
	var b strings.Builder
	once := map[string]bool{}
	var expand func(name string, depth int, from srcPos) error
	expand = func(name string, depth int, from srcPos) error {
		if depth > maxIncludeDepth {
			return &CompileError{Msg: fmt.Sprintf("%s:%d: #include nested more than %d deep (an include cycle without guards?)", from.file, from.line, maxIncludeDepth)}
		}
		src := files[name]
		lines := strings.Split(src, "\n")
		if n := len(lines); n > 0 && lines[n-1] == "" {
			lines = lines[:n-1] // a final newline ends the last line, it does not start one
		}
		if hasPragmaOnce(lines) {
			if once[name] {
				return nil
			}
			once[name] = true
		}
		inComment := false
		for i, l := range lines {
			pos := srcPos{name, i + 1}
			if !inComment {
				if pragmaOnce.MatchString(l) {
					// Already honoured; in the main file clang would warn about it.
					emit(&b, &u, "", pos)
					continue
				}
				if m := includeLine.FindStringSubmatch(l); m != nil {
					if inc, ok := resolveInclude(files, name, m[1]); ok {
						if err := expand(inc, depth+1, pos); err != nil {
							return err
						}
						inComment = false
						continue
					}
				}
			}
			emit(&b, &u, l, pos)
			inComment = commentState(l, inComment)
		}
		return nil
	}
	if err := expand(main, 0, srcPos{main, 0}); err != nil {
		return unit{}, err
	}
	u.text = b.String()
	return u, nil
}

func emit(b *strings.Builder, u *unit, line string, pos srcPos) {
	b.WriteString(line)
	b.WriteByte('\n')
	u.lines = append(u.lines, pos)
}

func hasPragmaOnce(lines []string) bool {
	for _, l := range lines {
		if pragmaOnce.MatchString(l) {
			return true
		}
	}
	return false
}

// resolveInclude finds a quoted include among the library's files.
func resolveInclude(files map[string]string, includer, name string) (string, bool) {
	if name == "" || path.IsAbs(name) {
		return "", false
	}
	for _, c := range []string{path.Join(path.Dir(includer), name), path.Clean(name)} {
		if _, ok := files[c]; ok {
			return c, true
		}
	}
	return "", false
}

// commentState reports whether a /* comment is still open after line, given
// whether one was open before it. It skips string and character literals and
// // comments, which is all an #include scan needs.
func commentState(line string, in bool) bool {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if in {
			if c == '*' && i+1 < len(line) && line[i+1] == '/' {
				in = false
				i++
			}
			continue
		}
		switch c {
		case '/':
			if i+1 < len(line) {
				if line[i+1] == '/' {
					return false
				}
				if line[i+1] == '*' {
					in = true
					i++
				}
			}
		case '"', '\'':
			for i++; i < len(line) && line[i] != c; i++ {
				if line[i] == '\\' {
					i++
				}
			}
		}
	}
	return in
}

// diagPos is the compiler's name for a source string, with line and
// optional column.
var diagPos = regexp.MustCompile(`program_source:(\d+)(:(\d+))?`)

// maxDiagLines keeps a failed compile's error readable, as the emulator does.
const maxDiagLines = 40

// mapDiagnostics rewrites the compiler's program_source:LINE:COL into the
// file and line that text came from, drops the "Compilation failed:" banner
// Metal puts before the diagnostics and keeps at most 40 lines.
func (u *unit) mapDiagnostics(msg string) string {
	msg = strings.TrimSpace(msg)
	if rest, ok := strings.CutPrefix(msg, "Compilation failed:"); ok {
		msg = strings.TrimSpace(rest)
	}
	msg = u.mapPositions(msg)
	if !strings.Contains(msg, u.name) && !strings.Contains(msg, ".metal:") && !strings.Contains(msg, ".h:") {
		msg = u.name + ": " + msg // an error without a position (an unsupported language version, say)
	}
	lines := strings.Split(msg, "\n")
	if len(lines) > maxDiagLines {
		lines = append(lines[:maxDiagLines], fmt.Sprintf("... (%d more lines)", len(lines)-maxDiagLines))
	}
	return strings.Join(lines, "\n")
}

// mapPositions rewrites the compiler's program_source:LINE[:COL] into the
// file and line that text came from.
func (u *unit) mapPositions(msg string) string {
	return diagPos.ReplaceAllStringFunc(msg, func(s string) string {
		m := diagPos.FindStringSubmatch(s)
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > len(u.lines) {
			return s
		}
		p := u.lines[n-1]
		return p.file + ":" + strconv.Itoa(p.line) + m[2]
	})
}

// languageVersion turns "3.1" into MTLLanguageVersion3_1, (3<<16)|1; empty
// means 3.1 (macOS 14), the first with bfloat.
func languageVersion(v string) (uint64, error) {
	if v == "" {
		v = "3.1"
	}
	maj, min, ok := strings.Cut(v, ".")
	if !ok {
		min = "0"
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 1 || a > 9 || b < 0 || b > 9 {
		return 0, fmt.Errorf("metal: bad MSL language version %q (want e.g. \"3.1\")", v)
	}
	return uint64(a)<<16 | uint64(b), nil
}

// macroValues returns the preprocessor macros in name order, an empty value
// meaning 1 as with -DNAME. A name must be an identifier and a value UTF-8
// without a line break: NSString turns invalid UTF-8 into nil, which
// NSDictionary answers with an exception that ends the process.
func macroValues(defs map[string]string) (names, values []string, err error) {
	for k := range defs {
		names = append(names, k)
	}
	sort.Strings(names)
	if err := mtl.CheckDefines(defs); err != nil {
		return nil, nil, err
	}
	for _, k := range names {
		v := defs[k]
		if v == "" {
			v = "1"
		}
		values = append(values, v)
	}
	return names, values, nil
}
