//go:build linux

// Host-side rules of the backend that need no GPU.
package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// A packed decode GEMV takes the rows a warp the GPU fills with by default
// (an H100: 132 SMs), a tuned config's rows where its variant has them, and
// the default where it has not.
func TestQAGemvTakesTunedRows(t *testing.T) {
	b := &Backend{device: device{sms: 132}}
	launch := func(m int, gu bool, rows ...int) *qgemv {
		g := &qgemv{m: m, k: 2048, gu: gu}
		for _, n := range rows {
			g.segs[g.nsegs] = qseg{q: &qtensor{PackedMatrix: bridge.PackedMatrix{Dims: []int{n, 2048}}}}
			g.nsegs++
		}
		return g
	}
	qkv := launch(1, false, 4096, 512, 512)
	gu := launch(1, true, 6144, 6144)
	four := launch(4, false, 2048)
	for _, c := range []struct {
		name  string
		g     *qgemv
		c     int
		tuned string
		want  int
	}{
		{"q/k/v, untuned", qkv, 1, "", 2},
		{"q/k/v, tuned 4", qkv, 1, "4", 4},
		{"q/k/v, tuned auto", qkv, 1, "auto", 2},
		{"gate/up, untuned", gu, 1, "", 2},
		{"gate/up, tuned 4 (no such variant)", gu, 1, "4", 2},
		{"gate/up, tuned 1", gu, 1, "1", 1},
		{"four tokens, tuned 4 (no such variant)", four, qCols, "4", 1},
		{"four tokens, tuned 2", four, qCols, "2", 2},
	} {
		var asked [3]int
		if c.tuned != "" {
			b.SetLaunchConfig(string(ops.QMatMul), func(s map[string]int) (map[string]string, bool) {
				asked = [3]int{s[string(ops.M)], s[string(ops.N)], s[string(ops.K)]}
				return map[string]string{ops.KnobRows: c.tuned}, true
			})
		} else {
			b.SetLaunchConfig(string(ops.QMatMul), nil)
		}
		if got := b.qaLaunchRows(c.g, c.c); got != c.want {
			t.Errorf("%s: %d rows a warp, want %d", c.name, got, c.want)
		}
		if first := c.g.segs[0].q.Dims[0]; c.tuned != "" && asked != [3]int{c.g.m, first, 2048} {
			t.Errorf("%s: looked up %v, want the first matrix's shape %v", c.name, asked, [3]int{c.g.m, first, 2048})
		}
	}
}

// A compile error in a helper every kernel program includes is reported
// once, not once a program; distinct ones each once.
func TestCompileErrorsReportedOnce(t *testing.T) {
	helper := errors.New("kernels/cuda/common.cu(12): error: identifier \"x\" is undefined")
	other := errors.New("kernels/cuda/flash.cu(3): error: expected a \";\"")
	err := distinct([]error{nil, helper, errors.New(helper.Error()), nil, other, helper})
	if err == nil {
		t.Fatal("no error")
	}
	if got := strings.Count(err.Error(), "common.cu(12)"); got != 1 {
		t.Errorf("the helper's error %d times in %q", got, err)
	}
	if !strings.Contains(err.Error(), "flash.cu(3)") {
		t.Errorf("%q lost the second error", err)
	}
	if distinct([]error{nil, nil}) != nil {
		t.Error("no errors joined into one")
	}
}
