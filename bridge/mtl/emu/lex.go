package emu

import (
	"fmt"
	"strconv"
	"strings"
)

// The lexer reads clang's preprocessed output: no comments, no macros, but
// line markers ("# 12 \"rms.metal\" 2") that say where each line came from,
// which is how errors found here name the .metal file and line.

type tkind uint8

const (
	tIdent tkind = iota
	tNumber
	tString
	tChar
	tPunct
)

type token struct {
	kind     tkind
	text     string
	pos, end int // byte range in the source
	file     string
	line     int
}

// puncts are the multi-character punctuators, longest first.
var puncts = []string{"...", "<<=", "::", "->", "++", "--", "<<", "<=", ">=", "==", "!=", "&&", "||",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##"}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits preprocessed source into tokens. '>' is always a single token
// so that template argument lists close one level at a time.
func lex(src string) ([]token, error) {
	var toks []token
	file, line := "", 1
	bol := true
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			line++
			bol = true
			i++
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			line++
			i += 2
			continue
		case c == '#' && bol:
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			if f, l, ok := parseMarker(src[i : i+j]); ok {
				file, line = f, l-1 // the newline ending the marker moves to line l
			}
			i += j
			continue
		}
		bol = false
		start := i
		t := token{pos: i, file: file, line: line}
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentChar(src[i]) {
				i++
			}
			// u8"..", L'..' and friends are one literal.
			if i < len(src) && (src[i] == '"' || src[i] == '\'') && isStringPrefix(src[start:i]) {
				q := src[i]
				var err error
				if i, err = skipQuoted(src, i, q); err != nil {
					return nil, fmt.Errorf("%s:%d: %v", file, line, err)
				}
				t.kind = tString
				if q == '\'' {
					t.kind = tChar
				}
			} else {
				t.kind = tIdent
			}
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			i++
			for i < len(src) {
				d := src[i]
				if (d == '+' || d == '-') && strings.IndexByte("eEpP", src[i-1]) >= 0 {
					i++
					continue
				}
				if isIdentChar(d) || d == '.' || d == '\'' && i+1 < len(src) && isIdentChar(src[i+1]) {
					i++
					continue
				}
				break
			}
			t.kind = tNumber
		case c == '"' || c == '\'':
			var err error
			if i, err = skipQuoted(src, i, c); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", file, line, err)
			}
			t.kind = tString
			if c == '\'' {
				t.kind = tChar
			}
		default:
			t.kind = tPunct
			n := 1
			for _, p := range puncts {
				if strings.HasPrefix(src[i:], p) {
					n = len(p)
					break
				}
			}
			i += n
		}
		t.end = i
		t.text = src[start:i]
		toks = append(toks, t)
	}
	return toks, nil
}

func isStringPrefix(s string) bool {
	switch s {
	case "u8", "u", "U", "L", "R", "u8R", "uR", "UR", "LR":
		return true
	}
	return false
}

func skipQuoted(src string, i int, q byte) (int, error) {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1, nil
		case '\n':
			return 0, fmt.Errorf("unterminated literal")
		}
	}
	return 0, fmt.Errorf("unterminated literal")
}

// parseMarker reads `# 12 "file" ...` and `#line 12 "file"`.
func parseMarker(s string) (string, int, bool) {
	s = strings.TrimSpace(strings.TrimPrefix(s, "#"))
	s = strings.TrimPrefix(s, "line")
	s = strings.TrimSpace(s)
	sp := strings.IndexByte(s, ' ')
	if sp < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(s[:sp])
	if err != nil {
		return "", 0, false
	}
	rest := strings.TrimSpace(s[sp:])
	if len(rest) < 2 || rest[0] != '"' {
		return "", 0, false
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", 0, false
	}
	f, err := strconv.Unquote(rest[:end+2])
	if err != nil {
		f = rest[1 : end+1]
	}
	return f, n, true
}

// evalInt evaluates the integer constant expressions MSL puts in attributes
// ([[buffer(FC_BASE + 1)]] after macro expansion).
func evalInt(toks []token) (int64, error) { return evalIntNames(toks, nil) }

// evalIntNames is evalInt where an identifier, or a qualified E::A, names
// the value that names holds for it: the enumerators of enumConsts.
func evalIntNames(toks []token, names map[string]int64) (int64, error) {
	p := &exprParser{toks: toks, names: names}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if p.i != len(toks) {
		return 0, fmt.Errorf("unexpected %q", toks[p.i].text)
	}
	return v, nil
}

type exprParser struct {
	toks  []token
	i     int
	names map[string]int64
}

var binPrec = map[string]int{"|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}

func (p *exprParser) peekOp() (string, int) {
	if p.i >= len(p.toks) {
		return "", 0
	}
	t := p.toks[p.i].text
	if t == ">" && p.i+1 < len(p.toks) && p.toks[p.i+1].text == ">" {
		return ">>", 2
	}
	if _, ok := binPrec[t]; ok {
		return t, 1
	}
	return "", 0
}

func (p *exprParser) expr(minPrec int) (int64, error) {
	l, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op, n := p.peekOp()
		if op == "" || binPrec[op] <= minPrec {
			return l, nil
		}
		p.i += n
		r, err := p.expr(binPrec[op])
		if err != nil {
			return 0, err
		}
		switch op {
		case "|":
			l |= r
		case "^":
			l ^= r
		case "&":
			l &= r
		case "<<":
			l <<= uint(r)
		case ">>":
			l >>= uint(r)
		case "+":
			l += r
		case "-":
			l -= r
		case "*":
			l *= r
		case "/", "%":
			if r == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			if op == "/" {
				l /= r
			} else {
				l %= r
			}
		}
	}
}

func (p *exprParser) unary() (int64, error) {
	if p.i >= len(p.toks) {
		return 0, fmt.Errorf("missing operand")
	}
	t := p.toks[p.i]
	p.i++
	switch {
	case t.text == "-" || t.text == "+" || t.text == "~":
		v, err := p.unary()
		switch t.text {
		case "-":
			v = -v
		case "~":
			v = ^v
		}
		return v, err
	case t.text == "(":
		v, err := p.expr(0)
		if err != nil {
			return 0, err
		}
		if p.i >= len(p.toks) || p.toks[p.i].text != ")" {
			return 0, fmt.Errorf("missing )")
		}
		p.i++
		return v, nil
	case t.kind == tNumber:
		s := strings.TrimRight(strings.ReplaceAll(t.text, "'", ""), "uUlL")
		v, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("not an integer: %s", t.text)
		}
		return v, nil
	case t.kind == tIdent:
		name := t.text
		for p.i+1 < len(p.toks) && p.toks[p.i].text == "::" && p.toks[p.i+1].kind == tIdent {
			name += "::" + p.toks[p.i+1].text
			p.i += 2
		}
		if v, ok := p.names[name]; ok {
			return v, nil
		}
		return 0, fmt.Errorf("%q is not an integer constant", name)
	}
	return 0, fmt.Errorf("%q is not an integer constant", t.text)
}

// enumConsts are the values of the enumerators declared in toks, by name
// and by Enum::name (a scoped enum's by the latter alone), so that an
// attribute may index from them, as `[[function_constant(FC_MUL_MV + 1)]]`
// with FC_MUL_MV an enumerator. An enumerator whose value is no constant
// expression here ends its enum's list: those after it are unknown.
func enumConsts(toks []token) map[string]int64 {
	names := map[string]int64{}
	for i := 0; i < len(toks); i++ {
		if toks[i].text != "enum" || toks[i].kind != tIdent {
			continue
		}
		j := i + 1
		scoped := j < len(toks) && (toks[j].text == "class" || toks[j].text == "struct")
		if scoped {
			j++
		}
		tag := ""
		if j < len(toks) && toks[j].kind == tIdent {
			tag = toks[j].text
			j++
		}
		if j < len(toks) && toks[j].text == ":" {
			for j < len(toks) && toks[j].text != "{" && toks[j].text != ";" {
				j++
			}
		}
		if j >= len(toks) || toks[j].text != "{" {
			continue // an opaque declaration, or a variable of an enum type
		}
		next := int64(0)
		for j++; j < len(toks) && toks[j].text != "}"; {
			if toks[j].kind != tIdent {
				break
			}
			name := toks[j].text
			j++
			v := next
			if j < len(toks) && toks[j].text == "=" {
				k, depth := j+1, 0
				for ; k < len(toks); k++ {
					switch toks[k].text {
					case "(", "[", "{":
						depth++
					case ")", "]":
						depth--
					}
					if depth == 0 && (toks[k].text == "," || toks[k].text == "}") {
						break
					}
				}
				var err error
				if v, err = evalIntNames(toks[j+1:k], names); err != nil {
					break
				}
				j = k
			}
			if !scoped {
				names[name] = v
			}
			if tag != "" {
				names[tag+"::"+name] = v
			}
			next = v + 1
			if j < len(toks) && toks[j].text == "," {
				j++
			}
		}
		i = j
	}
	return names
}
