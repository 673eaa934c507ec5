package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// poisonedCheckpoint copies the llama fixture with the embedding row of
// token row set to NaN.
func poisonedCheckpoint(t *testing.T, row int) string {
	t.Helper()
	from := filepath.Join("..", "..", "runner", "testdata", "hf", "llama")
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(from, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(from, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	tensors, _, start, err := safetensors.ParseHeader(data, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ti := range tensors {
		if ti.Name != "model.embed_tokens.weight" {
			continue
		}
		if ti.DType != "F32" {
			t.Fatalf("%s is %s, want F32", ti.Name, ti.DType)
		}
		dim := ti.Shape[1]
		at := start + ti.Begin + int64(4*row*dim)
		for i := range dim {
			binary.LittleEndian.PutUint32(data[at+int64(4*i):], math.Float32bits(float32(math.NaN())))
		}
		found = true
	}
	if !found {
		t.Fatal("no model.embed_tokens.weight in the fixture")
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// generate fails on non-finite logits at any step, not only at the last
// prompt position: a NaN met only by a generated token (here the first
// one's embedding row) made every later greedy token 0, printed as the
// output and agreed on by --against.
func TestGenerateFailsOnNonFiniteDecodeSteps(t *testing.T) {
	out, _, err := mtl(t, "generate", "--model", filepath.Join("..", "..", "runner", "testdata", "hf", "llama"),
		"--backend", "cpu", "--tokens", "1,2,3", "-n", "4", "--ignore-eos")
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Fields(out)[0]
	if first == "1" || first == "2" || first == "3" {
		t.Fatalf("the first token %s is in the prompt: pick another prompt", first)
	}
	row, err := strconv.Atoi(first)
	if err != nil {
		t.Fatal(err)
	}
	dir := poisonedCheckpoint(t, row)
	for _, args := range [][]string{nil, {"--against", "cpu"}} {
		out, _, err := mtl(t, append([]string{"generate", "--model", dir, "--backend", "cpu", "--tokens", "1,2,3", "-n", "4", "--ignore-eos"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "non-finite logits") || !strings.Contains(err.Error(), "model.embed_tokens.weight") {
			t.Errorf("generate %v: printed %q, err %v: want the non-finite logits named by their tensor", args, out, err)
		}
	}
}
