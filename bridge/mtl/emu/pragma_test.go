package emu

import "testing"

// TestLoopHintMarkers checks the round trip of loop hints through the
// preprocessor (pragma.go) on text alone: each hint becomes its marker on
// its own line, other pragmas and lookalikes stay, and a marker comes back
// as its pragma, on a line of its own where an expansion left it after
// other tokens.
func TestLoopHintMarkers(t *testing.T) {
	for _, c := range []struct{ src, hidden, back string }{
		{"#pragma unroll (MIN(a, b))\n", "__msl_emu_pragma_unroll (MIN(a, b))\n", "#pragma unroll (MIN(a, b))\n"},
		{"    # pragma  unroll(4)\n", "    __msl_emu_pragma_unroll(4)\n", "    #pragma unroll(4)\n"},
		{"#pragma nounroll\nx;\n", "__msl_emu_pragma_nounroll\nx;\n", "#pragma nounroll\nx;\n"},
		{"#pragma unroll_and_jam 2\n", "__msl_emu_pragma_unroll_and_jam 2\n", "#pragma unroll_and_jam 2\n"},
		{"#pragma clang  loop unroll_count(N)\n", "__msl_emu_pragma_clang_loop unroll_count(N)\n", "#pragma clang loop unroll_count(N)\n"},
		{"#pragma once\n#pragma unrolled\n#pragma METAL fp math_mode(safe)\n", "", ""},
		{"int a; #pragma unroll\n", "", ""},
	} {
		hidden := hideLoopHints(c.src)
		want := c.hidden
		if want == "" {
			want = c.src
		}
		if hidden != want {
			t.Errorf("hideLoopHints(%q) = %q, want %q", c.src, hidden, want)
		}
		back := c.back
		if back == "" {
			back = c.src
		}
		if got, err := restoreLoopHints(hidden); err != nil || got != back {
			t.Errorf("restoreLoopHints(%q) = %q, %v, want %q", hidden, got, err, back)
		}
	}
	// A marker after other tokens on its line came from a pragma within a
	// macro's arguments, which clang refuses, at the line of the call.
	pre := "# 1 \"k.metal\"\nint b;\nint a = 1 +__msl_emu_pragma_unroll 2;\n"
	want := "k.metal:2: error: embedding a #pragma directive within macro arguments is not supported (#pragma unroll)"
	if got, err := restoreLoopHints(pre); err == nil || err.Error() != want {
		t.Errorf("restoreLoopHints(%q) = %q, %v, want the error %q", pre, got, err, want)
	}
	// A longer identifier holding a marker is not one.
	in := "x__msl_emu_pragma_unroll = __msl_emu_pragma_unroll_x;\n"
	if got, err := restoreLoopHints(in); err != nil || got != in {
		t.Errorf("restoreLoopHints(%q) = %q, %v, want it unchanged", in, got, err)
	}
}
