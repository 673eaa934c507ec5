// Package bridge is the device layer between the engine and a compute
// backend: tensor handles, the op contract every backend implements, and the
// attention metadata the engine builds once per step.
package bridge

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor.
type DType uint8

const (
	F32 DType = iota
	F16
	BF16
	I32
)

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case F16, BF16:
		return 2
	case Packed:
		return 1 // bytes: a packed tensor's size is its format's (kernels/quant)
	default:
		return 4
	}
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case I32:
		return "i32"
	case Packed:
		return "packed"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType accepts the spellings used in suites, flags and safetensors
// headers (f32, float32, F32, bf16, BF16, ...).
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "f32", "float32", "fp32":
		return F32, nil
	case "f16", "float16", "fp16", "half":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "i32", "int32":
		return I32, nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want f32, f16 or bf16)", s)
}
