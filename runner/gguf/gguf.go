// Package gguf reads GGUF files, llama.cpp's model format: the
// header (versions 2 and 3), the metadata key/values, the tensor infos and
// the aligned tensor data, which is memory-mapped and handed out as
// sub-slices, never copied. Every count, length and offset is checked
// against the file before it is trusted: a malformed file is an error
// naming the file and the tensor or key, never a panic.
//
// The layout is gguf-py's (GGUFWriter) and ggml's gguf.cpp: magic "GGUF",
// u32 version, u64 tensor count, u64 key/value count, the key/values, the
// tensor infos (name, u32 dims, u64 sizes innermost first, u32 type, u64
// offset into the data), then the data at the next multiple of
// general.alignment (32 by default). A file split into parts (split.go)
// opens as one.
package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/standin"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/mapfile"
)

// Type is a tensor's ggml type.
type Type uint32

// The ggml types the kernels read (ggml.h's enum ggml_type); those read
// by transcoding are quant.Transcoders', by name.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q8_0 Type = 8
	Q2_K Type = 10
	Q4_K Type = 12
	Q3_K Type = 11
	Q5_K Type = 13
	Q6_K Type = 14

	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	IQ1_M   Type = 29
	MXFP4   Type = 39

	BF16 Type = 30
)

// typeNames are every ggml type's name (ggml.h's enum ggml_type, the
// numbers it has retired included), for messages about those mtlbench
// does not read.
var typeNames = map[Type]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_2", 5: "Q4_3", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 9: "Q8_1",
	10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS",
	17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S",
	23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M",
	30: "BF16", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8", 34: "TQ1_0", 35: "TQ2_0",
	36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8", 39: "MXFP4", 40: "NVFP4", 41: "Q1_0", 42: "Q2_0",
}

func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("unknown ggml type %d", uint32(t))
}

// repacked are the interleaved layouts llama-quantize wrote for Arm CPUs in
// 2024 (Q4_0_4_4 and kin), which ggml has since dropped from GGUF files,
// with the type that holds the same values in the layout every reader
// takes.
var repacked = map[Type]Type{31: Q4_0, 32: Q4_0, 33: Q4_0, 36: IQ4_NL, 37: IQ4_NL, 38: IQ4_NL}

// Retired says what to do with a tensor of a layout ggml no longer reads
// (llama.cpp refuses such files too); "" for every other type.
func (t Type) Retired() string {
	if to, ok := repacked[t]; ok {
		return fmt.Sprintf("%v is a repacked %v that ggml no longer reads either: quantize the model again to %v, which every reader takes (and llama.cpp repacks as it loads)", t, to, to)
	}
	return ""
}

// kernelTypes are the packed ggml types the kernels read as they are, with
// their kernels/quant format.
var kernelTypes = map[Type]quant.Type{Q4_0: quant.Q4_0, Q8_0: quant.Q8_0, Q2_K: quant.Q2_K, Q4_K: quant.Q4_K, Q5_K: quant.Q5_K, Q6_K: quant.Q6_K,
	Q3_K: quant.Q3_K, IQ4_XS: quant.IQ4_XS, IQ4_NL: quant.IQ4_NL, MXFP4: quant.MXFP4,
	IQ2_XXS: quant.IQ2_XXS, IQ2_XS: quant.IQ2_XS, IQ2_S: quant.IQ2_S, IQ3_XXS: quant.IQ3_XXS, IQ3_S: quant.IQ3_S,
	IQ1_S: quant.IQ1_S, IQ1_M: quant.IQ1_M}

// Packing is the format a packed type runs as: its own where the kernels
// read it, else for a type read by transcoding (quant.Transcoders) the one
// it is rewritten into; ok false for float types and those not read.
func (t Type) Packing() (quant.Spec, bool) {
	if q, ok := kernelTypes[t]; ok {
		return quant.Spec{Type: q}, true
	}
	if tc, ok := quant.Transcoders[t.String()]; ok {
		return tc.Into, true
	}
	return quant.Spec{}, false
}

// Block is the values of one block and BlockBytes its bytes, for the
// types mtlbench reads; ok false for the others.
func (t Type) Block() (values, bytes int, ok bool) {
	switch t {
	case F32:
		return 1, 4, true
	case F16, BF16:
		return 1, 2, true
	}
	if q, ok := kernelTypes[t]; ok {
		s := quant.Spec{Type: q}
		return s.Block(), s.BlockBytes(), true
	}
	// The types read by transcoding are sized as their transcoders are.
	if tc, ok := quant.Transcoders[t.String()]; ok {
		return tc.Values, tc.Bytes, true
	}
	return 0, 0, false
}

// TypesRead names the ggml types mtlbench reads, for messages: the float
// types, the packed ones the kernels read (Q5_K, Q3_K, IQ4_XS, IQ4_NL and
// MXFP4 Metal's only, transcoded on the other backends), then those read
// by transcoding only.
func TypesRead() string {
	native := slices.Sorted(maps.Keys(kernelTypes))
	names := []string{"F32", "F16", "BF16"}
	for _, t := range native {
		names = append(names, t.String())
	}
	var transcoded []string
	for _, n := range slices.Sorted(maps.Keys(quant.Transcoders)) {
		if !slices.Contains(names, n) {
			transcoded = append(transcoded, n)
		}
	}
	return strings.Join(names, ", ") + ", and by transcoding " + strings.Join(transcoded, ", ")
}

// ValueType is a metadata value's type.
type ValueType uint32

var valueTypeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type %d", uint32(t))
}

const (
	U8 ValueType = iota
	I8
	U16
	I16
	U32
	I32
	F32Value
	Bool
	String
	Array
	U64
	I64
	F64
)

// Value is one metadata value: numbers as float64/int64/uint64, strings,
// bools; arrays keep their element type, length and place in the file only,
// their elements read when asked for (Strings, Numbers): held as float64s
// as the header is read, a header of arrays would cost eight times its
// bytes before anything used them.
type Value struct {
	Type  ValueType
	Elem  ValueType // arrays
	Len   uint64    // arrays
	Off   uint64    // arrays: where the first element starts in the file
	Int   int64
	Uint  uint64
	Float float64
	Str   string
}

// TensorInfo is one tensor's entry.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ggml order: Dims[0] is the row length
	Type   Type
	Offset uint64 // into the data section
	Size   uint64 // bytes
	part   int    // which part of a split file holds it: 0 the first
}

// Elems is the tensor's element count.
func (t TensorInfo) Elems() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Shape is the row-major shape: Dims reversed.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// File is an open GGUF file, or the parts of a split one as one: the
// metadata the first part's, the tensors every part's.
type File struct {
	Path      string   // the first part's, for a split file
	Parts     []string // a split file's parts in order; nil for one file
	Version   uint32
	Alignment uint64
	KV        map[string]Value
	Keys      []string // in file order
	Tensors   []TensorInfo
	byName    map[string]int
	data      []byte // the whole file: m's bytes
	dataStart uint64
	m         *mapfile.Mapping
	more      []*File // a split file's parts after the first
}

// MaxKeys and MaxTensors bound a file's metadata keys and tensors, far
// above any model's (a few dozen keys; tensors by the thousand).
const (
	MaxKeys    = 1 << 16
	MaxTensors = 1 << 20
)

// maxDims is ggml's GGML_MAX_DIMS.
const maxDims = 4

// openPart maps and validates the one file at path.
func openPart(path string) (*File, error) {
	if err := mapfile.CheckRegular(path); err != nil {
		return nil, err
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 24 {
		return nil, fmt.Errorf("%s: %d bytes is too short for a GGUF header", path, st.Size())
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("%s: too large to map", path)
	}
	m, err := mapfile.Map(fh, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A download may leave a Git LFS pointer or a web page in its place.
	if err := standin.Check(path, m.Bytes()); err != nil {
		m.Close()
		return nil, err
	}
	f := &File{Path: path, data: m.Bytes(), m: m, KV: map[string]Value{}, byName: map[string]int{}}
	if err := f.parse(); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Close unmaps the file, every part of it; tensor bytes become invalid.
func (f *File) Close() error {
	f.data = nil
	err := f.m.Close()
	for _, p := range f.more {
		err = errors.Join(err, p.Close())
	}
	return err
}

// part is the file of the part that holds t.
func (f *File) part(t TensorInfo) *File {
	if t.part > 0 {
		return f.more[t.part-1]
	}
	return f
}

// PathOf is the path of the file, or the part of a split one, that holds t.
func (f *File) PathOf(t TensorInfo) string { return f.part(t).Path }

// Memory is the memory the file holds: its mapping and its parts'.
func (f *File) Memory() [][]byte {
	out := [][]byte{f.m.Bytes()}
	for _, p := range f.more {
		out = append(out, p.m.Bytes())
	}
	return out
}

// Mapped reports whether b lies in this file's mapping, or a part's (not a
// heap copy).
func (f *File) Mapped(b []byte) bool {
	return f.m.Mapped(b) || slices.ContainsFunc(f.more, func(p *File) bool { return p.m.Mapped(b) })
}

// Drop gives back the pages of b, bytes of this file's mapping that will not
// be read again (a tensor transcoded, or copied by a backend); other memory
// is left alone (mapfile.Mapping.Drop).
func (f *File) Drop(b []byte) {
	f.m.Drop(b)
	for _, p := range f.more {
		p.m.Drop(b)
	}
}

// Tensor returns the named tensor's info.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Bytes returns the tensor's bytes: a sub-slice of its part's mapping.
func (f *File) Bytes(t TensorInfo) []byte {
	p := f.part(t)
	o := p.dataStart + t.Offset
	return p.data[o : o+t.Size]
}

// Strings is the string array under key. The header keeps only its
// length and place (a vocabulary of 150,000 tokens is copied only when
// asked for); the elements were checked as the file opened. An array of
// more than most values is refused by its length, before any is copied.
func (f *File) Strings(key string, most int) ([]string, error) {
	v, r, err := f.array(key, String, most)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, v.Len)
	for i := uint64(0); i < v.Len; i++ {
		out = append(out, r.str())
	}
	return out, r.err
}

// Numbers is the numeric array under key, each element as a float64
// (exact for every type but 64-bit integers past 2^53). An array of more
// than most values is refused by its length: a float64 is 8 times the
// byte a u8 takes in the file.
func (f *File) Numbers(key string, most int) ([]float64, error) {
	v, ok := f.KV[key]
	if ok && v.Type == Array && (v.Elem == String || v.Elem == Array) {
		return nil, fmt.Errorf("metadata %s is an array of %s, want numbers", key, v.Elem)
	}
	v, r, err := f.array(key, v.Elem, most)
	if err != nil {
		return nil, err
	}
	if v.Len == 0 {
		return nil, nil
	}
	out := make([]float64, 0, v.Len)
	for i := uint64(0); i < v.Len; i++ {
		e, err := r.value(v.Elem, 1)
		if err != nil {
			return nil, err
		}
		out = append(out, e.Float)
	}
	return out, r.err
}

func (f *File) array(key string, elem ValueType, most int) (Value, *reader, error) {
	v, ok := f.KV[key]
	switch {
	case !ok:
		return v, nil, fmt.Errorf("no metadata %s", key)
	case v.Type != Array:
		return v, nil, fmt.Errorf("metadata %s is a %s, want an array", key, v.Type)
	case v.Elem != elem:
		return v, nil, fmt.Errorf("metadata %s is an array of %s, want %s", key, v.Elem, elem)
	case v.Len > uint64(max(most, 0)):
		return v, nil, fmt.Errorf("metadata %s is an array of %d values, more than the %d it may hold", key, v.Len, max(most, 0))
	}
	return v, &reader{b: f.data, off: v.Off}, nil
}

// reader walks the header, refusing to read past the end.
type reader struct {
	b   []byte
	off uint64
	err error
}

var errShort = errors.New("short")

func (r *reader) take(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b))-r.off {
		r.err = errShort
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string {
	n := r.u64()
	return string(r.take(n))
}

// MaxString is the longest string value a file may hold, llama.cpp's
// GGUF_MAX_STRING_LENGTH (ggml/src/gguf.cpp), which refuses longer ones.
const MaxString = 1 << 30

// strLen reads a string's length and checks it before a byte is copied: one
// that runs past the file is a short read, one past most is refused. A length
// misread from other bytes (a tensor's data offset) can claim most of a file
// of gigabytes, which copying first would take in memory.
func (r *reader) strLen(most uint64) (n uint64, tooLong bool) {
	n = r.u64()
	switch {
	case r.err != nil:
	case n > uint64(len(r.b))-r.off:
		r.err = errShort
	case n > most:
		return n, true
	}
	return n, false
}

// name reads a key or tensor name of at most most bytes (checkName): a
// longer one is refused by its length, only its first bytes copied for the
// message.
func (r *reader) name(kind string, i uint64, most int) (string, error) {
	n, long := r.strLen(uint64(most))
	if long {
		return "", nameError(kind, i, n, string(r.b[r.off:r.off+min(n, 41)]))
	}
	s := string(r.take(n))
	if r.err == nil {
		return s, checkName(kind, i, s, most)
	}
	return s, nil
}

// checkName refuses a key or tensor name that is no text: what a header
// whose counts are off, or a value misread before it, leaves to be read as
// one. max is the longest name accepted (llama.cpp's tensor names are at
// most 64 bytes).
func checkName(kind string, i uint64, name string, max int) error {
	bad := name == "" || len(name) > max || !utf8.ValidString(name) ||
		strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) })
	if !bad {
		return nil
	}
	return nameError(kind, i, uint64(len(name)), name)
}

// nameError is checkName's error for a name of n bytes that starts with text.
func nameError(kind string, i, n uint64, text string) error {
	return fmt.Errorf("%s %d has a name of %d bytes that is no text (%q): the header's key or tensor counts, or a value before it, are off",
		kind, i, n, cut(text))
}

// endsInside is the error of a header entry the file ends inside of: a
// file cut short, or counts one too many, which read data as entries.
const endsInside = "the file ends inside it: the file is cut short, or the header's key or tensor counts are off"

// cut is at most the first 40 bytes of s, for messages.
func cut(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (f *File) parse() error {
	r := &reader{b: f.data}
	if string(r.take(4)) != "GGUF" {
		return fmt.Errorf("not a GGUF file (magic %q)", f.data[:4])
	}
	f.Version = r.u32()
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return fmt.Errorf("GGUF version 1 is not supported (versions 2 and 3; convert the file with a current llama.cpp)")
	case f.Version&0xffff == 0 && f.Version>>16 != 0:
		return fmt.Errorf("GGUF version field %#x looks big-endian; only little-endian files are supported", f.Version)
	default:
		return fmt.Errorf("GGUF version %d is not supported (versions 2 and 3)", f.Version)
	}
	nt, nkv := r.u64(), r.u64()
	// Every key/value and tensor info takes at least 8+4 bytes: counts
	// beyond what the file could hold are corrupt, not allocations to make.
	if room := uint64(len(f.data)) / 12; nt > room || nkv > room {
		return fmt.Errorf("header claims %d tensors and %d metadata keys, more than the file's %d bytes could hold", nt, nkv, len(f.data))
	}
	// Held, a key costs ten times the 14 bytes it can take in the file, a
	// tensor info four times its 33: a file's size alone would let a large
	// one take gigabytes.
	switch {
	case nkv > MaxKeys:
		return fmt.Errorf("header claims %d metadata keys, more than the %d a file may hold (models hold a few dozen): the file is damaged, or not a model", nkv, MaxKeys)
	case nt > MaxTensors:
		return fmt.Errorf("header claims %d tensors, more than the %d a file may hold: the file is damaged, or not a model", nt, MaxTensors)
	}
	for i := uint64(0); i < nkv; i++ {
		key, err := r.name("metadata key", i, 1<<16)
		if err != nil {
			return err
		}
		v, err := r.value(ValueType(r.u32()), 0)
		if r.err != nil {
			return fmt.Errorf("metadata key %d (%q): %s", i, cut(key), endsInside)
		}
		if err != nil {
			return fmt.Errorf("metadata key %s: %w", clip.Quote(key), err)
		}
		if _, dup := f.KV[key]; dup {
			return fmt.Errorf("metadata key %s appears twice", clip.Quote(key))
		}
		f.KV[key] = v
		f.Keys = append(f.Keys, key)
	}
	f.Alignment = 32
	if v, ok := f.KV["general.alignment"]; ok {
		if v.Type != U32 {
			return fmt.Errorf("general.alignment is a %v, want a u32 (as gguf-py and llama.cpp write it)", v.Type)
		}
		if v.Uint == 0 || v.Uint&(v.Uint-1) != 0 {
			return fmt.Errorf("general.alignment %d is not a power of two", v.Uint)
		}
		f.Alignment = v.Uint
	}
	// Room for the tensor infos is made at once: grown one at a time, with
	// their dimensions apart, they cost a dozen times the header's bytes.
	// Each takes at least 33 bytes (a name of one byte, one dimension), so
	// no more room is made than the rest of the file could fill; a count
	// past that ends inside an entry, as the loop says.
	room := min(nt, (uint64(len(f.data))-r.off)/33)
	f.Tensors = make([]TensorInfo, 0, room)
	f.byName = make(map[string]int, room)
	dims := make([]uint64, 0, 2*room) // most tensors are matrices
	for i := uint64(0); i < nt; i++ {
		name, err := r.name("tensor info", i, 256)
		if err != nil {
			return err
		}
		t := TensorInfo{Name: name}
		nd := r.u32()
		if r.err == nil && (nd == 0 || nd > maxDims) {
			return fmt.Errorf("tensor %q has %d dimensions (1 to %d)", t.Name, nd, maxDims)
		}
		start := len(dims)
		for j := uint32(0); j < nd && r.err == nil; j++ {
			dims = append(dims, r.u64())
		}
		t.Dims = dims[start:len(dims):len(dims)]
		t.Type, t.Offset = Type(r.u32()), r.u64()
		if r.err != nil {
			return fmt.Errorf("tensor info %d (%q): %s", i, cut(t.Name), endsInside)
		}
		if _, dup := f.byName[t.Name]; dup {
			return fmt.Errorf("tensor %q appears twice", t.Name)
		}
		f.byName[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.dataStart = (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	for i := range f.Tensors {
		t := &f.Tensors[i]
		vals, bytes, ok := t.Type.Block()
		elems := uint64(1)
		for _, d := range t.Dims {
			switch {
			case d == 0:
				return fmt.Errorf("tensor %q has dimensions %v: a tensor of no values, which no model holds", t.Name, t.Dims)
			case d > 1<<40 || elems > (1<<50)/d:
				return fmt.Errorf("tensor %q has dimensions %v: more than 2^50 values, beyond any model's tensor (a header misread, or damaged)", t.Name, t.Dims)
			}
			elems *= d
		}
		if !ok {
			// Readable metadata, but the tensor's bytes cannot be sized or
			// used: refused when a model asks for it.
			continue
		}
		if t.Dims[0]%uint64(vals) != 0 {
			return fmt.Errorf("tensor %q: rows of %d values do not divide into %v blocks of %d", t.Name, t.Dims[0], t.Type, vals)
		}
		t.Size = elems / uint64(vals) * uint64(bytes)
		if t.Offset%f.Alignment != 0 {
			return fmt.Errorf("tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		// Compared as lengths, not as sums: an offset near 2^64 must not
		// wrap around to a place inside the file.
		if avail := uint64(len(f.data)) - min(f.dataStart, uint64(len(f.data))); t.Offset > avail || t.Size > avail-t.Offset {
			return fmt.Errorf("tensor %q is cut short: its %d bytes at data offset %d run past the end of the file (%d bytes, data from byte %d)", t.Name, t.Size, t.Offset, len(f.data), f.dataStart)
		}
	}
	return f.checkOverlaps()
}

// checkOverlaps refuses tensors whose bytes overlap: gguf-py writes each
// tensor's data apart, so overlapping ones are a broken file, and a type
// misread would otherwise run one tensor into the next silently. Where
// every tensor's size is known it also refuses bytes no tensor holds
// beyond the alignment's padding: gguf-py and llama.cpp write the tensors
// back to back, each padded, so such bytes mean a tensor count, type or
// shape that does not match the data, which would read every tensor from
// the wrong bytes.
func (f *File) checkOverlaps() error {
	var sized []int
	for i, t := range f.Tensors {
		if _, _, ok := t.Type.Block(); ok {
			sized = append(sized, i)
		}
	}
	slices.SortFunc(sized, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for j := 1; j < len(sized); j++ {
		a, b := f.Tensors[sized[j-1]], f.Tensors[sized[j]]
		if b.Offset < a.Offset+a.Size {
			return fmt.Errorf("tensors %q (data bytes %d to %d) and %q (from %d) overlap", a.Name, a.Offset, a.Offset+a.Size, b.Name, b.Offset)
		}
	}
	if len(sized) < len(f.Tensors) || len(sized) == 0 {
		return nil
	}
	const hint = "the header's tensor count or a tensor's type or shape does not match the data, or bytes were added to the file"
	if first := f.Tensors[sized[0]]; first.Offset >= f.Alignment {
		return fmt.Errorf("no tensor holds the first %d bytes of the data (the first, %q, starts at data byte %d): %s",
			first.Offset, first.Name, first.Offset, hint)
	}
	for j := 1; j < len(sized); j++ {
		a, b := f.Tensors[sized[j-1]], f.Tensors[sized[j]]
		if gap := b.Offset - (a.Offset + a.Size); gap >= f.Alignment {
			return fmt.Errorf("%d data bytes between tensor %q (ends at data byte %d) and %q (starts at %d) belong to no tensor: %s",
				gap, a.Name, a.Offset+a.Size, b.Name, b.Offset, hint)
		}
	}
	last := f.Tensors[sized[len(sized)-1]]
	if end, data := last.Offset+last.Size, uint64(len(f.data))-min(f.dataStart, uint64(len(f.data))); data-end >= f.Alignment {
		return fmt.Errorf("%d bytes follow the last tensor's data (%q ends at data byte %d of %d) and belong to no tensor: %s",
			data-end, last.Name, end, data, hint)
	}
	return nil
}

// value reads one value of type vt (depth guards nested arrays).
func (r *reader) value(vt ValueType, depth int) (Value, error) {
	v := Value{Type: vt}
	switch vt {
	case U8:
		if b := r.take(1); b != nil {
			v.Uint, v.Int, v.Float = uint64(b[0]), int64(b[0]), float64(b[0])
		}
	case I8:
		if b := r.take(1); b != nil {
			v.Int, v.Float = int64(int8(b[0])), float64(int8(b[0]))
		}
	case Bool:
		if b := r.take(1); b != nil {
			if b[0] > 1 {
				return v, fmt.Errorf("bool value %d", b[0])
			}
			v.Uint, v.Int = uint64(b[0]), int64(b[0])
		}
	case U16:
		if b := r.take(2); b != nil {
			x := binary.LittleEndian.Uint16(b)
			v.Uint, v.Int, v.Float = uint64(x), int64(x), float64(x)
		}
	case I16:
		if b := r.take(2); b != nil {
			x := int16(binary.LittleEndian.Uint16(b))
			v.Int, v.Float = int64(x), float64(x)
		}
	case U32:
		x := r.u32()
		v.Uint, v.Int, v.Float = uint64(x), int64(x), float64(x)
	case I32:
		x := int32(r.u32())
		v.Int, v.Float = int64(x), float64(x)
	case F32Value:
		v.Float = float64(math.Float32frombits(r.u32()))
	case U64:
		x := r.u64()
		v.Uint, v.Int, v.Float = x, int64(x), float64(x)
	case I64:
		x := int64(r.u64())
		v.Int, v.Float = x, float64(x)
	case F64:
		v.Float = math.Float64frombits(r.u64())
	case String:
		n, long := r.strLen(MaxString)
		switch {
		case long:
			return v, fmt.Errorf("a string of %d bytes, more than the %d llama.cpp reads", n, MaxString)
		case depth > 0:
			// An array's strings are only checked here: Strings copies
			// them when asked for.
			r.take(n)
		default:
			v.Str = string(r.take(n))
		}
	case Array:
		if depth > 0 {
			return v, fmt.Errorf("nested arrays are not supported")
		}
		v.Elem, v.Len = ValueType(r.u32()), r.u64()
		v.Off = r.off
		if v.Len > uint64(len(r.b)) {
			return v, fmt.Errorf("array of %d values is longer than the file", v.Len)
		}
		for i := uint64(0); i < v.Len && r.err == nil; i++ {
			if _, err := r.value(v.Elem, depth+1); err != nil {
				return v, err
			}
		}
	default:
		return v, fmt.Errorf("unknown value type %d", vt)
	}
	return v, nil
}
