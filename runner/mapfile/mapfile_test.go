package mapfile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// rssKB is the resident size of the mapping that starts at b, from
// /proc/self/smaps (Linux only).
func rssKB(t *testing.T, b []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("skipping: no smaps to measure residency: %v", err)
	}
	defer f.Close()
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, start) {
			found = true
			continue
		}
		if found && strings.HasPrefix(line, "Rss:") {
			kb, err := strconv.Atoi(strings.Fields(line)[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no mapping at %s in smaps", start)
	return 0
}

// Drop takes a copied tensor's pages out of the resident set, keeps its
// bytes readable (from the file again), and leaves memory outside the
// mapping alone.
func TestDropGivesPagesBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("skipping: residency is read from Linux's /proc/self/smaps")
	}
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Map(fh, len(want))
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Bytes()
	if !bytes.Equal(b, want) {
		t.Fatal("the mapping does not hold the file")
	}
	full := rssKB(t, b)
	// A tensor that starts and ends mid-page: only the pages wholly inside
	// it go, the ones it shares with its neighbours stay.
	tensor := b[100 : 6<<20+100]
	m.Drop(tensor)
	after := rssKB(t, b)
	t.Logf("resident: %d kB before, %d kB after dropping %d kB", full, after, len(tensor)>>10)
	if full < 8<<10-64 || after > full-(6<<10)+2*os.Getpagesize()>>10 {
		t.Errorf("resident %d kB before and %d kB after dropping 6 MiB of 8", full, after)
	}
	if !bytes.Equal(b, want) {
		t.Error("bytes changed after Drop")
	}

	heap := bytes.Clone(want[:1<<20])
	if m.Mapped(heap) {
		t.Error("heap memory reported as mapped")
	}
	m.Drop(heap)
	if !bytes.Equal(heap, want[:1<<20]) {
		t.Error("Drop changed memory outside the mapping")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if m.Mapped(tensor) {
		t.Error("a closed mapping still reports bytes as mapped")
	}
}

func TestMapRefusesEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := Map(fh, 0); err == nil {
		t.Fatal("mapped an empty file")
	}
}
