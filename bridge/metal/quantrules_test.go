package metal_test

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// A format Metal has no kernels for is refused with the list of those it
// has: every packed dtype the kernels run (ops.QuantDTypes) is in it, so
// the message sends no one to a format by hand when Metal runs it.
func TestUnsupportedQuantNamesTheSupported(t *testing.T) {
	var rules metal.QuantRules
	for _, c := range []struct {
		name string
		spec quant.Spec
	}{
		{"affine 7-bit", quant.Spec{Type: quant.Affine, Bits: 7, Group: 64}},
		{"an unknown type", quant.Spec{Type: 200}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := rules.SupportsQuant(c.spec)
			if err == nil {
				t.Fatalf("%v: supported", c.spec)
			}
			msg := err.Error()
			for _, d := range ops.QuantDTypes {
				q, _ := d.Quant()
				if rules.SupportsQuant(q) != nil {
					continue
				}
				want := q.String()
				if q.Type == quant.Affine {
					want = "affine 2, 3, 4, 5, 6 and 8 bits"
				}
				if !strings.Contains(msg, want) {
					t.Errorf("%s runs on Metal, but the refusal of %v does not name it: %s", d, c.spec, msg)
				}
			}
		})
	}
}
