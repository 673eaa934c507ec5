package emu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/internal/childproc"
)

//go:embed runtime/metal_stdlib runtime/emu_runtime.cpp
var runtimeFS embed.FS

// The generator's own source is part of the cache key, so a change to the
// rewrite never reuses a library compiled by an older one: every file of
// the package but those that only run a built library (runtimeOnlyFiles).
//
//go:embed lex.go rewrite.go spaceovl.go pragma.go compile.go
var generatorFS embed.FS

// stubHeaders are the MSL headers kernels include; while preprocessing they
// are empty (the shim is force-included when compiling), so the
// preprocessed text holds the kernel's own code only.
var stubHeaders = []string{"metal_stdlib", "metal_math", "metal_common", "metal_compute", "metal_atomic",
	"metal_simdgroup", "metal_simdgroup_matrix", "metal_integer", "metal_relational", "metal_geometric",
	"metal_types", "metal_numeric", "metal_pack", "metal_matrix", "metal_limits", "metal_type_traits",
	"metal_utility", "metal_array", "metal_config", "metal_graphics", "metal_texture", "metal_quadgroup",
	"metal_uniform", "metal_extended_vector", "metal_functional", "metal_initializer_list", "simd/simd.h"}

// CompileError is a library that did not build; Error names the file and
// line of each problem.
type CompileError struct {
	Msg string
}

func (e *CompileError) Error() string { return e.Msg }

// Compiler is the clang that compiles MSL for the emulator.
type Compiler struct {
	Path    string
	Version string // clang's first --version line
	// Flags are those of roundingFlags this clang takes.
	Flags []string
}

// roundingFlags make clang round the result of every half and bfloat
// operation to its type, as Metal's types have it, where it would keep a
// float's precision through an expression on a CPU without half (or
// bfloat) arithmetic: half(2048) + half(1) - half(2048) is 0 in Metal, and
// was 1 (docs/msl-subset.md). A clang that knows neither (16 knows no
// bfloat arithmetic) is probed for each.
var roundingFlags = [][]string{
	{"-Xclang", "-ffloat16-excess-precision=none"},
	{"-Xclang", "-fbfloat16-excess-precision=none"},
}

var (
	compilerMu   sync.Mutex
	compilers    = map[string]compilerResult{}
	clangVersion = regexp.MustCompile(`(Apple )?clang version (\d+)\.`)
)

type compilerResult struct {
	c   *Compiler
	err error
}

// FindCompiler locates clang 16 or newer: clang when not empty, else
// clang++-19, -20, -18, -17, -16 and clang++ on $PATH. Older clangs (Debian's
// default 14) reject _Float16 on x86-64.
func FindCompiler(clang string) (*Compiler, error) {
	compilerMu.Lock()
	defer compilerMu.Unlock()
	r, ok := compilers[clang]
	if !ok {
		r.c, r.err = findCompiler(clang)
		compilers[clang] = r
	}
	return r.c, r.err
}

func findCompiler(clang string) (*Compiler, error) {
	var tried []string
	candidates := []string{"clang++-19", "clang++-20", "clang++-18", "clang++-17", "clang++-16", "clang++"}
	if clang != "" {
		candidates = []string{clang}
	}
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err != nil {
			if c == clang {
				tried = append(tried, c+" (not found)")
			}
			continue
		}
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			tried = append(tried, c+" (does not run)")
			continue
		}
		first, _, _ := strings.Cut(string(out), "\n")
		m := clangVersion.FindStringSubmatch(first)
		if m == nil {
			tried = append(tried, c+" (not clang)")
			continue
		}
		major, _ := strconv.Atoi(m[2])
		// Apple's clang 15 is LLVM 16.
		if m[1] == "" && major < 16 || m[1] != "" && major < 15 {
			tried = append(tried, fmt.Sprintf("%s (version %d)", c, major))
			continue
		}
		cc := &Compiler{Path: p, Version: strings.TrimSpace(first)}
		for _, f := range roundingFlags {
			probe := append(append([]string{"-fsyntax-only", "-x", "c++"}, f...), os.DevNull)
			if exec.Command(p, probe...).Run() == nil {
				cc.Flags = append(cc.Flags, f...)
			}
		}
		return cc, nil
	}
	msg := "msl-emu needs clang 16 or newer to compile Metal kernels for the CPU (clang 14 rejects _Float16 on x86-64)"
	if len(tried) > 0 {
		msg += "; unusable: " + strings.Join(tried, ", ")
	} else {
		msg += "; none found"
	}
	msg += ". Install it with `apt-get install clang-19`, or set MTLBENCH_CLANG to a clang++ binary"
	return nil, errors.New(msg)
}

// cpuSignature keys the cache on the host CPU, since code is compiled with
// -march=native.
func cpuSignature() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		var model, flags string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") && model == "" {
				model = l
			}
			if (strings.HasPrefix(l, "flags") || strings.HasPrefix(l, "Features")) && flags == "" {
				flags = l
			}
		}
		return runtime.GOARCH + model + flags
	}
	return runtime.GOOS + "/" + runtime.GOARCH
}

func compileFlags(rounding, extra []string) []string {
	// No warnings, but a variable-length array (sized at run time, or by a
	// function constant) is an error, as on Metal, and so is an operation
	// on vectors of two element types (int4 + uint4), which clang's lax
	// vector conversions would take as a bit cast (docs/msl-subset.md).
	// A function's stack frame over frameLimit is an error too: the stack
	// check at its entry catches a thread that runs out of stack only where
	// no one frame reaches past the stack's margin (metal_stdlib's
	// stack_check). Frame pointers let a simd operation name the calls
	// that reached it (emu_runtime.cpp's call_path).
	f := []string{"-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fno-exceptions", "-fno-rtti",
		"-fno-threadsafe-statics", "-ffp-contract=fast", "-Wno-everything", "-Werror=vla",
		"-flax-vector-conversions=none", fmt.Sprintf("-Wframe-larger-than=%d", frameLimit), "-Werror=frame-larger-than",
		"-fno-omit-frame-pointer"}
	if runtime.GOARCH == "amd64" {
		f = append(f, "-march=native") // F16C turns half conversions into single instructions
	}
	f = append(f, rounding...)
	// Extra flags for debugging the emulator itself (Options.CFlags).
	return append(f, extra...)
}

// unitFlags build the kernels (not the runtime) with clang's checks of
// integer division by zero, array indices and pointer alignment, whose
// handlers the runtime defines (emu_runtime.cpp): the CPU's division would
// trap, and a thread array indexed far past its end or a misaligned vector
// access through a thread pointer fault, ending the process. No sanitizer
// runtime is linked: the handlers are the runtime's own.
//
// No call of the kernels' is a jump (a tail call), which would leave no
// frame to name its call site to a simd operation (emu_runtime.cpp's
// call_path); the runtime's are, as its fiber switch returns sooner so.
var unitFlags = []string{"-fsanitize=integer-divide-by-zero,array-bounds,alignment",
	"-fno-sanitize-recover=integer-divide-by-zero,array-bounds,alignment", "-fno-sanitize-link-runtime",
	"-fno-optimize-sibling-calls"}

// callSites makes every function of a unit nomerge and convergent, as a
// GPU compiler takes them: a simd operation is known by the calls that
// reached it (emu_runtime.cpp's call_path), so clang may neither fold the
// calls on both sides of a branch into one nor copy a call that all lanes
// make into both sides of a branch (jump threading). clang drops
// convergent from a function that reaches no simd operation.
func callSites(cpp string) string {
	return "#pragma clang attribute push(__attribute__((nomerge, convergent)), apply_to = function)\n" + cpp +
		"\n#pragma clang attribute pop\n"
}

// frameLimit is the largest stack frame a function may have: a thread's
// stack is 256 KiB, and stack_check fails one whose stack pointer comes
// within 64 KiB (STACK_MARGIN) of its end, which leaves 8 KiB for its error
// path below the largest frame (docs/msl-subset.md, "The time limit").
const frameLimit = 56 << 10

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// DefaultCacheDir is where compiled libraries are kept when
// Options.CacheDir is empty: the user cache directory's mtlbench/msl-emu.
func DefaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "mtlbench", "msl-emu")
	}
	return filepath.Join(os.TempDir(), "mtlbench-msl-emu")
}

// notice tells Options.Notice (once a device: New wraps it) that clang is
// about to compile: the runtime and the backend's kernels took 84 s on
// 2 shared cores (docs/msl-subset.md); a cache hit says nothing.
func notice(o Options, cc *Compiler) {
	if o.Notice != nil {
		o.Notice(fmt.Sprintf("compiling the Metal kernels for the emulator with %s: a minute or two, once; later runs load them from %s",
			filepath.Base(cc.Path), o.CacheDir))
	}
}

// toolchain is a compiler with the runtime compiled for it: the shim
// header, the stub headers and emu_runtime.o under one cache folder.
type toolchain struct {
	cc    *Compiler
	dir   string
	key   string
	flags []string
}

var (
	toolchainMu sync.Mutex
	toolchains  = map[string]*toolchain{}
)

func getToolchain(o Options) (*toolchain, error) {
	cacheDir := o.CacheDir
	cc, err := FindCompiler(o.Clang)
	if err != nil {
		return nil, err
	}
	shim, _ := runtimeFS.ReadFile("runtime/metal_stdlib")
	rt, _ := runtimeFS.ReadFile("runtime/emu_runtime.cpp")
	flags := compileFlags(cc.Flags, o.CFlags)
	key := hashOf(string(shim), string(rt), cc.Path, cc.Version, strings.Join(flags, " "), cpuSignature())
	toolchainMu.Lock()
	defer toolchainMu.Unlock()
	if t := toolchains[cacheDir+key]; t != nil {
		return t, nil
	}
	t := &toolchain{cc: cc, dir: filepath.Join(cacheDir, "rt-"+key), key: key, flags: flags}
	if _, err := os.Stat(filepath.Join(t.dir, "emu_runtime.o")); err != nil {
		notice(o, cc)
		if err := t.build(shim, rt); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	_ = os.Chtimes(t.dir, now, now) // in use: keep it from pruneCache
	toolchains[cacheDir+key] = t
	return t, nil
}

func (t *toolchain) build(shim, rt []byte) error {
	if err := os.MkdirAll(filepath.Dir(t.dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(t.dir), "rt-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{"metal_stdlib": shim, "emu_runtime.cpp": rt}
	for _, s := range stubHeaders {
		files["stub/"+s] = []byte("// msl-emu: the shim is force-included when compiling.\n")
	}
	for name, b := range files {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	args := append(append([]string{}, t.flags...), "-c", "emu_runtime.cpp", "-o", "emu_runtime.o")
	if _, err := t.run(DefaultBuildTimeout, "building the runtime", tmp, args...); err != nil {
		return fmt.Errorf("msl-emu: building the runtime: %w", err)
	}
	if err := os.Rename(tmp, t.dir); err != nil {
		if _, serr := os.Stat(filepath.Join(t.dir, "emu_runtime.o")); serr != nil {
			return err // not a lost race with another builder
		}
	}
	return nil
}

// run runs clang in dir and stops it after limit (none where negative);
// what says, for that error, what it was doing.
func (t *toolchain) run(limit time.Duration, what, dir string, args ...string) ([]byte, error) {
	ctx, cancel := context.Background(), func() {}
	if limit >= 0 {
		ctx, cancel = context.WithTimeout(ctx, limit)
	}
	defer cancel()
	cmd := exec.CommandContext(ctx, t.cc.Path, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Stopped, clang takes its own children with it (internal/childproc).
	if err := childproc.Run(cmd); err != nil {
		if ctx.Err() != nil {
			// Killed, clang says nothing: name the limit it ran past.
			return nil, &CompileError{Msg: fmt.Sprintf("msl-emu: clang did not finish %s within %v "+
				"(Options.BuildTimeout; a large library on a slow machine?)", what, limit)}
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, &CompileError{Msg: cleanDiagnostics(msg, dir, t.dir)}
	}
	return stdout.Bytes(), nil
}

// cleanDiagnostics shortens clang's output: paths relative to the build
// folder, and at most 40 lines.
func cleanDiagnostics(msg, buildDir, rtDir string) string {
	msg = strings.ReplaceAll(msg, buildDir+string(filepath.Separator), "")
	// The shim poisons only the bfloat types, before MSL 3.1.
	msg = strings.ReplaceAll(msg, "attempt to use a poisoned identifier", "bfloat types need MSL 3.1 or later (LanguageVersion)")
	msg = strings.ReplaceAll(msg, " [-Werror,-Wframe-larger-than]", fmt.Sprintf(": msl-emu runs each thread on a 256 KiB stack, "+
		"of which one function's locals (its arrays, with those of the functions inlined into it) may take %d KiB", frameLimit>>10))
	msg = strings.ReplaceAll(msg, rtDir+string(filepath.Separator), "<msl-emu>/")
	lines := strings.Split(msg, "\n")
	if len(lines) > 40 {
		lines = append(lines[:40], fmt.Sprintf("... (%d more lines)", len(lines)-40))
	}
	return strings.Join(lines, "\n")
}

// libInfo is what a compiled library holds, stored beside its .so.
type libInfo struct {
	Kernels []kernelInfo `json:"kernels"`
	FCs     []fcInfo     `json:"function_constants"`
}

// buildLibrary compiles files into a shared object, or finds it in the
// cache, keyed by the sources, options, shim, generator and compiler.
func buildLibrary(o Options, files map[string]string, opts mtl.CompileOptions) (string, *libInfo, error) {
	cacheDir := o.CacheDir
	t, err := getToolchain(o)
	if err != nil {
		return "", nil, err
	}
	lang := opts.LanguageVersion
	if lang == "" {
		lang = "3.1"
	}
	mv, err := metalVersion(lang)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for n := range files {
		if n == "" || path.IsAbs(n) || strings.Contains(n, "..") || strings.ContainsAny(n, "\\\"\n") {
			return "", nil, fmt.Errorf("msl-emu: bad source file name %q", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	defs := []string{"-D__METAL_VERSION__=" + strconv.Itoa(mv), "-D__METAL_EMU__=1", "-D__METAL_MACOS__=1"}
	if mv >= 310 {
		defs = append(defs, "-D__HAVE_BFLOAT__=1")
	}
	if err := mtl.CheckDefines(opts.Defines); err != nil {
		return "", nil, err
	}
	var dnames []string
	for k := range opts.Defines {
		dnames = append(dnames, k)
	}
	sort.Strings(dnames)
	for _, k := range dnames {
		v := opts.Defines[k]
		if v == "" {
			v = "1"
		}
		defs = append(defs, "-D"+k+"="+v)
	}
	var gen []string
	for _, f := range embeddedNames(generatorFS) {
		b, _ := generatorFS.ReadFile(f)
		gen = append(gen, string(b))
	}
	// Fast math on is FMA contraction, as the toolchain's flags have it; off
	// forbids it, and the cache key tells the two builds apart.
	var mathFlags []string
	if opts.NoFastMath {
		mathFlags = []string{"-ffp-contract=off"}
	}
	keyParts := []string{"msl-emu library", t.key, strings.Join(gen, ""), strings.Join(defs, " "), strings.Join(mathFlags, " "),
		strings.Join(unitFlags, " ")}
	for _, n := range names {
		keyParts = append(keyParts, n, files[n])
	}
	key := hashOf(keyParts...)
	so := filepath.Join(cacheDir, key+".so")
	meta := filepath.Join(cacheDir, key+".json")
	if b, err := os.ReadFile(meta); err == nil {
		if _, err := os.Stat(so); err == nil {
			var info libInfo
			if json.Unmarshal(b, &info) == nil {
				now := time.Now()
				_ = os.Chtimes(meta, now, now) // in use: keep it from pruneCache
				return so, &info, nil
			}
		}
	}
	pruneCache(cacheDir, t.dir)
	notice(o, t.cc)

	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(tmp)
	for _, n := range names {
		p := filepath.Join(tmp, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(p, []byte(hideLoopHints(files[n])), 0o644); err != nil {
			return "", nil, err
		}
	}
	limit := o.BuildTimeout
	if limit == 0 {
		limit = DefaultBuildTimeout
	}
	info := &libInfo{}
	var units, sources []string
	for _, n := range names {
		if !strings.HasSuffix(n, ".metal") {
			continue // headers reach the compiler through #include
		}
		// The sources' root is a quoted include path, as MLX's build passes
		// `-I` its source root: a header includes another by its path from
		// the root (`#include "mlx/backend/metal/kernels/bf16.h"` in
		// kernels/utils.h), relative to the working directory so that
		// diagnostics name it so (docs/msl-subset.md).
		args := append([]string{"-E", "-x", "c++", "-std=c++17", "-nostdinc", "-nostdinc++",
			"-isystem", filepath.Join(t.dir, "stub"), "-iquote", "."}, defs...)
		pre, err := t.run(limit, "preprocessing "+n, tmp, append(args, n)...)
		if err != nil {
			return "", nil, err
		}
		text, err := restoreLoopHints(string(pre))
		if err != nil {
			return "", nil, &CompileError{Msg: err.Error()}
		}
		cpp, kernels, fcs, err := rewriteUnit(text, n)
		if err != nil {
			return "", nil, &CompileError{Msg: err.Error()}
		}
		for _, k := range kernels {
			for _, o := range info.Kernels {
				if o.Name == k.Name {
					return "", nil, &CompileError{Msg: fmt.Sprintf("%s:%d: kernel %s is also defined at %s:%d", k.File, k.Line, k.Name, o.File, o.Line)}
				}
			}
		}
		info.Kernels = append(info.Kernels, kernels...)
		for _, fc := range fcs {
			info.FCs = append(info.FCs, *fc)
		}
		unit := fmt.Sprintf("unit%d.cpp", len(units))
		if err := os.WriteFile(filepath.Join(tmp, unit), []byte(callSites(cpp)), 0o644); err != nil {
			return "", nil, err
		}
		units = append(units, unit)
		sources = append(sources, n)
	}
	if len(units) == 0 {
		return "", nil, &CompileError{Msg: "msl-emu: the library has no .metal file"}
	}
	args := append(append(append([]string{}, t.flags...), mathFlags...), unitFlags...)
	args = append(args, defs...) // the shim's version checks; the units are preprocessed already
	args = append(args, "-I", t.dir, "-include", "metal_stdlib", "-shared")
	args = append(args, units...)
	args = append(args, filepath.Join(t.dir, "emu_runtime.o"), "-lm", "-o", "lib.so")
	if _, err := t.run(limit, "compiling "+strings.Join(sources, ", "), tmp, args...); err != nil {
		return "", nil, err
	}
	b, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(tmp, "lib.json"), b, 0o644); err != nil {
		return "", nil, err
	}
	// The .so first, then its metadata: a reader that finds the .json finds
	// the .so too.
	if err := os.Rename(filepath.Join(tmp, "lib.so"), so); err != nil {
		return "", nil, err
	}
	if err := os.Rename(filepath.Join(tmp, "lib.json"), meta); err != nil {
		return "", nil, err
	}
	return so, info, nil
}

// pruneCache removes libraries unused for 30 days, other runtimes unused as
// long, and builds abandoned a day ago; the cache otherwise grows with every
// edit of a kernel.
func pruneCache(dir, keepRT string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := now.Sub(info.ModTime())
		p := filepath.Join(dir, e.Name())
		switch {
		case strings.HasSuffix(e.Name(), ".json") && age > 30*24*time.Hour:
			os.Remove(p)
			os.Remove(strings.TrimSuffix(p, ".json") + ".so")
		case strings.HasPrefix(e.Name(), "rt-build-") || strings.HasPrefix(e.Name(), "build-"):
			if age > 24*time.Hour {
				os.RemoveAll(p)
			}
		case strings.HasPrefix(e.Name(), "rt-") && p != keepRT && age > 30*24*time.Hour:
			os.RemoveAll(p)
		}
	}
}

func embeddedNames(fs embed.FS) []string {
	ents, _ := fs.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// metalVersion turns "3.1" into __METAL_VERSION__'s 310.
func metalVersion(v string) (int, error) {
	n, ok := mtl.LanguageVersionNumber(v)
	if !ok {
		return 0, fmt.Errorf("msl-emu: bad MSL language version %q (want e.g. \"3.1\")", v)
	}
	return n, nil
}
