//go:build darwin && arm64

package darwin

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// library is the MTLLibraries of one NewLibrary call: one per .metal file,
// each compiled on its own as the emulator compiles them.
type library struct {
	dev      *device
	units    []unit
	libs     []uintptr      // MTLLibrary per unit
	kernels  map[string]int // function name to the index of its library
	names    []string
	warnings string

	mu    sync.Mutex
	decls map[string][]fcDecl // function constants per kernel
	pipes map[string]*pipeline
}

var _ mtl.Library = (*library)(nil)

// NewLibrary compiles each .metal file of files with newLibraryWithSource:
// options:error:, its quoted includes inlined (see expandIncludes).
// MTLCompileOptions carries the language version (always set: 3.1 unless
// opts says otherwise), the preprocessor macros and fastMathEnabled (on
// unless opts.NoFastMath).
// Compile errors are *CompileError with file:line:col positions.
func (d *device) NewLibrary(files map[string]string, opts mtl.CompileOptions) (mtl.Library, error) {
	lang, err := languageVersion(opts.LanguageVersion)
	if err != nil {
		return nil, err
	}
	units, err := buildUnits(files)
	if err != nil {
		return nil, err
	}
	mnames, mvalues, err := macroValues(opts.Defines)
	if err != nil {
		return nil, err
	}
	l := &library{dev: d, units: units, kernels: map[string]int{}, decls: map[string][]fcDecl{}, pipes: map[string]*pipeline{}}
	var cerr error
	onMetalThread(func() {
		co := newObject(cls.MTLCompileOptions)
		defer release(co)
		msg(co, sel.setLanguageVersion, uintptr(lang))
		msg(co, sel.setFastMathEnabled, boolArg(!opts.NoFastMath))
		if dict := nsDictionary(mnames, mvalues); dict != 0 {
			msg(co, sel.setPreprocessorMacros, dict)
		}
		var warnings []string
		for i := range units {
			u := &units[i]
			src := nsString(u.text)
			if src == 0 {
				cerr = &CompileError{Msg: u.name + ": NSString refused the source"}
				return
			}
			var nserr uintptr
			lib := msg(d.id, sel.newLibraryWithSource, src, co, uintptr(unsafe.Pointer(&nserr)))
			release(src)
			if lib == 0 {
				cerr = &CompileError{Msg: u.mapDiagnostics(errorText(nserr))}
				return
			}
			l.libs = append(l.libs, lib)
			if nserr != 0 { // MTLLibraryErrorCompileWarning: built, with warnings
				warnings = append(warnings, u.mapDiagnostics(errorText(nserr)))
			}
			for _, fn := range stringArray(msg(lib, sel.functionNames)) {
				if j, dup := l.kernels[fn]; dup {
					cerr = &CompileError{Msg: fmt.Sprintf("%s: kernel %s is also defined in %s", u.name, fn, units[j].name)}
					return
				}
				l.kernels[fn] = i
				l.names = append(l.names, fn)
			}
		}
		l.warnings = strings.Join(warnings, "\n")
	})
	if cerr != nil {
		onMetalThread(func() {
			for _, lib := range l.libs {
				release(lib)
			}
		})
		return nil, cerr
	}
	sort.Strings(l.names)
	return l, nil
}

// FunctionNames lists the library's functions (functionNames of each
// MTLLibrary), host names of template instantiations included.
func (l *library) FunctionNames() []string { return append([]string(nil), l.names...) }

// Warnings is what the compiler warned about, positions mapped to files;
// empty when it did not.
func (l *library) Warnings() string { return l.warnings }

// Pipeline specialises kernel with fc (newFunctionWithName:constantValues:
// error:, each value set with setConstantValue:type:atIndex: in the type the
// kernel declares) and makes its pipeline state
// (newComputePipelineStateWithFunction:error:). Pipelines are cached by
// kernel and constant values.
func (l *library) Pipeline(kernel string, fc mtl.FunctionConstants) (mtl.Pipeline, error) {
	li, ok := l.kernels[kernel]
	if !ok {
		return nil, fmt.Errorf("metal: the library has no kernel %q (it has %s)", kernel, strings.Join(l.names, ", "))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if decls, known := l.decls[kernel]; known { // a cache hit needs no trip to the Metal thread
		_, key, err := encodeConstants(kernel, decls, fc)
		if err != nil {
			return nil, err
		}
		if p := l.pipes[key]; p != nil {
			return p, nil
		}
	}
	var p *pipeline
	var err error
	onMetalThread(func() { p, err = l.makePipeline(kernel, li, fc) })
	if err != nil {
		return nil, err
	}
	return p, nil
}

// makePipeline runs on the Metal thread with l.mu held.
func (l *library) makePipeline(kernel string, li int, fc mtl.FunctionConstants) (*pipeline, error) {
	lib := l.libs[li]
	name := nsString(kernel)
	defer release(name)
	fn := msg(lib, sel.newFunctionWithName, name) // unspecialised: lists its constants
	if fn == 0 {
		return nil, fmt.Errorf("metal: kernel %s missing from its compiled library", kernel)
	}
	decls, known := l.decls[kernel]
	if !known {
		decls = functionConstants(fn)
		l.decls[kernel] = decls
	}
	vals, key, err := encodeConstants(kernel, decls, fc)
	if err != nil {
		release(fn)
		return nil, err
	}
	if p := l.pipes[key]; p != nil {
		release(fn)
		return p, nil
	}
	if len(decls) > 0 {
		release(fn)
		cv := newObject(cls.MTLFunctionConstantValues)
		for _, v := range vals {
			msg(cv, sel.setConstantValue, uintptr(unsafe.Pointer(&v.Bytes[0])), uintptr(v.Type), uintptr(v.Index))
		}
		var nserr uintptr
		fn = msg(lib, sel.newFunctionWithNameConstantValues, name, cv, uintptr(unsafe.Pointer(&nserr)))
		release(cv)
		if fn == 0 {
			return nil, fmt.Errorf("metal: kernel %s: specialising with function constants: %s", kernel, l.units[li].mapPositions(errorText(nserr)))
		}
	}
	defer release(fn)
	// The reflection (autoreleased, so read inside this pool) names the
	// kernel's threadgroup arguments, the only indices a dispatch of it is
	// given threadgroup memory at.
	var nserr, refl uintptr
	ps := msg(l.dev.id, sel.newComputePipelineStateReflection, fn, pipelineBindingInfo,
		uintptr(unsafe.Pointer(&refl)), uintptr(unsafe.Pointer(&nserr)))
	if ps == 0 {
		return nil, fmt.Errorf("metal: kernel %s: making its compute pipeline: %s", kernel, l.units[li].mapPositions(errorText(nserr)))
	}
	p := &pipeline{
		name:     kernel,
		id:       ps,
		maxTotal: int(msg(ps, sel.maxTotalThreadsPerThreadgroup)),
		width:    int(msg(ps, sel.threadExecutionWidth)),
		staticTG: int(msg(ps, sel.staticThreadgroupMem)),
	}
	if bs := bindings(refl); bs != nil {
		p.tgArgs, p.reflected = threadgroupArgsOf(bs), true
	}
	l.pipes[key] = p
	return p, nil
}

// bindings reads a pipeline reflection's bindings (MTLBinding name, type
// and index); nil when there is no reflection to read.
func bindings(refl uintptr) []binding {
	if refl == 0 {
		return nil
	}
	arr := msg(refl, sel.bindings)
	if arr == 0 {
		return nil
	}
	n := int(msg(arr, sel.count))
	out := make([]binding, 0, n)
	for i := 0; i < n; i++ {
		b := msg(arr, sel.objectAtIndex, uintptr(i))
		out = append(out, binding{name: goString(msg(b, sel.name)), typ: int64(msg(b, sel.type_)), index: int(msg(b, sel.index))})
	}
	return out
}

// functionConstants reads an unspecialised function's
// functionConstantsDictionary.
func functionConstants(fn uintptr) []fcDecl {
	dict := msg(fn, sel.functionConstantsDictionary)
	if dict == 0 {
		return nil
	}
	vals := msg(dict, sel.allValues)
	n := 0
	if vals != 0 {
		n = int(msg(vals, sel.count))
	}
	var out []fcDecl
	for i := 0; i < n; i++ {
		c := msg(vals, sel.objectAtIndex, uintptr(i))
		out = append(out, fcDecl{
			Name:     goString(msg(c, sel.name)),
			Type:     uint64(msg(c, sel.type_)),
			Index:    int(msg(c, sel.index)),
			Required: msgBool(c, sel.required),
		})
	}
	return out
}
