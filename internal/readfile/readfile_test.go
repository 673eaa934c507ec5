package readfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(small, []byte("name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the bound is checked before a byte is read.
	if err := f.Truncate(30 << 30); err != nil {
		t.Skipf("skipping: no sparse file here: %v", err)
	}
	f.Close()
	// A repository cloned without Git LFS holds a pointer in place of a
	// large file (a tokenizer.json).
	pointer := filepath.Join(dir, "pointer.yaml")
	if err := os.WriteFile(pointer, []byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1503300328\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "page.yaml")
	if err := os.WriteFile(page, []byte("<!DOCTYPE html>\n<html class=\"\" lang=\"en\">\n<head><title>Qwen3-0.6B-Q8_0.gguf</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path, want string
	}{
		{small, ""},
		{page, page + ": a web page (HTML), not the file itself"},
		{pointer, pointer + ": a Git LFS pointer to a file of 1503300328 bytes, not the file itself"},
		{big, "big.yaml: 30.0 GiB, more than a suite holds (at most 16.0 MiB)"},
		{"/dev/zero", "/dev/zero: more than a suite holds (at most 16.0 MiB)"},
		{dir, "a folder, not a suite"},
		{filepath.Join(dir, "none.yaml"), filepath.Join(dir, "none.yaml") + ": no such file or directory"},
		{filepath.Join(small, "x.yaml"), filepath.Join(small, "x.yaml") + ": not a directory"},
	}
	for _, tc := range tests {
		if tc.path == "/dev/zero" {
			if _, err := os.Stat(tc.path); err != nil {
				continue
			}
		}
		data, err := Read(tc.path, Suite, "a suite")
		switch {
		case tc.want == "" && (err != nil || string(data) != "name: x\n"):
			t.Errorf("%s: %q, %v", tc.path, data, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error holding %q", tc.path, err, tc.want)
		// Go's operation names are not the user's words.
		case err != nil && (strings.Contains(err.Error(), "stat ") || strings.Contains(err.Error(), "open ")):
			t.Errorf("%s: %v names Go's operation", tc.path, err)
		}
	}
}

// A file is read into room made for it at once: what reading allocates is
// its size, not the two or three times a buffer grown as it reads takes
// (under the race detector, twice its size: growCopies).
func TestReadAllocatesItsSize(t *testing.T) {
	for _, size := range []int{0, 1, 4096, 24 << 20} {
		p := filepath.Join(t.TempDir(), "f.json")
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		data, err := Read(p, Tokenizer, "a tokenizer")
		runtime.ReadMemStats(&after)
		if err != nil || len(data) != size {
			t.Fatalf("%d bytes: read %d, %v", size, len(data), err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > growCopies*uint64(size)+uint64(size)/8+64<<10 {
			t.Errorf("reading %d bytes allocated %d", size, got)
		}
	}
}
