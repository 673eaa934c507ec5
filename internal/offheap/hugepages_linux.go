package offheap

import "golang.org/x/sys/unix"

// adviseHugePages asks for transparent huge pages on b. A decode step
// streams every weight once; with 4 KiB pages a 1 GB model is 250,000 TLB
// entries, each miss a page walk (two nested walks in a virtual machine),
// while 2 MiB pages cut that 512 times. Only advice: where THP is off, or
// set to "never", nothing changes.
func adviseHugePages(b []byte) {
	if len(b) >= 2<<20 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
}
