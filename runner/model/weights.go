package model

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"hash/fnv"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/offheap"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/gguf"
	"github.com/mtlbench/mtlbench/runner/safetensors"
	"github.com/mtlbench/mtlbench/suites"
)

// Source yields the bytes of each weight tensor. Matrix tensors come in
// Source.DType; vectors (norm weights, biases) always in f32.
type Source interface {
	// Tensor returns the little-endian bytes of spec's tensor and their
	// dtype. The bytes stay valid until Close.
	Tensor(spec TensorSpec) (bridge.DType, []byte, error)
	DType() bridge.DType
	Describe() string
	Close() error
}

// Synthetic generates deterministic random weights from a seed: every
// benchmark runs with no download, and the same seed gives the same model.
type Synthetic struct {
	Seed  uint64
	dtype bridge.DType
	quant *QuantScheme // packed formats of a quantized preset
	mem   owned
	// mu orders draws: a MoE layer's experts share stacks, each drawn once.
	mu     sync.Mutex
	formed map[string]Packed // what PackedAs made, by tensor and form
}

// NewSynthetic returns a synthetic source with matrices in dt.
func NewSynthetic(seed uint64, dt bridge.DType) *Synthetic { return &Synthetic{Seed: seed, dtype: dt} }

func (s *Synthetic) DType() bridge.DType { return s.dtype }
func (s *Synthetic) Describe() string {
	if s.quant != nil {
		return fmt.Sprintf("synthetic (seed %d, %s, %v floats)", s.Seed, s.quant.Name, s.dtype)
	}
	return fmt.Sprintf("synthetic (seed %d, %v)", s.Seed, s.dtype)
}

// Uint64 makes splitmix a quant.Rand.
func (r *splitmix) Uint64() uint64 { return r.next() }

// Packed draws a quantized preset's matrix directly in its packed format
// (quant.Random), in parallel pieces of rows whose values do not depend on
// the number of cores.
func (s *Synthetic) Packed(spec TensorSpec) (Packed, bool, error) {
	q, ok := s.quant.For(spec.Name)
	if !ok || !spec.Matrix {
		return Packed{}, false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	place := func(part string, n int) ([]byte, bool) { return s.mem.place(spec, q.String(), part, n) }
	return s.draw(spec, q, place, place)
}

// PackedAs is Packed with a matrix to holds exactly (quant.Forms: a
// widening, a transcoder's form) drawn and then converted into memory of
// the source's own: the draw's values are freed at once, so only the form
// a backend runs stays held (docs/quantization.md, "Memory").
func (s *Synthetic) PackedAs(spec TensorSpec, to quant.Spec) (Packed, bool, error) {
	q, ok := s.quant.For(spec.Name)
	if !ok || !spec.Matrix || q == to || !slices.Contains(quant.Forms(q), to) {
		return s.Packed(spec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	temp := func(_ string, n int) ([]byte, bool) {
		b, free, _ := offheap.Alloc(n)
		frees = append(frees, free)
		return b, true
	}
	groups := temp
	if q.Type == quant.Affine {
		// the widened values keep them
		groups = func(part string, n int) ([]byte, bool) { return s.mem.place(spec, q.String(), part, n) }
	}
	key := spec.Name + " " + to.String()
	if p, ok := s.formed[key]; ok {
		return p, true, nil
	}
	p, _, err := s.draw(spec, q, temp, groups)
	if err != nil {
		return Packed{}, true, err
	}
	p, err = s.mem.formed(spec, p, to)
	if err != nil {
		return Packed{}, true, fmt.Errorf("synthetic %s: %w", spec.Name, err)
	}
	if s.formed == nil {
		s.formed = map[string]Packed{}
	}
	s.formed[key] = p
	return p, true, nil
}

// draw is spec's matrix drawn in q, its values placed by values and its
// scales and biases by groups; a matrix whose values were placed before
// is handed out again as it was drawn.
func (s *Synthetic) draw(spec TensorSpec, q quant.Spec, values, groups func(part string, n int) ([]byte, bool)) (Packed, bool, error) {
	rows, k := spec.Shape[0], spec.Shape[1]
	if err := q.Validate(k); err != nil {
		return Packed{}, false, fmt.Errorf("synthetic %s: %w", spec.Name, err)
	}
	h := fnv.New64a()
	h.Write([]byte(spec.Name))
	rng := splitmix{s.Seed ^ h.Sum64()}
	amp := float32(math.Sqrt(3 / float64(max(spec.FanIn, 1))))
	rb, gb := q.RowBytes(k), q.Groups(k)*q.Scale.Size()
	p := Packed{Spec: q}
	data, fresh := values("data", rows*rb)
	p.Data = data
	if gb > 0 {
		p.Scales, _ = groups("scales", rows*gb)
		p.Biases, _ = groups("biases", rows*gb)
	}
	if !fresh {
		return p, true, nil
	}
	per := max(1, (1<<16)/k)
	seed := rng.next()
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < rows; lo += per {
		wg.Add(1)
		sem <- struct{}{}
		go func(lo, hi int) {
			defer wg.Done()
			r := splitmix{seed + uint64(lo)*0x9e3779b97f4a7c15}
			var sc, bi []byte
			if gb > 0 {
				sc, bi = p.Scales[lo*gb:hi*gb], p.Biases[lo*gb:hi*gb]
			}
			quant.Random(q, hi-lo, k, amp, &r, p.Data[lo*rb:hi*rb], sc, bi)
			<-sem
		}(lo, min(rows, lo+per))
	}
	wg.Wait()
	return p, true, nil
}

// Close releases the memory of every tensor handed out.
func (s *Synthetic) Close() error {
	s.mem.release()
	return nil
}

// Mapped reports whether b lies in memory this source mmap'd (MappedSource).
func (s *Synthetic) Mapped(b []byte) bool { return s.mem.contain(b) }

// Tensor draws uniform values scaled by 1/sqrt(fan-in), so each layer keeps
// activations near unit scale; norm weights sit near one.
func (s *Synthetic) Tensor(spec TensorSpec) (bridge.DType, []byte, error) {
	h := fnv.New64a()
	h.Write([]byte(spec.Name))
	rng := splitmix{s.Seed ^ h.Sum64()}
	n := int(spec.Elems())
	if !spec.Matrix {
		v := make([]float32, n)
		isNorm := filepath.Ext(spec.Name) == ".weight"
		for i := range v {
			v[i] = 0.1 * rng.sym()
			if isNorm {
				v[i] += 1
			}
		}
		return bridge.F32, f32Bytes(v), nil
	}
	scale := float32(math.Sqrt(3 / float64(max(spec.FanIn, 1))))
	dt := s.dtype
	if s.quant != nil && s.quant.F32[spec.Name] {
		dt = bridge.F32
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, fresh := s.mem.place(spec, dt.String(), "", n*dt.Size())
	if !fresh {
		return dt, raw, nil
	}
	switch dt {
	case bridge.F32:
		v := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), n)
		fillParallel(n, func(lo, hi int, r splitmix) {
			for i := lo; i < hi; i++ {
				v[i] = scale * r.sym()
			}
		}, rng.next())
		return bridge.F32, raw, nil
	default:
		v := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(raw))), n)
		conv := half.BF16
		if dt == bridge.F16 {
			conv = half.F16
		}
		fillParallel(n, func(lo, hi int, r splitmix) {
			for i := lo; i < hi; i++ {
				v[i] = conv(scale * r.sym())
			}
		}, rng.next())
		return dt, raw, nil
	}
}

// fillParallel splits [0,n) in fixed pieces, each with its own generator
// derived from seed and the piece index, so the values do not depend on the
// number of cores.
func fillParallel(n int, fn func(lo, hi int, r splitmix), seed uint64) {
	// Small pieces: an expert matrix (768x2048) must still spread over
	// every core of a 16-core GPU host.
	const piece = 1 << 16
	pieces := (n + piece - 1) / piece
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for p := 0; p < pieces; p++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(p int) {
			defer wg.Done()
			fn(p*piece, min((p+1)*piece, n), splitmix{seed + uint64(p)*0x9e3779b97f4a7c15})
			<-sem
		}(p)
	}
	wg.Wait()
}

// splitmix is SplitMix64: fast, and good enough for weights.
type splitmix struct{ s uint64 }

func (r *splitmix) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// sym is uniform in [-1, 1).
func (r *splitmix) sym() float32 { return float32(int64(r.next())>>40) / (1 << 23) }

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// Checkpoint reads weights from an HF safetensors folder through mmap.
type Checkpoint struct {
	ck      *safetensors.Checkpoint
	mem     owned        // conversions, transposes and transcodes
	dtype   bridge.DType // matrices are converted to this when it differs
	keep    bool         // keep each matrix's stored dtype
	mlx     *mlxQuant    // mlx-lm's quantization, nil for float checkpoints
	experts int          // experts per MoE layer, to slice switch_mlp stacks
	sparse  bool         // MoE layers stored under Mixtral's names (stored)
	// mlxGPT2: GPT-2 as mlx-lm saves it, under "model." and with its Conv1D
	// weights transposed to [out, in] (its sanitize), so they are read in
	// place; Transposed specs are stored as they are handed out.
	mlxGPT2 bool
	// headAsEmbed is the embedding's name where a tied folder holds its
	// one matrix as lm_head.weight alone, which is read for it.
	headAsEmbed string
	cfg         *Config // the model, once OpenDir has read it (Formats)
	// looked gathers the stored names Check finds its tensors under;
	// unread are the others, which the model (of architecture unreadBy)
	// does not read (Unread).
	looked   map[string]bool
	unread   []string
	unreadBy string

	mu         sync.Mutex
	transcoded map[string]Packed // floating-point modes' matrices laid out so far, by HF name and form
}

// OpenCheckpoint opens dir's safetensors. With want == nil matrices keep the
// checkpoint's dtype (no copy); otherwise they are converted. Without a
// config its DType is its first F16 or BF16 tensor's, but for packed
// matrices' scales; OpenDir takes it from the matrices the model reads.
func OpenCheckpoint(dir string, want *bridge.DType) (*Checkpoint, error) {
	return openCheckpoint(dir, want, 0)
}

// openCheckpoint is OpenCheckpoint refusing more than maxTensors tensors
// (0: no bound).
func openCheckpoint(dir string, want *bridge.DType, maxTensors int) (*Checkpoint, error) {
	ck, err := safetensors.OpenDirMax(dir, maxTensors)
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{ck: ck}
	for _, n := range ck.Names() {
		if strings.Contains(n, ".block_sparse_moe.") {
			c.sparse = true
			break
		}
	}
	if want != nil {
		c.dtype = *want
	} else {
		c.keep = true
		c.dtype = bridge.F32
		for _, n := range ck.Names() {
			// A packed matrix's scales and biases say nothing of the
			// model's float dtype: an f32 model may keep them in bf16.
			if strings.HasSuffix(n, ".scales") || strings.HasSuffix(n, ".biases") {
				continue
			}
			if info, _ := ck.Info(n); info.DType == "BF16" || info.DType == "F16" {
				c.dtype, _ = bridge.ParseDType(info.DType)
				break
			}
		}
	}
	return c, nil
}

func (c *Checkpoint) DType() bridge.DType { return c.dtype }
func (c *Checkpoint) Describe() string    { return "checkpoint " + c.ck.Dir() }
func (c *Checkpoint) Close() error {
	c.mem.release()
	return c.ck.Close()
}

// Mapped reports whether b lies in the checkpoint's file mappings or in the
// mmap'd memory of a converted tensor (MappedSource).
func (c *Checkpoint) Mapped(b []byte) bool { return c.ck.Mapped(b) || c.mem.contain(b) }

// Drop gives back the pages of b that lie in the checkpoint's files
// (PageDropper); a converted tensor's memory is left alone.
func (c *Checkpoint) Drop(b []byte) { c.ck.Drop(b) }

// layersPast refuses tensors of a layer at or past n, the layers the
// config says there are: with fewer in the config, the rest would be
// dropped silently and the figures be another model's.
func (c *Checkpoint) layersPast(n int) error {
	most := -1
	for _, name := range c.ck.Names() {
		// model.layers.N. (HF, mlx-lm); h.N. under transformer. or model.
		// (GPT-2, and mlx-lm's GPT-2)
		name = strings.TrimPrefix(strings.TrimPrefix(name, "model."), "transformer.")
		var l int
		var rest string
		if k, _ := fmt.Sscanf(name, "layers.%d.%s", &l, &rest); k == 2 {
			most = max(most, l)
		} else if k, _ := fmt.Sscanf(name, "h.%d.%s", &l, &rest); k == 2 {
			most = max(most, l)
		}
	}
	if most >= n {
		return fmt.Errorf("the weights hold %d layers, but config.json says %d (num_hidden_layers / n_layer)", most+1, n)
	}
	return nil
}

// Has reports whether the checkpoint holds a tensor.
func (c *Checkpoint) Has(name string) bool { _, ok := c.ck.Info(c.stored(name)); return ok }

// storedHas reports whether the files hold a tensor of this stored name.
func (c *Checkpoint) storedHas(name string) bool { _, ok := c.ck.Info(name); return ok }

// mixtralProj are Mixtral's names for an expert's projections.
var mixtralProj = map[string]string{"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}

// stored is the name the checkpoint keeps tensor name under. Tensors names
// an MoE layer's router and experts as Qwen3-MoE does (mlp.gate,
// mlp.experts.E.gate_proj, mlx-lm's mlp.switch_mlp stacks); Mixtral keeps
// them under block_sparse_moe, its experts' gate, up and down as w1, w3 and
// w2 (mlx-lm's stacks keep the projections' names). Other names, and names
// already stored, are their own.
func (c *Checkpoint) stored(name string) string {
	if c.headAsEmbed != "" && name == c.headAsEmbed {
		return "lm_head.weight"
	}
	if c.mlxGPT2 && strings.HasPrefix(name, GPT2Prefix) {
		return mlxGPT2Prefix + strings.TrimPrefix(name, GPT2Prefix)
	}
	if !c.sparse {
		return name
	}
	var l, e int
	var rest string
	if n, _ := fmt.Sscanf(name, "model.layers.%d.mlp.experts.%d.%s", &l, &e, &rest); n == 3 {
		proj, suffix, _ := strings.Cut(rest, ".")
		if w, ok := mixtralProj[proj]; ok {
			return fmt.Sprintf("model.layers.%d.block_sparse_moe.experts.%d.%s.%s", l, e, w, suffix)
		}
	}
	if n, _ := fmt.Sscanf(name, "model.layers.%d.mlp.%s", &l, &rest); n == 2 && (strings.HasPrefix(rest, "gate.") || strings.HasPrefix(rest, "switch_mlp.")) {
		return fmt.Sprintf("model.layers.%d.block_sparse_moe.%s", l, rest)
	}
	return name
}

// CheckpointBytes is the size of the tensors in the folder.
func (c *Checkpoint) CheckpointBytes() int64 { return c.ck.TotalBytes() }

func (c *Checkpoint) Tensor(spec TensorSpec) (bridge.DType, []byte, error) {
	if c.floatsOfPacked(spec) {
		return c.dequantized(spec)
	}
	data, info, src, err := c.resolve(spec)
	if err != nil {
		return 0, nil, err
	}
	dst := c.dtype
	if !spec.Matrix {
		dst = bridge.F32
	} else if c.keep {
		dst = src
	}
	if c.transposed(spec) {
		// [in, out] to [out, in], then any conversion: one copy is kept
		// either way, the transpose released once converted.
		if dst == src {
			t := c.mem.alloc(len(data))
			transpose(t, data, info.Shape[0], info.Shape[1], src.Size())
			return src, t, nil
		}
		t, free, _ := offheap.Alloc(len(data))
		defer free()
		transpose(t, data, info.Shape[0], info.Shape[1], src.Size())
		data = t
	}
	if dst == src {
		return src, data, nil
	}
	out, err := c.mem.converted(spec, data, src, dst)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: tensor %q %w", c.fileOf(info.Name), info.Name, err)
	}
	return dst, out, nil
}

// resolve finds spec's float tensor (by its stored name, without GPT-2's
// prefix, or as an expert's slice of a stack) and checks its shape and
// dtype, reading none of its bytes.
func (c *Checkpoint) resolve(spec TensorSpec) ([]byte, safetensors.TensorInfo, bridge.DType, error) {
	name := c.stored(spec.Name)
	data, info, err := c.bytes(name)
	if err != nil && strings.HasPrefix(name, GPT2Prefix) {
		// The hub's GPT-2 checkpoints name tensors without the prefix.
		if d, i, err2 := c.bytes(strings.TrimPrefix(name, GPT2Prefix)); err2 == nil {
			name, data, info, err = strings.TrimPrefix(name, GPT2Prefix), d, i, nil
		}
	}
	where := c.fileOf(name)
	if err != nil {
		sdata, sdt, sname, serr := c.stackedFloat(spec)
		if serr != nil {
			return nil, info, 0, serr
		}
		if sdata == nil {
			if l, _, proj, ok := expertName(spec.Name); ok {
				return nil, info, 0, fmt.Errorf("%s: tensor %q is missing, and so is its experts' stack %q", c.ck.Dir(), name, c.stored(stackedName(l, proj, "weight")))
			}
			return nil, info, 0, fmt.Errorf("%s: tensor %q is missing", c.ck.Dir(), name)
		}
		name, data, info, where = sname, sdata, c.sliceInfo(sname, spec, sdt), c.fileOf(sname)
	}
	src, err := floatWeights(where, name, info.DType, c.storedHas)
	if err != nil {
		return nil, info, 0, err
	}
	stored := spec.Shape
	if c.transposed(spec) {
		stored = []int{spec.Shape[1], spec.Shape[0]}
	}
	if !slices.Equal(info.Shape, stored) {
		return nil, info, 0, fmt.Errorf("%s: tensor %q has shape %v, the config implies %v", where, name, info.Shape, stored)
	}
	return data, info, src, nil
}

// transposed reports whether spec's tensor is stored [in, out]: GPT-2's
// Conv1D weights as transformers saves them, not as mlx-lm does.
func (c *Checkpoint) transposed(spec TensorSpec) bool { return spec.Transposed && !c.mlxGPT2 }

// floatsOfPacked reports whether spec's tensor is one the engine takes as
// floats (GPT-2's learned positions, added as they are) that the
// checkpoint stores packed: mlx-lm quantizes wpe like any embedding.
func (c *Checkpoint) floatsOfPacked(spec TensorSpec) bool {
	return c.mlx != nil && floatsOnly(spec) && c.Has(strings.TrimSuffix(c.stored(spec.Name), ".weight")+".scales")
}

// floatsOnly reports whether the engine takes spec's tensor as floats
// whatever a checkpoint stores: GPT-2's learned positions, added to the
// activations as they are (PositionEmbeddingOp). A source that stores it
// packed dequantizes it once as it loads.
func floatsOnly(spec TensorSpec) bool { return spec.Name == GPT2Positions }

// dequantized returns spec's packed tensor as f32, one copy made once: a
// table of context x hidden values (GPT-2's 1024 x 768, 3 MiB).
func (c *Checkpoint) dequantized(spec TensorSpec) (bridge.DType, []byte, error) {
	p, _, err := c.packed(spec, true, quant.Spec{})
	if err != nil {
		return 0, nil, err
	}
	return bridge.F32, c.mem.dequantized(spec, p), nil
}

// dequantizeInto writes packed matrix p of shape [rows, k] into out as
// little-endian f32, row by row.
func dequantizeInto(out []byte, p Packed, shape []int) {
	m := &quant.Matrix{Spec: p.Spec, Rows: shape[0], K: shape[1], Data: p.Data, Scales: p.Scales, Biases: p.Biases}
	row := make([]float32, m.K)
	for r := range m.Rows {
		m.Row(r, row)
		for i, v := range row {
			binary.LittleEndian.PutUint32(out[4*(r*m.K+i):], math.Float32bits(v))
		}
	}
}

// F32 returns spec's tensor of src as little-endian f32 bytes in a new
// slice, whatever src keeps it in: a packed matrix dequantized, f16 and
// bf16 widened, f32 copied. A Cached source makes the slice once and hands
// the same one to every engine made over it, so a backend that keys the
// weights it copies by their host bytes (bridge.HostKey) copies it once.
func F32(src Source, spec TensorSpec) ([]byte, error) {
	if c, ok := src.(*Cached); ok {
		return c.f32(spec)
	}
	return toF32(src, spec)
}

// f32 is F32 of the wrapped source, once per tensor.
func (c *Cached) f32(spec TensorSpec) ([]byte, error) {
	c.mu.Lock()
	b, ok := c.floats[spec.Name]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := toF32(c, spec)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.floats == nil {
		c.floats = map[string][]byte{}
	}
	if kept, ok := c.floats[spec.Name]; ok {
		return kept, nil
	}
	c.floats[spec.Name] = b
	return b, nil
}

func toF32(src Source, spec TensorSpec) ([]byte, error) {
	if ps, ok := src.(PackedSource); ok {
		p, packed, err := ps.Packed(spec)
		if err != nil {
			return nil, err
		}
		if packed {
			if len(spec.Shape) != 2 {
				return nil, fmt.Errorf("%s: packed tensor of shape %v", spec.Name, spec.Shape)
			}
			out := make([]byte, 4*spec.Elems())
			dequantizeInto(out, p, spec.Shape)
			return out, nil
		}
	}
	dt, data, err := src.Tensor(spec)
	if err != nil {
		return nil, err
	}
	if dt != bridge.F32 && dt != bridge.F16 && dt != bridge.BF16 {
		return nil, fmt.Errorf("%s: %v weights where floats are expected", spec.Name, dt)
	}
	out := make([]byte, 4*(len(data)/dt.Size()))
	convert(out, data, dt, bridge.F32)
	return out, nil
}

// floatWeights is a float tensor's dtype, or an error naming it (file
// where, tensor name): a U32 one is packed values whose scales are not
// there, or whose config.json says no quantization (has finds tensors).
func floatWeights(where, name, dtype string, has func(string) bool) (bridge.DType, error) {
	dt, err := bridge.ParseDType(dtype)
	switch {
	case dtype == "U32" && strings.HasSuffix(name, ".weight"):
		module := strings.TrimSuffix(name, ".weight")
		if has(module + ".scales") {
			return 0, fmt.Errorf("%s: tensor %q has dtype U32, packed values with %q beside them, but config.json has no \"quantization\" (or \"quantization_config\") to read them by", where, name, module+".scales")
		}
		return 0, fmt.Errorf("%s: tensor %q has dtype U32, packed values with no %q and %q to read them by", where, name, module+".scales", module+".biases")
	case err != nil || dt == bridge.I32:
		return 0, fmt.Errorf("%s: tensor %q has dtype %s; weights must be F32, F16 or BF16", where, name, dtype)
	}
	return dt, nil
}

// Check finds every tensor cfg needs and checks its shape and dtype (and a
// packed one's scales and biases), reading none of their bytes: a broken
// checkpoint is refused as it opens, whatever then uses it.
//
// The names it finds them under are the ones the model reads: the rest of
// the folder's tensors are Unread's.
func (c *Checkpoint) Check(cfg *Config) error {
	c.looked = map[string]bool{}
	defer func() { c.looked = nil }()
	for _, t := range cfg.Tensors() {
		if _, packed, err := c.packed(t, false, quant.Spec{}); err != nil || packed {
			if err != nil {
				return err
			}
			continue
		}
		if _, _, _, err := c.resolve(t); err != nil {
			return err
		}
	}
	c.unread, c.unreadBy = nil, cfg.Architecture
	for _, n := range c.ck.Names() {
		if !c.looked[n] && !ignoredUnread(cfg, n) {
			c.unread = append(c.unread, n)
		}
	}
	return nil
}

// bytes is the stored tensor name's bytes; while Check runs, a name found
// is noted as one the model reads.
func (c *Checkpoint) bytes(name string) ([]byte, safetensors.TensorInfo, error) {
	data, info, err := c.ck.Bytes(name)
	if err == nil && c.looked != nil {
		c.looked[name] = true
	}
	return data, info, err
}

// transpose writes the rows x cols matrix data (elements of size 2 or 4
// bytes) into out as cols x rows, in tiles so both sides stay in cache.
func transpose(out, data []byte, rows, cols, size int) {
	if size == 2 {
		transposeTiles(u16s(out), u16s(data), rows, cols)
	} else {
		transposeTiles(u32s(out), u32s(data), rows, cols)
	}
}

func transposeTiles[T uint16 | uint32](out, in []T, rows, cols int) {
	const tile = 64
	for r0 := 0; r0 < rows; r0 += tile {
		for c0 := 0; c0 < cols; c0 += tile {
			for r := r0; r < min(r0+tile, rows); r++ {
				for c := c0; c < min(c0+tile, cols); c++ {
					out[c*rows+r] = in[r*cols+c]
				}
			}
		}
	}
}

func u16s(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

func u32s(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// convert re-encodes a little-endian tensor between float dtypes into out.
// It returns the first finite value that dst cannot hold (past f16's 65504,
// or rounded past bf16's largest), which would run as an infinity; ok false
// when every value fits.
func convert(out, data []byte, src, dst bridge.DType) (over float32, ok bool) {
	n := len(data) / src.Size()
	f := make([]float32, n)
	for i := range f {
		switch src {
		case bridge.F32:
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		case bridge.BF16:
			f[i] = half.BF16ToFloat(binary.LittleEndian.Uint16(data[2*i:]))
		case bridge.F16:
			f[i] = half.F16ToFloat(binary.LittleEndian.Uint16(data[2*i:]))
		}
	}
	if dst == bridge.F32 {
		copy(out, f32Bytes(f))
		return 0, false
	}
	// An all-ones exponent: an infinity (or NaN) in either half format.
	inf := uint16(0x7f80)
	if dst == bridge.F16 {
		inf = 0x7c00
	}
	for i, v := range f {
		h := half.BF16(v)
		if dst == bridge.F16 {
			h = half.F16(v)
		}
		if h&inf == inf && !ok && !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v)) {
			over, ok = v, true
		}
		binary.LittleEndian.PutUint16(out[2*i:], h)
	}
	return over, ok
}

// rangeError is a tensor's finite value that the dtype it is converted to
// cannot hold.
type rangeError struct {
	value    float32
	src, dst bridge.DType
}

func (e *rangeError) Error() string {
	return fmt.Sprintf("holds %g, beyond %v's range: in %v it would run as an infinity, and the model's logits as NaN (as stored, %v, or in a dtype of wider range it loads)",
		e.value, e.dst, e.dst, e.src)
}

func (c *Checkpoint) sliceInfo(name string, spec TensorSpec, dt bridge.DType) safetensors.TensorInfo {
	info, _ := c.ck.Info(name)
	return safetensors.TensorInfo{Name: name, DType: info.DType, Shape: spec.Shape}
}

// tensorBound is the most tensors a checkpoint of c may hold, so that a
// header of millions is refused before it is read whole: three (a packed
// weight, its scales and biases) for each tensor its layers could have,
// and room for parts no module reads (a vision tower, rotary tables).
func (c *Config) tensorBound() int {
	return 3*(c.ModelLayers*(3*c.NumExperts+16)+16) + 4096
}

// OpenDir opens a checkpoint folder: its config (with mlx-lm's
// quantization, when it has one) and its weights. want as OpenCheckpoint.
func OpenDir(dir string, want *bridge.DType) (*Config, *Checkpoint, error) {
	cfg, p, raw, err := loadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	mq, err := parseMLXQuant(p, raw)
	if err != nil {
		return nil, nil, err
	}
	ck, err := openCheckpoint(dir, want, cfg.tensorBound())
	if errors.Is(err, safetensors.ErrNoWeights) {
		if other := folderHolds(dir, true); other != "" {
			return nil, nil, fmt.Errorf("%w: %s", err, other)
		}
		// A configuration alone (downloaded without its weights, or written
		// to describe a shape) runs with weights drawn for it.
		return nil, nil, fmt.Errorf("%w: the folder holds the model's configuration alone (seeded weights of its architecture run with bench's --synthetic, a suite's weights: synthetic)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	ck.mlx, ck.experts, ck.mem.experts = mq, cfg.NumExperts, cfg.NumExperts
	ck.mlxGPT2 = cfg.GPT2() && ck.Has(mlxGPT2Prefix+"wte.weight")
	ck.cfg = cfg
	if err := ck.layersPast(cfg.ModelLayers); err != nil {
		ck.Close()
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	if err := unaskedBias(cfg, ck.Has); err != nil {
		ck.Close()
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	// With the field missing and no head of its own, the embedding is the
	// head, as mlx-lm's Llama and Qwen2 default; with the field false,
	// transformers would give such a head random weights: garbage logits.
	if cfg.tieUnset && !ck.Has("lm_head.weight") {
		cfg.TieEmbed = true
	}
	// A tied folder may hold its one matrix as lm_head.weight alone:
	// safetensors' save_model keeps the first of a shared tensor's names in
	// sorted order, and transformers ties such a folder the other way round
	// as it loads.
	embed := "model.embed_tokens.weight"
	if cfg.GPT2() {
		embed = GPT2Embed
	}
	if cfg.TieEmbed && !ck.Has(embed) && !ck.storedHas(strings.TrimPrefix(embed, GPT2Prefix)) && ck.Has("lm_head.weight") {
		ck.headAsEmbed = embed
	}
	if !cfg.TieEmbed && !ck.Has("lm_head.weight") && !ck.mlxGPT2 {
		ck.Close()
		return nil, nil, fmt.Errorf("%s: lm_head.weight is missing from the checkpoint, and tie_word_embeddings is false (set it true if the LM head is the embedding)", dir)
	}
	if mq != nil {
		cfg.Quant = ck.mlxScheme(cfg)
	}
	if ck.keep {
		ck.dtype = ck.readDType(cfg)
		ck.keptInF32(cfg)
	}
	err = oneExpertFormat(cfg, func(t TensorSpec) (string, bool, string, bool) {
		if _, packed, err := ck.packed(t, false, quant.Spec{}); err != nil {
			return "", false, "", false
		} else if packed {
			q, _ := cfg.Quant.For(t.Name) // the scheme names each packed matrix's format
			return q.String(), false, ck.stored(t.Name), true
		}
		if !ck.keep {
			return "", true, "", false // converted to the dtype asked for
		}
		_, info, dt, err := ck.resolve(t)
		return dt.String(), true, info.Name, err == nil
	})
	if err != nil {
		ck.Close()
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	return cfg, ck, nil
}

// keptInF32 marks the float matrices cfg reads that the folder stores in
// F32 beside half-precision ones (QuantScheme.F32): kept as stored, each
// loads at four bytes a value, and the fit check and memory figures count
// them so, as a GGUF file's F32 matrices beside F16 ones are counted, not
// at the two bytes of the dtype the first matrix sets (readDType).
func (c *Checkpoint) keptInF32(cfg *Config) {
	if c.dtype == bridge.F32 {
		return
	}
	for _, t := range cfg.Tensors() {
		if !t.Matrix {
			continue
		}
		if _, packed, err := c.packed(t, false, quant.Spec{}); err != nil || packed {
			continue
		}
		if _, _, dt, err := c.resolve(t); err != nil || dt != bridge.F32 {
			continue
		}
		if cfg.Quant == nil {
			cfg.Quant = &QuantScheme{Name: "safetensors"}
		}
		if cfg.Quant.F32 == nil {
			cfg.Quant.F32 = map[string]bool{}
		}
		cfg.Quant.F32[t.Name] = true
	}
}

// readDType is the float dtype of the matrices cfg reads as the folder
// stores them (kept so, with no dtype asked for): the first F16 or BF16 one
// in the model's order, else F32. A tensor the model never reads (an LM head
// the config ties, another model's tower) says nothing of it, and
// config.json's torch_dtype is not read: transformers casts every weight to
// it, where the weights here stay as stored, and the KV cache and the fit
// estimate follow the weights held (docs/architecture.md, "The KV cache").
func (c *Checkpoint) readDType(cfg *Config) bridge.DType {
	for _, t := range cfg.Tensors() {
		if !t.Matrix {
			continue // norms and biases are read as f32 whatever they are stored in
		}
		if _, packed, err := c.packed(t, false, quant.Spec{}); err != nil || packed {
			continue
		}
		// A tensor missing or of the wrong shape is Check's to refuse.
		if _, _, dt, err := c.resolve(t); err == nil && (dt == bridge.F16 || dt == bridge.BF16) {
			return dt
		}
	}
	return bridge.F32
}

// otherFormats are the weight files of the formats a hub repository may
// hold beside config.json instead of safetensors, as transformers' loader
// (modeling_utils.py) and Mistral's and Meta's own tools name them.
var otherFormats = []struct{ pattern, format string }{
	{"pytorch_model*.bin", "PyTorch's pickle format"},
	{"consolidated*.pth", "PyTorch's pickle format, as Mistral's and Meta's own tools save it"},
	{"tf_model*.h5", "TensorFlow's format"},
	{"flax_model*.msgpack", "Flax's format"},
	{"weights*.npz", "NumPy's format, as early mlx-examples conversions saved it"},
}

// folderHolds says what a checkpoint folder lacking what mtlbench reads
// holds instead that is close to it, with what to give: a GGUF file to give
// itself, weights of a format mtlbench does not read and, where it has no
// config.json (hasConfig false), a Hugging Face cache's repository folder,
// Mistral's own format, safetensors without their configuration, folders
// of checkpoints, or a suite's name or files. "" when it holds none of them: with a config.json,
// its configuration alone. The one rule for both of a folder's lacks
// (docs/architecture.md, "Where input is checked"), so a folder is named
// for what it is, not taken for one downloaded without its weights.
func folderHolds(dir string, hasConfig bool) string {
	// A folder holding a GGUF file is a common slip for the file itself.
	if ggufs, _ := filepath.Glob(filepath.Join(dir, "*.gguf")); len(ggufs) > 0 {
		return ggufsHeld(ggufs)
	}
	if !hasConfig {
		if snap := hubSnapshot(dir); snap != "" {
			return "it is a Hugging Face cache's folder of a repository, whose files are in its snapshots: give " + snap
		}
		// Mistral's repositories may hold their own format alone: its
		// config is params.json, which transformers does not read.
		if _, err := os.Stat(filepath.Join(dir, "params.json")); err == nil {
			return "it holds params.json, Mistral's own checkpoint format (mistral_inference's, with consolidated weights), which transformers does not read: mtlbench reads a Hugging Face folder (config.json and model*.safetensors, which Mistral's repositories hold beside it) or a GGUF file"
		}
		// Weights downloaded without their configuration: config.json
		// says what the tensors are, and nothing else can.
		if st, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(st) > 0 {
			return fmt.Sprintf("it holds %s, but not the config.json that says what model its tensors make (a Hugging Face or mlx-lm checkpoint folder holds one beside its weights: fetch the repository's into %s)", fileCount(st, "safetensors file"), dir)
		}
		// A folder of checkpoints (~/models) given for one of them.
		if cks, _ := filepath.Glob(filepath.Join(dir, "*", "config.json")); len(cks) > 0 {
			first := filepath.Dir(cks[0])
			if len(cks) == 1 {
				return fmt.Sprintf("it holds the checkpoint folder %s: give it", first)
			}
			return fmt.Sprintf("it holds %d checkpoint folders (%s, ...): give one of them, such as %s", len(cks), filepath.Base(first), first)
		}
	}
	for _, o := range otherFormats {
		if found, _ := filepath.Glob(filepath.Join(dir, o.pattern)); len(found) > 0 {
			return fmt.Sprintf("its weights are %s, in %s, which mtlbench does not read (it reads safetensors, as save_pretrained writes them by default, and GGUF files)", filepath.Base(found[0]), o.format)
		}
	}
	if !hasConfig {
		// bench -m given a suite, or its folder: suites' own rule names it.
		return suites.FolderHint(dir)
	}
	return ""
}

// ggufsHeld names the GGUF files a folder holds, to be given instead of the
// folder: the one file, or the first part of one split file (any part opens
// them all); where they are several models (a repository of one model's
// quantizations), the folder does not say which to run, and they are
// counted, not one of them named as if it were the folder's.
func ggufsHeld(ggufs []string) string {
	if len(ggufs) == 1 || oneSplitFile(ggufs) {
		return fmt.Sprintf("it holds %s: give the file itself, %s", filepath.Base(ggufs[0]), ggufs[0])
	}
	const most = 3
	names := make([]string, 0, most+1)
	for i, p := range ggufs {
		if i == most {
			names = append(names, fmt.Sprintf("%d more", len(ggufs)-most))
			break
		}
		names = append(names, filepath.Base(p))
	}
	list := strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	return fmt.Sprintf("it holds %d GGUF files (%s): give the one to run itself, such as %s", len(ggufs), list, ggufs[0])
}

// ggufPart is a split GGUF file's part as gguf-split names it.
var ggufPart = regexp.MustCompile(`^(.*)-[0-9]{5}-of-([0-9]{5})\.gguf$`)

// oneSplitFile reports whether paths are all parts of one split GGUF file.
func oneSplitFile(paths []string) bool {
	var first []string
	for _, p := range paths {
		m := ggufPart.FindStringSubmatch(filepath.Base(p))
		if m == nil || first != nil && (m[1] != first[1] || m[2] != first[2]) {
			return false
		}
		first = m
	}
	return true
}

// fileCount names files found: the one, or how many and the first.
func fileCount(found []string, kind string) string {
	if len(found) == 1 {
		return filepath.Base(found[0])
	}
	return fmt.Sprintf("%d %ss (%s, ...)", len(found), kind, filepath.Base(found[0]))
}

// LoadDir reads a checkpoint folder's config.json.
func LoadDir(dir string) (*Config, error) {
	c, _, _, err := loadDir(dir)
	return c, err
}

// loadDir also gives the file's path and bytes, which OpenDir reads the
// quantization from, so both come from one read of the file.
func loadDir(dir string) (*Config, string, []byte, error) {
	p := filepath.Join(dir, "config.json")
	data, err := readfile.Read(p, readfile.Config, "a model config")
	if errors.Is(err, fs.ErrNotExist) {
		// No flag is named: the path comes from --model, -m, a models
		// argument or a suite's path.
		if what := folderHolds(dir, false); what != "" {
			return nil, "", nil, fmt.Errorf("model folder %s has no config.json; %s", dir, what)
		}
		return nil, "", nil, fmt.Errorf("model folder %s has no config.json (a Hugging Face or mlx-lm checkpoint folder holds one)", dir)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("model folder %s: %w", dir, err)
	}
	c, err := ParseHFConfig(p, data)
	if err != nil {
		return nil, "", nil, err
	}
	c.Name = checkpointName(dir)
	from, err := generationEOS(dir, c)
	if err != nil {
		return nil, "", nil, err
	}
	c.Notes = append(c.Notes, negativeEOS(cmp.Or(from, p), c.EOS)...)
	return c, p, data, nil
}

// hubSnapshot is, for a Hugging Face cache's folder of a repository
// (models--ORG--NAME, holding refs/ and snapshots/), the snapshot to give
// instead: the one refs/main names, else its one snapshot, else its
// snapshots' folder; "" for any other folder.
func hubSnapshot(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil || !strings.HasPrefix(filepath.Base(abs), "models--") {
		return ""
	}
	snaps := filepath.Join(dir, "snapshots")
	entries, err := os.ReadDir(snaps)
	if err != nil {
		return ""
	}
	if ref, err := os.ReadFile(filepath.Join(dir, "refs", "main")); err == nil {
		// A ref is read from a file: kept from naming a path outside.
		if rev := strings.TrimSpace(string(ref)); filepath.IsLocal(rev) {
			if st, err := os.Stat(filepath.Join(snaps, rev)); err == nil && st.IsDir() {
				return filepath.Join(snaps, rev)
			}
		}
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() {
			found = append(found, e.Name())
		}
	}
	switch len(found) {
	case 0:
		return ""
	case 1:
		return filepath.Join(snaps, found[0])
	}
	return "one of its snapshots, " + filepath.Join(snaps, "REVISION")
}

// checkpointName is what runs and tables call a checkpoint folder: its
// name, as of the folder a relative path such as "." names, or in a Hugging
// Face cache, where the folder is a snapshot named by its commit
// (models--ORG--NAME/snapshots/REVISION, as huggingface_hub lays a download
// out), the repository's name, as a download into a folder of its own is
// named: runs of one checkpoint are then compared under its name, not a
// hash.
func checkpointName(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	dir = filepath.Clean(dir)
	if snapshots := filepath.Dir(dir); filepath.Base(snapshots) == "snapshots" {
		// huggingface_hub refuses "--" in a repository's or owner's name,
		// so the last part is the repository's.
		repo, ok := strings.CutPrefix(filepath.Base(filepath.Dir(snapshots)), "models--")
		if parts := strings.Split(repo, "--"); ok && parts[len(parts)-1] != "" {
			return parts[len(parts)-1]
		}
	}
	return filepath.Base(dir)
}

// generationEOS takes generation_config.json's eos_token_id where the
// folder has one: transformers' generate stops there, over config.json's.
// A file that is no JSON, or not UTF-8, is passed over with a note and
// config.json's values kept: transformers' GenerationConfig.from_pretrained
// raises OSError for it (src/transformers/generation/configuration_utils.py)
// and adjust_generation_fn (generation/utils.py) catches that and builds the
// generation config from config.json. JSON of the wrong shape is not caught
// there, and stays refused (docs/architecture.md, "Where input is checked").
// from is the file when it gave c.EOS.
func generationEOS(dir string, c *Config) (from string, err error) {
	p := filepath.Join(dir, "generation_config.json")
	data, err := readfile.Read(p, readfile.Config, "a generation config")
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("model folder %s: %w", dir, err)
	}
	passOver := func(why string) {
		c.Notes = append(c.Notes, fmt.Sprintf("%s: %s; it is not read: generation stops at config.json's eos_token_id, as transformers reads such a folder", p, why))
	}
	if !utf8.Valid(data) {
		passOver("not UTF-8 text")
		return "", nil
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(jsonerr.Python(data, &g), &g); err != nil {
		// Python's json reads a NaN where Go's stops: one in a key read
		// elsewhere (temperature) is passed over (jsonerr.Python), one in
		// eos_token_id is no file transformers passes over, so it is
		// named, not skipped.
		var syn *json.SyntaxError
		if errors.As(err, &syn) && !jsonerr.IsNonFinite(err, data) {
			passOver(jsonerr.Explain(err, data).Error())
			return "", nil
		}
		return "", fmt.Errorf("%s: %w", p, jsonerr.ExplainFile(err, data))
	}
	if g.EOS == nil {
		return "", nil
	}
	eos, err := ParseEOS(g.EOS)
	if err != nil {
		return "", fmt.Errorf("%s: eos_token_id: %w", p, err)
	}
	c.EOS = eos
	return p, nil
}

// Spec says which model to open.
type Spec struct {
	// Model is a preset name or a checkpoint folder.
	Model string
	// Layers, when positive, cuts the model to its first Layers layers.
	Layers int
	// DType of the matrices: for presets the synthetic dtype (default
	// bf16); for checkpoints nil keeps the stored dtype.
	DType *bridge.DType
	// Quant, for presets, is a packed format of QuantFormats (synthetic
	// packed weights; DType is then their scales' and floats' dtype).
	Quant string
	Seed  uint64
	// Synthetic, for a checkpoint, reads only its configuration (a
	// folder's config.json, a GGUF file's metadata) and draws seeded
	// weights as a preset's: the architecture without its weights.
	Synthetic bool
}

// IsPreset reports whether name is a preset rather than a folder.
func IsPreset(name string) bool { _, ok := presets[name]; return ok }

// Open resolves spec to a config and a weight source.
func Open(spec Spec) (*Config, Source, error) {
	if spec.Layers < 0 {
		return nil, nil, fmt.Errorf("%s: %d layers: want a positive count (0: all of them)", spec.Model, spec.Layers)
	}
	var cfg *Config
	var src Source
	if IsPreset(spec.Model) || spec.Synthetic {
		c, err := syntheticConfig(spec.Model)
		if err != nil {
			return nil, nil, err
		}
		dt := bridge.BF16
		if spec.DType != nil {
			dt = *spec.DType
		}
		syn := NewSynthetic(spec.Seed, dt)
		syn.mem.experts = c.NumExperts
		if spec.Quant != "" {
			if !slices.Contains(QuantFormats, spec.Quant) {
				return nil, nil, fmt.Errorf("unknown quantized format %q (want %s)", spec.Quant, strings.Join(QuantFormats, ", "))
			}
			c.Quant = presetScheme(c, spec.Quant, dt)
			syn.quant = c.Quant
		}
		cfg, src = c, syn
	} else {
		if _, err := checkpointPath(spec.Model); err != nil {
			return nil, nil, err
		}
		if spec.Quant != "" {
			return nil, nil, fmt.Errorf("dtype %s makes synthetic packed weights for a preset; %s is a checkpoint, which is read as it is stored (synthetic weights draw them for its architecture: bench's --synthetic, a suite's weights: synthetic)", spec.Quant, spec.Model)
		}
		c, ck, err := openModelPath(spec.Model, spec.DType)
		if err != nil {
			return nil, nil, err
		}
		if spec.DType != nil && !c.hasFloatMatrices() {
			ck.Close()
			return nil, nil, fmt.Errorf("%s: every matrix is packed, and packed weights run as they are stored: a float dtype (%v) would change nothing; leave it out", spec.Model, *spec.DType)
		}
		cfg, src = c, ck
	}
	if spec.Layers > 0 {
		c, err := cfg.WithLayers(spec.Layers)
		if err != nil {
			src.Close()
			return nil, nil, err
		}
		cfg = c
	}
	return cfg, src, nil
}

func joinNames(n []string) string {
	s := ""
	for i, v := range n {
		if i > 0 {
			s += ", "
		}
		s += v
	}
	return s
}

// MappedSource is a Source that can say which of its bytes live in mmap'd
// memory outside the Go heap, which a GPU backend may wrap without copying.
type MappedSource interface {
	Mapped(b []byte) bool
}

// PageDropper is a MappedSource whose mapped files' pages can be given back
// once a backend has copied their bytes: Drop releases the whole pages of b
// that lie in a file mapping (read from the file again if touched) and
// leaves any other memory alone, so it never loses data
// (docs/quantization.md, "Memory").
type PageDropper interface {
	Drop(b []byte)
}

// Mapped forwards to the wrapped source.
func (c *Cached) Mapped(b []byte) bool {
	m, ok := c.Source.(MappedSource)
	return ok && m.Mapped(b)
}

// Drop forwards to the wrapped source.
func (c *Cached) Drop(b []byte) {
	if d, ok := c.Source.(PageDropper); ok {
		d.Drop(b)
	}
}

// Cached memoises a source so cases of one run share one copy of the
// weights: synthetic tensors are generated once, checkpoint conversions made
// once.
type Cached struct {
	Source
	mu     sync.Mutex
	m      map[string]cachedTensor
	packed map[string]Packed
	formed map[string]Packed // by name and form (PackedAs)
	floats map[string][]byte // F32's
}

type cachedTensor struct {
	dt   bridge.DType
	data []byte
}

// NewCached wraps src.
func NewCached(src Source) *Cached { return &Cached{Source: src, m: map[string]cachedTensor{}} }

func (c *Cached) Tensor(spec TensorSpec) (bridge.DType, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.m[spec.Name]; ok {
		return t.dt, t.data, nil
	}
	dt, data, err := c.Source.Tensor(spec)
	if err == nil {
		c.m[spec.Name] = cachedTensor{dt, data}
	}
	return dt, data, err
}

// fileOf is the path of the file holding tensor name, which errors about
// the tensor name (the folder when no file holds it).
func (c *Checkpoint) fileOf(name string) string {
	if f := c.ck.File(name); f != "" {
		return f
	}
	return c.ck.Dir()
}

// unaskedBias refuses attention biases the config does not ask for, which
// would be dropped and the figures be another model's.
func unaskedBias(cfg *Config, has func(string) bool) error {
	if cfg.GPT2() {
		return nil
	}
	for _, b := range []struct {
		proj string
		used bool
	}{{"q_proj", cfg.QKVBias}, {"o_proj", cfg.OBias}} {
		name := LayerPrefix(0) + "self_attn." + b.proj + ".bias"
		if b.used || !has(name) {
			continue
		}
		if archs[cfg.Architecture].attnBias {
			return fmt.Errorf("the checkpoint holds %s, but config.json has no attention_bias: true", name)
		}
		return fmt.Errorf("the checkpoint holds %s, but %s's %s takes no bias", name, cfg.Architecture, b.proj)
	}
	return nil
}

// syntheticConfig is the configuration seeded weights are drawn for: a
// preset's, or a checkpoint's own without its weights (a folder's
// config.json, quantization left to the dtype asked for; a GGUF file's
// metadata).
func syntheticConfig(name string) (*Config, error) {
	if IsPreset(name) {
		return Preset(name)
	}
	dir, err := checkpointPath(name)
	if err != nil {
		return nil, err
	}
	if dir {
		return LoadDir(name)
	}
	f, err := gguf.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ggufConfig(f)
}

// SuiteSpec is what opens a suite's model: its preset, or its path's
// checkpoint (or, with weights: synthetic, seeded weights of its
// architecture), in the dtype asked for, cut to layers when positive.
func SuiteSpec(m *suites.Model, layers int) (Spec, error) {
	spec := Spec{Model: m.Preset, Layers: layers, Seed: uint64(m.Seed)}
	if m.Path != "" {
		spec.Model, spec.Synthetic = m.Path, m.Weights == suites.WeightsSynthetic
	}
	if m.DType != "" {
		f, err := ParseFormat(m.DType)
		if err != nil {
			return Spec{}, err
		}
		spec.DType, spec.Quant = &f.DType, f.Quant
	}
	return spec, nil
}

// presetGuess is, for a name that is no path, the built-in suite it names
// (bench -m ci) or " (did you mean ...?)" when it is close to a preset (a
// typo, or "tinyllama" for tinyllama-1.1b), else "".
func presetGuess(name string) string {
	if strings.ContainsAny(name, `/\`) || strings.EqualFold(filepath.Ext(name), ".gguf") {
		return ""
	}
	if s := suites.ShippedSuiteHint(name); s != "" {
		return " (" + s + ")"
	}
	if s := suggest.DidYouMean(name, PresetNames()); s != "" {
		return " (" + s + ")"
	}
	return ""
}

// checkpointPath says whether name, which is no preset, is a checkpoint
// folder (dir) or a GGUF file, or why it is neither.
func checkpointPath(name string) (dir bool, err error) {
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("model %q is neither a preset (%s) nor a path that exists (a checkpoint folder or a .gguf file)%s", name, joinNames(PresetNames()), presetGuess(name))
	case err != nil:
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is said already, without Go's "stat"
		}
		return false, fmt.Errorf("model %q: %w", name, err)
	case !st.IsDir() && !st.Mode().IsRegular():
		// Reading a named pipe waits for a writer; a device never ends.
		return false, fmt.Errorf("model %q is %s: give a checkpoint folder (config.json and safetensors) or a GGUF file", name, fileKind(st.Mode()))
	case !st.IsDir() && !isGGUFPath(name):
		// The results database, a suite or a checkpoint's own file is
		// named with the command that takes it, as a suite path is.
		return false, suites.NotAModel(name)
	}
	return st.IsDir(), nil
}

// fileKind names a path that is neither a folder nor a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

// Memory is the memory src holds for its weights: file mappings and the
// allocations of synthetic, converted and transcoded tensors. A run holding
// several models measures a case's own peak resident set without the
// others' share of it (host.Resident).
func Memory(src Source) [][]byte {
	switch s := src.(type) {
	case *Cached:
		out := Memory(s.Source)
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, f := range s.floats {
			out = append(out, f)
		}
		return out
	case *Synthetic:
		return s.mem.memory()
	case *Checkpoint:
		return append(slices.Clip(s.ck.Memory()), s.mem.memory()...)
	case *GGUFSource:
		return append(slices.Clip(s.f.Memory()), s.mem.memory()...)
	}
	return nil
}
