package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// FindNonFinite returns the first of cfg's tensors in src that holds a NaN
// or an infinity (packed ones as they dequantize), "" when none does. It
// reads every weight, so it is for explaining a failure, not for a run's
// path.
func FindNonFinite(cfg *Config, src Source) (string, error) {
	ps, _ := src.(PackedSource)
	var row []float32
	for _, t := range cfg.Tensors() {
		if ps != nil {
			p, packed, err := ps.Packed(t)
			if err != nil {
				return "", err
			}
			if packed {
				rows, k := t.Shape[0], t.Shape[len(t.Shape)-1]
				m := &quant.Matrix{Spec: p.Spec, Rows: rows, K: k, Data: p.Data, Scales: p.Scales, Biases: p.Biases}
				if cap(row) < k {
					row = make([]float32, k)
				}
				row = row[:k]
				for r := range rows {
					m.Row(r, row)
					if _, _, bad := NonFinite(row); bad {
						return t.Name, nil
					}
				}
				continue
			}
		}
		dt, data, err := src.Tensor(t)
		if err != nil {
			return "", err
		}
		if bad, err := floatsNonFinite(dt, data); err != nil || bad {
			return t.Name, err
		}
	}
	return "", nil
}

// NonFinite finds the first NaN or infinite value of x.
func NonFinite(x []float32) (int, float32, bool) {
	for i, v := range x {
		// An all-ones exponent: NaN or an infinity.
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i, v, true
		}
	}
	return 0, 0, false
}

// floatsNonFinite reports whether little-endian floats of dtype dt hold a
// NaN or an infinity: an all-ones exponent in each format.
func floatsNonFinite(dt bridge.DType, data []byte) (bool, error) {
	switch dt {
	case bridge.F32:
		for i := 0; i+4 <= len(data); i += 4 {
			if binary.LittleEndian.Uint32(data[i:])&0x7f800000 == 0x7f800000 {
				return true, nil
			}
		}
	case bridge.F16:
		for i := 0; i+2 <= len(data); i += 2 {
			if binary.LittleEndian.Uint16(data[i:])&0x7c00 == 0x7c00 {
				return true, nil
			}
		}
	case bridge.BF16:
		for i := 0; i+2 <= len(data); i += 2 {
			if binary.LittleEndian.Uint16(data[i:])&0x7f80 == 0x7f80 {
				return true, nil
			}
		}
	default:
		return false, fmt.Errorf("weights of dtype %v", dt)
	}
	return false, nil
}
