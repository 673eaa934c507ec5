//go:build !purego

#include "textflag.h"

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
// n is a positive multiple of 16.
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

loop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       loop
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
// n is a positive multiple of 16.
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       loop
	VZEROUPPER
	RET

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
// n is a positive multiple of 16. Immediate 0 = round to nearest even,
// regardless of MXCSR.
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

loop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, (DI)
	VCVTPS2PH $0, Y1, 16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       loop
	VZEROUPPER
	RET

// func f32ToBF16AVX2(dst *uint16, src *float32, n int)
// n is a positive multiple of 16. Same integer rounding as BF16: add
// 0x7fff + lsb, keep the top half; NaNs become (bits>>16)|0x40.
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x7fff, AX
	MOVQ         AX, X10
	VPBROADCASTD X10, Y10
	MOVL         $1, AX
	MOVQ         AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x40, AX
	MOVQ         AX, X12
	VPBROADCASTD X12, Y12

loop:
	VMOVDQU   (SI), Y0
	VPSRLD    $16, Y0, Y1
	VPAND     Y11, Y1, Y2
	VPADDD    Y10, Y0, Y3
	VPADDD    Y2, Y3, Y3
	VPSRLD    $16, Y3, Y3
	VPOR      Y12, Y1, Y1
	VCMPPS    $3, Y0, Y0, Y2
	VPBLENDVB Y2, Y1, Y3, Y3

	VMOVDQU   32(SI), Y4
	VPSRLD    $16, Y4, Y5
	VPAND     Y11, Y5, Y6
	VPADDD    Y10, Y4, Y7
	VPADDD    Y6, Y7, Y7
	VPSRLD    $16, Y7, Y7
	VPOR      Y12, Y5, Y5
	VCMPPS    $3, Y4, Y4, Y6
	VPBLENDVB Y6, Y5, Y7, Y7

	// Pack 2x8 dwords (all <= 0xffff) to 16 words; packing works per
	// 128-bit lane, so VPERMQ restores element order.
	VPACKUSDW Y7, Y3, Y3
	VPERMQ    $0xd8, Y3, Y3
	VMOVDQU   Y3, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       loop
	VZEROUPPER
	RET
