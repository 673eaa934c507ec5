package tuner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
	"github.com/mtlbench/mtlbench/suites"
)

// ParseShape reads "tokens=4,experts=32" (also with spaces or ';'), ""
// as no shape. Its errors name what the shape is (what: "--shape") and the
// shape as given, then what is wrong.
func ParseShape(what, s string) (tune.Shape, error) {
	out := tune.Shape{}
	if s == "" {
		return out, nil
	}
	// Items are separated by commas or semicolons (and spaces within one);
	// an empty item is a value left out, refused as every list of the
	// command line refuses it (internal/listarg).
	items, err := listarg.SplitAt(what, s, ",;")
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s %q: %s", what, s, fmt.Sprintf(format, a...))
	}
	var fields []string
	for _, item := range items {
		fields = append(fields, strings.Fields(item)...)
	}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, bad("want name=value pairs, got %q", f)
		}
		if strings.TrimSpace(k) == "" {
			return nil, bad("no name before = in %q", f)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return nil, bad("%s=%s is not a positive integer", k, v)
		}
		name := ops.Param(strings.TrimSpace(k))
		if _, dup := out[name]; dup {
			return nil, bad("%s is given twice", name)
		}
		out[name] = n
	}
	return out, nil
}

// ShapeBucket is the bucket of one kernel at a shape given by hand; missing
// dimensions take the op's defaults, dtype "" the kernel's.
func ShapeBucket(be bridge.Backend, kernel, dtype string, shape tune.Shape, label string) (Bucket, error) {
	info := be.Info()
	k, err := tune.Find(info.Backend, kernel)
	if err != nil {
		return Bucket{}, err
	}
	// The device's dimensions come from the device, never the shape.
	for _, d := range k.Dims {
		if _, ok := shape[d.Name]; ok && d.Device {
			return Bucket{}, fmt.Errorf("%s: %s is the device's, not a shape's: tune at another count with --%s", kernel, d.Name, d.Name)
		}
	}
	if dtype == "" {
		dtype = k.DType
	}
	s, err := k.Normalize(shape, tune.LimitsFor(be, kernel, dtype))
	if err != nil {
		return Bucket{}, err
	}
	if err := tune.CheckDType(k, dtype); err != nil {
		return Bucket{}, err
	}
	return Bucket{Kernel: k, DType: dtype, Shape: s, Label: label}, nil
}

// otherThreads is the goroutine count a case runs at (its `threads`) where
// that is not the tuner's backend's, else 0: its tuned configs are looked
// up at that count, so the tuner's winners would never reach it. Only
// buckets keyed by the count (the CPU's) are: a GPU's threads are its
// threadgroups', no case's.
func otherThreads(c suites.Case, be bridge.Backend) int {
	if !slices.ContainsFunc(tune.Kernels(be.Info().Backend), func(k *tune.Kernel) bool {
		d, ok := k.Dim(ops.Threads)
		return ok && d.Device
	}) {
		return 0
	}
	th := c.Model.Threads
	if c.Kind == suites.KindKernel {
		th, _ = c.Kernel.Int(ops.Threads)
	}
	if th > 0 && th != tune.LimitsOf(be).MaxThreads {
		return th
	}
	return 0
}

// OtherThreads names the cases of s that SuiteBuckets leaves out because
// they run at another goroutine count than be's, with the command that
// tunes them: "case k runs at threads=1: tune it with --threads 1".
func OtherThreads(s *suites.Suite, be bridge.Backend) []string {
	var out []string
	for _, c := range s.Cases {
		if th := otherThreads(c, be); th > 0 {
			out = append(out, fmt.Sprintf("case %s runs at threads=%d, and its tuned configs are looked up there: tune it with --threads %d", c.Name, th, th))
		}
	}
	return out
}

// SuiteBuckets derives buckets from a suite: each model case's decode step
// (its batch, as concurrent sequences, is the token count) at the model's
// shapes — the MoE block (experts, top_k, hidden, intermediate) and every
// matmul of the step — and each kernel case of a tunable op at its own
// shape. kernels limits the kernels (nil: all the backend declares). Cases
// at another goroutine count than be's are left out (OtherThreads).
// Buckets are deduplicated; labels list the cases they came from. warn,
// when set, gets the line run says of a checkpoint folder's tensors the
// model does not read (model.WarnUnread), once, as the model opens.
func SuiteBuckets(s *suites.Suite, be bridge.Backend, kernels []string, warn func(string)) ([]Bucket, error) {
	backend := be.Info().Backend
	var want []*tune.Kernel
	for _, k := range tune.Kernels(backend) {
		if len(kernels) == 0 || slices.Contains(kernels, string(k.Op)) {
			want = append(want, k)
		}
	}
	for _, name := range kernels {
		if _, err := tune.Find(backend, name); err != nil {
			return nil, err
		}
	}
	var out []Bucket
	index := map[string]int{}
	var at suites.Pos // the case whose buckets add makes
	add := func(kernel, dtype string, shape tune.Shape, label string) error {
		i := slices.IndexFunc(want, func(k *tune.Kernel) bool { return string(k.Op) == kernel })
		if i < 0 {
			return nil
		}
		if want[i].FixedDType { // the norms and argmax: not the model's dtype
			dtype = want[i].DType
		}
		b, err := ShapeBucket(be, kernel, dtype, shape, label)
		if err != nil {
			return err
		}
		if b.Kernel.Applies != nil && !b.Kernel.Applies(b.Shape) {
			return nil
		}
		key := b.Describe()
		if i, ok := index[key]; ok {
			if !strings.Contains(out[i].Label, label) {
				out[i].Label += "; " + label
			}
			return nil
		}
		index[key] = len(out)
		b.At = at.String()
		out = append(out, b)
		return nil
	}

	var cfg *model.Config
	var dtype string
	for _, c := range s.Cases {
		if otherThreads(c, be) > 0 { // its lookups are at its own count (OtherThreads)
			continue
		}
		at = c.Pos
		if c.Kind == suites.KindKernel {
			if !slices.ContainsFunc(want, func(k *tune.Kernel) bool { return k.Op == c.Op }) {
				continue
			}
			k, _ := tune.Find(backend, string(c.Op))
			shape := tune.Shape{}
			for _, d := range k.Dims {
				if v, ok := c.Kernel.Int(d.Name); ok && !d.Device {
					shape[d.Name] = v
				}
			}
			dtype := k.DType
			if c.Kernel.DType != "" {
				dtype = string(c.Kernel.DType)
			}
			if err := add(string(c.Op), dtype, shape, c.Name); err != nil {
				return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
			}
			continue
		}
		if s.Model == nil {
			continue
		}
		if cfg == nil {
			var err error
			if cfg, dtype, err = openModel(s.Model, warn); err != nil {
				return nil, s.ErrorAt(s.Model.Pos, "%v", err)
			}
		}
		mp := c.Model
		seqs := min(mp.Requests, mp.MaxSeqs)
		label := fmt.Sprintf("%s batch=%d", cfg.Name, mp.Batch)
		// Where the backend has packed kernels of their own (qmoe, qmatmul:
		// Metal), packed experts and matrices run them, never the float
		// kernels; elsewhere the float kernels' configs serve both.
		qd, packed := tune.PackedDType(cfg)
		_, errQMoE := tune.Find(backend, string(ops.QMoE))
		_, errQMatMul := tune.Find(backend, string(ops.QMatMul))
		floats := floatMatMuls(cfg) || errQMatMul != nil
		// Which matmuls run on the float kernel: all where the backend has
		// no packed one, else those of float matrices (a GGUF file's F32
		// routers beside its packed matrices).
		floatShape, packedShape := func([3]int) bool { return true }, func([3]int) bool { return true }
		if errQMatMul == nil && packed {
			fs, ps := matMulShapes(cfg, false), matMulShapes(cfg, true)
			floatShape = func(mnk [3]int) bool { return fs[[2]int{mnk[1], mnk[2]}] }
			packedShape = func(mnk [3]int) bool { return ps[[2]int{mnk[1], mnk[2]}] }
		}
		if cfg.NumExperts > 0 && (!packedExperts(cfg) || errQMoE != nil) {
			if err := add(string(ops.MoE), dtype, tune.MoEShape(cfg, seqs), label); err != nil {
				return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
			}
		}
		// Decode attention at the context the case ends with, rounded up to
		// a power of two as the backend looks it up.
		ctx := 1
		for ctx < mp.PromptLen+mp.GenLen {
			ctx *= 2
		}
		if err := add(string(ops.PagedAttentionDecode), dtype, tune.Shape{ops.Seqs: seqs, ops.Context: ctx, ops.NumHeads: cfg.Heads,
			ops.NumKVHeads: cfg.KVHeads, ops.HeadSize: cfg.HeadDim, ops.BlockSize: mp.BlockSize}, label); err != nil {
			return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
		}
		// A GPU's prefill attention at the prompt's query length, and its
		// norms and argmax at the decode step's rows.
		if err := add(string(ops.PagedAttentionPrefill), dtype, tune.Shape{ops.Seqs: seqs, ops.Tokens: max(mp.PromptLen, 1),
			ops.NumHeads: cfg.Heads, ops.NumKVHeads: cfg.KVHeads, ops.HeadSize: cfg.HeadDim, ops.BlockSize: mp.BlockSize}, label); err != nil {
			return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
		}
		for _, norm := range tune.NormOps(cfg) {
			if err := add(string(norm), dtype, tune.Shape{ops.Tokens: seqs, ops.Width: cfg.Hidden}, label); err != nil {
				return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
			}
		}
		// The decode step's greedy pick: a row of logits a sequence.
		if err := add(string(ops.Argmax), dtype, tune.Shape{ops.Tokens: seqs, ops.Width: cfg.Vocab}, label); err != nil {
			return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
		}
		for _, mnk := range tune.MatMulShapes(cfg, seqs, seqs) {
			if !floats {
				break
			}
			if !floatShape(mnk) {
				continue
			}
			// In its matrices' dtype, as the backends look it up: f32 for
			// routers a GGUF file keeps so.
			if err := add(string(ops.MatMul), tune.MatMulDType(cfg, dtype, mnk), tune.Shape{ops.M: mnk[0], ops.N: mnk[1], ops.K: mnk[2]}, label); err != nil {
				return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
			}
		}
		// A packed model's matmuls and experts of the prompt (a GPU's packed
		// tiles), and its experts of the decode step.
		if packed {
			if packedExperts(cfg) {
				for _, tokens := range []int{seqs, seqs * max(mp.PromptLen, 1)} {
					if err := add(string(ops.QMoE), string(qd), tune.MoEShape(cfg, tokens), label); err != nil {
						return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
					}
				}
			}
			// Each space's Applies keeps the steps its kernels take: the
			// decode step's GEMVs on CUDA, the prompt's tiles on Metal.
			for _, tokens := range []int{seqs, seqs * max(mp.PromptLen, 1)} {
				for _, mnk := range tune.MatMulShapes(cfg, tokens, seqs) {
					if !packedShape(mnk) {
						continue
					}
					if err := add(string(ops.QMatMul), string(qd), tune.Shape{ops.M: mnk[0], ops.N: mnk[1], ops.K: mnk[2]}, label); err != nil {
						return nil, s.ErrorAt(c.Pos, "case %s: %v", c.Name, err)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		// Where cases were left out for their thread count, that is why.
		if notes := OtherThreads(s, be); len(notes) > 0 {
			return nil, fmt.Errorf("%s: no case of the suite runs a tunable %s kernel at %d threads: %s",
				s.File, backend, tune.LimitsOf(be).MaxThreads, strings.Join(notes, "; "))
		}
		return nil, fmt.Errorf("%s: no case of the suite runs a tunable %s kernel", s.File, backend)
	}
	return out, nil
}

// packedExperts reports whether cfg's MoE experts are packed (the first
// MoE layer's first gate, as the engine runs a layer's experts all packed or
// none).
func packedExperts(c *model.Config) bool {
	for l := 0; l < c.Layers; l++ {
		if c.IsMoELayer(l) {
			_, ok := c.Quant.For(fmt.Sprintf("%smlp.experts.0.gate_proj.weight", model.LayerPrefix(l)))
			return ok
		}
	}
	return false
}

// matMulShapes are the (n, k) of cfg's packed matrices, or of its float
// ones, other than gathered embedding tables and experts (the MoE op's),
// either way round (GPT-2's Conv1D weights are stored [k, n]).
func matMulShapes(c *model.Config, packed bool) map[[2]int]bool {
	out := map[[2]int]bool{}
	for _, t := range c.Tensors() {
		gathered := (t.Name == "model.embed_tokens.weight" || t.Name == model.GPT2Embed) && !c.TieEmbed || t.Name == model.GPT2Positions
		if _, p := c.Quant.For(t.Name); !t.Matrix || p != packed || gathered || len(t.Shape) != 2 || strings.Contains(t.Name, ".experts.") {
			continue
		}
		out[[2]int{t.Shape[0], t.Shape[1]}] = true
		out[[2]int{t.Shape[1], t.Shape[0]}] = true
	}
	return out
}

// floatMatMuls reports whether any of cfg's step matmuls has float
// weights (a packed model's run qmatmul): a float matrix other than an
// embedding table that is only gathered from.
func floatMatMuls(c *model.Config) bool {
	for _, t := range c.Tensors() {
		gathered := (t.Name == "model.embed_tokens.weight" || t.Name == model.GPT2Embed) && !c.TieEmbed || t.Name == model.GPT2Positions
		if _, packed := c.Quant.For(t.Name); t.Matrix && !packed && !gathered {
			return true
		}
	}
	return false
}

// openModel reads the suite model's config and weight dtype (a preset's
// synthetic weights are not generated; a checkpoint's header is read);
// warn gets run's line on a checkpoint folder's tensors the model does not
// read (model.WarnUnread).
func openModel(m *suites.Model, warn func(string)) (*model.Config, string, error) {
	spec, err := model.SuiteSpec(m, 0)
	if err != nil {
		return nil, "", err
	}
	cfg, src, err := model.Open(spec)
	if err != nil {
		return nil, "", err
	}
	defer src.Close()
	model.WarnUnread(m.Path, src, warn)
	return cfg, src.DType().String(), nil
}
