package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
)

// A step's error word reads as its kernels' errors; a router's NaN logits
// wrap bridge.ErrNonFinite, which the engine explains by the weight at
// fault, and the others do not (it reads no device state, so it runs
// without a GPU).
func TestStepErrorWord(t *testing.T) {
	for _, c := range []struct {
		word      int32
		want      string
		nonFinite bool
	}{
		{1, "embedding: token id outside the vocabulary", false},
		{2, "moe: router produced NaN logits", true},
		{2 | 4, "attention: slot mapping outside the KV cache", true},
		{16, "kernel error word 0x10", false},
	} {
		err := stepError(c.word)
		if !strings.Contains(err.Error(), c.want) || errors.Is(err, bridge.ErrNonFinite) != c.nonFinite {
			t.Errorf("word %#x: %v (non-finite %v), want %q (non-finite %v)", c.word, err, errors.Is(err, bridge.ErrNonFinite), c.want, c.nonFinite)
		}
	}
}
