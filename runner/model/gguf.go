package model

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/tokenizer"
)

// GGUF files: the model's configuration comes from the metadata
// (general.architecture and its keys), its tensors from the file's names
// (blk.N.attn_q.weight, ...), mapped to the HF names the engine asks for.
// docs/quantization.md lists both mappings.

// ggufArchs maps GGUF architectures to the HF architectures they run as.
var ggufArchs = map[string]string{
	"llama":    "LlamaForCausalLM",
	"qwen2":    "Qwen2ForCausalLM",
	"qwen3":    "Qwen3ForCausalLM",
	"qwen3moe": "Qwen3MoeForCausalLM",
	"gpt2":     GPT2Architecture,
}

func isGGUFPath(p string) bool {
	// A folder is a checkpoint folder, whatever its name ends in (a
	// download named after its repository, Qwen3-0.6B.gguf/).
	st, err := os.Stat(p)
	if err == nil && st.IsDir() {
		return false
	}
	if strings.EqualFold(filepath.Ext(p), ".gguf") {
		return true
	}
	// Any name, as llama.cpp takes one: a regular file that opens with
	// GGUF's magic. Opening a named pipe would wait for a writer.
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == "GGUF"
}

// openModelPath opens a checkpoint folder or a GGUF file.
func openModelPath(p string, want *bridge.DType) (*Config, Source, error) {
	if isGGUFPath(p) {
		return OpenGGUF(p, want)
	}
	c, ck, err := OpenDir(p, want)
	if err != nil {
		return nil, nil, err
	}
	if err := ck.Check(c); err != nil {
		ck.Close()
		return nil, nil, err
	}
	return c, ck, nil
}

// GGUFSource reads a GGUF file's tensors: packed ones as they are (or
// transcoded, quant.Transcoders), float ones in their stored dtype (or
// converted to want).
type GGUFSource struct {
	f     *gguf.File
	cfg   *Config
	dtype bridge.DType
	keep  bool
	mem   owned // conversions, transcodes and unpermuted rows
	// permute are the HF names whose rows llama.cpp's converter reordered
	// for its interleaved RoPE (llama's q and k), with their head counts.
	permute map[string]int
	// transcoded are the packed tensors rewritten so far, by HF name and
	// form.
	transcoded map[string]Packed
	// splitExperts: each expert's matrices are tensors of their own
	// (blk.N.ffn_gate.E.weight), as llama.cpp's converter wrote Mixtral
	// before it stacked them in ffn_gate_exps.
	splitExperts bool
}

// ggufProj is an expert projection's GGUF name, stacked (ffn_gate_exps) or
// one expert's (ffn_gate.E).
var ggufProj = map[string]string{"gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}

// name is the GGUF tensor holding HF tensor name, and for stacked experts
// the expert's index in it (-1 otherwise).
func (s *GGUFSource) name(name string) (string, int) {
	if l, e, proj, ok := expertName(name); ok {
		if s.splitExperts {
			return fmt.Sprintf("blk.%d.%s.%d.weight", l, ggufProj[proj], e), -1
		}
		return fmt.Sprintf("blk.%d.%s_exps.weight", l, ggufProj[proj]), e
	}
	return ggufName(name), -1
}

// gpt2GGUF are GPT-2's tensors as convert_hf_to_gguf.py names them (its
// Conv1D weights transposed to [out, in], as the engine reads them), by
// transformers' names: the whole-model ones, then a block's by the part
// after "transformer.h.N.".
var (
	gpt2GGUF = map[string]string{
		GPT2Embed: "token_embd.weight", GPT2Positions: "position_embd.weight",
		GPT2FinalNorm + "weight": "output_norm.weight", GPT2FinalNorm + "bias": "output_norm.bias",
	}
	gpt2GGUFBlock = map[string]string{
		"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
		"ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
	}
)

// ggufName is the GGUF tensor holding HF tensor name, outside the experts.
func ggufName(name string) string {
	if g, ok := gpt2GGUF[name]; ok {
		return g
	}
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, GPT2Prefix+"h.%d.%s", &l, &rest); n == 2 {
		dot := strings.LastIndexByte(rest, '.')
		if g, ok := gpt2GGUFBlock[rest[:max(dot, 0)]]; ok {
			return fmt.Sprintf("blk.%d.%s%s", l, g, rest[dot:]) // .weight or .bias
		}
	}
	switch name {
	case "model.embed_tokens.weight":
		return "token_embd.weight"
	case "model.norm.weight":
		return "output_norm.weight"
	case "lm_head.weight":
		return "output.weight"
	}
	if n, _ := fmt.Sscanf(name, "model.layers.%d.%s", &l, &rest); n == 2 {
		m := map[string]string{
			"input_layernorm.weight":          "attn_norm.weight",
			"post_attention_layernorm.weight": "ffn_norm.weight",
			"self_attn.q_proj.weight":         "attn_q.weight",
			"self_attn.k_proj.weight":         "attn_k.weight",
			"self_attn.v_proj.weight":         "attn_v.weight",
			"self_attn.o_proj.weight":         "attn_output.weight",
			"self_attn.q_proj.bias":           "attn_q.bias",
			"self_attn.k_proj.bias":           "attn_k.bias",
			"self_attn.v_proj.bias":           "attn_v.bias",
			"self_attn.o_proj.bias":           "attn_output.bias",
			"self_attn.q_norm.weight":         "attn_q_norm.weight",
			"self_attn.k_norm.weight":         "attn_k_norm.weight",
			"mlp.gate_proj.weight":            "ffn_gate.weight",
			"mlp.up_proj.weight":              "ffn_up.weight",
			"mlp.down_proj.weight":            "ffn_down.weight",
			"mlp.gate_proj.bias":              "ffn_gate.bias",
			"mlp.up_proj.bias":                "ffn_up.bias",
			"mlp.down_proj.bias":              "ffn_down.bias",
			"mlp.gate.weight":                 "ffn_gate_inp.weight",
		}
		if g, ok := m[rest]; ok {
			return fmt.Sprintf("blk.%d.%s", l, g)
		}
	}
	return name
}

// OpenGGUF opens a GGUF file: its configuration and its tensors.
func OpenGGUF(path string, want *bridge.DType) (*Config, *GGUFSource, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := ggufConfig(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	s := &GGUFSource{f: f, cfg: cfg, permute: map[string]int{}, splitExperts: ggufSplitExperts(f)}
	s.mem.experts = cfg.NumExperts
	if want != nil {
		s.dtype = *want
	} else {
		s.keep, s.dtype = true, s.readDType()
	}
	if f.KV["general.architecture"].Str == "llama" {
		// convert_hf_to_gguf reorders llama's (and Mixtral's) q and k rows,
		// their biases' with them.
		for l := 0; l < cfg.ModelLayers; l++ {
			for _, part := range []string{"weight", "bias"} {
				s.permute[LayerPrefix(l)+"self_attn.q_proj."+part] = cfg.Heads
				s.permute[LayerPrefix(l)+"self_attn.k_proj."+part] = cfg.KVHeads
			}
		}
	}
	// Every tensor the model needs must be there, readable, of the shape
	// the metadata implies: checked now, before any work.
	q := &QuantScheme{Name: "gguf", Per: map[string]*quant.Spec{}}
	// A layer's experts must be of one format the kernels read
	// (oneExpertFormat, below, once the scheme is made).
	used := map[string]bool{}
	for _, t := range cfg.Tensors() {
		info, e, err := s.lookup(t)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		used[info.Name] = true
		if spec, ok := info.Type.Packing(); ok && !floatsOnly(t) {
			q.Per[t.Name] = &spec
		} else {
			q.Per[t.Name] = nil
			// Kept as stored (no dtype asked for): an F32 matrix beside
			// F16 ones, as the converter writes MoE routers, takes f32.
			if s.keep && t.Matrix && info.Type == gguf.F32 && s.dtype != bridge.F32 {
				if q.F32 == nil {
					q.F32 = map[string]bool{}
				}
				q.F32[t.Name] = true
			}
		}
		_ = e
	}
	if err := ggufUnused(f, used); err != nil {
		f.Close()
		return nil, nil, err
	}
	cfg.Quant = q
	err = oneExpertFormat(cfg, func(t TensorSpec) (string, bool, string, bool) {
		info, _, err := s.lookup(t)
		if err != nil {
			return "", false, "", false
		}
		switch info.Type {
		case gguf.F32, gguf.F16, gguf.BF16:
			// Kept as stored, or converted to the dtype asked for.
			return info.Type.String(), true, info.Name, s.keep
		}
		return info.Type.String(), false, info.Name, true
	})
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, s, nil
}

// readDType is the float dtype of the matrices the model reads as the file
// stores them (kept so, with no dtype asked for), as Checkpoint.readDType:
// the first F16 or BF16 one in the model's order, else F16 where matrices
// are packed, else F32. Norms and biases, read as f32 whatever their type,
// say nothing of it.
func (s *GGUFSource) readDType() bridge.DType {
	dt := bridge.F32
	for _, t := range s.cfg.Tensors() {
		if !t.Matrix {
			continue
		}
		info, _, err := s.lookup(t)
		if err != nil {
			continue // OpenGGUF refuses it by name
		}
		switch info.Type {
		case gguf.F16:
			return bridge.F16
		case gguf.BF16:
			return bridge.BF16
		}
		if _, packed := info.Type.Packing(); packed {
			dt = bridge.F16
		}
	}
	return dt
}

// ggufUnused refuses a file holding tensors its metadata's model does not
// read, as llama.cpp does ("wrong number of tensors"): layers past
// block_count, or the QK-norms of a qwen3 file labelled llama, would
// otherwise be dropped silently and the figures be another model's.
// rope_freqs holds factors the metadata also gives (llama3's rope scaling);
// llama.cpp's llama loader alone reads it.
func ggufUnused(f *gguf.File, used map[string]bool) error {
	arch := f.KV["general.architecture"].Str
	var extra []string
	for _, t := range f.Tensors {
		if !used[t.Name] && (t.Name != "rope_freqs.weight" || arch != "llama") {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	count, list := tensorsNamed(extra)
	return fmt.Errorf("%s: %s none of the %s model its metadata describes (%s): is general.architecture or %s.block_count wrong?",
		f.Path, count, arch, list, arch)
}

// ggufSplitExperts: f stores its experts a tensor each (blk.N.ffn_gate.E.weight)
// and not stacked (blk.N.ffn_gate_exps.weight).
func ggufSplitExperts(f *gguf.File) bool {
	split := false
	for _, t := range f.Tensors {
		var l, e int
		var rest string
		if strings.Contains(t.Name, "_exps.") {
			return false
		}
		if n, _ := fmt.Sscanf(t.Name, "blk.%d.ffn_gate.%d.%s", &l, &e, &rest); n == 3 {
			split = true
		}
	}
	return split
}

// lookup finds spec's GGUF tensor and checks its type and shape.
func (s *GGUFSource) lookup(spec TensorSpec) (gguf.TensorInfo, int, error) {
	name, e := s.name(spec.Name)
	info, ok := s.f.Tensor(name)
	if !ok {
		where := s.f.Path
		if n := len(s.f.Parts); n > 0 {
			where = fmt.Sprintf("%s (and its %d other parts)", where, n-1)
		}
		return info, e, fmt.Errorf("%s: tensor %q (the model's %s) is missing", where, name, spec.Name)
	}
	if _, _, ok := info.Type.Block(); !ok {
		if why := info.Type.Retired(); why != "" {
			return info, e, fmt.Errorf("%s: tensor %q has type %v: %s", s.f.PathOf(info), name, info.Type, why)
		}
		return info, e, fmt.Errorf("%s: tensor %q has type %v, which mtlbench does not read (%s)", s.f.PathOf(info), name, info.Type, gguf.TypesRead())
	}
	want := spec.Shape
	if e >= 0 {
		want = append([]int{s.cfg.NumExperts}, spec.Shape...)
	}
	if !slices.Equal(info.Shape(), want) {
		return info, e, fmt.Errorf("%s: tensor %q has shape %v, the metadata implies %v", s.f.PathOf(info), name, info.Shape(), want)
	}
	if _, packed := info.Type.Packing(); packed && !spec.Matrix {
		return info, e, fmt.Errorf("%s: tensor %q is %v; mtlbench reads norms and biases in F32, F16 or BF16", s.f.PathOf(info), name, info.Type)
	}
	return info, e, nil
}

func (s *GGUFSource) DType() bridge.DType { return s.dtype }
func (s *GGUFSource) Describe() string {
	if n := len(s.f.Parts); n > 0 {
		return fmt.Sprintf("gguf %s (%d parts)", s.f.Path, n)
	}
	return "gguf " + s.f.Path
}
func (s *GGUFSource) Mapped(b []byte) bool {
	return s.f.Mapped(b) || s.mem.contain(b)
}

// Drop gives back the pages of b that lie in the file (PageDropper); a
// transcoded tensor's memory is left alone.
func (s *GGUFSource) Drop(b []byte) { s.f.Drop(b) }

func (s *GGUFSource) Close() error {
	s.mem.release()
	return s.f.Close()
}

// bytes returns spec's bytes (expert e's slice of a stacked tensor), with
// llama's q/k rows put back in HF order.
func (s *GGUFSource) bytes(spec TensorSpec) (gguf.TensorInfo, []byte, error) {
	info, e, err := s.lookup(spec)
	if err != nil {
		return info, nil, err
	}
	data := s.f.Bytes(info)
	if e >= 0 {
		n := len(data) / s.cfg.NumExperts
		data = data[e*n : (e+1)*n]
	}
	if heads, ok := s.permute[spec.Name]; ok {
		data = s.unpermute(data, spec.Shape[0], heads)
	}
	return info, data, nil
}

// unpermute undoes llama.cpp's convert_hf_to_gguf permute of q and k:
// within each head, GGUF row 2j+t holds HF row t·d/2+j. Rows are whole
// packed blocks, so this moves bytes without decoding them; it is the one
// copy a llama GGUF costs (q and k only), and the file's pages it was made
// from are given back (docs/quantization.md, "Memory").
func (s *GGUFSource) unpermute(data []byte, rows, heads int) []byte {
	rb := len(data) / rows
	out := s.mem.alloc(len(data))
	d := rows / heads
	for h := 0; h < heads; h++ {
		for j := 0; j < d/2; j++ {
			for t := 0; t < 2; t++ {
				src, dst := h*d+2*j+t, h*d+t*d/2+j
				copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
			}
		}
	}
	s.f.Drop(data)
	return out
}

// Packed returns a packed tensor's bytes.
func (s *GGUFSource) Packed(spec TensorSpec) (Packed, bool, error) {
	if floatsOnly(spec) {
		return Packed{}, false, nil // Tensor dequantizes it
	}
	return s.packed(spec)
}

func (s *GGUFSource) packed(spec TensorSpec) (Packed, bool, error) {
	info, e, err := s.lookup(spec)
	if err != nil {
		return Packed{}, false, err
	}
	_ = e
	q, ok := info.Type.Packing()
	if !ok {
		return Packed{}, false, nil
	}
	_, data, err := s.bytes(spec)
	if err != nil {
		return Packed{}, true, err
	}
	if tc, ok := quant.Transcoders[info.Type.String()]; ok && q == tc.Into {
		p, err := s.transcode(tc, tc.Into, spec, data)
		return p, true, err
	}
	return Packed{Spec: q, Data: data}, true, nil
}

// PackedAs is Packed with a tensor of a type read by transcoding written as
// to, where to is one of its transcoder's forms (a Q5_K tensor straight
// into 8-bit affine groups for a backend that runs those).
func (s *GGUFSource) PackedAs(spec TensorSpec, to quant.Spec) (Packed, bool, error) {
	if floatsOnly(spec) {
		return Packed{}, false, nil
	}
	info, _, err := s.lookup(spec)
	if err != nil {
		return Packed{}, false, err
	}
	tc, ok := quant.Transcoders[info.Type.String()]
	if !ok || !slices.Contains(tc.Forms(), to) {
		return s.Packed(spec)
	}
	_, data, err := s.bytes(spec)
	if err != nil {
		return Packed{}, true, err
	}
	p, err := s.transcode(tc, to, spec, data)
	return p, true, err
}

// transcode rewrites spec's blocks (data) as form, once per tensor and
// form, and lets the OS drop the mapped pages it read: the model holds the
// rewritten bytes only.
func (s *GGUFSource) transcode(tc quant.Transcoder, form quant.Spec, spec TensorSpec, data []byte) (Packed, error) {
	key := spec.Name + " " + form.String()
	if p, ok := s.transcoded[key]; ok {
		return p, nil
	}
	if len(spec.Shape) != 2 {
		return Packed{}, fmt.Errorf("%s: tensor %s is %s but not a matrix", s.f.Path, spec.Name, tc.Name)
	}
	m := s.mem.transcodeTarget(spec, form)
	if err := tc.Transcode(data, m); err != nil {
		return Packed{}, fmt.Errorf("%s: tensor %s: %w", s.f.Path, spec.Name, err)
	}
	s.f.Drop(data)
	p := Packed{Spec: m.Spec, Data: m.Data, Scales: m.Scales, Biases: m.Biases}
	if s.transcoded == nil {
		s.transcoded = map[string]Packed{}
	}
	s.transcoded[key] = p
	return p, nil
}

// Tensor returns a float tensor: vectors in f32, matrices kept or converted.
func (s *GGUFSource) Tensor(spec TensorSpec) (bridge.DType, []byte, error) {
	info, data, err := s.bytes(spec)
	if err != nil {
		return 0, nil, err
	}
	var src bridge.DType
	switch info.Type {
	case gguf.F32:
		src = bridge.F32
	case gguf.F16:
		src = bridge.F16
	case gguf.BF16:
		src = bridge.BF16
	default:
		if floatsOnly(spec) {
			return s.dequantized(spec)
		}
		return 0, nil, fmt.Errorf("%s: tensor %q is %v, packed; the engine reads it packed", s.f.PathOf(info), info.Name, info.Type)
	}
	dst := s.dtype
	if !spec.Matrix {
		dst = bridge.F32
	} else if s.keep {
		dst = src
	}
	if dst == src {
		return src, data, nil
	}
	out, err := s.mem.converted(spec, data, src, dst)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: tensor %q %w", s.f.PathOf(info), info.Name, err)
	}
	return dst, out, nil
}

// dequantized returns spec's packed tensor as f32, one copy made once.
func (s *GGUFSource) dequantized(spec TensorSpec) (bridge.DType, []byte, error) {
	p, _, err := s.packed(spec)
	if err != nil {
		return 0, nil, err
	}
	return bridge.F32, s.mem.dequantized(spec, p), nil
}

// ggufConfig reads the model's shape from the metadata.
func ggufConfig(f *gguf.File) (*Config, error) {
	bad := func(format string, a ...any) error { return fmt.Errorf("%s: %s", f.Path, fmt.Sprintf(format, a...)) }
	av, ok := f.KV["general.architecture"]
	switch {
	case !ok:
		return nil, bad("no general.architecture in the metadata: it names the model the file holds")
	case av.Type != gguf.String:
		return nil, bad("general.architecture is a %v, want a string (the architecture's name, as gguf-py writes it)", av.Type)
	}
	arch := av.Str
	hf, ok := ggufArchs[arch]
	if !ok {
		return nil, bad("architecture %s is not supported (llama, qwen2, qwen3, qwen3moe, gpt2)", clip.Quote(arch))
	}
	var errs []string
	num := func(key string, def int, need bool) int {
		v, ok := f.KV[arch+"."+key]
		if !ok {
			if need {
				errs = append(errs, "missing "+arch+"."+key)
			}
			return def
		}
		if v.Type == gguf.Array {
			one, err := ggufPerLayer(f, arch, key)
			if err != nil {
				errs = append(errs, err.Error())
				return def
			}
			v = one
		}
		if !ggufInteger(v.Type) {
			errs = append(errs, fmt.Sprintf("%s.%s is not an integer", arch, key))
			return def
		}
		// Every integer read here is a count or a size: checked as the
		// file says it, before an int could wrap it or a 0 could pass for
		// a key the model cannot do without.
		switch {
		case v.Type == gguf.U64 && v.Uint > math.MaxInt32 || v.Type != gguf.U64 && (v.Int < 0 || v.Int > math.MaxInt32):
			val := fmt.Sprint(v.Int)
			if v.Type == gguf.U64 {
				val = fmt.Sprint(v.Uint)
			}
			errs = append(errs, fmt.Sprintf("%s.%s = %s is out of range (0 to %d)", arch, key, val, math.MaxInt32))
			return def
		case v.Int == 0 && (need || !zeroMeansNone[key]):
			errs = append(errs, fmt.Sprintf("%s.%s is 0", arch, key))
			return def
		}
		return int(v.Int)
	}
	flt := func(key string, def float64) float64 {
		v, ok := f.KV[arch+"."+key]
		if !ok {
			return def
		}
		switch v.Type {
		case gguf.String, gguf.Array, gguf.Bool:
			errs = append(errs, fmt.Sprintf("%s.%s is not a number", arch, key))
			return def
		}
		return v.Float
	}
	// A split file is named as the model its parts make, without the first
	// part's number.
	name := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	if n := len(f.Parts); n > 0 {
		name = strings.TrimSuffix(name, fmt.Sprintf("-%05d-of-%05d", 1, n))
	}
	c := &Config{Name: name, Architecture: hf}
	c.EOS, errs = ggufEOG(f, errs)
	c.Hidden = num("embedding_length", 0, true)
	c.Layers = num("block_count", 0, true)
	c.ModelLayers = c.Layers
	c.Heads = num("attention.head_count", 0, true)
	c.KVHeads = num("attention.head_count_kv", c.Heads, false)
	if c.Heads > 0 {
		c.HeadDim = num("attention.key_length", c.Hidden/c.Heads, false)
	}
	if _, ok := f.KV[arch+".attention.key_length"]; !ok {
		c.derive("head_dim", "hidden_size", "num_attention_heads")
	}
	// With no head count there is no key length to hold it to (that error
	// is the head count's).
	if v := num("attention.value_length", c.HeadDim, false); c.HeadDim > 0 && v != c.HeadDim {
		errs = append(errs, fmt.Sprintf("%s.attention.value_length %d differs from %s.attention.key_length %d", arch, v, arch, c.HeadDim))
	}
	gpt2 := hf == GPT2Architecture
	// llama.cpp's loaders require the context length and the norms'
	// epsilon: a file without them was not written for it.
	c.MaxPos = num("context_length", 2048, true)
	epsKey := "attention.layer_norm_rms_epsilon"
	if gpt2 {
		epsKey = "attention.layer_norm_epsilon"
	}
	if _, ok := f.KV[arch+"."+epsKey]; !ok {
		errs = append(errs, fmt.Sprintf("%s.%s is missing", arch, epsKey))
	}
	c.Eps = float32(flt(epsKey, 1e-6))
	c.RopeTheta = flt("rope.freq_base", 10000)
	if c.HeadDim > 0 {
		if d := num("rope.dimension_count", c.HeadDim, false); d != c.HeadDim {
			errs = append(errs, fmt.Sprintf("%s.rope.dimension_count %d is not the head size %d (RoPE over whole heads only)", arch, d, c.HeadDim))
		}
	}
	// As llama.cpp's loader reads them: the type defaults to linear, its
	// factor to the older rope.scale_linear key, and a factor of 0 or 1 is
	// no scaling.
	scaling := "linear"
	if v, ok := f.KV[arch+".rope.scaling.type"]; ok {
		if v.Type != gguf.String {
			errs = append(errs, arch+".rope.scaling.type is not a string")
		}
		scaling = v.Str
	}
	switch scaling {
	case "linear":
		key := "rope.scaling.factor"
		if _, ok := f.KV[arch+"."+key]; !ok {
			key = "rope.scale_linear"
		}
		if factor := flt(key, 0); factor != 0 && factor != 1 {
			c.RopeScaling = &kernels.RoPEScaling{Type: "linear", Factor: factor}
		}
	case "yarn":
		// A factor of 0 (or none) is a frequency scale of 1 to llama.cpp's
		// loader, under which its yarn is plain RoPE.
		if c.RopeScaling = ggufYaRN(arch, f, c.MaxPos, num, flt, &errs); c.RopeScaling.Factor == 0 {
			c.RopeScaling = nil
		}
	case "", "none":
	default:
		errs = append(errs, fmt.Sprintf("rope scaling %s is not supported (none, linear, yarn, or llama3's rope_freqs tensor)", clip.Quote(scaling)))
	}
	if t, ok := f.Tensor("rope_freqs.weight"); ok && arch == "llama" {
		if t.Type != gguf.F32 || len(t.Dims) != 1 {
			return nil, bad("tensor \"rope_freqs.weight\" is %v of shape %v, not a 1-D F32 tensor", t.Type, t.Dims)
		}
		// Counted before the factors are copied: a tensor as large as the
		// file would take as much memory. Without a head size, that error
		// is the head count's.
		switch want := uint64(max(c.HeadDim, 0) / 2); {
		case t.Dims[0] == want:
			raw := f.Bytes(t)
			c.RopeFreqFactors = make([]float32, len(raw)/4)
			for i := range c.RopeFreqFactors {
				c.RopeFreqFactors[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case c.HeadDim > 0:
			errs = append(errs, fmt.Sprintf("tensor \"rope_freqs.weight\" holds %d rope frequency factors for heads of %d (want %d)", t.Dims[0], c.HeadDim, want))
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, bad("tensor \"token_embd.weight\" is missing or not 2-D")
	}
	c.Vocab = num("vocab_size", int(emb.Dims[1]), false)
	_, hasOut := f.Tensor("output.weight")
	c.TieEmbed = !hasOut
	_, c.QKVBias = f.Tensor("blk.0.attn_q.bias")
	c.QKVBias = c.QKVBias || gpt2 // in attn_qkv.bias
	// llama.cpp's llama graph (and only it) takes an output projection's
	// bias, as transformers' attention_bias gives one.
	_, c.OBias = f.Tensor("blk.0.attn_output.bias")
	c.OBias = c.OBias && arch == "llama"
	// Likewise its MLP's biases, as the converter writes mlp_bias.
	_, c.MLPBias = f.Tensor("blk.0.ffn_gate.bias")
	c.MLPBias = c.MLPBias && arch == "llama"
	c.QKNorm = arch == "qwen3" || arch == "qwen3moe"
	// Read once, so that a bad count is one error: qwen3moe requires it.
	experts := num("expert_count", 0, arch == "qwen3moe")
	switch {
	case experts > 0 && arch == "llama":
		// llama.cpp writes Mixtral as llama with experts, stacked in
		// ffn_{gate,up,down}_exps (its graph renormalises the top-k).
		c.Architecture = "MixtralForCausalLM"
		c.NumExperts, c.TopK = experts, num("expert_used_count", 0, true)
		c.Inter = num("feed_forward_length", 0, true)
		c.MoEInter, c.NormTopK, c.SparseStep = c.Inter, true, 1
	case experts > 0 && arch != "qwen3moe":
		errs = append(errs, fmt.Sprintf("%s with %s.expert_count %d is not supported (MoE: qwen3moe, and llama with experts as Mixtral)", arch, arch, experts))
	case arch == "qwen3moe":
		c.NumExperts = experts
		c.TopK = num("expert_used_count", 0, true)
		// As llama.cpp's loader, which takes the key as optional: a file
		// without it gives the experts' width by their stacked tensor.
		width := 0
		if t, ok := f.Tensor("blk.0.ffn_gate_exps.weight"); ok && len(t.Dims) == 3 {
			width = int(min(t.Dims[1], math.MaxInt32))
		}
		c.MoEInter = num("expert_feed_forward_length", width, width == 0)
		c.NormTopK = true // llama.cpp's qwen3moe graph renormalises the top-k weights
		if v, ok := f.KV[arch+".expert_weights_norm"]; ok {
			if v.Type != gguf.Bool {
				errs = append(errs, arch+".expert_weights_norm is not a bool")
			}
			c.NormTopK = v.Uint == 1
		}
		c.SparseStep = 1
		c.Inter = num("feed_forward_length", 0, false)
	default:
		c.Inter = num("feed_forward_length", 0, true)
	}
	if len(errs) > 0 {
		return nil, bad("%s", strings.Join(errs, "; "))
	}
	c.keys = ggufKeys(f, arch, c)
	if err := c.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	return c, nil
}

// ggufKeys are the metadata keys of arch that give a config's fields, which
// Validate's errors name: what a GGUF file says is fixed there.
func ggufKeys(f *gguf.File, arch string, c *Config) map[string]string {
	k := map[string]string{}
	for field, key := range map[string]string{
		"vocab_size": "vocab_size", "hidden_size": "embedding_length", "num_hidden_layers": "block_count",
		"num_attention_heads": "attention.head_count", "num_key_value_heads": "attention.head_count_kv",
		"head_dim": "attention.key_length", "intermediate_size": "feed_forward_length",
		"num_experts": "expert_count", "num_experts_per_tok": "expert_used_count", "moe_intermediate_size": "expert_feed_forward_length",
		"max_position_embeddings": "context_length", "n_positions": "context_length",
		"rms_norm_eps": "attention.layer_norm_rms_epsilon", "layer_norm_epsilon": "attention.layer_norm_epsilon",
		"rope_theta": "rope.freq_base", "rope_scaling.factor": "rope.scaling.factor",
		"original_max_position_embeddings": "rope.scaling.original_context_length", "rope_scaling": "rope.scaling",
	} {
		k[field] = arch + "." + key
	}
	// Without the key, the vocabulary is the embedding's rows.
	if _, ok := f.KV[arch+".vocab_size"]; !ok {
		k["vocab_size"] = "the rows of token_embd.weight"
	}
	// Without the key, yarn's original context is context_length, and an
	// older file's linear factor is rope.scale_linear (as they are read).
	if _, ok := f.KV[arch+".rope.scaling.original_context_length"]; !ok {
		k["original_max_position_embeddings"] = arch + ".context_length"
	}
	if _, ok := f.KV[arch+".rope.scaling.factor"]; !ok {
		k["rope_scaling.factor"] = arch + ".rope.scale_linear"
	}
	// llama.cpp's Mixtral: its experts are feed_forward_length wide.
	if c.Architecture == "MixtralForCausalLM" {
		k["moe_intermediate_size"] = arch + ".feed_forward_length"
	}
	return k
}

// ggufInteger reports whether a metadata value of type t is an integer.
// ggufEOGKeys are the token ids a generation ends at, as llama.cpp's loader
// reads them: the end of sequence, of turn and of message, and the fill-in-
// the-middle pad, repeat and separator.
var ggufEOGKeys = []string{"eos", "eot", "eom", "fim_pad", "fim_rep", "fim_sep"}

// ggufEOG is the end-of-generation set of a GGUF file's vocabulary: the ids
// its metadata names (an end of sequence it leaves out, or names past the
// vocabulary, is llama.cpp's default, ggufDefaultEOS), then the tokens
// llama.cpp finds by their text, the fill-in-the-middle ones too
// (tokenizer.GGUFEndOfGeneration). A key that is not a token id is added to
// errs.
func ggufEOG(f *gguf.File, errs []string) ([]int32, []string) {
	var eog []int32
	add := func(id int32) {
		if !slices.Contains(eog, id) {
			eog = append(eog, id)
		}
	}
	// A vocabulary that cannot be read is the tokenizer's error to name.
	var tokens []string
	if v, ok := f.KV["tokenizer.ggml.tokens"]; ok && v.Type == gguf.Array && v.Elem == gguf.String {
		tokens, _ = f.Strings("tokenizer.ggml.tokens", tokenizer.MaxVocab)
	}
	for _, name := range ggufEOGKeys {
		key := "tokenizer.ggml." + name + "_token_id"
		v, ok := f.KV[key]
		switch {
		case !ok:
		case v.Type != gguf.U32 && v.Type != gguf.I32 || v.Int < 0 || v.Int > math.MaxInt32:
			errs = append(errs, key+" is not a token id")
			continue
		case tokens == nil || v.Int < int64(len(tokens)):
			add(int32(v.Int))
			continue
		}
		// As llama.cpp's loader: with no id in the vocabulary, the end of
		// sequence is its vocabulary type's default, where the vocabulary
		// holds it; the others have none.
		if id, ok := ggufDefaultEOS[ggufString(f, "tokenizer.ggml.model")]; ok && name == "eos" && int(id) < len(tokens) {
			add(id)
		}
	}
	if tokens != nil {
		eog = tokenizer.GGUFEndOfGeneration(f, eog, tokens)
	}
	return eog, errs
}

// ggufDefaultEOS is the end-of-sequence token llama.cpp's loader takes for a
// vocabulary of each tokenizer.ggml.model where the file gives no
// tokenizer.ggml.eos_token_id (llama_vocab::impl::load): SentencePiece's
// </s> at 2, the byte-level BPE vocabularies' 11, T5's 1, PLaMo-2's 2; BERT,
// RWKV and Gemma 4 vocabularies have none.
var ggufDefaultEOS = map[string]int32{"llama": 2, "gpt2": 11, "hybriddna": 11, "whitespace": 11, "t5": 1, "plamo2": 2}

// ggufString is a string metadata value ("" when absent or not a string).
func ggufString(f *gguf.File, key string) string {
	if v, ok := f.KV[key]; ok && v.Type == gguf.String {
		return v.Str
	}
	return ""
}

func ggufInteger(t gguf.ValueType) bool {
	switch t {
	case gguf.U8, gguf.I8, gguf.U16, gguf.I16, gguf.U32, gguf.I32, gguf.U64, gguf.I64:
		return true
	}
	return false
}

// ggufLayerKeys are the counts llama.cpp's loader also reads as an array of
// one value a layer (its get_key_or_arr): gguf-py's add_head_count,
// add_head_count_kv and add_feed_forward_length take a list.
var ggufLayerKeys = map[string]bool{"attention.head_count": true, "attention.head_count_kv": true, "feed_forward_length": true}

// ggufPerLayer reads the array under arch.key, one value a layer, as the
// one value every layer shares: llama.cpp's loader takes an array of
// block_count integers there, and mtlbench runs models whose layers are
// alike, so an array whose values differ is refused, naming the layer.
func ggufPerLayer(f *gguf.File, arch, key string) (gguf.Value, error) {
	name := arch + "." + key
	v := f.KV[name]
	if !ggufLayerKeys[key] {
		return v, fmt.Errorf("%s is an array of %d values, not an integer", name, v.Len)
	}
	if !ggufInteger(v.Elem) {
		return v, fmt.Errorf("%s is an array of %s, not of integers (one a layer)", name, v.Elem)
	}
	// The length is held to block_count when that is a count (when it is
	// not, its own error says so), and to MaxLayers, before any value is
	// read: a float64 each, a u8 array would take 8 times its bytes.
	if b, ok := f.KV[arch+".block_count"]; ok && ggufInteger(b.Type) && b.Int > 0 && v.Len != uint64(b.Int) {
		return v, fmt.Errorf("%s is an array of %d values, one a layer, but %s.block_count is %d", name, v.Len, arch, b.Int)
	}
	nums, err := f.Numbers(name, MaxLayers)
	if err != nil {
		return v, err
	}
	if len(nums) == 0 {
		return v, fmt.Errorf("%s is an empty array", name)
	}
	for l, n := range nums {
		if n != nums[0] {
			return v, fmt.Errorf("%s differs between layers (layer 0: %g, layer %d: %g): mtlbench runs models whose layers share one value", name, nums[0], l, n)
		}
	}
	one := gguf.Value{Type: v.Elem, Float: nums[0]}
	if nums[0] < 0 {
		one.Int = int64(nums[0])
	} else {
		one.Uint = uint64(nums[0])
		one.Int = int64(min(nums[0], math.MaxInt64))
	}
	return one, nil
}

// zeroMeansNone are the metadata counts a file may set to 0: a model
// without experts, a MoE model without a dense feed-forward size.
var zeroMeansNone = map[string]bool{"expert_count": true, "feed_forward_length": true}

// ggufYaRN reads YaRN as llama.cpp's rope does (ggml's rope_yarn): the
// frequencies transformers' yarn gives, the cos and sin scaled by
// 1 + 0.1·ln(factor). The keys that change that formula (an extrapolation
// mix, an attention factor, DeepSeek's log multiplier) are refused by name.
// The original context defaults to context_length, as llama.cpp's loader
// sets n_ctx_orig_yarn to n_ctx_train, and as a config.json's yarn falls
// back on max_position_embeddings.
func ggufYaRN(arch string, f *gguf.File, maxPos int, num func(string, int, bool) int, flt func(string, float64) float64, errs *[]string) *kernels.RoPEScaling {
	s := &kernels.RoPEScaling{Type: "yarn", Factor: flt("rope.scaling.factor", 0),
		OriginalMax: num("rope.scaling.original_context_length", maxPos, false),
		BetaFast:    flt("rope.scaling.yarn_beta_fast", 32), BetaSlow: flt("rope.scaling.yarn_beta_slow", 1)}
	s.Attention = 1
	if s.Factor > 1 {
		s.Attention = 1 + 0.1*math.Log(s.Factor)
	}
	for _, k := range []struct {
		key string
		def float64
	}{{"rope.scaling.yarn_ext_factor", 1}, {"rope.scaling.attn_factor", 1}, {"rope.scaling.yarn_attn_factor", 1}, {"rope.scaling.yarn_log_multiplier", 0}} {
		key, def := k.key, k.def
		if _, ok := f.KV[arch+"."+key]; ok && flt(key, def) != def {
			*errs = append(*errs, fmt.Sprintf("%s.%s %g is not supported (yarn as llama.cpp's default: %g)", arch, key, flt(key, def), def))
		}
	}
	return s
}

// FormatLister is a source that lists its tensors by stored format:
// GGUF files and mlx-lm or HF folders (`mtlbench models`).
type FormatLister interface {
	// Formats lists them as a backend with rules runs them (RunFormat);
	// rules nil: in the narrowest formats that hold them exactly.
	Formats(rules bridge.QuantSupport) []FormatCount
}

// FormatCount is the model's tensors of one stored format: how many, their
// bytes in the file, and for packed formats what they run as and the
// bytes they take then (RunsAs empty: as stored).
type FormatCount struct {
	Stored    string
	Tensors   int
	FileBytes int64
	RunsAs    string
	RunBytes  int64
}

// Formats lists the model's tensors by stored ggml type, in ggml's order,
// the transcoded ones with the format rules runs them in; a stacked expert
// tensor counts once.
func (s *GGUFSource) Formats(rules bridge.QuantSupport) []FormatCount {
	byType := map[gguf.Type]*FormatCount{}
	seen := map[string]bool{}
	for _, t := range s.cfg.Tensors() {
		info, _, err := s.lookup(t)
		if err != nil || seen[info.Name] {
			continue
		}
		seen[info.Name] = true
		fc := byType[info.Type]
		if fc == nil {
			fc = &FormatCount{Stored: info.Type.String()}
			byType[info.Type] = fc
		}
		fc.Tensors++
		fc.FileBytes += int64(info.Size)
		if q, ok := info.Type.Packing(); ok {
			if run := RunFormat(rules, q); run.String() != info.Type.String() {
				fc.RunsAs = run.String()
				shape := info.Shape()
				fc.RunBytes += run.Bytes(info.Elems(), shape[len(shape)-1])
			}
		}
	}
	types := make([]gguf.Type, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	slices.Sort(types)
	out := make([]FormatCount, 0, len(types))
	for _, t := range types {
		out = append(out, *byType[t])
	}
	return out
}
