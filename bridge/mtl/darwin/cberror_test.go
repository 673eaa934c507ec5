package darwin

import (
	"fmt"
	"strings"
	"testing"
)

// A failed command buffer's error says what Metal reported and which kernels
// the command buffer dispatched, each once, as the recording saw them.
func TestCommandBufferErrorNamesKernels(t *testing.T) {
	many := make([]string, maxNamedKernels+3)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	for _, tc := range []struct {
		name    string
		status  uint64
		hasErr  bool
		code    int64
		desc    string
		kernels []string
		want    []string
		not     []string
	}{
		{"page fault", cbStatusError, true, 3, "Caused GPU Address Fault Error", []string{"matvec_f32", "rms_norm"},
			[]string{"command buffer failed", "MTLCommandBufferErrorPageFault, code 3", "Caused GPU Address Fault Error", "its kernels: matvec_f32, rms_norm"}, nil},
		{"timeout", cbStatusError, true, 2, "Caused GPU Timeout Error", []string{"paged_attention_decode"},
			[]string{"MTLCommandBufferErrorTimeout, code 2", "its kernels: paged_attention_decode"}, nil},
		{"unknown code", cbStatusError, true, -7, "odd", nil,
			[]string{"error code -7", "dispatched no kernel"}, nil},
		{"no NSError", 3, false, 0, "(no NSError)", []string{"k"},
			[]string{"command buffer scheduled with no NSError", "its kernels: k"}, []string{"MTLCommandBufferError"}},
		{"many kernels", cbStatusError, true, 1, "internal", many,
			[]string{"MTLCommandBufferErrorInternal", "k0, k1", fmt.Sprintf("k%d and 3 more", maxNamedKernels-1)}, []string{fmt.Sprintf("k%d", maxNamedKernels)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := commandBufferError(tc.status, tc.hasErr, tc.code, tc.desc, tc.kernels).Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(msg, w) {
					t.Errorf("%q has %q", msg, w)
				}
			}
		})
	}
}

// The recording keeps the kernels it dispatched, each once and in order; a
// kernel set but never dispatched, or dispatched empty, ran nothing.
func TestRecordingKernels(t *testing.T) {
	r := &recording{maxTGMemory: 32 << 10}
	a := &pipeline{name: "a", id: 1, maxTotal: 1024, width: 32}
	b := &pipeline{name: "b", id: 2, maxTotal: 1024, width: 32}
	c := &pipeline{name: "c", id: 3, maxTotal: 1024, width: 32}
	e, err := r.newEncoder(false, true)
	if err != nil {
		t.Fatal(err)
	}
	e.SetPipeline(b)
	e.DispatchThreadgroups([3]int{1, 1, 1}, [3]int{32, 1, 1})
	e.SetPipeline(a)
	e.DispatchThreads([3]int{64, 1, 1}, [3]int{32, 1, 1})
	e.SetPipeline(b)
	e.DispatchThreadgroups([3]int{2, 1, 1}, [3]int{32, 1, 1})
	e.SetPipeline(c)
	e.DispatchThreadgroups([3]int{0, 1, 1}, [3]int{32, 1, 1})
	e.End()
	if got := strings.Join(r.kernels, ","); got != "b,a" {
		t.Errorf("kernels %q, want b,a", got)
	}
}
