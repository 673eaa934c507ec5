package readfile

import (
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
