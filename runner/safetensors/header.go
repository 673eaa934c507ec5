// Package safetensors reads HuggingFace safetensors checkpoints: single files,
// sharded folders with a model.safetensors.index.json, or loose shards.
//
// Files are memory-mapped read-only and tensor bytes are handed out as
// sub-slices of the mapping, so loading costs no copies. Every header is
// validated before any offset in it is trusted: a malformed or hostile file
// yields an error, never a panic or an out-of-range slice.
//
// The slices returned by Bytes point into read-only memory: writing to them
// crashes the process, and they become invalid after Close. If another process
// truncates a file while it is mapped, touching the lost pages raises SIGBUS;
// replace checkpoints by rename (as Write does), never rewrite them in place.
package safetensors

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/clip"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// MaxHeaderSize bounds the JSON header, as the safetensors library does
// (MAX_HEADER_SIZE, safetensors/src/tensor.rs: 100,000,000 bytes, refused
// past it). Real headers are at most a few MiB; a larger length field
// almost always means the file is not safetensors.
const MaxHeaderSize = 100_000_000

// MaxMetadata bounds the entries of a header's __metadata__.
const MaxMetadata = 1 << 16

// TensorInfo describes one tensor of a safetensors file.
type TensorInfo struct {
	Name       string
	DType      string // as in the header, e.g. "BF16"
	Shape      []int
	Begin, End int64 // byte offsets relative to the data section
}

// Size is the tensor's length in bytes.
func (t TensorInfo) Size() int64 { return t.End - t.Begin }

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

func (t TensorInfo) clone() TensorInfo {
	t.Shape = slices.Clone(t.Shape)
	return t
}

var dtypeSizes = map[string]int{
	"BOOL": 1,
	"U8":   1, "I8": 1,
	"F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8, "C64": 8,
}

// unreadDTypes are the safetensors library's dtypes (its Dtype enum,
// safetensors/src/tensor.rs) that mtlbench does not read: sub-byte floats
// and the FNUZ float8 forms.
var unreadDTypes = []string{"F4", "F6_E2M3", "F6_E3M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"}

// DTypeSize returns the size in bytes of one element of a safetensors dtype.
// Sub-byte types (e.g. F4) are not supported and report false.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// tensorBytes is product(shape)*dtypeSize, refusing results beyond int64.
func tensorBytes(shape []int64, elem int) (int64, bool) {
	for _, d := range shape {
		if d == 0 {
			return 0, true // a zero dim empties the tensor whatever the others say
		}
	}
	n := int64(elem)
	for _, d := range shape {
		if n > math.MaxInt64/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

type rawEntry struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets *[]int64 `json:"data_offsets"`
}

// minEntry is the fewest bytes a tensor's member of a header takes:
// "":{"dtype":"U8","shape":[],"data_offsets":[0,0]} and its comma.
const minEntry = 50

// MaxRank bounds a tensor's dimensions (numpy's own limit).
const MaxRank = 64

// listCommas counts the commas inside the lists of a header entry (those
// between its numbers, not in strings or between its fields): read before
// the entry is decoded, so a shape or data_offsets of millions of numbers
// is refused by its length, never held as Go ints, dozens of times its
// bytes.
func listCommas(raw []byte) int {
	depth, n := 0, 0
	for j := 0; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			if j = jsonlen.StringEnd(raw, j+1) - 1; j < 0 {
				return n
			}
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth > 1:
			n++
		}
	}
	return n
}

// ParseHeader validates a safetensors header. r holds the start of the file:
// the 8-byte length and the whole JSON header at least (the whole file is
// fine); fileSize is the size of the entire file. It returns the tensors
// sorted by Begin, the __metadata__ map (nil if absent) and the absolute
// offset of the data section. On success every [dataStart+Begin,
// dataStart+End) lies within the file and the tensors tile the data
// section, as the format's own library requires.
func ParseHeader(r []byte, fileSize int64) (tensors []TensorInfo, meta map[string]string, dataStart int64, err error) {
	return parseHeader(r, fileSize, -1)
}

// parseHeader is ParseHeader refusing a header of more than maxTensors
// tensors (-1: no bound) as soon as it is past it, before the rest is read.
func parseHeader(r []byte, fileSize int64, maxTensors int) (tensors []TensorInfo, meta map[string]string, dataStart int64, err error) {
	if fileSize < int64(len(r)) {
		return nil, nil, 0, fmt.Errorf("have %d bytes of a file said to be %d bytes long", len(r), fileSize)
	}
	if fileSize < 8 {
		return nil, nil, 0, fmt.Errorf("file has %d bytes, fewer than the 8-byte header length", fileSize)
	}
	if len(r) < 8 {
		return nil, nil, 0, fmt.Errorf("need the first 8 bytes of the file, have %d", len(r))
	}
	n := binary.LittleEndian.Uint64(r)
	if n > MaxHeaderSize {
		return nil, nil, 0, fmt.Errorf("header length %d is over the limit of %d bytes the safetensors library reads (not a safetensors file?)", n, MaxHeaderSize)
	}
	dataStart = 8 + int64(n)
	if dataStart > fileSize {
		return nil, nil, 0, fmt.Errorf("truncated: header says %d bytes, file has %d", n, fileSize)
	}
	if int64(len(r)) < dataStart {
		return nil, nil, 0, fmt.Errorf("need the first %d bytes of the file to read the header, have %d", dataStart, len(r))
	}
	dataLen := fileSize - dataStart
	hdr := r[8:dataStart]

	// encoding/json would silently replace bad UTF-8; the format demands UTF-8.
	if err := jsonerr.UTF8(hdr); err != nil {
		return nil, nil, 0, fmt.Errorf("header is %w", err)
	}
	if err := cmp.Or(jsonerr.LoneSurrogate(hdr), jsonerr.Nesting(hdr, jsonerr.SerdeDepth)); err != nil {
		return nil, nil, 0, fmt.Errorf("header is not read: %w (the safetensors library refuses it)", err)
	}
	obj, err := headerObject(hdr)
	if err != nil {
		return nil, nil, 0, err
	}
	// The object is read in place, member by member, building the tensors
	// directly: decoded through generic values or copied out as raw
	// messages, a header costs several times its bytes (up to 100 MB).
	// Only an entry of unusual form is handed to encoding/json, whose
	// errors it words.
	// Room for the tensors is made at once, for no more than the members
	// and than the bytes could describe: a member of a few bytes, counted,
	// would make room for millions before the first is found no tensor.
	count := min(jsonlen.Members(obj), len(obj)/minEntry+1)
	if maxTensors >= 0 {
		count = min(count, maxTensors+1)
	}
	tensors = make([]TensorInfo, 0, count)
	var dims []int // the shapes are cut from one block, not allocated one by one
	var sawMeta bool
	var shapeBuf, offBuf [MaxRank + 1]int64 // each entry's lists, read in turn
	for key, raw := range members(obj) {
		name := unquote(key)
		if name == "__metadata__" {
			if sawMeta {
				return nil, nil, 0, fmt.Errorf("header names %s twice", clip.Quote(name))
			}
			sawMeta = true
			// Counted before it is decoded: held, an entry costs ten
			// times its bytes.
			if n := jsonlen.Members(raw); n > MaxMetadata {
				return nil, nil, 0, fmt.Errorf("__metadata__ holds %d entries, more than the %d a header may hold (writers put a few there)", n, MaxMetadata)
			}
			if meta, err = readMetadata(raw); err != nil {
				return nil, nil, 0, fmt.Errorf("%w (__metadata__ maps strings to strings)", err)
			}
			continue
		}
		if maxTensors >= 0 && len(tensors) == maxTensors {
			return nil, nil, 0, fmt.Errorf("the header lists more than %d tensors, more than the model could read: %w", maxTensors, ErrTooManyTensors)
		}
		// A shape of MaxRank numbers and two offsets have MaxRank commas.
		if listCommas(raw) > MaxRank {
			return nil, nil, 0, fmt.Errorf("tensor %s: its lists hold more numbers than a shape of at most %d dimensions and data_offsets of two", clip.Quote(name), MaxRank)
		}
		dtype, shape, offs, ok := plainEntry(raw, &shapeBuf, &offBuf)
		if !ok {
			fields, twice := entryFields(raw)
			if twice != "" {
				return nil, nil, 0, fmt.Errorf("tensor %s: invalid entry: %s is given twice (the safetensors library refuses a field given twice)", clip.Quote(name), twice)
			}
			var e rawEntry
			if err := json.Unmarshal(fields, &e); err != nil {
				return nil, nil, 0, fmt.Errorf("tensor %s: invalid entry: %w", clip.Quote(name), jsonerr.ExplainAt(err, raw, clip.Key(name)))
			}
			if err := missing(name, &e); err != nil {
				return nil, nil, 0, err
			}
			dtype, shape, offs = *e.DType, *e.Shape, *e.Offsets
		}
		if len(dims)+len(shape) > cap(dims) {
			dims = make([]int, 0, max(1024, len(shape)))
		}
		t, err := checkEntry(name, dtype, shape, offs, dataLen, dims[len(dims):len(dims)+len(shape):len(dims)+len(shape)])
		if err != nil {
			return nil, nil, 0, err
		}
		dims = dims[:len(dims)+len(shape)]
		tensors = append(tensors, t)
	}
	// A name given twice keeps its last entry, as the safetensors library
	// reads the header (a map of the tensors); the bytes of the one before
	// are then no tensor's, which the tiling below refuses unless it held
	// none or the same as the last. Names are checked for repeats once all
	// are read, sorted (stably: the header's order within a name), rather
	// than through a set of them, which would cost more than the tensors.
	slices.SortStableFunc(tensors, func(a, b TensorInfo) int { return cmp.Compare(a.Name, b.Name) })
	var twice string // a name given twice, which an error about the tiling names
	kept := tensors[:0]
	for i, t := range tensors {
		if i+1 < len(tensors) && tensors[i+1].Name == t.Name {
			twice = t.Name
			continue
		}
		kept = append(kept, t)
	}
	tensors = kept
	tiling := func(err error) error {
		if twice == "" {
			return err
		}
		return fmt.Errorf("%w (the header names %s twice: its last entry is read, as the safetensors library reads it)", err, clip.Quote(twice))
	}

	slices.SortFunc(tensors, func(a, b TensorInfo) int {
		return cmp.Or(cmp.Compare(a.Begin, b.Begin), cmp.Compare(a.End, b.End), cmp.Compare(a.Name, b.Name))
	})
	// Empty tensors hold no bytes, so they cannot overlap anything.
	prev := -1
	for i, t := range tensors {
		if t.Begin == t.End {
			continue
		}
		if prev >= 0 && t.Begin < tensors[prev].End {
			p := tensors[prev]
			return nil, nil, 0, tiling(fmt.Errorf("tensors %s [%d, %d] and %s [%d, %d] overlap", clip.Quote(p.Name), p.Begin, p.End, clip.Quote(t.Name), t.Begin, t.End))
		}
		prev = i
	}
	// The tensors tile the data from its start to the file's end, as the
	// format's own library requires: a hole or trailing bytes mean offsets
	// that are off.
	// An empty tensor too must start where the tensors before it end: the
	// library's check (Metadata::validate) walks them all in the order of
	// their offsets, so one inside another's bytes is refused.
	var end int64
	for _, t := range tensors {
		if t.Begin != end {
			return nil, nil, 0, tiling(fmt.Errorf("tensor %s starts at byte %d of the data, where the tensors before it end at %d (the tensors must tile the data)", clip.Quote(t.Name), t.Begin, end))
		}
		end = t.End
	}
	if end != dataLen {
		return nil, nil, 0, tiling(fmt.Errorf("the tensors end at byte %d of the data, which holds %d: %d bytes after them", end, dataLen, dataLen-end))
	}
	return tensors, meta, dataStart, nil
}

// missing names the field an entry encoding/json read lacks.
func missing(name string, e *rawEntry) error {
	switch {
	case e.DType == nil:
		return fmt.Errorf("tensor %s: missing dtype", clip.Quote(name))
	case e.Shape == nil:
		return fmt.Errorf("tensor %s: missing shape", clip.Quote(name))
	case e.Offsets == nil:
		return fmt.Errorf("tensor %s: missing data_offsets", clip.Quote(name))
	}
	return nil
}

// checkEntry validates one tensor's fields; dims, of len(shape), receives
// its shape.
func checkEntry(name, dtype string, shape, offs []int64, dataLen int64, dims []int) (TensorInfo, error) {
	elem, ok := DTypeSize(dtype)
	if !ok {
		if slices.Contains(unreadDTypes, dtype) {
			return TensorInfo{}, fmt.Errorf("tensor %s: dtype %s, which the safetensors format has, is not one mtlbench reads (%s)", clip.Quote(name), dtype, strings.Join(slices.Sorted(maps.Keys(dtypeSizes)), ", "))
		}
		return TensorInfo{}, fmt.Errorf("tensor %s: unknown dtype %s", clip.Quote(name), clip.Quote(dtype))
	}
	if len(shape) > MaxRank {
		return TensorInfo{}, fmt.Errorf("tensor %s: shape has %d dimensions, more than %d", clip.Quote(name), len(shape), MaxRank)
	}
	for i, d := range shape {
		if d < 0 {
			return TensorInfo{}, fmt.Errorf("tensor %s: shape %v has negative dimension %d", clip.Quote(name), shape, d)
		}
		if d > math.MaxInt { // only reachable where int is 32 bits
			return TensorInfo{}, fmt.Errorf("tensor %s: shape %v has dimension %d, too large for this platform", clip.Quote(name), shape, d)
		}
		dims[i] = int(d)
	}
	if len(offs) != 2 {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets must be [begin, end], got a list of %d", clip.Quote(name), len(offs))
	}
	begin, end := offs[0], offs[1]
	if begin < 0 || end < begin {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets [%d, %d] are negative or reversed", clip.Quote(name), begin, end)
	}
	need, ok := tensorBytes(shape, elem)
	if !ok {
		return TensorInfo{}, fmt.Errorf("tensor %s: shape %v of %s is too large: its byte size overflows int64", clip.Quote(name), shape, dtype)
	}
	if end-begin != need {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets [%d, %d] hold %d bytes but shape %v of %s needs %d", clip.Quote(name), begin, end, end-begin, shape, dtype, need)
	}
	if end > dataLen {
		return TensorInfo{}, fmt.Errorf("tensor %s: data_offsets [%d, %d] run past the end of the data section (%d bytes)", clip.Quote(name), begin, end, dataLen)
	}
	return TensorInfo{Name: name, DType: dtype, Shape: dims, Begin: begin, End: end}, nil
}
