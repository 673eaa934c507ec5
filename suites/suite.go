package suites

import (
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MaxCases caps the expanded cases of one suite: a matrix typo (an extra
// zero in a list, a forgotten key) should fail fast, not queue a week of runs.
const MaxCases = 10000

// Value is one scalar parameter value and where it was written.
type Value struct {
	Raw   string  // the scalar as written in the file
	Int   int64   // integer value when the scalar is an integral number
	Float float64 // numeric value when IsNum
	IsNum bool    // the scalar is a YAML number (quoted numbers are strings)
	Pos   Pos
	// Key is the name it was written under where that is an alias of the
	// op's parameter it is filed under (hidden for width), so an error
	// about it says the name the user wrote; "" otherwise.
	Key string
}

// Case is one expanded case: a group's entry merged with one matrix point.
type Case struct {
	Group string // the case entry's name
	Kind  string // KindModel or KindKernel
	Op    ops.ID // kernel op; "" for model cases
	// Model and Kernel are the case's decoded parameters (the one of its
	// kind): what runners read.
	Model  ModelParams
	Kernel ops.Args
	// Params are the values as written, merged: suite params the case
	// reads < case params < matrix point; for keys, names, positions and
	// the results store.
	Params map[string]Value
	Key    string // "kind/group/a=1/b=2" over all Params, sorted by name
	Name   string // group plus its matrix params, e.g. "batch-scaling/batch=8"
	Pos    Pos    // the case entry in the file
	// from is where each of Params came from (fromSuite ... fromSet): a
	// suite default is the case's only while it reads it (settle).
	from map[string]int
}

// intParam returns the integer parameter name, or def when it is not set.
func (c Case) intParam(name string, def int) int {
	if v, ok := c.Params[name]; ok && v.IsNum {
		return int(v.Int)
	}
	return def
}

// stringParam returns parameter name as written, or def when it is not set.
func (c Case) stringParam(name, def string) string {
	if v, ok := c.Params[name]; ok {
		return v.Raw
	}
	return def
}

// floatParam returns the numeric parameter name, or def when it is not set.
func (c Case) floatParam(name string, def float64) float64 {
	if v, ok := c.Params[name]; ok && v.IsNum {
		return v.Float
	}
	return def
}

// Model is the suite's model section.
type Model struct {
	Preset, Path string
	Weights      string // WeightsSynthetic or WeightsCheckpoint
	DType        string // "f32" | "f16" | "bf16" | a packed preset format; "": a checkpoint's own, a preset's bf16
	Seed         int64
	Layers       int    // depth override; 0 = the model's own depth
	Fit          string // "strict" | "truncate-layers"
	Pos          Pos    // the preset or path value, for "unknown model" errors
}

// Suite is a parsed, validated suite with its cases expanded.
type Suite struct {
	Name, Description string
	Backend           string // auto | cpu | metal | metal-emu | cuda
	Timing            string // throughput | profile
	Model             *Model // nil when the suite has only kernel cases
	Repetitions       int
	Warmup            int
	Interleave        bool
	Cooldown          time.Duration
	Thresholds        map[string]float64 // metric -> fraction (5% -> 0.05)
	File              string
	Hash              string // sha256 hex of the file bytes
	Cases             []Case // expanded, in file order
	// Positions maps dotted paths of the values written in the file
	// ("backend", "model.layers", "thresholds.decode_tok_s", "params.batch",
	// "cases") to where they are, for the runner's own checks.
	Positions map[string]Pos
	// defaults are the suite's params, which a case holds while it reads
	// them: a --set may change what it reads.
	defaults map[string]Value
}

// Load reads and parses the suite at path; errors name path as given.
func Load(path string) (*Suite, error) {
	if name, ok := strings.CutPrefix(path, ShippedPrefix); ok {
		data, err := Shipped(name)
		if err != nil {
			return nil, err
		}
		return Parse(path, data)
	}
	data, err := readSuite(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses and validates a suite. file is used only in positions and
// Suite.File. On error the suite is nil and the error is an ErrorList (or
// a single *Error for YAML syntax errors).
func Parse(file string, data []byte) (*Suite, error) {
	s, err := parse(file, data)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Info summarises one suite file for listings.
type Info struct {
	Path, Name, Description string
	Cases                   int
	Err                     error
}

// info parses one suite for a listing; name is the fallback when the file
// names none.
func info(path, name string, data []byte) Info {
	in := Info{Path: path}
	s, err := parse(path, data)
	in.Err = err
	if s != nil {
		in.Name, in.Description = s.Name, s.Description
		if err == nil {
			in.Cases = len(s.Cases)
		}
	}
	if in.Name == "" {
		in.Name = name
	}
	return in
}

// List parses every *.yaml and *.yml file directly in dir, sorted by path,
// a link to one too; a folder so named, or a link to one, is no suite and is
// passed over (isFolder). A broken suite, or a link to no file, is listed
// with Err set (and whatever name and description could still be read)
// rather than failing the listing.
func List(dir string) ([]Info, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, readfile.PathError(dir, err) // as a suite file's error reads
	}
	var out []Info
	for _, e := range entries {
		name := e.Name()
		if suiteName(name) == name {
			continue
		}
		path := filepath.Join(dir, name)
		if isFolder(path) {
			continue
		}
		data, err := readSuite(path)
		if err != nil {
			out = append(out, Info{Path: path, Name: suiteName(name), Err: err})
			continue
		}
		out = append(out, info(path, suiteName(name), data))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// A model's weights: seeded random ones (a preset's, or drawn for a
// checkpoint's architecture) or the checkpoint's own.
const (
	WeightsSynthetic  = "synthetic"
	WeightsCheckpoint = "checkpoint"
)
