package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Shape is an op's problem size by parameter: what a tuned config is keyed
// by (token count, experts, hidden size, context length, head size... and,
// for the CPU, the thread count the backend runs with) and what a cost model
// reads.
type Shape map[Param]int

// Key is the shape's canonical text, "a=1,b=2" sorted by name.
func (s Shape) Key() string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, string(k))
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", k, s[Param(k)])
	}
	return b.String()
}

// Clone copies the shape.
func (s Shape) Clone() Shape {
	c := make(Shape, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// Config is one point of a kernel's tuning space: parameter name to value.
// Values are text so one type serves integers (tile sizes, chunk sizes) and
// enumerations (dispatch strategies); JSON writes integers as numbers.
type Config map[string]string

// Int is parameter name as an integer (0 when absent or not a number).
func (c Config) Int(name string) int {
	n, _ := strconv.Atoi(c[name])
	return n
}

// Key is the config's canonical text, "a=1,b=x" sorted by name; two configs
// with the same key run the same code.
func (c Config) Key() string {
	names := make([]string, 0, len(c))
	for k := range c {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + c[k])
	}
	return b.String()
}

// Clone copies the config.
func (c Config) Clone() Config {
	d := make(Config, len(c))
	for k, v := range c {
		d[k] = v
	}
	return d
}

// Equal reports whether both configs hold the same values.
func (c Config) Equal(d Config) bool { return c.Key() == d.Key() }

// MarshalJSON writes integer values as JSON numbers.
func (c Config) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(c))
	for k, v := range c {
		if n, err := strconv.Atoi(v); err == nil && strconv.Itoa(n) == v {
			m[k] = n
		} else {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads numbers and strings.
func (c *Config) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		// Its offset is into this value, not the file the decoder reads: it
		// would point a reader at the wrong text.
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			te.Offset = 0
		}
		return err
	}
	*c = make(Config, len(m))
	for k, raw := range m {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			(*c)[k] = s
			continue
		}
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("config value %s: want a number or a string", k)
		}
		(*c)[k] = n.String()
	}
	return nil
}

// Limits are what the device allows, the inputs of a kernel's constraints.
// A GPU backend fills the threadgroup fields; the CPU backend only
// MaxThreads (its goroutines).
type Limits struct {
	// MaxThreads is the CPU's goroutine count (GOMAXPROCS by default), or a
	// GPU's maximum threads per threadgroup.
	MaxThreads int
	// ThreadgroupMemory is the threadgroup (shared) memory a GPU kernel may
	// use, in bytes; 0 when the backend has none.
	ThreadgroupMemory int
	// SIMDWidth is the GPU's SIMD-group (warp) width; 0 on the CPU.
	SIMDWidth int
	// StageBytes is what one weight of the tuned dtype takes staged in a
	// Metal GEMM tile: 2 for f16 and bf16, 4 for f32 and for bf16 where the
	// language has no bfloat (before MSL 3.1); 0 means 2.
	StageBytes int
}

// Match is how a shape dimension picks the nearest tuned bucket.
type Match int

const (
	// Exact dimensions must be equal: a config tuned for 32 experts says
	// nothing about 128.
	Exact Match = iota
	// Log dimensions (token count, context length) match the nearest bucket
	// by |log2(query) - log2(bucket)|, within the kernel's MaxOctaves.
	Log
)

// Dim is one dimension of a kernel's shape.
type Dim struct {
	Name Param
	// Default is the op's own default (kbench's) when a shape leaves the
	// dimension out.
	Default int
	Match   Match
	// Device dimensions come from the backend (the CPU's thread count), not
	// from the op's parameters; they are not passed to the op.
	Device bool
}

// Knob is one tunable parameter.
type Knob struct {
	Name string
	Doc  string
	// Values are its legal values for a shape on a device, in search order
	// (local search steps between neighbours in this order).
	Values func(s Shape, lim Limits) []string
	// When, if set, says whether the knob means anything for the earlier
	// knobs' values at shape s (a tile size under a matvec does not): the
	// grid leaves it out otherwise, so exclusive paths do not multiply.
	When func(c Config, s Shape) bool
}

// Constraint prunes candidates before anything runs: Check returns why the
// config cannot run (or is pointless) for the shape on the device.
type Constraint struct {
	Name  string
	Check func(c Config, s Shape, lim Limits) error
}

// Space declares one backend kernel's tuning space. It lives in its op's
// declaration (Op.Tuning), which fills Backend and Op.
type Space struct {
	Backend Backend
	Op      ID
	Doc     string
	Dims    []Dim
	// DType is the weight dtype when none is given.
	DType string
	// FixedDType: the kernel reads no weight matrix (the norms, argmax), so
	// its configs are tuned and looked up at DType alone, whatever the
	// model's weights (docs/tuning.md).
	FixedDType bool
	Params     []Knob
	// Constraints prune the space; every config that fails one is reported
	// with the constraint's reason.
	Constraints []Constraint
	// Canonical maps a config to the representative of the configs that run
	// the same code for the shape (a chunk size is meaningless unless the
	// strategy is chunked), so duplicates are pruned. Nil: the identity.
	Canonical func(c Config, s Shape, lim Limits) Config
	// Default is what runs when nothing is tuned; it is always a candidate.
	Default func(s Shape, lim Limits) Config
	// Format prints a config briefly, e.g. "chunked/16". Nil: "a=1,b=x".
	Format func(c Config) string
	// Applies reports whether the kernel runs at shape s at all (the CUDA
	// GEMV takes up to 8 rows; cuBLAS the rest). Nil: always.
	Applies func(s Shape) bool
	// MaxOctaves is how far (sum of log2 distances over Log dimensions) a
	// tuned bucket may be from the query and still apply; 0 means 2.
	MaxOctaves float64
}

// Pruned is a config the space declared but that will not run, and why.
type Pruned struct {
	Config Config
	Reason string
}

// String prints a config as the kernel formats it.
func (k *Space) String(c Config) string {
	if c == nil {
		return "-"
	}
	if k.Format != nil {
		return k.Format(c)
	}
	return c.Key()
}

// Dim returns the dimension called name.
func (k *Space) Dim(name Param) (Dim, bool) {
	for _, d := range k.Dims {
		if d.Name == name {
			return d, true
		}
	}
	return Dim{}, false
}

// Normalize fills the shape's missing dimensions with their defaults, takes
// the device dimensions from lim, and rejects unknown or non-positive ones.
//
// A dimension may be given by its op's other name for it (matmul's tokens
// for m), as a suite's kernel case may; both names at once are refused, as
// --set refuses them, since which one was meant cannot be told.
func (k *Space) Normalize(s Shape, lim Limits) (Shape, error) {
	op, _ := Lookup(k.Op)
	out := Shape{}
	for _, given := range slices.Sorted(maps.Keys(s)) {
		v, name := s[given], given
		if _, own := k.Dim(given); !own && op != nil {
			name = op.OwnName(given)
		}
		d, ok := k.Dim(name)
		if !ok {
			return nil, fmt.Errorf("%s: unknown shape dimension %q (want %s)", k.Op, given, strings.Join(k.dimNames(), ", "))
		}
		if w, both := s[name]; both && name != given {
			return nil, fmt.Errorf("%s: %s=%d and %s=%d are one dimension, %s its other name: give one", k.Op, given, v, name, w, given)
		}
		if v < 1 {
			return nil, fmt.Errorf("%s: %s=%d must be positive", k.Op, given, v)
		}
		if !d.Device {
			out[name] = v
		}
	}
	for _, d := range k.Dims {
		switch {
		case d.Device && d.Name == Threads:
			out[d.Name] = max(lim.MaxThreads, 1)
		case d.Device:
			if v, ok := s[d.Name]; ok {
				out[d.Name] = v
			}
		case out[d.Name] == 0:
			out[d.Name] = d.Default
		}
	}
	return out, nil
}

// dimNames lists the shape's dimensions, each with its op's other name
// for it where there is one: "m (or tokens), n, k (or hidden)".
func (k *Space) dimNames() []string {
	op, _ := Lookup(k.Op)
	var n []string
	for _, d := range k.Dims {
		if d.Device {
			continue
		}
		name := string(d.Name)
		if op != nil {
			if u, ok := op.Use(d.Name); ok && u.Alias != "" {
				name += " (or " + string(u.Alias) + ")"
			}
		}
		n = append(n, name)
	}
	return n
}

// OpParams are the shape dimensions the op itself takes (device dimensions
// left out), for building a kernel case.
func (k *Space) OpParams(s Shape) Shape {
	out := Shape{}
	for _, d := range k.Dims {
		if v, ok := s[d.Name]; ok && !d.Device {
			out[d.Name] = v
		}
	}
	return out
}

// Canonicalize applies Canonical to a copy of c.
func (k *Space) Canonicalize(c Config, s Shape, lim Limits) Config {
	if k.Canonical == nil {
		return c
	}
	return k.Canonical(c.Clone(), s, lim)
}

// DefaultConfig is the kernel's default for the shape, canonical. (Default
// itself returns the raw point, where local search starts.)
func (k *Space) DefaultConfig(s Shape, lim Limits) Config {
	return k.Canonicalize(k.Default(s, lim), s, lim)
}

// Candidates enumerates the kernel's candidates for a shape on a device: the
// cartesian product of the parameters' values, each mapped to its canonical
// form (duplicates pruned), then every constraint checked. The default comes
// first and is kept even where a constraint would prune it: it is what runs
// today, the baseline every candidate must beat.
func (k *Space) Candidates(s Shape, lim Limits) (cands []Config, pruned []Pruned) {
	def := k.DefaultConfig(s, lim)
	seen := map[string]bool{def.Key(): true}
	cands = append(cands, def)
	k.Grid(s, lim, func(raw Config) {
		c := k.Canonicalize(raw, s, lim)
		if seen[c.Key()] {
			if !c.Equal(raw) {
				pruned = append(pruned, Pruned{Config: raw, Reason: "duplicate of " + k.String(c)})
			}
			return
		}
		seen[c.Key()] = true
		if err := k.Check(c, s, lim); err != nil {
			pruned = append(pruned, Pruned{Config: c, Reason: err.Error()})
			return
		}
		cands = append(cands, c)
	})
	return cands, pruned
}

// Check returns the first constraint c violates, nil when it may run. Values
// outside a parameter's declared list fail too (a hand-edited config file).
func (k *Space) Check(c Config, s Shape, lim Limits) error {
	for _, p := range k.Params {
		v, ok := c[p.Name]
		if !ok {
			continue // canonical configs drop meaningless parameters
		}
		if !slices.Contains(p.Values(s, lim), v) {
			return fmt.Errorf("%s=%s is not a legal value", p.Name, v)
		}
	}
	for name := range c {
		if !slices.ContainsFunc(k.Params, func(p Knob) bool { return p.Name == name }) {
			return fmt.Errorf("unknown parameter %q", name)
		}
	}
	for _, ct := range k.Constraints {
		if err := ct.Check(c, s, lim); err != nil {
			return fmt.Errorf("%s: %w", ct.Name, err)
		}
	}
	return nil
}

// Grid calls fn for every raw point of the parameter product, in order (the
// first parameter varies slowest); a knob whose When is false for the
// point so far is left out of it.
func (k *Space) Grid(s Shape, lim Limits, fn func(Config)) {
	values := make([][]string, len(k.Params))
	for i, p := range k.Params {
		values[i] = p.Values(s, lim)
		if len(values[i]) == 0 {
			return
		}
	}
	c := Config{}
	var walk func(i int)
	walk = func(i int) {
		if i == len(k.Params) {
			fn(c.Clone())
			return
		}
		p := k.Params[i]
		if p.When != nil && !p.When(c, s) {
			walk(i + 1)
			return
		}
		for _, v := range values[i] {
			c[p.Name] = v
			walk(i + 1)
		}
		delete(c, p.Name)
	}
	walk(0)
}

// Move is one step of local search: the raw grid point (which keeps
// parameters its canonical form drops, so the search can walk through them)
// and the config that runs.
type Move struct{ Raw, Config Config }

// Neighbours are the moves one step away from the raw point c: an integer
// parameter to the next or previous value of its list, an enumeration to
// any other value. Moves are canonical, deduplicated (also against c) and
// constraint-checked.
//
// A step that changes nothing (its config is c's own, as a chunk holding
// every pair is grouped) or that cannot run is passed through, so that a
// fold or a constraint never walls off what lies beyond it: an integer
// parameter steps on the same way to the first config that is c's
// neighbour. Where none is left that way (or an enumeration's step is such
// a point), the search goes on from the first point that cannot run (else
// the first that changes nothing), stepping along every parameter, breadth
// first, to the nearest configs it reaches. A parameter the config in hand
// does not use at all (a chunk under grouped) is not stepped: no value of
// it gives another config.
func (k *Space) Neighbours(c Config, s Shape, lim Limits) []Move {
	cur := k.Canonicalize(c, s, lim)
	w := walker{k: k, s: s, lim: lim, cur: cur, lines: map[string]bool{}}
	seen := map[string]bool{cur.Key(): true}
	var out []Move
	var walls []Config
	for _, p := range k.Params {
		for _, run := range k.steps(p, c[p.Name], s, lim) {
			switch to := w.walk(c, cur, p, run); {
			case to.raw != nil:
				if !seen[to.config.Key()] {
					seen[to.config.Key()] = true
					out = append(out, Move{Raw: to.raw, Config: to.config})
				}
			case len(to.stuck) > 0:
				walls = append(walls, to.stuck[0])
			case to.folded != nil:
				walls = append(walls, to.folded)
			}
		}
	}
	// The moves above are all found first, so that a wall's search ends
	// where it reaches one of them.
	for _, start := range walls {
		visited := map[string]bool{c.Key(): true, start.Key(): true}
		from := []Config{start}
		for reached := false; len(from) > 0 && !reached; {
			var next []Config
			for _, r := range from {
				rn := k.Canonicalize(r, s, lim)
				for _, p := range k.Params {
					for _, run := range k.steps(p, r[p.Name], s, lim) {
						to := w.walk(r, rn, p, run)
						for _, x := range to.stuck {
							if !visited[x.Key()] {
								visited[x.Key()] = true
								next = append(next, x)
							}
						}
						if to.raw == nil {
							continue
						}
						reached = true
						if !seen[to.config.Key()] {
							seen[to.config.Key()] = true
							out = append(out, Move{Raw: to.raw, Config: to.config})
						}
					}
				}
			}
			from = next
		}
	}
	return out
}

// walker walks raw points along one knob for Neighbours.
type walker struct {
	k     *Space
	s     Shape
	lim   Limits
	cur   Config          // the config local search stands on
	lines map[string]bool // unused: by knob and the raw point's other knobs
}

// walked is where a walk ended: the first config other than cur that can
// run (raw nil: none), and the points passed on the way that cannot run
// (stuck) and the first that folds to cur.
type walked struct {
	raw, config Config
	stuck       []Config
	folded      Config
}

// walk steps knob p of raw point r (whose config is rn) through the values
// of run until a config other than cur that can run. It walks nowhere when
// r's config does not use p at all.
func (w *walker) walk(r, rn Config, p Knob, run []string) walked {
	var to walked
	for _, v := range run {
		x := r.Clone()
		x[p.Name] = v
		n := w.k.Canonicalize(x, w.s, w.lim)
		stuck := w.k.Check(n, w.s, w.lim) != nil
		if !stuck && !n.Equal(w.cur) {
			to.raw, to.config = x, n
			return to
		}
		if w.unused(r, rn, p, n) {
			return walked{}
		}
		if stuck {
			to.stuck = append(to.stuck, x)
		} else if to.folded == nil {
			to.folded = x
		}
	}
	return to
}

// unused reports whether raw point r's config rn ignores knob p, judged
// from n, the config of one step of p from r: no value of p changes rn.
func (w *walker) unused(r, rn Config, p Knob, n Config) bool {
	if _, used := n[p.Name]; used || !n.Equal(rn) {
		return false
	}
	line := r.Clone()
	delete(line, p.Name)
	key := p.Name + "|" + line.Key()
	if v, ok := w.lines[key]; ok {
		return v
	}
	w.lines[key] = true
	for _, v := range p.Values(w.s, w.lim) {
		line[p.Name] = v
		if !w.k.Canonicalize(line, w.s, w.lim).Equal(rn) {
			w.lines[key] = false
			break
		}
	}
	return w.lines[key]
}

// steps are the runs of values one step from v along knob p: for an
// integer knob the values below v nearest first and those above it, for
// an enumeration each other value alone.
func (k *Space) steps(p Knob, v string, s Shape, lim Limits) [][]string {
	vals := p.Values(s, lim)
	i := slices.Index(vals, v)
	var runs [][]string
	if numeric(vals) && i >= 0 {
		if i > 0 {
			down := slices.Clone(vals[:i])
			slices.Reverse(down)
			runs = append(runs, down)
		}
		if i+1 < len(vals) {
			runs = append(runs, vals[i+1:])
		}
		return runs
	}
	for j, w := range vals {
		if j != i {
			runs = append(runs, []string{w})
		}
	}
	return runs
}

func numeric(vals []string) bool {
	for _, v := range vals {
		if _, err := strconv.Atoi(v); err != nil {
			return false
		}
	}
	return len(vals) > 0
}

// Values helpers for declarations.

// Enum is a fixed list of values.
func Enum(v ...string) func(Shape, Limits) []string {
	return func(Shape, Limits) []string { return v }
}

// Pow2 is the powers of two from lo to hi.
func Pow2(lo, hi int) func(Shape, Limits) []string {
	return func(Shape, Limits) []string {
		var out []string
		for v := lo; v <= hi; v *= 2 {
			out = append(out, strconv.Itoa(v))
		}
		return out
	}
}

// UpTo is 1..n(lim), every integer.
func UpTo(n func(Limits) int) func(Shape, Limits) []string {
	return func(_ Shape, lim Limits) []string {
		var out []string
		for v := 1; v <= n(lim); v++ {
			out = append(out, strconv.Itoa(v))
		}
		return out
	}
}

// isPow2 reports whether v is a positive power of two.
func isPow2(v int) bool { return v > 0 && bits.OnesCount(uint(v)) == 1 }
