package emu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// rewrite turns one preprocessed MSL translation unit into C++ that the shim
// header (runtime/metal_stdlib) compiles:
//
//   - `device T*`, `constant T*`, `threadgroup T*` become checked pointers
//     (metal::__emu::ptr<T, AS>); other address-space keywords go away;
//   - `threadgroup T x[N];` in a function becomes a reference to storage the
//     runtime gives each threadgroup;
//   - function constants become statics the runtime sets before a dispatch,
//     and program-scope constants computed from them are recomputed then;
//   - vector constructors (float4(a, b)) and casts become value
//     conversions, since clang's functional casts on vectors are bit casts;
//   - after each kernel (or [[host_name]] instantiation) a trampoline maps
//     the [[buffer(n)]], [[threadgroup(n)]] and thread-position arguments.
//
// Edits keep the line count, so clang's diagnostics point into the .metal
// file through the preprocessor's line markers.

type attrItem struct {
	name string
	args []token
}

type attrSpan struct {
	start, end int // token indices of the first '[' and the last ']'
	items      []attrItem
}

func (a *attrSpan) find(name string) *attrItem {
	if a == nil {
		return nil
	}
	for i := range a.items {
		if a.items[i].name == name {
			return &a.items[i]
		}
	}
	return nil
}

// paramInfo is how the host binds one kernel argument.
type paramInfo struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // "buffer", "threadgroup" or "position"
	Index int    `json:"index"`
	Pos   string `json:"pos,omitempty"`
	FC    string `json:"fc,omitempty"` // function constant that enables the argument
	at    token  // the name, for the trampoline's messages
	space string // its address space's keyword, if any
}

type kernelInfo struct {
	Name       string      `json:"name"`
	File       string      `json:"file"`
	Line       int         `json:"line"`
	Params     []paramInfo `json:"params"`
	MaxThreads int         `json:"max_threads,omitempty"`
	Uses       []string    `json:"uses,omitempty"` // function constants named in the body
}

type fcInfo struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Index   int    `json:"index"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Guarded bool   `json:"guarded"` // tested with is_function_constant_defined
	cname   string // qualified C++ name
	defVar  string // the "defined" flag
}

type edit struct {
	start, end int
	text       string
}

type kdef struct {
	params     []paramInfo
	uses       []string
	maxThreads int
}

type rewriter struct {
	src    string
	toks   []token
	attrAt map[int]*attrSpan // by index of the first '['
	attrTo map[int]*attrSpan // by index of the last ']'
	edits  []edit
	err    error

	enums     map[string]int64 // enumerators' values, for attributes' indexes (enumConsts)
	ns        []string         // the scope each open brace opened (see atNamespaceScope)
	nsAt      []int            // the token index of each open brace
	members   map[string]*memberDef
	defaulted map[string]bool        // member declarations defaulted or deleted, spaces dropped (defaultedDup)
	castClose int                    // the ')' of the last C-style cast vcast rewrote
	spaceDefs map[string][]*spaceDef // definitions taking references, by their declaration with the spaces dropped (spaceOverloads)
	spaceKeys []string
	parens    int
	pendingNS *string

	kernels   []kernelInfo
	entries   []string // KernelEntry initialisers
	templates map[string]*kdef
	fcs       []*fcInfo
	derived   map[string]bool
	derInits  []string // qualified derived-constant initialisers, in order
	vecNames  map[string]bool
	kbodies   [][2]int        // the kernels' bodies, from '{' to '}'
	bodies    [][2]int        // every outermost function body or brace initialiser, '{' to '}' (cmpValues)
	threadPtr map[string]bool // the thread pointers the function being walked declares (threadSpace)
	kkeys     []string        // each body's kernel as its body names it (f, f<T, N>); "" if it cannot
	knames    map[string]bool
	tmplNames map[string]bool     // the names the unit declares templates of (templateNames)
	aliases   map[string]bool     // the names the unit or the library declares type aliases of (aliasNames)
	declared  map[string]bool     // the names the unit declares functions or variables of (declaredNames)
	tgArrays  []tgArray           // the threadgroup arrays functions declare (tgArgs)
	inits     [][2]int            // program-scope initialisers, '=' to ';' (cmpValues)
	spaced    []spacedName        // the references and threadgroup variables declared in an address space (addrArgs)
	swizzles  map[string]bool     // the swizzle names constSwizzle read, which swizzleReaders defines readers of
	tparams   map[string][][2]int // each template type parameter's name: the tokens of the declarations it is declared for (typeParams)
	nTramp    int
	nSite     int
	nLoops    int            // the loop scopes opened (openLoop)
	frames    map[int]string // the function bodies outside constexpr functions, by their '{': the function's name, or "" (openFrame)
	doWhile   map[int]string // each do's while, by token index: the do's scope, or "" for none (doLoop)
}

var posAttrs = map[string]string{
	"thread_position_in_grid":             "POS_TPIG",
	"thread_position_in_threadgroup":      "POS_TPITG",
	"threadgroup_position_in_grid":        "POS_TGPIG",
	"threads_per_threadgroup":             "POS_TPTG",
	"threadgroups_per_grid":               "POS_TGPG",
	"threads_per_grid":                    "POS_TPG",
	"grid_size":                           "POS_TPG",
	"thread_index_in_simdgroup":           "POS_LANE",
	"simdgroup_index_in_threadgroup":      "POS_SG",
	"thread_index_in_threadgroup":         "POS_TIITG",
	"simdgroups_per_threadgroup":          "POS_NSG",
	"threads_per_simdgroup":               "POS_TPSG",
	"thread_execution_width":              "POS_TPSG",
	"thread_index_in_quadgroup":           "POS_QLANE",
	"quadgroup_index_in_threadgroup":      "POS_QG",
	"quadgroups_per_threadgroup":          "POS_NQG",
	"dispatch_threads_per_threadgroup":    "POS_DTPTG",
	"dispatch_simdgroups_per_threadgroup": "POS_DSGPTG",
	"grid_origin":                         "POS_ORIGIN",
}

func baseVecNames() map[string]bool {
	m := map[string]bool{}
	for _, t := range []string{"float", "half", "bfloat", "int", "uint", "short", "ushort", "char", "uchar", "long", "ulong", "bool"} {
		for _, n := range []string{"2", "3", "4"} {
			m[t+n] = true
		}
	}
	return m
}

// rewriteUnit rewrites one translation unit; main is the .metal file name.
func rewriteUnit(src, main string) (string, []kernelInfo, []*fcInfo, error) {
	toks, err := lex(src)
	if err != nil {
		return "", nil, nil, err
	}
	r := &rewriter{src: src, toks: toks, attrAt: map[int]*attrSpan{}, attrTo: map[int]*attrSpan{},
		templates: map[string]*kdef{}, derived: map[string]bool{}, vecNames: baseVecNames()}
	r.findAttrs()
	r.enums = enumConsts(toks)
	r.tmplNames = templateNames(toks)
	r.aliases = aliasNames(toks)
	r.declared = declaredNames(toks)
	r.typeParams()
	if r.err == nil {
		r.walk()
	}
	if r.err == nil {
		r.cmpValues()
		r.divOps()
		r.tgArgs()
		r.addrArgs()
		r.constSwizzles()
		r.spaceOverloads()
		r.callGuards() // last: it sees every other rewrite's edits
	}
	if r.err != nil {
		return "", nil, nil, r.err
	}
	out, err := r.apply()
	if err != nil {
		return "", nil, nil, err
	}
	var b strings.Builder
	b.WriteString("// Generated by msl-emu from " + main + ".\n")
	b.WriteString(r.swizzleReaders())
	for _, fc := range r.fcs {
		fmt.Fprintf(&b, "static bool %s;\n", fc.defVar)
	}
	b.WriteString(out)
	fmt.Fprintf(&b, "\n#line 1 %q\n", main+" (msl-emu trampolines)")
	b.WriteString("static void __emu_fcset(const ::metal::__emu::FCIn *in, int64_t n) {\n")
	for _, fc := range r.fcs {
		fmt.Fprintf(&b, "  if (!(%s = ::metal::__emu::fc_get(in, n, %d, &%s))) %s = {};\n", fc.defVar, fc.Index, fc.cname, fc.cname)
	}
	for _, in := range r.derInits {
		fmt.Fprintf(&b, "  %s();\n", in)
	}
	b.WriteString("}\n")
	if len(r.entries) > 0 {
		b.WriteString("static const ::metal::__emu::KernelEntry __emu_kernels[] = {\n")
		for _, e := range r.entries {
			b.WriteString("  " + e + ",\n")
		}
		b.WriteString("};\n")
		fmt.Fprintf(&b, "static ::metal::__emu::Registrar __emu_registrar(__emu_kernels, %d, &__emu_fcset);\n", len(r.entries))
	} else {
		b.WriteString("static ::metal::__emu::Registrar __emu_registrar(nullptr, 0, &__emu_fcset);\n")
	}
	return b.String(), r.kernels, r.fcs, nil
}

func (r *rewriter) fail(t token, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s:%d: %s", t.file, t.line, fmt.Sprintf(format, args...))
	}
}

func (r *rewriter) tok(i int) token {
	if i < 0 || i >= len(r.toks) {
		return token{}
	}
	return r.toks[i]
}

func (r *rewriter) text(i int) string { return r.tok(i).text }

func (r *rewriter) replace(i, j int, s string) { // tokens i..j inclusive
	r.edits = append(r.edits, edit{r.toks[i].pos, r.toks[j].end, s})
}

func (r *rewriter) insertAfter(i int, s string) {
	r.edits = append(r.edits, edit{r.toks[i].end, r.toks[i].end, s})
}

// match returns the index of the bracket closing the one at i, or -1. For
// '<' it gives up at tokens that cannot be in template arguments.
func (r *rewriter) match(i int) int {
	open := r.toks[i].text
	close := map[string]string{"(": ")", "[": "]", "{": "}", "<": ">"}[open]
	depth := 0
	for j := i; j < len(r.toks); j++ {
		t := r.toks[j].text
		if open == "<" {
			switch t {
			case "(", "[":
				if j = r.match(j); j < 0 {
					return -1
				}
				continue
			case ";", "{", "}", "&&", "||":
				return -1
			}
		}
		if t == open {
			depth++
		} else if t == close {
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// matchBack returns the index of the bracket opening the one at i.
func (r *rewriter) matchBack(i int) int {
	close := r.toks[i].text
	open := map[string]string{")": "(", "]": "[", "}": "{", ">": "<"}[close]
	depth := 0
	for j := i; j >= 0; j-- {
		switch r.toks[j].text {
		case close:
			depth++
		case open:
			depth--
			if depth == 0 {
				return j
			}
		case ";", "{", "}":
			if close == ">" {
				return -1
			}
		}
	}
	return -1
}

// enclosing returns the index of the innermost bracket, (, [ or {, left
// open before token i, or -1.
func (r *rewriter) enclosing(i int) int {
	open := i - 1
	for depth := 0; open >= 0; open-- {
		if t := r.text(open); t == ")" || t == "]" || t == "}" {
			depth++
		} else if t == "(" || t == "[" || t == "{" {
			if depth == 0 {
				break
			}
			depth--
		}
	}
	return open
}

func (r *rewriter) findAttrs() {
	for i := 0; i+1 < len(r.toks); i++ {
		if r.toks[i].text != "[" || r.toks[i+1].text != "[" {
			continue
		}
		if n := r.tok(i + 2); n.kind != tIdent && n.text != "]" {
			continue
		}
		end := -1
		depth := 0
		for j := i; j < len(r.toks); j++ {
			switch r.toks[j].text {
			case "[", "(":
				depth++
			case "]", ")":
				depth--
			}
			if depth == 0 {
				end = j
				break
			}
		}
		if end < 0 || r.toks[end-1].text != "]" {
			r.fail(r.toks[i], "unterminated attribute")
			return
		}
		span := &attrSpan{start: i, end: end}
		// Items: name[(args)] separated by commas, between [[ and ]].
		for j := i + 2; j < end-1; {
			if r.toks[j].text == "," {
				j++
				continue
			}
			item := attrItem{name: r.toks[j].text}
			j++
			for j < end-1 && r.toks[j].text == "::" { // metal::foo
				item.name = r.toks[j+1].text
				j += 2
			}
			if j < end-1 && r.toks[j].text == "(" {
				k := r.match(j)
				if k < 0 || k >= end {
					r.fail(r.toks[j], "bad attribute arguments")
					return
				}
				item.args = r.toks[j+1 : k]
				j = k + 1
			}
			span.items = append(span.items, item)
		}
		r.attrAt[i] = span
		r.attrTo[end] = span
		i = end
	}
}

// attrsBefore collects the attribute spans directly before token i and
// returns them with the index of the first token before them.
func (r *rewriter) attrsBefore(i int) ([]*attrSpan, int) {
	var spans []*attrSpan
	j := i - 1
	for j >= 0 {
		a := r.attrTo[j]
		if a == nil {
			break
		}
		spans = append(spans, a)
		j = a.start - 1
	}
	return spans, j
}

// The scopes in r.ns are namespace names ("" when anonymous), "\x00" for a
// function body or block and "\x01" for a class body.

func (r *rewriter) atNamespaceScope() bool {
	if r.parens != 0 {
		return false
	}
	for _, n := range r.ns {
		if n == "\x00" || n == "\x01" {
			return false
		}
	}
	return true
}

// inClass reports whether the innermost scope is a class body.
func (r *rewriter) inClass() bool {
	return len(r.ns) > 0 && r.ns[len(r.ns)-1] == "\x01"
}

// inFunction reports whether the innermost scope is a function body.
func (r *rewriter) inFunction() bool {
	return len(r.ns) > 0 && r.ns[len(r.ns)-1] == "\x00"
}

// classHead reports whether the '{' at i opens a struct, class, union or
// enum body.
func (r *rewriter) classHead(i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch r.toks[j].text {
		case ";", "{", "}", "=":
			return false
		case ")": // struct alignas(16) S {, but also f(...) {
			o := r.matchBack(j)
			if o <= 0 || r.tok(o-1).text != "alignas" && r.tok(o-1).text != "decltype" {
				return false
			}
			j = o
		case "struct", "class", "union", "enum":
			return true
		}
	}
	return false
}

func (r *rewriter) qualify(name string) string {
	q := "::"
	for _, n := range r.ns {
		if n != "" && n != "\x00" && n != "\x01" {
			q += n + "::"
		}
	}
	return q + name
}

func (r *rewriter) walk() {
	for i := 0; i < len(r.toks) && r.err == nil; i++ {
		if a := r.attrAt[i]; a != nil {
			r.replace(a.start, a.end, "")
			if a.find("kernel") != nil {
				r.kernel(a.end+1, a.start)
			}
			i = a.end
			continue
		}
		t := r.toks[i]
		switch t.text {
		case "{":
			fnParams := -2 // the body's parameter list (functionBody), -2 if it opens none
			if r.inFunction() {
				r.bracedArg(i)
			}
			name := "\x00"
			if r.pendingNS != nil {
				name = *r.pendingNS
				r.pendingNS = nil
			} else if r.classHead(i) {
				name = "\x01"
			} else {
				dup := false
				if r.inClass() && r.parens == 0 {
					dup = r.memberBody(i)
				}
				if r.parens == 0 && !r.inFunction() {
					if body, params := r.functionBody(i); body {
						r.insertAfter(i, stackCheck)
						r.plainPtrParams(params)
						if !dup {
							r.noteSpaceDef(i, params)
						}
						fnParams = params
					}
				}
			}
			r.ns = append(r.ns, name)
			r.nsAt = append(r.nsAt, i)
			if fnParams != -2 && !r.inConstexpr() {
				r.openFrame(i, fnParams)
			}
			continue
		case "}":
			if len(r.ns) > 0 {
				if n := len(r.ns); r.ns[n-1] == "\x00" && (n == 1 || r.ns[n-2] != "\x00") {
					r.bodies = append(r.bodies, [2]int{r.nsAt[n-1], i})
					r.threadPtr = nil
				}
				r.ns = r.ns[:len(r.ns)-1]
				r.nsAt = r.nsAt[:len(r.nsAt)-1]
			}
			continue
		case "(":
			if end := r.vcast(i); end > 0 {
				i = end
				continue
			}
			r.parens++
			continue
		case "[":
			if r.lambdaAt(i) {
				r.fail(t, "lambda expressions are not supported by Metal")
			}
			r.parens++
			continue
		case ")", "]":
			r.parens--
			continue
		case ";":
			r.pendingNS = nil
			if r.atNamespaceScope() {
				r.programScopeVar(i)
				r.programInit(i)
			}
			continue
		}
		switch t.kind {
		case tNumber:
			r.floatLiteral(i)
			continue
		case tIdent:
		default:
			if assignOps[t.text] && r.inFunction() {
				r.markStore(i)
			}
			// An address assigned to a thread pointer after its declaration
			// gets the declaration's check (threadSpace).
			if t.text == "=" && r.parens == 0 && r.threadPtr[r.text(i-1)] && stmtStart[r.text(i-2)] && r.inFunction() {
				r.threadInit(i+1, false, true)
			}
			// A pointer declared without an address space is a thread
			// pointer, as if declared with `thread` (threadSpace).
			if t.text == "=" && r.parens == 0 && r.inFunction() && r.plainPtrDecl(i) {
				if r.threadPtr == nil {
					r.threadPtr = map[string]bool{}
				}
				r.threadPtr[r.text(i-1)] = true
				r.threadInit(i+1, false, false)
			}
			// So is a reference (`float& r = x[i];`).
			if t.text == "=" && r.parens == 0 && r.inFunction() && r.plainRefDecl(i) {
				r.threadInit(i+1, true, false)
			}
			continue
		}
		if r.knames[t.text] && r.inFunction() {
			r.kernelCall(i)
		}
		switch t.text {
		case "namespace":
			if r.text(i-1) != "using" {
				name := ""
				for j := i + 1; r.tok(j).kind == tIdent || r.text(j) == "::"; j++ {
					name += r.text(j)
				}
				r.pendingNS = &name
			}
		case "kernel":
			r.replace(i, i, "")
			r.kernel(i+1, i)
		case "vertex", "fragment", "threadgroup_imageblock", "imageblock":
			r.fail(t, "%s is not supported by msl-emu (compute kernels only)", t.text)
		case "goto", "new", "thread_local", "virtual", "double", "noexcept", "dynamic_cast", "typeid":
			// MSL leaves these out of C++14 (docs/msl-subset.md): Apple's
			// compiler refuses them, so a kernel using one must not build here.
			r.fail(t, "%s is not supported by Metal", t.text)
		case "delete":
			if r.text(i-1) != "=" { // the operator; `= delete` declares a deleted function
				r.fail(t, "delete is not supported by Metal")
			}
		case "static":
			if r.inFunction() && r.parens == 0 {
				r.staticLocal(i)
			}
		case "long":
			if r.text(i+1) == "long" {
				r.fail(t, "long long is not supported by Metal (long is 64 bits)")
			}
		case "texture1d", "texture2d", "texture3d", "texture2d_array", "texturecube", "depth2d", "texture_buffer":
			if r.text(i+1) == "<" {
				r.fail(t, "textures are not supported by msl-emu")
			}
		case "while", "for":
			if r.inFunction() {
				r.loopTick(i)
			}
		case "do":
			if r.inFunction() {
				r.doLoop(i)
			}
		case "auto":
			if r.inFunction() && r.parens == 0 {
				r.autoSwizzle(i)
			}
		case "device", "constant", "threadgroup", "thread":
			i = r.addrSpace(i)
		case "is_function_constant_defined":
			i = r.fcDefined(i)
		case "reinterpret_cast":
			r.replace(i, i, "::metal::__emu::reinterpret_cast_")
		case "static_cast":
			i = r.vecStaticCast(i)
		case "typedef", "using":
			r.alias(i)
		case "typename", "decltype":
			if end := r.typeName(i); end > 0 && r.text(end+1) == "(" {
				r.typeCall(i, end)
			}
		case "vec":
			if r.text(i+1) == "<" {
				if k := r.match(i + 1); k > 0 && r.text(k+1) == "(" {
					r.vecCtor(i, k)
					i = k
				} else if k > 0 && r.boolVec(i) && (r.text(i-1) != "::" || r.qualifiedStart(i) < i) && r.text(i-1) != "." && r.text(i-1) != "->" {
					r.replace(r.qualifiedStart(i), k, r.vecType(i, k))
					i = k
				}
			}
		default:
			if r.vecNames[t.text] && r.text(i+1) == "(" {
				r.vecCtor(i, i)
			} else if r.text(i+1) == "(" && (r.tparam(i) || halfTypes[t.text]) {
				r.typeCall(i, i)
			} else if end := r.typeName(i); end > 0 && r.text(end+1) == "(" {
				r.typeCall(i, end) // S::f4(v)
			} else if end := r.aliasType(i); end > 0 && r.text(end+1) == "(" {
				r.typeCall(r.qualifiedStart(i), end) // F4(v), V4<float>(v)
			} else if (r.vecNames[t.text] || r.tparam(i) || r.aliasType(i) == i) && r.tok(i+1).kind == tIdent && r.text(i+2) == "(" && r.inFunction() && r.parens == 0 {
				r.vecDirectInit(i)
			}
		}
	}
}

// bracedArg passes the braced list at i that is a whole argument of a call
// (`f({a, b, c}, n)`) as the shim's braced(a, b, c), which converts to the
// parameter's type as the list initialises it: clang list-initialises no
// vector in an argument, where Metal does (MLX's elem_to_loc_2_nd<IdxT>({N
// * index.x, index.y, index.z}, ...); docs/msl-subset.md). An empty list, a
// nested one and a designated initialiser stay as they are.
func (r *rewriter) bracedArg(i int) {
	if p := r.text(i - 1); p != "(" && p != "," {
		return
	}
	end := r.match(i)
	if end <= i+1 || r.text(end+1) != "," && r.text(end+1) != ")" || r.text(i+1) == "." {
		return
	}
	for k := i + 1; k < end; k++ {
		if t := r.text(k); t == "{" || t == "=" && r.enclosing(k) == i {
			return
		}
	}
	open := r.enclosing(i)
	if r.text(open) != "(" {
		return
	}
	switch callee := r.tok(open - 1); {
	case callee.text == ">":
	case callee.kind == tIdent && !notCalls[callee.text] && !stmtWords[callee.text]:
	default:
		return
	}
	r.replace(i, i, "::metal::__emu::braced(")
	r.replace(end, end, ")")
}

// stmtWords are the keywords a parenthesised condition or operand follows.
var stmtWords = map[string]bool{"if": true, "while": true, "for": true, "switch": true, "return": true, "case": true}

// loopTick puts a tick in the condition of the while or for at i (`while
// (c)` becoming `while (tick, c)`), so a thread of a failed or timed-out
// dispatch stops at its loop's back-edge instead of looping forever
// (docs/msl-subset.md, "The time limit"). A condition that declares a
// variable (`while (int n = f())`) cannot take the call: such a for takes
// it in its increment, which runs before every round but the first, and
// such a while becomes that for (`for (; int n = f(); tick)`). A
// range-based for, which has no condition, takes it at the start of its
// body. The tick is the loop's scope's (openLoop), which also counts the
// rounds, or in a constexpr function, which may hold no scope, the shim's
// loop_tick; a do's while ticks its do's scope (doLoop).
func (r *rewriter) loopTick(i int) {
	open := i + 1
	if r.text(open) != "(" {
		return
	}
	end := r.match(open)
	if end < 0 {
		return
	}
	tick := "::metal::__emu::loop_tick()"
	if name, ok := r.doWhile[i]; ok {
		if name != "" {
			tick = name + ".tick()"
		}
	} else if r.text(i) == "for" && r.rangeFor(open, end) {
		body := r.stmtEnd(end + 1)
		if body < 0 {
			return
		}
		if name := r.openLoop(i); name != "" {
			r.edits = append(r.edits, edit{r.toks[end+1].pos, r.toks[end+1].pos, "{ " + name + ".tick(); "})
			r.insertAfter(body, " }")
		}
		return
	} else if name := r.openLoop(i); name != "" {
		tick = name + ".tick()"
	}
	if r.text(i) == "while" {
		if r.declaresCondition(open+1, end) {
			r.replace(i, i, "for")
			r.insertAfter(open, " ;")
			r.replace(end, end, "; "+tick+")") // after what other rewrites insert before it
			return
		}
		r.insertAfter(open, tick+", ")
		return
	}
	semi := -1 // the ';' that ends the init-statement
	for j := open + 1; j < end; j++ {
		switch r.text(j) {
		case "(", "[", "{":
			if j = r.match(j); j < 0 {
				return
			}
		case ";":
			if semi >= 0 {
				// The condition's end: the increment follows.
				if r.text(j+1) == ")" {
					r.insertAfter(j, " "+tick)
				} else {
					r.insertAfter(j, " "+tick+",")
				}
				return
			}
			semi = j
			if r.text(j+1) == ";" {
				r.insertAfter(j, " ("+tick+", true)")
				return
			} else if !r.declaresCondition(j+1, end) {
				r.insertAfter(j, " "+tick+",")
				return
			}
		}
	}
}

// openLoop opens a scope around the loop that starts at i (a for, while or
// do), a metal::__emu::loop_scope that the loop's tick counts rounds in and
// leaving the loop closes (emu_runtime.cpp's block_simd keys a simd
// operation by the rounds of the loops around it): the loop becomes
// `switch (loop_scope s(n); 0) default: loop`, a statement still, where an
// else cannot bind. It returns the scope's name, or "" in a constexpr
// function, where C++17 allows no variable with a destructor: those loops
// take loop_tick alone. A loop hint (#pragma unroll) before the loop stays
// just before it.
func (r *rewriter) openLoop(i int) string {
	if r.inConstexpr() {
		return ""
	}
	name := fmt.Sprintf("__emu_loop%d", r.nLoops)
	at := r.toks[i].pos
	if i > 0 && strings.Contains(r.src[r.toks[i-1].end:at], "#") {
		at = r.toks[i-1].end
	}
	r.edits = append(r.edits, edit{at, at, fmt.Sprintf("switch (::metal::__emu::loop_scope %s(%d); 0) default: ", name, r.nLoops)})
	r.nLoops++
	return name
}

// openFrame notes the function whose body opens at open and whose
// parameter list opens at params (-1 where that is not at hand), outside a
// constexpr function: callGuards opens its frame scope there, the shim's
// frame_scope, which takes its place in the caller from the call's call_at
// by the function's tag, so that emu_runtime.cpp's waits puts lanes in a
// call and lanes at the caller's operations in program order
// (docs/msl-subset.md, "Synchronisation and SIMD groups"). A function the
// tag does not name (a constructor with member initialisers, an operator,
// a destructor) takes tag 0, which no call names.
func (r *rewriter) openFrame(open, params int) {
	name := ""
	if params > 0 {
		k := params - 1
		if r.text(k) == ">" {
			if o := r.matchBack(k); o > 0 {
				k = o - 1
			}
		}
		if t := r.tok(k); t.kind == tIdent && r.text(k-1) != "~" && r.text(k-1) != "operator" && !notCalls[t.text] {
			name = t.text
		}
	}
	if r.frames == nil {
		r.frames = map[int]string{}
	}
	r.frames[open] = name
}

// callTag is the tag of the functions named name: an FNV-1a hash, never 0.
func callTag(name string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return h | 1
}

// reachesSimd reports, by its '{', each body of a function that openFrame
// noted that may hold a thread at a simd operation, or in a loop: it names a simd operation (simd_, quad_ or
// simdgroup_), opens a loop, or calls such a function. Only those open a
// frame, and only their calls note a place (callGuards): a thread never
// stops in another, and what a frame costs (three stores a call, and two
// for its call_at) stays out of the small functions hot loops call. A loop
// in a function with no frame would be taken for its caller's.
func (r *rewriter) reachesSimd() map[int]bool {
	names, bodies := map[string]bool{}, map[int]bool{}
	for changed := true; changed; {
		changed = false
		for _, b := range r.bodies {
			name, ok := r.frames[b[0]]
			if !ok || bodies[b[0]] {
				continue
			}
			for k := b[0] + 1; k < b[1]; k++ {
				t := r.toks[k]
				if t.kind == tIdent && (t.text == "for" || t.text == "while" || t.text == "do" || names[t.text] ||
					strings.HasPrefix(t.text, "simd_") || strings.HasPrefix(t.text, "quad_") || strings.HasPrefix(t.text, "simdgroup_")) {
					bodies[b[0]], changed = true, true
					if name != "" {
						names[name] = true
					}
					break
				}
			}
		}
	}
	return bodies
}

// callGuards opens the frame of every function that reachesSimd names, and
// notes the place of every call of one in a body that opens a frame:
// `f(x)` becomes `(::metal::__emu::call_at(tag), f(x))`, and a member's
// `(call_at(tag), a.b).f(x)`, whose call_at notes the call's line and
// column before its arguments run. A call of a member of what a call or
// cast gives (`g(x).f()`), of a template's scope (`S<T>::f(x)`), and one a
// rewrite of a larger span holds are left alone: their frames have no
// place.
func (r *rewriter) callGuards() {
	framed := r.reachesSimd()
	tags := map[string]uint32{}
	var frames []edit
	for _, b := range r.bodies {
		name := r.frames[b[0]]
		if !framed[b[0]] {
			continue
		}
		var tag uint32
		if name != "" {
			tag = callTag(name)
			tags[name] = tag
		}
		at := r.toks[b[0]].end
		frames = append(frames, edit{at, at, fmt.Sprintf(" ::metal::__emu::frame_scope __emu_frame(%du, __builtin_return_address(0));", tag)})
	}
	if len(frames) == 0 {
		return
	}
	// The positions a replacement spans past its start, or starts or ends
	// at: a guard there would hold part of the replacement, or be held by
	// it (`div_obj(p, ...)`, divOps).
	inside := make([]bool, len(r.src)+1)
	for _, e := range r.edits {
		if e.end > e.start {
			for p := e.start; p <= e.end; p++ {
				inside[p] = true
			}
		}
	}
	var opens, closes []edit
	for _, b := range r.bodies {
		if !framed[b[0]] {
			continue
		}
		for k := b[0] + 1; k < b[1]; k++ {
			t := r.toks[k]
			tag, ok := tags[t.text]
			if !ok || t.kind != tIdent {
				continue
			}
			open := k + 1
			if r.text(open) == "<" {
				if m := r.match(open); m > 0 {
					open = m + 1
				}
			}
			if r.text(open) != "(" {
				continue
			}
			end := r.match(open)
			start := k // the qualified name's first token (`ns::f`, `::f`)
			for r.text(start-1) == "::" && r.tok(start-2).kind == tIdent {
				start -= 2
			}
			if r.text(start-1) == "::" {
				start--
			}
			// The guard holds the call, or a member's object (`(call_at(t),
			// a.b).f(x)`): the object is evaluated before the arguments.
			from, to := start, end
			switch p := r.tok(start - 1); {
			case p.text == "." || p.text == "->":
				if from = r.memberObject(start - 1); from < 0 {
					continue
				}
				to = start - 2
			case p.text == "~" || p.text == "::" || p.text == "template":
				continue // a destructor's call, or one of a template's scope (`S<T>::f(x)`)
			case p.text == ">" && r.matchBack(start-1) >= 0:
				continue // a declaration (`vec<float, 4> v(x)`), or so it seems (`a < b && c > f(x)`)
			case p.kind == tIdent && !notDeclarator[p.text]:
				continue // a declaration (`S s(x)`)
			}
			if end < 0 || inside[r.toks[from].pos] || inside[r.toks[to].end] {
				continue
			}
			opens = append(opens, edit{r.toks[from].pos, r.toks[from].pos, fmt.Sprintf("(::metal::__emu::call_at(%du), ", tag)})
			closes = append(closes, edit{r.toks[to].end, r.toks[to].end, ")"})
		}
	}
	// At one position the guard's '(' goes after, and its ')' before, what
	// other rewrites insert there (apply keeps their order): the guard holds
	// the call alone.
	r.edits = append(append(append(closes, r.edits...), frames...), opens...)
}

// memberObject is the first token of the object whose member the '.' or
// '->' at dot names (`a.b[i].f(x)`, `this->f()`): names, members and
// subscripts back to it. It is -1 for an object a call or a cast gives
// (`g(x).f()`), whose guard would share its ends with the call's.
func (r *rewriter) memberObject(dot int) int {
	k := dot - 1
	for {
		switch t := r.tok(k); {
		case t.text == "]":
			if k = r.matchBack(k); k < 0 {
				return -1
			}
			k--
			continue
		case t.kind != tIdent || t.text == "template" || t.text == "operator":
			return -1
		}
		switch r.text(k - 1) {
		case ".", "->", "::":
			k -= 2
			continue
		}
		return k
	}
}

// doLoop opens the scope of the do-while at i and notes its while, whose
// condition ticks it (loopTick).
func (r *rewriter) doLoop(i int) {
	body := r.stmtEnd(i + 1)
	if body < 0 || r.text(body+1) != "while" {
		r.fail(r.toks[i], "msl-emu cannot find the while of this do")
		return
	}
	if r.doWhile == nil {
		r.doWhile = map[int]string{}
	}
	r.doWhile[body+1] = r.openLoop(i)
}

// rangeFor reports whether the for whose parentheses are open..end is a
// range-based for: a ':' outside brackets and no ';'.
func (r *rewriter) rangeFor(open, end int) bool {
	colon := false
	for j := open + 1; j < end; j++ {
		switch r.text(j) {
		case "(", "[", "{":
			if j = r.match(j); j < 0 {
				return false
			}
		case ";":
			return false
		case ":":
			colon = true
		}
	}
	return colon
}

// stmtEnd is the last token of the statement that starts at j, or -1.
func (r *rewriter) stmtEnd(j int) int {
	switch r.text(j) {
	case "":
		return -1
	case "{":
		return r.match(j)
	case "if":
		c := j + 1
		if r.text(c) == "constexpr" {
			c++
		}
		if r.text(c) != "(" {
			return -1
		}
		m := r.match(c)
		if m < 0 {
			return -1
		}
		e := r.stmtEnd(m + 1)
		if e >= 0 && r.text(e+1) == "else" {
			return r.stmtEnd(e + 2)
		}
		return e
	case "for", "while", "switch":
		if r.text(j+1) != "(" {
			return -1
		}
		m := r.match(j + 1)
		if m < 0 {
			return -1
		}
		return r.stmtEnd(m + 1)
	case "do":
		e := r.stmtEnd(j + 1)
		if e < 0 || r.text(e+1) != "while" || r.text(e+2) != "(" {
			return -1
		}
		m := r.match(e + 2)
		if m < 0 || r.text(m+1) != ";" {
			return -1
		}
		return m + 1
	case "case":
		if e := r.caseEnd(j); e >= 0 {
			return r.stmtEnd(e + 1)
		}
		return -1
	case "default":
		if r.text(j+1) == ":" {
			return r.stmtEnd(j + 2)
		}
	}
	if r.tok(j).kind == tIdent && r.text(j+1) == ":" { // a label
		return r.stmtEnd(j + 2)
	}
	for k := j; k < len(r.toks); k++ {
		switch r.text(k) {
		case "(", "[", "{":
			if k = r.match(k); k < 0 {
				return -1
			}
		case ";":
			return k
		case "}", ")", "]":
			return -1
		}
	}
	return -1
}

// inConstexpr reports whether the function being walked is declared
// constexpr: the words before its body's '{', back to the end of what
// precedes the declaration, say so.
func (r *rewriter) inConstexpr() bool {
	n := len(r.ns)
	for n > 0 && r.ns[n-1] == "\x00" {
		n--
	}
	if n == len(r.ns) {
		return false
	}
	for j := r.nsAt[n] - 1; j >= 0; j-- {
		switch r.text(j) {
		case "constexpr":
			return true
		case ")", "]":
			if j = r.matchBack(j); j < 0 {
				return false
			}
		case "}":
			// A member initialiser's braces (`S() : x{0} {`).
			o := r.matchBack(j)
			if o <= 0 || r.tok(o-1).kind != tIdent || r.text(o-2) != ":" && r.text(o-2) != "," {
				return false
			}
			j = o
		case ";", "{":
			return false
		}
	}
	return false
}

// declaresCondition reports whether the condition that starts at from (and
// ends before to, or at a ';') declares a variable: a type, then the name
// and '=' or '{' (`int n = f()`, `const T* p = q`, `vec<int, 2> v{a, b}`).
// An expression names no type before the name it assigns (`x = f()`,
// `*p = q`, `a.b = c`).
func (r *rewriter) declaresCondition(from, to int) bool {
	if r.tok(from).kind != tIdent && r.text(from) != "::" {
		return false
	}
	for j := from; j < to; j++ {
		switch r.text(j) {
		case ";":
			return false
		case "(", "[":
			if j = r.match(j); j < 0 || j >= to {
				return false
			}
		case "<":
			if k := r.match(j); k > 0 && k < to && r.tok(j-1).kind == tIdent {
				j = k
			}
		case "=", "{":
			if j-2 < from || r.tok(j-1).kind != tIdent {
				return false
			}
			b := r.tok(j - 2)
			return b.kind == tIdent || b.text == "*" || b.text == "&" || b.text == "&&" || b.text == ">"
		}
	}
	return false
}

// autoSwizzle handles the auto at i when it declares one variable
// initialised by a swizzle (`auto s = m.xy;`): the shim's bool vector
// swizzle is a member of its own type, which auto would copy, so the
// initialiser becomes ::metal::__emu::swz_value(m.xy), the bool vector it
// reads as; any other value passes as it is (a float vector's swizzle, a
// struct's field that happens to be named xy).
func (r *rewriter) autoSwizzle(i int) {
	if r.tok(i+1).kind != tIdent || r.text(i+2) != "=" {
		return
	}
	for j := i + 3; j < len(r.toks); j++ {
		switch r.text(j) {
		case "(", "[", "{":
			if j = r.match(j); j < 0 {
				return
			}
		case ",", "}":
			return
		case ";":
			if j-2 > i+2 && r.text(j-2) == "." && swizzleName(r.text(j-1)) {
				r.insertAfter(i+2, " ::metal::__emu::swz_value(")
				r.edits = append(r.edits, edit{r.toks[j].pos, r.toks[j].pos, ")"})
			}
			return
		}
	}
}

// swizzleName reports whether s names two to four vector components, all
// of xyzw or all of rgba.
func swizzleName(s string) bool {
	if len(s) < 2 || len(s) > 4 {
		return false
	}
	return strings.Trim(s, "xyzw") == "" || strings.Trim(s, "rgba") == ""
}

// stackCheck starts every function body, the kernels' too: it fails the
// dispatch of a thread that runs out of stack (endless recursion, or local
// arrays too large), and stops a thread of a failed dispatch as loop_tick
// does (docs/msl-subset.md, "The time limit").
const stackCheck = " ::metal::__emu::stack_check(__func__);"

// notCalls are the words whose parentheses hold no parameter list.
var notCalls = map[string]bool{"decltype": true, "alignas": true, "sizeof": true, "alignof": true,
	"__attribute__": true, "noexcept": true, "static_assert": true}

// functionBody reports whether the '{' at i, outside any function, opens a
// function's body rather than a brace initialiser: it follows the ')' of a
// parameter list or a constructor's member initialiser (`x(a) {`,
// `x{a} {`), past qualifiers and attributes, or a trailing return type.
// Params is the parameter list's '(', or -1 where that is not at hand (a
// constructor's member initialisers).
func (r *rewriter) functionBody(i int) (body bool, params int) {
	qualifiers := func(k int) int {
		for k >= 0 {
			if a := r.attrTo[k]; a != nil {
				k = a.start - 1
				continue
			}
			switch r.text(k) {
			case "const", "volatile", "&", "&&", "override", "final", "device", "constant", "threadgroup", "thread":
				k--
				continue
			case ")": // __attribute__((always_inline)) after the parameters
				if o := r.matchBack(k); o > 0 && r.text(o-1) == "__attribute__" {
					k = o - 2
					continue
				}
			}
			return k
		}
		return k
	}
	k := qualifiers(i - 1)
	switch r.text(k) {
	case ")":
		if o := r.matchBack(k); o > 0 && !notCalls[r.text(o-1)] {
			if r.text(o-2) == ":" || r.text(o-2) == "," {
				return true, -1 // a member initialiser
			}
			return true, o
		}
	case "}": // a member initialiser's braces
		o := r.matchBack(k)
		return o > 1 && r.tok(o-1).kind == tIdent && (r.text(o-2) == "," || r.text(o-2) == ":"), -1
	}
	// `auto f(T x) -> R {`: back to the arrow, past the return type's
	// brackets.
	for ; k > 0; k-- {
		switch r.text(k) {
		case ";", "{", "}", "=":
			return false, -1
		case ")", "]", ">":
			if o := r.matchBack(k); o > 0 {
				k = o
			}
		case "->":
			if q := qualifiers(k - 1); r.text(q) == ")" {
				return true, r.matchBack(q)
			}
			return false, -1
		}
	}
	return false, -1
}

// plainPtrParams gives each pointer or reference parameter declared
// without an address space (`float first(float* p)`, `void inc(float& r)`),
// which MSL makes a thread pointer or reference, the check of a `thread`
// one (threadParam), in the function whose parameter list opens at open. A
// template's are left alone: its T may stand for an address space's type
// (`device float`), which the emulator's types drop. So is a const
// reference, which may bind a temporary.
func (r *rewriter) plainPtrParams(open int) {
	if open < 0 {
		return
	}
	end := r.match(open)
	for j := open - 1; j >= 0; j-- {
		if t := r.text(j); t == ";" || t == "{" || t == "}" {
			break
		} else if t == "template" || t == "kernel" {
			return
		}
	}
	start := open + 1
	for k := start; end > 0 && k <= end; k++ {
		if t := r.text(k); t == "(" || t == "[" || t == "<" {
			if m := r.match(k); m > 0 && m < end {
				k = m
			}
			continue
		} else if k != end && t != "," {
			continue
		}
		n := k - 1 // the parameter's name, before its default argument if any
		for j := start; j < k; j++ {
			if r.text(j) == "=" { // a default argument
				n = j - 1
				break
			}
		}
		q := n - 1
		for r.text(q) == "const" || r.text(q) == "volatile" {
			q--
		}
		ref := r.text(n-1) == "&"
		plain := n > start && r.tok(n).kind == tIdent && (r.text(q) == "*" || ref)
		for j := start; j < n && plain; j++ {
			if thisSpaces[r.text(j)] != 0 || notTypeWords[r.text(j)] || r.attrAt[j] != nil || ref && r.text(j) == "const" {
				plain = false
			}
		}
		if plain {
			r.threadParam(start, n, ref)
		}
		start = k + 1
	}
}

// lambdaAt reports whether the '[' at i opens a lambda's capture list: it
// stands where an expression starts (not after a name, a call or an index,
// where it subscripts or declares an array) and its ']' is followed by the
// parameters, the body, mutable or a return type.
func (r *rewriter) lambdaAt(i int) bool {
	if p := r.tok(i - 1); p.kind == tIdent && p.text != "return" || p.kind == tNumber || p.kind == tString || p.text == ")" || p.text == "]" {
		return false
	}
	k := r.match(i)
	if k < 0 {
		return false
	}
	switch r.text(k + 1) {
	case "(", "{", "mutable", "->":
		return true
	}
	return false
}

// stmtBegin is the first token of the declaration or statement that the
// token at i ends: after the last ';', '{' or '}' before it, looking past
// brackets, brace initialisers (`= {1, 2}`) and class bodies
// (`typedef struct {...} Args`).
func (r *rewriter) stmtBegin(i int) int {
	for j := i - 1; j >= 0; j-- {
		switch r.toks[j].text {
		case ";", "{":
			return j + 1
		case "}":
			o := r.matchBack(j)
			if o <= 0 || r.text(o-1) != "=" && !r.classHead(o) {
				return j + 1
			}
			j = o
		case ")", "]":
			o := r.matchBack(j)
			if o < 0 {
				return j + 1
			}
			j = o
		}
	}
	return 0
}

// declaresVariable reports whether tokens from..to (exclusive) declare a
// variable outside the constant address space: no '(' outside brackets
// before the initialiser (a function), no constant and no constexpr.
func (r *rewriter) declaresVariable(from, to int) bool {
	for j := from; j < to; j++ {
		switch r.toks[j].text {
		case "constant", "constexpr", "(":
			return false
		case "=":
			return true
		case "[":
			if k := r.match(j); k > 0 {
				j = k
			}
		}
	}
	return true
}

// programScopeVar fails a program-scope declaration, ended by the ';' at
// i, of a variable outside the constant address space: Metal keeps no
// other memory for the whole program (docs/msl-subset.md), so
// `float scale = 2;` or `device float* p;` there does not build on a Mac.
func (r *rewriter) programScopeVar(i int) {
	b := r.stmtBegin(i)
	if b >= i {
		return
	}
	switch r.text(b) {
	case "typedef", "using", "template", "namespace", "static_assert", "kernel", "extern", "friend":
		return
	case "struct", "class", "union", "enum":
		// A class declared alone, or one defined with variables after
		// its body (`struct S {...} s;`), whose names are then checked.
		for j := b; j < i; j++ {
			if r.toks[j].text == "{" {
				if k := r.match(j); k > 0 && k+1 < i {
					b = k + 1
				}
				break
			}
		}
		if r.text(b) == "struct" || r.text(b) == "class" || r.text(b) == "union" || r.text(b) == "enum" {
			return
		}
	}
	if r.declaresVariable(b, i) {
		r.fail(r.toks[b], "program-scope variables must be declared constant in Metal")
	}
}

// staticLocal fails a function-scope static variable outside the constant
// address space (`static float acc;`): it lives for the whole program, and
// Metal holds such variables to the rule of program-scope ones.
func (r *rewriter) staticLocal(i int) {
	end := i
	for end < len(r.toks) && r.toks[end].text != ";" && r.toks[end].text != "{" && r.toks[end].text != "}" {
		if r.toks[end].text == "(" || r.toks[end].text == "[" {
			if k := r.match(end); k > 0 {
				end = k
			}
		}
		end++
	}
	if r.declaresVariable(r.stmtBegin(i), end) {
		r.fail(r.toks[i], "static variables in functions must be declared constant in Metal")
	}
}

var assignOps = map[string]bool{"=": true, "+=": true, "-=": true, "*=": true, "/=": true, "%=": true,
	"&=": true, "|=": true, "^=": true, "<<=": true}

// stmtStart are the tokens after which an expression statement starts.
var stmtStart = map[string]bool{";": true, "{": true, "}": true, ")": true, "else": true, "do": true, ":": true}

// markStore brackets the left side of the assignment whose operator is at
// k, `p[i] = v` becoming `(store_mark(false), p[i]) = v`, so the cost
// witness counts its device access as a store rather than a load
// (docs/msl-subset.md). Left sides it cannot delimit surely stay as they
// are, and their stores count as loads.
func (r *rewriter) markStore(k int) {
	j := k - 1
	start := -1
	indexed := false
	for start < 0 {
		t := r.tok(j)
		switch {
		case t.text == "]" || t.text == ")":
			if r.attrTo[j] != nil {
				return
			}
			m := r.matchBack(j)
			if m < 0 {
				return
			}
			if t.text == "]" {
				indexed = true
			}
			prev := r.tok(m - 1)
			if t.text == ")" && controlKeywords[prev.text] {
				start = j + 1 // if (c) ((device T*)p)[i] = v: the left side follows the condition
				break
			}
			if t.text == ")" && prev.kind != tIdent && prev.text != "]" && prev.text != ")" {
				start = m // a parenthesised primary: (*p)
				break
			}
			if t.text == "]" && prev.kind != tIdent && prev.text != "]" && prev.text != ")" {
				return // not a subscript: a lambda's capture, an attribute
			}
			j = m - 1
		case t.kind == tIdent && !notPrimary[t.text]:
			switch r.text(j - 1) {
			case ".", "::":
				j -= 2
			case "->":
				indexed = true
				j -= 2
			default:
				start = j
			}
		default:
			return
		}
	}
	if r.text(start-1) == "*" && stmtStart[r.text(start-2)] {
		start--
		indexed = true
	}
	if !indexed || !stmtStart[r.text(start-1)] {
		return // a declaration (float a[4] = ...), or nothing that reaches memory
	}
	compound := "false"
	if r.text(k) != "=" {
		compound = "true"
	}
	p := r.toks[start].pos
	r.edits = append(r.edits, edit{p, p, "(::metal::__emu::store_mark(" + compound + "), "})
	r.insertAfter(k-1, ")")
}

// halfTypes are the scalar types whose conversions to each other clang
// refuses and Metal makes (`bfloat(h)`, `(half)b`, `static_cast<bfloat>(h)`):
// their casts go through the shim's tmake, tcast and tstatic, which
// convert between them through float (metal_stdlib's fconv).
var halfTypes = map[string]bool{"half": true, "bfloat": true}

// controlKeywords are those whose parenthesised condition or clauses end
// just before the statement they govern.
var controlKeywords = map[string]bool{"if": true, "while": true, "for": true, "switch": true}

// notPrimary are identifiers that cannot end a postfix expression.
var notPrimary = map[string]bool{"return": true, "auto": true, "const": true, "case": true, "default": true,
	"else": true, "do": true, "sizeof": true, "operator": true, "template": true, "typename": true}

// vecCtor rewrites the vector type at tokens i..j, followed by '(', into a
// call of metal::__emu::make, which converts values instead of bits.
func (r *rewriter) vecCtor(i, j int) {
	p := r.text(i - 1)
	if p == "." || p == "->" || p == "operator" || p == "typename" || p == "struct" {
		return
	}
	start := i
	if p == "::" {
		if r.text(i-2) != "metal" || r.text(i-3) == "::" {
			return
		}
		start = i - 2
	}
	r.replace(start, j, "::metal::__emu::make<"+r.vecType(i, j)+" >")
	r.cmpArgs(j + 1)
}

// cmpArgs wraps each argument of the constructor call whose '(' is at
// open that is a comparison in metal::__emu::cmp_value: clang compares
// vectors into integer vectors of -1 and 0, where Metal yields a bool
// vector, whose true converts to 1 (`float4(a < b)`, docs/msl-subset.md).
// An argument whose commas it cannot tell from template arguments' stays.
func (r *rewriter) cmpArgs(open int) {
	if r.inFunction() {
		return // cmpValues wraps every comparison in a function body
	}
	end := r.match(open)
	start := open + 1
	for k := start; end > 0 && k <= end; k++ {
		switch t := r.text(k); {
		case k == end || t == ",":
			if k > start && r.comparison(start, k, false) {
				p := r.toks[start].pos
				r.edits = append(r.edits, edit{p, p, "::metal::__emu::cmp_value("})
				r.insertAfter(k-1, ")")
			}
			start = k + 1
		case t == "(" || t == "[" || t == "{" || t == "<":
			if m := r.match(k); m > 0 && m < end {
				k = m
			} else if t != "<" {
				return
			}
		}
	}
}

// cmpValues wraps each comparison in a function body (or a brace
// initialiser) in metal::__emu::cmp_value, which makes clang's integer
// vector of -1 and 0 the bool vector Metal's comparison of vectors yields
// (the specification's "Scalar and Vector Operators"), and leaves a scalar
// comparison's bool as it is: `int4 m = a < b;` and `(a < b) + 1` then fail
// to build, as on a Mac, and `select(x, y, a < b)` takes a bool vector. A
// comparison is the operand, between brackets, commas, semicolons,
// assignments, `?`, `:`, `return` and the binary operators below a
// comparison's precedence (logicalOp), whose outermost operator compares
// (comparison); one whose `<` may open template arguments stays as it is.
func (r *rewriter) cmpValues() {
	for _, b := range r.bodies {
		r.cmpOperands(b[0]+1, b[1], false, false)
	}
	for _, in := range r.inits {
		r.cmpOperands(in[0]+1, in[1], false, false)
	}
}

// programInit notes the initialiser of the program-scope declaration that
// the ';' at i ends (`constexpr bool2 m = a < b;`), whose comparisons
// cmpValues wraps as a function body's. One holding braces is left to
// the bodies (a brace initialiser is one), and a template's, alias's or
// operator's '=' is none.
func (r *rewriter) programInit(i int) {
	b := r.stmtBegin(i)
	switch r.text(b) {
	case "typedef", "using", "template", "namespace", "static_assert", "kernel", "extern", "friend":
		return
	}
	angles := 0
	for k := b; k < i; k++ {
		switch t := r.text(k); t {
		case "(", "[":
			if k = r.match(k); k < 0 || k > i {
				return
			}
		case "{":
			return
		case "<":
			angles++
		case ">":
			angles--
		case "=":
			if angles != 0 || r.text(k-1) == "operator" {
				return
			}
			for j := k + 1; j < i; j++ {
				if r.text(j) == "{" {
					return
				}
			}
			r.inits = append(r.inits, [2]int{k, i})
			return
		}
	}
}

// cmpOperands wraps the comparisons among tokens from..to (exclusive),
// descending into brackets; with cond, those tokens are the condition of
// an if, while or switch, whose operands must be scalars, and stay. With
// expr, they hold expressions only (a call's arguments, an index), no
// declaration (angleArgs).
func (r *rewriter) cmpOperands(from, to int, cond, expr bool) {
	start := from
	for k := from; k <= to; k++ {
		t := r.text(k)
		if k == to || t == "," || t == ";" || t == "?" || t == ":" || t == "return" || assignOps[t] || r.logicalOp(k) {
			if !cond {
				r.cmpOperand(start, k, expr)
			}
			start = k + 1
			continue
		}
		switch t {
		case "(", "[", "{":
			m := r.match(k)
			if m < 0 || m > to {
				return
			}
			p := r.text(k - 1)
			stmt := p == "if" || p == "while" || p == "switch" || p == "for"
			r.cmpOperands(k+1, m, t == "(" && stmt && p != "for", t == "[" || t == "(" && !stmt)
			k = m
		case "<":
			if r.text(k-1) == "operator" {
				continue
			}
			if m := r.angleArgs(k, expr); m > 0 && m < to {
				k = m
			}
		case ">":
			if n := r.tok(k + 1); n.pos == r.toks[k].end && n.text == ">=" { // >>=
				r.cmpOperand(start, k, expr)
				k++
				start = k + 1
			}
		}
	}
}

// logicalOp reports whether the token at i is a binary operator of lower
// precedence than a comparison's: && || & | ^ after an operand (not the
// unary &, whose operand a comparison may hold).
func (r *rewriter) logicalOp(i int) bool {
	switch r.text(i) {
	case "&&", "||", "&", "|", "^":
		p := r.tok(i - 1)
		return p.kind == tIdent && !notPrimary[p.text] || p.kind == tNumber || p.text == ")" || p.text == "]"
	}
	return false
}

// cmpOperand wraps tokens from..to (exclusive) in cmp_value where they are
// a comparison, unless an edit replaces text around either end.
func (r *rewriter) cmpOperand(from, to int, expr bool) {
	if from >= to || r.text(from-1) == "operator" || !r.comparison(from, to, expr) {
		return
	}
	p, q := r.toks[from].pos, r.toks[to-1].end
	for _, e := range r.edits {
		if e.start < p && p < e.end || e.start < q && q < e.end {
			return
		}
	}
	r.edits = append(r.edits, edit{p, p, "::metal::__emu::cmp_value("}, edit{q, q, ")"})
}

// angleArgs returns the '>' closing the template arguments that the '<'
// at k opens, or -1 where it compares. As in C++, a '<' opens template
// arguments only after a template's name: one that no template the unit or
// the shim declares has (maybeTemplate) compares, wherever it is
// (`f(a < b, c > (d))`, `x = a < b, c > d;`). Among expressions alone
// (expr) a name followed by arguments in angle brackets is not followed by
// a name, a number, '!' or '~' either: there `a < b, c > d` compares.
func (r *rewriter) angleArgs(k int, expr bool) int {
	m := r.match(k)
	if m > 0 && !r.maybeTemplate(k-1) {
		return -1
	}
	if m < 0 || !expr || r.tok(k-1).kind != tIdent {
		return m
	}
	switch n := r.tok(m + 1); {
	case n.kind == tIdent && !notPrimary[n.text], n.kind == tNumber, n.text == "!", n.text == "~":
		return -1
	}
	return m
}

// comparison reports whether tokens from..to (exclusive) are an
// expression whose outermost operator compares or is a logical one (whose
// value clang also gives vectors as -1 and 0): `a < b`, `a.x == 0 && m`,
// `!(a < b)`; not a conditional or an assignment. Expr is cmpOperands'.
func (r *rewriter) comparison(from, to int, expr bool) bool {
	found := r.text(from) == "!"
	for k := from; k < to; k++ {
		switch t := r.text(k); t {
		case "(", "[", "{":
			m := r.match(k)
			if m < 0 || m >= to {
				return false
			}
			k = m
		case "<":
			if m := r.angleArgs(k, expr); m > 0 && m < to {
				k = m
				continue
			}
			found = true
		case ">":
			if n := r.tok(k + 1); n.pos == r.toks[k].end && (n.text == ">" || n.text == ">=") {
				if n.text == ">=" {
					return false // >>=
				}
				k++ // >>, which the lexer leaves as two tokens
				continue
			}
			found = true
		case "==", "!=", "<=", ">=", "&&", "||":
			found = true
		case "?":
			return false
		default:
			if assignOps[t] {
				return false
			}
		}
	}
	return found
}

// vecStaticCast rewrites `static_cast<float4>(x)` at i into a call of
// make, which converts values: the specification's static_cast converts a
// scalar or vector to another vector type, which clang refuses between
// vectors of one size (docs/msl-subset.md). It returns the index of the
// '>', or i.
func (r *rewriter) vecStaticCast(i int) int {
	if r.text(i+1) != "<" {
		return i
	}
	k := r.match(i + 1)
	if k < 0 || r.text(k+1) != "(" {
		return i
	}
	make := "make"
	switch {
	case k == i+3 && r.vecNames[r.text(i+2)]:
	case r.text(i+2) == "vec" && r.text(i+3) == "<" && r.match(i+3) == k-1:
	case k == i+3 && (r.tparam(i+2) || halfTypes[r.text(i+2)]):
		make = "tstatic"
	case r.aliasType(r.unqualified(i+2)) == k-1:
		// The type's own tokens may take edits (its template arguments).
		r.replace(i, i, "::metal::__emu::tstatic")
		return i
	default:
		return i
	}
	r.replace(i, k, "::metal::__emu::"+make+"<"+r.vecType(i+2, k-1)+" >")
	r.cmpArgs(k + 1)
	return k
}

// boolVec reports whether the `vec` at i is `vec<bool, N>`: MSL's boolN,
// which the shim declares as a class of its own (metal::__emu::bvec<N>),
// where clang's vector of bool has no component names.
func (r *rewriter) boolVec(i int) bool {
	return r.text(i) == "vec" && r.text(i+1) == "<" && r.text(i+2) == "bool" && r.text(i+3) == ","
}

// vecType is the C++ spelling of the vector type at tokens i..j.
func (r *rewriter) vecType(i, j int) string {
	if r.boolVec(i) {
		return "::metal::__emu::bvec<" + r.src[r.toks[i+4].pos:r.toks[j-1].end] + ">"
	}
	return r.src[r.toks[i].pos:r.toks[j].end]
}

// qualifiedStart is the first token of the name at i with its `metal::`
// or `::metal::` qualifier.
func (r *rewriter) qualifiedStart(i int) int {
	if r.text(i-1) == "::" && r.text(i-2) == "metal" {
		if r.text(i-3) == "::" {
			return i - 3
		}
		return i - 2
	}
	return i
}

// typeParams notes the names of the type parameters of each template
// (`template <typename T, class U = float>`) with the tokens of the
// declaration they are declared for, to its body's end or its ';'.
func (r *rewriter) typeParams() {
	r.tparams = map[string][][2]int{}
	for i := 0; i+1 < len(r.toks); i++ {
		if r.text(i) != "template" || r.text(i+1) != "<" {
			continue
		}
		close := r.match(i + 1)
		if close < 0 {
			continue
		}
		end := -1
		for j, depth := close+1, 0; j < len(r.toks) && end < 0; j++ {
			switch r.text(j) {
			case "(", "[":
				depth++
			case ")", "]":
				depth--
			case "{":
				if depth == 0 {
					end = r.match(j)
				}
			case ";":
				if depth == 0 {
					end = j
				}
			}
		}
		if end < 0 {
			continue
		}
		for j, first := i+2, true; j < close; j++ {
			switch t := r.text(j); {
			case t == ",":
				first = true
				continue
			case t == "<" || t == "(" || t == "[":
				if m := r.match(j); m > 0 {
					j = m
				}
			case first && (t == "typename" || t == "class") && r.tok(j+1).kind == tIdent:
				r.tparams[r.text(j+1)] = append(r.tparams[r.text(j+1)], [2]int{close, end})
			}
			first = false
		}
	}
}

// tparam reports whether the name at token i is a template type parameter
// of a declaration that token i lies in, or an alias of such a type in its
// scope (alias), as written (not after `.`, `->`, `::` or `typename`).
func (r *rewriter) tparam(i int) bool {
	if r.tok(i).kind != tIdent {
		return false
	}
	switch r.text(i - 1) {
	case ".", "->", "::", "typename", "class", "struct", "operator":
		return false
	}
	for _, s := range r.tparams[r.text(i)] {
		if s[0] < i && i < s[1] {
			return true
		}
	}
	return false
}

// typeCall rewrites the functional cast or construction `X(a, b)` whose
// type X, tokens start to end, the rewriter cannot tell a vector from (a
// template's type parameter, `typename T::v4`, `decltype(e)`, `S::f4` of
// a vector alias f4) into metal::__emu::tmake<X>(a, b), which converts a
// vector by value, as Metal's constructors do, where clang's functional
// cast between vectors of one size is a bit cast; any other type is
// constructed as written. A declarator (`T (*f)(int)`) and `X()` stay.
func (r *rewriter) typeCall(start, end int) {
	m := r.match(end + 1)
	if m < 0 || m == end+2 {
		return
	}
	switch p := r.tok(start - 1); {
	case p.kind == tIdent && p.text != "return" && p.text != "case", p.text == ">", p.text == "]", p.text == "::", p.text == ".", p.text == "->":
		return // a declaration's type, a name after a type, a member
	}
	if t := r.text(end + 2); (t == "*" || t == "&" || t == "&&") && (r.text(m+1) == "(" || r.text(m+1) == "[") {
		return
	}
	if p := r.text(start - 1); r.text(m+1) == "{" || !r.inFunction() && (p == "{" || p == ";" || p == "}" || p == ":") {
		return // a constructor's declaration
	}
	r.edits = append(r.edits, edit{r.toks[start].pos, r.toks[start].pos, "::metal::__emu::tmake<"})
	r.insertAfter(end, " >")
	r.cmpArgs(end + 1)
}

// typeName reads, from token i, a type whose name does not say whether it
// is a vector: `typename` and a qualified name (`typename T::v4`),
// `decltype(e)`, or a qualified name ending in a vector alias (`S::f4`,
// `Tr<T>::f4`; not `metal::float4`, which vecCtor takes). It returns the
// type's last token, or -1.
func (r *rewriter) typeName(i int) int {
	switch r.text(i) {
	case "decltype":
		if r.text(i+1) == "(" {
			return r.match(i + 1)
		}
		return -1
	case "typename":
		if r.text(i-1) == "<" || r.text(i-1) == "," && r.enclosing(i) < 0 {
			return -1 // a template's parameter
		}
		i++
	default:
		if r.tok(i).kind != tIdent || r.text(i) == "metal" || r.text(i-1) == "::" ||
			r.text(i+1) != "::" && (r.text(i+1) != "<" || !r.maybeTemplate(i)) {
			return -1
		}
	}
	last, scoped := -1, false
	for j := i; ; {
		if r.tok(j).kind != tIdent || r.text(j) == "template" {
			return -1
		}
		last = j
		if r.text(j+1) == "<" {
			m := r.match(j + 1)
			if m < 0 {
				return -1
			}
			last = m
		}
		if r.text(last+1) != "::" {
			break
		}
		scoped = true
		j = last + 2
	}
	if r.text(i-1) == "typename" {
		return last
	}
	if !scoped || r.tok(last).kind != tIdent || !r.vecNames[r.text(last)] && len(r.tparams[r.text(last)]) == 0 && !r.aliases[r.text(last)] {
		return -1
	}
	return last
}

// vecDirectInit rewrites the declaration `float4 v(a, b, c, d);` in a
// function body into `float4 v = make<float4>(a, b, c, d);`. A parameter
// list (a local function declaration) starts with a type and is left alone.
func (r *rewriter) vecDirectInit(i int) {
	first := r.tok(i + 3)
	if r.vecNames[first.text] || typeWords[first.text] || first.text == ")" {
		return
	}
	switch first.text {
	case "float", "half", "bfloat", "bool", "uint", "ushort", "uchar", "ulong", "const", "device", "constant",
		"threadgroup", "thread", "void":
		return
	}
	make := "make"
	if !r.vecNames[r.text(i)] {
		if r.tparam(i+3) || r.aliasType(i+3) > 0 || r.text(i-1) == "::" || r.text(i-1) == "." || r.text(i-1) == "->" {
			return // a function's declaration (`T f(U);`), a member
		}
		make = "tmake" // a vector by value, as Metal's `T v(i4);`; any other type as written
	}
	r.insertAfter(i+1, " = ::metal::__emu::"+make+"<"+r.text(i)+" >")
	r.cmpArgs(i + 2)
}

// vcast rewrites a C-style cast to a vector type, `(float4)x`, into
// `metal::__emu::vcast<float4>() * x`: `*` binds the same cast-expression
// operand, and the conversion is by value as in MSL.
func (r *rewriter) vcast(i int) int {
	j := i + 1
	end := -1
	cast, split := "vcast", false
	switch {
	case r.vecNames[r.text(j)] && r.text(j+1) == ")":
		end = j
	case (r.tparam(j) || halfTypes[r.text(j)]) && r.text(j+1) == ")":
		end = j
		cast = "tcast"
	case r.typeName(j) > 0 && r.text(r.typeName(j)+1) == ")":
		end = r.typeName(j)
		cast = "tcast"
		split = true
	case r.aliasType(r.unqualified(j)) > 0 && r.text(r.aliasType(r.unqualified(j))+1) == ")":
		end = r.aliasType(r.unqualified(j))
		cast = "tcast"
		split = true
	case r.text(j) == "vec" && r.text(j+1) == "<":
		if k := r.match(j + 1); k > 0 && r.text(k+1) == ")" {
			end = k
		}
	}
	if end < 0 {
		return -1
	}
	prev := r.tok(i - 1)
	if (prev.kind == tIdent && prev.text != "return" || prev.text == ")" || prev.text == "]" || prev.text == ">") && (i-1 != r.castClose || r.castClose == 0) {
		return -1 // a call or a declaration, not a cast; the ')' of a cast before it (`(float4)(int4)v`) is one
	}
	next := r.tok(end + 2)
	if !(next.kind == tIdent || next.kind == tNumber || strings.Contains("(-+!~*", next.text) && next.text != "") {
		return -1
	}
	// The cast and its operand are put in parentheses, so that the `*`
	// binds them together after a multiplicative or unary operator too
	// (`a / (float4)b`, `-(T)x`), where `a / vcast<float4>() * b` would
	// group as `(a / vcast<float4>()) * b`.
	open, close := "", ""
	if oe := r.castOperandEnd(end + 2); oe > 0 {
		open, close = "(", ")"
		r.insertAfter(oe, close)
	}
	if split {
		// Parts of the type may take edits of their own (`decltype(...)`).
		r.replace(i, i, open+"::metal::__emu::"+cast+"<")
		r.replace(end+1, end+1, " >() * ")
	} else {
		r.replace(i, end+1, open+"::metal::__emu::"+cast+"<"+r.vecType(j, end)+" >() * ")
	}
	r.castClose = end + 1
	if next.text == "(" && !r.inFunction() { // cmpValues wraps those in a function body
		if m := r.match(end + 2); m > 0 && r.comparison(end+3, m, false) {
			r.insertAfter(end+1, "::metal::__emu::cmp_value")
		}
	}
	return end + 1
}

// castOperandEnd is the last token of the cast-expression that starts at
// token k, a C-style cast's operand: prefix operators, then a name (with
// its scopes and template arguments), a number or a parenthesised
// expression (or another cast, and its operand), then calls, subscripts,
// members and `++`/`--`; or -1 where it reads something else.
func (r *rewriter) castOperandEnd(k int) int {
	for {
		switch r.text(k) {
		case "-", "+", "!", "~", "*", "&", "++", "--":
			k++
			continue
		}
		break
	}
	t := r.tok(k)
	switch {
	case t.kind == tNumber:
	case t.kind == tIdent:
		for r.text(k+1) == "::" && r.tok(k+2).kind == tIdent {
			k += 2
		}
		if r.text(k+1) == "<" && r.maybeTemplate(k) {
			if m := r.match(k + 1); m > 0 {
				k = m
			}
		}
	case t.text == "(":
		m := r.match(k)
		if m < 0 {
			return -1
		}
		if n := r.tok(m + 1); n.kind == tIdent || n.kind == tNumber || n.text == "(" {
			return r.castOperandEnd(m + 1) // a cast's parentheses
		}
		k = m
	default:
		return -1
	}
	for {
		switch r.text(k + 1) {
		case "(", "[":
			m := r.match(k + 1)
			if m < 0 {
				return -1
			}
			k = m
		case ".", "->":
			if r.tok(k+2).kind != tIdent {
				return -1
			}
			k += 2
		case "++", "--":
			k++
		default:
			return k
		}
	}
}

// floatLiteral gives the floating literal at token i its MSL type: `1.0h`
// is a half, and an unsuffixed one (`0.1`, `1e-5`, `0x1p-3`), which C++
// makes a double, a float, as MSL has no double: `x * 0.1` multiplies
// floats and `16777216.0 + 1.0` rounds to 16777216, as on a Mac.
func (r *rewriter) floatLiteral(i int) {
	s := r.toks[i].text
	low := strings.ToLower(s)
	hex := strings.HasPrefix(low, "0x")
	if last := low[len(low)-1]; last >= '0' && last <= '9' || last == '.' {
		if hex && strings.Contains(low, "p") || !hex && strings.ContainsAny(low, ".e") {
			r.replace(i, i, s+"f")
		}
		return
	}
	if hex || !strings.HasSuffix(low, "h") {
		return
	}
	num := s[:len(s)-1]
	if strings.ContainsAny(num, ".eE") {
		num += "f"
	}
	r.replace(i, i, "((half)"+num+")")
}

// alias notes typedef/using names of vector types, so that their
// constructor calls get the value conversion too.
func (r *rewriter) alias(i int) {
	end := i
	for end < len(r.toks) && r.toks[end].text != ";" {
		if t := r.toks[end].text; t == "decltype" && r.text(end+1) == "(" {
			if m := r.match(end + 1); m > 0 {
				end = m + 1
				continue
			}
		} else if t == "{" || t == "(" {
			return
		}
		end++
	}
	if end >= len(r.toks) {
		return
	}
	var name string
	var typ []token
	if r.text(i) == "typedef" {
		name = r.text(end - 1)
		typ = r.toks[i+1 : end-1]
	} else {
		if r.text(i+2) != "=" {
			return
		}
		name = r.text(i + 1)
		typ = r.toks[i+3 : end]
	}
	for k, t := range typ {
		if t.text == "*" || t.text == "&" {
			return
		}
		if r.vecNames[t.text] || t.text == "vec" && k+1 < len(typ) && typ[k+1].text == "<" {
			if !r.declared[name] { // a function's name elsewhere: its calls are no casts
				r.vecNames[name] = true
			}
			return
		}
	}
	// An alias of a type that may be a vector (a template's type
	// parameter, `typename T::v4`, a decltype) may be one too, in the
	// scope it is declared in (tparam).
	first := i + 1
	if r.text(i) == "using" {
		first = i + 3
	}
	if len(typ) > 0 && (typ[0].text == "typename" || typ[0].text == "decltype" || len(typ) == 1 && r.tparam(first)) {
		scope := len(r.toks)
		if open := r.enclosing(i); open >= 0 && r.text(open) == "{" {
			if m := r.match(open); m > 0 {
				scope = m
			}
		}
		r.tparams[name] = append(r.tparams[name], [2]int{end, scope})
	}
}

// aliasNames are the names toks declare type aliases of (`typedef T N;`,
// `using N = T;`, `template <...> using N = ...;`), in any scope, and the
// library's alias templates (`conditional_t`). Where one names a type in a
// cast or a functional cast, the rewriter leaves what it stands for to
// clang, through metal::__emu::tmake, tcast and tstatic: a vector converts
// by value, as in Metal, whatever alias, base class or template it is
// reached through (docs/msl-subset.md). A name the unit also declares a
// function or variable of in some scope is left out, as its calls could
// not be told from casts.
func aliasNames(toks []token) map[string]bool {
	names := map[string]bool{}
	for n := range shimAliases() {
		names[n] = true
	}
	declared := declaredNames(toks)
	defer func() {
		for n := range declared {
			delete(names, n)
		}
	}()
	for i := 0; i < len(toks); i++ {
		switch {
		case toks[i].text == "using" && i+2 < len(toks) && toks[i+1].kind == tIdent && toks[i+2].text == "=":
			names[toks[i+1].text] = true
		case toks[i].text == "typedef":
			depth := 0
			for j := i + 1; j < len(toks); j++ {
				t := toks[j].text
				if t == "{" {
					break // a class's definition: no vector
				}
				switch t {
				case "(", "[", "<":
					depth++
				case ")", "]", ">":
					depth--
				case ">>":
					depth -= 2
				}
				if depth == 0 && (t == "," || t == ";") && toks[j-1].kind == tIdent {
					names[toks[j-1].text] = true
				}
				if t == ";" {
					break
				}
			}
		}
	}
	return names
}

// declaredNames are the names toks declare functions or variables of with
// a parenthesis (`float4 g(float v)`, `T v(a)`): a call of one is not a
// cast, whatever alias of that name another scope declares.
func declaredNames(toks []token) map[string]bool {
	declared := map[string]bool{}
	for i := 1; i+1 < len(toks); i++ {
		if toks[i].kind != tIdent || toks[i+1].text != "(" {
			continue
		}
		switch p := toks[i-1]; {
		case p.kind == tIdent && !notDeclarator[p.text], p.text == ">", p.text == "*", p.text == "&":
			declared[toks[i].text] = true
		}
	}
	return declared
}

// notDeclarator are the words a call, not a declaration, may follow
// (`return f(x)`), for aliasNames.
var notDeclarator = map[string]bool{"return": true, "case": true, "else": true, "do": true, "sizeof": true,
	"alignof": true, "decltype": true, "co_return": true, "throw": true, "typename": true, "operator": true,
	"static_cast": true, "reinterpret_cast": true, "const_cast": true, "using": true, "typedef": true,
	"template": true, "struct": true, "class": true, "new": true, "delete": true, "goto": true}

var (
	shimAliasOnce sync.Once
	shimAlias     map[string]bool
)

// shimAliases are the alias templates the library brings into metal
// (`using std::conditional_t;` in metal_stdlib).
func shimAliases() map[string]bool {
	shimAliasOnce.Do(func() {
		src, _ := runtimeFS.ReadFile("runtime/metal_stdlib")
		shimAlias = map[string]bool{}
		for _, line := range strings.Split(string(src), "\n") {
			if n, ok := strings.CutPrefix(line, "using std::"); ok && strings.HasSuffix(n, "_t;") {
				shimAlias[strings.TrimSuffix(n, ";")] = true
			}
		}
	})
	return shimAlias
}

// unqualified is the token after the `metal::` or `::metal::` at i, or i.
func (r *rewriter) unqualified(i int) int {
	switch {
	case r.text(i) == "metal" && r.text(i+1) == "::":
		return i + 2
	case r.text(i) == "::" && r.text(i+1) == "metal" && r.text(i+2) == "::":
		return i + 3
	}
	return i
}

// aliasType reads, at i, a name of aliasNames as a type (`F4`, `V4<float>`,
// `metal::conditional_t<...>`; not a member, a qualified name's part or a
// declaration's name) and returns its last token, or -1.
func (r *rewriter) aliasType(i int) int {
	if r.tok(i).kind != tIdent || !r.aliases[r.text(i)] {
		return -1
	}
	switch r.text(i - 1) {
	case ".", "->", "typename", "class", "struct", "enum", "operator", "~", "using", "typedef", "template":
		return -1
	case "::":
		if r.qualifiedStart(i) == i {
			return -1 // S::f4: typeName reads it from S
		}
	}
	if r.text(i+1) == "<" {
		if m := r.match(i + 1); m > 0 {
			return m
		}
		return -1
	}
	return i
}

var typeWords = map[string]bool{"unsigned": true, "signed": true, "long": true, "short": true, "int": true, "char": true}

// typeSpec scans the type after an address-space keyword at i and returns
// the index of the first token past it.
func (r *rewriter) typeSpec(i int) int {
	k := i + 1
	named := false
	lastWord := false
	for k < len(r.toks) {
		t := r.toks[k]
		if r.attrAt[k] != nil {
			break
		}
		switch {
		case t.text == "const" || t.text == "volatile" || t.text == "typename" || t.text == "struct" || t.text == "class" || t.text == "enum":
			k++
		case typeWords[t.text]:
			if named && !lastWord {
				return k
			}
			named, lastWord = true, true
			k++
		case t.kind == tIdent:
			if named {
				return k
			}
			named, lastWord = true, false
			k++
		case t.text == "::":
			named, lastWord = false, false
			k++
		case t.text == "<":
			m := r.match(k)
			if m < 0 {
				return k
			}
			k = m + 1
		default:
			return k
		}
	}
	return k
}

func (r *rewriter) addrSpace(i int) int {
	kw := r.toks[i]
	if r.memberQualifier(i) {
		if end := r.defaultedDup(i); end > 0 {
			return end
		}
		r.replace(i, i, "") // memberBody checks it at run time
		return i
	}
	if kw.text == "thread" {
		return r.threadSpace(i)
	}
	if kw.text == "constant" && r.atNamespaceScope() {
		if j, ok := r.constantDecl(i); ok {
			return j
		}
		r.constSpan(i)
	}
	k := r.typeSpec(i)
	stop := r.tok(k)
	drop := ""
	if kw.text == "constant" {
		drop = "const"
	}
	switch {
	case stop.text == "*" && k == i+1:
		// `float device* p`: the type comes first.
		j := i - 1
		for j >= 0 && (r.toks[j].kind == tIdent && r.toks[j].text != "return" || r.toks[j].text == "::") {
			j--
		}
		if j == i-1 || r.tok(j+1).text == "const" && j+1 == i-1 {
			r.fail(kw, "pointers to %s pointers are not supported by msl-emu", kw.text)
			return i
		}
		r.replace(j+1, k, r.ptrType(kw.text, r.src[r.toks[j+1].pos:r.toks[i-1].end]))
		return k
	case stop.text == "*":
		start := i
		cv := ""
		for j := i - 1; j >= 0 && (r.toks[j].text == "const" || r.toks[j].text == "volatile"); j-- {
			cv = r.toks[j].text + " " + cv
			start = j
		}
		r.replace(start, k, r.ptrType(kw.text, cv+r.src[r.toks[i+1].pos:r.toks[k-1].end]))
		return k
	case stop.kind == tIdent && r.text(k+1) == "[" && r.parens > 0 && !r.inFunction() && r.arrayParam(k+1):
		// `constant const int64_t strides[2]`, a parameter (MLX's
		// elem_to_loc_2): an array parameter is a pointer, which in an
		// address space is the checked one, as its arguments are.
		start := i
		cv := ""
		for j := i - 1; j >= 0 && (r.toks[j].text == "const" || r.toks[j].text == "volatile"); j-- {
			cv = r.toks[j].text + " " + cv
			start = j
		}
		r.replace(start, k-1, r.ptrType(kw.text, cv+r.src[r.toks[i+1].pos:r.toks[k-1].end]))
		r.replace(k+1, r.match(k+1), "")
		return r.match(k + 1)
	case stop.kind == tIdent && kw.text == "threadgroup" && r.inFunction() && r.parens == 0:
		if !r.inKernel(i) {
			// MSL allocates threadgroup variables in kernel functions only
			// (the specification's "Threadgroup Address Space").
			r.fail(kw, "threadgroup variable %s declared outside a kernel: Metal allocates threadgroup variables only in kernel functions (declare it in the kernel and pass a threadgroup pointer)", r.text(k))
			return i
		}
		return r.tgDecl(i, k)
	}
	if (stop.text == "&" || stop.text == "&&") && r.tok(k+1).kind == tIdent {
		// `device S& s`: the emulator's reference drops the space, which
		// an element's address passed to a template needs (addrArgs).
		r.spaced = append(r.spaced, spacedName{r.text(k + 1), spaceNum[kw.text], k + 1})
	}
	r.replace(i, i, drop)
	return i
}

// arrayParam reports whether the '[' at open closes a parameter's one
// array dimension: its ']' is followed by ',', ')' or a default argument.
func (r *rewriter) arrayParam(open int) bool {
	end := r.match(open)
	if end < 0 {
		return false
	}
	t := r.text(end + 1)
	return t == "," || t == ")" || t == "="
}

// spaceNum numbers the address spaces as the shim's ptr<T, AS> does.
var spaceNum = map[string]int{"device": 1, "constant": 2, "threadgroup": 3}

// threadSpace handles the `thread` keyword at i. A thread pointer is a
// plain pointer here, as is an address taken with & in any space, so a
// device or threadgroup address it takes would pass: where one becomes a
// thread pointer or reference, the shim checks it (metal_stdlib's
// thread_addr): a cast `(thread T*)e`, a declaration `thread T* p = e;` or
// `thread T& r = e;` and a function's `thread` pointer or reference
// parameter (docs/msl-subset.md).
func (r *rewriter) threadSpace(i int) int {
	k := r.typeSpec(i)
	j := k
	for r.text(j) == "*" || j > k && (r.text(j) == "const" || r.text(j) == "volatile") {
		j++
	}
	ref := j == k && r.text(k) == "&"
	if ref {
		j++
	}
	first := i // `const thread T*`
	if r.text(i-1) == "const" || r.text(i-1) == "volatile" {
		first = i - 1
	}
	name := r.tok(j).kind == tIdent
	if name && !ref && j > k && r.inFunction() && r.parens == 0 {
		if r.threadPtr == nil {
			r.threadPtr = map[string]bool{}
		}
		r.threadPtr[r.text(j)] = true
	}
	switch {
	case j == k:
	case !ref && r.text(j) == ")" && r.text(first-1) == "(":
		if end := r.threadCast(first-1, i, j); end > 0 {
			return end
		}
	case name && r.text(j+1) == "=" && r.inFunction() && r.parens == 0:
		// A const reference may bind a temporary: its address is not taken.
		if !ref || r.text(i-1) != "const" && !topLevelConst(r.src[r.toks[i+1].pos:r.toks[k-1].end]) {
			r.threadInit(j+2, ref, false)
		}
	case name && (r.text(j+1) == "," || r.text(j+1) == ")" || r.text(j+1) == "=") && r.parens > 0 && !r.inFunction():
		r.threadParam(i, j, ref)
	}
	r.replace(i, i, "")
	return i
}

// notTypeWords are the words that start a statement without naming a type,
// or name one that is no thread pointer's (auto and decltype deduce the
// address space, as Metal does).
var notTypeWords = map[string]bool{"return": true, "else": true, "do": true, "case": true, "default": true,
	"goto": true, "auto": true, "decltype": true, "typedef": true, "using": true, "sizeof": true,
	"device": true, "constant": true, "threadgroup": true, "thread": true}

// plainPtrDecl reports whether the '=' at eq initialises a pointer that a
// statement declares without an address space (`float* p = e;`,
// `const S* const p = e;`), which MSL makes a thread pointer.
func (r *rewriter) plainPtrDecl(eq int) bool {
	k := eq - 1
	if r.tok(k).kind != tIdent {
		return false
	}
	k--
	for r.text(k) == "const" || r.text(k) == "volatile" {
		k--
	}
	if r.text(k) != "*" {
		return false
	}
	for r.text(k) == "*" || r.text(k) == "const" || r.text(k) == "volatile" {
		k--
	}
	return r.typeFrom(k, true)
}

// typeFrom reports whether the tokens from k back to the statement's start
// (after `;`, `{` or `}`) are a type alone: words that are not
// notTypeWords, `::` and template arguments; a `const` among them makes it
// not one unless constOK.
func (r *rewriter) typeFrom(k int, constOK bool) bool {
	typ := false
	for ; k >= 0; k-- {
		t := r.tok(k)
		switch {
		case t.text == ";" || t.text == "{" || t.text == "}":
			return typ
		case t.text == ">":
			if k = r.matchBack(k); k < 0 {
				return false
			}
		case t.text == "::":
		case t.text == "const" && !constOK:
			return false
		case t.kind == tIdent && !notTypeWords[t.text]:
			typ = true
		default:
			return false
		}
	}
	return typ
}

// plainRefDecl reports whether the '=' at eq initialises a reference that
// a statement declares without an address space (`float& r = e;`), which
// MSL makes a thread reference. A const one may bind a temporary, whose
// address is not taken, and is left alone, as `thread const T&` is.
func (r *rewriter) plainRefDecl(eq int) bool {
	k := eq - 1
	if r.tok(k).kind != tIdent || r.text(k-1) != "&" {
		return false
	}
	return r.typeFrom(k-2, false)
}

// threadCast rewrites the cast `(thread T*)e` whose parentheses are at
// open and end into `thread_cast<T*>() * e`, as vcast does, unless they
// are a parameter list; it returns end, or -1.
func (r *rewriter) threadCast(open, kw, end int) int {
	prev := r.tok(open - 1)
	if prev.kind == tIdent && prev.text != "return" || prev.text == ")" || prev.text == "]" || prev.text == ">" {
		return -1
	}
	next := r.tok(end + 1)
	if !(next.kind == tIdent || next.kind == tNumber || next.text != "" && strings.Contains("(-+!~*&", next.text)) {
		return -1
	}
	typ := r.src[r.toks[open+1].pos:r.toks[kw].pos] + r.src[r.toks[kw+1].pos:r.toks[end-1].end]
	// Grouped with its operand alone, as vcast's: `*(thread T*)&x`, as
	// MLX's FromFP8 reads a byte as its struct, dereferences the cast.
	paren := ""
	if oe := r.castOperandEnd(end + 1); oe > 0 {
		paren = "("
		r.insertAfter(oe, ")")
	}
	r.replace(open, end, paren+"::metal::__emu::thread_cast<"+typ+" >() * ")
	r.parens-- // the walk counted the '(' and goes on after the ')'
	return end
}

// threadInit wraps the initialiser starting at token start of a thread
// pointer (or, ref, reference) declaration, and those of the declarators
// after it that are pointers or references, in the shim's check; with
// assign, the value assigned to one, alone. One whose end it cannot tell
// from a template argument's comma stays as it is.
func (r *rewriter) threadInit(start int, ref, assign bool) {
	for {
		end, angle := start, false
		for ; end < len(r.toks) && r.text(end) != ";" && r.text(end) != ","; end++ {
			switch r.text(end) {
			case "<":
				angle = true
			case "(", "[", "{":
				if end = r.match(end); end < 0 {
					return
				}
			}
		}
		if end >= len(r.toks) || end == start || angle && r.text(end) == "," {
			return
		}
		if one := r.text(start); end > start+1 || one != "0" && one != "nullptr" && one != "__null" {
			fn := "thread_addr("
			if ref {
				fn = "thread_ref("
			}
			p := r.toks[start].pos
			r.edits = append(r.edits, edit{p, p, "::metal::__emu::" + fn})
			r.insertAfter(end-1, ")")
		}
		if r.text(end) != "," || assign {
			return
		}
		k := end + 1
		ref = r.text(k) == "&"
		for r.text(k) == "*" || r.text(k) == "&" || r.text(k) == "const" {
			k++
		}
		if k > end+1 && !ref && r.tok(k).kind == tIdent && r.threadPtr != nil {
			r.threadPtr[r.text(k)] = true
		}
		if k == end+1 || r.tok(k).kind != tIdent || r.text(k+1) != "=" {
			return
		}
		start = k + 2
	}
}

// threadParam adds to the body of the function whose thread pointer (or,
// ref, reference) parameter is named at token name a check of the address
// it was given, naming the parameter's line. A declaration without a body,
// or with an initialiser list or trailing return type, gets none.
func (r *rewriter) threadParam(kw, name int, ref bool) {
	open := kw - 1
	for depth := 0; open >= 0; open-- {
		if t := r.text(open); t == ")" || t == "]" {
			depth++
		} else if t == "(" || t == "[" {
			if depth == 0 {
				break
			}
			depth--
		}
	}
	if r.text(open) != "(" {
		return
	}
	k := r.match(open) + 1
	for k > 0 && k < len(r.toks) {
		if a := r.attrAt[k]; a != nil {
			k = a.end + 1
			continue
		}
		t := r.text(k)
		if t != "const" && t != "volatile" && thisSpaces[t] == 0 && t != "noexcept" && t != "&" && t != "&&" && t != "override" && t != "final" {
			break
		}
		k++
	}
	if k <= 0 || r.text(k) != "{" {
		return
	}
	arg := r.text(name)
	if ref {
		arg = "__builtin_addressof(" + arg + ")"
	}
	t := r.toks[name]
	r.insertAfter(k, fmt.Sprintf(" ::metal::__emu::thread_check((const void *)%s, %q, %d);", arg, t.file, t.line))
}

// ptrType is the checked pointer type for a pointer to typ in address
// space as; constant memory is read-only.
func (r *rewriter) ptrType(as, typ string) string {
	if as == "constant" && !topLevelConst(typ) {
		typ = "const " + typ // not add_const_t: `constant T*` must still deduce T
	}
	return "::metal::__emu::ptr<" + typ + ", " + strconv.Itoa(spaceNum[as]) + ">"
}

// topLevelConst reports whether a type's text has `const` outside its
// template arguments.
func topLevelConst(typ string) bool {
	depth := 0
	word := ""
	for i := 0; i <= len(typ); i++ {
		c := byte(' ')
		if i < len(typ) {
			c = typ[i]
		}
		if isIdentChar(c) {
			word += string(c)
			continue
		}
		if word == "const" && depth == 0 {
			return true
		}
		word = ""
		switch c {
		case '<':
			depth++
		case '>':
			depth--
		}
	}
	return false
}

// kernelCall fails a call, at token i, of a kernel declared before it
// (`k(x, i)`, `k<float>(x, i)`): Metal's kernel functions are called by
// the host only.
func (r *rewriter) kernelCall(i int) {
	switch r.text(i - 1) {
	case ".", "->", "::":
		return // a member, or a name of another scope
	}
	j := i + 1
	if r.text(j) == "<" {
		if m := r.match(j); m > 0 {
			j = m + 1
		}
	}
	if r.text(j) == "(" {
		r.fail(r.toks[i], "kernel %s is called from a function: Metal's kernel functions cannot be called, only dispatched", r.text(i))
	}
}

// inKernel reports whether token i lies in a kernel's body.
func (r *rewriter) inKernel(i int) bool {
	return r.kernelKey(i) != "-"
}

// kernelKey is how the body of the kernel around token i names that
// kernel, "" if it cannot, "-" outside kernels.
func (r *rewriter) kernelKey(i int) string {
	for n, b := range r.kbodies {
		if i > b[0] && i < b[1] {
			return r.kkeys[n]
		}
	}
	return "-"
}

// templateArgs is `<T, N>` for the template parameter list between
// tokens open and close (`<typename T, int N = 4>`), "" when a parameter
// has no name.
func (r *rewriter) templateArgs(open, close int) string {
	var names []string
	for start := open + 1; start < close; {
		end, eq := start, -1
		for end < close && r.text(end) != "," {
			if t := r.text(end); t == "<" || t == "(" {
				if m := r.match(end); m > end {
					end = m
				}
			} else if t == "=" && eq < 0 {
				eq = end
			}
			end++
		}
		last := end - 1
		if eq >= 0 {
			last = eq - 1
		}
		if last <= start || r.tok(last).kind != tIdent || r.text(last) == "typename" || r.text(last) == "class" {
			return ""
		}
		n := r.text(last)
		if r.text(last-1) == "..." {
			n += "..."
		}
		names = append(names, n)
		start = end + 1
	}
	return "<" + strings.Join(names, ", ") + ">"
}

// tgDecl rewrites `threadgroup T a[N], b;` (tokens i..; at the ';') into
// references to the runtime's per-threadgroup storage.
func (r *rewriter) tgDecl(i, k int) int {
	typ := r.src[r.toks[i+1].pos:r.toks[k-1].end]
	var b strings.Builder
	j := k
	for {
		name := r.tok(j)
		if name.kind != tIdent {
			r.fail(name, "expected a threadgroup variable name")
			return j
		}
		j++
		dims := ""
		for r.text(j) == "[" {
			m := r.match(j)
			if m < 0 {
				r.fail(r.tok(j), "unbalanced [")
				return j
			}
			dims += r.src[r.toks[j].pos:r.toks[m].end]
			j = m + 1
		}
		if dims != "" {
			r.tgArrays = append(r.tgArrays, tgArray{name.text, k})
		} else {
			r.spaced = append(r.spaced, spacedName{name.text, 3, j - 1})
		}
		site := fmt.Sprintf("__emu_tgs%d", r.nSite)
		r.nSite++
		fmt.Fprintf(&b, "static const ::metal::__emu::TGSite %s{%q}; auto &%s = ::metal::__emu::tg_var<%s%s>(&%s); ",
			site, name.text, name.text, typ, dims, site)
		// The pipeline's static threadgroup memory is known before it runs
		// (docs/msl-subset.md, "Memory").
		if key := r.kernelKey(i); key != "" && key != "-" {
			fmt.Fprintf(&b, "(void)&::metal::__emu::TGReg<&%s, %d, sizeof(%s%s), alignof(%s%s)>::r; ",
				key, r.nSite-1, typ, dims, typ, dims)
		}
		switch r.text(j) {
		case ",":
			j++
			continue
		case ";":
			r.replace(i, j, b.String())
			return j
		case "=", "{":
			r.fail(r.tok(j), "threadgroup variables cannot be initialized")
			return j
		default:
			r.fail(r.tok(j), "unexpected %q in a threadgroup declaration", r.text(j))
			return j
		}
	}
}

// constantDecl handles program-scope `constant` declarations that involve
// function constants: the constants themselves, and constants computed
// from them, which must be recomputed whenever the values change.
func (r *rewriter) constantDecl(i int) (int, bool) {
	semi := i
	for semi < len(r.toks) && r.toks[semi].text != ";" {
		if t := r.toks[semi].text; t == "{" || t == "}" {
			return i, false
		}
		semi++
	}
	if semi >= len(r.toks) {
		return i, false
	}
	static := "static"
	if r.text(i-1) == "static" {
		static = ""
	}
	// constant T name [[function_constant(k)]];
	for j := i + 1; j < semi; j++ {
		a := r.attrAt[j]
		if a == nil {
			continue
		}
		fa := a.find("function_constant")
		if fa == nil {
			return i, false
		}
		idx, err := evalIntNames(fa.args, r.enums)
		if err != nil {
			r.fail(r.toks[j], "function_constant index: %v", err)
			return semi, true
		}
		name := r.tok(j - 1)
		if name.kind != tIdent || j-1 <= i+1 {
			r.fail(r.toks[j], "expected `constant T name [[function_constant(i)]];`")
			return semi, true
		}
		fc := &fcInfo{Name: name.text, Type: r.src[r.toks[i+1].pos:r.toks[j-2].end], Index: int(idx),
			File: name.file, Line: name.line, cname: r.qualify(name.text), defVar: fmt.Sprintf("__emu_fcdef%d", len(r.fcs))}
		r.fcs = append(r.fcs, fc)
		r.replace(i, i, static)
		r.replace(a.start, a.end, "")
		return semi, true
	}
	// constant T name = expression-using-function-constants;
	eq := -1
	for j := i + 1; j < semi; j++ {
		if r.toks[j].text == "=" {
			eq = j
			break
		}
	}
	if eq < 0 || r.tok(eq-1).kind != tIdent {
		return i, false
	}
	uses := false
	for j := eq + 1; j < semi; j++ {
		if r.toks[j].kind == tIdent && (r.fcByName(r.toks[j].text) != nil || r.derived[r.toks[j].text]) {
			uses = true
			break
		}
	}
	if !uses {
		return i, false
	}
	for j := i + 1; j < eq; j++ {
		if r.toks[j].text == "constexpr" {
			return i, false
		}
	}
	name := r.toks[eq-1].text
	fn := fmt.Sprintf("__emu_fcinit%d", len(r.derInits))
	r.derived[name] = true
	r.derInits = append(r.derInits, r.qualify(fn))
	r.replace(i, i, static)
	r.replace(eq, eq, fmt.Sprintf("; static void %s() { %s =", fn, name))
	r.replace(semi, semi, "; }")
	return i, true // the initializer is rewritten as usual
}

// constSpan notes the bytes of the program-scope constant whose
// declaration starts at the `constant` at i (`constant float t[16] =
// {...};`) with the runtime as the library loads, so that a constant
// pointer made from its address (`constant float* p = t;`) is held to
// them, and an access past them fails the dispatch where it read other
// memory (docs/msl-subset.md). A variable template, or a declaration of
// several names, is left out.
func (r *rewriter) constSpan(i int) {
	b := i - 1
	for r.text(b) == "static" || r.text(b) == "constexpr" || r.text(b) == "inline" || r.text(b) == "const" {
		b--
	}
	if r.text(b) == ">" {
		return // `template <class T> static constexpr constant bool v = ...;`
	}
	j := i
	for r.text(j+1) == "static" || r.text(j+1) == "constexpr" || r.text(j+1) == "inline" {
		j++ // `constexpr constant static T t[] = ...`
	}
	k := r.typeSpec(j)
	if r.tok(k).kind != tIdent {
		return
	}
	name := k
	if r.text(k+1) == "<" {
		return // a variable template's specialisation
	}
	semi := -1
	for j := k + 1; j < len(r.toks) && semi < 0; j++ {
		switch t := r.text(j); t {
		case "(", "[", "{":
			if j = r.match(j); j < 0 {
				return
			}
		case ",", "}", ")":
			return
		case ";":
			semi = j
		}
	}
	if semi < 0 {
		return
	}
	n := r.text(name)
	r.insertAfter(semi, fmt.Sprintf(" static const ::metal::__emu::const_span __emu_cspan_%s(&%s, sizeof(%s), %q);", n, n, n, n))
}

func (r *rewriter) fcByName(name string) *fcInfo {
	for k := len(r.fcs) - 1; k >= 0; k-- {
		if r.fcs[k].Name == name {
			return r.fcs[k]
		}
	}
	return nil
}

func (r *rewriter) fcDefined(i int) int {
	if r.text(i+1) != "(" || r.text(i+3) != ")" {
		r.fail(r.toks[i], "expected is_function_constant_defined(name)")
		return i
	}
	fc := r.fcByName(r.text(i + 2))
	if fc == nil {
		r.fail(r.toks[i+2], "%s is not a function constant", r.text(i+2))
		return i
	}
	fc.Guarded = true
	r.replace(i, i+3, "(::"+fc.defVar+")")
	return i + 3
}

// stringLiteral is the value of the string literal toks spell, adjacent
// literals joined as C++ joins them (`"softmax_" "float32"`, which a macro
// that pastes a kernel's name with #name writes), or "" where they are
// not all plain string literals.
func stringLiteral(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		s, err := strconv.Unquote(t.text)
		if t.kind != tString || err != nil {
			return ""
		}
		b.WriteString(s)
	}
	return b.String()
}

// kernel handles a kernel whose `kernel` keyword or [[kernel]] attribute is
// at token kw; its declaration continues at token i.
func (r *rewriter) kernel(i, kw int) {
	attrs, before := r.attrsBefore(kw)
	var hostName string
	maxThreads := 0
	collect := func(a *attrSpan) {
		if it := a.find("host_name"); it != nil {
			hostName = stringLiteral(it.args)
		}
		if it := a.find("max_total_threads_per_threadgroup"); it != nil {
			if v, err := evalIntNames(it.args, r.enums); err == nil {
				maxThreads = int(v)
			}
		}
	}
	for _, a := range attrs {
		collect(a)
	}
	for r.attrAt[i] != nil { // kernel [[attr]] void f
		collect(r.attrAt[i])
		i = r.attrAt[i].end + 1
	}
	instantiation := r.text(before) == "template"
	isTemplate := false
	if r.text(before) == ">" {
		if o := r.matchBack(before); o > 0 && r.text(o-1) == "template" {
			isTemplate = true
		}
	}
	semi := i
	paren := -1
	for semi < len(r.toks) && r.toks[semi].text != ";" && r.toks[semi].text != "{" {
		if r.toks[semi].text == "(" && paren < 0 && r.text(semi-1) != "decltype" {
			paren = semi
		}
		if r.toks[semi].text == "(" || r.toks[semi].text == "<" && r.toks[semi-1].kind == tIdent {
			if m := r.match(semi); m > 0 {
				semi = m
			}
		}
		semi++
	}
	if semi >= len(r.toks) {
		r.fail(r.toks[kw], "incomplete kernel declaration")
		return
	}
	// The kernel's name, with template arguments in an instantiation.
	nameEnd := semi - 1
	if paren >= 0 {
		nameEnd = paren - 1
	}
	nameStart := nameEnd
	if r.text(nameEnd) == ">" {
		nameStart = r.matchBack(nameEnd) - 1
	}
	for nameStart >= 2 && r.text(nameStart-1) == "::" && r.tok(nameStart-2).kind == tIdent {
		nameStart -= 2
	}
	if nameStart < i || r.tok(nameStart).kind != tIdent {
		r.fail(r.toks[kw], "cannot find the kernel's name")
		return
	}
	base := r.text(nameStart)
	for k := nameStart; k <= nameEnd && r.text(k+1) == "::"; k += 2 {
		base = r.text(k + 2)
	}
	expr := r.src[r.toks[nameStart].pos:r.toks[nameEnd].end]
	at := r.toks[kw]
	// The specification's function qualifiers: a kernel returns void, and
	// no function calls a kernel (kernelCall).
	if paren >= 0 && r.text(nameStart-1) != "void" {
		r.fail(at, "kernel %s must return void, as Metal's kernel functions do", base)
		return
	}
	if r.knames == nil {
		r.knames = map[string]bool{}
	}
	r.knames[base] = true

	if instantiation {
		if hostName == "" {
			r.fail(at, "a kernel template instantiation needs [[host_name(\"...\")]]")
			return
		}
		def := r.templates[base]
		if def == nil {
			r.fail(at, "no kernel template %s before its instantiation %s", base, hostName)
			return
		}
		if r.text(semi) != ";" {
			r.fail(at, "expected ';' after the instantiation of %s", hostName)
			return
		}
		mt := def.maxThreads
		if maxThreads > 0 {
			mt = maxThreads
		}
		r.addKernel(kernelInfo{Name: hostName, File: at.file, Line: at.line, Params: def.params, MaxThreads: mt, Uses: def.uses}, expr, semi)
		return
	}
	if paren < 0 {
		r.fail(at, "expected the kernel's parameter list")
		return
	}
	close := r.match(paren)
	params := r.params(paren, close)
	if r.err != nil {
		return
	}
	j := close + 1
	for r.attrAt[j] != nil {
		collect(r.attrAt[j])
		j = r.attrAt[j].end + 1
	}
	if r.text(j) != "{" {
		return // a prototype
	}
	body := r.match(j)
	if body < 0 {
		r.fail(at, "unbalanced braces in kernel %s", base)
		return
	}
	r.kbodies = append(r.kbodies, [2]int{j, body})
	key := expr
	if isTemplate {
		if ta := r.templateArgs(r.matchBack(before), before); ta != "" {
			key += ta
		} else {
			key = ""
		}
	}
	r.kkeys = append(r.kkeys, key)
	var uses []string
	seen := map[string]bool{}
	for k := j; k < body; k++ {
		if fc := r.fcByName(r.toks[k].text); fc != nil && r.toks[k].kind == tIdent && !seen[fc.Name] {
			seen[fc.Name] = true
			uses = append(uses, fc.Name)
		}
	}
	for _, p := range params {
		if p.FC != "" && !seen[p.FC] {
			seen[p.FC] = true
			uses = append(uses, p.FC)
		}
	}
	if isTemplate {
		r.templates[base] = &kdef{params: params, uses: uses, maxThreads: maxThreads}
		return
	}
	name := base
	if hostName != "" {
		name = hostName
	}
	r.addKernel(kernelInfo{Name: name, File: at.file, Line: at.line, Params: params, MaxThreads: maxThreads, Uses: uses}, expr, body)
}

// addKernel emits the trampoline right after token `after` (the kernel's
// closing brace or the instantiation's ';'), in the kernel's own scope, so
// template arguments resolve as in the kernel's source.
func (r *rewriter) addKernel(k kernelInfo, expr string, after int) {
	for _, o := range r.kernels {
		if o.Name == k.Name {
			r.fail(r.toks[after], "kernel %s defined twice (first at %s:%d)", k.Name, o.File, o.Line)
			return
		}
	}
	r.kernels = append(r.kernels, k)
	fn := fmt.Sprintf("__emu_k%d", r.nTramp)
	bn := fmt.Sprintf("__emu_bn%d", r.nTramp)
	r.nTramp++
	var args []string
	var names [31]string
	spaces := []byte(strings.Repeat("0", 31)) // each buffer's space, as spaceNum numbers it (ref_space)
	checks := r.positionChecks(k.Params)
	for i, p := range k.Params {
		pt := fmt.Sprintf("::metal::__emu::param_t<__F, %d>", i)
		switch p.Kind {
		case "buffer":
			unbound := "false" // whether the argument may stay unbound: its function constant is false
			if fc := r.fcByName(p.FC); fc != nil {
				unbound = "!bool(" + fc.cname + ")"
			}
			args = append(args, fmt.Sprintf("::metal::__emu::buf_arg<%s, %d>(__f, %q, %s)", pt, p.Index, p.Name, unbound))
			names[p.Index] = p.Name
			spaces[p.Index] = byte('0' + spaceNum[p.space])
		case "threadgroup":
			args = append(args, fmt.Sprintf("::metal::__emu::tg_arg<%s, %d>(__f, %q)", pt, p.Index, p.Name))
		case "position":
			args = append(args, fmt.Sprintf("::metal::__emu::pos_arg<%s, ::metal::__emu::%s>(__f)", pt, posAttrs[p.Pos]))
		}
	}
	var ns []string
	for _, n := range names {
		ns = append(ns, strconv.Quote(n))
	}
	kf := fmt.Sprintf("__emu_kf%d", r.nTramp-1)
	// The kernel stays a function of its own, so that a frame too large
	// (compileFlags) is reported at the kernel's line.
	code := fmt.Sprintf(" static void %s(::metal::__emu::Fiber *__f) { using __F = decltype(&%s); %s[[clang::noinline]] %s(%s); } static const char *const %s[31] = {%s};"+
		" static const void *%s() { return (const void *)&%s; }",
		fn, expr, checks, expr, strings.Join(args, ", "), bn, strings.Join(ns, ", "), kf, expr)
	r.insertAfter(after, code)
	r.entries = append(r.entries, fmt.Sprintf("{%q, &%s, %s, &%s, %q}", k.Name, r.qualify(fn), r.qualify(bn), r.qualify(kf), spaces))
}

// params reads a kernel's parameter list between the parentheses at open
// and close.
func (r *rewriter) params(open, close int) []paramInfo {
	var out []paramInfo
	var implicit []int // parameters Metal numbers itself
	var pos []posParam
	usedBuf := map[int]bool{}
	usedTG := map[int]bool{}
	start := open + 1
	for start < close {
		end := start
		for end < close && r.toks[end].text != "," {
			switch r.toks[end].text {
			case "(", "[", "{":
				end = r.match(end)
			case "<":
				if m := r.match(end); m > 0 && m < close {
					end = m
				}
			}
			end++
		}
		var p paramInfo
		var items []attrItem
		as := ""
		name := token{}
		var words []string // the type's tokens and the name
		for k := start; k < end; k++ {
			if a := r.attrAt[k]; a != nil {
				items = append(items, a.items...)
				k = a.end
				continue
			}
			t := r.toks[k]
			if t.text == "=" {
				break
			}
			switch t.text {
			case "device", "constant", "threadgroup":
				as = t.text
			}
			if t.kind == tIdent {
				name = t
			}
			words = append(words, t.text)
		}
		if name.kind != tIdent {
			if start < end && r.text(start) != "void" {
				r.fail(r.toks[start], "kernel parameter without a name")
				return nil
			}
			start = end + 1
			continue
		}
		p.Name, p.at, p.space = name.text, name, as
		for _, it := range items {
			switch {
			case it.name == "buffer" || it.name == "threadgroup":
				v, err := evalIntNames(it.args, r.enums)
				if err != nil || v < 0 || v > 30 {
					r.fail(name, "parameter %s: %s index must be an integer constant in [0, 30]", p.Name, it.name)
					return nil
				}
				p.Kind, p.Index = it.name, int(v)
			case it.name == "function_constant":
				if len(it.args) == 1 {
					p.FC = it.args[0].text
				}
			case posAttrs[it.name] != "":
				p.Kind, p.Pos = "position", it.name
			case it.name == "stage_in" || it.name == "texture" || it.name == "sampler" || it.name == "id" ||
				it.name == "visible_function_table" || it.name == "intersection_function_table" ||
				it.name == "instance_acceleration_structure" || it.name == "payload":
				r.fail(name, "parameter %s: [[%s]] is not supported by msl-emu", p.Name, it.name)
				return nil
			}
		}
		switch {
		case p.Kind == "buffer" && usedBuf[p.Index] || p.Kind == "threadgroup" && usedTG[p.Index]:
			r.fail(name, "parameter %s: %s(%d) is used twice", p.Name, p.Kind, p.Index)
			return nil
		case p.Kind == "buffer":
			usedBuf[p.Index] = true
		case p.Kind == "threadgroup":
			usedTG[p.Index] = true
		case p.Kind == "":
			// Metal numbers unattributed buffer and threadgroup arguments
			// itself, in order, skipping the indices given explicitly.
			switch as {
			case "device", "constant":
				p.Kind = "buffer"
			case "threadgroup":
				p.Kind = "threadgroup"
			default:
				r.fail(name, "kernel parameter %s has no [[buffer(n)]] or thread-position attribute", p.Name)
				return nil
			}
		}
		if ptr := strings.Contains(strings.Join(words, " "), "*") || strings.Contains(strings.Join(words, " "), "&"); ptr &&
			(p.Kind == "buffer" && as != "device" && as != "constant" || p.Kind == "threadgroup" && as != "threadgroup") {
			// The specification's restrictions: a kernel's pointer and
			// reference arguments are declared in an address space.
			want := "device or constant"
			if p.Kind == "threadgroup" {
				want = "threadgroup"
			}
			r.fail(name, "parameter %s: a kernel's [[%s]] pointer or reference must be declared %s", p.Name, p.Kind, want)
			return nil
		}
		if p.Kind != "position" && !hasIndexAttr(items) {
			implicit = append(implicit, len(out))
		}
		if p.Kind == "position" {
			pos = append(pos, posParam{p.Pos, posType(words[:len(words)-1]), name})
		}
		out = append(out, p)
		start = end + 1
	}
	if !r.checkPositions(pos) {
		return nil
	}
	for _, k := range implicit {
		used := usedBuf
		if out[k].Kind == "threadgroup" {
			used = usedTG
		}
		n := 0
		for used[n] {
			n++
		}
		used[n] = true
		out[k].Index = n
	}
	return out
}

// posParam is a thread-position parameter: its attribute, its type as
// posType reads it and its name.
type posParam struct {
	attr, typ string
	name      token
}

// posType reads a parameter's type tokens as "uint", "ushort2", ...: "" for
// a type it cannot name (an alias, a template parameter), "?" + the text for
// a known type that is no position type (int, uint4).
func posType(words []string) string {
	var ws []string
	for _, w := range words {
		switch w {
		case "const", "thread", "metal", "::":
		default:
			ws = append(ws, w)
		}
	}
	t := strings.Join(ws, " ")
	switch t {
	case "unsigned", "unsigned int", "uint32_t":
		return "uint"
	case "unsigned short", "uint16_t":
		return "ushort"
	}
	if len(ws) == 6 && ws[0] == "vec" && ws[1] == "<" && ws[3] == "," && ws[5] == ">" {
		t = ws[2] + ws[4] // vec<uint, 2>
	}
	switch t {
	case "uint", "ushort", "uint2", "uint3", "ushort2", "ushort3":
		return t
	}
	elem := strings.TrimRight(t, "234")
	if elem == "int" || elem == "short" || elem == "char" || elem == "uchar" || elem == "long" || elem == "ulong" ||
		elem == "float" || elem == "half" || elem == "bool" || elem == "uint" || elem == "ushort" ||
		t == "int32_t" || t == "int16_t" || t == "size_t" {
		return "?" + t
	}
	return ""
}

// gridPos are the thread-position attributes that may be vectors; the
// others are scalars.
var gridPos = map[string]bool{"thread_position_in_grid": true, "threads_per_grid": true, "grid_size": true,
	"thread_position_in_threadgroup": true, "threads_per_threadgroup": true, "threadgroup_position_in_grid": true,
	"dispatch_threads_per_threadgroup": true, "threadgroups_per_grid": true, "grid_origin": true}

// checkPositions holds a kernel's thread-position parameters to the types
// the MSL specification gives them ("Attributes for kernel function input
// arguments"; docs/msl-subset.md): ushort or uint, the grid ones also
// their 2- and 3-vectors; the vectors among [[thread_position_in_grid]],
// [[threads_per_grid]], [[thread_position_in_threadgroup]],
// [[threads_per_threadgroup]], [[threadgroup_position_in_grid]],
// [[dispatch_threads_per_threadgroup]] and [[threadgroups_per_grid]] of one
// size; thread_position_in_grid and threads_per_grid of one type, and
// thread_position_in_threadgroup, threads_per_threadgroup and
// dispatch_threads_per_threadgroup of one type; thread_index_in_threadgroup
// a uint where thread_position_in_threadgroup is uint-based.
func (r *rewriter) checkPositions(pos []posParam) bool {
	seen := map[string]posParam{}
	var vec *posParam
	for i, p := range pos {
		if strings.HasPrefix(p.typ, "?") || !gridPos[p.attr] && p.typ != "" && p.typ != "uint" && p.typ != "ushort" {
			want := "ushort or uint"
			if gridPos[p.attr] {
				want = "ushort, uint or their 2- or 3-vectors"
			}
			r.fail(p.name, "parameter %s: [[%s]] must be declared %s, not %s", p.name.text, p.attr, want, strings.TrimPrefix(p.typ, "?"))
			return false
		}
		if p.typ == "" {
			continue
		}
		seen[p.attr] = p
		if n := p.typ[len(p.typ)-1]; gridPos[p.attr] && p.attr != "grid_size" && p.attr != "grid_origin" && (n == '2' || n == '3') {
			if vec != nil && vec.typ[len(vec.typ)-1] != n {
				r.fail(p.name, "parameter %s: [[%s]] is a %s where [[%s]] is a %s: the vectors of a kernel's grid and threadgroup positions and sizes must have as many components", p.name.text, p.attr, p.typ, vec.attr, vec.typ)
				return false
			}
			vec = &pos[i]
		}
	}
	for _, group := range [][]string{{"thread_position_in_grid", "threads_per_grid"},
		{"thread_position_in_threadgroup", "threads_per_threadgroup", "dispatch_threads_per_threadgroup"}} {
		var first *posParam
		for _, a := range group {
			p, ok := seen[a]
			if !ok {
				continue
			}
			if first != nil && p.typ != first.typ {
				r.fail(p.name, "parameter %s: [[%s]] is a %s where [[%s]] is a %s: they must be declared with one type", p.name.text, p.attr, p.typ, first.attr, first.typ)
				return false
			}
			first = &p
		}
	}
	if tp, ok := seen["thread_position_in_threadgroup"]; ok && strings.HasPrefix(tp.typ, "uint") {
		if ti, ok := seen["thread_index_in_threadgroup"]; ok && ti.typ != "uint" {
			r.fail(ti.name, "parameter %s: [[thread_index_in_threadgroup]] must be a uint where [[thread_position_in_threadgroup]] is a %s", ti.name.text, tp.typ)
			return false
		}
	}
	return true
}

// positionChecks holds the thread-position parameters whose types
// checkPositions could not read (an alias, a template parameter) to the
// same rules, as static_asserts on the types clang resolved, in the
// kernel's trampoline: their messages name the parameter's line.
func (r *rewriter) positionChecks(params []paramInfo) string {
	var b strings.Builder
	check := func(p paramInfo, cond, format string, args ...any) {
		msg := fmt.Sprintf("%s:%d: parameter %s: ", p.at.file, p.at.line, p.Name) + fmt.Sprintf(format, args...)
		fmt.Fprintf(&b, "static_assert(%s, %s); ", cond, strconv.Quote(msg))
	}
	pt := func(i int) string { return fmt.Sprintf("::metal::__emu::param_t<__F, %d>", i) }
	at := map[string]int{}
	var grid []int
	for i, p := range params {
		if p.Kind != "position" {
			continue
		}
		if _, ok := at[p.Pos]; !ok {
			at[p.Pos] = i
		}
		if !gridPos[p.Pos] {
			check(p, fmt.Sprintf("::metal::__emu::pos_ok<%s, false>()", pt(i)), "[[%s]] must be declared ushort or uint", p.Pos)
			continue
		}
		check(p, fmt.Sprintf("::metal::__emu::pos_ok<%s, true>()", pt(i)), "[[%s]] must be declared ushort, uint or their 2- or 3-vectors", p.Pos)
		if p.Pos == "grid_size" || p.Pos == "grid_origin" {
			continue
		}
		for _, g := range grid {
			check(p, fmt.Sprintf("::metal::__emu::pos_same_size<%s, %s>()", pt(g), pt(i)),
				"[[%s]] and [[%s]] are vectors of different sizes: the vectors of a kernel's grid and threadgroup positions and sizes must have as many components", params[g].Pos, p.Pos)
		}
		grid = append(grid, i)
	}
	for _, group := range [][]string{{"thread_position_in_grid", "threads_per_grid"},
		{"thread_position_in_threadgroup", "threads_per_threadgroup", "dispatch_threads_per_threadgroup"}} {
		first := -1
		for _, a := range group {
			i, ok := at[a]
			if !ok {
				continue
			}
			if first >= 0 {
				check(params[i], fmt.Sprintf("std::is_same<::metal::__emu::bare_t<%s>, ::metal::__emu::bare_t<%s>>::value", pt(first), pt(i)),
					"[[%s]] and [[%s]] must be declared with one type", params[first].Pos, a)
			} else {
				first = i
			}
		}
	}
	if tp, ok := at["thread_position_in_threadgroup"]; ok {
		if ti, ok := at["thread_index_in_threadgroup"]; ok {
			check(params[ti], fmt.Sprintf("::metal::__emu::pos_index_ok<%s, %s>()", pt(tp), pt(ti)),
				"[[thread_index_in_threadgroup]] must be a uint where [[thread_position_in_threadgroup]] is uint-based")
		}
	}
	return b.String()
}

func hasIndexAttr(items []attrItem) bool {
	for _, it := range items {
		if it.name == "buffer" || it.name == "threadgroup" {
			return true
		}
	}
	return false
}

// apply applies the edits, keeping every newline of replaced text so that
// lines stay where the line markers say they are.
func (r *rewriter) apply() (string, error) {
	// At one position an insertion goes before a replacement: markStore
	// inserts before a token another rewrite may replace.
	sort.SliceStable(r.edits, func(a, b int) bool {
		ea, eb := r.edits[a], r.edits[b]
		return ea.start < eb.start || ea.start == eb.start && ea.end == ea.start && eb.end > eb.start
	})
	var b strings.Builder
	pos := 0
	for _, e := range r.edits {
		if e.start < pos {
			return "", fmt.Errorf("msl-emu internal error: overlapping rewrites at byte %d", e.start)
		}
		b.WriteString(r.src[pos:e.start])
		b.WriteString(e.text)
		if n := strings.Count(r.src[e.start:e.end], "\n") - strings.Count(e.text, "\n"); n > 0 {
			b.WriteString(strings.Repeat("\n", n))
		}
		pos = e.end
	}
	b.WriteString(r.src[pos:])
	return b.String(), nil
}

// Address spaces of `this`, as bits of the mask memberBody passes to the
// runtime's this_space.
var thisSpaces = map[string]int{"thread": 1, "device": 2, "constant": 4, "threadgroup": 8}

const allSpaces = 15

// memberDef is the first definition of a member function seen in a class:
// its check's edit, the address spaces declared so far and its body.
type memberDef struct {
	edit int
	mask int
	body string
	name string
	dups int
	ctor bool // a constructor: its object is where it is declared, and is not checked
}

// check is the statement the member's body starts with.
func (m *memberDef) check() string {
	if m.ctor {
		return " "
	}
	return thisCheck(m.mask, m.name)
}

// initListColon is the ':' that opens the constructor's member
// initialiser list whose last initialiser ends at j (`: re(x), im(0)`),
// or -1 where j ends no such list (a function's parameters).
func (r *rewriter) initListColon(j int) int {
	for {
		if t := r.text(j); t != ")" && t != "}" {
			return -1
		}
		o := r.matchBack(j)
		if o <= 0 || r.tok(o-1).kind != tIdent {
			return -1
		}
		switch r.text(o - 2) {
		case ",":
			j = o - 3
		case ":":
			switch r.text(o - 3) {
			case "public", "private", "protected":
				return -1 // `public: S() {`
			}
			return o - 2
		default:
			return -1
		}
	}
}

// memberQualifier reports whether the address-space keyword at i qualifies
// a member function (`float get() const device`) rather than a type.
func (r *rewriter) memberQualifier(i int) bool {
	if !r.inClass() || r.parens != 0 {
		return false
	}
	for j := i - 1; j >= 0; j-- {
		switch t := r.text(j); {
		case t == ")":
			return true
		case t == "const" || t == "volatile" || thisSpaces[t] != 0:
			continue
		default:
			return false
		}
	}
	return false
}

// defaultedDup removes the declaration around the address-space qualifier
// at i when it defaults or deletes a member that an earlier declaration of
// the class, for another space, already did (MLX's `_MLX_BFloat16()
// thread = default;` beside the `threadgroup` and `device` ones): without
// the spaces they would declare one member twice. It returns the ';' it
// ends at, or -1 where it leaves the declaration as it is.
func (r *rewriter) defaultedDup(i int) int {
	j := i
	for thisSpaces[r.text(j)] != 0 || r.text(j) == "const" || r.text(j) == "volatile" || r.text(j) == "&" || r.text(j) == "&&" || r.text(j) == "noexcept" {
		j++
	}
	if r.text(j) != "=" || r.text(j+1) != "default" && r.text(j+1) != "delete" || r.text(j+2) != ";" {
		return -1
	}
	start := i
	for start > 0 {
		if t := r.text(start - 1); t == ";" || t == "{" || t == "}" || t == ":" {
			break
		}
		start--
	}
	var key strings.Builder
	key.WriteString(strconv.Itoa(r.nsAt[len(r.nsAt)-1]))
	for k := start; k <= j+2; k++ {
		if thisSpaces[r.text(k)] == 0 {
			key.WriteString(" " + r.text(k))
		}
	}
	if r.defaulted == nil {
		r.defaulted = map[string]bool{}
	}
	if !r.defaulted[key.String()] {
		r.defaulted[key.String()] = true
		return -1
	}
	r.replace(start, j+2, "")
	return j + 2
}

// memberBody handles the '{' at i when it opens a member function's body.
// In MSL `this` has the address space the function is qualified with
// (thread when none), and calling it on an object in another space does not
// compile; C++ has no such rule, so the body starts with a run-time check of
// where `this` points. Overloads that differ only in their address spaces
// would be redefinitions in C++: the first keeps the union of their spaces
// and the others become never-chosen templates, so they must share a body.
// Overloads by the space of a reference parameter are spaceOverloads'. It
// reports whether the body is such a duplicate's.
func (r *rewriter) memberBody(i int) bool {
	qualifiers := func(j int) (int, int) { // the token before the qualifiers that end at j, their spaces
		mask := 0
		for ; j >= 0; j-- {
			t := r.text(j)
			if s := thisSpaces[t]; s != 0 {
				mask |= s
				continue
			}
			if t == "const" || t == "volatile" || t == "&" || t == "&&" || t == "noexcept" || t == "override" || t == "final" {
				continue
			}
			break
		}
		return j, mask
	}
	j, mask := qualifiers(i - 1)
	if colon := r.initListColon(j); colon > 0 {
		j, mask = qualifiers(colon - 1) // a constructor's: `S(U x) thread : v(x) {`
	}
	if r.text(j) != ")" {
		return false // not a function body
	}
	open := r.matchBack(j)
	if open <= 0 {
		return false
	}
	class := r.className()
	name := r.text(open - 1)
	if r.text(open-2) == "~" {
		return false // destructors
	}
	ctor := name == class
	if ctor && mask == 0 {
		return false // a constructor for thread objects, as C++ has it
	}
	if r.text(open-2) == "operator" {
		name = "operator " + name
	}
	start := open - 1
	for start > 0 {
		t := r.text(start - 1)
		if t == ";" || t == "{" || t == "}" || t == ":" {
			break
		}
		start--
	}
	for k := start; k < open; k++ {
		if t := r.text(k); t == "static" || t == "friend" {
			return false // no `this`: a static member function (MLX's fragments' helpers), a friend
		}
	}
	var key strings.Builder
	key.WriteString(strconv.Itoa(r.nsAt[len(r.nsAt)-1]))
	for k := start; k < i; k++ {
		// The spaces of `this` and of the return type; a parameter's stay.
		if thisSpaces[r.text(k)] == 0 || k > open && k < j {
			key.WriteString(" " + r.text(k))
		}
	}
	end := r.match(i)
	if end < 0 {
		return false
	}
	body := r.src[r.toks[i].pos:r.toks[end].end]
	if mask == 0 {
		mask = thisSpaces["thread"]
	}
	if r.members == nil {
		r.members = map[string]*memberDef{}
	}
	first := r.members[key.String()]
	if first == nil {
		def := &memberDef{edit: len(r.edits), mask: mask, body: body, name: class + "::" + name, ctor: ctor}
		r.members[key.String()] = def
		r.insertAfter(i, def.check())
		return false
	}
	if body != first.body {
		r.fail(r.toks[i], "msl-emu: overloads of %s that differ only in the address space of `this` must have the same body", first.name)
		return true
	}
	close := -1
	if r.text(start) == "template" && r.text(start+1) == "<" {
		if close = r.templateClose(start + 1); close < 0 || close >= open {
			r.fail(r.toks[i], "msl-emu: cannot read the template parameters of %s", first.name)
			return true
		}
	}
	first.mask |= mask
	r.edits[first.edit].text = first.check()
	first.dups++
	if close > 0 {
		// A member template (MLX's complex_t::operator U): the duplicate
		// takes a parameter that leaves it out of every call, so the first
		// one, which checks every space, is the one called.
		// Each duplicate's condition differs, so that no two are one
		// template redeclared.
		r.edits = append(r.edits, edit{r.toks[close].pos, r.toks[close].pos,
			fmt.Sprintf(", int __emu_dup = 0, ::std::enable_if_t<__emu_dup == -%d, int> = 0", first.dups)})
		return true
	}
	dup := "template <" + strings.TrimSuffix(strings.Repeat("int = 0, ", first.dups), ", ") + "> "
	r.edits = append(r.edits, edit{r.toks[start].pos, r.toks[start].pos, dup})
	return true
}

// templateClose is the '>' that closes the template parameter list whose
// '<' is at open, its default arguments' `&&` and `<` in brackets
// included (`typename = enable_if_t<!a<U> && b<T, U>>`), where match,
// which reads an expression's `<` too, gives up; or -1.
func (r *rewriter) templateClose(open int) int {
	depth := 0
	for j := open; j < len(r.toks); j++ {
		switch r.text(j) {
		case "(", "[":
			if j = r.match(j); j < 0 {
				return -1
			}
		case "<":
			depth++
		case ">":
			if depth--; depth == 0 {
				return j
			}
		case ";", "{", "}":
			return -1
		}
	}
	return -1
}

// thisCheck is the statement a member function's body starts with.
func thisCheck(mask int, name string) string {
	if mask == allSpaces {
		return " "
	}
	return fmt.Sprintf(" ::metal::__emu::this_space(this, %d, %q);", mask, name)
}

// className is the name of the class whose body is the innermost scope.
func (r *rewriter) className() string {
	for j := r.nsAt[len(r.nsAt)-1] - 1; j >= 0; j-- {
		switch r.text(j) {
		case "struct", "class", "union":
			if r.tok(j+1).kind == tIdent {
				return r.text(j + 1)
			}
			return ""
		case ";", "{", "}":
			return ""
		}
	}
	return ""
}

// divOps routes every integer division and remainder through the shim's
// check (metal_stdlib's div_check), which fails the dispatch at the line
// where the CPU's division would trap: a divisor lane of 0 (clang checks
// scalars only) or the lowest value over -1 (docs/msl-subset.md). `a / b`
// becomes `a /div_at()/ b`, which C++ groups as `(a / div_at()) / b`, so
// neither operand need be delimited here; the shim's operators divide as
// `a / b` does, and a type other than an integer passes unchecked. `a /= b`
// becomes `a /= div_into([&] { return a; }) = b`, where a reads plainly
// (compoundLHS); `p[k] /= b`, whose p or k may not be evaluated twice
// (`x[f(i)]`), `div_index(p, k) /= div_val() = b` (indexLHS); else `a /=
// div_into() = b`, which checks the divisor's lanes for 0 alone. A token
// another rewrite replaces is left as it is.
func (r *rewriter) divOps() {
	var spans [][2]int // the bytes other rewrites replace
	for _, e := range r.edits {
		if e.end > e.start {
			spans = append(spans, [2]int{e.start, e.end})
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a][0] < spans[b][0] })
	replaced := func(t token) bool { // the spans do not overlap (apply)
		k := sort.Search(len(spans), func(n int) bool { return spans[n][0] > t.pos }) - 1
		return k >= 0 && t.pos < spans[k][1]
	}
	for i, t := range r.toks {
		op := t.text
		if op != "/" && op != "%" && op != "/=" && op != "%=" || t.kind == tIdent || t.kind == tNumber ||
			r.text(i-1) == "operator" || replaced(t) {
			continue
		}
		at := "div"
		if op[0] == '%' {
			at = "rem"
		}
		if len(op) == 1 {
			r.insertAfter(i, " ::metal::__emu::"+at+"_at()"+op) // a space: `%:` is a digraph
			continue
		}
		get := ""
		if start := r.compoundLHS(i); start >= 0 {
			get = "[&]() { return " + r.src[r.toks[start].pos:r.toks[i-1].end] + "; }"
		} else if open, start := r.indexLHS(i); start >= 0 && !replaced(r.toks[open]) && !replaced(r.toks[i-1]) {
			// `b[k] /= d`, b or k not to be repeated: each runs once.
			r.edits = append(r.edits, edit{r.toks[start].pos, r.toks[start].pos, "::metal::__emu::div_index("})
			r.replace(open, open, ", ")
			r.replace(i-1, i-1, ")")
			r.insertAfter(i, " ::metal::__emu::"+at+"_val() =")
			continue
		} else if start, split, ok := r.objectLHS(i); ok && !replaced(r.toks[start]) && !replaced(r.toks[i-1]) &&
			(split == i || !replaced(r.toks[split])) {
			// `P.m /= d`, `*P /= d`: P runs once, the rest reads plainly.
			pre, obj := "", start
			for r.text(obj) == "*" {
				pre += "*"
				obj++
			}
			suffix := ""
			if split < i {
				suffix = r.src[r.toks[split].pos:r.toks[i-1].end]
			}
			lam := ", [&](auto &&__o, auto &__d) { return " + pre + "__o"
			tail := " " + op + " __d.dividend([&]() { return " + pre + "__o" + suffix + "; }); })"
			if pre != "" {
				r.replace(start, obj-1, "::metal::__emu::div_obj(")
			} else {
				r.edits = append(r.edits, edit{r.toks[start].pos, r.toks[start].pos, "::metal::__emu::div_obj("})
			}
			if split < i {
				r.edits = append(r.edits, edit{r.toks[split].pos, r.toks[split].pos, lam})
				r.replace(i-1, i-1, r.text(i-1)+tail)
			} else {
				r.replace(i-1, i-1, r.text(i-1)+lam+tail)
			}
			r.insertAfter(i, " ::metal::__emu::"+at+"_val() =")
			continue
		}
		r.insertAfter(i, " ::metal::__emu::"+at+"_into("+get+") =")
	}
}

// objectLHS reads the left side of the compound assignment at k that
// neither compoundLHS nor indexLHS takes as `*...* P suffix`: P a postfix
// expression that may not be evaluated twice (`a[f(i)]`, `f(i)`), suffix
// the members and plain subscripts after it (`.y`, `->v[2].x`), which
// compoundLHS could repeat, and the stars, if any, its dereferences. It
// returns the first token (a star or P's), suffix's first (k where there
// is none) and whether there is something to evaluate once: a suffix,
// stars or a call.
func (r *rewriter) objectLHS(k int) (start, split int, ok bool) {
	split = k
	for j := k - 1; ; {
		switch t := r.tok(j); {
		case t.kind == tIdent && !notPrimary[t.text] && (r.text(j-1) == "." || r.text(j-1) == "->"):
			split, j = j-1, j-2
			continue
		case t.text == "]":
			m := r.matchBack(j)
			if m < 1 || m == j-1 || !r.plainTokens(m+1, j) || r.text(m-1) == "[" {
				break
			}
			split, j = m, m-1
			continue
		}
		break
	}
	start = r.postfixStart(split - 1)
	if start < 0 || notPrimary[r.text(start)] {
		return -1, -1, false
	}
	stars := start
	for r.text(stars-1) == "*" {
		stars--
	}
	if p := r.text(stars - 1); !lhsBefore[p] && !assignOps[p] {
		return -1, -1, false
	}
	return stars, split, split < k || stars < start || r.text(split-1) == ")"
}

// plainTokens reports whether tokens from..to (exclusive) are names,
// numbers and plainIndexOps alone, which read the same when repeated.
func (r *rewriter) plainTokens(from, to int) bool {
	for n := from; n < to; n++ {
		switch x := r.tok(n); {
		case x.kind == tIdent && !notPrimary[x.text], x.kind == tNumber:
		case plainIndexOps[x.text]:
		default:
			return false
		}
	}
	return true
}

// compoundLHS returns the first token of the left side of the compound
// assignment at k when it reads plainly, so repeating it reads the same
// place again with no other effect: a name, then members (`.x`, `->y`) and
// subscripts of names, numbers and arithmetic (`acc[i + 1].x`), or -1.
func (r *rewriter) compoundLHS(k int) int {
	j := k - 1
	for {
		t := r.tok(j)
		switch {
		case t.text == "]":
			m := r.matchBack(j)
			if m < 0 {
				return -1
			}
			for n := m + 1; n < j; n++ {
				switch x := r.tok(n); {
				case x.kind == tIdent && !notPrimary[x.text], x.kind == tNumber:
				case plainIndexOps[x.text]:
				default:
					return -1
				}
			}
			j = m - 1
		case t.kind == tIdent && !notPrimary[t.text]:
			switch r.text(j - 1) {
			case ".", "->", "::":
				j -= 2
				continue
			}
			for r.text(j-1) == "*" && lhsBefore[r.text(j-2)] { // *p /= d
				j--
			}
			if p := r.text(j - 1); !lhsBefore[p] && !assignOps[p] {
				return -1 // the name goes on a longer expression: `&`, a cast, `::`
			}
			return j
		default:
			return -1
		}
	}
}

// indexLHS returns the '[' and the first token of the left side of the
// compound assignment at k when it is a subscript of a postfix expression
// (`x[2 * min(i, 1u)]`, `s.a[f(i)]`, `f(p)[k]`), or -1s.
func (r *rewriter) indexLHS(k int) (open, start int) {
	if r.text(k-1) != "]" {
		return -1, -1
	}
	open = r.matchBack(k - 1)
	if open < 1 || r.text(open-1) == "[" {
		return -1, -1
	}
	start = r.postfixStart(open - 1)
	if start < 0 || notPrimary[r.text(start)] {
		return -1, -1
	}
	if p := r.text(start - 1); !lhsBefore[p] && !assignOps[p] {
		return -1, -1
	}
	return open, start
}

// lhsBefore are the tokens an assignment's left side may follow.
var lhsBefore = map[string]bool{";": true, "{": true, "}": true, ")": true, "else": true, "do": true, ":": true,
	"(": true, ",": true, "?": true, "return": true, "&&": true, "||": true}

// plainIndexOps are the operators a subscript compoundLHS repeats may hold.
var plainIndexOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "&": true, "|": true,
	"^": true, "<<": true, ">>": true, ".": true, "->": true, "::": true, "[": true, "]": true}

// maybeTemplate reports whether the token at i may name a template, so
// that a '<' after it may open template arguments: a name the unit or the
// shim declares a template of (templateNames), a name qualified by a scope
// the rewriter does not look into (`std::`, `T::`), `template` and the
// casts; not a variable's, a number or a bracket's.
func (r *rewriter) maybeTemplate(i int) bool {
	t := r.tok(i)
	if t.kind != tIdent {
		return false
	}
	switch p := r.text(i - 1); {
	case p == "template":
		return true
	case p == "::" && r.tok(i-2).kind == tIdent && r.text(i-2) != "metal":
		return true
	}
	return r.tmplNames[t.text] || shimTemplates()[t.text] || castWords[t.text]
}

var scalarTypes = map[string]bool{"bool": true, "char": true, "uchar": true, "short": true, "ushort": true, "int": true,
	"uint": true, "long": true, "ulong": true, "half": true, "bfloat": true, "float": true}

var castWords = map[string]bool{"static_cast": true, "reinterpret_cast": true, "const_cast": true,
	"dynamic_cast": true, "template": true, "operator": true}

// templateNames are the names that templates among toks declare: a class,
// alias, variable or function after `template <...>` (`template <class T>
// struct S`, `template <int N> using V = ...`, `template <class T> T f(`),
// a template template parameter's, and a name `using std::` brings in.
func templateNames(toks []token) map[string]bool {
	names := map[string]bool{}
	text := func(i int) string {
		if i < 0 || i >= len(toks) {
			return ""
		}
		return toks[i].text
	}
	skip := func(i int) int { // past the brackets opening at i
		open := toks[i].text
		close := map[string]string{"(": ")", "[": "]", "{": "}", "<": ">"}[open]
		for d := 0; i < len(toks); i++ {
			switch toks[i].text {
			case open:
				d++
			case close:
				if d--; d == 0 {
					return i
				}
			case ";", "{", "}":
				if open == "<" {
					return i
				}
			}
		}
		return i
	}
	for i := 0; i < len(toks); i++ {
		if text(i) == "using" && text(i+1) == "std" && text(i+2) == "::" && i+3 < len(toks) && toks[i+3].kind == tIdent {
			names[text(i+3)] = true
		}
		// The shim declares families of function templates by macros
		// named MSL_EMU_..., each naming the function first.
		if strings.HasPrefix(text(i), "MSL_EMU_") && text(i+1) == "(" && i+2 < len(toks) && toks[i+2].kind == tIdent &&
			!swizzleName(text(i+2)) && !scalarTypes[text(i+2)] {
			names[text(i+2)] = true
		}
		if text(i) != "template" || text(i+1) != "<" {
			continue
		}
		j := skip(i+1) + 1
		last := ""
	decl:
		for ; j < len(toks); j++ {
			t := toks[j]
			switch {
			case t.text == "template" && text(j+1) == "<":
				j = skip(j + 1)
			case t.text == "struct" || t.text == "class" || t.text == "union" || t.text == "using":
				n := j + 1
				for text(n) == "alignas" || text(n) == "__attribute__" || text(n) == "[" {
					if text(n) != "[" {
						n++
					}
					n = skip(n) + 1
				}
				if n < len(toks) && toks[n].kind == tIdent {
					names[text(n)] = true
				}
				break decl
			case t.text == "<" || t.text == "[":
				j = skip(j)
			case t.text == "(":
				if last == "decltype" || last == "alignas" || last == "__attribute__" || last == "sizeof" {
					j = skip(j)
					continue
				}
				if last != "" && text(j-2) != "operator" {
					names[last] = true
				}
				break decl
			case t.text == "=" || t.text == ";" || t.text == "{":
				if last != "" {
					names[last] = true // a variable template
				}
				break decl
			case t.kind == tIdent:
				last = t.text
			}
		}
	}
	return names
}

var (
	shimTmplOnce sync.Once
	shimTmpl     map[string]bool
)

// shimTemplates are the names the shim (metal_stdlib) declares templates
// of: MSL's library, in which a kernel's `<` after such a name opens
// template arguments.
func shimTemplates() map[string]bool {
	shimTmplOnce.Do(func() {
		src, _ := runtimeFS.ReadFile("runtime/metal_stdlib")
		toks, err := lex(stripComments(string(src)))
		if err != nil {
			panic("msl-emu: the shim does not lex: " + err.Error())
		}
		shimTmpl = templateNames(toks)
	})
	return shimTmpl
}

// stripComments blanks the comments of C++ source (which lex, reading
// preprocessed text, does not expect), keeping its lines.
func stripComments(src string) string {
	b := []byte(src)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"' || b[i] == '\'':
			q := b[i]
			for i++; i < len(b) && b[i] != q && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for ; i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

// tgArray is a threadgroup array a function declares: its name and the
// token of its declaration.
type tgArray struct {
	name string
	decl int
}

// tgArgs passes a threadgroup array that a call takes by its bare name
// (`f(buf)`, `f(n, buf)`) as the threadgroup pointer it decays to in Metal
// (metal_stdlib's to_ptr): the array is a class of the shim's, from which
// a function template's `threadgroup T*` parameter (ptr<T, 3>) deduces no
// T, and clang refused the call. A sizeof, alignof or decltype's operand
// stays the array.
func (r *rewriter) tgArgs() {
	for _, a := range r.tgArrays {
		end := len(r.toks)
		for _, b := range r.bodies {
			if b[0] < a.decl && a.decl < b[1] {
				end = b[1]
			}
		}
		for i := a.decl + 1; i < end; i++ {
			if r.text(i) != a.name || r.tok(i).kind != tIdent {
				continue
			}
			if p, n := r.text(i-1), r.text(i+1); p != "(" && p != "," || n != ")" && n != "," {
				continue
			}
			open := r.enclosing(i)
			callee := r.tok(open - 1)
			if r.text(open) != "(" || callee.kind != tIdent && callee.text != ">" || notCallee[callee.text] {
				continue
			}
			if callee.text == ">" { // a cast's operand stays: `reinterpret_cast<threadgroup half*>(buf)`
				if m := r.matchBack(open - 1); m < 0 || castWords[r.text(m-1)] {
					continue
				}
			}
			t := r.toks[i]
			overlap := false
			for _, e := range r.edits {
				if e.start < t.end && t.pos < e.end || e.start == e.end && t.pos < e.start && e.start < t.end {
					overlap = true
				}
			}
			if !overlap {
				r.replace(i, i, "::metal::__emu::to_ptr("+a.name+")")
			}
		}
	}
}

// spacedName is a reference or threadgroup variable declared in an address
// space (`device S& s`, `threadgroup S t;`), whose type in the emulator
// does not say it: its name, space (as ptr<T, AS> numbers it) and token.
type spacedName struct {
	name  string
	space int
	decl  int
}

// addrArgs passes an address of an element that a call of a function
// template the unit declares takes as an argument (`&x[i]`, `&x[i][j]`,
// `&s.a[i]`, `&p->a[i]`, `&(*p).a[i]`, `&p[k].a[i]`, `&p->f`) as the pointer of its
// address space (metal_stdlib's addr_arg), as Metal types it: the
// emulator's `&x[i]` is a plain pointer, from which the template's `device
// T*` or `threadgroup T*` parameter (ptr<T, AS>) deduces no T. The space is
// that of the innermost pointer the element is reached through, which the
// shim reads from the types of the address's prefixes (`p`, `p->a`), or
// else the root name's (spacedName; thread where none). Other calls keep
// the plain pointer, whose conversion to a pointer of another space the
// shim checks when it runs (docs/msl-subset.md).
func (r *rewriter) addrArgs() {
	for i := 0; i+2 < len(r.toks); i++ {
		if r.text(i) != "&" || r.tok(i+1).kind != tIdent && r.text(i+1) != "(" {
			continue
		}
		if p := r.text(i - 1); p != "(" && p != "," {
			continue
		}
		// The prefixes end before each member access or subscript.
		var cuts []int
		root, end, paren := i+1, i+2, -1
		if r.text(i+1) == "(" {
			// `&(*p).a[i]`: the prefixes in p's expression, p itself (the
			// pointer dereferenced), then those after the parentheses.
			paren = r.match(i + 1)
			if paren < 0 || r.text(i+2) != "*" || r.tok(i+3).kind != tIdent {
				continue
			}
			root = i + 3
			var past int
			if cuts, past = r.addrCuts(i + 4); past != paren {
				continue
			}
			cuts = append(cuts, paren)
			end = paren + 1
		}
		more, end := r.addrCuts(end)
		cuts = append(cuts, more...)
		if n := r.text(end); n != ")" && n != "," || len(cuts) == 0 {
			continue
		}
		open := r.enclosing(i)
		if open < 1 || r.text(open) != "(" {
			continue
		}
		callee := open - 1
		if r.text(callee) == ">" { // f<float>(&x[i])
			if m := r.matchBack(callee); m > 0 {
				callee = m - 1
			}
		}
		if r.tok(callee).kind != tIdent || !r.tmplNames[r.text(callee)] || notCallee[r.text(callee)] {
			continue
		}
		start, stop := r.toks[i].pos, r.toks[end-1].end
		overlap := false
		for _, e := range r.edits {
			if e.start < r.toks[root].end && r.toks[i+1].pos < e.end || e.start < start && start < e.end || e.start < stop && stop < e.end {
				overlap = true
			}
		}
		if overlap {
			continue
		}
		// The prefixes are read in decltype alone, unevaluated: the
		// address's own subscripts run once.
		args := strconv.Itoa(r.rootSpace(root))
		for _, c := range cuts {
			from := r.toks[root].pos
			if c > paren && paren >= 0 {
				from = r.toks[i+1].pos // `(*p).a`
			}
			args += ", decltype((" + r.src[from:r.toks[c].pos] + "))"
		}
		r.edits = append(r.edits, edit{start, start, "::metal::__emu::addr_arg<" + args + ">("})
		r.insertAfter(end-1, ")")
	}
}

// addrCuts reads the member accesses and subscripts from token end on
// (`.a[i]`, `->v`), returning the token each starts at and the token past
// them.
func (r *rewriter) addrCuts(end int) (cuts []int, past int) {
	for {
		t := r.text(end)
		if (t == "." || t == "->") && r.tok(end+1).kind == tIdent {
			cuts = append(cuts, end)
			end += 2
			continue
		}
		if t != "[" {
			return cuts, end
		}
		m := r.match(end)
		if m < 0 {
			return cuts, end
		}
		cuts = append(cuts, end)
		end = m + 1
	}
}

// rootSpace is the address space the name at token i was declared in as a
// reference or threadgroup variable (spacedName), in the function body it
// lies in, or 0.
func (r *rewriter) rootSpace(i int) int {
	space := 0
	for _, s := range r.spaced {
		if s.name != r.text(i) || s.decl >= i {
			continue
		}
		// Its scope: the function body it lies in, or whose parameter it is.
		in := false
		for _, b := range r.bodies {
			if b[1] < s.decl {
				continue
			}
			if b[0] < s.decl {
				in = b[0] < i && i < b[1]
			} else if _, params := r.functionBody(b[0]); params >= 0 && params == r.enclosing(s.decl) {
				in = b[0] < i && i < b[1]
			}
			break
		}
		if in {
			space = s.space
		}
	}
	return space
}

// constSwizzles rewrites the swizzle reads (`v.x`, `k.yx`) and subscript
// reads (`v[2]`) in constexpr code, a constexpr variable's initialiser, a
// constexpr function's body and a static_assert's condition, and in what
// must be a constant expression elsewhere, an array bound and (subscripts
// alone) a template's arguments, into metal::__emu::cx_swz and cx_idx, which read them in a
// constant expression where clang (19) evaluates no vector swizzle or
// element; elsewhere, and on what is no vector (a struct's field named x,
// an array), they read as written. An assignment's target stays as
// written.
func (r *rewriter) constSwizzles() {
	for i := 0; i < len(r.toks); i++ {
		if t := r.text(i); t == "[" && r.arrayBound(i) {
			if m := r.match(i); m > 0 {
				r.constReads(i, m, true)
				i = m
			}
			continue
		} else if t == "<" && i > 0 && r.tok(i-1).kind == tIdent && r.maybeTemplate(i-1) {
			if m := r.angleArgs(i, false); m > 0 {
				r.constReads(i, m, true) // nested arguments too, once
				i = m
			}
			continue
		}
		from, to := -1, -1
		switch r.text(i) {
		case "static_assert":
			if r.text(i+1) == "(" {
				from, to = i+1, r.match(i+1)
			}
		case "case": // a label's value, up to its ':'
			from, to = i, r.caseEnd(i)
		case "if": // if constexpr (...)
			if r.text(i+1) == "constexpr" && r.text(i+2) == "(" {
				from, to = i+2, r.match(i+2)
			}
		case "enum": // the enumerators' values
			for j := i + 1; j < len(r.toks) && r.text(j) != ";"; j++ {
				if r.text(j) == "{" {
					from, to = j, r.match(j)
					break
				}
			}
		}
		if from >= 0 {
			r.constReads(from, to, true)
			if to > i {
				i = to
			}
			continue
		}
		if r.text(i) != "constexpr" || r.text(i-1) == "if" {
			continue
		}
	scan:
		for j := i + 1; from < 0 && j < len(r.toks); j++ {
			switch r.text(j) {
			case "=":
				from, to = j, j
				for to < len(r.toks) && r.text(to) != ";" {
					if t := r.text(to); t == "(" || t == "[" || t == "{" {
						if to = r.match(to); to < 0 {
							return
						}
					}
					to++
				}
				break scan
			case "{":
				from, to = j, r.match(j)
				break scan
			case "(":
				m := r.match(j)
				if m < 0 {
					return
				}
				if t := r.text(m + 1); t == ";" || t == "," {
					from, to = j, m
					break scan
				}
				for k := m + 1; k < len(r.toks) && r.text(k) != ";"; k++ {
					if r.text(k) == "{" {
						from, to = k, r.match(k)
						break
					}
				}
				break scan
			case ";", "}":
				break scan
			case "<", "[":
				if m := r.match(j); m > 0 {
					j = m
				}
			}
		}
		if from >= 0 {
			r.constReads(from, to, true)
		}
		if to > i {
			i = to
		}
	}
}

// caseEnd is the ':' ending the case label at i (a `?`'s ':' skipped), or -1.
func (r *rewriter) caseEnd(i int) int {
	cond := 0
	for j := i + 1; j < len(r.toks); j++ {
		switch r.text(j) {
		case "(", "[", "{":
			if j = r.match(j); j < 0 {
				return -1
			}
		case "?":
			cond++
		case ":":
			if cond == 0 {
				return j
			}
			cond--
		case ";", "}":
			return -1
		}
	}
	return -1
}

// constReads rewrites the subscript reads, and with swizzles the swizzle
// reads, between tokens from and to (exclusive), right to left, so that of
// `v.xy.x` or `v[1][0]` the outer read wraps the inner.
func (r *rewriter) constReads(from, to int, swizzles bool) {
	for j := to - 1; from >= 0 && j > from; j-- {
		if r.text(j) == "." && r.tok(j+1).kind == tIdent && swizzles {
			r.constSwizzle(j)
		} else if r.text(j) == "[" {
			r.constIndex(j)
		}
	}
}

// arrayBound reports whether the '[' at i bounds an array a declaration
// declares: it follows the declared name, which follows a type's last word
// or template arguments (`float a[N]`, `array<int, 2> b[N]`); an
// expression's subscript follows an operator or a statement's start.
func (r *rewriter) arrayBound(i int) bool {
	if r.tok(i-1).kind != tIdent || notTypeWords[r.text(i-1)] || r.text(i+1) == "[" || r.text(i-1) == "operator" {
		return false
	}
	p := r.tok(i - 2)
	return p.kind == tIdent && !notTypeWords[p.text] && p.text != "operator" || p.text == ">" && r.matchBack(i-2) >= 0
}

// postfixStart is the first token of the postfix expression that ends at
// token end (`a.b[i].c`, `f(x)`, `(e)`), or -1.
func (r *rewriter) postfixStart(end int) int {
	j := end
	for j >= 0 {
		t := r.text(j)
		if t == ")" || t == "]" || t == ">" {
			m := r.matchBack(j)
			if m < 0 {
				return -1
			}
			j = m - 1
			if t == ">" || r.tok(j).kind == tIdent {
				continue
			}
			j = m
			break
		}
		if r.tok(j).kind != tIdent || notTypeWords[t] && t != "auto" {
			return -1
		}
		if p := r.text(j - 1); p == "." || p == "->" || p == "::" {
			j -= 2
			continue
		}
		break
	}
	return j
}

// constRead reports whether the read of the postfix expression from token
// start to token end (inclusive), followed by the token after end, may be
// wrapped: it is no assignment's target, no operand of &, ++ or --, and no
// other edit replaces text around it.
func (r *rewriter) constRead(start, end int) bool {
	switch r.text(end + 1) {
	case "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--":
		return false
	}
	if start < 0 {
		return false
	}
	if p := r.text(start - 1); p == "&" || p == "++" || p == "--" {
		return false
	}
	s, e := r.toks[start].pos, r.toks[end].end
	for _, ed := range r.edits {
		if ed.start < s && s < ed.end || ed.start < e && e < ed.end {
			return false
		}
	}
	return true
}

// constIndex rewrites the subscript read whose '[' is at open, `v[k]`
// becoming `::metal::__emu::cx_idx(v, k)`. A subscript that declares an
// array (its bound, after a type and a name) stays.
func (r *rewriter) constIndex(open int) {
	m := r.match(open)
	if m < 0 || m == open+1 || r.text(open+1) == "[" || r.text(open-1) == "[" {
		return
	}
	start := r.postfixStart(open - 1)
	if start < 0 || r.arrayBound(open) || !r.constRead(start, m) {
		return
	}
	for _, e := range r.edits {
		if e.end > e.start && (e.start < r.toks[open].end && r.toks[open].pos < e.end || e.start < r.toks[m].end && r.toks[m].pos < e.end) {
			return
		}
	}
	r.edits = append(r.edits, edit{r.toks[start].pos, r.toks[start].pos, "::metal::__emu::cx_idx("})
	r.replace(open, open, ", ")
	r.replace(m, m, ")")
}

// constSwizzle rewrites the swizzle read whose '.' is at dot, if it is one.
func (r *rewriter) constSwizzle(dot int) {
	name := r.text(dot + 1)
	idx := make([]string, 0, 4)
	for _, set := range []string{"xyzw", "rgba"} {
		idx = idx[:0]
		for _, c := range name {
			if k := strings.IndexRune(set, c); k >= 0 {
				idx = append(idx, strconv.Itoa(k))
			}
		}
		if len(idx) == len(name) {
			break
		}
	}
	if len(name) > 4 || len(idx) != len(name) || r.text(dot+2) == "(" {
		return
	}
	// The operand: a postfix expression, `a.b[i].c`, `f(x)`, `(e)`.
	j := r.postfixStart(dot - 1)
	if !r.constRead(j, dot+1) {
		return
	}
	for k := r.enclosing(j); k > 0; k = r.enclosing(k) {
		if r.text(k) == "(" && r.text(k-1) == "decltype" {
			return // the type of what is written
		}
	}
	start := r.toks[j].pos
	r.edits = append(r.edits, edit{start, start, "::metal::__emu::cx_swz<" + strings.Join(idx, ", ") + ">("})
	r.insertAfter(dot+1, ", ::__emu_swz_"+name+"{})")
	r.replace(dot, dot+1, "")
	if r.swizzles == nil {
		r.swizzles = map[string]bool{}
	}
	r.swizzles[name] = true
}

// swizzleReaders defines, for each swizzle name constSwizzle read, the
// function object cx_swz reads it with outside a constant expression (and
// from what is no clang vector): a class at namespace scope, where a
// lambda could not stand in a template's arguments (C++17).
func (r *rewriter) swizzleReaders() string {
	names := make([]string, 0, len(r.swizzles))
	for n := range r.swizzles {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "struct __emu_swz_%s { template <class Q> constexpr auto operator()(const Q &__q) const { return ::metal::__emu::swz_value(__q.%s); } };\n", n, n)
	}
	return b.String()
}

// notCallee are the words before a '(' that opens no call's arguments.
var notCallee = map[string]bool{"sizeof": true, "alignof": true, "decltype": true, "alignas": true, "if": true,
	"while": true, "for": true, "switch": true, "return": true, "static_assert": true, "__builtin_addressof": true,
	"catch": true, "noexcept": true}
