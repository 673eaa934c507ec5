package readfile

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// safetensorsHead is a safetensors file's start: the header's length, then
// the header.
func safetensorsHead(header string) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(b, header...)
}

// Binary formats are told by their magic and the bytes after it that no
// text holds; text that begins like one is still text.
func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		head []byte
		want Kind
	}{
		{"sqlite", []byte("SQLite format 3\x00\x10\x00\x02\x02"), SQLite},
		{"gguf v3", []byte("GGUF\x03\x00\x00\x00\x10\x00\x00\x00"), GGUF},
		{"gguf big-endian", []byte("GGUF\x00\x00\x00\x03\x00\x00\x00\x10"), GGUF},
		{"safetensors", safetensorsHead(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`), Safetensors},
		{"empty safetensors header", safetensorsHead("{}"), Safetensors},
		{"empty", nil, Unknown},
		{"short sqlite", []byte("SQLite format 3"), Unknown},
		{"suite", []byte("name: ci\ncases:\n"), Unknown},
		{"suite opening with params", []byte("params: {batch: 1}\n"), Unknown},
		{"suite with a GGUF key", []byte("GGUF: 1\nname: x\n"), Unknown},
		{"text about SQLite", []byte("SQLite format 3 is a file\n"), Unknown},
		{"utf-16 suite", []byte("\xff\xfen\x00a\x00m\x00e\x00:\x00 \x00x\x00"), Unknown},
		{"length past the bound", append(binary.LittleEndian.AppendUint64(nil, 1<<40), '{'), Unknown},
	} {
		if got := KindOf(tc.head); got != tc.want {
			t.Errorf("%s: KindOf(%q) = %v, want %v", tc.name, tc.head, got, tc.want)
		}
	}
}

// Head reads a regular file's first bytes, and opens nothing else.
func TestHead(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	long := filepath.Join(dir, "long")
	os.WriteFile(short, []byte("GGUF"), 0o644)
	os.WriteFile(long, []byte("SQLite format 3\x00 and the rest of the file"), 0o644)
	for _, tc := range []struct {
		path, want string
	}{
		{short, "GGUF"},
		{long, "SQLite format 3\x00"},
		{dir, ""},
		{filepath.Join(dir, "none"), ""},
	} {
		if got := string(Head(tc.path)); got != tc.want {
			t.Errorf("Head(%s) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// Compressed files are told by their magic; text that begins like one
// is text.
func TestCompression(t *testing.T) {
	for _, tc := range []struct {
		name string
		head []byte
		want string // "" for none
	}{
		{"gzip", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"), "gzip"},
		{"zstd", []byte("\x28\xb5\x2f\xfd\x24\x00"), "zstd"},
		{"xz", []byte("\xfd7zXZ\x00\x00\x04"), "xz"},
		{"zip", []byte("PK\x03\x04\x14\x00"), "zip"},
		{"bzip2", []byte("BZh91AY&SY\x12\x34"), "bzip2"},
		{"export", []byte(`{"format":"mtlbench-run/2"}`), ""},
		{"text about bzip2", []byte("BZh9 is bzip2's magic\n"), ""},
		{"text opening with PK", []byte("PK: 1\nname: x\n"), ""},
		{"empty", nil, ""},
	} {
		c, ok := Compression(tc.head)
		if c.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: Compression(%q) = %q, %v, want %q", tc.name, tc.head, c.Name, ok, tc.want)
		}
		if ok && (c.File == "" || c.Pipe == "") {
			t.Errorf("%s: no command decompresses it: %+v", tc.name, c)
		}
	}
}
