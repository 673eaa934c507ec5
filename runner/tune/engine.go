package tune

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/model"
)

// How an engine uses tuned kernel configs (runner/engine's Options.Tuned,
// which ForEngine serves): explicit MoE params win; otherwise each step looks
// its MoE dispatch up for its token count, and installs the tuned matmul
// split on backends that take one for the length of the step only, so
// kernel cases and other engines sharing the backend keep their own.

// EngineTuning is an engine's view of the store for its model.
type EngineTuning struct {
	store    *Store
	be       bridge.Backend
	cfg      *model.Config
	dtype    string
	moeFixed bool // explicit MoE params: never looked up

	moe   map[int]bridge.MoEParams
	split func(m, n, k int, dt bridge.DType) (piece, threads int)
	// launch holds, for a bridge.LaunchTuner backend, the pick of every
	// kernel the store has entries for.
	launch map[string]bridge.LaunchPick

	mu   sync.Mutex
	used map[string]map[string]bool // kernel -> choices used
}

// ForEngine is the tuning of an engine on be running cfg with dt weights;
// moe are the engine's MoE params as given, before defaults (a strategy set
// there is explicit and never looked up).
func (s *Store) ForEngine(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams) *EngineTuning {
	t := &EngineTuning{store: s, be: be, cfg: cfg, dtype: dt.String(),
		moeFixed: moe.Strategy != "", moe: map[int]bridge.MoEParams{}, used: map[string]map[string]bool{}}
	// Only a store with matmul entries for this device installs a split:
	// without, MatMul keeps its own path, not even a lookup per call.
	if _, ok := be.(MatMulSplitter); ok && hasEntries(s, be, string(ops.MatMul)) {
		cache := map[[4]int]Config{}
		var mu sync.Mutex
		t.split = func(m, n, k int, wdt bridge.DType) (int, int) {
			key := [4]int{m, n, k, int(wdt)}
			mu.Lock()
			c, ok := cache[key]
			mu.Unlock()
			if !ok {
				ch, err := lookup(t.store, be, string(ops.MatMul), wdt.String(), Shape{ops.M: m, ops.N: n, ops.K: k})
				if err != nil {
					return 0, 0
				}
				t.note(string(ops.MatMul), ch)
				c = ch.Config
				mu.Lock()
				cache[key] = c
				mu.Unlock()
			}
			return MatMulSplit(c)
		}
	}
	if _, ok := be.(bridge.LaunchTuner); ok {
		t.launch = map[string]bridge.LaunchPick{}
		for _, k := range Kernels(be.Info().Backend) {
			if hasEntries(s, be, string(k.Op)) {
				t.launch[string(k.Op)] = t.launchPick(k)
			}
		}
	}
	return t
}

// launchPick looks kernel k's config up for each launch shape the backend
// asks about, once per shape and weight dtype.
func (t *EngineTuning) launchPick(k *Kernel) bridge.LaunchPick {
	type answer struct {
		c  map[string]string
		ok bool
	}
	cache := map[string]answer{}
	var mu sync.Mutex
	// A packed-weight kernel's configs are looked up by the model's packing,
	// a kernel of no weights (FixedDType) by its own dtype, a float one's by
	// the launch's weights (an f32 router beside bf16 matrices is tuned as
	// f32), the model's dtype where the launch names none.
	model := t.dtype
	_, packed := ops.DType(k.DType).Quant()
	if packed {
		d, _ := PackedDType(t.cfg)
		model = string(d)
	}
	if k.FixedDType {
		model = k.DType
	}
	return func(weights string, shape map[string]int) (map[string]string, bool) {
		dtype := model
		if weights != "" && !packed && !k.FixedDType {
			dtype = weights
		}
		s := make(Shape, len(shape))
		for name, v := range shape {
			s[ops.Param(name)] = v
		}
		key := dtype + " " + s.Key()
		mu.Lock()
		a, seen := cache[key]
		mu.Unlock()
		if seen {
			return a.c, a.ok
		}
		if dtype != "" && (k.Applies == nil || k.Applies(s)) {
			if ch, err := lookup(t.store, t.be, string(k.Op), dtype, s); err == nil {
				t.note(string(k.Op), ch)
				if !ch.IsDefault() {
					a = answer{ch.Config, true}
				}
			}
		}
		mu.Lock()
		cache[key] = a
		mu.Unlock()
		return a.c, a.ok
	}
}

// hasEntries reports whether any layer holds a kernel entry for be's device.
func hasEntries(s *Store, be bridge.Backend, kernel string) bool {
	info := be.Info()
	for _, l := range s.Layers {
		for _, e := range l.Entries {
			if e.Kernel == kernel && e.Device == DeviceName(be) && e.Backend == info.Backend {
				return true
			}
		}
	}
	return false
}

func lookup(s *Store, be bridge.Backend, kernel, dtype string, shape Shape) (Choice, error) {
	q, _, err := NewQuery(be, kernel, dtype, shape)
	if err != nil {
		return Choice{}, err
	}
	return s.Lookup(q)
}

func (t *EngineTuning) note(kernel string, c Choice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used[kernel] == nil {
		t.used[kernel] = map[string]bool{}
	}
	t.used[kernel][c.String()] = true
}

// moeShape is the moe bucket of a step of tokens tokens.
func moeShape(c *model.Config, tokens int) Shape {
	return Shape{ops.Tokens: tokens, ops.Experts: c.NumExperts, ops.TopK: c.TopK, ops.Hidden: c.Hidden, ops.Intermediate: c.MoEInter}
}

// Step sets up the tuned configs of a step of tokens tokens: it returns the
// MoE params the step runs with (moe when none is tuned or moe was
// explicit) and what undoes the rest.
func (t *EngineTuning) Step(tokens int, moe bridge.MoEParams) (bridge.MoEParams, func()) {
	if !t.moeFixed && t.cfg.NumExperts > 0 {
		p, ok := t.moe[tokens]
		if !ok {
			p = moe
			if ch, err := lookup(t.store, t.be, string(ops.MoE), t.dtype, moeShape(t.cfg, tokens)); err == nil {
				p = MoEParams(ch.Config)
				t.note(string(ops.MoE), ch)
			}
			t.moe[tokens] = p
		}
		moe = p
	}
	if len(t.launch) > 0 {
		lt := t.be.(bridge.LaunchTuner)
		for name, pick := range t.launch {
			lt.SetLaunchConfig(name, pick)
		}
		return moe, func() {
			for name := range t.launch {
				lt.SetLaunchConfig(name, nil)
			}
		}
	}
	if t.split == nil {
		return moe, func() {}
	}
	s := t.be.(MatMulSplitter)
	s.SetMatMulSplit(t.split)
	return moe, func() { s.SetMatMulSplit(nil) }
}

// Used lists, per kernel, the tuned configs the engine's steps used so far
// with where each came from ("moe": "chunked/16 (user cache)"), several
// joined by "; ".
func (t *EngineTuning) Used() map[string]string {
	out := map[string]string{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, set := range t.used {
		var cs []string
		for c := range set {
			cs = append(cs, c)
		}
		sort.Strings(cs)
		out[k] = strings.Join(cs, "; ")
	}
	return out
}

// EngineChoices says, before anything runs, which configs an engine on be
// with MoE params moe (as given) would use for a step of tokens tokens:
// kernel name to choice ("moe": "grouped (default)"). Explicit MoE params
// show as "explicit". The matmul entry summarises the step's matmul shapes:
// the default when all use it, else each tuned shape.
func (s *Store) EngineChoices(be bridge.Backend, cfg *model.Config, dt bridge.DType, moe bridge.MoEParams, tokens, logitRows int) map[string]string {
	out := map[string]string{}
	if cfg.NumExperts > 0 {
		if moe.Strategy != "" {
			out[string(ops.MoE)] = string(moe.Strategy) + " (explicit)"
			if moe.Strategy == bridge.MoEChunked {
				out[string(ops.MoE)] = fmt.Sprintf("chunked/%d (explicit)", max(moe.ChunkSize, 1))
			}
		} else if ch, err := lookup(s, be, string(ops.MoE), dt.String(), moeShape(cfg, tokens)); err == nil {
			out[string(ops.MoE)] = ch.String()
		}
	}
	_, split := be.(MatMulSplitter)
	if _, launch := be.(bridge.LaunchTuner); !split && !(launch && hasEntries(s, be, string(ops.MatMul))) {
		return out
	}
	var tuned []string
	var def string
	// the model's tensors listed once for all its shapes and cases: run
	// asks this of every case before the first runs
	f32 := s.f32MatMulShapes(cfg)
	for _, mnk := range matmulShapes(cfg, tokens, logitRows) {
		ch, err := lookup(s, be, string(ops.MatMul), matmulDType(f32, dt.String(), mnk), Shape{ops.M: mnk[0], ops.N: mnk[1], ops.K: mnk[2]})
		if err != nil {
			return out
		}
		if ch.IsDefault() {
			def = ch.String()
			continue
		}
		tuned = append(tuned, fmt.Sprintf("m=%d,n=%d,k=%d: %s", mnk[0], mnk[1], mnk[2], ch))
	}
	switch {
	case len(tuned) == 0:
		out[string(ops.MatMul)] = def
	case def != "":
		out[string(ops.MatMul)] = strings.Join(tuned, "; ") + "; others " + def
	default:
		out[string(ops.MatMul)] = strings.Join(tuned, "; ")
	}
	return out
}

// LaunchChoices says, for a bridge.LaunchTuner backend, which configs the
// launch-tuned kernels besides matmul and moe (EngineChoices) would use in a
// decode step of seqs sequences at context cached tokens: decode attention,
// the norms (NormOps) and argmax, each only where the store holds entries for the device
// ("paged_attention_decode": "2sg/q4/p256 (user cache)"). blockSize is the
// engine's KV block size.
func (s *Store) LaunchChoices(be bridge.Backend, cfg *model.Config, dt bridge.DType, blockSize, seqs, context int) map[string]string {
	out := map[string]string{}
	if _, ok := be.(bridge.LaunchTuner); !ok {
		return out
	}
	if blockSize == 0 {
		blockSize = 16 // the engine's default
	}
	shapes := map[ops.ID]Shape{
		ops.PagedAttentionDecode: {ops.Seqs: seqs, ops.Context: max(context, 1), ops.NumHeads: cfg.Heads, ops.NumKVHeads: cfg.KVHeads,
			ops.HeadSize: cfg.HeadDim, ops.BlockSize: blockSize},
	}
	for _, norm := range NormOps(cfg) {
		shapes[norm] = Shape{ops.Tokens: seqs, ops.Width: cfg.Hidden}
	}
	shapes[ops.Argmax] = Shape{ops.Tokens: seqs, ops.Width: cfg.Vocab}
	for _, k := range Kernels(be.Info().Backend) {
		sh, ok := shapes[k.Op]
		if !ok || !hasEntries(s, be, string(k.Op)) {
			continue
		}
		if ch, err := lookup(s, be, string(k.Op), dt.String(), sh); err == nil {
			out[string(k.Op)] = ch.String()
		}
	}
	return out
}

// MatMulDType is the dtype a float matmul of shape mnk is tuned and looked
// up at in a run of dtype: f32 where its matrices are all ones cfg loads in
// f32 whatever the run's dtype (model.Config.LoadsInF32: a GGUF file's
// routers), as each backend names a launch's weights (bridge.LaunchPick).
func MatMulDType(c *model.Config, dtype string, mnk [3]int) string {
	return matmulDType(f32MatMulShapes(c), dtype, mnk)
}

// matmulDType is MatMulDType given c's f32MatMulShapes.
func matmulDType(f32 map[[2]int]bool, dtype string, mnk [3]int) string {
	if f32[[2]int{mnk[1], mnk[2]}] {
		return "f32"
	}
	return dtype
}

// f32MatMulShapes is f32MatMulShapes(c), worked out once for each config:
// listing a model's tensors takes milliseconds (12 for Qwen3-30B-A3B's
// 18000), and run looks up the tuned configs of every case of a sweep of up
// to 10000 before the first runs. A config is not changed once made
// (model.Config.WithLayers copies it).
func (s *Store) f32MatMulShapes(c *model.Config) map[[2]int]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f32, ok := s.f32[c]; ok {
		return f32
	}
	if s.f32 == nil {
		s.f32 = map[*model.Config]map[[2]int]bool{}
	}
	f32 := f32MatMulShapes(c)
	s.f32[c] = f32
	return f32
}

// f32MatMulShapes are the (n, k), either way round, of float matrices c
// loads in f32, where no matrix of that shape is in the run's dtype.
func f32MatMulShapes(c *model.Config) map[[2]int]bool {
	f32, other := map[[2]int]bool{}, map[[2]int]bool{}
	for _, t := range c.Tensors() {
		if _, p := c.Quant.For(t.Name); !t.Matrix || p || len(t.Shape) != 2 || strings.Contains(t.Name, ".experts.") {
			continue
		}
		m := other
		if c.LoadsInF32(t.Name) {
			m = f32
		}
		m[[2]int{t.Shape[0], t.Shape[1]}] = true
		m[[2]int{t.Shape[1], t.Shape[0]}] = true
	}
	for s := range other {
		delete(f32, s)
	}
	return f32
}

// NormOps are the norms a model's step runs: RMSNorm, or GPT-2's
// LayerNorm, each alone and after the residual add.
func NormOps(c *model.Config) []ops.ID {
	if c.GPT2() {
		return []ops.ID{ops.LayerNorm, ops.AddLayerNorm}
	}
	return []ops.ID{ops.RMSNorm, ops.AddRMSNorm}
}

// matmulShapes are the (m, n, k) of a step's matmuls: projections and dense
// MLPs at m = tokens, the MoE router at m = tokens, the LM head at m =
// logitRows.
func matmulShapes(c *model.Config, tokens, logitRows int) [][3]int {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	set := map[[3]int]bool{}
	add := func(m, n, k int) {
		if m > 0 && n > 0 && k > 0 {
			set[[3]int{m, n, k}] = true
		}
	}
	add(tokens, q, c.Hidden)
	add(tokens, kv, c.Hidden)
	add(tokens, c.Hidden, q)
	for l := 0; l < c.Layers; l++ {
		if c.IsMoELayer(l) {
			add(tokens, c.NumExperts, c.Hidden)
		} else {
			add(tokens, c.Inter, c.Hidden)
			add(tokens, c.Hidden, c.Inter)
		}
	}
	add(logitRows, c.Vocab, c.Hidden)
	out := make([][3]int, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		if a[1] != b[1] {
			return a[1] < b[1]
		}
		return a[2] < b[2]
	})
	return out
}

// MatMulShapes are the (m, n, k) of the matmuls of a step of tokens tokens
// sampling logitRows rows, for the tuner to derive buckets from a model.
func MatMulShapes(c *model.Config, tokens, logitRows int) [][3]int {
	return matmulShapes(c, tokens, logitRows)
}

// PackedDType is the packed dtype of most of a packed model's matrices (a
// Q4_K_M mix's Q4_K): what its packed-weight kernels' tuned configs are
// looked up by; ok false for a float model.
func PackedDType(c *model.Config) (ops.DType, bool) {
	if c.Quant == nil {
		return "", false
	}
	count := map[ops.DType]int{}
	for _, t := range c.Tensors() {
		if s, ok := c.Quant.For(t.Name); ok && t.Matrix {
			if d, ok := ops.PackedDType(s); ok {
				count[d]++
			}
		}
	}
	var best ops.DType
	for _, d := range ops.QuantDTypes {
		if count[d] > count[best] {
			best = d
		}
	}
	return best, count[best] > 0
}

// MoEShape is the moe bucket of a step of tokens tokens, for the tuner.
func MoEShape(c *model.Config, tokens int) Shape { return moeShape(c, tokens) }
