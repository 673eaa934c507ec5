//go:build !amd64 || purego

package half

func hasAccel() bool { return false }

func bf16ToF32Arch(dst []float32, src []uint16) int { return 0 }
func f16ToF32Arch(dst []float32, src []uint16) int  { return 0 }
func f32ToBF16Arch(dst []uint16, src []float32) int { return 0 }
func f32ToF16Arch(dst []uint16, src []float32) int  { return 0 }
