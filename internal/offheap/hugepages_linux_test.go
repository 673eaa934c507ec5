package offheap

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// Weights are advised for transparent huge pages: the kernel marks their
// mapping THPeligible in /proc/self/smaps (with THP in "madvise" mode it
// would not be without the advice).
func TestWeightsAdvisedHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("transparent huge pages are off on this system")
	}
	b, free, mapped := Alloc(8 << 20)
	defer free()
	if !mapped {
		t.Skip("weights fell back to the Go heap")
	}
	addr := uintptr(unsafe.Pointer(&b[0]))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in, found := false, false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			found = true
			if strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) != "1" {
				t.Errorf("the weights' mapping is not eligible for huge pages: %q", line)
			}
		}
	}
	if !found {
		t.Skip("smaps has no THPeligible field for the mapping (an older kernel)")
	}
}
