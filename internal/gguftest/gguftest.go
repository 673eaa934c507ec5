// Package gguftest writes GGUF files of metadata only, for tests that need
// a file of exact keys and value types (docs/quantization.md, "GGUF files").
package gguftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// KV is one metadata entry. Value is a string, bool, uint16, uint32, int32,
// float32, or a slice of strings, int32s or float32s, written as GGUF's
// value type of that Go type.
type KV struct {
	Key   string
	Value any
}

// GGUF's value types (gguf.h).
const (
	typeU16    = 2
	typeU32    = 4
	typeI32    = 5
	typeF32    = 6
	typeBool   = 7
	typeString = 8
	typeArray  = 9
)

// Bytes is a GGUF version 3 file of no tensors and the entries in order.
func Bytes(entries ...KV) ([]byte, error) {
	var b bytes.Buffer
	w := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { w(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	w(uint32(3))
	w(uint64(0))
	w(uint64(len(entries)))
	for _, e := range entries {
		str(e.Key)
		switch v := e.Value.(type) {
		case string:
			w(uint32(typeString))
			str(v)
		case bool:
			w(uint32(typeBool))
			w(v)
		case uint16:
			w(uint32(typeU16))
			w(v)
		case uint32:
			w(uint32(typeU32))
			w(v)
		case int32:
			w(uint32(typeI32))
			w(v)
		case float32:
			w(uint32(typeF32))
			w(v)
		case []string:
			w(uint32(typeArray))
			w(uint32(typeString))
			w(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []int32:
			w(uint32(typeArray))
			w(uint32(typeI32))
			w(uint64(len(v)))
			w(v)
		case []float32:
			w(uint32(typeArray))
			w(uint32(typeF32))
			w(uint64(len(v)))
			w(v)
		default:
			return nil, fmt.Errorf("gguftest: key %s: a %T is not written", e.Key, v)
		}
	}
	return b.Bytes(), nil
}
