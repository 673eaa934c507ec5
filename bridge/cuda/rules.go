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

// SupportsQuant: the formats hasKernels keeps; a refusal names them from
// quant's tables (quant.KernelFormats), so a format given kernels is named.
func (QuantRules) SupportsQuant(s quant.Spec) error {
	if !hasKernels(s) {
		return fmt.Errorf("cuda: %v weights are not supported (%s)", s, quant.KernelFormats(hasKernels))
	}
	return nil
}
