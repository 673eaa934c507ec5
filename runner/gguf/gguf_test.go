package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/internal/clip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/internal/gguftest"
)

// build writes a GGUF file with the given version, key/values (u32 values
// only) and tensors, aligned to align; mutate edits the bytes after.
type ti struct {
	name string
	dims []uint64
	typ  Type
	size int
}

func build(version uint32, kv map[string]uint32, tensors []ti, align int) []byte {
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	str := func(s string) { u64(uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	u32(version)
	u64(uint64(len(tensors)))
	u64(uint64(len(kv)))
	for k, v := range kv {
		str(k)
		u32(uint32(U32))
		u32(v)
	}
	off := 0
	for _, t := range tensors {
		str(t.name)
		u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			u64(d)
		}
		u32(uint32(t.typ))
		u64(uint64(off))
		off += (t.size + align - 1) / align * align
	}
	for len(b)%align != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, off)...)
}

func write(t *testing.T, data []byte) string {
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpen(t *testing.T) {
	data := build(3, map[string]uint32{"general.alignment": 64}, []ti{
		{"a", []uint64{64, 2}, Q8_0, 2 * 2 * 34},
		{"b", []uint64{256}, Q4_K, 144},
	}, 64)
	f, err := Open(write(t, data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, _ := f.Tensor("a")
	if got := a.Shape(); got[0] != 2 || got[1] != 64 || a.Size != 136 {
		t.Fatalf("a: shape %v size %d", got, a.Size)
	}
	b, _ := f.Tensor("b")
	if len(f.Bytes(b)) != 144 || b.Offset%64 != 0 || f.Alignment != 64 {
		t.Fatalf("b: %d bytes at %d, alignment %d", len(f.Bytes(b)), b.Offset, f.Alignment)
	}
}

// TestBadFiles: each malformed file is an error naming the file and what
// is wrong, never a panic.
func TestBadFiles(t *testing.T) {
	good := func() []byte {
		return build(3, nil, []ti{{"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32)
	}
	cases := []struct {
		name string
		data func() []byte
		want string
	}{
		{"version 1", func() []byte { return build(1, nil, nil, 32) }, "version 1 is not supported"},
		{"version 4", func() []byte { return build(4, nil, nil, 32) }, "version 4 is not supported"},
		{"big-endian", func() []byte { return build(3<<24, nil, nil, 32) }, "big-endian"},
		{"magic", func() []byte { b := good(); copy(b, "GGML"); return b }, "not a GGUF file"},
		// A repository cloned without Git LFS: the pointer named as one.
		{"git lfs pointer", func() []byte {
			return []byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1503300328\n")
		}, "a Git LFS pointer to a file of 1503300328 bytes, not the file itself: the repository was cloned without Git LFS"},
		// A download of the file's page on the hub: named as a web page.
		{"web page", func() []byte {
			return []byte("<!DOCTYPE html>\n<html class=\"\" lang=\"en\">\n<head><title>Qwen3-0.6B-Q8_0.gguf</title>")
		}, "a web page (HTML), not the file itself"},
		{"alignment", func() []byte { return build(3, map[string]uint32{"general.alignment": 48}, nil, 32) }, "alignment 48 is not a power of two"},
		{"alignment zero", func() []byte { return build(3, map[string]uint32{"general.alignment": 0}, nil, 32) }, "not a power of two"},
		{"alignment type", func() []byte {
			b := build(3, map[string]uint32{"general.alignment": 64}, nil, 32)
			i := strings.Index(string(b), "general.alignment") + len("general.alignment")
			binary.LittleEndian.PutUint32(b[i:], uint32(I32))
			return b
		}, "general.alignment is a i32, want a u32"},
		// A key of tens of kilobytes is quoted cut short (internal/clip).
		{"long key", func() []byte {
			key := strings.Repeat("k", 60000)
			b := build(3, map[string]uint32{key: 5}, nil, 32)
			i := strings.Index(string(b), key) + len(key)
			binary.LittleEndian.PutUint32(b[i:], uint32(Bool))
			return b
		}, `metadata key "` + strings.Repeat("k", clip.Most-3) + `..." (60000 characters): bool value 5`},
		{"cut short", func() []byte { b := good(); return b[:len(b)-40] }, `tensor "w" is cut short`},
		{"header cut", func() []byte { b := good(); return b[:30] }, "the file ends inside it: the file is cut short, or the header's key or tensor counts are off"},
		{"one key too many", func() []byte {
			b := good()
			binary.LittleEndian.PutUint64(b[16:], binary.LittleEndian.Uint64(b[16:])+1)
			return b
		}, "the header's key or tensor counts are off"},
		{"counts", func() []byte {
			b := good()
			binary.LittleEndian.PutUint64(b[8:], 1<<40)
			return b
		}, "more than the file"},
		{"name no text", func() []byte { return build(3, nil, []ti{{"\x00\x12w\x01", []uint64{32, 4}, Q4_0, 4 * 18}}, 32) },
			`tensor info 0 has a name of 4 bytes that is no text ("\x00\x12w\x01")`},
		{"ragged rows", func() []byte { return build(3, nil, []ti{{"w", []uint64{48, 4}, Q4_0, 4 * 18}}, 32) }, "do not divide"},
		{"dims", func() []byte { return build(3, nil, []ti{{"w", []uint64{32, 1, 1, 1, 1}, Q4_0, 18}}, 32) }, "5 dimensions"},
		{"zero dim", func() []byte { return build(3, nil, []ti{{"w", []uint64{32, 0}, Q4_0, 0}}, 32) }, `tensor "w" has dimensions [32 0]: a tensor of no values`},
		{"too many values", func() []byte { return build(3, nil, []ti{{"w", []uint64{1 << 30, 1 << 30}, Q4_0, 0}}, 32) }, `tensor "w" has dimensions [1073741824 1073741824]: more than 2^50 values`},
		{"misaligned offset", func() []byte {
			b := build(3, nil, []ti{{"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32)
			// the offset is the last u64 of the tensor info
			i := strings.Index(string(b), "w") + 1 + 4 + 16 + 4
			binary.LittleEndian.PutUint64(b[i:], 8)
			return b
		}, "not a multiple of the alignment"},
		{"offset wraps", func() []byte {
			b := good()
			// an offset that, added to the data section's start, wraps
			// around to byte 64 of the file
			data := uint64(len(b) - 96)
			i := strings.Index(string(b), "w") + 1 + 4 + 16 + 4
			binary.LittleEndian.PutUint64(b[i:], -(data + 64))
			return b
		}, `tensor "w" is cut short`},
		{"overlap", func() []byte {
			b := build(3, nil, []ti{{"v", []uint64{32, 2}, Q4_0, 2 * 18}, {"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32)
			i := strings.Index(string(b), "w") + 1 + 4 + 16 + 4
			binary.LittleEndian.PutUint64(b[i:], 32)
			return b
		}, `tensors "v" (data bytes 0 to 36) and "w" (from 32) overlap`},
		// Bytes no tensor holds, past the alignment's padding: the data
		// would be read from the wrong places.
		{"count one short", func() []byte {
			b := build(3, nil, []ti{{"v", []uint64{32, 2}, Q4_0, 2 * 18}, {"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32)
			binary.LittleEndian.PutUint64(b[8:], 1)
			return b
		}, "belong to no tensor: the header's tensor count"},
		{"smaller type", func() []byte {
			b := build(3, nil, []ti{{"v", []uint64{32, 4}, Q8_0, 4 * 34}, {"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32)
			i := strings.Index(string(b), "v") + 1 + 4 + 16
			binary.LittleEndian.PutUint32(b[i:], uint32(Q4_0))
			return b
		}, `between tensor "v" (ends at data byte 72) and "w" (starts at 160) belong to no tensor`},
		{"bytes appended", func() []byte { return append(good(), make([]byte, 64)...) }, `follow the last tensor's data ("w" ends at data byte 72 of 160)`},
		{"first offset", func() []byte {
			b := append(good(), make([]byte, 32)...)
			i := strings.Index(string(b), "w") + 1 + 4 + 16 + 4
			binary.LittleEndian.PutUint64(b[i:], 32)
			return b
		}, `no tensor holds the first 32 bytes of the data`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, c.data())
			_, err := Open(p)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %q, want it to name %s and say %q", err, p, c.want)
			}
		})
	}
}

// FuzzOpen: no input panics.
func FuzzOpen(f *testing.F) {
	f.Add(build(3, map[string]uint32{"general.alignment": 32}, []ti{{"w", []uint64{32, 4}, Q4_0, 4 * 18}}, 32))
	f.Add(build(2, nil, nil, 32))
	// One file, rewritten for each input, as FuzzFromGGUF does: a
	// directory made and removed for each costs more than the parse.
	p := filepath.Join(f.TempDir(), "f.gguf")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if g, err := Open(p); err == nil {
			for _, ti := range g.Tensors {
				if _, _, ok := ti.Type.Block(); ok {
					_ = g.Bytes(ti)
				}
			}
			g.Close()
		}
	})
}

// Dropped tensor bytes leave the resident set but not the file: read again,
// they are what they were. Bytes outside the mapping are left alone.
func TestDropKeepsBytes(t *testing.T) {
	nb := 3 * os.Getpagesize() / 34 / 16 * 16 // blocks of a few pages, a multiple of 32 bytes
	data := build(3, nil, []ti{{"big", []uint64{uint64(nb * 32)}, Q8_0, nb * 34}}, 32)
	for i := len(data) - nb*34; i < len(data); i++ {
		data[i] = byte(i * 7)
	}
	f, err := Open(write(t, data))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Tensor("big")
	b := f.Bytes(info)
	want := append([]byte(nil), b...)
	f.Drop(b)
	f.Drop(want) // not the file's: nothing happens
	if !bytes.Equal(b, want) {
		t.Fatal("bytes changed after Drop")
	}
}

// Types the reader does not read are still named in its messages, ggml's
// newest and the numbers it has retired among them: every number of
// ggml.h's enum ggml_type below GGML_TYPE_COUNT (43) has its name.
func TestTypeNames(t *testing.T) {
	for ty, want := range map[Type]string{MXFP4: "MXFP4", 40: "NVFP4", 41: "Q1_0", 42: "Q2_0", 4: "Q4_2",
		31: "Q4_0_4_4", 33: "Q4_0_8_8", 36: "IQ4_NL_4_4", 38: "IQ4_NL_8_8", 200: "unknown ggml type 200"} {
		if got := ty.String(); got != want {
			t.Errorf("type %d is %q, want %q", uint32(ty), got, want)
		}
	}
	for ty := Type(0); ty < 43; ty++ {
		if strings.HasPrefix(ty.String(), "unknown") {
			t.Errorf("ggml type %d has no name", uint32(ty))
		}
	}
}

// Arrays are read from the file when asked for, strings and numbers: the
// header keeps their length and place only.
func TestArrays(t *testing.T) {
	const n = 70000
	types := make([]int32, n)
	for i := range types {
		types[i] = int32(i - 5)
	}
	b, err := gguftest.Bytes(gguftest.KV{Key: "words", Value: []string{"a", "", "ĠHello"}},
		gguftest.KV{Key: "types", Value: types}, gguftest.KV{Key: "scores", Value: []float32{-1, 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(write(t, b))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := f.Strings("words", 1<<20); err != nil || !slices.Equal(got, []string{"a", "", "ĠHello"}) {
		t.Errorf("Strings: %q, %v", got, err)
	}
	got, err := f.Numbers("types", 1<<20)
	if err != nil || len(got) != n || got[0] != -5 || got[n-1] != n-6 {
		t.Errorf("Numbers: %d values, %v", len(got), err)
	}
	if got, err := f.Numbers("scores", 1<<20); err != nil || !slices.Equal(got, []float64{-1, 0.5}) {
		t.Errorf("Numbers: %v, %v", got, err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{second(f.Strings("types", 1<<20)), "metadata types is an array of i32, want string"},
		{second(f.Numbers("words", 1<<20)), "metadata words is an array of string, want numbers"},
		{second(f.Strings("none", 1<<20)), "no metadata none"},
		{second(f.Strings("words", 2)), "metadata words is an array of 3 values, more than the 2 it may hold"},
		{second(f.Numbers("scores", 1)), "metadata scores is an array of 2 values, more than the 1 it may hold"},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("%v, want %q", c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Opening a file costs memory by its keys and tensors, not by the size of
// its arrays: a header of numeric arrays is not held as float64s, eight
// times its bytes, before anything asks for them.
func TestArraysNotHeld(t *testing.T) {
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	const keys, n = 128, 1 << 16
	b = append(b, "GGUF"...)
	u32(3)
	u64(0)
	u64(keys)
	for i := range keys {
		key := fmt.Sprintf("k%03d", i)
		u64(uint64(len(key)))
		b = append(b, key...)
		u32(uint32(Array))
		u32(uint32(U8))
		u64(n)
		b = append(b, make([]byte, n)...)
	}
	f, alloc := openCounted(t, write(t, b))
	if got := alloc; got > uint64(len(b))/8 {
		t.Errorf("opening a %d-byte header of arrays allocated %d bytes", len(b), got)
	}
	if nums, err := f.Numbers("k127", 1<<20); err != nil || len(nums) != n {
		t.Errorf("Numbers: %d values, %v", len(nums), err)
	}
}

// openCounted opens the file at p, closed with the test, and the bytes
// opening it allocated.
func openCounted(t *testing.T, p string) (*File, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f, err := Open(p)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, after.TotalAlloc - before.TotalAlloc
}

// The tensor infos cost memory by their count, a few times the header's
// bytes, not a dozen: room for them is made once, no more than the file
// could fill.
func TestTensorInfosHeld(t *testing.T) {
	var b []byte
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	const n = 1 << 17
	b = append(b, "GGUF"...)
	u32(3)
	u64(n)
	u64(0)
	for i := range n {
		name := fmt.Sprintf("t%07d", i)
		u64(uint64(len(name)))
		b = append(b, name...)
		u32(2)
		u64(1)
		u64(1)
		u32(99) // a type no reader sizes: no data
		u64(0)
	}
	f, alloc := openCounted(t, write(t, b))
	if got := alloc; got > 6*uint64(len(b)) {
		t.Errorf("opening %d tensor infos in %d bytes allocated %d bytes", n, len(b), got)
	}
	if len(f.Tensors) != n || len(f.Tensors[n-1].Dims) != 2 {
		t.Fatalf("%d tensors", len(f.Tensors))
	}
	// A count past what the bytes after the metadata could hold.
	binary.LittleEndian.PutUint64(b[8:], uint64(len(b))/20)
	if _, err := Open(write(t, b)); err == nil || !strings.Contains(err.Error(), "the header's key or tensor counts are off") {
		t.Errorf("a count the file cannot hold: %v", err)
	}
}

// A header of more keys or tensors than any model's is refused by its
// counts before an entry is read, whatever the file's size: held, a
// million one-byte keys would take ten times their bytes.
func TestHeaderCounts(t *testing.T) {
	header := func(tensors, keys uint64, pad int) []byte {
		var b []byte
		b = append(b, "GGUF"...)
		b = binary.LittleEndian.AppendUint32(b, 3)
		b = binary.LittleEndian.AppendUint64(b, tensors)
		b = binary.LittleEndian.AppendUint64(b, keys)
		for i := range keys {
			key := fmt.Sprintf("%x", i)
			b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
			b = append(b, key...)
			b = binary.LittleEndian.AppendUint32(b, uint32(U8))
			b = append(b, 0)
		}
		return append(b, make([]byte, pad)...)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"keys at the bound", header(0, MaxKeys, 0), ""},
		{"keys past it", header(0, MaxKeys+1, 0), "header claims 65537 metadata keys, more than the 65536 a file may hold"},
		{"tensors past it", header(MaxTensors+1, 0, 12*(MaxTensors+1)), "header claims 1048577 tensors, more than the 1048576 a file may hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, tc.b)
			f, err := Open(p)
			if f != nil {
				f.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want it to open", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), p)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A string's length is checked before any of its bytes is copied: a key or
// tensor name past its bound, or a value past llama.cpp's, is refused by
// its length, and an array's strings are not copied as the file opens. A
// length misread from other bytes can claim most of a file of gigabytes;
// the files here are sparse, their claimed bytes never written.
func TestStringLengthsCheckedFirst(t *testing.T) {
	const big = 64 << 20
	head := func(tensors, keys uint64) []byte {
		b := append([]byte("GGUF"), 3, 0, 0, 0)
		b = binary.LittleEndian.AppendUint64(b, tensors)
		return binary.LittleEndian.AppendUint64(b, keys)
	}
	u32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
	withKey := func(b []byte) []byte { return append(u64(b, 1), 'k') }
	for _, tc := range []struct {
		name string
		b    []byte
		size int64 // the file's size, the bytes past b unwritten
		want string
	}{
		{"a key of 64 MiB", u64(head(0, 1), big), big + 64, "metadata key 0 has a name of 67108864 bytes that is no text"},
		{"a tensor name of 64 MiB", u64(head(1, 0), big), big + 64, "tensor info 0 has a name of 67108864 bytes that is no text"},
		{"an array of a string of 64 MiB", u64(u32(u32(withKey(head(0, 1)), uint32(Array)), uint32(String)), 1), 0, ""},
		{"a string value past 1 GiB", u64(u32(withKey(head(0, 1)), uint32(String)), MaxString+1), MaxString + 64,
			`metadata key "k": a string of 1073741825 bytes, more than the 1073741824 llama.cpp reads`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, size := tc.b, tc.size
			if size == 0 { // the array's one string, then the end of the file
				b = u64(b, big)
				size = int64(len(b)) + big
			}
			p := filepath.Join(t.TempDir(), "m.gguf")
			fh, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.Write(b); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(fh.Truncate(size), fh.Close()); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			f, err := Open(p)
			runtime.ReadMemStats(&after)
			if f != nil {
				f.Close()
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
				t.Errorf("opening it allocated %d bytes", alloc)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want it to open", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), p)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
