package model

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
)

// TensorSpec names one weight tensor and its shape, in HF naming.
type TensorSpec struct {
	Name  string
	Shape []int
	// Matrix tensors keep the model's dtype; vectors (norms, biases) are
	// small and kept in f32 by every backend.
	Matrix bool
	// FanIn scales synthetic values so activations keep unit scale.
	FanIn int
	// Transposed marks a matrix the checkpoint stores [in, out] (GPT-2's
	// Conv1D); sources hand it out as Shape, [out, in], like the others.
	Transposed bool
}

func (t TensorSpec) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// LayerPrefix is the HF name prefix of layer l.
func LayerPrefix(l int) string { return fmt.Sprintf("model.layers.%d.", l) }

// Tensors lists every tensor the model (cut to c.Layers) needs, in HF naming.
func (c *Config) Tensors() []TensorSpec {
	if c.GPT2() {
		return c.gpt2Tensors()
	}
	mat := func(name string, out, in int) TensorSpec {
		return TensorSpec{Name: name, Shape: []int{out, in}, Matrix: true, FanIn: in}
	}
	vec := func(name string, n int) TensorSpec { return TensorSpec{Name: name, Shape: []int{n}} }
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	t := []TensorSpec{{Name: "model.embed_tokens.weight", Shape: []int{c.Vocab, c.Hidden}, Matrix: true, FanIn: 1}}
	for l := 0; l < c.Layers; l++ {
		p := LayerPrefix(l)
		t = append(t,
			vec(p+"input_layernorm.weight", c.Hidden),
			mat(p+"self_attn.q_proj.weight", q, c.Hidden),
			mat(p+"self_attn.k_proj.weight", kv, c.Hidden),
			mat(p+"self_attn.v_proj.weight", kv, c.Hidden),
			mat(p+"self_attn.o_proj.weight", c.Hidden, q),
			vec(p+"post_attention_layernorm.weight", c.Hidden))
		if c.QKVBias {
			t = append(t, vec(p+"self_attn.q_proj.bias", q), vec(p+"self_attn.k_proj.bias", kv), vec(p+"self_attn.v_proj.bias", kv))
		}
		if c.OBias {
			t = append(t, vec(p+"self_attn.o_proj.bias", c.Hidden))
		}
		if c.QKNorm {
			t = append(t, vec(p+"self_attn.q_norm.weight", c.HeadDim), vec(p+"self_attn.k_norm.weight", c.HeadDim))
		}
		if c.IsMoELayer(l) {
			t = append(t, mat(p+"mlp.gate.weight", c.NumExperts, c.Hidden))
			for e := 0; e < c.NumExperts; e++ {
				ep := fmt.Sprintf("%smlp.experts.%d.", p, e)
				t = append(t,
					mat(ep+"gate_proj.weight", c.MoEInter, c.Hidden),
					mat(ep+"up_proj.weight", c.MoEInter, c.Hidden),
					mat(ep+"down_proj.weight", c.Hidden, c.MoEInter))
			}
		} else {
			t = append(t,
				mat(p+"mlp.gate_proj.weight", c.Inter, c.Hidden),
				mat(p+"mlp.up_proj.weight", c.Inter, c.Hidden),
				mat(p+"mlp.down_proj.weight", c.Hidden, c.Inter))
			if c.MLPBias {
				t = append(t, vec(p+"mlp.gate_proj.bias", c.Inter), vec(p+"mlp.up_proj.bias", c.Inter), vec(p+"mlp.down_proj.bias", c.Hidden))
			}
		}
	}
	t = append(t, vec("model.norm.weight", c.Hidden))
	if !c.TieEmbed {
		t = append(t, mat("lm_head.weight", c.Vocab, c.Hidden))
	}
	return t
}

// Params counts the parameters of the model as configured (after any depth
// cut).
func (c *Config) Params() int64 {
	m, v := c.elems()
	return int64(m + v)
}

// WeightBytes is the memory the weights take with matrices in dt and vectors
// in f32 (packed matrices at their packed size, scales and biases included).
func (c *Config) WeightBytes(dt bridge.DType) int64 {
	var n int64
	for _, t := range c.Tensors() {
		n += c.TensorBytes(t, dt)
	}
	return n
}

// elems counts the matrix and vector elements of Tensors by arithmetic,
// without listing them: a config's sizes are checked (Validate, fit
// checks) before anything as large as its tensor list is made. float64:
// an absurd config must not overflow into a small count.
func (c *Config) elems() (matrix, vector float64) {
	if c.GPT2() {
		for _, t := range c.gpt2Tensors() { // bounded: Validate caps its sizes first
			if t.Matrix {
				matrix += float64(t.Elems())
			} else {
				vector += float64(t.Elems())
			}
		}
		return matrix, vector
	}
	f := func(x int) float64 { return float64(x) }
	h, q, kv := f(c.Hidden), f(c.Heads*c.HeadDim), f(c.KVHeads*c.HeadDim)
	matrix = f(c.Vocab) * h // embed_tokens
	if !c.TieEmbed {
		matrix += f(c.Vocab) * h
	}
	vector = h // model.norm
	moe := 0
	for l := 0; l < c.Layers; l++ {
		if c.IsMoELayer(l) {
			moe++
		}
	}
	dense := f(c.Layers - moe)
	perLayerVec := 2 * h
	if c.QKVBias {
		perLayerVec += q + 2*kv
	}
	if c.OBias {
		perLayerVec += h
	}
	if c.QKNorm {
		perLayerVec += 2 * f(c.HeadDim)
	}
	matrix += f(c.Layers) * (h*q + 2*h*kv + q*h)
	vector += f(c.Layers) * perLayerVec
	matrix += dense * 3 * f(c.Inter) * h
	if c.MLPBias {
		vector += dense * (2*f(c.Inter) + h)
	}
	matrix += f(moe) * (f(c.NumExperts)*h + f(c.NumExperts)*3*f(c.MoEInter)*h)
	return matrix, vector
}

// TensorBytes is the memory tensor t takes: packed under c.Quant, else
// matrices in dt and vectors in f32.
func (c *Config) TensorBytes(t TensorSpec, dt bridge.DType) int64 {
	if !t.Matrix || c.LoadsInF32(t.Name) {
		return t.Elems() * 4
	}
	if q, ok := c.Quant.For(t.Name); ok {
		return q.Bytes(t.Elems(), t.Shape[len(t.Shape)-1])
	}
	return t.Elems() * int64(dt.Size())
}

// hasFloatMatrices says whether any matrix of c is held in a float dtype
// a caller may choose: not packed, and not one loaded in f32 whatever.
func (c *Config) hasFloatMatrices() bool {
	for _, t := range c.Tensors() {
		if _, packed := c.Quant.For(t.Name); t.Matrix && !packed && !c.LoadsInF32(t.Name) {
			return true
		}
	}
	return false
}

// tensorReadBytes is what reading tensor t moves: TensorBytes less the
// padding packed rows are stored with (quant.Spec.ReadBytes).
func (c *Config) tensorReadBytes(t TensorSpec, dt bridge.DType) int64 {
	if q, ok := c.Quant.For(t.Name); ok && t.Matrix && !c.LoadsInF32(t.Name) {
		return q.ReadBytes(t.Elems(), t.Shape[len(t.Shape)-1])
	}
	return c.TensorBytes(t, dt)
}

// KVBytesPerToken is the KV cache memory one token takes across all layers.
func (c *Config) KVBytesPerToken(dt bridge.DType) int64 {
	return int64(2*c.Layers*c.KVHeads*c.HeadDim) * int64(dt.Size())
}

// ActiveBytesPerToken is what a batch-1 decode step must read: every weight
// except the unrouted experts and the embedding table (one row is gathered).
func (c *Config) ActiveBytesPerToken(dt bridge.DType) int64 {
	var n int64
	for _, t := range c.Tensors() {
		b := c.tensorReadBytes(t, dt)
		switch {
		case t.Name == "model.embed_tokens.weight" || t.Name == GPT2Embed:
			n += b / int64(c.Vocab)
			if c.TieEmbed { // the table is read whole as the LM head
				n += b
			}
		case t.Name == GPT2Positions: // one row a token
			n += b / int64(t.Shape[0])
		case isExpertTensor(t.Name):
			n += b * int64(c.TopK) / int64(c.NumExperts)
		default:
			n += b
		}
	}
	return n
}

// Attended is a step's attention work, the sum over its query tokens of
// the keys each attends to (kernels.AttendedKeys): at every earlier
// position (All), as a layer that does not slide sees them, and over the
// config's Window (Window), as one that slides does.
type Attended struct{ All, Window int64 }

// StepFLOPs counts the floating-point operations of a forward step (a
// multiply-add is two): the matmuls of tokens rows through every layer
// (each token's top_k experts and the router on MoE layers), attention's
// two products over attended positions (each layer's, all of them or its
// window's: LayerWindow), and the LM head over logitRows rows.
// Prefill's roofline is these over the device's measured matmul rate.
func (c *Config) StepFLOPs(tokens int64, attended Attended, logitRows int64) float64 {
	q, kv := int64(c.Heads*c.HeadDim), int64(c.KVHeads*c.HeadDim)
	h := int64(c.Hidden)
	var perToken int64 // multiply-adds of one token through the layers
	var keys int64     // attended keys, over the layers
	for l := 0; l < c.Layers; l++ {
		perToken += h*(q+2*kv) + q*h
		if c.IsMoELayer(l) {
			perToken += h*int64(c.NumExperts) + int64(c.TopK)*3*h*int64(c.MoEInter)
		} else {
			perToken += 3 * h * int64(c.Inter)
		}
		if c.LayerWindow(l) > 0 {
			keys += attended.Window
		} else {
			keys += attended.All
		}
	}
	attn := 2 * q * keys // QKᵀ and PV, per head
	head := logitRows * h * int64(c.Vocab)
	return 2 * float64(tokens*perToken+attn+head)
}

// KVReadBytes is the K and V a step's attention reads from a cache of
// dtype dt: on each layer that attends to every position the keys its
// sequences read, keys, and on each that slides windowKeys, those from
// each sequence's first query's window on (kernels.KeysRead, summed over
// the step's sequences at every position and at Window).
func (c *Config) KVReadBytes(keys, windowKeys int64, dt bridge.DType) int64 {
	perLayer := int64(2*c.KVHeads*c.HeadDim) * int64(dt.Size())
	var n int64
	for l := 0; l < c.Layers; l++ {
		if c.LayerWindow(l) > 0 {
			n += windowKeys
		} else {
			n += keys
		}
	}
	return n * perLayer
}

func isExpertTensor(name string) bool {
	var l, e int
	var rest string
	k, _ := fmt.Sscanf(name, "model.layers.%d.mlp.experts.%d.%s", &l, &e, &rest)
	return k == 3
}

// ExpertsInF32 reports whether the engine loads layer l's experts in f32:
// the expert kernels take a layer's experts all packed or all in floats,
// and a file may pack them in part (mlx-lm leaves a projection whose rows
// its group size does not divide in floats; llama.cpp's tools keep rows no
// block of the type divides in F16). Experts of one projection share a
// format (one stacked tensor in GGUF and mlx-lm), so expert 0's tell.
func (c *Config) ExpertsInF32(l int) bool {
	n := c.packedExpertProjections(l)
	return n > 0 && n < 3
}

// RouterInF32 reports whether layer l's router, packed, is loaded in f32
// beside experts in floats (all or in part): the float expert kernels take
// a float router.
func (c *Config) RouterInF32(l int) bool {
	_, packed := c.Quant.For(LayerPrefix(l) + "mlp.gate.weight")
	return packed && c.packedExpertProjections(l) < 3
}

func (c *Config) packedExpertProjections(l int) int {
	n := 0
	for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
		if _, ok := c.Quant.For(LayerPrefix(l) + "mlp.experts.0." + p + ".weight"); ok {
			n++
		}
	}
	return n
}

// LoadsInF32 reports whether the tensor called name is loaded in f32
// whatever the run's float dtype: kept so (QuantScheme.F32), or whatever
// its file keeps (ExpertsInF32, RouterInF32).
func (c *Config) LoadsInF32(name string) bool {
	if c.Quant == nil {
		return false
	}
	if c.Quant.F32[name] {
		return true
	}
	if c.NumExperts == 0 {
		return false
	}
	// Called for every tensor a size is asked of: no Sscanf.
	rest, ok := strings.CutPrefix(name, "model.layers.")
	i := strings.IndexByte(rest, '.')
	if !ok || i < 0 {
		return false
	}
	l, err := strconv.Atoi(rest[:i])
	if err != nil || !c.IsMoELayer(l) {
		return false
	}
	switch rest = rest[i+1:]; {
	case rest == "mlp.gate.weight":
		return c.RouterInF32(l)
	case strings.HasPrefix(rest, "mlp.experts."):
		return c.ExpertsInF32(l)
	}
	return false
}

// ExpertBytes is one expert's weights (gate, up and down) in dt or packed,
// averaged over the MoE layers (a Q4_K_M mix packs some layers' down
// projections with more bits).
func (c *Config) ExpertBytes(dt bridge.DType) int64 {
	var n, experts int64
	for _, t := range c.Tensors() {
		if isExpertTensor(t.Name) {
			n += c.tensorReadBytes(t, dt)
			if strings.HasSuffix(t.Name, ".down_proj.weight") {
				experts++
			}
		}
	}
	if experts == 0 {
		return 0
	}
	return n / experts
}

// oneExpertFormat refuses a MoE layer whose experts the expert kernels
// cannot read as one: Metal and CUDA take a projection's experts in one
// packed format, the gate and up projections' in the same one (they are
// staged together), and float experts in one dtype, all three projections;
// they refused such a layer only at its first step, naming no tensor.
// formatOf is how a matrix loads, packed (its format) or in floats (its
// dtype, float true), and its name in the file; ok false where that says
// nothing (floats converted to a dtype asked for). A layer the loader runs
// in f32 (ExpertsInF32) is converted whole.
func oneExpertFormat(c *Config, formatOf func(TensorSpec) (format string, float bool, name string, ok bool)) error {
	type first struct {
		format, name string
		float        bool
	}
	byProj := map[string]first{} // by "layer proj"
	floats := map[int]first{}    // by layer
	for _, t := range c.Tensors() {
		l, _, proj, ok := expertName(t.Name)
		if !ok || c.ExpertsInF32(l) {
			continue
		}
		format, float, name, ok := formatOf(t)
		if !ok {
			continue
		}
		this := first{format, name, float}
		differ := func(f first) error {
			what := "format"
			if f.float && float {
				what = "dtype"
			}
			return fmt.Errorf("the experts of layer %d differ in %s: %q is %s, %q %s (the expert kernels read a projection's experts in one format, gate and up in the same, and a layer's float experts, all three projections, in one dtype)",
				l, what, f.name, f.format, name, format)
		}
		if proj == "up_proj" {
			proj = "gate_proj" // read with the gate's experts, in its format
		}
		key := fmt.Sprint(l, " ", proj)
		if f, seen := byProj[key]; !seen {
			byProj[key] = this
		} else if f.format != format {
			return differ(f)
		}
		if !float {
			continue
		}
		if f, seen := floats[l]; !seen {
			floats[l] = this
		} else if f.format != format {
			return differ(f)
		}
	}
	return nil
}
