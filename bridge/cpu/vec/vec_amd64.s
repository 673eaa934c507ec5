//go:build !purego

#include "textflag.h"

// masktab<>+4*(8-r) holds r all-ones dwords then zeros: the VMASKMOVPS mask
// for an r-element tail (masked-off lanes are neither read nor written).
DATA masktab<>+0(SB)/8, $0xffffffffffffffff
DATA masktab<>+8(SB)/8, $0xffffffffffffffff
DATA masktab<>+16(SB)/8, $0xffffffffffffffff
DATA masktab<>+24(SB)/8, $0xffffffffffffffff
DATA masktab<>+32(SB)/8, $0
DATA masktab<>+40(SB)/8, $0
DATA masktab<>+48(SB)/8, $0
DATA masktab<>+56(SB)/8, $0
GLOBL masktab<>(SB), RODATA|NOPTR, $64

// func dotAVX2(a, b *float32, n int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	SUBQ $32, CX
	JL   end32

loop32:
	// Four independent accumulators hide the FMA latency.
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	JGE         loop32

end32:
	ADDQ $24, CX
	JL   end8

loop8:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JGE         loop8

end8:
	ADDQ $8, CX
	JZ   reduce
	MOVQ $8, AX
	SUBQ CX, AX
	LEAQ masktab<>(SB), DX
	VMOVDQU     (DX)(AX*4), Y8
	VMASKMOVPS  (SI), Y8, Y4
	VMASKMOVPS  (DI), Y8, Y5
	VFMADD231PS Y5, Y4, Y1

reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func sumBytesAVX2(p *byte, n int) uint64
// n is a positive multiple of 512. The buffer is read as 8 concurrent
// sequential streams (one per eighth): one stream leaves DRAM bandwidth
// unused (~20 vs ~29 GB/s on one Zen 4 core), as the core then has too few
// misses in flight. 256-bit loads measured faster than 512-bit ones there.
TEXT ·sumBytesAVX2(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	SHRQ  $3, CX
	MOVQ  CX, DX
	LEAQ  (DX)(DX*2), R9
	LEAQ  (DX)(DX*4), R10
	LEAQ  (R9)(DX*4), R11
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

loop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ (SI)(DX*1), Y2, Y2
	VPADDQ 32(SI)(DX*1), Y3, Y3
	VPADDQ (SI)(DX*2), Y0, Y0
	VPADDQ 32(SI)(DX*2), Y1, Y1
	VPADDQ (SI)(R9*1), Y2, Y2
	VPADDQ 32(SI)(R9*1), Y3, Y3
	VPADDQ (SI)(DX*4), Y0, Y0
	VPADDQ 32(SI)(DX*4), Y1, Y1
	VPADDQ (SI)(R10*1), Y2, Y2
	VPADDQ 32(SI)(R10*1), Y3, Y3
	VPADDQ (SI)(R9*2), Y0, Y0
	VPADDQ 32(SI)(R9*2), Y1, Y1
	VPADDQ (SI)(R11*1), Y2, Y2
	VPADDQ 32(SI)(R11*1), Y3, Y3
	ADDQ   $64, SI
	SUBQ   $64, CX
	JNZ    loop
	VPADDQ       Y1, Y0, Y0
	VPADDQ       Y3, Y2, Y2
	VPADDQ       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDQ       X1, X0, X0
	MOVQ         X0, AX
	VZEROUPPER
	MOVQ         AX, ret+16(FP)
	RET

// func dotU8AVX2(x *float32, q *byte, n int) float32: sum x[i]*float(q[i])
// over n (a multiple of 8) unsigned bytes, widened 8 at a time.
TEXT ·dotU8AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y3, Y3, Y3
u8loop16:
	CMPQ CX, $16
	JL   u8loop8
	VPMOVZXBD (DI), Y1
	VPMOVZXBD 8(DI), Y2
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VFMADD231PS (SI), Y1, Y0
	VFMADD231PS 32(SI), Y2, Y3
	ADDQ $16, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  u8loop16
u8loop8:
	CMPQ CX, $8
	JL   u8done
	VPMOVZXBD (DI), Y1
	VCVTDQ2PS Y1, Y1
	VFMADD231PS (SI), Y1, Y0
	ADDQ $8, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP  u8loop8
u8done:
	VADDPS Y3, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotI8AVX2(x *float32, q *byte, n int) float32: as dotU8AVX2 for
// signed bytes.
TEXT ·dotI8AVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y3, Y3, Y3
i8loop16:
	CMPQ CX, $16
	JL   i8loop8
	VPMOVSXBD (DI), Y1
	VPMOVSXBD 8(DI), Y2
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VFMADD231PS (SI), Y1, Y0
	VFMADD231PS 32(SI), Y2, Y3
	ADDQ $16, DI
	ADDQ $64, SI
	SUBQ $16, CX
	JMP  i8loop16
i8loop8:
	CMPQ CX, $8
	JL   i8done
	VPMOVSXBD (DI), Y1
	VCVTDQ2PS Y1, Y1
	VFMADD231PS (SI), Y1, Y0
	ADDQ $8, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP  i8loop8
i8done:
	VADDPS Y3, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotNibAVX2(lo, hi *float32, q *byte, n int) float32: sum over n (a
// multiple of 8) bytes of lo[i]*float(q[i]&15) + hi[i]*float(q[i]>>4).
TEXT ·dotNibAVX2(SB), NOSPLIT, $0-36
	MOVQ lo+0(FP), SI
	MOVQ hi+8(FP), DX
	MOVQ q+16(FP), DI
	MOVQ n+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y3, Y3, Y3
	MOVQ $15, AX
	MOVQ AX, X5
	VPBROADCASTD X5, Y5
nibloop:
	CMPQ CX, $8
	JL   nibdone
	VPMOVZXBD (DI), Y1
	VPSRLD $4, Y1, Y2
	VPAND Y5, Y1, Y1
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VFMADD231PS (SI), Y1, Y0
	VFMADD231PS (DX), Y2, Y3
	ADDQ $8, DI
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $8, CX
	JMP  nibloop
nibdone:
	VADDPS Y3, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+32(FP)
	RET

// expf's constants (Cephes): |t| is clamped where 2^round(t·log2 e) still
// has a normal exponent, ln 2 is split in two for an exact reduction, and
// e^r on |r| <= ln2/2 is 1 + r + r²·p(r).
DATA expc<>+0(SB)/4, $88.3762626647949
DATA expc<>+4(SB)/4, $-88.3762626647949
DATA expc<>+8(SB)/4, $1.44269504088896341
DATA expc<>+12(SB)/4, $0.693359375
DATA expc<>+16(SB)/4, $-2.12194440e-4
DATA expc<>+20(SB)/4, $1.9875691500e-4
DATA expc<>+24(SB)/4, $1.3981999507e-3
DATA expc<>+28(SB)/4, $8.3334519073e-3
DATA expc<>+32(SB)/4, $4.1665795894e-2
DATA expc<>+36(SB)/4, $1.6666665459e-1
DATA expc<>+40(SB)/4, $5.0000001201e-1
DATA expc<>+44(SB)/4, $1.0
DATA expc<>+48(SB)/4, $127
DATA expc<>+52(SB)/4, $0x80000000
DATA expc<>+56(SB)/4, $-1.5957691216057308
DATA expc<>+60(SB)/4, $-0.07135481627260025
GLOBL expc<>(SB), RODATA|NOPTR, $64

// EXPC loads the constants EXPF keeps in registers (AX: expc).
#define EXPC \
	VBROADCASTSS 4(AX), Y13; \
	VBROADCASTSS 8(AX), Y12; \
	VBROADCASTSS 12(AX), Y11; \
	VBROADCASTSS 16(AX), Y10; \
	VBROADCASTSS 24(AX), Y7; \
	VBROADCASTSS 28(AX), Y6; \
	VBROADCASTSS 32(AX), Y5; \
	VBROADCASTSS 36(AX), Y4; \
	VBROADCASTSS 40(AX), Y3; \
	VBROADCASTSS 44(AX), Y15; \
	VPBROADCASTD 48(AX), Y9

// EXPF sets Y0 = e^Y1 for Y1 at most the upper clamp; lanes below the
// lower clamp, and NaN lanes, give 0. Clobbers Y1 and Y2.
// n = round(t·log2 e), r = t - n·ln 2, e^t = (1 + r + r²·p(r))·2^n.
#define EXPF \
	VMAXPS       Y13, Y1, Y1; \
	VMULPS       Y12, Y1, Y2; \
	VROUNDPS     $0, Y2, Y2; \
	VFNMADD231PS Y11, Y2, Y1; \
	VFNMADD231PS Y10, Y2, Y1; \
	VBROADCASTSS 20(AX), Y0; \
	VFMADD213PS  Y7, Y1, Y0; \
	VFMADD213PS  Y6, Y1, Y0; \
	VFMADD213PS  Y5, Y1, Y0; \
	VFMADD213PS  Y4, Y1, Y0; \
	VFMADD213PS  Y3, Y1, Y0; \
	VMULPS       Y1, Y0, Y0; \
	VFMADD213PS  Y1, Y1, Y0; \
	VADDPS       Y15, Y0, Y0; \
	VCVTPS2DQ    Y2, Y2; \
	VPADDD       Y9, Y2, Y2; \
	VPSLLD       $23, Y2, Y2; \
	VMULPS       Y2, Y0, Y0

// func siluMulAVX2(out, gate, up *float32, n int)
// out[i] = gate[i] / (1 + e^-gate[i]) * up[i] for n a multiple of 8; out
// may be gate or up. A gate that is NaN gives NaN (the clamps keep the
// exponent's bound, the division keeps the NaN).
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DX
	MOVQ         gate+8(FP), SI
	MOVQ         up+16(FP), DI
	MOVQ         n+24(FP), CX
	LEAQ         expc<>(SB), AX
	EXPC
	VBROADCASTSS 0(AX), Y14
	VBROADCASTSS 52(AX), Y8
	SUBQ         $8, CX
	JL           silu_done

silu_loop:
	VXORPS  (SI), Y8, Y1
	VMINPS  Y14, Y1, Y1
	EXPF
	VADDPS  Y15, Y0, Y0
	VMOVUPS (SI), Y1
	VDIVPS  Y0, Y1, Y1
	VMULPS  (DI), Y1, Y1
	VMOVUPS Y1, (DX)
	ADDQ    $32, SI
	ADDQ    $32, DI
	ADDQ    $32, DX
	SUBQ    $8, CX
	JGE     silu_loop

silu_done:
	VZEROUPPER
	RET

// func expSubAVX2(x *float32, n int, m float32) float32
// x[i] = e^(x[i]-m) for n a multiple of 8, returning their sum: softmax's
// numerators, m the row's largest value (so no lane needs the upper clamp).
TEXT ·expSubAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y14
	LEAQ         expc<>(SB), AX
	EXPC
	VXORPS       Y8, Y8, Y8
	SUBQ         $8, CX
	JL           exp_done

exp_loop:
	VMOVUPS (SI), Y1
	VSUBPS  Y14, Y1, Y1
	EXPF
	VMOVUPS Y0, (SI)
	VADDPS  Y0, Y8, Y8
	ADDQ    $32, SI
	SUBQ    $8, CX
	JGE     exp_loop

exp_done:
	VEXTRACTF128 $1, Y8, X1
	VADDPS       X1, X8, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0xb1, X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func geluAVX2(out, x *float32, n int)
// out[i] = GELU(x[i]) with the tanh approximation, for n a multiple of 8;
// out may be x. 0.5·x·(1 + tanh u) is x / (1 + e^-2u), u = √(2/π)·(x +
// 0.044715·x³): SiLU's form, with no cancellation near tanh u = -1.
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ         out+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	LEAQ         expc<>(SB), AX
	EXPC
	VBROADCASTSS 0(AX), Y14
	VBROADCASTSS 56(AX), Y8
	SUBQ         $8, CX
	JL           gelu_done

gelu_loop:
	// t = -2u = x·(-2√(2/π) - 2√(2/π)·0.044715·x²), clamped.
	VMOVUPS      (SI), Y1
	VMULPS       Y1, Y1, Y2
	VBROADCASTSS 60(AX), Y0
	VFMADD213PS  Y8, Y2, Y0
	VMULPS       Y0, Y1, Y1
	VMINPS       Y14, Y1, Y1
	EXPF
	VADDPS       Y15, Y0, Y0
	VMOVUPS      (SI), Y1
	VDIVPS       Y0, Y1, Y1
	VMOVUPS      Y1, (DX)
	ADDQ         $32, SI
	ADDQ         $32, DX
	SUBQ         $8, CX
	JGE          gelu_loop

gelu_done:
	VZEROUPPER
	RET

// func axpyRowsAVX2(acc, p, v *float32, n, d int)
// acc[c] += p[j]·v[j·d+c] for j < n, c < d&^7, in j order (one FMA each),
// 64 columns at a time in registers while the rows stream past, then 8.
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ v+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ d+32(FP), R8
	SHLQ $2, R8         // row stride in bytes
	MOVQ R8, R9
	ANDQ $-256, R9      // bytes of the 64-column chunks
	MOVQ R8, R10
	ANDQ $-32, R10      // bytes of the 8-column chunks
	XORQ R11, R11       // column offset in bytes
	TESTQ CX, CX
	JZ   rows_done

rows_c64:
	CMPQ R11, R9
	JGE  rows_c8
	VMOVUPS 0(DI)(R11*1), Y0
	VMOVUPS 32(DI)(R11*1), Y1
	VMOVUPS 64(DI)(R11*1), Y2
	VMOVUPS 96(DI)(R11*1), Y3
	VMOVUPS 128(DI)(R11*1), Y4
	VMOVUPS 160(DI)(R11*1), Y5
	VMOVUPS 192(DI)(R11*1), Y6
	VMOVUPS 224(DI)(R11*1), Y7
	LEAQ (DX)(R11*1), AX
	XORQ BX, BX

rows_j64:
	VBROADCASTSS (SI)(BX*4), Y8
	VFMADD231PS  0(AX), Y8, Y0
	VFMADD231PS  32(AX), Y8, Y1
	VFMADD231PS  64(AX), Y8, Y2
	VFMADD231PS  96(AX), Y8, Y3
	VFMADD231PS  128(AX), Y8, Y4
	VFMADD231PS  160(AX), Y8, Y5
	VFMADD231PS  192(AX), Y8, Y6
	VFMADD231PS  224(AX), Y8, Y7
	ADDQ         R8, AX
	INCQ         BX
	CMPQ         BX, CX
	JL           rows_j64
	VMOVUPS Y0, 0(DI)(R11*1)
	VMOVUPS Y1, 32(DI)(R11*1)
	VMOVUPS Y2, 64(DI)(R11*1)
	VMOVUPS Y3, 96(DI)(R11*1)
	VMOVUPS Y4, 128(DI)(R11*1)
	VMOVUPS Y5, 160(DI)(R11*1)
	VMOVUPS Y6, 192(DI)(R11*1)
	VMOVUPS Y7, 224(DI)(R11*1)
	ADDQ $256, R11
	JMP  rows_c64

rows_c8:
	CMPQ R11, R10
	JGE  rows_done
	VMOVUPS 0(DI)(R11*1), Y0
	LEAQ (DX)(R11*1), AX
	XORQ BX, BX

rows_j8:
	VBROADCASTSS (SI)(BX*4), Y8
	VFMADD231PS  0(AX), Y8, Y0
	ADDQ         R8, AX
	INCQ         BX
	CMPQ         BX, CX
	JL           rows_j8
	VMOVUPS Y0, 0(DI)(R11*1)
	ADDQ $32, R11
	JMP  rows_c8

rows_done:
	VZEROUPPER
	RET
