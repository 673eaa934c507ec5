package main

import (
	"encoding/binary"
	"math"
)

// kargs packs one of ggml-metal-impl.h's argument structs as C lays it out:
// each field at its natural alignment, the struct padded to 8 bytes.
type kargs struct{ b []byte }

func (k *kargs) align(n int) {
	for len(k.b)%n != 0 {
		k.b = append(k.b, 0)
	}
}

func (k *kargs) i32(v ...int) *kargs {
	for _, x := range v {
		k.align(4)
		k.b = binary.LittleEndian.AppendUint32(k.b, uint32(int32(x)))
	}
	return k
}

func (k *kargs) i16(v ...int) *kargs {
	for _, x := range v {
		k.align(2)
		k.b = binary.LittleEndian.AppendUint16(k.b, uint16(int16(x)))
	}
	return k
}

func (k *kargs) u64(v ...int) *kargs {
	for _, x := range v {
		k.align(8)
		k.b = binary.LittleEndian.AppendUint64(k.b, uint64(x))
	}
	return k
}

func (k *kargs) f32(v ...float32) *kargs {
	for _, x := range v {
		k.align(4)
		k.b = binary.LittleEndian.AppendUint32(k.b, math.Float32bits(x))
	}
	return k
}

func (k *kargs) done() []byte { k.align(8); return k.b }
