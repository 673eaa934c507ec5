package cpu

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
)

// What the kernel tuner (runner/tune) may change on this backend, and the
// source it hashes so a tuned config is dropped once the kernel it was
// measured on changes.

// kernelFiles is the Go source of each tunable kernel: its own code and the
// work splitting it depends on. The SIMD inner loops (package vec) are left
// out on purpose: they change with every architecture tweak, and the choice
// tuned here (dispatch, split) depends on them far less than on this code.
var kernelFiles = map[string][]string{
	"moe":    {"moe.go", "parallel.go"},
	"matmul": {"tunables.go", "parallel.go"},
}

//go:embed moe.go parallel.go tunables.go
var kernelSources embed.FS

var (
	hashOnce   sync.Once
	hashByName map[string]string
)

// KernelSourceHash is the sha256 (hex) of the Go source of a tunable CPU
// kernel ("moe", "matmul"), "" for a kernel without tunables. Line endings
// are normalised so a CRLF checkout hashes the same.
func KernelSourceHash(kernel string) string {
	hashOnce.Do(func() {
		hashByName = map[string]string{}
		for name, files := range kernelFiles {
			h := sha256.New()
			for _, f := range files {
				data, err := kernelSources.ReadFile(f)
				if err != nil {
					panic(err) // embedded at build time: cannot fail
				}
				h.Write([]byte(f + "\x00"))
				h.Write(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")))
			}
			hashByName[name] = hex.EncodeToString(h.Sum(nil))
		}
	})
	return hashByName[kernel]
}

// KernelSourceHash is the package function, as a method so callers can ask
// any backend through an interface without importing this package.
func (b *Backend) KernelSourceHash(kernel string) string { return KernelSourceHash(kernel) }

// MatMulSplitFunc chooses MatMul's work split for one call: output rows are
// cut in pieces of piece rows, handed out to threads goroutines as they
// finish the previous one (dynamic, so a core another process holds takes
// fewer pieces). piece <= 0 is the default's even split: one contiguous
// range per thread, in multiples of 16 rows.
type MatMulSplitFunc func(m, n, k int, dt bridge.DType) (piece, threads int)

// SetMatMulSplit installs f (nil: the default split, one contiguous range
// per thread in multiples of 16 rows). The engine installs its tuned split
// for the length of a step; the tuner installs one candidate at a time.
func (b *Backend) SetMatMulSplit(f func(m, n, k int, dt bridge.DType) (piece, threads int)) {
	b.matmulSplit = f
}

// matmulRows runs fn over the output rows [0,n) of an m×k · (n×k)ᵀ matmul,
// split as the installed MatMulSplitFunc says.
func (b *Backend) matmulRows(m, n, k int, dt bridge.DType, fn func(lo, hi int)) {
	if b.matmulSplit == nil {
		b.pool.forRange(n, matmulGrain, fn)
		return
	}
	piece, threads := b.matmulSplit(m, n, k, dt)
	threads = min(max(threads, 1), b.pool.threads)
	if piece <= 0 {
		pool{threads: threads}.forRange(n, matmulGrain, fn)
		return
	}
	pieces := (n + piece - 1) / piece
	pool{threads: threads}.forEach(pieces, func(i int) { fn(i*piece, min((i+1)*piece, n)) })
}
