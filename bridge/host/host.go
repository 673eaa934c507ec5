// Package host probes the machine the process runs on: CPU model, memory,
// the process's peak resident set, and memory read bandwidth. Each probe
// returns zero (or "") where the OS does not say.
package host

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
)

// CPUModel reads the model name from /proc/cpuinfo (Linux); elsewhere it
// returns "". It is read once: a backend's Info, which says it, is asked
// for every case of a suite before the first runs.
func CPUModel() string { return cpuModel() }

var cpuModel = sync.OnceValue(func() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
})

// TotalMemory is the machine's RAM in bytes from /proc/meminfo, 0 where
// unknown.
func TotalMemory() int64 { return totalMemory() }

// The machine's RAM does not change while it runs: read once, as CPUModel.
var totalMemory = sync.OnceValue(func() int64 { return meminfo("MemTotal") * 1024 })

// AvailableMemory is the RAM the OS could give a new allocation, in bytes,
// 0 where unknown.
func AvailableMemory() int64 { return meminfo("MemAvailable") * 1024 }

func meminfo(field string) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// ResetPeakRSS restarts the kernel's peak-RSS counter (Linux 4.0+), so a
// measurement reports its own peak. Elsewhere it does nothing.
func ResetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// PeakRSS is the process's peak resident set in bytes (VmHWM), 0 where the
// OS does not say.
func PeakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n * 1024
		}
	}
	return 0
}
