//go:build !linux

package offheap

// adviseHugePages is Linux's transparent huge pages advice; other systems
// choose page sizes themselves.
func adviseHugePages(b []byte) {}
