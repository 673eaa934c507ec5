package emu

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Functions overloaded by the address space of a reference parameter
// (MLX's `operator+=(thread complex64_t& a, ...)` beside the `device` and
// `threadgroup` ones) would be redefinitions in C++, where the emulator's
// references drop the space. spaceOverloads keeps every definition,
// each made a template that a first template parameter, which no call
// deduces, selects (`template <int __emu_sp, enable_if_t<__emu_sp == 4,
// int> = 0>`), and adds after the last one the function calls reach: one
// with the first's declaration, spaces dropped, whose body asks the
// runtime where each reference argument lies (metal_stdlib's ref_space)
// and calls the definition for that space, as Metal's overload
// resolution picks the one for the argument's (docs/msl-subset.md).

// spaceDef is a function definition with a reference parameter: its
// tokens and its parameters' spaces.
type spaceDef struct {
	start, open, close, body, end int // the declaration's first token, the parameters' ( and ), the body's { and }
	tmpl, tmplClose               int // its template header's < and >, or -1
	name                          string
	spaces                        []int    // per parameter: -1 not a reference, else 0 thread, 1 device, 2 constant, 3 threadgroup
	names                         []string // per parameter, "" where it has none
	variadic                      bool
}

// noteSpaceDef notes the function definition whose body opens at the '{'
// at i and parameters at open when it takes a reference: a free function
// or a member function (not a constructor or a friend).
func (r *rewriter) noteSpaceDef(i, open int) {
	if open < 1 {
		return
	}
	close := r.match(open)
	end := r.match(i)
	if close < 0 || end < 0 {
		return
	}
	d := &spaceDef{open: open, close: close, body: i, end: end, tmpl: -1, tmplClose: -1}
	switch {
	case r.text(open-2) == "operator":
		d.name = "operator" + r.text(open-1)
	case r.tok(open-1).kind == tIdent && r.text(open-2) != "::" && r.text(open-2) != "~":
		d.name = r.text(open - 1)
	default:
		return
	}
	if r.inClass() && d.name == r.className() {
		return // a constructor, which no call names
	}
	d.start = open - 1
	for d.start > 0 {
		if t := r.text(d.start - 1); t == ";" || t == "{" || t == "}" || t == ":" {
			break
		}
		d.start--
	}
	for k := d.start; k < open; k++ {
		if r.text(k) == "friend" {
			return // a friend, which its explicit template arguments would not name
		}
	}
	if r.text(d.start) == "template" && r.text(d.start+1) == "<" {
		d.tmpl = d.start + 1
		if d.tmplClose = r.templateClose(d.tmpl); d.tmplClose < 0 || d.tmplClose > open {
			return
		}
	}
	var key strings.Builder
	scope := -1
	if n := len(r.nsAt); n > 0 {
		scope = r.nsAt[n-1]
	}
	key.WriteString(strconv.Itoa(scope))
	// The return type's space, where it returns a reference, is dropped.
	retRef := false
	for k := d.start; k < open; k++ {
		if t := r.text(k); (t == "&" || t == "&&") && k > d.tmplClose {
			retRef = true
		}
	}
	for k := d.start; k < open; k++ {
		if w := spaceKeyWord(r.text(k), retRef && k > d.tmplClose); w != "" {
			key.WriteString(" " + w)
		}
	}
	refs := false
	for ps := open + 1; ps < close; {
		pe, eq := ps, -1
		for ; pe < close && r.text(pe) != ","; pe++ {
			switch t := r.text(pe); t {
			case "(", "[", "{", "<":
				if m := r.match(pe); m > pe && m < close {
					pe = m
				}
			case "=":
				if eq < 0 {
					eq = pe
				}
			case "...":
				d.variadic = true
			}
		}
		last := pe
		if eq >= 0 {
			last = eq
		}
		space, ref := 0, false
		for k := ps; k < last; k++ {
			switch t := r.text(k); {
			case t == "&" || t == "&&":
				ref = true
			case t == "*":
				ref = false // a pointer, or a reference to one, keeps its type's space
			case spaceNum[t] != 0:
				space = spaceNum[t]
			}
		}
		if !ref {
			space = -1
		} else {
			refs = true
		}
		name := ""
		if last-1 > ps && r.tok(last-1).kind == tIdent && r.text(last-2) != "::" {
			name = r.text(last - 1)
		}
		d.spaces = append(d.spaces, space)
		d.names = append(d.names, name)
		for k := ps; k <= pe && k <= close; k++ {
			if w := spaceKeyWord(r.text(k), ref && k < last); w != "" {
				key.WriteString(" " + w)
			}
		}
		ps = pe + 1
	}
	if !refs {
		return
	}
	for k := close + 1; k < i; k++ {
		key.WriteString(" " + r.text(k))
	}
	if r.spaceDefs == nil {
		r.spaceDefs = map[string][]*spaceDef{}
	}
	k := key.String()
	if r.spaceDefs[k] == nil {
		r.spaceKeys = append(r.spaceKeys, k)
	}
	r.spaceDefs[k] = append(r.spaceDefs[k], d)
}

// spaceKeyWord is t as the key of an overload set spells it: a reference's
// address space dropped (ref), as the emulator's references drop it, and
// constant read as the const it becomes.
func spaceKeyWord(t string, ref bool) string {
	if !ref || thisSpaces[t] == 0 {
		return t
	}
	if t == "constant" {
		return "const"
	}
	return ""
}

// spaceOverloads rewrites each overload set noteSpaceDef found whose
// definitions differ in their references' spaces alone (see the top).
func (r *rewriter) spaceOverloads() {
	for _, key := range r.spaceKeys {
		defs := r.spaceDefs[key]
		if len(defs) < 2 || r.err != nil {
			continue
		}
		d1 := defs[0]
		at := r.toks[defs[1].body]
		if d1.variadic || slices.Contains(d1.names, "") {
			r.fail(at, "msl-emu: overloads of %s by the address space of a reference need named parameters and no ...", d1.name)
			return
		}
		if d1.tmpl >= 0 && d1.tmplClose == d1.tmpl+1 {
			r.fail(at, "msl-emu: explicit specialisations of %s overloaded by address space are not supported", d1.name)
			return
		}
		head, ok := r.rewritten(r.toks[d1.start].pos, r.toks[d1.body].pos)
		if !ok {
			r.fail(at, "msl-emu: cannot read the declaration of %s to choose among its overloads by address space", d1.name)
			return
		}
		targs := ""
		if d1.tmpl >= 0 {
			if a := r.templateArgs(d1.tmpl, d1.tmplClose); a != "" {
				targs = ", 0, " + strings.TrimSuffix(strings.TrimPrefix(a, "<"), ">")
			}
		}
		var args []string
		for _, n := range d1.names {
			args = append(args, "static_cast<decltype("+n+") &&>("+n+")")
		}
		var refs []int
		for j, s := range d1.spaces {
			if s >= 0 {
				refs = append(refs, j)
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, " %s { const int __emu_s[] = {", head)
		for n, j := range refs {
			if n > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "::metal::__emu::ref_space(__builtin_addressof(%s))", d1.names[j])
		}
		b.WriteString("};")
		seen := map[int]bool{}
		var declared []string
		for _, d := range defs {
			code, conds, spaces := 0, []string{}, []string{}
			for n, j := range refs {
				s := d.spaces[j]
				code = code*4 + s
				spaces = append(spaces, spaceWord[s])
				conds = append(conds, fmt.Sprintf("__emu_s[%d] == %d", n, s))
			}
			declared = append(declared, "("+strings.Join(spaces, ", ")+")")
			if seen[code] {
				continue // a redefinition, which clang reports
			}
			seen[code] = true
			hdr := fmt.Sprintf("int __emu_sp, ::std::enable_if_t<__emu_sp == %d, int> = 0", code)
			if d.tmpl >= 0 {
				r.insertAfter(d.tmpl, hdr+", ")
			} else {
				p := r.toks[d.start].pos
				r.edits = append(r.edits, edit{p, p, "template <" + hdr + "> "})
			}
			fmt.Fprintf(&b, " if (%s) return %s <%d%s>(%s);", strings.Join(conds, " && "), d1.name, code, targs, strings.Join(args, ", "))
		}
		code := 0
		for _, j := range refs {
			code = code*4 + d1.spaces[j]
		}
		fmt.Fprintf(&b, " ::metal::__emu::no_space_overload(%q, %q, %d, __emu_s, %d, %q); return %s <%d%s>(%s); }",
			d1.name, at.file, r.toks[d1.open].line, len(refs), strings.Join(declared, ", "), d1.name, code, targs, strings.Join(args, ", "))
		r.insertAfter(defs[len(defs)-1].end, b.String())
	}
}

var spaceWord = []string{"thread", "device", "constant", "threadgroup"}

// rewritten is the source between byte positions from and to with the
// edits that lie within them applied, on one line, or false where an edit
// crosses either end or a line marker lies between.
func (r *rewriter) rewritten(from, to int) (string, bool) {
	var es []edit
	for _, e := range r.edits {
		switch {
		case e.start >= from && e.end <= to && e.start < to:
			es = append(es, e)
		case e.start < to && e.end > from:
			return "", false
		}
	}
	sort.SliceStable(es, func(a, b int) bool {
		ea, eb := es[a], es[b]
		return ea.start < eb.start || ea.start == eb.start && ea.end == ea.start && eb.end > eb.start
	})
	var b strings.Builder
	pos := from
	for _, e := range es {
		if e.start < pos {
			return "", false
		}
		b.WriteString(r.src[pos:e.start])
		b.WriteString(e.text)
		pos = e.end
	}
	b.WriteString(r.src[pos:to])
	s := b.String()
	for _, l := range strings.Split(s, "\n")[1:] {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			return "", false
		}
	}
	return strings.ReplaceAll(s, "\n", " "), true
}
