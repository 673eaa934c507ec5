// Package envconfig is the one place mtlbench reads its MTLBENCH_*
// environment variables. Vars documents every one (name, default, meaning,
// area); the accessors turn them into the options the packages below take,
// so libraries never read the environment themselves. `mtlbench env` prints
// the table with each variable's current value.
package envconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/internal/homepath"
	"github.com/mtlbench/mtlbench/internal/suggest"
	"github.com/mtlbench/mtlbench/results"
)

// Var is one environment variable.
type Var struct {
	Name string `json:"name"`
	// Default is what applies when the variable is unset or empty, as a
	// reader would say it.
	Default string `json:"default"`
	// Area is the part of mtlbench it configures: results, provenance,
	// tuning, metal, metal-emu, cuda, or tests (knobs of the packages' tests).
	Area    string `json:"area"`
	Meaning string `json:"meaning"`
}

// Vars is every MTLBENCH_* variable, by area.
var Vars = []Var{
	{"MTLBENCH_DB", "$XDG_DATA_HOME/mtlbench/results.db, else ~/.local/share/mtlbench/results.db", "results",
		"results database the commands read and write (a command's --db flag wins; a leading ~/ is the home folder)"},
	{"MTLBENCH_DB_WAIT", "2m", "results",
		"how long run, bench and tune wait for a lock another process holds on the results database before they stop, keeping what they measured in a file beside it for mtlbench import, and import, peer import and ab's recording wait before they store nothing (docs/data.md)"},
	{"MTLBENCH_HISTORY", "$XDG_DATA_HOME/mtlbench/history, else ~/.local/share/mtlbench/history", "results",
		"folder of imported performance history (history import writes there); every command reads it beside the built-in history"},
	{"MTLBENCH_GIT_COMMIT", "the binary's commit, else git HEAD here", "provenance",
		"commit recorded with each run, over the binary's own (its VCS stamp or -ldflags -X main.commit) or, for a binary without one, git rev-parse HEAD in the working directory"},
	{"MTLBENCH_TUNED", "none", "tuning",
		"folder of tuned kernel configs: the nearest bucket wins, and among equally near ones these beat the user's cache and the shipped configs"},

	{"MTLBENCH_METAL_MSL", "the newest of 3.2, 3.1, 3.0 the OS compiles", "metal",
		"MSL version the Metal kernels are compiled for (metal and metal-emu), e.g. 3.0 to try the path macOS 13 takes; one before 3.0 lacks what they use, and neither backend opens"},
	{"MTLBENCH_METAL_FAST_MATH", "1", "metal",
		"0: compile the Metal kernels with fast math off (metal and metal-emu; the emulator then fuses no multiply-adds), to tell a kernel's error from fast math's"},
	{"MTLBENCH_METAL_SERIAL", "0", "metal",
		"1: encode steps in serial compute passes instead of concurrent ones with barriers between dependent dispatches"},
	{"MTLBENCH_METAL_STREAM", "1", "metal",
		"0: commit a step only once it is wholly encoded (by default a step no other runs ahead of commits its first dispatches while the rest are encoded)"},

	{"MTLBENCH_CLANG", "clang++-19, -20, -18, -17, -16 or clang++ on $PATH", "metal-emu",
		"clang++ (16 or newer) that compiles the Metal kernels for the CPU emulator"},
	{"MTLBENCH_EMU_CACHE", "<user cache>/mtlbench/msl-emu", "metal-emu",
		"folder of the emulator's compiled kernel libraries"},
	{"MTLBENCH_EMU_CFLAGS", "none", "metal-emu",
		"extra clang flags for the emulator, e.g. -DMSL_EMU_UCONTEXT (portable fiber switch) or -O0 -g"},
	{"MTLBENCH_EMU_REVERSE_LANES", "0", "metal-emu",
		"1: run each simdgroup's lanes last to first between sync points; a kernel whose results change relies on lanes in lockstep (docs/msl-subset.md)"},
	{"MTLBENCH_EMU_TIMEOUT", emu.DefaultDispatchTimeout.String(), "metal-emu",
		"how long a dispatch of the emulator may go without a threadgroup starting (a kernel in an endless loop?) before it fails; 0: no limit"},

	{"MTLBENCH_CUDA_LIBS", "none", "cuda",
		"':'-separated folders searched first for the driver, NVRTC and cuBLAS"},
	{"MTLBENCH_CUDA_DEVICE", "0", "cuda", "GPU ordinal"},
	{"MTLBENCH_CUDA_CACHE", "<user cache>/mtlbench/cuda", "cuda", "folder of compiled kernels (cubins)"},
	{"MTLBENCH_CUDA_GRAPHS", "1", "cuda", "0: never capture or replay CUDA graphs"},
	{"MTLBENCH_CUDA_CUBLAS", "1", "cuda", "0: run every matmul on the backend's own kernels, not cuBLAS"},
	{"MTLBENCH_CUDA_PDL", "1", "cuda", "0: launch kernels without programmatic dependent launch"},
	{"MTLBENCH_CUDA_PDL_EARLY", "1", "cuda",
		"0: the short kernels (norms, RoPE, attention) wait on the previous kernel before letting the next one in"},
	{"MTLBENCH_CUDA_DECODE_MMA", "1", "cuda",
		"0: decode attention over a half KV cache on CUDA cores (paged_decode) instead of tensor cores (paged_decode_mma)"},
	{"MTLBENCH_CUDA_FUSE", "1", "cuda",
		"0: RoPE and decode attention, the single-token MoE router and routing, and a single-token GEMV with the RMSNorm before it run as separate launches"},
	{"MTLBENCH_CUDA_EXACT_PREFILL", "0", "cuda",
		"1: steps of many tokens keep f32 accuracy on half-precision models (two-part GEMMs, f32 attention and experts) instead of bf16 tensor cores"},
	{"MTLBENCH_CUDA_PACKED_MMA", "1", "cuda",
		"0: packed weights in steps of many tokens run on the f32-activation GEMVs instead of tensor cores (bf16 activations, weight tiles dequantized as staged)"},
	{"MTLBENCH_CUDA_GEMV_MMA", "0", "cuda",
		"1: matmuls of 9-16 tokens over half weights run on the backend's tensor-core GEMVs instead of cuBLAS (slower on an H200)"},
	{"MTLBENCH_CUDA_PREFETCH", "0", "cuda",
		"1: GEMVs and the single-token MoE down projection prefetch their weight rows into L2 (cost 5-8% of batch-1 decode on an H100)"},
	{"MTLBENCH_CUDA_STEP_KERNELS", "1", "cuda",
		"0: move a step's metadata, token ids and results with copies and a memset around its graph instead of step_begin and step_end kernels"},
	{"MTLBENCH_CUDA_STREAM", "1", "cuda",
		"0: run a step only once it is wholly recorded (by default its first kernels start while the rest is recorded)"},
	{"MTLBENCH_CUDA_CHAINS", "0", "cuda",
		"1: runs of single-token affine GEMVs as one persistent launch each (qachain; slower on an H200)"},
	{"MTLBENCH_CUDA_TIMELINE", "0", "cuda",
		"1: kernels note when each launch was let go by the one before it, so per-op timings (--timing profile) come from steps as they run, graphs and overlapped launches kept"},
	{"MTLBENCH_CUDA_PROFILE_DETAIL", "0", "cuda",
		"1: profiles split moe into router, route, gate_up and down, and attention into its kernels; with the timeline, every op into its kernels"},

	{"MTLBENCH_CUDA_BENCH", "none (skipped)", "tests",
		"bridge/cuda TestDecodeSpeed cases: preset@batch,batch;... e.g. qwen3-30b-a3b@1,16;tinyllama-1.1b@1"},
	{"MTLBENCH_CUDA_BENCH_GEN", "64", "tests", "bridge/cuda TestDecodeSpeed generated tokens"},
	{"MTLBENCH_CUDA_BENCH_PROMPT", "128", "tests", "bridge/cuda TestDecodeSpeed prompt tokens"},
	{"MTLBENCH_CUDA_BENCH_STEPS", "overlapped", "tests",
		"bridge/cuda TestDecodeSpeed step modes to alternate: overlapped, synchronous"},
	{"MTLBENCH_CUDA_CHAIN", "0", "tests", "1: run bridge/cuda TestOpChain (single ops back to back in a replayed graph); other text: only the chains whose names contain it, e.g. q4"},
	{"MTLBENCH_TUNE_COMPARE", "none (skipped)", "tests",
		"tuned folder runner/tune/tuner TestCompareTunedSuite compares with the defaults"},
	{"MTLBENCH_TUNE_PAIRS", "6", "tests", "runner/tune/tuner TestCompareTunedSuite ABBA pairs"},
	{"MTLBENCH_CHARTS_DIR", "none", "tests", "folder where reports/charts tests keep the charts they draw"},
	{"MTLBENCH_TEKKEN_240718", "none (skipped)", "tests",
		"a whole tekken_240718.json (Mistral's tokenizer file) runner/tokenizer TestTekkenFullVocabulary encodes with (tools/fixtures/make_tekken_fixtures.mjs writes one)"},
	{"MTLBENCH_TEST_SLOWDOWN", "0%", "tests",
		"lengthen every engine step and timed kernel step by this percentage (10%) by spinning after it: a known slowdown for measuring the perf gate's power (docs/perf-gate.md); never set it for real measurements"},
}

// Value is a variable with its current value and where that comes from.
type Value struct {
	Var
	Value  string `json:"value"`
	Source string `json:"source"` // "environment" or "default"
}

// Unknown lists the MTLBENCH_ variables set in the environment that
// mtlbench does not read, sorted: a misspelt one is otherwise ignored
// without a word.
func Unknown() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MTLBENCH_") && !slices.ContainsFunc(Vars, func(v Var) bool { return v.Name == name }) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// UnknownWarnings is a warning line for each variable Unknown lists, with
// the known name it is probably a misspelling of: every command prints
// them, since such a variable changes nothing.
func UnknownWarnings() []string {
	const prefix = "MTLBENCH_"
	known := make([]string, len(Vars))
	for i, v := range Vars {
		known[i] = strings.TrimPrefix(v.Name, prefix)
	}
	var out []string
	for _, name := range Unknown() {
		// Compared without the shared prefix, which would make every name
		// look close to every other.
		hint := "a misspelling?"
		if best := suggest.Closest(strings.TrimPrefix(name, prefix), known); best != "" {
			hint = "did you mean " + prefix + best + "?"
		}
		out = append(out, fmt.Sprintf("warning: %s is set, but mtlbench reads no such variable (%s)", name, hint))
	}
	return out
}

// resolved gives the value a default of a path rule comes to on this
// machine, so `mtlbench env` shows the path the commands will use.
var resolved = map[string]func() string{
	"MTLBENCH_DB":         results.DefaultPath,
	"MTLBENCH_HISTORY":    defaultHistoryDir,
	"MTLBENCH_EMU_CACHE":  emu.DefaultCacheDir,
	"MTLBENCH_CUDA_CACHE": cuda.DefaultCacheDir,
}

// Values lists every variable in Vars with its current value: what the
// environment says, or the default (a path rule resolved for this machine).
func Values() []Value {
	out := make([]Value, 0, len(Vars))
	for _, v := range Vars {
		val, ok := lookup(v.Name)
		if !ok {
			val = v.Default
			if r := resolved[v.Name]; r != nil {
				val = r()
			}
			out = append(out, Value{Var: v, Value: val, Source: "default"})
			continue
		}
		out = append(out, Value{Var: v, Value: Get(v.Name), Source: "environment"}) // a path as the commands read it
	}
	return out
}

// lookup reads name, which must be in Vars; an empty value counts as unset.
func lookup(name string) (string, bool) {
	known := false
	for _, v := range Vars {
		if v.Name == name {
			known = true
			break
		}
	}
	if !known {
		panic("envconfig: " + name + " is not in the table")
	}
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}

// Get is name's value, "" when unset; name must be in Vars. A path
// variable's leading ~ or ~/ is the home folder (internal/homepath); one
// it cannot read so (~name) is left as it is, for Check to name.
func Get(name string) string {
	v, _ := lookup(name)
	if pathVars[name] {
		v = expandPaths(v)
	}
	return v
}

// pathVars are the variables that hold paths (MTLBENCH_CUDA_LIBS a list of
// them), which an environment file or a Makefile passes on unexpanded.
var pathVars = map[string]bool{
	"MTLBENCH_DB": true, "MTLBENCH_HISTORY": true, "MTLBENCH_TUNED": true, "MTLBENCH_CLANG": true,
	"MTLBENCH_EMU_CACHE": true, "MTLBENCH_CUDA_CACHE": true, "MTLBENCH_CUDA_LIBS": true,
	"MTLBENCH_TUNE_COMPARE": true, "MTLBENCH_CHARTS_DIR": true,
}

// expandPaths expands the home folder in each ':'-separated path of v.
func expandPaths(v string) string {
	parts := strings.Split(v, ":")
	for i, p := range parts {
		if e, err := homepath.Expand(p); err == nil {
			parts[i] = e
		}
	}
	return strings.Join(parts, ":")
}

// Int is name's value as a positive integer, def when unset or not one.
func Int(name string, def int) int {
	if n, err := strconv.Atoi(strings.TrimSpace(Get(name))); err == nil && n > 0 {
		return n
	}
	return def
}

// off reports whether name turns its feature off: 0, off or false.
func off(name string) bool {
	switch strings.ToLower(Get(name)) {
	case "0", "off", "false":
		return true
	}
	return false
}

// on reports whether name turns its feature on: 1, on or true.
func on(name string) bool {
	switch strings.ToLower(Get(name)) {
	case "1", "on", "true":
		return true
	}
	return false
}

var mslVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)

// switches are the variables that turn a feature on or off.
var switches = []string{"MTLBENCH_METAL_FAST_MATH", "MTLBENCH_METAL_SERIAL", "MTLBENCH_METAL_STREAM", "MTLBENCH_EMU_REVERSE_LANES", "MTLBENCH_CUDA_GRAPHS", "MTLBENCH_CUDA_CUBLAS",
	"MTLBENCH_CUDA_PDL", "MTLBENCH_CUDA_PDL_EARLY", "MTLBENCH_CUDA_DECODE_MMA", "MTLBENCH_CUDA_FUSE",
	"MTLBENCH_CUDA_EXACT_PREFILL", "MTLBENCH_CUDA_PACKED_MMA", "MTLBENCH_CUDA_GEMV_MMA", "MTLBENCH_CUDA_PREFETCH",
	"MTLBENCH_CUDA_STEP_KERNELS", "MTLBENCH_CUDA_STREAM", "MTLBENCH_CUDA_CHAINS", "MTLBENCH_CUDA_TIMELINE",
	"MTLBENCH_CUDA_PROFILE_DETAIL"}

// Check reports each set variable whose value mtlbench cannot take, naming
// it, its value and what it takes: a switch that is neither on nor off is
// not quietly off.
func Check() error {
	var errs []error
	for _, name := range switches {
		if v := Get(name); v != "" && !on(name) && !off(name) {
			errs = append(errs, fmt.Errorf("%s=%q: want 1 or 0 (on, off, true, false)", name, v))
		}
	}
	// A version the OS's compiler refuses is Metal's to report (auto then
	// falls back to another backend); one that is no version is a typo.
	if v := Get("MTLBENCH_METAL_MSL"); v != "" && !mslVersion.MatchString(v) {
		errs = append(errs, fmt.Errorf("MTLBENCH_METAL_MSL=%q: want a version such as %s", v, strings.Join(metal.LanguageVersions, " or ")))
	}
	if _, err := CUDA(); err != nil {
		errs = append(errs, err)
	}
	if _, err := Emu(); err != nil {
		errs = append(errs, err)
	}
	if _, err := TestSlowdown(); err != nil {
		errs = append(errs, err)
	}
	if _, err := DBWait(); err != nil {
		errs = append(errs, err)
	}
	for _, v := range Vars {
		if !pathVars[v.Name] {
			continue
		}
		raw, _ := lookup(v.Name)
		for _, p := range strings.Split(raw, ":") {
			if _, err := homepath.Expand(p); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %v", v.Name, raw, err))
				break
			}
		}
	}
	if d := TunedDir(); d != "" {
		if st, err := os.Stat(d); err == nil && !st.IsDir() {
			errs = append(errs, fmt.Errorf("MTLBENCH_TUNED=%q: a file, want the folder of tuned configs (tune import puts a file's configs in one)", d))
		}
	}
	return errors.Join(errs...)
}

// DB is the results database: $MTLBENCH_DB, else results.DefaultPath.
func DB() string {
	if p := Get("MTLBENCH_DB"); p != "" {
		return p
	}
	return results.DefaultPath()
}

// DBWait is MTLBENCH_DB_WAIT, how long a command that records results
// waits for a results database another process holds: results.DefaultWait
// when unset.
func DBWait() (time.Duration, error) {
	v := strings.TrimSpace(Get("MTLBENCH_DB_WAIT"))
	if v == "" {
		return results.DefaultWait, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("MTLBENCH_DB_WAIT=%q: want a duration above 0 such as 30s or 10m (unset: %s)", v, results.DefaultWait)
	}
	return d, nil
}

// HistoryDir is the folder of imported history: $MTLBENCH_HISTORY, else
// "history" beside the default results database.
func HistoryDir() string {
	if p := Get("MTLBENCH_HISTORY"); p != "" {
		return p
	}
	return defaultHistoryDir()
}

func defaultHistoryDir() string {
	return filepath.Join(filepath.Dir(results.DefaultPath()), "history")
}

// GitCommit is $MTLBENCH_GIT_COMMIT, "" when unset (the caller takes the
// binary's stamp, else asks git).
func GitCommit() string { return Get("MTLBENCH_GIT_COMMIT") }

// TunedDir is the override folder of tuned configs, "" for none.
func TunedDir() string { return Get("MTLBENCH_TUNED") }

// TestSlowdown is MTLBENCH_TEST_SLOWDOWN as a fraction (0.1 for 10%), 0
// when unset. It exists to measure the perf gate's power with a candidate
// that is slower by a known amount.
func TestSlowdown() (float64, error) {
	v := strings.TrimSpace(Get("MTLBENCH_TEST_SLOWDOWN"))
	if v == "" {
		return 0, nil
	}
	num, ok := strings.CutSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || !(f >= 0 && f <= 1000) {
		return 0, fmt.Errorf("MTLBENCH_TEST_SLOWDOWN=%q: want a percentage between 0%% and 1000%%, like 10%%", v)
	}
	return f / 100, nil
}

// CUDA are the CUDA backend's options.
func CUDA() (cuda.Options, error) {
	o := cuda.Options{
		CacheDir:      Get("MTLBENCH_CUDA_CACHE"),
		NoGraphs:      off("MTLBENCH_CUDA_GRAPHS"),
		NoCuBLAS:      off("MTLBENCH_CUDA_CUBLAS"),
		NoPDL:         off("MTLBENCH_CUDA_PDL"),
		NoPDLEarly:    off("MTLBENCH_CUDA_PDL_EARLY"),
		NoFuse:        off("MTLBENCH_CUDA_FUSE"),
		NoDecodeMMA:   off("MTLBENCH_CUDA_DECODE_MMA"),
		NoStepKernels: off("MTLBENCH_CUDA_STEP_KERNELS"),
		NoStream:      off("MTLBENCH_CUDA_STREAM"),
		Prefetch:      on("MTLBENCH_CUDA_PREFETCH"),
		ExactPrefill:  on("MTLBENCH_CUDA_EXACT_PREFILL"),
		NoPackedMMA:   off("MTLBENCH_CUDA_PACKED_MMA"),
		GemvMMA:       on("MTLBENCH_CUDA_GEMV_MMA"),
		ProfileDetail: on("MTLBENCH_CUDA_PROFILE_DETAIL"),
		Chains:        on("MTLBENCH_CUDA_CHAINS"),
		Timeline:      on("MTLBENCH_CUDA_TIMELINE"),
	}
	for _, d := range strings.Split(Get("MTLBENCH_CUDA_LIBS"), ":") {
		if d != "" {
			o.Libs = append(o.Libs, d)
		}
	}
	if d := Get("MTLBENCH_CUDA_DEVICE"); d != "" {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 0 {
			return o, fmt.Errorf("MTLBENCH_CUDA_DEVICE=%q: want a GPU ordinal (0, 1, ...)", d)
		}
		o.Device = n
	}
	return o, nil
}

// Metal are the Metal backend's options (on a Mac and on the emulator).
func Metal() metal.Options {
	return metal.Options{LanguageVersion: Get("MTLBENCH_METAL_MSL"), NoFastMath: off("MTLBENCH_METAL_FAST_MATH"),
		SerialDispatch: on("MTLBENCH_METAL_SERIAL"), NoStream: off("MTLBENCH_METAL_STREAM")}
}

// Emu are the Metal emulator's options.
func Emu() (emu.Options, error) {
	o := emu.Options{
		Clang:        Get("MTLBENCH_CLANG"),
		CacheDir:     Get("MTLBENCH_EMU_CACHE"),
		CFlags:       strings.Fields(Get("MTLBENCH_EMU_CFLAGS")),
		ReverseLanes: on("MTLBENCH_EMU_REVERSE_LANES"),
	}
	if v := strings.TrimSpace(Get("MTLBENCH_EMU_TIMEOUT")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return o, fmt.Errorf("MTLBENCH_EMU_TIMEOUT=%q: want a duration of 0 or more such as 30s or 5m (0: no limit)", v)
		}
		o.DispatchTimeout = d
		if d == 0 {
			o.DispatchTimeout = -1 // no limit (emu.Options.DispatchTimeout)
		}
	}
	return o, nil
}

// Backends are the per-backend options of backends.Open; what "auto"
// passes over, and a CUDA or Metal-emulator compile before it starts, is
// said on stderr.
func Backends() (backends.Options, error) {
	c, err := CUDA()
	warn := func(msg string) { fmt.Fprintln(os.Stderr, "mtlbench: warning:", msg) }
	notice := func(msg string) { fmt.Fprintln(os.Stderr, "mtlbench:", msg) }
	c.Notice = notice
	e, eerr := Emu()
	e.Notice = notice
	return backends.Options{CUDA: c, Emu: e, Metal: Metal(), Warn: warn}, errors.Join(err, eerr)
}
