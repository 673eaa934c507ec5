//go:build linux

package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// iqHostHarness compiles quant.cu's IQ unit decode (IQRaw's fetch and
// decode, with iqgrid.cu's grids) as host C++ and checks every unit of the
// blocks in blocks.bin against the values that follow them: for each
// format in iqHostTypes' order, nb blocks, then their 256·nb f32 values.
const iqHostHarness = `
#include <cstdio>
#include <cstring>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __constant__
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
template <class T> T __ldg(const T* p) { T v; memcpy(&v, p, sizeof v); return v; }
static int __popc(u32 x) { return __builtin_popcount(x); }
static float f16_to_f32(u16 h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
#include "iqgrid.cu"
#include "iq_section.h"

template <int F> int check(FILE* f, int nb, const char* name) {
    const int bb = IQRaw<F>::bytes;
    std::vector<unsigned char> data(nb * bb);
    std::vector<float> want(256 * nb);
    if (fread(data.data(), 1, nb * bb, f) != (size_t)(nb * bb) || fread(want.data(), 4, 256 * nb, f) != (size_t)(256 * nb)) {
        printf("%s: short read\n", name);
        return 1;
    }
    int bad = 0;
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < 8; c++) {
            IQRaw<F> raw;
            raw.fetch(data.data() + b * bb, c);
            float q[32], s0, s1;
            raw.decode(q, s0, s1);
            for (int l = 0; l < 32; l++) {
                float v = (l < 16 ? s0 : s1) * q[l], w = want[256 * b + 32 * c + l];
                if (memcmp(&v, &w, 4) != 0 && bad++ < 5) printf("%s block %d unit %d value %d: %g, want %g\n", name, b, c, l, v, w);
            }
        }
    printf("%s: %d of %d values differ\n", name, bad, 256 * nb);
    return bad;
}

int main(int argc, char** argv) {
    FILE* f = fopen(argv[1], "rb");
    if (!f) return 2;
    int bad = 0;
    bad += check<QF_IQ2_XXS>(f, NB, "IQ2_XXS");
    bad += check<QF_IQ2_XS>(f, NB, "IQ2_XS");
    bad += check<QF_IQ2_S>(f, NB, "IQ2_S");
    bad += check<QF_IQ3_XXS>(f, NB, "IQ3_XXS");
    bad += check<QF_IQ3_S>(f, NB, "IQ3_S");
    bad += check<QF_IQ1_S>(f, NB, "IQ1_S");
    bad += check<QF_IQ1_M>(f, NB, "IQ1_M");
    return bad != 0;
}
`

var iqHostTypes = []quant.Type{quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ3_S, quant.IQ1_S, quant.IQ1_M}

// The kernels' IQ unit decode, compiled for the host by clang, gives
// quant.IQUnit's values bit for bit on random super-blocks of every IQ
// format: the byte layouts, sign masks, grids and scales the GPU kernels
// read (quant.cu's GEMVs, experts and embeddings, quant_mma.cu's tiles all
// decode through IQRaw). It needs no GPU, only clang++-19.
func TestIQDecodeOnHost(t *testing.T) {
	clang, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Skip("clang++-19 not found (make clang installs it)")
	}
	src, err := os.ReadFile("../../kernels/cuda/quant.cu")
	if err != nil {
		t.Fatal(err)
	}
	const from, to = "// The IQ grid formats (kernels/quant iq.go", "// iq_unit: q_unit for the IQ formats."
	a, b := strings.Index(string(src), from), strings.Index(string(src), to)
	if a < 0 || b < a {
		t.Fatalf("quant.cu: no IQ section between %q and %q", from, to)
	}
	var sec strings.Builder
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "#define QF_") {
			sec.WriteString(l + "\n")
		}
	}
	sec.WriteString(string(src[a:b]))
	dir := t.TempDir()
	grid, err := os.ReadFile("../../kernels/cuda/iqgrid.cu")
	if err != nil {
		t.Fatal(err)
	}
	const nb = 256
	r := rand.New(rand.NewPCG(27, 28))
	var blocks []byte
	row := make([]float32, 256)
	for _, typ := range iqHostTypes {
		s := quant.Spec{Type: typ}
		data := make([]byte, nb*s.BlockBytes())
		m := quant.Random(s, nb, 256, 0.3, r, data, nil, nil)
		blocks = append(blocks, data...)
		for i := 0; i < nb; i++ {
			m.Row(i, row)
			for _, v := range row {
				blocks = binary.LittleEndian.AppendUint32(blocks, math.Float32bits(v))
			}
		}
	}
	for name, data := range map[string][]byte{"iqgrid.cu": grid, "iq_section.h": []byte(sec.String()),
		"harness.cpp": []byte(iqHostHarness), "blocks.bin": blocks} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "harness")
	if out, err := exec.Command(clang, "-x", "c++", "-std=c++17", "-O1", fmt.Sprintf("-DNB=%d", nb), "-w", "-I", dir,
		filepath.Join(dir, "harness.cpp"), "-o", bin).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", clang, err, out)
	}
	out, err := exec.Command(bin, filepath.Join(dir, "blocks.bin")).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the host decode differs from quant.IQUnit: %v", err)
	}
}
