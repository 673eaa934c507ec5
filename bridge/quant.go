package bridge

import "github.com/mtlbench/mtlbench/kernels/quant"

// Packed is the dtype of a quantized weight tensor: its values are packed
// in one of kernels/quant's formats, which QuantOf returns. Backends that
// run packed weights implement QuantBackend.
const Packed DType = 100

// QuantTensor is implemented by a backend's packed weight tensors.
type QuantTensor interface {
	Tensor
	Quant() quant.Spec
}

// QuantOf returns t's packing, ok false for a float tensor.
func QuantOf(t Tensor) (quant.Spec, bool) {
	if q, ok := t.(QuantTensor); ok && t.DType() == Packed {
		return q.Quant(), true
	}
	return quant.Spec{}, false
}

// QuantBackend is implemented by backends that run packed quantized
// weights: GEMV/GEMM, expert GEMVs and embedding rows dequantize the
// weights as they read them, never into a second copy in memory. The
// engine refuses a quantized model on a backend without it.
type QuantBackend interface {
	// QuantWeight wraps a packed [rows][k] matrix (shape [rows, k]): data
	// holds every row's packed values; for affine formats scales and biases
	// hold [rows][k/group] values of spec.Scale (nil otherwise). A backend
	// that shares host memory may alias them, which must then stay valid.
	QuantWeight(spec quant.Spec, shape []int, data, scales, biases []byte) (Tensor, error)
	// QMatMul is MatMul with a packed w.
	QMatMul(out, x, w, bias Tensor)
	// QEmbedding is Embedding with a packed table.
	QEmbedding(out, table Tensor)
	// QMoE is MoE whose experts (and possibly router) are packed.
	QMoE(out, x Tensor, w *MoEWeights, p MoEParams)
}

// QuantMappedWeighter is implemented by QuantBackends that can alias packed
// bytes living in mmap'd memory (an mmap'd checkpoint, the synthetic
// source's off-heap memory) instead of copying them, as MappedWeighter.
type QuantMappedWeighter interface {
	QuantWeightMapped(spec quant.Spec, shape []int, data, scales, biases []byte) (Tensor, error)
}

// QuantSupport reports whether be can run spec's packing; backends that run
// only some formats implement it (a backend without it runs all of them).
type QuantSupport interface {
	SupportsQuant(spec quant.Spec) error
}

// QuantPreference is a backend that runs some formats it supports faster
// at a wider width that holds their values exactly (quant.Widenings): the
// engine loads those widened, spending memory for speed, as it widens the
// formats a backend lacks (engine.RunConfig).
type QuantPreference interface {
	PrefersWider(spec quant.Spec) bool
}

// PackedMatrix describes a packed [rows][k] matrix; a backend's packed
// tensor embeds it for its Tensor and QuantTensor methods.
type PackedMatrix struct {
	Spec quant.Spec
	Dims []int // [rows, k]
}

func (m PackedMatrix) DType() DType      { return Packed }
func (m PackedMatrix) Shape() []int      { return m.Dims }
func (m PackedMatrix) Len() int          { return m.Dims[0] * m.Dims[1] }
func (m PackedMatrix) Quant() quant.Spec { return m.Spec }
