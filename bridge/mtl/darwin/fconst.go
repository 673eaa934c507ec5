package darwin

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// MTLDataType values of the scalar types a function constant may have
// (Metal/MTLDataType.h).
const (
	dataTypeFloat  = 3
	dataTypeHalf   = 16
	dataTypeInt    = 29
	dataTypeUInt   = 33
	dataTypeShort  = 37
	dataTypeUShort = 41
	dataTypeChar   = 45
	dataTypeUChar  = 49
	dataTypeBool   = 53
	dataTypeLong   = 81
	dataTypeULong  = 85
	dataTypeBFloat = 121
)

// dataTypeName is the MSL spelling of an MTLDataType, for messages.
func dataTypeName(t uint64) string {
	switch t {
	case dataTypeFloat:
		return "float"
	case dataTypeHalf:
		return "half"
	case dataTypeBFloat:
		return "bfloat"
	case dataTypeInt:
		return "int"
	case dataTypeUInt:
		return "uint"
	case dataTypeShort:
		return "short"
	case dataTypeUShort:
		return "ushort"
	case dataTypeChar:
		return "char"
	case dataTypeUChar:
		return "uchar"
	case dataTypeBool:
		return "bool"
	case dataTypeLong:
		return "long"
	case dataTypeULong:
		return "ulong"
	}
	return fmt.Sprintf("MTLDataType(%d)", t)
}

// fcDecl is a function constant a kernel declares, as its unspecialised
// MTLFunction's functionConstantsDictionary lists it.
type fcDecl struct {
	Name     string
	Type     uint64 // MTLDataType
	Index    int
	Required bool // false when the kernel guards it with is_function_constant_defined
}

// fcValue is one value for setConstantValue:type:atIndex:, encoded in the
// constant's declared type.
type fcValue struct {
	Index int
	Type  uint64
	Bytes []byte // little endian, the type's width
}

// encodeConstants checks fc against the kernel's declarations and encodes
// each value in the declared type, as the emulator does: a bool constant
// takes a Go bool, a float, half or bfloat one a float32 or float64, an
// integer one any Go integer in its range. Values at indices the kernel does
// not declare are ignored. It also returns the pipeline cache key of the
// specialisation.
func encodeConstants(kernel string, decls []fcDecl, fc mtl.FunctionConstants) ([]fcValue, string, error) {
	sorted := append([]fcDecl(nil), decls...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	var out []fcValue
	var key []string
	done := map[int]bool{}
	for _, d := range sorted {
		v, ok := fc[d.Index]
		if !ok {
			if d.Required {
				return nil, "", fmt.Errorf("metal: kernel %s needs function constant %d (%s %s)", kernel, d.Index, dataTypeName(d.Type), d.Name)
			}
			continue
		}
		if done[d.Index] {
			continue // two declarations share an index; one value serves both
		}
		b, err := encodeConstant(d, v)
		if err != nil {
			return nil, "", fmt.Errorf("metal: kernel %s: %w", kernel, err)
		}
		done[d.Index] = true
		out = append(out, fcValue{Index: d.Index, Type: d.Type, Bytes: b})
		key = append(key, fmt.Sprintf("%d=%d:%x", d.Index, d.Type, b))
	}
	return out, kernel + "|" + strings.Join(key, ","), nil
}

func encodeConstant(d fcDecl, v any) ([]byte, error) {
	bad := func() error {
		return fmt.Errorf("function constant %d (%s %s) cannot take %T %v", d.Index, dataTypeName(d.Type), d.Name, v, v)
	}
	rangeErr := func() error {
		return fmt.Errorf("function constant %d (%s %s): %v out of range", d.Index, dataTypeName(d.Type), d.Name, v)
	}
	switch d.Type {
	case dataTypeBool:
		x, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		if x {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case dataTypeFloat, dataTypeHalf, dataTypeBFloat:
		var f float64
		switch x := v.(type) {
		case float32:
			f = float64(x)
		case float64:
			f = x
		default:
			return nil, bad()
		}
		switch d.Type {
		case dataTypeFloat:
			return binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(f))), nil
		case dataTypeHalf:
			return binary.LittleEndian.AppendUint16(nil, float32ToHalf(float32(f))), nil
		default:
			return binary.LittleEndian.AppendUint16(nil, float32ToBFloat(float32(f))), nil
		}
	}
	var width int
	var lo, hi int64
	var hiU uint64
	signed := true
	switch d.Type {
	case dataTypeChar:
		width, lo, hi = 1, math.MinInt8, math.MaxInt8
	case dataTypeUChar:
		width, hiU, signed = 1, math.MaxUint8, false
	case dataTypeShort:
		width, lo, hi = 2, math.MinInt16, math.MaxInt16
	case dataTypeUShort:
		width, hiU, signed = 2, math.MaxUint16, false
	case dataTypeInt:
		width, lo, hi = 4, math.MinInt32, math.MaxInt32
	case dataTypeUInt:
		width, hiU, signed = 4, math.MaxUint32, false
	case dataTypeLong:
		width, lo, hi = 8, math.MinInt64, math.MaxInt64
	case dataTypeULong:
		width, hiU, signed = 8, math.MaxUint64, false
	default:
		return nil, fmt.Errorf("function constant %d (%s %s): only scalar bool, integer and floating-point constants are supported", d.Index, dataTypeName(d.Type), d.Name)
	}
	var i int64
	var u uint64
	var neg, isUnsigned bool
	switch x := v.(type) {
	case int:
		i = int64(x)
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	case uint:
		u, isUnsigned = uint64(x), true
	case uint8:
		u, isUnsigned = uint64(x), true
	case uint16:
		u, isUnsigned = uint64(x), true
	case uint32:
		u, isUnsigned = uint64(x), true
	case uint64:
		u, isUnsigned = x, true
	default:
		return nil, bad()
	}
	if !isUnsigned {
		neg = i < 0
		u = uint64(i)
	}
	switch {
	case signed && isUnsigned && u > uint64(hi):
		return nil, rangeErr()
	case signed && !isUnsigned && (i < lo || i > hi):
		return nil, rangeErr()
	case !signed && (neg || u > hiU):
		return nil, rangeErr()
	}
	return binary.LittleEndian.AppendUint64(nil, u)[:width], nil
}

// float32ToHalf rounds f to the nearest IEEE half, ties to even.
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	man := b & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // overflows to Inf
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		h := uint32(exp-127+15)<<10 | man>>13
		rest := man & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // may carry into the exponent, up to Inf: still right
		}
		return sign | uint16(h)
	case exp-127 >= -25: // subnormal half
		man |= 0x800000
		shift := uint(-(exp - 127) - 14 + 13)
		h := man >> shift
		rest := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || rest == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	return sign // underflows to zero
}

// float32ToBFloat rounds f to the nearest bfloat16, ties to even.
func float32ToBFloat(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
