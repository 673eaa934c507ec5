package tune

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/runner/model"
)

// Layer names, in lookup order.
const (
	FromEnv     = "env override"
	FromUser    = "user cache"
	FromShipped = "shipped"
	FromDefault = "default"
)

//go:embed shipped
var shippedFS embed.FS

// Located is an entry and the file it was read from.
type Located struct {
	Entry
	File string
}

// Layer is one source of tuned configs.
type Layer struct {
	Name    string // FromEnv, FromUser, FromShipped (or a test's)
	Where   string // the folder
	Entries []Located
}

// Store looks tuned configs up across layers. Its methods may be called
// from several goroutines.
type Store struct {
	Layers []Layer
	// Warn receives each warning once (stale or unusable entries, unreadable
	// files); nil drops them. Warnings() keeps them too.
	Warn func(msg string)

	mu       sync.Mutex
	warned   map[string]bool
	warnings []string
	refused  map[*Located]error                // Entry.Check of each entry looked at
	f32      map[*model.Config]map[[2]int]bool // f32MatMulShapes of each config looked up
}

// refusal is e's Entry.Check, worked out once: an entry `tune import` would
// refuse (a slower config, a bucket lacking a dimension) is not used
// either, as `tune show` says.
func (s *Store) refusal(e *Located) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.refused[e]; ok {
		return err
	}
	if s.refused == nil {
		s.refused = map[*Located]error{}
	}
	err := e.Check()
	s.refused[e] = err
	return err
}

// NewStore is a store over layers, highest priority first.
func NewStore(layers ...Layer) *Store { return &Store{Layers: layers} }

// UserDir is the user's tuned-config folder, os.UserCacheDir()/mtlbench/tuned:
// where `mtlbench tune` writes and `tune import` merges.
func UserDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache folder for tuned configs: %w", err)
	}
	return filepath.Join(d, "mtlbench", "tuned"), nil
}

// Default loads the lookup order: the override folder dir (MTLBENCH_TUNED;
// none when empty), the user's cache, the configs shipped in the
// repository. A layer that cannot be read is left out with a warning (to
// warn, when not nil): tuned configs only ever make things faster, never
// stop a run.
func Default(dir string, warn func(string)) *Store {
	s := &Store{Warn: warn}
	if d := dir; d != "" {
		l, err := DirLayer(FromEnv, d)
		if err != nil {
			s.warn("env:"+d, fmt.Sprintf("tuned configs: override folder: %v", err))
		}
		s.Layers = append(s.Layers, l)
	}
	if d, err := UserDir(); err == nil {
		l, err := DirLayer(FromUser, d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.warn("user:"+d, fmt.Sprintf("tuned configs: %v", err))
		}
		s.Layers = append(s.Layers, l)
	}
	s.Layers = append(s.Layers, ShippedLayer())
	return s
}

// DirLayer reads every *.json file in dir but hidden ones (what a write
// killed midway leaves, an editor's copy). A missing folder is an empty
// layer and an error matching fs.ErrNotExist, naming the folder in words
// (not Go's "open"); a bad file is skipped and reported in the error
// while the others are kept.
func DirLayer(name, dir string) (Layer, error) {
	l := Layer{Name: name, Where: dir}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return l, readfile.PathError(dir, err)
	}
	var errs []string
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := ReadFile(p)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for _, en := range f.Entries {
			l.Entries = append(l.Entries, Located{Entry: en, File: p})
		}
	}
	if len(errs) > 0 {
		return l, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return l, nil
}

// ShippedLayer is the configs embedded from runner/tune/shipped.
func ShippedLayer() Layer {
	l := Layer{Name: FromShipped, Where: "runner/tune/shipped (embedded)"}
	names, _ := fs.Glob(shippedFS, "shipped/*.json")
	for _, n := range names {
		data, err := shippedFS.ReadFile(n)
		if err != nil {
			continue
		}
		f, err := ParseFile(n, data)
		if err != nil {
			// A broken shipped file is a build mistake the tests catch.
			continue
		}
		for _, en := range f.Entries {
			l.Entries = append(l.Entries, Located{Entry: en, File: path.Join("runner/tune", n)})
		}
	}
	return l
}

func (s *Store) warn(key, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	if s.warned[key] {
		return
	}
	s.warned[key] = true
	s.warnings = append(s.warnings, msg)
	if s.Warn != nil {
		s.Warn(msg)
	}
}

// Warnings are the warnings issued so far, each once.
func (s *Store) Warnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.warnings...)
}

// Query asks for one kernel's config on one device.
type Query struct {
	Device, Backend, Kernel, DType string
	Shape                          Shape // normalised (Kernel.Normalize)
	// SourceHash is the running kernel's; "" skips the staleness check.
	SourceHash string
	Limits     Limits
}

// NewQuery builds the query for kernel on backend be: the device, source
// hash and limits from be, the shape normalised (device dimensions such as
// the CPU's thread count filled in).
func NewQuery(be bridge.Backend, kernel, dtype string, shape Shape) (Query, *Kernel, error) {
	info := be.Info()
	k, err := Find(info.Backend, kernel)
	if err != nil {
		return Query{}, nil, err
	}
	// A kernel of no weights is tuned at its own dtype whatever the model's
	// (CheckDType refuses another where one is asked for by name).
	if dtype == "" || k.FixedDType {
		dtype = k.DType
	}
	lim := LimitsFor(be, kernel, dtype)
	s, err := k.Normalize(shape, lim)
	if err != nil {
		return Query{}, nil, err
	}
	return Query{Device: DeviceName(be), Backend: info.Backend, Kernel: kernel, DType: dtype, Shape: s,
		SourceHash: SourceHash(be, kernel), Limits: lim}, k, nil
}

// Choice is the config a lookup chose and where it came from.
type Choice struct {
	Kernel *Kernel
	Config Config
	From   string   // FromEnv, FromUser, FromShipped or FromDefault
	Entry  *Located // nil for the default
}

// String is "chunked/16 (user cache)".
func (c Choice) String() string { return c.Kernel.String(c.Config) + " (" + c.From + ")" }

// IsDefault reports whether the choice is the kernel's default config.
func (c Choice) IsDefault() bool { return c.Entry == nil }

// Lookup chooses q's config: among the entries for q's device, backend,
// kernel and dtype whose Exact dimensions equal q's, the nearest bucket —
// the smallest sum of |log2 q - log2 bucket| over Log dimensions, at most
// MaxOctaves away (a token count of 8 takes the bucket tuned at 4 or 16, not
// one tuned at 1) — ties going to the higher layer (env override, user
// cache, shipped), then to the smaller bucket. Stale entries (another
// kernel source hash) and configs the kernel no longer accepts, or that
// cannot run at their own bucket on this device, are skipped with a
// warning. A nearby bucket's config that runs there but not at q's shape
// (canonical for q, it takes a path whose constraints q's shape fails) is
// passed over quietly for the next nearest entry. With no usable entry it
// returns the kernel's default.
func (s *Store) Lookup(q Query) (Choice, error) {
	k, err := Find(q.Backend, q.Kernel)
	if err != nil {
		return Choice{}, err
	}
	def := Choice{Kernel: k, Config: k.DefaultConfig(q.Shape, q.Limits), From: FromDefault}
	if s == nil {
		return def, nil
	}
	maxOct := k.MaxOctaves
	if maxOct == 0 {
		maxOct = 2
	}
	type cand struct {
		dist  float64
		layer int
		size  float64
		e     *Located
		cfg   Config
	}
	var best *cand
	for li := range s.Layers {
		l := &s.Layers[li]
		for ei := range l.Entries {
			e := &l.Entries[ei]
			if e.Device != q.Device || e.Backend != q.Backend || e.Kernel != q.Kernel || e.DType != q.DType {
				continue
			}
			if err := s.refusal(e); err != nil {
				s.warn("refused:"+l.Name+":"+e.File+":"+e.Key(), fmt.Sprintf(
					"tuned config %s for %s from %s (%s) is refused: %v; ignored", k.String(e.Config), e.Describe(), l.Name, e.File, err))
				continue
			}
			dist, size, ok := distance(k, q.Shape, e.Shape)
			if !ok || dist > maxOct+1e-9 {
				continue
			}
			if q.SourceHash != "" && e.SourceHash != q.SourceHash {
				s.warn("stale:"+l.Name+":"+e.File+":"+e.Key(), fmt.Sprintf(
					"tuned config %s for %s from %s (%s) is stale: tuned on kernel source %.12s, the %s kernel is now %.12s; ignored (re-run mtlbench tune)",
					k.String(e.Config), e.Describe(), l.Name, e.File, e.SourceHash, q.Kernel, q.SourceHash))
				continue
			}
			cfg := k.Canonicalize(e.Config, q.Shape, q.Limits)
			if err := k.Check(cfg, q.Shape, q.Limits); err != nil && !cfg.Equal(def.Config) {
				// A config that runs at its own bucket says nothing about a
				// shape where its path does not apply (a matvec tuned at one
				// row is a tile at two): the next entry or the default is
				// taken, and nothing is wrong with the file.
				if own := k.Canonicalize(e.Config, e.Shape, q.Limits); k.Check(own, e.Shape, q.Limits) == nil {
					continue
				}
				s.warn("bad:"+l.Name+":"+e.File+":"+e.Key(), fmt.Sprintf(
					"tuned config %s for %s from %s (%s) cannot run here: %v; ignored", k.String(e.Config), e.Describe(), l.Name, e.File, err))
				continue
			}
			c := cand{dist: dist, layer: li, size: size, e: e, cfg: cfg}
			// Two files of one layer holding the same bucket (a backup beside
			// the cache's file): the newer tune wins, not the file's name.
			sameBucket := best != nil && c.layer == best.layer && c.e.Key() == best.e.Key()
			if best == nil || c.dist < best.dist-1e-9 ||
				math.Abs(c.dist-best.dist) <= 1e-9 && (c.layer < best.layer || c.layer == best.layer && c.size < best.size) ||
				sameBucket && c.e.TunedAt.After(best.e.TunedAt) {
				best = &c
			}
		}
	}
	if best == nil {
		return def, nil
	}
	return Choice{Kernel: k, Config: best.cfg, From: s.Layers[best.layer].Name, Entry: best.e}, nil
}

// distance is the log2 distance between a query and a bucket over the Log
// dimensions, and the bucket's log size (for ties); ok is false when an
// Exact dimension differs.
func distance(k *Kernel, q, b Shape) (dist, size float64, ok bool) {
	for _, d := range k.Dims {
		qv, qok := q[d.Name]
		bv, bok := b[d.Name]
		if qok != bok {
			return 0, 0, false
		}
		if !qok {
			continue
		}
		if d.Match == Exact {
			if qv != bv {
				return 0, 0, false
			}
			continue
		}
		if qv < 1 || bv < 1 {
			return 0, 0, false
		}
		dist += math.Abs(math.Log2(float64(qv)) - math.Log2(float64(bv)))
		size += math.Log2(float64(bv))
	}
	// A bucket with dimensions the kernel no longer declares does not match.
	for name := range b {
		if _, ok := k.Dim(name); !ok {
			return 0, 0, false
		}
	}
	return dist, size, true
}

// Listed is an entry with the layer it is in.
type Listed struct {
	Layer string
	Located
}

// All lists every entry of every layer in lookup order, each layer sorted
// by bucket, for `tune show`.
func (s *Store) All() []Listed {
	var out []Listed
	for _, l := range s.Layers {
		f := File{}
		for _, e := range l.Entries {
			f.Entries = append(f.Entries, e.Entry)
		}
		files := map[string]string{}
		for _, e := range l.Entries {
			files[e.Key()] = e.File
		}
		f.sortEntries()
		for _, e := range f.Entries {
			out = append(out, Listed{Layer: l.Name, Located: Located{Entry: e, File: files[e.Key()]}})
		}
	}
	return out
}
