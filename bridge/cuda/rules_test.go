package cuda

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// A format CUDA has no kernels for is refused with the list of those it
// has: every packed dtype it runs (ops.QuantDTypes) is named, and none it
// does not, so the message sends no one to a format by hand. No GPU needed.
func TestUnsupportedQuantNamesTheSupported(t *testing.T) {
	var rules QuantRules
	for _, spec := range []quant.Spec{{Type: quant.Affine, Bits: 7, Group: 64}, {Type: quant.Q5_K}, {Type: 200}} {
		err := rules.SupportsQuant(spec)
		if err == nil {
			t.Fatalf("%v: supported", spec)
		}
		msg := err.Error()
		// the formats it names: the parenthesis after the refused one
		named := map[string]bool{}
		for _, n := range strings.Split(strings.TrimSuffix(msg[strings.LastIndex(msg, "(")+1:], ")"), ", ") {
			named[n] = true
		}
		if !named["affine 4 and 8 bits"] {
			t.Errorf("the refusal of %v does not name affine 4 and 8 bits: %s", spec, msg)
		}
		for _, d := range ops.QuantDTypes {
			q, _ := d.Quant()
			if q.Type == quant.Affine {
				continue // named by its widths, above
			}
			if runs := rules.SupportsQuant(q) == nil; runs != named[q.String()] {
				t.Errorf("%s: runs on CUDA %v, named by the refusal of %v %v: %s", d, runs, spec, named[q.String()], msg)
			}
		}
	}
}
