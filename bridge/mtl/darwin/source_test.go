package darwin

import (
	"errors"
	"strings"
	"testing"
)

func TestExpandIncludesMapsLines(t *testing.T) {
	files := map[string]string{
		"k.metal": "#include <metal_stdlib>\n#include \"common.h\"\nusing namespace metal;\n#include \"sub/inner.h\"\nkernel void k() {}\n",
		"common.h": "#pragma once\n" +
			"#define TILE 32\n",
		"sub/inner.h": "#include \"../common.h\"\n#include \"sibling.h\"\nconstant int inner = TILE;\n",
		"sub/sibling.h": "/* #include \"common.h\" in a comment stays put\n" +
			"   #include \"common.h\" */\n" +
			"// #include \"common.h\"\n" +
			"constant int sibling = 1;\n",
	}
	us, err := buildUnits(files)
	if err != nil {
		t.Fatal(err)
	}
	if len(us) != 1 {
		t.Fatalf("%d units, want 1 (headers are not units)", len(us))
	}
	u := us[0]
	lines := strings.Split(strings.TrimSuffix(u.text, "\n"), "\n")
	if len(lines) != len(u.lines) {
		t.Fatalf("%d lines of text, %d positions", len(lines), len(u.lines))
	}
	want := []struct {
		text string
		file string
		line int
	}{
		{"#include <metal_stdlib>", "k.metal", 1},
		{"", "common.h", 1}, // #pragma once, blanked
		{"#define TILE 32", "common.h", 2},
		{"using namespace metal;", "k.metal", 3},
		// sub/inner.h's ../common.h is the same file, already included once.
		{"/* #include \"common.h\" in a comment stays put", "sub/sibling.h", 1},
		{"   #include \"common.h\" */", "sub/sibling.h", 2},
		{"// #include \"common.h\"", "sub/sibling.h", 3},
		{"constant int sibling = 1;", "sub/sibling.h", 4},
		{"constant int inner = TILE;", "sub/inner.h", 3},
		{"kernel void k() {}", "k.metal", 5},
	}
	if len(lines) != len(want) {
		t.Fatalf("unit text:\n%s", u.text)
	}
	for i, w := range want {
		if lines[i] != w.text || u.lines[i] != (srcPos{w.file, w.line}) {
			t.Errorf("line %d: %q from %v, want %q from %s:%d", i+1, lines[i], u.lines[i], w.text, w.file, w.line)
		}
	}
}

func TestIncludeGuardsAndMissingHeaders(t *testing.T) {
	files := map[string]string{
		"a.metal": "#include \"g.h\"\n#include \"g.h\"\n#include \"missing.h\"\n",
		"g.h":     "#ifndef G_H\n#define G_H\nint g;\n#endif\n",
	}
	us, err := buildUnits(files)
	if err != nil {
		t.Fatal(err)
	}
	u := us[0]
	// Guards are the compiler's business: the header is inlined twice.
	if n := strings.Count(u.text, "#ifndef G_H"); n != 2 {
		t.Errorf("g.h inlined %d times, want 2:\n%s", n, u.text)
	}
	// A header the library lacks stays for the compiler to report.
	if !strings.Contains(u.text, "#include \"missing.h\"\n") {
		t.Errorf("missing include was dropped:\n%s", u.text)
	}
	last := u.lines[len(u.lines)-1]
	if last != (srcPos{"a.metal", 3}) {
		t.Errorf("missing include maps to %v", last)
	}
}

func TestIncludeCycle(t *testing.T) {
	_, err := buildUnits(map[string]string{"a.metal": "#include \"a.h\"\n", "a.h": "x\n#include \"a.h\"\n"})
	var ce *CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "a.h:2: #include nested more than") {
		t.Errorf("cycle: %v", err)
	}
}

func TestBadNamesAndNoUnits(t *testing.T) {
	if _, err := buildUnits(map[string]string{"../x.metal": ""}); err == nil || !strings.Contains(err.Error(), "bad source file name") {
		t.Errorf("bad name: %v", err)
	}
	if _, err := buildUnits(map[string]string{"x.metal": "\xff"}); err == nil || !strings.Contains(err.Error(), "x.metal: not valid UTF-8") {
		t.Errorf("bad UTF-8: %v", err)
	}
	if _, err := buildUnits(map[string]string{"x.h": ""}); err == nil || !strings.Contains(err.Error(), "no .metal file") {
		t.Errorf("no units: %v", err)
	}
}

func TestMapDiagnostics(t *testing.T) {
	files := map[string]string{
		"bad.metal": "#include <metal_stdlib>\n#include \"h.h\"\nusing namespace metal;\n\nkernel void bad(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n  x[i] = undefined_thing;\n}\n",
		"h.h":       "// header\nconstant float oops = nope;\n",
	}
	us, err := buildUnits(files)
	if err != nil {
		t.Fatal(err)
	}
	u := us[0]
	// As Metal reports it: a banner, then clang's diagnostics on
	// program_source (the header's line 2 is line 3 of the unit; the
	// kernel's line 6 is line 7).
	msg := "Compilation failed: \n\nprogram_source:3:24: error: use of undeclared identifier 'nope'\nconstant float oops = nope;\n                       ^\n" +
		"program_source:7:10: error: use of undeclared identifier 'undefined_thing'\n  x[i] = undefined_thing;\n         ^\nprogram_source:99: note: out of range stays\n"
	got := u.mapDiagnostics(msg)
	for _, w := range []string{"h.h:2:24: error: use of undeclared identifier 'nope'", "bad.metal:6:10: error: use of undeclared identifier 'undefined_thing'", "program_source:99: note"} {
		if !strings.Contains(got, w) {
			t.Errorf("mapped diagnostics lack %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "Compilation failed") {
		t.Errorf("banner kept:\n%s", got)
	}
	if got := u.mapDiagnostics("Language version 3.1 is not supported"); got != "bad.metal: Language version 3.1 is not supported" {
		t.Errorf("positionless error: %q", got)
	}
	long := strings.Repeat("program_source:1:1: note: x\n", 100)
	if got := u.mapDiagnostics(long); strings.Count(got, "\n") != maxDiagLines || !strings.HasSuffix(got, "(60 more lines)") {
		t.Errorf("long output not cut at %d lines: %d lines", maxDiagLines, strings.Count(got, "\n"))
	}
}

func TestLanguageVersion(t *testing.T) {
	for in, want := range map[string]uint64{"": 3<<16 | 1, "3.1": 196609, "3.2": 196610, "2.4": 131076, "3": 196608, "4.0": 262144} {
		got, err := languageVersion(in)
		if err != nil || got != want {
			t.Errorf("languageVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"x", "3.x", "3.10", "0.1", "-1.0"} {
		if _, err := languageVersion(bad); err == nil {
			t.Errorf("languageVersion(%q) accepted", bad)
		}
	}
}

func TestMacroValues(t *testing.T) {
	n, v, err := macroValues(map[string]string{"B": "", "A": "4"})
	if err != nil || strings.Join(n, ",") != "A,B" || strings.Join(v, ",") != "4,1" {
		t.Errorf("macros %v = %v (%v)", n, v, err)
	}
	// NSString makes nil of invalid UTF-8, and a nil value in an
	// NSDictionary raises an exception that ends the process: refused here.
	for _, bad := range []map[string]string{{"A": "\xff"}, {"\xffA": "1"}, {"A B": "1"}, {"A": "1\n#define B 2"}} {
		if _, _, err := macroValues(bad); err == nil {
			t.Errorf("macros %q accepted", bad)
		}
	}
}
