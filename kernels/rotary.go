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
// (linear, llama3, yarn, a GGUF file's rope_freqs) sets Freqs to its own
// table of headDim/2 frequencies, which then stands for Theta's.
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
	// Type is "linear" (every frequency divided by Factor), "llama3" (low
	// frequencies divided by Factor, high ones kept, a smooth blend
	// between) or "yarn" (the same by rotations per original context, and
	// the attention logits scaled).
	Type   string
	Factor float64
	// OriginalMax is the context the model was trained at (llama3, yarn).
	OriginalMax int
	// LowFreqFactor and HighFreqFactor are llama3's: the wavelengths
	// OriginalMax/LowFreqFactor and OriginalMax/HighFreqFactor bound the
	// blend.
	LowFreqFactor, HighFreqFactor float64
	// BetaFast and BetaSlow are yarn's: the dimensions turning BetaFast and
	// BetaSlow times over OriginalMax bound the blend, widened to whole
	// dimensions unless NoTruncate.
	BetaFast, BetaSlow float64
	NoTruncate         bool
	// Attention is yarn's scale of cos and sin (its attention_factor or
	// mscale), which scales every attention logit by its square; 0 is 1.
	Attention float64
}

// LogitScale is what the scaling multiplies attention logits by: cos and
// sin scaled by Attention scale q and k both.
func (s *RoPEScaling) LogitScale() float64 {
	if s == nil || s.Attention == 0 {
		return 1
	}
	return s.Attention * s.Attention
}

// maxScale bounds a scaling's factors and context.
const maxScale = 1 << 24

// Check says what is wrong with s, if anything.
func (s RoPEScaling) Check() error {
	switch s.Type {
	case "linear", "llama3", "yarn":
	default:
		return fmt.Errorf("rope scaling type %q is not supported (linear, llama3, yarn)", s.Type)
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
	}
	if (s.Type == "llama3" || s.Type == "yarn") && (s.OriginalMax <= 0 || s.OriginalMax > maxScale) {
		return fmt.Errorf("%s rope scaling: original_max_position_embeddings %d must be from 1 to %d", s.Type, s.OriginalMax, maxScale)
	}
	if s.Type == "yarn" {
		if !(s.BetaFast > 0 && s.BetaFast <= maxScale) || !(s.BetaSlow > 0 && s.BetaSlow <= maxScale) {
			return fmt.Errorf("yarn rope scaling: beta_fast %g and beta_slow %g must be numbers above 0, at most %g", s.BetaFast, s.BetaSlow, float64(maxScale))
		}
		if !(s.Attention > 0 && s.Attention <= 16) {
			return fmt.Errorf("yarn rope scaling: attention factor %g must be a number above 0, at most 16", s.Attention)
		}
	}
	return nil
}

// Scaled returns the frequencies of a head of headDim values under theta
// and s, computed in f32 in transformers' order of operations
// (modeling_rope_utils: _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters, _compute_yarn_parameters), so they agree
// with its tables to the last bit or so.
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
	case "yarn":
		// The dimension that turns r times over the original context.
		dim := float64(headDim)
		corr := func(r float64) float64 {
			return dim * math.Log(float64(s.OriginalMax)/(r*2*math.Pi)) / (2 * math.Log(theta))
		}
		low, high := corr(s.BetaFast), corr(s.BetaSlow)
		if !s.NoTruncate {
			low, high = math.Floor(low), math.Ceil(high)
		}
		low, high = max(low, 0), min(high, dim-1)
		if low == high {
			high += 0.001
		}
		lo, span := float32(low), float32(high-low)
		for i := range f {
			pos := float32(math.Pow(theta, float64(2*i)/dim))
			extra, inter := 1/pos, 1/float32(factor*pos)
			ramp := min(max((float32(i)-lo)/span, 0), 1)
			keep := 1 - ramp // the share of the unscaled frequency
			f[i] = float32(inter*(1-keep)) + float32(extra*keep)
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
