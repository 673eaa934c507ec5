//go:build !amd64 || purego

package vec

import "github.com/mtlbench/mtlbench/kernels/quant"

func detectLevel() int { return levelGeneric }

func gemmBF16Arch(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) bool { return false }
func gemmF16Arch(dst []float32, ldd int, x []float32, w []uint16, m, n, k int) bool  { return false }
func gemmF32Arch(dst []float32, ldd int, x []float32, w []float32, m, n, k int) bool { return false }

func dotF32Arch(a, b []float32) float32                { return dotF32Generic(a, b) }
func sumBytesArch(buf []byte) (int, uint64)            { return 0, 0 }
func siluMulArch(out, gate, up []float32) int          { return 0 }
func expSubArch(x []float32, m float32) (int, float32) { return 0, 0 }
func geluArch(out, x []float32) int                    { return 0 }
func axpyRowsArch(acc, p, v []float32, d int) int      { return 0 }

// availableLevels lists the implementations tests can switch between.
func availableLevels() []int { return []int{levelGeneric} }

func dotU8Arch(x []float32, q []byte) float32 { return dotU8Generic(x, q) }
func dotI8Arch(x []float32, q []byte) float32 { return dotI8Generic(x, q) }

func dotNibArch(lo, hi []float32, q []byte) float32 { return dotNibGeneric(lo, hi, q) }

func qdotsArch(dst []float32, w *quant.Matrix, lo, hi int, x, p []float32) bool { return false }

func prepIntArch(l int, x []float32, dst []byte, bs []float32, n int, m float32) bool {
	return false
}
