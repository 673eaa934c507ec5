package cuda

import (
	"fmt"

	"github.com/mtlbench/mtlbench/kernels/quant"
)

// QuantRules are the packed formats CUDA runs, known without a GPU
// (bridge.QuantSupport); Backend has them.
type QuantRules struct{}

// hasKernels: quant.cu has kernels for every format with a kernel name but
// affine widths other than 4 and 8, which the engine runs widened, and the
// formats with kernels on Metal only, which it runs transcoded
// (quant.MetalOnly, model.RunFormat, quant.Forms).
func hasKernels(s quant.Spec) bool {
	return quant.KernelName(s) != "" && !quant.MetalOnly(s) && (s.Type != quant.Affine || s.Bits == 4 || s.Bits == 8)
}

// SupportsQuant: affine at 4 and 8 bits, Q8_0, Q4_0, Q4_K, Q6_K, Q2_K and
// the IQ grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M).
func (QuantRules) SupportsQuant(s quant.Spec) error {
	if !hasKernels(s) {
		return fmt.Errorf("cuda: %v weights are not supported (affine 4 and 8 bits, Q8_0, Q4_0, Q4_K, Q6_K, Q2_K, "+
			"IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)", s)
	}
	return nil
}
