package darwin

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

func TestEncodeConstants(t *testing.T) {
	decls := []fcDecl{
		{Name: "scale", Type: dataTypeFloat, Index: 1},
		{Name: "has_bias", Type: dataTypeBool, Index: 0, Required: true},
		{Name: "n", Type: dataTypeUShort, Index: 2},
		{Name: "h", Type: dataTypeHalf, Index: 3},
		{Name: "b", Type: dataTypeBFloat, Index: 4},
		{Name: "k", Type: dataTypeInt, Index: 5},
		{Name: "l", Type: dataTypeLong, Index: 6},
	}
	vals, key, err := encodeConstants("axpb", decls, mtl.FunctionConstants{
		0: true, 1: float32(3), 2: 513, 3: 1.5, 4: float32(-2), 5: int32(-7), 6: uint8(9), 9: "ignored: not declared",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []fcValue{
		{0, dataTypeBool, []byte{1}},
		{1, dataTypeFloat, []byte{0, 0, 0x40, 0x40}},
		{2, dataTypeUShort, []byte{1, 2}},
		{3, dataTypeHalf, []byte{0x00, 0x3e}},
		{4, dataTypeBFloat, []byte{0x00, 0xc0}},
		{5, dataTypeInt, []byte{0xf9, 0xff, 0xff, 0xff}},
		{6, dataTypeLong, []byte{9, 0, 0, 0, 0, 0, 0, 0}},
	}
	if len(vals) != len(want) {
		t.Fatalf("got %v", vals)
	}
	for i := range want {
		if vals[i].Index != want[i].Index || vals[i].Type != want[i].Type || !bytes.Equal(vals[i].Bytes, want[i].Bytes) {
			t.Errorf("value %d: got %+v, want %+v", i, vals[i], want[i])
		}
	}
	_, key2, _ := encodeConstants("axpb", decls, mtl.FunctionConstants{0: true, 1: float64(3), 2: uint16(513), 3: float32(1.5), 4: -2.0, 5: -7, 6: int64(9)})
	if key != key2 {
		t.Errorf("equal values, different keys: %q, %q", key, key2)
	}
	_, key3, _ := encodeConstants("axpb", decls, mtl.FunctionConstants{0: false})
	if key3 == key {
		t.Error("different values, same key")
	}
}

func TestEncodeConstantsErrors(t *testing.T) {
	decls := []fcDecl{{Name: "has_bias", Type: dataTypeBool, Index: 0, Required: true}, {Name: "n", Type: dataTypeUChar, Index: 1}, {Name: "v", Type: 6 /* float4 */, Index: 2}}
	for _, c := range []struct {
		fc   mtl.FunctionConstants
		want string
	}{
		{nil, "metal: kernel axpb needs function constant 0 (bool has_bias)"},
		{mtl.FunctionConstants{0: int32(1)}, "function constant 0 (bool has_bias) cannot take int32 1"},
		{mtl.FunctionConstants{0: true, 1: 256}, "function constant 1 (uchar n): 256 out of range"},
		{mtl.FunctionConstants{0: true, 1: -1}, "out of range"},
		{mtl.FunctionConstants{0: true, 1: 1.0}, "cannot take float64"},
		{mtl.FunctionConstants{0: true, 2: float32(1)}, "only scalar"},
	} {
		_, _, err := encodeConstants("axpb", decls, c.fc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.fc, err, c.want)
		}
	}
	// Unsigned Go values into signed types, and the 64-bit edges.
	for _, c := range []struct {
		d  fcDecl
		v  any
		ok bool
	}{
		{fcDecl{Type: dataTypeInt}, uint32(math.MaxInt32), true},
		{fcDecl{Type: dataTypeInt}, uint32(math.MaxInt32 + 1), false},
		{fcDecl{Type: dataTypeLong}, uint64(math.MaxUint64), false},
		{fcDecl{Type: dataTypeULong}, uint64(math.MaxUint64), true},
		{fcDecl{Type: dataTypeULong}, -1, false},
		{fcDecl{Type: dataTypeChar}, int8(-128), true},
		{fcDecl{Type: dataTypeShort}, 40000, false},
	} {
		_, err := encodeConstant(c.d, c.v)
		if (err == nil) != c.ok {
			t.Errorf("%s %T %v: err %v", dataTypeName(c.d.Type), c.v, c.v, err)
		}
	}
}

func TestHalfConversion(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff},
		{65520, 0x7c00}, // rounds up to Inf
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{6.103515625e-05, 0x0400},    // smallest normal
		{5.960464477539063e-08, 0x1}, // smallest subnormal
		{2.9802322387695312e-08, 0},  // half of it: a tie, to even (0)
		{4.470348358154297e-08, 0x1}, // 0.75 of it rounds up
		{1.0009765625, 0x3c01},       // exactly representable
		{1.00048828125, 0x3c00},      // tie between 0x3c00 and 0x3c01: even
		{1.00146484375, 0x3c02},      // tie between 0x3c01 and 0x3c02: even
		{0.1, 0x2e66},
	} {
		if got := float32ToHalf(c.f); got != c.want {
			t.Errorf("half(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if h := float32ToHalf(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("half(NaN) = %#04x", h)
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0.1, 0x3dcd}, {float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie: even
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie: even
		{math.Float32frombits(0x3f808001), 0x3f81},
	} {
		if got := float32ToBFloat(c.f); got != c.want {
			t.Errorf("bfloat(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	if b := float32ToBFloat(float32(math.NaN())); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
		t.Errorf("bfloat(NaN) = %#04x", b)
	}
}
