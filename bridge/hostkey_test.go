package bridge

import "testing"

// Bytes are the same key only at the same address, length, dtype and
// content: a copy elsewhere, a shorter view, another dtype or new content
// in the same memory each make a key of their own.
func TestKeyOf(t *testing.T) {
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	k := KeyOf(F32, data)
	if KeyOf(F32, data) != k {
		t.Fatal("the same bytes gave two keys")
	}
	moved := append([]byte(nil), data...)
	changed := func() []byte { data[4095]++; return data }
	for _, c := range []struct {
		what string
		key  HostKey
	}{
		{"a copy", KeyOf(F32, moved)},
		{"a shorter view", KeyOf(F32, data[:4092])},
		{"another dtype", KeyOf(BF16, data)},
		{"new content", KeyOf(F32, changed())},
	} {
		if c.key == k {
			t.Errorf("%s has the key of the bytes it came from", c.what)
		}
	}
	if KeyOf(F32, nil) != KeyOf(F32, []byte{}) {
		t.Error("empty byte slices gave two keys")
	}
}
