package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/bench"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// poisonedCheckpoint copies the llama fixture with the embedding row of
// token row set to NaN.
func poisonedCheckpoint(t *testing.T, row int) string {
	t.Helper()
	return poisonedRows(t, func(r int) bool { return r == row })
}

// poisonedRows copies the llama fixture with the embedding rows of the
// tokens poison picks set to NaN.
func poisonedRows(t *testing.T, poison func(row int) bool) string {
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
		for row := range ti.Shape[0] {
			if !poison(row) {
				continue
			}
			at := start + ti.Begin + int64(4*row*dim)
			for i := range dim {
				binary.LittleEndian.PutUint32(data[at+int64(4*i):], math.Float32bits(float32(math.NaN())))
			}
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
		if err != nil && (!strings.Contains(err.Error(), "of generate --tokens") || strings.Contains(err.Error(), "request 0")) {
			t.Errorf("generate %v: %v: want the request named by the command, not the engine's id", args, err)
		}
	}
}

// generate's errors name the request by the command and flag the user gave,
// not by the engine's id for it ("request 0").
func TestGenerateErrorsNameTheCommand(t *testing.T) {
	llama := filepath.Join("..", "..", "runner", "testdata", "hf", "llama")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--tokens past the context", []string{"--tokens", "1,2,3", "-n", "254"}, "generate --tokens: 3 prompt + 254 new tokens exceed the model's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := mtl(t, append([]string{"generate", "--model", llama, "--backend", "cpu", "--ignore-eos"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "request 0") {
				t.Errorf("err %v: want it to say %q, and no request id", err, tc.want)
			}
		})
	}
}

// A benchmark checks every step's logits, not its first alone: a model
// whose prompt's logits are finite but whose generated tokens meet NaN
// (every embedding row but the prompts' poisoned) fails its case at the
// step that computed them, naming the step and the request, on a greedy
// run whose tokens the device's argmax draws (bridge.NoToken, no logits
// read); the case that did not reach such a step keeps what it measured.
func TestBenchFailsOnNonFiniteLaterStep(t *testing.T) {
	const vocab, prompt = 512, 8
	keep := map[int32]bool{}
	for _, tok := range (bench.Workload{Requests: 1, PromptLen: prompt, GenLen: 8, Seed: 1}).Prompts(vocab)[0] {
		keep[tok] = true
	}
	for i := range 4 {
		keep[int32((i*7919+1)%vocab)] = true // engine.CheckFinite's prompt
	}
	dir := poisonedRows(t, func(r int) bool { return !keep[int32(r)] })
	db := filepath.Join(t.TempDir(), "r.db")
	_, stderr, err := mtl(t, "bench", "-m", dir, "--backend", "cpu", "-p", strconv.Itoa(prompt), "-n", "1,8", "-r", "2", "--warmup", "0", "--db", db)
	if err == nil {
		t.Fatalf("bench of a model computing NaN at a later step passed:\n%s", stderr)
	}
	out, _, err := mtl(t, "show", "latest", "--db", db, "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	var measured, failed bool
	for _, r := range csvRows(t, out) {
		switch {
		case strings.Contains(r["key"], "gen_len=1/") && r["metric"] == "prefill_tok_s" && r["n"] == "2":
			measured = true
		case strings.Contains(r["key"], "gen_len=8/") && r["status"] == "failed":
			failed = true
			t.Logf("the failed case: %s", r["error"])
			for _, want := range []string{"step 1 of the repetition", "non-finite logits", "at position 8 of request 0", "model.embed_tokens.weight"} {
				if !strings.Contains(r["error"], want) {
					t.Errorf("the failed case's error does not say %q: %s", want, r["error"])
				}
			}
		}
	}
	if !measured || !failed {
		t.Errorf("want the gen_len=1 case measured (%v) and the gen_len=8 case failed (%v):\n%s\n%s", measured, failed, out, stderr)
	}
}
