package readfile

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
)

// Kind is a binary file format a user may give where a text file is
// wanted (the results database for a suite, a model for an export), told
// by its first bytes so the error can say what the file is.
type Kind int

const (
	Unknown     Kind = iota // none of these: the reader judges the file
	SQLite                  // "SQLite format 3\x00"
	GGUF                    // "GGUF" and a uint32 version
	Safetensors             // a little-endian uint64 header length, then the JSON header's '{'
)

// HeadLen bytes of a file are enough for KindOf.
const HeadLen = 16

// maxSafetensorsHeader is the largest header safetensors writes (its
// format's bound, 100 MB). Eight bytes of text read as a little-endian
// length are far past it (each byte is at least a tab, 0x09), so a text
// file whose ninth byte is '{' ("params: {") is not taken for one.
const maxSafetensorsHeader = 100_000_000

// KindOf is the format head, a file's first bytes, begins with. Each is
// told by its magic together with bytes no text holds (a NUL, a length no
// text spells), so a text file that begins "GGUF:" is Unknown.
func KindOf(head []byte) Kind {
	switch {
	case len(head) >= 16 && string(head[:16]) == "SQLite format 3\x00":
		return SQLite
	case len(head) >= 8 && string(head[:4]) == "GGUF" && (head[4] == 0 || head[7] == 0):
		// The version after the magic is a small uint32, little- or
		// big-endian: a NUL either way.
		return GGUF
	case len(head) >= 9 && head[8] == '{' && binary.LittleEndian.Uint64(head) < maxSafetensorsHeader:
		return Safetensors
	}
	return Unknown
}

// String says what a file of the kind is, for messages.
func (k Kind) String() string {
	switch k {
	case SQLite:
		return "an SQLite database"
	case GGUF:
		return "a GGUF model file"
	case Safetensors:
		return "a safetensors weights file"
	}
	return "a file of no known kind"
}

// Head is the first HeadLen bytes (fewer if the file is shorter) of the
// regular file at path, or nil: a pipe or device is not opened again, as
// its bytes were read or refused already.
func Head(path string) []byte {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, HeadLen)
	n, _ := io.ReadFull(f, b)
	return b[:n]
}

// Compressed is a compressed format a text file may travel in
// (runs.jsonl.gz), with the commands that decompress a file of it: File
// beside it (the path after it), Pipe from standard input to standard
// output.
type Compressed struct{ Name, File, Pipe string }

// compressions are told by their magics, each holding bytes no text
// begins with (a control byte, or one that is not UTF-8); bzip2's, which
// is text, by its block magic after it, which no text file begins with.
var compressions = []struct {
	magic string
	Compressed
}{
	{"\x1f\x8b", Compressed{"gzip", "gunzip -k", "gunzip -c"}},
	{"\x28\xb5\x2f\xfd", Compressed{"zstd", "zstd -d", "zstd -dc"}},
	{"\xfd7zXZ\x00", Compressed{"xz", "xz -dk", "xz -dc"}},
	{"PK\x03\x04", Compressed{"zip", "unzip", "unzip -p"}},
}

// Compression is the compressed format head begins with, or false: a
// compressed export, suite or table is read once decompressed.
func Compression(head []byte) (Compressed, bool) {
	for _, c := range compressions {
		if bytes.HasPrefix(head, []byte(c.magic)) {
			return c.Compressed, true
		}
	}
	if len(head) >= 10 && string(head[:3]) == "BZh" && '1' <= head[3] && head[3] <= '9' && string(head[4:10]) == "1AY&SY" {
		return Compressed{"bzip2", "bunzip2 -k", "bunzip2 -c"}, true
	}
	return Compressed{}, false
}
