package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Packed is a packed tensor's bytes: its values, and for affine formats its
// scales and biases. All stay valid until the source is closed.
type Packed struct {
	Spec                 quant.Spec
	Data, Scales, Biases []byte
}

// Rows cuts a packed [rows, k] matrix (shape) into n matrices of rows/n
// rows each, views of its bytes: a packed row is whole bytes of values and,
// for affine formats, whole groups of scales and biases.
func (p Packed) Rows(shape []int, n int) []Packed {
	rows, k := shape[0], shape[1]
	rb, gb := p.Spec.RowBytes(k)*(rows/n), p.Spec.Groups(k)*p.Spec.Scale.Size()*(rows/n)
	out := make([]Packed, n)
	for i := range out {
		out[i] = Packed{Spec: p.Spec, Data: p.Data[i*rb : (i+1)*rb]}
		if p.Scales != nil {
			out[i].Scales, out[i].Biases = p.Scales[i*gb:(i+1)*gb], p.Biases[i*gb:(i+1)*gb]
		}
	}
	return out
}

// Convert returns p, a packed [rows, k] matrix (shape), in to, one of
// quant.Forms(p.Spec): widened (new value bytes, the same scales and
// biases) or transcoded, into new memory.
func (p Packed) Convert(shape []int, to quant.Spec) (Packed, error) {
	if len(shape) != 2 {
		return Packed{}, fmt.Errorf("converting %v: shape %v is not a matrix", p.Spec, shape)
	}
	m := &quant.Matrix{Spec: p.Spec, Rows: shape[0], K: shape[1], Data: p.Data, Scales: p.Scales, Biases: p.Biases}
	c, err := m.Convert(to)
	if err != nil {
		return Packed{}, err
	}
	return Packed{Spec: to, Data: c.Data, Scales: c.Scales, Biases: c.Biases}, nil
}

// PackedFormer is a PackedSource that writes the tensors it transcodes
// (GGUF's Q5_K, mlx's mxfp4: quant.Transcoder) straight into the form a
// backend runs (quant.Transcoder.Forms), so no narrower copy is made on the
// way.
type PackedFormer interface {
	// PackedAs is Packed with a transcoded tensor written as to, where to is
	// one of its forms; any other tensor comes as Packed gives it.
	PackedAs(spec TensorSpec, to quant.Spec) (p Packed, ok bool, err error)
}

// PackedAs returns spec's tensor of src packed as to: written so by a
// PackedFormer, else converted from the format Packed gives (quant.Forms).
// ok false when it is stored as floats.
func PackedAs(src Source, spec TensorSpec, to quant.Spec) (Packed, bool, error) {
	var p Packed
	var ok bool
	var err error
	switch s := src.(type) {
	case PackedFormer:
		p, ok, err = s.PackedAs(spec, to)
	case PackedSource:
		p, ok, err = s.Packed(spec)
	}
	if err != nil || !ok {
		return p, ok, err
	}
	p, err = p.as(spec, to)
	return p, true, err
}

// as is p, spec's packed tensor, in to: itself, or converted.
func (p Packed) as(spec TensorSpec, to quant.Spec) (Packed, error) {
	if p.Spec == to {
		return p, nil
	}
	w, err := p.Convert(spec.Shape, to)
	if err != nil {
		return Packed{}, fmt.Errorf("%s: %w", spec.Name, err)
	}
	return w, nil
}

// PackedAs is PackedAs of the wrapped source, once per tensor and form, so
// engines made one after another over it (a benchmark's repetitions) share
// one copy of what it makes; what it converts, it converts from Packed's.
func (c *Cached) PackedAs(spec TensorSpec, to quant.Spec) (Packed, bool, error) {
	key := spec.Name + " " + to.String()
	c.mu.Lock()
	p, ok := c.formed[key]
	c.mu.Unlock()
	if ok {
		return p, true, nil
	}
	var err error
	if f, isF := c.Source.(PackedFormer); isF {
		c.mu.Lock()
		p, ok, err = f.PackedAs(spec, to)
		c.mu.Unlock()
	} else {
		p, ok, err = c.Packed(spec)
	}
	if err != nil || !ok {
		return p, ok, err
	}
	if p, err = p.as(spec, to); err != nil {
		return Packed{}, true, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.formed == nil {
		c.formed = map[string]Packed{}
	}
	c.formed[key] = p
	return p, true, nil
}

// PackedSource is a Source some of whose matrices are stored packed.
type PackedSource interface {
	// Packed returns spec's tensor packed; ok false when it is stored as
	// floats (Tensor reads it then).
	Packed(spec TensorSpec) (p Packed, ok bool, err error)
}

// Packed forwards to the wrapped source, once per tensor.
func (c *Cached) Packed(spec TensorSpec) (Packed, bool, error) {
	ps, ok := c.Source.(PackedSource)
	if !ok {
		return Packed{}, false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.packed[spec.Name]; ok {
		return p, true, nil
	}
	p, ok, err := ps.Packed(spec)
	if err == nil && ok {
		if c.packed == nil {
			c.packed = map[string]Packed{}
		}
		c.packed[spec.Name] = p
	}
	return p, ok, err
}

// mlxQuant is config.json's "quantization" as mlx-lm writes it: the
// defaults, and per-module entries (a dict of overrides, or false for a
// module left in floats).
type mlxQuant struct {
	mlxModule
	Modules map[string]*mlxModule // nil value: not quantized
}

// mlxModule is how one module is quantized: mlx's mode (affine or a
// floating-point one), its group size and bits.
type mlxModule struct {
	GroupSize, Bits int
	Mode            string
}

// mlxModeDefaults are each mlx mode's group size and bits, which a config
// entry that leaves them out takes (mlx.nn's _defaults_for_mode).
var mlxModeDefaults = map[string][2]int{"affine": {64, 4}, "mxfp4": {32, 4}, "nvfp4": {16, 4}, "mxfp8": {32, 8}}

// parseMLXQuant reads the "quantization" (or, from older converters,
// "quantization_config") object of an mlx-lm config.json; nil when the
// checkpoint is not quantized. It reads the entries as mlx-lm's loader
// applies them: the top level to every module with scales, through
// nn.quantize; a per-module object as to_quantized's arguments, so what it
// leaves out is to_quantized's default (mode affine, that mode's group size
// and bits), not the top level's; true as the top level.
func parseMLXQuant(name string, data []byte) (*mlxQuant, error) {
	var raw struct {
		Q  map[string]json.RawMessage `json:"quantization"`
		QC map[string]json.RawMessage `json:"quantization_config"`
		QA bool                       `json:"quantize_activations"`
	}
	if err := json.Unmarshal(jsonerr.Python(data, &raw), &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", name, jsonerr.ExplainFile(err, data))
	}
	if raw.QA {
		// mlx-lm's QQLinear: a different product from the one the kernels
		// compute, so its logits are not this checkpoint's.
		return nil, fmt.Errorf("%s: quantize_activations is true: mlx-lm then quantizes every product's activations to the weights' mode (QQLinear), which mtlbench does not (its activations stay floats)", name)
	}
	m := raw.Q
	if m == nil {
		m = raw.QC
		if m == nil {
			return nil, nil
		}
		if _, hf := m["quant_method"]; hf {
			var method string
			if json.Unmarshal(m["quant_method"], &method) != nil {
				method = string(m["quant_method"]) // not a string: as the file spells it
			}
			return nil, fmt.Errorf("%s: quantization_config.quant_method %s is not supported (mtlbench reads mlx-lm's quantization and GGUF files)", name, clip.Quote(method))
		}
		// mlx-lm reads quantization_config["quant_method"] where there is no
		// quantization (a KeyError without one), as transformers requires it.
		return nil, fmt.Errorf("%s: quantization_config has no quant_method, which mlx-lm and transformers read there; mlx-lm writes its own settings as quantization too", name)
	}
	type entry struct {
		GroupSize *int    `json:"group_size"`
		Bits      *int    `json:"bits"`
		Mode      *string `json:"mode"`
	}
	read := func(where string, e entry) (*mlxModule, error) {
		mod := &mlxModule{Mode: "affine"}
		if e.Mode != nil {
			mod.Mode = *e.Mode
		}
		def, ok := mlxModeDefaults[mod.Mode]
		if !ok {
			return nil, fmt.Errorf("%s: mode %s is not one of mlx's (affine, mxfp4, nvfp4, mxfp8)", where, clip.Quote(mod.Mode))
		}
		mod.GroupSize, mod.Bits = def[0], def[1]
		if e.GroupSize != nil {
			mod.GroupSize = *e.GroupSize
		}
		if e.Bits != nil {
			mod.Bits = *e.Bits
		}
		if err := mod.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return mod, nil
	}
	var top entry
	for _, k := range []string{"group_size", "bits", "mode"} {
		v, ok := m[k]
		if !ok && k != "mode" {
			// mlx-lm's load_model: nn.quantize(group_size=quantization["group_size"],
			// bits=quantization["bits"], mode=quantization.get("mode", "affine")).
			return nil, fmt.Errorf("%s: quantization has no %s, which mlx-lm reads as quantization[%s] (a KeyError there)", name, clip.Quote(k), clip.Quote(k))
		}
		if !ok {
			continue
		}
		var err error
		switch k {
		case "group_size":
			err = json.Unmarshal(v, &top.GroupSize)
		case "bits":
			err = json.Unmarshal(v, &top.Bits)
		case "mode":
			err = json.Unmarshal(v, &top.Mode)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, jsonerr.ExplainAt(err, v, "quantization."+k))
		}
	}
	def, err := read(name+": quantization", top)
	if err != nil {
		return nil, err
	}
	q := &mlxQuant{mlxModule: *def, Modules: map[string]*mlxModule{}}
	for _, k := range slices.Sorted(maps.Keys(m)) { // the first bad module, the same each time
		v := m[k]
		if k == "group_size" || k == "bits" || k == "mode" {
			continue
		}
		if string(bytes.TrimSpace(v)) == "null" {
			// mlx-lm writes false for a module it left unquantized; null is
			// neither that nor a setting.
			return nil, fmt.Errorf("%s: quantization[%s] is null: want an object or a boolean", name, clip.Quote(k))
		}
		var b bool
		if json.Unmarshal(v, &b) == nil {
			if b {
				q.Modules[k] = def
			} else {
				q.Modules[k] = nil
			}
			continue
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(v, &members) == nil && len(members) == 0 && members != nil {
			// mlx's nn.quantize tests the entry for truth: an empty object,
			// like false, leaves the module a float one.
			q.Modules[k] = nil
			continue
		}
		// The object is to_quantized's keyword arguments: Python refuses
		// one that it does not take.
		for _, arg := range slices.Sorted(maps.Keys(members)) {
			switch arg {
			case "group_size", "bits", "mode":
			case "quantize_input":
				if string(bytes.TrimSpace(members[arg])) == "true" {
					return nil, fmt.Errorf("%s: quantization[%s].quantize_input is true: mlx then quantizes the module's activations (QQLinear), which mtlbench does not (its activations stay floats)", name, clip.Quote(k))
				}
			default:
				return nil, fmt.Errorf("%s: quantization[%s] has %s, which is none of to_quantized's arguments (group_size, bits, mode, quantize_input): mlx-lm refuses it", name, clip.Quote(k), clip.Quote(arg))
			}
		}
		var e entry
		if err := jsonerr.Unmarshal(v, &e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field == "" {
				return nil, fmt.Errorf("%s: quantization[%s] is %s, want an object or a boolean", name, clip.Quote(k), quote(v))
			}
			return nil, fmt.Errorf("%s: %w", name, jsonerr.ExplainAt(err, v, "quantization["+clip.Quote(k)+"]"))
		}
		if q.Modules[k], err = read(fmt.Sprintf("%s: quantization[%s]", name, clip.Quote(k)), e); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// quote is a JSON value's text as an error quotes it: one line, short.
func quote(v []byte) string {
	s := strings.Join(strings.Fields(string(v)), " ")
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return s
}

// check says whether mtlbench runs the module's mode, group size and bits.
func (m *mlxModule) check() error {
	switch m.Mode {
	case "affine":
		return quant.Spec{Type: quant.Affine, Bits: m.Bits, Group: m.GroupSize}.Validate(m.GroupSize)
	}
	fp, ok := quant.MLXFPModes[m.Mode]
	if !ok {
		return fmt.Errorf("mode %s is not supported (affine, mxfp4, nvfp4, mxfp8)", clip.Quote(m.Mode))
	}
	if m.GroupSize != fp.Group || m.Bits != fp.Bits {
		return fmt.Errorf("mode %s takes groups of %d values of %d bits, not %d of %d", m.Mode, fp.Group, fp.Bits, m.GroupSize, m.Bits)
	}
	return nil
}

// module is how module (a weight's name without ".weight") is quantized.
func (q *mlxQuant) module(module string) *mlxModule {
	if e := q.Modules[module]; e != nil {
		return e
	}
	return &q.mlxModule
}

// spec is the format module's matrix is read as, with scale its scales'
// dtype: affine as stored, a floating-point mode as its format
// (quant.MLXFPModes: mxfp4 as GGUF's MXFP4 blocks, nvfp4 and mxfp8 as
// NVFP4 and MXFP8 rows).
func (m *mlxModule) spec(scale quant.Float) quant.Spec {
	if fp, ok := quant.MLXFPModes[m.Mode]; ok {
		return fp.Spec
	}
	return quant.Spec{Type: quant.Affine, Bits: m.Bits, Group: m.GroupSize, Scale: scale}
}

// expertName splits "model.layers.L.mlp.experts.E.P.weight".
func expertName(name string) (layer, expert int, proj string, ok bool) {
	var rest string
	if n, _ := fmt.Sscanf(name, "model.layers.%d.mlp.experts.%d.%s", &layer, &expert, &rest); n != 3 {
		return 0, 0, "", false
	}
	proj, found := strings.CutSuffix(rest, ".weight")
	return layer, expert, proj, found
}

// stackedName is where mlx-lm stores an expert's tensor: stacked under
// switch_mlp (its Qwen3-MoE sanitize), one slice per expert.
func stackedName(layer int, proj, suffix string) string {
	return fmt.Sprintf("model.layers.%d.mlp.switch_mlp.%s.%s", layer, proj, suffix)
}

func floatOf(dtype string) (quant.Float, bool) {
	switch dtype {
	case "F32":
		return quant.F32, true
	case "F16":
		return quant.F16, true
	case "BF16":
		return quant.BF16, true
	}
	return 0, false
}

// Packed reads an mlx-lm packed matrix: name.weight (U32), name.scales and
// name.biases, or expert e's slice of the switch_mlp stack. A matrix in a
// floating-point mode is laid out in its format (quant.TranscodeMLXFP) once.
func (c *Checkpoint) Packed(spec TensorSpec) (Packed, bool, error) {
	if c.floatsOfPacked(spec) {
		return Packed{}, false, nil // Tensor dequantizes it
	}
	return c.packed(spec, true, quant.Spec{})
}

// PackedAs is Packed with a matrix in a floating-point mode written as to
// where to is one of its forms (quant.Forms: mxfp4's affine ones), and an
// affine one widened to to into memory of the checkpoint's own, the file's
// pages of its narrow values given back: the model holds the widened
// values only (docs/quantization.md, "Memory").
func (c *Checkpoint) PackedAs(spec TensorSpec, to quant.Spec) (Packed, bool, error) {
	if c.floatsOfPacked(spec) {
		return Packed{}, false, nil
	}
	p, ok, err := c.packed(spec, true, to)
	if err != nil || !ok || p.Spec == to || !slices.Contains(quant.Widenings(p.Spec), to) {
		return p, ok, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := spec.Name + " " + to.String()
	if w, ok := c.transcoded[key]; ok {
		return w, true, nil
	}
	w, err := c.mem.formed(spec, p, to)
	if err != nil {
		return Packed{}, true, fmt.Errorf("%s: tensor %s: %w", c.ck.Dir(), spec.Name, err)
	}
	c.ck.Drop(p.Data)
	if c.transcoded == nil {
		c.transcoded = map[string]Packed{}
	}
	c.transcoded[key] = w
	return w, true, nil
}

// packed finds and checks spec's packed tensors; with read false it stops
// there (Check), reading and transcoding nothing. A matrix in a
// floating-point mode is laid out in its format, or as to where to is one
// of that format's forms.
func (c *Checkpoint) packed(spec TensorSpec, read bool, to quant.Spec) (Packed, bool, error) {
	if c.mlx == nil || !spec.Matrix {
		return Packed{}, false, nil
	}
	module, expert, experts := strings.TrimSuffix(c.stored(spec.Name), ".weight"), -1, 0
	if l, e, proj, ok := expertName(spec.Name); ok && !c.Has(spec.Name) {
		module, expert, experts = strings.TrimSuffix(c.stored(stackedName(l, proj, "weight")), ".weight"), e, c.experts
	}
	if !c.Has(module + ".scales") {
		return Packed{}, false, nil
	}
	if e, listed := c.mlx.Modules[module]; listed && e == nil {
		// mlx-lm leaves such a module a float Linear, whose strict load
		// refuses the packed tensors.
		return Packed{}, false, fmt.Errorf("%s: config.json's quantization[%s] makes it a float module (false or {}), but the checkpoint holds its packed %s", c.ck.Dir(), clip.Quote(module), clip.Quote(module+".scales"))
	}
	rows, k := spec.Shape[0], spec.Shape[1]
	lead := []int{}
	if expert >= 0 {
		lead = []int{experts}
	}
	mod := c.mlx.module(module)
	fp := mod.Mode != "affine"
	get := func(suffix string) ([]byte, string, error) {
		name := module + "." + suffix
		data, info, err := c.bytes(name)
		if err != nil {
			return nil, "", fmt.Errorf("%s: packed tensor %s has %s but no %s", c.ck.Dir(), clip.Quote(module+".weight"), module+".scales", clip.Quote(name))
		}
		return data, info.DType, nil
	}
	sInfo, _ := c.ck.Info(module + ".scales")
	scale, ok := floatOf(sInfo.DType)
	switch {
	case fp && sInfo.DType != "U8":
		return Packed{}, false, fmt.Errorf("%s: tensor %s has dtype %s; mode %s keeps a U8 scale a group", c.fileOf(module+".scales"), clip.Quote(module+".scales"), sInfo.DType, mod.Mode)
	case !fp && !ok:
		return Packed{}, false, fmt.Errorf("%s: tensor %s has dtype %s; scales must be F32, F16 or BF16", c.fileOf(module+".scales"), clip.Quote(module+".scales"), sInfo.DType)
	}
	// Packed values: bits of each of k values in U32 words.
	where := c.fileOf(module + ".weight")
	stored := quant.Spec{Type: quant.Affine, Bits: mod.Bits, Group: mod.GroupSize, Scale: scale}
	if !fp {
		if err := stored.Validate(k); err != nil {
			return Packed{}, false, fmt.Errorf("%s: tensor %s: %w", where, clip.Quote(module+".weight"), err)
		}
	} else if k%32 != 0 {
		return Packed{}, false, fmt.Errorf("%s: tensor %s: mode %s is read in units of 32 values; a row of %d values does not divide", where, clip.Quote(module+".weight"), mod.Mode, k)
	}
	data, dt, err := get("weight")
	if err != nil {
		return Packed{}, false, err
	}
	if dt != "U32" {
		return Packed{}, false, fmt.Errorf("%s: packed tensor %s has dtype %s, want U32 (it has scales, so the config's quantization applies)", where, clip.Quote(module+".weight"), dt)
	}
	wInfo, _ := c.ck.Info(module + ".weight")
	if want := append(slices.Clone(lead), rows, k*mod.Bits/32); !slices.Equal(wInfo.Shape, want) {
		return Packed{}, false, fmt.Errorf("%s: packed tensor %s has shape %v; %d-bit values of the config's %v need %v", where, clip.Quote(module+".weight"), wInfo.Shape, mod.Bits, append(slices.Clone(lead), rows, k), want)
	}
	scales, _, err := get("scales")
	if err != nil {
		return Packed{}, false, err
	}
	gshape := append(slices.Clone(lead), rows, k/mod.GroupSize)
	groupTensors := []string{"scales", "biases"}
	var biases []byte
	if fp {
		if c.Has(module + ".biases") {
			return Packed{}, false, fmt.Errorf("%s: tensor %s: mode %s has no biases", c.fileOf(module+".biases"), clip.Quote(module+".biases"), mod.Mode)
		}
		groupTensors = groupTensors[:1]
	} else {
		var bdt string
		if biases, bdt, err = get("biases"); err != nil {
			return Packed{}, false, err
		}
		if bdt != sInfo.DType {
			return Packed{}, false, fmt.Errorf("%s: tensor %s is %s but its scales are %s", c.fileOf(module+".biases"), clip.Quote(module+".biases"), bdt, sInfo.DType)
		}
	}
	for _, sfx := range groupTensors {
		info, _ := c.ck.Info(module + "." + sfx)
		if !slices.Equal(info.Shape, gshape) {
			return Packed{}, false, fmt.Errorf("%s: tensor %q has shape %v; %d rows of %d values in groups of %d need %v",
				c.fileOf(module+"."+sfx), module+"."+sfx, info.Shape, rows, k, mod.GroupSize, gshape)
		}
	}
	if !read {
		return Packed{}, true, nil
	}
	if fp {
		form := mod.spec(0)
		if slices.Contains(quant.Forms(form), to) {
			form = to
		}
		p, err := c.transcodeFP(spec, mod.Mode, form, data, scales, expert, experts)
		return p, true, err
	}
	p := Packed{Spec: stored, Data: data, Scales: scales, Biases: biases}
	if expert >= 0 {
		m := (&quant.Matrix{Spec: stored, Rows: rows * experts, K: k, Data: data, Scales: scales, Biases: biases}).Expert(expert, experts)
		p.Data, p.Scales, p.Biases = m.Data, m.Scales, m.Biases
	}
	return p, true, nil
}

// transcodeFP rewrites spec's values in mlx's floating-point mode (expert's
// slice of a stack of experts when expert >= 0) as form, once per tensor
// and form, and lets the OS drop the file's pages it read.
func (c *Checkpoint) transcodeFP(spec TensorSpec, mode string, form quant.Spec, words, exps []byte, expert, experts int) (Packed, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := spec.Name + " " + form.String()
	if p, ok := c.transcoded[key]; ok {
		return p, nil
	}
	if expert >= 0 {
		nw, ne := len(words)/experts, len(exps)/experts
		words, exps = words[expert*nw:(expert+1)*nw], exps[expert*ne:(expert+1)*ne]
	}
	m := c.mem.transcodeTarget(spec, form)
	if err := quant.TranscodeMLXFP(mode, words, exps, m); err != nil {
		return Packed{}, fmt.Errorf("%s: tensor %s: %w", c.ck.Dir(), spec.Name, err)
	}
	c.ck.Drop(words)
	p := Packed{Spec: m.Spec, Data: m.Data, Scales: m.Scales, Biases: m.Biases}
	if c.transcoded == nil {
		c.transcoded = map[string]Packed{}
	}
	c.transcoded[key] = p
	return p, nil
}

// mlxScheme is the QuantScheme an mlx-lm checkpoint's tensors make: a
// matrix is packed when its module has scales (as mlx-lm's loader decides).
func (c *Checkpoint) mlxScheme(cfg *Config) *QuantScheme {
	q := &QuantScheme{Name: "mlx", Per: map[string]*quant.Spec{}}
	for _, t := range cfg.Tensors() {
		if !t.Matrix {
			continue
		}
		module := strings.TrimSuffix(c.stored(t.Name), ".weight")
		if l, _, proj, ok := expertName(t.Name); ok && !c.Has(t.Name) {
			module = strings.TrimSuffix(c.stored(stackedName(l, proj, "weight")), ".weight")
		}
		info, ok := c.ck.Info(module + ".scales")
		if !ok || c.floatsOfPacked(t) {
			q.Per[t.Name] = nil
			continue
		}
		f, _ := floatOf(info.DType)
		s := c.mlx.module(module).spec(f)
		q.Per[t.Name] = &s
	}
	return q
}

// stackedFloat reads expert e's slice of a float switch_mlp stack (mlx-lm
// stores unquantized Qwen3-MoE experts stacked too): nil data when spec is
// no expert or there is no stack, an error naming the stack when it is
// there but cannot hold the expert.
func (c *Checkpoint) stackedFloat(spec TensorSpec) ([]byte, bridge.DType, string, error) {
	l, e, proj, ok := expertName(spec.Name)
	if !ok {
		return nil, 0, "", nil
	}
	name := c.stored(stackedName(l, proj, "weight"))
	data, info, err := c.bytes(name)
	if err != nil {
		return nil, 0, "", nil
	}
	where := c.fileOf(name)
	dt, err := floatWeights(where, name, info.DType, c.storedHas)
	if err != nil {
		return nil, 0, "", err
	}
	if want := append([]int{c.experts}, spec.Shape...); !slices.Equal(info.Shape, want) {
		return nil, 0, "", fmt.Errorf("%s: expert stack %s has shape %v, the config implies %v", where, clip.Quote(name), info.Shape, want)
	}
	n := len(data) / c.experts
	return data[e*n : (e+1)*n], dt, name, nil
}

// Formats lists an mlx-lm folder's tensors by stored format (floats by
// dtype, packed modules by mode, bits, group size and scale dtype), with
// what mxfp4 and the widths rules widen run as (GGUFSource.Formats does the
// same for GGUF files); a switch_mlp stack counts once. nil for a folder
// OpenDir did not open.
func (c *Checkpoint) Formats(rules bridge.QuantSupport) []FormatCount {
	if c.cfg == nil {
		return nil
	}
	by := map[string]*FormatCount{}
	var order []string
	seen := map[string]bool{}
	add := func(stored string, bytes int64, runsAs string, runBytes int64) {
		fc := by[stored]
		if fc == nil {
			fc = &FormatCount{Stored: stored, RunsAs: runsAs}
			by[stored] = fc
			order = append(order, stored)
		}
		fc.Tensors++
		fc.FileBytes += bytes
		fc.RunBytes += runBytes
	}
	size := func(name string) int64 {
		info, _ := c.ck.Info(name)
		return info.Size()
	}
	for _, t := range c.cfg.Tensors() {
		name, lead := c.stored(t.Name), int64(1)
		if l, _, proj, ok := expertName(t.Name); ok && !c.Has(t.Name) {
			name, lead = c.stored(stackedName(l, proj, "weight")), int64(c.experts)
		}
		module := strings.TrimSuffix(name, ".weight")
		if !t.Matrix || !c.Has(module+".scales") {
			info, ok := c.ck.Info(name)
			if !ok { // the hub's GPT-2 names, without the prefix (resolve)
				name = strings.TrimPrefix(name, GPT2Prefix)
				info, ok = c.ck.Info(name)
			}
			if ok && !seen[name] {
				seen[name] = true
				add(info.DType, info.Size(), "", 0)
			}
			continue
		}
		if seen[module] {
			continue
		}
		seen[module] = true
		mod := c.mlx.module(module)
		bytes := size(module+".weight") + size(module+".scales") + size(module+".biases")
		sInfo, _ := c.ck.Info(module + ".scales")
		f, _ := floatOf(sInfo.DType)
		spec, k := mod.spec(f), t.Shape[len(t.Shape)-1]
		run := RunFormat(rules, spec)
		stored := spec.String()
		if mod.Mode != "affine" {
			stored = mod.Mode // mlx's layout, read in a format of its bytes
		}
		if run == spec {
			add(stored, bytes, "", 0)
			continue
		}
		add(stored, bytes, run.String(), run.Bytes(lead*t.Elems(), k))
	}
	out := make([]FormatCount, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	return out
}
