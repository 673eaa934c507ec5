package engine

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// How the engine uses tuned kernel configs (Options.Tuned): explicit MoE
// params win; otherwise each step looks its MoE dispatch up for its token
// count, and installs the tuned matmul split on backends that take one for
// the length of the step only, so kernel cases and other engines sharing
// the backend keep their own.

// tunedKernels is an engine's view of the store for its model.
type tunedKernels struct {
	store    *tune.Store
	be       bridge.Backend
	cfg      *model.Config
	dtype    string
	moeFixed bool // explicit MoE params: never looked up

	moe   map[int]bridge.MoEParams
	split func(m, n, k int, dt bridge.DType) (piece, threads int)
	// launch holds, for a bridge.LaunchTuner backend, the pick of every
	// kernel the store has entries for.
	launch map[string]func(map[string]int) (map[string]string, bool)

	mu   sync.Mutex
	used map[string]map[string]bool // kernel -> choices used
}

// newTuned returns nil when there is nothing to look up. It must see the
// options before defaults fill in the MoE strategy.
func newTuned(be bridge.Backend, cfg *model.Config, dt bridge.DType, o Options) *tunedKernels {
	if o.Tuned == nil {
		return nil
	}
	t := &tunedKernels{store: o.Tuned, be: be, cfg: cfg, dtype: dt.String(),
		moeFixed: o.MoE.Strategy != "", moe: map[int]bridge.MoEParams{}, used: map[string]map[string]bool{}}
	// Only a store with matmul entries for this device installs a split:
	// without, MatMul keeps its own path, not even a lookup per call.
	if _, ok := be.(tune.MatMulSplitter); ok && hasEntries(o.Tuned, be, string(ops.MatMul)) {
		cache := map[[4]int]tune.Config{}
		var mu sync.Mutex
		t.split = func(m, n, k int, wdt bridge.DType) (int, int) {
			key := [4]int{m, n, k, int(wdt)}
			mu.Lock()
			c, ok := cache[key]
			mu.Unlock()
			if !ok {
				ch, err := lookup(t.store, be, string(ops.MatMul), wdt.String(), tune.Shape{ops.M: m, ops.N: n, ops.K: k})
				if err != nil {
					return 0, 0
				}
				t.note(string(ops.MatMul), ch)
				c = ch.Config
				mu.Lock()
				cache[key] = c
				mu.Unlock()
			}
			return tune.MatMulSplit(c)
		}
	}
	if _, ok := be.(bridge.LaunchTuner); ok {
		t.launch = map[string]func(map[string]int) (map[string]string, bool){}
		for _, k := range tune.Kernels(be.Info().Backend) {
			if hasEntries(o.Tuned, be, string(k.Op)) {
				t.launch[string(k.Op)] = t.launchPick(k)
			}
		}
	}
	return t
}

// launchPick looks kernel k's config up for each launch shape the backend
// asks about, once per shape.
func (t *tunedKernels) launchPick(k *tune.Kernel) func(map[string]int) (map[string]string, bool) {
	type answer struct {
		c  map[string]string
		ok bool
	}
	cache := map[string]answer{}
	var mu sync.Mutex
	return func(shape map[string]int) (map[string]string, bool) {
		s := make(tune.Shape, len(shape))
		for name, v := range shape {
			s[ops.Param(name)] = v
		}
		key := s.Key()
		mu.Lock()
		a, seen := cache[key]
		mu.Unlock()
		if seen {
			return a.c, a.ok
		}
		if k.Applies == nil || k.Applies(s) {
			if ch, err := lookup(t.store, t.be, string(k.Op), t.dtype, s); err == nil {
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
func hasEntries(s *tune.Store, be bridge.Backend, kernel string) bool {
	info := be.Info()
	for _, l := range s.Layers {
		for _, e := range l.Entries {
			if e.Kernel == kernel && e.Device == tune.DeviceName(be) && e.Backend == info.Backend {
				return true
			}
		}
	}
	return false
}

func lookup(s *tune.Store, be bridge.Backend, kernel, dtype string, shape tune.Shape) (tune.Choice, error) {
	q, _, err := tune.NewQuery(be, kernel, dtype, shape)
	if err != nil {
		return tune.Choice{}, err
	}
	return s.Lookup(q)
}

func (t *tunedKernels) note(kernel string, c tune.Choice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.used[kernel] == nil {
		t.used[kernel] = map[string]bool{}
	}
	t.used[kernel][c.String()] = true
}

// moeShape is the moe bucket of a step of tokens tokens.
func moeShape(c *model.Config, tokens int) tune.Shape {
	return tune.Shape{ops.Tokens: tokens, ops.Experts: c.NumExperts, ops.TopK: c.TopK, ops.Hidden: c.Hidden, ops.Intermediate: c.MoEInter}
}

// applyTuned sets up a step's tuned configs and returns what undoes them.
func (e *Engine) applyTuned(tokens int) (restore func()) {
	t := e.tuned
	if t == nil {
		return func() {}
	}
	if !t.moeFixed && e.cfg.NumExperts > 0 {
		p, ok := t.moe[tokens]
		if !ok {
			p = e.opts.MoE
			if ch, err := lookup(t.store, t.be, string(ops.MoE), t.dtype, moeShape(e.cfg, tokens)); err == nil {
				p = tune.MoEParams(ch.Config)
				t.note(string(ops.MoE), ch)
			}
			t.moe[tokens] = p
		}
		e.opts.MoE = p
	}
	if len(t.launch) > 0 {
		lt := t.be.(bridge.LaunchTuner)
		for name, pick := range t.launch {
			lt.SetLaunchConfig(name, pick)
		}
		return func() {
			for name := range t.launch {
				lt.SetLaunchConfig(name, nil)
			}
		}
	}
	if t.split == nil {
		return func() {}
	}
	s := t.be.(tune.MatMulSplitter)
	s.SetMatMulSplit(t.split)
	return func() { s.SetMatMulSplit(nil) }
}

// TunedUsed lists, per kernel, the tuned configs the engine's steps used so
// far with where each came from ("moe": "chunked/16 (user cache)"),
// several joined by "; ". Empty without Options.Tuned.
func (e *Engine) TunedUsed() map[string]string {
	out := map[string]string{}
	if e.tuned == nil {
		return out
	}
	e.tuned.mu.Lock()
	defer e.tuned.mu.Unlock()
	for k, set := range e.tuned.used {
		var cs []string
		for c := range set {
			cs = append(cs, c)
		}
		sort.Strings(cs)
		out[k] = strings.Join(cs, "; ")
	}
	return out
}

// TunedChoices says, before anything runs, which configs an engine with
// options o would use for a step of tokens tokens: kernel name to choice
// ("moe": "grouped (default)"). Explicit MoE params show as "explicit". The
// matmul entry summarises the step's matmul shapes: the default when all
// use it, else each tuned shape.
func TunedChoices(be bridge.Backend, cfg *model.Config, dt bridge.DType, o Options, tokens, logitRows int) map[string]string {
	out := map[string]string{}
	if o.Tuned == nil {
		return out
	}
	if cfg.NumExperts > 0 {
		if o.MoE.Strategy != "" {
			out[string(ops.MoE)] = string(o.MoE.Strategy) + " (explicit)"
			if o.MoE.Strategy == bridge.MoEChunked {
				out[string(ops.MoE)] = fmt.Sprintf("chunked/%d (explicit)", max(o.MoE.ChunkSize, 1))
			}
		} else if ch, err := lookup(o.Tuned, be, string(ops.MoE), dt.String(), moeShape(cfg, tokens)); err == nil {
			out[string(ops.MoE)] = ch.String()
		}
	}
	_, split := be.(tune.MatMulSplitter)
	if _, launch := be.(bridge.LaunchTuner); !split && !(launch && hasEntries(o.Tuned, be, string(ops.MatMul))) {
		return out
	}
	var tuned []string
	var def string
	for _, s := range matmulShapes(cfg, tokens, logitRows) {
		ch, err := lookup(o.Tuned, be, string(ops.MatMul), dt.String(), tune.Shape{ops.M: s[0], ops.N: s[1], ops.K: s[2]})
		if err != nil {
			return out
		}
		if ch.IsDefault() {
			def = ch.String()
			continue
		}
		tuned = append(tuned, fmt.Sprintf("m=%d,n=%d,k=%d: %s", s[0], s[1], s[2], ch))
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

// TunedLaunchChoices says, for a bridge.LaunchTuner backend, which configs
// the launch-tuned kernels besides matmul and moe (TunedChoices) would use
// in a decode step of seqs sequences at context cached tokens: decode
// attention and the RMS norms, each only where the store holds entries for
// the device ("paged_attention_decode": "2sg/q4/p256 (user cache)").
func TunedLaunchChoices(be bridge.Backend, cfg *model.Config, dt bridge.DType, o Options, seqs, context int) map[string]string {
	out := map[string]string{}
	if _, ok := be.(bridge.LaunchTuner); !ok || o.Tuned == nil {
		return out
	}
	bs := o.BlockSize
	if bs == 0 {
		bs = 16 // the engine's default
	}
	shapes := map[ops.ID]tune.Shape{
		ops.PagedAttentionDecode: {ops.Seqs: seqs, ops.Context: max(context, 1), ops.NumHeads: cfg.Heads, ops.NumKVHeads: cfg.KVHeads,
			ops.HeadSize: cfg.HeadDim, ops.BlockSize: bs},
		ops.RMSNorm:    {ops.Tokens: seqs, ops.Width: cfg.Hidden},
		ops.AddRMSNorm: {ops.Tokens: seqs, ops.Width: cfg.Hidden},
	}
	for _, k := range tune.Kernels(be.Info().Backend) {
		s, ok := shapes[k.Op]
		if !ok || !hasEntries(o.Tuned, be, string(k.Op)) {
			continue
		}
		if ch, err := lookup(o.Tuned, be, string(k.Op), dt.String(), s); err == nil {
			out[string(k.Op)] = ch.String()
		}
	}
	return out
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

// MoEShape is the moe bucket of a step of tokens tokens, for the tuner.
func MoEShape(c *model.Config, tokens int) tune.Shape { return moeShape(c, tokens) }
