package cuda

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
)

// CheckShape refuses heads past the attention kernels' 256 values and more
// experts than the routing's 512, with the limit in the error, and takes
// the largest of each (it reads no device state, so it runs without a GPU).
func TestCheckShape(t *testing.T) {
	b := &Backend{}
	for _, c := range []struct {
		s   bridge.ModelShape
		err string
	}{
		{bridge.ModelShape{Heads: 32, KVHeads: 8, HeadDim: 256, Experts: 512, TopK: 8}, ""},
		{bridge.ModelShape{Heads: 32, KVHeads: 8, HeadDim: 320}, "cuda: heads of 320 values: the attention kernels take at most 256"},
		{bridge.ModelShape{Heads: 32, KVHeads: 8, HeadDim: 128, Experts: 640, TopK: 8}, "cuda: 640 experts: the routing takes at most 512"},
	} {
		err := b.CheckShape(c.s)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: err = %v, want %q", c.s, err, c.err)
		}
	}
}
