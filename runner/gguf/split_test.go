package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// splitPart is one part of a split file: its split keys and tensors, each
// tensor's data filled with the part's number so a read says which part it
// came from.
func splitPart(no, count, total uint32, tensors ...string) []byte {
	var infos []ti
	for _, n := range tensors {
		infos = append(infos, ti{n, []uint64{8}, F32, 32})
	}
	kv := map[string]uint32{"split.no": no, "split.count": count, "split.tensors.count": total}
	b := build(3, kv, infos, 32)
	for i := len(b) - 32*len(tensors); i < len(b); i++ {
		b[i] = byte(no + 1)
	}
	return b
}

// writeParts writes parts as gguf-split names them, NAME-0000i-of-0000n.gguf.
func writeParts(t *testing.T, dir string, parts [][]byte) []string {
	var paths []string
	for i, b := range parts {
		p := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.gguf", i+1, len(parts)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// A split file opens as one from any of its parts: the first part's
// metadata, every part's tensors, each read from its own part. The first
// part may hold no tensors (gguf-split --no-tensor-first-split).
func TestOpenSplit(t *testing.T) {
	paths := writeParts(t, t.TempDir(), [][]byte{
		splitPart(0, 3, 4),
		splitPart(1, 3, 4, "a", "b"),
		splitPart(2, 3, 4, "c", "d"),
	})
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Path != paths[0] || len(f.Parts) != 3 || f.Parts[2] != paths[2] || len(f.Tensors) != 4 {
			t.Errorf("opened as %s: path %s, parts %v, %d tensors", p, f.Path, f.Parts, len(f.Tensors))
		}
		for name, part := range map[string]int{"a": 1, "b": 1, "c": 2, "d": 2} {
			info, ok := f.Tensor(name)
			if !ok {
				t.Fatalf("tensor %s missing", name)
			}
			b := f.Bytes(info)
			if len(b) != 32 || b[0] != byte(part+1) || b[31] != byte(part+1) {
				t.Errorf("tensor %s: %d bytes starting %d, want part %d's", name, len(b), b[0], part+1)
			}
			if !f.Mapped(b) || f.PathOf(info) != paths[part] {
				t.Errorf("tensor %s: mapped %v, in %s", name, f.Mapped(b), f.PathOf(info))
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// split.count 1 is a whole file.
	one := writeParts(t, t.TempDir(), [][]byte{splitPart(0, 1, 1, "a")})
	f, err := Open(one[0])
	if err != nil || f.Parts != nil || len(f.Tensors) != 1 {
		t.Fatalf("split.count 1: %v", err)
	}
	f.Close()
}

// A split file whose parts are missing, misnamed or disagree is an error
// naming the part and what is wrong, before any tensor is read.
func TestBadSplit(t *testing.T) {
	good := func() [][]byte {
		return [][]byte{splitPart(0, 3, 3, "a"), splitPart(1, 3, 3, "b"), splitPart(2, 3, 3, "c")}
	}
	cases := []struct {
		name  string
		parts func() [][]byte
		edit  func(dir string, paths []string)
		want  string
	}{
		{"a part missing", good, func(_ string, p []string) { os.Remove(p[1]) }, "model-00002-of-00003.gguf: part 2 of 3 of the split GGUF file is missing"},
		{"renamed", good, func(dir string, p []string) {
			os.Rename(p[0], filepath.Join(dir, "model.gguf"))
			p[0] = filepath.Join(dir, "model.gguf")
		}, `its name does not end in "-00001-of-00003.gguf"`},
		{"a part of another count", func() [][]byte {
			g := good()
			g[2] = splitPart(2, 4, 3, "c")
			return g
		}, nil, "split.no 2 and split.count 4 make it part 3 of 4, but its name makes it part 3 of 3"},
		{"a part of no split", func() [][]byte {
			g := good()
			g[0] = splitPart(0, 1, 3, "a")
			return g
		}, func(_ string, p []string) { p[0], p[1] = p[1], p[0] }, "model-00001-of-00003.gguf: its name makes it part 1 of 3 of a split file, but its metadata has split.count 1: a file of its own"},
		{"a part out of place", func() [][]byte {
			g := good()
			g[1] = splitPart(2, 3, 3, "b")
			return g
		}, nil, "model-00002-of-00003.gguf: split.no 2 and split.count 3 make it part 3 of 3"},
		{"a part that is a folder", good, func(_ string, p []string) {
			os.Remove(p[2])
			os.Mkdir(p[2], 0o755)
		}, "model-00003-of-00003.gguf: not a regular file (a folder)"},
		{"a part that is a FIFO", good, func(_ string, p []string) {
			os.Remove(p[1])
			if err := syscall.Mkfifo(p[1], 0o644); err != nil {
				panic(err)
			}
		}, "model-00002-of-00003.gguf: not a regular file"},
		{"a tensor twice", func() [][]byte {
			g := good()
			g[2] = splitPart(2, 3, 3, "a")
			return g
		}, nil, `tensor "a" is in part 1 and again in part 3`},
		{"a count that disagrees", func() [][]byte {
			return [][]byte{splitPart(0, 3, 5, "a"), splitPart(1, 3, 5, "b"), splitPart(2, 3, 5, "c")}
		}, nil, "split.tensors.count is 5, but the 3 parts hold 3 tensors"},
		{"a whole file short of its count", func() [][]byte {
			return [][]byte{splitPart(0, 1, 3, "a")}
		}, nil, "model-00001-of-00001.gguf: split.tensors.count is 3, but the file holds 1 tensor: a part of a split file whose split.count says it is whole?"},
		{"split.no past the count", func() [][]byte {
			g := good()
			g[0] = splitPart(7, 3, 3, "a")
			return g
		}, nil, "split.no is 7 (0 to 2)"},
		{"split.count past a u16", func() [][]byte {
			return [][]byte{splitPart(0, 1<<20, 1, "a")}
		}, nil, "split.count is 1048576 (0 to 65535)"},
		{"no split.no", func() [][]byte {
			return [][]byte{build(3, map[string]uint32{"split.count": 2}, nil, 32)}
		}, nil, "no split.no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			paths := writeParts(t, dir, c.parts())
			if c.edit != nil {
				c.edit(dir, paths)
			}
			// Opened by its first part, where the checks of every part run.
			f, err := Open(paths[0])
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}

// A split file's parts named in another case than gguf-split's ("-OF-",
// ".GGUF") open from any part, and Path and Parts are the names the files
// have.
func TestOpenSplitNameCase(t *testing.T) {
	for _, format := range []string{"model-%05d-OF-%05d.gguf", "model-%05d-Of-%05d.GGUF"} {
		dir := t.TempDir()
		var paths []string
		for i, b := range [][]byte{splitPart(0, 2, 2, "a"), splitPart(1, 2, 2, "b")} {
			p := filepath.Join(dir, fmt.Sprintf(format, i+1, 2))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		for _, p := range paths {
			f, err := Open(p)
			if err != nil {
				t.Errorf("opened as %s: %v", p, err)
				continue
			}
			if f.Path != paths[0] || strings.Join(f.Parts, " ") != strings.Join(paths, " ") || len(f.Tensors) != 2 {
				t.Errorf("opened as %s: path %s, parts %v, %d tensors; want path %s, parts %v", p, f.Path, f.Parts, len(f.Tensors), paths[0], paths)
			}
			f.Close()
		}
	}
}
