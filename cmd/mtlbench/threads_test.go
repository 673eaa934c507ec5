package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// --threads is the cpu backend's alone: every command that takes it
// refuses it on another backend, naming the flag and the backend that
// reads it, before any work; generate takes it where --against is the CPU.
func TestThreadsFlagRefusedOffCPU(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip("no metal-emu backend:", err)
	}
	tmp := isolate(t)
	db := filepath.Join(tmp, "r.db")
	const want = "--threads: threads=2: the metal-emu backend runs no CPU goroutines (threads is the cpu backend's)"
	for _, args := range [][]string{
		{"run", "ci", "--backend", "metal-emu", "--threads", "2", "--db", db, "-q"},
		{"bench", "-m", "qwen3-moe-mini", "--backend", "metal-emu", "--threads", "2", "-p", "4", "-n", "2", "-r", "1", "--db", db, "-q"},
		{"selftest", "--backend", "metal-emu", "--threads", "2"},
		{"tune", "--kernel", "matmul", "--backend", "metal-emu", "--threads", "2", "--dry-run"},
		{"tune", "show", "--backend", "metal-emu", "--threads", "2"},
		{"generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "metal-emu", "--threads", "2", "--tokens", "1,2", "--max-new-tokens", "1"},
		{"ab", "../../suites/ci.yaml", "--baseline-bin", "nowhere", "--backend", "metal-emu", "--threads", "2"},
	} {
		_, _, err := mtlTune(t, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	if _, err := os.Stat(db); err == nil {
		if out, _, _ := mtl(t, "runs", "--db", db, "--format", "csv"); strings.Count(out, "\n") > 1 {
			t.Errorf("a refused run was recorded:\n%s", out)
		}
	}
	// The CPU as --against reads it.
	if _, stderr, err := mtl(t, "generate", "-m", "qwen3-moe-mini", "--layers", "1", "--backend", "metal-emu", "--threads", "2",
		"--tokens", "1,2", "--max-new-tokens", "1", "--against", "cpu"); err != nil {
		t.Errorf("generate --against cpu --threads 2: %v\n%s", err, stderr)
	}
}
