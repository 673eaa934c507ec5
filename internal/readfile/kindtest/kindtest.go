// Package kindtest writes small files of each kind readfile.KindOf tells
// apart, for the tests of the errors that name a file given where another
// is wanted (internal/readfile/kind.go).
package kindtest

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/mtlbench/mtlbench/internal/readfile"
)

// SafetensorsHeader is the one tensor Bytes(readfile.Safetensors) holds:
// an f32 "w" of one value, 1.
const SafetensorsHeader = `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`

// Bytes is the start of a file of kind k, enough for KindOf and for a
// reader that looks past the magic: a database's first page header with
// bytes that are not UTF-8, a GGUF v3 header of no tensors, a whole
// safetensors file. Unknown gives nil.
func Bytes(k readfile.Kind) []byte {
	switch k {
	case readfile.SQLite:
		return append([]byte("SQLite format 3\x00\x10\x00\x02\x02\x00@  \x00\x00\x00\x99"), make([]byte, 64)...)
	case readfile.GGUF:
		return append([]byte("GGUF\x03\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00"), make([]byte, 64)...)
	case readfile.Safetensors:
		return append(binary.LittleEndian.AppendUint64(nil, uint64(len(SafetensorsHeader))), SafetensorsHeader+"\x00\x00\x80\x3f"...)
	}
	return nil
}

// Write writes data to dir/name, making the folders it needs, and returns
// its path.
func Write(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
