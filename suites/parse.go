package suites

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/mtlbench/mtlbench/internal/homepath"
	"github.com/mtlbench/mtlbench/internal/listarg"
	"github.com/mtlbench/mtlbench/internal/metrics"
)

var (
	suiteNameRE = regexp.MustCompile(`^[a-z0-9-]+$`)
	caseNameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	yamlLineRE  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// Timings are the timing modes a suite's timing (and run --timing) may
// name: throughput (whole steps) and profile (each op timed apart).
var Timings = []string{"throughput", "profile"}

// benchModelFlags are the bench flags that set a key of the model section,
// which --set does not: bench draws no other seed, so an error about seed
// names none.
var benchModelFlags = map[string]string{"preset": "-m", "path": "-m", "weights": "--synthetic", "dtype": "--dtype", "fit": "--fit"}

var (
	topKeys   = []string{"name", "description", "model", "backend", "timing", "repetitions", "warmup", "interleave", "cooldown", "thresholds", "params", "cases"}
	modelKeys = []string{"preset", "path", "weights", "dtype", "seed", "layers", "fit"}
	caseKeys  = []string{"name", "kind", "op", "params", "matrix"}
	backends  = []string{"auto", "cpu", "metal", "metal-emu", "cuda"}
	weights   = []string{"synthetic", "checkpoint"}
	dtypes    = []string{"f32", "f16", "bf16"}
	// ModelDTypes, the dtypes a suite's model and bench --dtype take, adds
	// the packed formats a preset's synthetic weights may take (runner/model
	// QuantFormats); history import --dtype takes the same.
	ModelDTypes = []string{"f32", "f16", "bf16", "q2", "q3", "q4", "q5", "q6", "q8", "nvfp4", "mxfp8", "q4_k_m", "q5_k_m", "q8_0", "iq2_xxs", "iq3_xxs"}
	fits        = []string{"strict", "truncate-layers"}
	kinds       = []string{KindModel, KindKernel}
)

// maxWork bounds the map entries and list items visited, counting each
// visit through an alias or merge key again, so a small file built from
// nested aliases cannot make parsing blow up.
const maxWork = 1 << 20

type parser struct {
	file   string
	s      *Suite
	errs   errs
	budget int
	// aliased is whether the suite holds an alias, through which the
	// budget's entries may be read many times over: its error says which.
	aliased bool
	// said holds case errors already given for one group and parameter,
	// so a matrix does not repeat them for each of its points.
	said map[string]bool
	// keyAt is where the suite's params name each of them.
	keyAt map[string]Pos
	// thresholdAt is each threshold's metric name in the file.
	thresholdAt map[string]Pos
}

// entry is one key of a mapping, with merge keys ("<<") already applied.
type entry struct {
	key  string
	k, v *yaml.Node
}

// group is one entry of cases: before matrix expansion.
type group struct {
	name    string
	kind    string
	pos     Pos
	namePos Pos
	fixed   map[string]Value // case params, plus op: when given
	mkeys   []string         // matrix keys as written
	mvals   [][]Value
	ok      bool // no errors inside the entry; only these are expanded
}

func parse(file string, data []byte) (*Suite, error) {
	sum := sha256.Sum256(data)
	s := &Suite{
		File:        file,
		Hash:        hex.EncodeToString(sum[:]),
		Backend:     "auto",
		Timing:      "throughput",
		Repetitions: 5,
		Warmup:      1,
		Interleave:  true,
		Positions:   map[string]Pos{},
	}
	p := &parser{file: file, s: s, budget: maxWork}
	root, err := p.decode(data)
	if err != nil {
		return s, err
	}
	// A tag refused is said alone: what its value then fails would be
	// said at the same place, of a value not as the file meant it.
	if p.tags(root, true, map[*yaml.Node]bool{}); len(p.errs.list) > 0 {
		return s, p.errs.err()
	}
	p.suite(root)
	return s, p.errs.err()
}

// tagError is tags' first error of a value given outside a file (a
// --set, a flag), message and hint; "" for none.
func tagError(n *yaml.Node) string {
	q := &parser{}
	if q.tags(n, false, map[*yaml.Node]bool{}); len(q.errs.list) == 0 {
		return ""
	}
	e := q.errs.list[0]
	return e.Msg + " (" + e.Hint + ")"
}

// coreTags are the tags of YAML 1.2's core schema, which a suite's values
// are read as, and the merge key's.
var coreTags = []string{"!!str", "!!int", "!!float", "!!bool", "!!null", "!!map", "!!seq", "!!merge"}

// tags refuses a value tagged with a tag outside the core schema (!env,
// !!binary): nothing reads it, so the value would be taken as written and
// not as the tag says. Values under the top level's "x-" keys are the
// suite's to ignore, unless an alias takes them elsewhere; each node is
// visited once.
func (p *parser) tags(n *yaml.Node, top bool, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	if n.Kind == yaml.AliasNode {
		p.aliased = true
		p.tags(n.Alias, false, seen)
		return
	}
	if t := n.ShortTag(); n.Style&yaml.TaggedStyle != 0 && !slices.Contains(coreTags, t) {
		p.errorf(n, "a suite's values are read as YAML 1.2's core types (text, numbers, true/false, null, lists and maps): remove the tag",
			"YAML tag %s is not read here", show(t))
	}
	for i, c := range n.Content {
		if top && n.Kind == yaml.MappingNode && i%2 == 1 && strings.HasPrefix(n.Content[i-1].Value, "x-") {
			continue
		}
		p.tags(c, false, seen)
	}
}

func (p *parser) at(n *yaml.Node) Pos { return Pos{File: p.file, Line: n.Line, Col: n.Column} }

func (p *parser) errorf(n *yaml.Node, hint, format string, args ...any) {
	p.errs.add(p.at(n), hint, format, args...)
}

// decode parses the YAML into a node tree. It accepts exactly one document.
func (p *parser) decode(data []byte) (root *yaml.Node, err error) {
	// yaml.v3 has panicked on odd input before; a suite file must never
	// take the tool down with it.
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{Pos: Pos{p.file, 1, 1}, Msg: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	// yaml.v3 says where bad UTF-8 is only as "line 1": find it here (a
	// UTF-16 file, which it reads, starts with its byte-order mark).
	utf16 := bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF})
	if !utf16 && !utf8.Valid(data) {
		line, col := 1, 1
		for i := 0; i < len(data); {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				return nil, &Error{Pos: Pos{p.file, line, col}, Msg: fmt.Sprintf("byte 0x%02X is not UTF-8 text", data[i]),
					Hint: "a suite is UTF-8: save the file as UTF-8"}
			}
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
			i += n
		}
	}
	if !utf16 {
		if err := p.strayBOM(data); err != nil {
			return nil, err
		}
		if data, err = p.yamlVersion(data); err != nil {
			return nil, err
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Pos: Pos{p.file, 1, 1}, Msg: "empty suite", Hint: emptySuiteHint}
		}
		return nil, p.yamlError(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{Pos: p.at(&extra), Msg: "a suite file holds one YAML document", Hint: "remove the second \"---\""}
	} else if !errors.Is(err, io.EOF) {
		return nil, p.yamlError(err, data)
	}
	// A document of nothing ("---" alone) is empty too; its null would
	// point past the file's last line.
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isEmptyNull(doc.Content[0]) {
		return nil, &Error{Pos: Pos{p.file, 1, 1}, Msg: "empty suite", Hint: emptySuiteHint}
	}
	return doc.Content[0], nil
}

// strayBOM refuses a byte-order mark (U+FEFF) past the file's first bytes:
// yaml.v3 passes over one that starts a line but counts it as a column, so
// a file saved with two (an editor adding one to a file that had one) read
// as a suite of keys each missing its first letter ("odel").
func (p *parser) strayBOM(data []byte) error {
	const bom = "\uFEFF"
	text := string(data)
	start := len(text) - len(strings.TrimPrefix(text, bom))
	i := strings.Index(text[start:], bom)
	if i < 0 {
		return nil
	}
	before := text[start : start+i]
	line := strings.Count(before, "\n") + 1
	col := utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return &Error{Pos: Pos{p.file, line, col}, Msg: "a byte-order mark (U+FEFF) inside the file",
		Hint: "a suite may start with one, and hold none past it: remove it (two files joined, or an editor that added a second)"}
}

// yamlVersion reads a %YAML directive before the document. yaml.v3 takes
// only %YAML 1.1 ("found incompatible YAML document" for 1.2), yet reads
// every suite as YAML 1.2 reads it (yes as text, 010 refused): a file that
// says %YAML 1.2 is given to it as 1.1, the same bytes long so positions
// hold, and any other version is refused at its directive.
func (p *parser) yamlVersion(data []byte) ([]byte, error) {
	off := len(data) - len(bytes.TrimPrefix(data, []byte("\uFEFF")))
	for line := 1; off < len(data); line++ {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			end = len(data) - off
		}
		text := bytes.TrimRight(data[off:off+end], "\r")
		switch {
		case len(bytes.TrimSpace(text)) == 0 || text[0] == '#':
		case bytes.HasPrefix(text, []byte("%YAML")) && len(text) > 5 && (text[5] == ' ' || text[5] == '\t') && len(bytes.Fields(text)) > 1:
			rest := bytes.TrimLeft(text[5:], " \t")
			at := off + len(text) - len(rest)
			version := string(bytes.Fields(rest)[0])
			switch version {
			case "1.1":
			case "1.2":
				data = bytes.Clone(data)
				data[at+2] = '1'
			default:
				return nil, &Error{Pos: Pos{p.file, line, at - off + 1}, Msg: fmt.Sprintf("%%YAML %s: a suite is read as YAML 1.2", version),
					Hint: "write %YAML 1.2, or leave the directive out"}
			}
		case text[0] == '%':
		default:
			return data, nil // the document starts: no directive past it
		}
		off += end + 1
	}
	return data, nil
}

// isEmptyNull is a null written as nothing at all, not as ~ or null.
func isEmptyNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "" && n.Style == 0
}

// yamlError turns "yaml: line 3: msg" into our position form. yaml.v3 does
// not report the column of syntax errors, so column 1 stands in for it,
// but for a tab in a line's indentation, which is said as such, at the tab.
func (p *parser) yamlError(err error, data []byte) error {
	msg := err.Error()
	lines := bytes.Split(data, []byte("\n"))
	// tabbed says a tab in the indentation of a line from..to.
	tabbed := func(from, to int) error {
		for l := from; l >= 1 && l <= min(to, len(lines)); l++ {
			text := lines[l-1]
			indent := text[:len(text)-len(bytes.TrimLeft(text, " \t"))]
			if i := bytes.IndexByte(indent, '\t'); i >= 0 {
				return &Error{Pos: Pos{p.file, l, i + 1}, Msg: "a tab indents this line", Hint: "YAML indents with spaces only"}
			}
		}
		return nil
	}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		// yaml.v3 names the line of the tab or, for a tab after spaces,
		// the line before it.
		if err := tabbed(line, line+1); err != nil {
			return err
		}
		if m[2] == "did not find expected '-' indicator" {
			if l, col, ok := outOfList(lines, line); ok {
				return &Error{Pos: Pos{p.file, l, col}, Msg: "YAML: this line is in the list above but not an item of it (did not find expected '-' indicator)",
					Hint: `start it with "- ", or indent it under the item it belongs to`}
			}
		}
		if m[2] == "did not find expected alphabetic or numeric character" {
			if col, name, ok := anchorNameAt(lines, line); ok {
				return &Error{Pos: Pos{p.file, line, col}, Msg: fmt.Sprintf("YAML: %s holds a character an anchor's name may not have here", name),
					Hint: `name anchors and their aliases with ASCII letters, digits, "-" and "_" alone: the YAML parser suites are read with takes no other`}
			}
		}
		if slices.Contains(yamlParserProblems, m[2]) {
			// yaml.v3 counts a parser error's line from 0 (its scanner's
			// from 1): the line it means is the next, the one opening the
			// list or map it was reading, or where the problem is; at the
			// end of the file, the last line that holds anything.
			line++
			for line > 1 && (line > len(lines) || len(bytes.TrimSpace(lines[line-1])) == 0) {
				line--
			}
		}
		hint := ""
		switch m[2] {
		case "did not find expected ',' or ']'":
			hint = "a [ list on this line is not closed with ], or two of its items have no comma between them"
		case "did not find expected ',' or '}'":
			hint = "a { map on this line is not closed with }, or two of its entries have no comma between them"
		}
		return &Error{Pos: Pos{p.file, line, 1}, Msg: "YAML: " + m[2], Hint: hint}
	}
	// yaml.v3 leaves out a line it counts as 0, the first: a tab indenting
	// it is said as on any other line, not as a character that cannot
	// start a token.
	if err := tabbed(1, 1); err != nil {
		return err
	}
	msg = "YAML: " + strings.TrimPrefix(msg, "yaml: ")
	// yaml.v3 gives these no line: found here, so the error points at them.
	if m := unknownAnchorRE.FindStringSubmatch(msg); m != nil {
		if line, col, ok := aliasAt(data, m[1]); ok {
			return &Error{Pos: Pos{p.file, line, col}, Msg: msg}
		}
	}
	if strings.HasSuffix(msg, "control characters are not allowed") {
		if line, col, r, ok := controlAt(data); ok {
			return &Error{Pos: Pos{p.file, line, col}, Msg: fmt.Sprintf("%s (U+%04X)", msg, r)}
		}
	}
	return &Error{Pos: Pos{p.file, 1, 1}, Msg: msg}
}

// yamlParserProblems are the errors of yaml.v3's parser (not its scanner),
// whose line it counts from 0 (yaml.v3 decode.go, parser.fail).
var yamlParserProblems = []string{
	"did not find expected ',' or ']'", "did not find expected ',' or '}'", "did not find expected '-' indicator",
	"did not find expected key", "did not find expected node content", "did not find expected <document start>",
	"found undefined tag handle", "found duplicate %TAG directive", "found duplicate %YAML directive", "found incompatible YAML document",
}

// outOfList finds the line yaml.v3 means by "did not find expected '-'
// indicator", which it reports at the line that opens the list (cases:),
// not at the line that broke it: the first line after the list's first
// item, at the items' indentation, that is not an item ("  name: d" under
// "  - name: c"). ok is false when no such line is found.
func outOfList(lines [][]byte, from int) (line, col int, ok bool) {
	indent := func(b []byte) int { return len(b) - len(bytes.TrimLeft(b, " ")) }
	item := -1 // the items' indentation, once the first is found
	for l := from; l >= 1 && l <= len(lines); l++ {
		text := bytes.TrimRight(lines[l-1], " \r")
		body := bytes.TrimLeft(text, " ")
		if len(body) == 0 || body[0] == '#' {
			continue
		}
		isItem := body[0] == '-' && (len(body) == 1 || body[1] == ' ')
		switch in := indent(text); {
		case item < 0 && isItem:
			item = in
		case item < 0:
		case in < item:
			return 0, 0, false
		case in == item && !isItem:
			return l, in + 1, true
		}
	}
	return 0, 0, false
}

// emptySuiteHint says what a suite holds, for a file that holds nothing.
const emptySuiteHint = "a suite holds at least name: and cases: (and model: for model cases); mtlbench suites show ci prints one to copy, docs/suites.md documents every key"

var unknownAnchorRE = regexp.MustCompile(`unknown anchor '(.*)' referenced`)

// aliasAt is the line and column (in runes) of the first alias *name in
// data: a '*' after a space, a flow indicator or a line's start, followed
// by the name and then a space, a flow indicator or the end.
// anchorNameAt finds on line (from 1) the anchor or alias whose name
// yaml.v3 stops at, one of a character past ASCII letters, digits, "-" and
// "_" (YAML 1.2 takes more: &日本, &a.b), and gives its column (in
// characters) and the name as written.
func anchorNameAt(lines [][]byte, line int) (col int, name string, ok bool) {
	if line < 1 || line > len(lines) {
		return 0, "", false
	}
	text := string(bytes.TrimRight(lines[line-1], "\r"))
	plain := func(r rune) bool {
		return r < utf8.RuneSelf && (r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}
	for i, r := range text {
		if (r != '&' && r != '*') || (i > 0 && !strings.ContainsRune(" \t,[{:-", rune(text[i-1]))) {
			continue
		}
		rest := text[i+1:]
		end := strings.IndexFunc(rest, func(r rune) bool { return strings.ContainsRune(" \t,[]{}", r) })
		if end < 0 {
			end = len(rest)
		}
		if n := rest[:end]; n != "" && strings.IndexFunc(n, func(r rune) bool { return !plain(r) }) >= 0 {
			return utf8.RuneCountInString(text[:i]) + 1, string(r) + n, true
		}
	}
	return 0, "", false
}

func aliasAt(data []byte, name string) (line, col int, ok bool) {
	bound := func(b byte) bool { return strings.IndexByte(" \t\r\n,[]{}", b) >= 0 }
	alias := "*" + name
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(alias))
		if j < 0 {
			return 0, 0, false
		}
		at, end := i+j, i+j+len(alias)
		if (at == 0 || bound(data[at-1])) && (end == len(data) || bound(data[end])) {
			line, col = position(data, at)
			return line, col, true
		}
		i = at + 1
	}
}

// controlAt is where the first character YAML refuses is (a C0 control
// but tab and line ends, DEL, a C1 control but NEL), and which it is.
func controlAt(data []byte) (line, col int, c rune, ok bool) {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7F || r >= 0x80 && r < 0xA0 && r != 0x85 {
			line, col = position(data, i)
			return line, col, r, true
		}
		i += n
	}
	return 0, 0, 0, false
}

// position is the line and column (in runes) of byte offset at of data.
func position(data []byte, at int) (line, col int) {
	before := data[:at]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
}

// spend charges one unit of work at n; false once the budget is gone.
func (p *parser) spend(n *yaml.Node) bool { return p.spendN(n, 1) }

// spendN charges k units of work at n (a range's values), saying once that
// the budget is gone; false from then on.
func (p *parser) spendN(n *yaml.Node, k int) bool {
	if p.budget <= 0 {
		return false
	}
	p.budget -= k
	if p.budget <= 0 {
		// A file without aliases is as large as it reads: saying aliases
		// there would send its writer looking for what is not in it.
		if p.aliased {
			p.errorf(n, "", "suite is too complex (too many aliases or merge keys)")
		} else {
			p.errorf(n, fmt.Sprintf("a suite holds at most %d cases: shorten its lists", MaxCases),
				"suite is too large: more than %d map entries and list items", maxWork)
		}
		return false
	}
	return true
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < 64 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// mapping returns the entries of a map node, reporting non-map nodes,
// duplicate keys and non-scalar keys. Explicit keys win over merged ones.
func (p *parser) mapping(n *yaml.Node, what string) ([]entry, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "", "%s must be a map, got %s", what, describe(n))
		return nil, false
	}
	var out []entry
	index := map[string]int{}
	p.collect(n, &out, index, false, map[*yaml.Node]bool{n: true})
	return out, true
}

func (p *parser) collect(n *yaml.Node, out *[]entry, index map[string]int, merged bool, seen map[*yaml.Node]bool) {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		if !p.spend(n) {
			return
		}
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, "", "keys must be plain names, got %s", describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			src := resolve(v)
			list := []*yaml.Node{src}
			if src.Kind == yaml.SequenceNode {
				list = src.Content
			}
			// Each map a merge names is work, read again wherever the
			// merge is: a list of many aliases taken by many cases too.
			if !p.spendN(v, len(list)) {
				return
			}
			for _, m := range list {
				m = resolve(m)
				if m.Kind != yaml.MappingNode {
					p.errorf(m, "", "<< must merge a map, got %s", describe(m))
					continue
				}
				merges = append(merges, m)
			}
			continue
		}
		if j, dup := index[k.Value]; dup {
			if !merged {
				first := (*out)[j].k
				p.errorf(k, "", "duplicate key %q (first at line %d)", k.Value, first.Line)
			}
			continue
		}
		index[k.Value] = len(*out)
		*out = append(*out, entry{key: k.Value, k: k, v: v})
	}
	for _, m := range merges {
		if seen[m] {
			continue
		}
		seen[m] = true
		p.collect(m, out, index, true, seen)
	}
}

// str reads a text scalar. Numbers are accepted as text; null, booleans and
// collections are not.
func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || isNull(n) || n.ShortTag() == "!!bool" {
		p.errorf(n, "", "%s must be a string, got %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

// named refuses an empty name v of what at n (preset: ""), which was
// said as a model named "" that is neither a preset nor a path; hint says
// what to write.
func (p *parser) named(n *yaml.Node, v, what, hint string) bool {
	if strings.TrimSpace(v) == "" {
		p.errorf(resolve(n), hint, "%s is empty", what)
		return false
	}
	return true
}

func (p *parser) enum(n *yaml.Node, what string, allowed []string) (string, bool) {
	s, ok := p.str(n, what)
	if !ok {
		return "", false
	}
	for _, a := range allowed {
		if s == a {
			return s, true
		}
	}
	hint := didYouMean(s, allowed)
	if hint == "" {
		hint = "one of " + strings.Join(allowed, ", ")
	}
	p.errorf(resolve(n), hint, "unknown %s %q", what, s)
	return "", false
}

// decimalRE is an integer as a file spells it in decimal.
var decimalRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// int reads an integer of at least min and, where max is above 0, at most
// max, naming the range it refuses a value outside.
func (p *parser) int(n *yaml.Node, what string, min, max int64) (int64, bool) {
	n = resolve(n)
	var i int64
	if why := LeadingZero(n.Value); why != "" && n.Kind == yaml.ScalarNode && plain(n) {
		p.errorf(n, "", "%s %s", what, why)
		return 0, false
	}
	// YAML tags an integer past uint64 a float: it is still an integer,
	// out of range. One the file tags itself (!!str 1) is what it says.
	tooBig := n.Kind == yaml.ScalarNode && plain(n) && n.Style&yaml.TaggedStyle == 0 && decimalRE.MatchString(n.Value)
	if (n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int") && !tooBig {
		p.errorf(n, textHint(n, "int"), "%s must be an integer, got %s", what, describe(n))
		return 0, false
	}
	err := n.Decode(&i)
	if err == nil && i < min {
		p.errorf(n, "", "%s must be >= %d, got %d", what, min, i)
		return 0, false
	}
	if max > 0 && (err != nil || i > max) {
		p.errorf(n, "", "%s must be from %d to %d, got %s", what, min, max, show(n.Value))
		return 0, false
	}
	if err != nil || i > math.MaxInt32 {
		p.errorf(n, "", "%s is out of range: %s", what, show(n.Value))
		return 0, false
	}
	return i, true
}

// seed reads the model's seed: 0 up to the largest int64, as a negative
// one would be wrapped to another seed and the recorded seed would lie.
func (p *parser) seed(n *yaml.Node) (int64, bool) {
	n = resolve(n)
	if why := LeadingZero(n.Value); why != "" && n.Kind == yaml.ScalarNode && plain(n) {
		p.errorf(n, "", "model seed %s", why)
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.errorf(n, "", "model seed must be an integer from 0 to %d, got %s", int64(math.MaxInt64), describe(n))
		return 0, false
	}
	var i int64
	if err := n.Decode(&i); err != nil || i < 0 {
		p.errorf(n, "", "model seed must be from 0 to %d, got %s", int64(math.MaxInt64), show(n.Value))
		return 0, false
	}
	return i, true
}

func (p *parser) bool(n *yaml.Node, what string) (bool, bool) {
	n = resolve(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.errorf(n, textHint(n, "bool"), "%s must be true or false, got %s", what, describe(n))
		return false, false
	}
	return b, true
}

func (p *parser) unknownKey(k *yaml.Node, where string, known []string, fallback string) {
	// A key the format has elsewhere is there, whatever it is close to
	// here (layers at the top level is model:'s, not a cases typo).
	hint := keyElsewhere(k.Value, where)
	if hint == "" {
		hint = didYouMean(k.Value, known)
	}
	if hint == "" {
		hint = fallback
	}
	if hint == "" {
		hint = xKeyHint(k.Value)
	}
	p.errorf(k, hint, "unknown key %q %s", k.Value, where)
}

// keyElsewhere says where a key of the suite's format that is unknown
// where it stands belongs (seed at the top level is model:'s, matrix a
// case's), so a key written at the wrong depth is not told only that it
// is unknown; "" for a key the format has nowhere.
func keyElsewhere(key, where string) string {
	var at []string
	if slices.Contains(modelKeys, key) && where != "in model" {
		at = append(at, fmt.Sprintf("model: takes it (model: {%s: ...})", key))
	}
	if slices.Contains(caseKeys, key) && !strings.HasPrefix(where, "in case") {
		at = append(at, "each case under cases: takes it")
	}
	if _, isParam := params[key]; isParam {
		at = append(at, "parameters go under params: or matrix:")
	}
	if slices.Contains(topKeys, key) && where != "at the top level" {
		at = append(at, "it is a key of the top level")
	}
	return strings.Join(at, "; ")
}

// xKeyHint says, of an "x-" key below the top level, where such keys are
// ignored: only there, so a note in a case or in params is not silently
// dropped from what the suite says.
func xKeyHint(key string) string {
	if strings.HasPrefix(key, "x-") {
		return `keys starting with "x-" are ignored at the top level only: hold shared anchors there`
	}
	return ""
}

func (p *parser) suite(root *yaml.Node) {
	s := p.s
	ents, ok := p.mapping(root, "a suite")
	if !ok {
		return
	}
	var modelE, paramsE, casesE *entry
	for i := range ents {
		e := &ents[i]
		switch e.key {
		case "name", "description", "model", "backend", "timing", "repetitions", "warmup", "interleave", "cooldown", "thresholds", "params", "cases":
			s.Positions[e.key] = p.at(resolve(e.v))
		}
		switch e.key {
		case "name":
			if v, ok := p.str(e.v, "name"); ok {
				s.Name = v
				if !suiteNameRE.MatchString(v) {
					p.errorf(resolve(e.v), `use lowercase letters, digits and "-", e.g. "qwen3-moe"`, "bad suite name %q", v)
				}
			}
		case "description":
			s.Description, _ = p.str(e.v, "description")
			// Printed to terminals (suites list, reports): an escape
			// sequence in it would be the terminal's to act on.
			if i := strings.IndexFunc(s.Description, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }); i >= 0 {
				p.errorf(resolve(e.v), "write it as text: line breaks and tabs are the only control characters a description may hold",
					"description holds the control character %U", []rune(s.Description[i:])[0])
			}
		case "model":
			modelE = e
		case "backend", "timing", "repetitions", "warmup", "interleave", "cooldown":
			p.setting(e.key, e.v)
		case "thresholds":
			p.thresholds(e.v)
		case "params":
			paramsE = e
		case "cases":
			casesE = e
		default:
			// "x-" keys are ignored, as in Docker Compose: a place to
			// define anchors that cases share.
			if !strings.HasPrefix(e.key, "x-") {
				p.unknownKey(e.k, "at the top level", topKeys, `keys starting with "x-" are ignored, e.g. to hold shared anchors`)
			}
		}
	}
	if s.Name == "" && s.Positions["name"] == (Pos{}) {
		p.errorf(root, "", "missing required key \"name\"")
	}
	if modelE != nil {
		s.Model = p.model(modelE)
	}
	suiteParams := map[string]Value{}
	if paramsE != nil {
		suiteParams = p.params(paramsE.v, "", "params", "params")
	}
	s.defaults = suiteParams
	if casesE == nil {
		p.errorf(root, "", "missing required key \"cases\"")
		return
	}
	groups := p.cases(casesE.v, suiteParams)
	hint := "add a model: section with a preset or path"
	if op, ok := suiteParams[ParamOp]; ok {
		// The suite's op is a default for kernel cases, not what makes one
		// (docs/suites.md, "cases"): say so where it was meant as one.
		hint = fmt.Sprintf("add kind: kernel to run the suite's op %s (a case without kind: is a kernel case only where it names its op itself), or a model: section with a preset or path", op.Raw)
	}
	for _, g := range groups {
		if g.kind == KindModel && modelE == nil {
			p.errs.add(g.pos, hint, "case %q is a model case but the suite has no model", g.name)
			break
		}
	}
	p.expand(groups, suiteParams, p.at(casesE.k))
	// Only over every case: a case left out by an error could record it,
	// or read a param.
	if len(p.errs.list) == 0 {
		p.thresholdsRecorded()
		p.suiteParamsRead(suiteParams)
	}
}

// settingKeys are the top-level scalar settings: setting reads them, from
// a file or from `--set` (Suite.Override).
var settingKeys = []string{"backend", "timing", "repetitions", "warmup", "interleave", "cooldown"}

// setting reads one top-level scalar setting into the suite.
func (p *parser) setting(key string, n *yaml.Node) {
	s := p.s
	switch key {
	case "backend":
		if v, ok := p.enum(n, "backend", backends); ok {
			s.Backend = v
		}
	case "timing":
		if v, ok := p.enum(n, "timing", Timings); ok {
			s.Timing = v
		}
	case "repetitions":
		if v, ok := p.int(n, "repetitions", 1, MaxRepetitions); ok {
			s.Repetitions = int(v)
		}
	case "warmup":
		if v, ok := p.int(n, "warmup", 0, MaxRepetitions); ok {
			s.Warmup = int(v)
		}
	case "interleave":
		if v, ok := p.bool(n, "interleave"); ok {
			s.Interleave = v
		}
	case "cooldown":
		s.Cooldown = p.duration(n, "cooldown")
	}
}

func (p *parser) duration(n *yaml.Node, what string) time.Duration {
	n = resolve(n)
	s, ok := p.str(n, what)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		hint := `a Go duration such as "30s" or "1m30s"`
		if n.ShortTag() == "!!int" {
			hint = fmt.Sprintf("add a unit, e.g. \"%ss\"", show(s))
		}
		p.errorf(n, hint, "bad %s %q", what, s)
		return 0
	}
	if d < 0 {
		p.errorf(n, "", "%s must not be negative, got %s", what, show(s))
		return 0
	}
	if d > maxPause {
		p.errorf(n, "", "%s of %s: at most %s (a pause to let the machine cool)", what, show(s), maxPause)
		return 0
	}
	return d
}

// maxPause bounds a suite's pauses: past an hour a typo, not a cooldown.
const maxPause = time.Hour

func (p *parser) thresholds(n *yaml.Node) {
	if isNull(resolve(n)) {
		return
	}
	ents, ok := p.mapping(n, "thresholds")
	if !ok {
		return
	}
	p.s.Thresholds = map[string]float64{}
	for _, e := range ents {
		v := resolve(e.v)
		p.s.Positions["thresholds."+e.key] = p.at(v)
		if e.key == "" {
			p.errorf(e.k, "", "empty metric name in thresholds")
			continue
		}
		// A threshold on a metric no gate compares would pass every run.
		if err := metrics.CheckThreshold(e.key); err != nil {
			p.errorf(e.k, metrics.ThresholdHint(e.key), "threshold: %v", err)
			continue
		}
		if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			hint := ""
			if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") {
				hint = fmt.Sprintf("write \"%s%%\"", show(v.Value))
				// Below 1 it reads as a fraction too (0.05: 5%), as the
				// flags that take one (gate --alpha) read it.
				if f, err := strconv.ParseFloat(v.Value, 64); err == nil && f > 0 && f < 1 {
					hint = fmt.Sprintf("write \"%s%%\" if %s is a fraction, \"%s%%\" if a percentage",
						strconv.FormatFloat(f*100, 'g', 12, 64), show(v.Value), show(v.Value))
				}
			}
			p.errorf(v, hint, "threshold %s must be a percentage like \"5%%\", got %s", show(e.key), describe(v))
			continue
		}
		num, ok := strings.CutSuffix(strings.TrimSpace(v.Value), "%")
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !ok || err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			p.errorf(v, "", "threshold %s must be a percentage >= 0 like \"5%%\", got %q", show(e.key), v.Value)
			continue
		}
		if err := metrics.CheckThresholdSize(e.key, f/100); err != nil {
			p.errorf(v, "", "threshold %s: %v", show(e.key), err)
			continue
		}
		p.s.Thresholds[e.key] = f / 100
		if p.thresholdAt == nil {
			p.thresholdAt = map[string]Pos{}
		}
		p.thresholdAt[e.key] = p.at(e.k)
	}
}

// thresholdsRecorded refuses a threshold on a metric no case of the suite
// records: the gate would find it on neither side and pass every run. Only
// a model case with an slo records goodput, and only one generating two
// tokens or more the decode metrics (with a range_ratio, in a request the
// run draws: a range allowing two may draw none); other metrics that hang on the
// backend (the cost witness, device time) are left to the run.
func (p *parser) thresholdsRecorded() {
	// What the cases record matters only to a threshold; a case's draws
	// (a million requests' lengths) are not made for nothing.
	if len(p.s.Thresholds) == 0 {
		return
	}
	var model, kernel, slo, decode bool
	var seed uint64
	if p.s.Model != nil {
		seed = uint64(p.s.Model.Seed)
	}
	// undrawn are the cases whose range allows a decode no request draws:
	// the error names them, as their gen_len alone does not say why.
	var undrawn []string
	for _, c := range p.s.Cases {
		if c.Kind == KindKernel {
			kernel = true
			continue
		}
		model = true
		slo = slo || c.Model.SLO != nil
		d := c.Model.decodes(seed)
		decode = decode || d
		if _, gen := c.Model.MaxLens(); !d && gen > 1 {
			undrawn = append(undrawn, fmt.Sprintf("case %s (%s): range_ratio %g allows gen_len %d, but each of its %d requests draws 1 from seed %d",
				c.Name, c.Pos, c.Model.RangeRatio, gen, c.Model.Requests, seed))
		}
	}
	var recorded []string
	if model {
		for _, m := range metrics.ModelCase {
			if (m != metrics.SLOMetric || slo) && (decode || !slices.Contains(metrics.DecodeStep, m)) {
				recorded = append(recorded, m)
			}
		}
	}
	if kernel {
		recorded = append(recorded, metrics.KernelCase...)
	}
	for _, name := range slices.Sorted(maps.Keys(p.s.Thresholds)) {
		if slices.Contains(recorded, name) {
			continue
		}
		why := "only imports of other tools' results hold it"
		switch {
		case name == metrics.SLOMetric && model:
			why = "only a model case with an slo records it"
		case slices.Contains(metrics.DecodeStep, name) && model:
			why = "only a model case that decodes records it: a gen_len of 1 is sampled by the prefill"
			if len(undrawn) > 0 {
				why += "; " + strings.Join(undrawn, "; ")
			}
		case slices.Contains(metrics.ModelCase, name):
			why = "model cases do"
		case slices.Contains(metrics.KernelCase, name):
			why = "kernel cases do"
		}
		p.errs.add(p.thresholdAt[name], "its cases record "+strings.Join(metrics.GatedOf(recorded), ", "),
			"threshold %s: no case of this suite records it (%s)", name, why)
	}
}

// suiteParamsRead refuses a suite param no case reads: a typo of a name
// the cases read, or another kind's or op's parameter, would be recorded
// nowhere and change nothing, as an override none reads would.
func (p *parser) suiteParamsRead(suiteParams map[string]Value) {
	read := func(name string) bool {
		return slices.ContainsFunc(p.s.Cases, func(c Case) bool { return reads(c, name) })
	}
	for _, name := range sortedKeys(suiteParams) {
		if read(name) {
			continue
		}
		var others []string
		for _, other := range slices.Sorted(maps.Keys(params)) {
			if read(other) {
				others = append(others, other)
			}
		}
		at, ok := p.keyAt["params."+name]
		if !ok {
			at = suiteParams[name].Pos
		}
		p.errs.add(at, didYouMean(name, others), "no case of this suite reads params %s (%s)", name, takers(name))
	}
}

func (p *parser) model(e *entry) *Model {
	m := &Model{Weights: WeightsSynthetic, Seed: 1, Fit: "strict", Pos: p.at(e.k)}
	ents, ok := p.mapping(e.v, "model")
	if !ok {
		return m
	}
	var presetN, pathN *yaml.Node
	for _, e := range ents {
		if isModelKey(e.key) {
			p.s.Positions["model."+e.key] = p.at(resolve(e.v))
		}
		switch e.key {
		case "preset":
			if v, ok := p.str(e.v, "model preset"); ok && p.named(e.v, v, "model preset", "mtlbench models lists the presets") {
				m.Preset, presetN = v, resolve(e.v)
			}
		case "path":
			if v, ok := p.str(e.v, "model path"); ok && p.named(e.v, v, "model path", "a checkpoint folder or a .gguf file") {
				// No shell reads a suite: its ~ is read as one would read
				// it, as a flag's and an environment file's are.
				x, err := homepath.Expand(v)
				if err != nil {
					p.errorf(e.v, "", "model path %q: %v", v, err)
					x = v
				}
				m.Path, pathN = x, resolve(e.v)
			}
		case "weights":
			if v, ok := p.enum(e.v, "weights", weights); ok {
				m.Weights = v
			}
		case "dtype":
			if v, ok := p.enum(e.v, "dtype", ModelDTypes); ok {
				m.DType = v
			}
		case "seed":
			if v, ok := p.seed(e.v); ok {
				m.Seed = v
			}
		case "layers":
			if v, ok := p.int(e.v, "model layers", 1, 0); ok {
				m.Layers = int(v)
			}
		case "fit":
			if v, ok := p.enum(e.v, "fit", fits); ok {
				m.Fit = v
			}
		default:
			p.unknownKey(e.k, "in model", modelKeys, "")
		}
	}
	switch {
	case presetN != nil && pathN != nil:
		p.errorf(pathN, "", "model has both preset and path; give exactly one")
	case presetN != nil:
		m.Pos = p.at(presetN)
	case pathN != nil:
		m.Pos = p.at(pathN)
	default:
		if p.s.Positions["model.preset"] == (Pos{}) && p.s.Positions["model.path"] == (Pos{}) {
			p.errorf(e.k, "", "model needs a preset or a path")
		}
	}
	if m.Weights == WeightsCheckpoint && p.s.Positions["model.path"] == (Pos{}) {
		p.errs.add(p.s.Positions["model.weights"], "set path: to the checkpoint directory", "weights: checkpoint needs a model path")
	}
	// A path runs its checkpoint's weights unless asked for synthetic ones.
	if p.s.Positions["model.weights"] == (Pos{}) && pathN != nil {
		m.Weights = WeightsCheckpoint
	}
	return m
}

func isModelKey(k string) bool {
	for _, m := range modelKeys {
		if k == m {
			return true
		}
	}
	return false
}

// param checks one parameter name and scalar value for kind ("" for suite
// params, which may hold either kind's parameters).
func (p *parser) param(kind string, k, v *yaml.Node, where string) (Value, bool) {
	spec, ok := p.paramName(kind, k, where)
	if !ok {
		return Value{}, false
	}
	return p.paramValue(k.Value, spec, v)
}

func (p *parser) paramName(kind string, k *yaml.Node, where string) (paramSpec, bool) {
	name := k.Value
	spec, known := params[name]
	if !known {
		hint := keyElsewhere(name, "in "+where)
		if hint == "" {
			hint = didYouMean(name, paramNames(kind))
		}
		if hint == "" {
			hint = xKeyHint(name)
		}
		p.errorf(k, hint, "unknown key %q in %s", name, where)
		return spec, false
	}
	if !spec.kinds.has(kind) {
		other := KindKernel
		if kind == KindKernel {
			other = KindModel
		}
		hint := fmt.Sprintf("only kind: %s cases take it", other)
		if name == "dtype" && kind == KindModel {
			// A model case's weights take the model's dtype.
			hint += "; a model case's weights take the suite's model: { dtype: ... }"
		}
		p.errorf(k, hint, "%s is a %s-case parameter, not allowed in a %s case", name, other, kind)
		return spec, false
	}
	return spec, true
}

func (p *parser) paramValue(name string, spec paramSpec, v *yaml.Node) (Value, bool) {
	v = resolve(v)
	val, isInt := makeValue(v, p.at(v))
	if msg, hint := checkParam(name, spec, v, val, isInt); msg != "" {
		p.errorf(v, hint, "%s", msg)
		return Value{}, false
	}
	return val, true
}

// params reads a params: map. prefix names the values in Positions ("" to
// skip recording).
func (p *parser) params(n *yaml.Node, kind, where, prefix string) map[string]Value {
	out := map[string]Value{}
	if isNull(resolve(n)) {
		return out
	}
	ents, ok := p.mapping(n, where)
	if !ok {
		return out
	}
	for i, e := range ents {
		if _, known := params[e.key]; !known && didYouMean(e.key, paramNames(kind)) == "" {
			if hint := commaSplit(n, ents, i); hint != "" {
				p.errorf(e.k, hint, "unknown key %q in %s", e.key, where)
				continue
			}
		}
		if v, ok := p.param(kind, e.k, e.v, where); ok {
			out[e.key] = v
			if prefix != "" {
				p.s.Positions[prefix+"."+e.key] = v.Pos
				if p.keyAt == nil {
					p.keyAt = map[string]Pos{}
				}
				p.keyAt[prefix+"."+e.key] = p.at(e.k)
			}
		}
	}
	return out
}

func (p *parser) cases(n *yaml.Node, suiteParams map[string]Value) []*group {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.MappingNode {
			hint = `start each case with "- name: ..."`
		}
		p.errorf(n, hint, "cases must be a list, got %s", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		p.errorf(n, "", "cases must not be empty")
		return nil
	}
	var groups []*group
	names := map[string]Pos{}
	aliased := map[string]bool{}
	for i, c := range n.Content {
		if !p.spend(n) {
			break
		}
		g := p.caseEntry(resolve(c), i, suiteParams)
		if g == nil {
			continue
		}
		if g.name != "" {
			// A case written as an alias (- *a) is where the alias is: its
			// name's position is the anchor's, the first case's own.
			// Said once per alias: a list of many copies has one mistake.
			at, hint, say := g.namePos, "", true
			if c.Kind == yaml.AliasNode {
				at, hint = p.at(c), fmt.Sprintf("an alias repeats its case whole: give the copy a name of its own, e.g. {<<: *%s, name: %s-2}", c.Value, g.name)
				say = !aliased[c.Value]
			}
			if first, dup := names[g.name]; dup {
				if say {
					p.errs.add(at, hint, "duplicate case name %q (first at line %d)", g.name, first.Line)
				}
				if c.Kind == yaml.AliasNode {
					aliased[c.Value] = true
				}
				g.ok = false
			} else {
				names[g.name] = at
			}
		}
		groups = append(groups, g)
	}
	return groups
}

func (p *parser) caseEntry(n *yaml.Node, i int, suiteParams map[string]Value) *group {
	before := p.errs.found
	ents, ok := p.mapping(n, fmt.Sprintf("case %d", i+1))
	if !ok {
		return nil
	}
	g := &group{pos: p.at(n), fixed: map[string]Value{}}
	var nameN, kindN, opN, paramsN, matrixN *yaml.Node
	var unknown []*yaml.Node
	for _, e := range ents {
		switch e.key {
		case "name":
			nameN = resolve(e.v)
		case "kind":
			kindN = e.v
		case "op":
			opN = e.v
		case "params":
			paramsN = e.v
		case "matrix":
			matrixN = e.v
		default:
			unknown = append(unknown, e.k)
		}
	}
	label := fmt.Sprintf("case %d", i+1)
	defer func() {
		for _, k := range unknown {
			p.unknownKey(k, "in "+label, caseKeys, "")
		}
	}()
	if nameN == nil {
		p.errorf(n, "", "case %d has no name", i+1)
	} else if v, ok := p.str(nameN, "case name"); ok {
		g.name, g.namePos = v, p.at(nameN)
		label = fmt.Sprintf("case %q", v)
		switch {
		case !caseNameRE.MatchString(v):
			p.errorf(nameN, `use ASCII letters, digits, ".", "_" and "-"`, "bad case name %q", v)
		case v == "." || v == "..":
			// A name is a segment of its cases' keys, which reports and
			// exports split on "/" as paths.
			p.errorf(nameN, `a key segment of "." or ".." reads as a folder; add a letter or digit`, "bad case name %q", v)
		}
	}
	if g.namePos == (Pos{}) {
		g.namePos = g.pos
	}

	// Without kind:, a case that names its op (op:, or op in its params or
	// matrix, to sweep ops) is a kernel case; anything else is a model
	// case, which is what most suites hold.
	g.kind = KindModel
	if kindN != nil {
		if v, ok := p.enum(kindN, "kind", kinds); ok {
			g.kind = v
		} else {
			// Unknown kind: the parameters cannot be judged meaningfully,
			// nor the case called a model case.
			g.kind = ""
			return g
		}
	} else if opN != nil || hasKey(paramsN, "op") || hasKey(matrixN, "op") {
		g.kind = KindKernel
	}

	if opN != nil {
		if g.kind == KindModel {
			p.errorf(resolve(opN), "only kind: kernel cases take it", "op is not allowed in a model case")
		} else if v, ok := p.paramValue("op", params["op"], opN); ok {
			g.fixed["op"] = v
		}
	}
	if paramsN != nil {
		for name, v := range p.params(paramsN, g.kind, "params", "") {
			if name == "op" && opN != nil {
				p.errs.add(v.Pos, "keep one", "op is given both as op: and in params")
				continue
			}
			g.fixed[name] = v
		}
	}
	if matrixN != nil && !isNull(resolve(matrixN)) {
		p.matrix(g, matrixN, opN != nil)
	}
	if g.kind == KindKernel {
		// Look at the keys as written: an op that is present but invalid
		// has its own error already.
		_, inSuite := suiteParams["op"]
		if opN == nil && !inSuite && !hasKey(paramsN, "op") && !hasKey(matrixN, "op") {
			p.errs.add(g.namePos, "one of "+strings.Join(params[ParamOp].enum, ", "), "kernel %s needs an op", label)
		}
	}
	g.ok = p.errs.found == before && len(unknown) == 0
	return g
}

// commaSplit is the hint for entry i of params map n where it is the tail
// of a comma list written unquoted in { } (slo: ttft:500,tpot:50): there
// a comma ends the value, and each item after it reads as a key of no
// value. It names the value as it was meant, quoted; "" for another entry.
func commaSplit(n *yaml.Node, ents []entry, i int) string {
	piece := func(e entry) bool {
		return isEmptyNull(resolve(e.v)) && e.k.Kind == yaml.ScalarNode && e.k.Style == 0
	}
	if resolve(n).Style&yaml.FlowStyle == 0 || !piece(ents[i]) {
		return ""
	}
	from := i
	for from > 0 && piece(ents[from-1]) {
		from--
	}
	if from == 0 {
		return ""
	}
	head := ents[from-1]
	if v := resolve(head.v); v.Kind != yaml.ScalarNode || v.Style != 0 || v.ShortTag() != "!!str" {
		return ""
	}
	joined := []string{resolve(head.v).Value}
	for j := from; j < len(ents) && piece(ents[j]); j++ {
		joined = append(joined, ents[j].key)
	}
	return fmt.Sprintf("in { } a comma ends a value: quote it whole, %s: %q", head.key, strings.Join(joined, ","))
}

// hasKey reports whether map n holds key, a merge key's maps (<<: *a,
// <<: [*a, *b]) included, as the parser reads them. Each map is looked at
// once: maps merging one map many times over, nested, would otherwise be
// walked once for each path to it, exponentially many from a few lines.
func hasKey(n *yaml.Node, key string) bool {
	return hasKeySeen(n, key, map[*yaml.Node]bool{})
}

func hasKeySeen(n *yaml.Node, key string, seen map[*yaml.Node]bool) bool {
	if n == nil {
		return false
	}
	n = resolve(n)
	if seen[n] { // a map merged twice, or a cycle
		return false
	}
	seen[n] = true
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k := resolve(n.Content[i])
		if k.Value == key {
			return true
		}
		if k.ShortTag() != "!!merge" {
			continue
		}
		v := resolve(n.Content[i+1])
		merged := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			merged = v.Content
		}
		for _, m := range merged {
			if hasKeySeen(m, key, seen) {
				return true
			}
		}
	}
	return false
}

// isRange reports whether n is a string an integer parameter's matrix reads
// as a range or a comma list.
func isRange(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.ContainsAny(n.Value, "-,")
}

// expandRanges returns an integer parameter's matrix list with its ranges
// (the list itself, or some of its items) replaced by their values, each at
// the range's position; ok is false when a range is bad (reported, as of
// what: "matrix batch", or "batch" for a --set), a value of one outside
// parameter name's bounds included.
func (p *parser) expandRanges(name, what string, spec paramSpec, list *yaml.Node) (*yaml.Node, bool) {
	items := list.Content
	switch {
	case isRange(list):
		items = []*yaml.Node{list}
	case list.Kind != yaml.SequenceNode || !slices.ContainsFunc(items, func(n *yaml.Node) bool { return isRange(resolve(n)) }):
		return list, true
	}
	out := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: list.Line, Column: list.Column}
	ok := true
	for _, item := range items {
		it := resolve(item)
		if !isRange(it) {
			out.Content = append(out.Content, item)
			continue
		}
		vals, err := ParseIntList(it.Value, int(spec.min))
		if err != nil {
			hint := "a range is first-last, first-last+step or first-last*factor, e.g. 1-16*2"
			// An empty item is no range written wrong; in a file (not a
			// --set) it is no variable left unset either.
			var empty *listarg.EmptyItemError
			if errors.As(err, &empty) {
				hint, empty.InFile = "", p.file != "--set"
			}
			p.errorf(it, hint, "%s: %v", what, err)
			ok = false
			continue
		}
		// The bound one range string has holds for the list its items make
		// together, as for bench's comma lists: items of ranges (an alias
		// of one repeated) must not make millions of values first.
		if len(out.Content)+len(vals) > maxListValues {
			p.errorf(it, "", "%s: range %q takes the list past %d values", what, it.Value, maxListValues)
			return out, false
		}
		if !p.spendN(it, len(vals)) {
			return out, false
		}
		// A range's values are checked here, once for the range: a range
		// past the parameter's bounds (1-99999*2 over batch) would
		// otherwise be said again for every value it makes.
		if msg, hint := rangeValuesBad(name, spec, vals); msg != "" {
			p.errorf(it, hint, "%s: range %q: %s", what, it.Value, msg)
			ok = false
			continue
		}
		for _, v := range vals {
			out.Content = append(out.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v), Line: it.Line, Column: it.Column})
		}
	}
	return out, ok
}

// rangeValuesBad is checkParam's error of the first of a range's values
// that parameter name does not take, "" when it takes them all.
func rangeValuesBad(name string, spec paramSpec, vals []int) (msg, hint string) {
	for _, v := range vals {
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
		val := Value{Raw: n.Value, Int: int64(v), Float: float64(v), IsNum: true}
		if msg, hint := checkParam(name, spec, n, val, true); msg != "" {
			return msg, hint
		}
	}
	return "", ""
}

func (p *parser) matrix(g *group, n *yaml.Node, hasOpKey bool) {
	ents, ok := p.mapping(n, "matrix")
	if !ok {
		return
	}
	for _, e := range ents {
		spec, ok := p.paramName(g.kind, e.k, "matrix")
		if !ok {
			continue
		}
		if _, dup := g.fixed[e.key]; dup || (e.key == "op" && hasOpKey) {
			where := "params"
			if e.key == "op" && hasOpKey {
				where = "op:"
			}
			p.errorf(e.k, "keep one: a fixed value in params, or a list in matrix", "%s is set in both %s and matrix", e.key, where)
			continue
		}
		list := resolve(e.v)
		if spec.isInt {
			// Integer ranges, as bench's flags take them: the whole list
			// (1-16*2, 16-64+16, 1-8, or a comma list) or items of a list
			// ([1-8, 16, 32]).
			var ok bool
			if list, ok = p.expandRanges(e.key, "matrix "+e.key, spec, list); !ok {
				continue
			}
		}
		if list.Kind != yaml.SequenceNode {
			hint := ""
			if list.Kind == yaml.ScalarNode && !isNull(list) {
				hint = fmt.Sprintf("write [%s], or move it to params:", show(list.Value))
				if spec.isInt {
					hint = fmt.Sprintf("write [%s], a range such as 1-16*2, or move it to params:", show(list.Value))
				}
			}
			p.errorf(list, hint, "matrix %s must be a list, got %s", e.key, describe(list))
			continue
		}
		if len(list.Content) == 0 {
			p.errorf(list, "", "matrix %s has an empty list", e.key)
			continue
		}
		var vals []Value
		seen := map[string]Pos{}
		bad := false
		for _, item := range list.Content {
			if !p.spend(list) {
				return
			}
			if r := resolve(item); r.Kind != yaml.ScalarNode {
				p.errorf(r, "each item of a matrix list is one value of the sweep", "matrix %s takes a list of single values, but an item is %s", e.key, describe(r))
				bad = true
				continue
			}
			v, ok := p.paramValue(e.key, spec, item)
			if !ok {
				bad = true
				continue
			}
			c := canon(e.key, v)
			if first, dup := seen[c]; dup {
				p.errs.add(v.Pos, "", "duplicate value %s in matrix %s (first at line %d, col %d)", c, e.key, first.Line, first.Col)
				bad = true
				continue
			}
			seen[c] = v.Pos
			vals = append(vals, v)
		}
		if !bad {
			g.mkeys = append(g.mkeys, e.key)
			g.mvals = append(g.mvals, vals)
		}
	}
}
