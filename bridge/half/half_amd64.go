//go:build amd64 && !purego

package half

import "golang.org/x/sys/cpu"

// hasAccel: the kernels need AVX2 (HasAVX2 includes the OS-saves-the-
// registers check) and F16C.
func hasAccel() bool { return cpu.X86.HasAVX2 && cpu.X86.HasF16C }

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n int)

//go:noescape
func f32ToBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func f32ToF16AVX2(dst *uint16, src *float32, n int)

// The conversion kernels handle whole groups of 16 (8 for f32->f16); they
// return how many elements they converted and the caller finishes in Go.
func bf16ToF32Arch(dst []float32, src []uint16) int {
	n := len(src) &^ 15
	if n > 0 {
		bf16ToF32AVX2(&dst[0], &src[0], n)
	}
	return n
}

func f16ToF32Arch(dst []float32, src []uint16) int {
	n := len(src) &^ 15
	if n > 0 {
		f16ToF32AVX2(&dst[0], &src[0], n)
	}
	return n
}

func f32ToBF16Arch(dst []uint16, src []float32) int {
	n := len(src) &^ 15
	if n > 0 {
		f32ToBF16AVX2(&dst[0], &src[0], n)
	}
	return n
}

func f32ToF16Arch(dst []uint16, src []float32) int {
	n := len(src) &^ 15
	if n > 0 {
		f32ToF16AVX2(&dst[0], &src[0], n)
	}
	return n
}
