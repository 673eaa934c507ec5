package kernels

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
)

// Rotary is a model's rotary position embedding: the frequencies every
// backend rotates q and k by (docs/architecture.md, "Rotary embeddings"). With
// Freqs nil, frequency i of a head of headDim values is
// Theta^(-2i/headDim), as transformers computes it in f32. A scaled RoPE
// (linear, llama3, a GGUF file's rope_freqs) sets Freqs to its own table of
// headDim/2 frequencies, which then stands for Theta's.
type Rotary struct {
	Theta float64
	Freqs []float32
	// key is Key(keyDim), made once by Keyed: backends look their table up
	// by it on every step.
	key    string
	keyDim int
}

// InvFreq returns the headDim/2 rotary frequencies.
func (r Rotary) InvFreq(headDim int) []float32 {
	if r.Freqs != nil {
		return r.Freqs
	}
	return baseInvFreq(headDim, r.Theta)
}

// Key names the frequencies for a backend's table cache: equal keys, equal
// tables.
func (r Rotary) Key(headDim int) string {
	if r.key != "" && r.keyDim == headDim {
		return r.key
	}
	if r.Freqs == nil {
		return fmt.Sprintf("%d/%x", headDim, math.Float64bits(r.Theta))
	}
	h := fnv.New64a()
	var b [4]byte
	for _, f := range r.Freqs {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(f))
		h.Write(b[:])
	}
	return fmt.Sprintf("%d/%x/%d:%x", headDim, math.Float64bits(r.Theta), len(r.Freqs), h.Sum64())
}

// Keyed returns r with its Key for heads of headDim made once.
func (r Rotary) Keyed(headDim int) Rotary {
	r.key, r.keyDim = r.Key(headDim), headDim
	return r
}

// baseInvFreq is Theta^(-2i/headDim) for i < headDim/2, rounded to f32 as
// transformers computes it, so positions far from zero agree with the HF
// reference.
func baseInvFreq(headDim int, theta float64) []float32 {
	f := make([]float32, headDim/2)
	for i := range f {
		f[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(headDim)))
	}
	return f
}

// RoPEScaling is a checkpoint's rescaling of the rotary frequencies, as
// transformers' rope_scaling (or rope_parameters) names it.
type RoPEScaling struct {
	// Type is "linear" (every frequency divided by Factor) or "llama3"
	// (low frequencies divided by Factor, high ones kept, a smooth blend
	// between).
	Type   string
	Factor float64
	// LowFreqFactor, HighFreqFactor and OriginalMax are llama3's: the
	// wavelengths OriginalMax/LowFreqFactor and OriginalMax/HighFreqFactor
	// bound the blend.
	LowFreqFactor, HighFreqFactor float64
	OriginalMax                   int
}

// maxScale bounds a scaling's factors and context.
const maxScale = 1 << 24

// Check says what is wrong with s, if anything.
func (s RoPEScaling) Check() error {
	switch s.Type {
	case "linear", "llama3":
	default:
		return fmt.Errorf("rope scaling type %q is not supported (linear, llama3)", s.Type)
	}
	// The bounds are far beyond any published model's and keep every
	// frequency a finite f32.
	if !(s.Factor >= 1 && s.Factor <= maxScale) {
		return fmt.Errorf("rope scaling factor %g must be a number from 1 to %g", s.Factor, float64(maxScale))
	}
	if s.Type == "llama3" {
		if !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || !(s.HighFreqFactor <= maxScale) {
			return fmt.Errorf("llama3 rope scaling: low_freq_factor %g and high_freq_factor %g must satisfy 0 < low < high <= %g", s.LowFreqFactor, s.HighFreqFactor, float64(maxScale))
		}
		if s.OriginalMax <= 0 || s.OriginalMax > maxScale {
			return fmt.Errorf("llama3 rope scaling: original_max_position_embeddings %d must be from 1 to %d", s.OriginalMax, maxScale)
		}
	}
	return nil
}

// Scaled returns the frequencies of a head of headDim values under theta
// and s, computed in f32 in transformers' order of operations
// (modeling_rope_utils: _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters), so they agree with its tables to the last
// bit or so.
func (s RoPEScaling) Scaled(headDim int, theta float64) []float32 {
	f := baseInvFreq(headDim, theta)
	factor := float32(s.Factor)
	switch s.Type {
	case "linear":
		for i := range f {
			f[i] /= factor
		}
	case "llama3":
		old, lo, span := float32(s.OriginalMax), float32(s.LowFreqFactor), float32(s.HighFreqFactor-s.LowFreqFactor)
		loWave, hiWave := float32(float64(s.OriginalMax)/s.LowFreqFactor), float32(float64(s.OriginalMax)/s.HighFreqFactor)
		for i, inv := range f {
			wave := float32(2*math.Pi) / inv
			switch {
			case wave < hiWave:
				// high frequencies: kept
			case wave > loWave:
				f[i] = inv / factor
			default:
				// The conversions round each product, as torch does:
				// no fused multiply-add on any host.
				smooth := (old/wave - lo) / span
				f[i] = float32((1-smooth)*inv)/factor + float32(smooth*inv)
			}
		}
	}
	return f
}

// Check says whether r has frequencies for heads of headDim values.
func (r Rotary) Check(headDim int) error {
	if r.Freqs != nil && len(r.Freqs) != headDim/2 {
		return fmt.Errorf("%d rotary frequencies for heads of %d values (want %d)", len(r.Freqs), headDim, headDim/2)
	}
	return nil
}
