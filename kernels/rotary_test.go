package kernels

import "testing"

// Keys tell tables apart: by head size, base and every frequency; a keyed
// Rotary answers for its own head size and computes any other.
func TestRotaryKey(t *testing.T) {
	a := Rotary{Theta: 1e4}
	b := Rotary{Theta: 1e4, Freqs: a.InvFreq(64)}
	c := Rotary{Theta: 1e4, Freqs: append([]float32(nil), b.Freqs...)}
	c.Freqs[31] *= 1.0000001
	keys := map[string]string{}
	for name, k := range map[string]string{
		"plain 64": a.Key(64), "plain 128": a.Key(128), "theta": Rotary{Theta: 1e6}.Key(64),
		"table": b.Key(64), "table, one frequency apart": c.Key(64),
	} {
		if other, ok := keys[k]; ok {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		keys[k] = name
	}
	if k := b.Keyed(64); k.Key(64) != b.Key(64) || k.Key(128) != b.Key(128) {
		t.Errorf("keyed %q/%q, computed %q/%q", k.Key(64), k.Key(128), b.Key(64), b.Key(128))
	}
	if err := b.Check(32); err == nil {
		t.Error("32 frequencies accepted for heads of 32")
	}
}
