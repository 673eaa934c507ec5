package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/internal/atomicfile"
)

// WriteTensor is one tensor for Write; Data holds its raw little-endian bytes.
type WriteTensor struct {
	Name, DType string
	Shape       []int
	Data        []byte
}

// Write writes a safetensors file with the tensors in the order given and
// meta as __metadata__ (omitted when empty). The header is padded with
// spaces so the data section starts 8-byte aligned. The file is written
// under a temporary name and renamed into place, so readers that have the
// old file mapped keep valid memory; a link is written through to its
// target.
func Write(path string, tensors []WriteTensor, meta map[string]string) error {
	hdr, err := encodeHeader(tensors, meta)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Whole or not at all, through a link to its target (internal/atomicfile).
	if err := atomicfile.Write(path, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
		w.Write(n[:])
		w.Write(hdr)
		for _, t := range tensors {
			w.Write(t.Data)
		}
		return w.Flush()
	}); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// encodeHeader builds the padded JSON header, checking each tensor the way
// ParseHeader will, so Write never produces a file Open rejects.
func encodeHeader(tensors []WriteTensor, meta map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	if len(meta) > 0 {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		b.WriteString(`"__metadata__":`)
		b.Write(m)
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for _, t := range tensors {
		if t.Name == "__metadata__" {
			return nil, fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tensor %q given twice", t.Name)
		}
		seen[t.Name] = true
		// JSON would turn bad UTF-8 into U+FFFD and the name would not read back.
		if !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("tensor name %q is not valid UTF-8", t.Name)
		}
		elem, ok := DTypeSize(t.DType)
		if !ok {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		shape := make([]int64, len(t.Shape))
		for i, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %q: shape %v has negative dimension %d", t.Name, t.Shape, d)
			}
			shape[i] = int64(d)
		}
		need, ok := tensorBytes(shape, elem)
		if !ok {
			return nil, fmt.Errorf("tensor %q: shape %v of %s is too large: its byte size overflows int64", t.Name, t.Shape, t.DType)
		}
		if need != int64(len(t.Data)) {
			return nil, fmt.Errorf("tensor %q: %d data bytes but shape %v of %s needs %d", t.Name, len(t.Data), t.Shape, t.DType, need)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(t.Name) // marshalling a string cannot fail
		b.Write(name)
		b.WriteString(`:{"dtype":`)
		dt, _ := json.Marshal(t.DType)
		b.Write(dt)
		b.WriteString(`,"shape":[`)
		for i, d := range t.Shape {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, off+need)
		off += need
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("header of %d bytes is over the limit of %d bytes the safetensors library reads", b.Len(), MaxHeaderSize)
	}
	return b.Bytes(), nil
}
