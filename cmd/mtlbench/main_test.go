package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/mtlbench/mtlbench/suites"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/model"
)

var update = flag.Bool("update", false, "rewrite golden files")

// mtl runs the whole program as a user would.
func mtl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(append([]string{"mtlbench"}, args...), noInput{}, &o, &e)
	return o.String(), e.String(), err
}

// noInput is standard input that holds nothing, for the commands tests run
// in-process.
type noInput struct{}

func (noInput) Read([]byte) (int, error) { return 0, io.EOF }

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestModelsGolden(t *testing.T) {
	out, _, err := mtl(t, "models", "--backend", "cpu") // the default is metal on a Mac
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models", out)
}

// models with checkpoints describes them: weights as they load, and a GGUF
// file's tensors by stored type with what transcoded types run as, on the
// CPU (Q5_K and Q5_0 at 8 bits) and on Metal (at 5, as mxfp4 and a 3-bit
// folder).
func TestModelsCheckpointsGolden(t *testing.T) {
	out, _, err := mtl(t, "models", "--backend", "cpu", "../../runner/testdata/gguf/qwen3_moe-q5_k_m.gguf",
		"../../runner/testdata/gguf/llama-q5_0.gguf", "../../runner/testdata/mlx/llama-q4")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models-checkpoints", out)
	out, _, err = mtl(t, "models", "--backend", "metal", "../../runner/testdata/gguf/qwen3_moe-q5_k_m.gguf",
		"../../runner/testdata/gguf/llama-q5_0.gguf", "../../runner/testdata/mlx/qwen3_moe-mxfp4")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models-checkpoints-metal", out)
	// Scaled RoPE, as each checkpoint spells it.
	out, _, err = mtl(t, "models", "--backend", "cpu", "../../runner/testdata/gguf/llama-rope-yarn.gguf", "../../runner/testdata/hf/llama3",
		"../../runner/testdata/gguf/llama-rope-llama3.gguf")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models-rope", out)
	// Sliding windows: how many layers slide, by how much.
	out, _, err = mtl(t, "models", "--backend", "cpu", "../../runner/testdata/hf/mistral_window", "../../runner/testdata/hf/qwen2_window")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "models-window", out)
	// The checkpoint's tokenizer, as generate --prompt would read it.
	out, _, err = mtl(t, "models", "--format", "json", "../../runner/testdata/gguf/llamacpp-qwen3-q8_0.gguf")
	if err != nil || !strings.Contains(out, `"tokenizer": "byte-level BPE, pre-tokenizer gpt-2 (GGUF), 512 tokens"`) {
		t.Errorf("models --format json: the tokenizer: %v\n%s", err, out)
	}
	// Q5_0 runs as 5-bit affine groups of 32 with f16 scales and biases on
	// Metal, 24 bytes for every 22, and at 8 bits on CUDA and the CPU, 36.
	for _, c := range []struct {
		backend string
		bytes   float64
	}{{"metal", 24}, {"cuda", 36}, {"cpu", 36}} {
		out, _, err = mtl(t, "models", "--format", "json", "--backend", c.backend, "../../runner/testdata/gguf/llama-q5_0.gguf")
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
			t.Fatalf("json: %v, %d rows", err, len(rows))
		}
		fb, rb := rows[0]["file_bytes_Q5_0"].(float64), rows[0]["run_bytes_Q5_0"].(float64)
		if rows[0]["tensors_Q5_0"] != float64(16) || fb == 0 || rb*22 != fb*c.bytes {
			t.Errorf("%s: json row: %v", c.backend, rows[0])
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"models", "nope.gguf"}, `"nope.gguf" is neither a preset`},
		{[]string{"models", "tinyllama-1.1b"}, "tinyllama-1.1b is a preset: `mtlbench models` lists the presets; give checkpoints as paths"},
		// A preset given with --dtype is not said to be a checkpoint.
		{[]string{"models", "--dtype", "q4", "tinyllama-1.1b"}, "tinyllama-1.1b is a preset: `mtlbench models --dtype q4` lists the presets; give checkpoints as paths"},
		{[]string{"models", "--dtype", "q4", "../../runner/testdata/mlx/llama-q4"}, "--dtype is for presets"},
		{[]string{"models", "--backend", "tpu"}, `--backend "tpu": want cpu, metal, metal-emu or cuda`},
		{[]string{"models", "--backend", "metl"}, `--backend "metl": want cpu, metal, metal-emu or cuda (did you mean "metal"?)`},
		{[]string{"models", "--backend", "auto"}, `--backend "auto": want cpu, metal, metal-emu or cuda`},
		// models takes checkpoints as arguments: no --model to give.
		{[]string{"models", "../../runner/testdata/gguf"}, "GGUF files (llama-iq4_nl.gguf, llama-q4_0.gguf, llama-q4_1.gguf and "},
	} {
		if _, _, err := mtl(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// env lists every variable; with a clean environment each shows its
// default, a path rule as the path it comes to.
func TestEnvGolden(t *testing.T) {
	for _, v := range envconfig.Vars {
		t.Setenv(v.Name, "")
	}
	t.Setenv("XDG_DATA_HOME", "/data")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	for _, f := range []struct{ name, format string }{{"env", "table"}, {"env.json", "json"}} {
		out, _, err := mtl(t, "env", "--format", f.format)
		if err != nil {
			t.Fatal(err)
		}
		// The cache folders resolve through os.UserCacheDir, which reads
		// XDG_CACHE_HOME on Linux only.
		if runtime.GOOS == "linux" {
			golden(t, f.name, out)
		}
	}
	t.Setenv("MTLBENCH_CUDA_DEVICE", "1")
	out, _, err := mtl(t, "env", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "MTLBENCH_CUDA_DEVICE,1,environment,cuda,") {
		t.Errorf("a set variable is not shown as such:\n%s", out)
	}
	// jsonl is json's objects a line; a misspelt variable is said.
	t.Setenv("MTLBENCH_NOT_IN_THE_TABLE", "/x")
	js, _, _ := mtl(t, "env", "--format", "json")
	jl, stderr, err := mtl(t, "env", "--format", "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]any
	json.Unmarshal([]byte(js), &all)
	lines := strings.Split(strings.TrimSpace(jl), "\n")
	if len(all) == 0 || len(lines) != len(all) {
		t.Fatalf("json has %d variables, jsonl %d lines", len(all), len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || !reflect.DeepEqual(first, all[0]) {
		t.Errorf("jsonl's first line %v, json's first object %v", first, all[0])
	}
	if !strings.Contains(stderr, "warning: MTLBENCH_NOT_IN_THE_TABLE is set, but mtlbench reads no such variable") {
		t.Errorf("a misspelt variable is not said:\n%s", stderr)
	}
}

// A misspelt MTLBENCH_ variable is said by every command, once a process
// however many cases it runs, and on stderr alone: data on stdout stays data.
func TestUnknownVariableWarned(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "k.yaml")
	os.WriteFile(suite, []byte("name: k\nbackend: cpu\nrepetitions: 1\nwarmup: 0\ncases:\n"+
		"  - name: a\n    kind: kernel\n    op: matmul\n    params: { m: 1, n: 32, k: 32, dtype: f32 }\n"+
		"  - name: b\n    kind: kernel\n    op: matmul\n    params: { m: 2, n: 32, k: 32, dtype: f32 }\n"), 0o644)
	db := filepath.Join(dir, "r.db")
	// Built, so that the table's own test does not read it as a name the
	// module uses.
	typo := "MTLBENCH_" + "DBB"
	t.Setenv(typo, "x")
	want := "warning: " + typo + " is set, but mtlbench reads no such variable (did you mean MTLBENCH_DB?)\n"
	for _, c := range []struct {
		name   string
		args   []string
		format string // of stdout: csv or json to parse, "" for none
	}{
		{"run two cases", []string{"run", suite, "--db", db, "--backend", "cpu", "--threads", "1", "--format", "csv"}, "csv"},
		{"show", []string{"show", "1", "--db", db, "--format", "json"}, "json"},
		{"compare", []string{"compare", "1", "1", "--db", db, "--format", "csv"}, ""},
		{"gate", []string{"gate", "--db", db, "--baseline", "1", "--candidate", "1", "--format", "json"}, ""},
		{"bench", []string{"bench", "--db", db}, ""},
		{"tune", []string{"tune", "--no-such-flag"}, ""},
		{"generate", []string{"generate"}, ""},
		{"ab", []string{"ab"}, ""},
		{"selftest", []string{"selftest", "--no-such-flag"}, ""},
		{"suites validate", []string{"suites", "validate", suite}, ""},
		{"models", []string{"models", "--format", "csv"}, "csv"},
		{"env", []string{"env", "--format", "json"}, "json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, _ := mtl(t, c.args...)
			if n := strings.Count(stderr, want); n != 1 {
				t.Errorf("the warning is said %d times, want once:\n%s", n, stderr)
			}
			if strings.Contains(out, typo) {
				t.Errorf("the warning reached stdout:\n%s", out)
			}
			switch c.format {
			case "csv":
				if _, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err != nil || out == "" {
					t.Errorf("stdout is not csv (%v):\n%s", err, out)
				}
			case "json":
				if !json.Valid([]byte(out)) {
					t.Errorf("stdout is not json:\n%s", out)
				}
			}
		})
	}
}

// The root help points to `mtlbench env`.
func TestHelpPointsToEnv(t *testing.T) {
	out, _, err := mtl(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mtlbench env") {
		t.Errorf("--help does not mention mtlbench env:\n%s", out)
	}
}

// refPrompt is a prompt of a fixture's reference.json: what transformers
// computed for it.
type refPrompt struct {
	Tokens     []int32   `json:"tokens"`
	LogitsLast []float32 `json:"logits_last"`
	Greedy     []int32   `json:"greedy"`
}

// qwen3MoEPrompt is the qwen3_moe fixture's folder and its second reference
// prompt.
func qwen3MoEPrompt(t *testing.T) (string, refPrompt) {
	t.Helper()
	dir := filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3_moe")
	var ref struct {
		Prompts []refPrompt `json:"prompts"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ref); err != nil || len(ref.Prompts) < 2 {
		t.Fatalf("%s: %v, %d prompts", dir, err, len(ref.Prompts))
	}
	return dir, ref.Prompts[1]
}

// generate --json on a transformers fixture prints the tokens and logits
// transformers computed.
func TestGenerateJSONMatchesTransformers(t *testing.T) {
	dir, p := qwen3MoEPrompt(t)
	toks := make([]string, len(p.Tokens))
	for i, v := range p.Tokens {
		toks[i] = strconv.Itoa(int(v))
	}
	out, _, err := mtl(t, "generate", "--model", dir, "--tokens", strings.Join(toks, ","), "--max-new-tokens", "16", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tokens     []int32   `json:"tokens"`
		LogitsLast []float32 `json:"logits_last"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if !slices.Equal(got.Tokens, p.Greedy) {
		t.Errorf("tokens %v, transformers %v", got.Tokens, p.Greedy)
	}
	if len(got.LogitsLast) != len(p.LogitsLast) {
		t.Fatalf("%d logits, want %d", len(got.LogitsLast), len(p.LogitsLast))
	}
	for i := range p.LogitsLast {
		if d := got.LogitsLast[i] - p.LogitsLast[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("logit %d differs by %g", i, d)
		}
	}
}

// generate stops at the checkpoint's end-of-sequence token, as
// transformers' generate does, keeping it as the last; --ignore-eos goes on.
func TestGenerateStopsAtEOS(t *testing.T) {
	src, p := qwen3MoEPrompt(t)
	// The end token: the first one past the first not seen before it.
	at := -1
	for j := 1; j < len(p.Greedy) && at < 0; j++ {
		if !slices.Contains(p.Greedy[:j], p.Greedy[j]) {
			at = j
		}
	}
	if at < 0 {
		t.Skip("the reference's greedy run repeats its first token")
	}
	eos := p.Greedy[at]
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.Symlink(filepath.Join(mustAbs(t, src), f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(fmt.Sprintf(`{"eos_token_id": %d}`, eos)), 0o644)
	toks := make([]string, len(p.Tokens))
	for i, v := range p.Tokens {
		toks[i] = strconv.Itoa(int(v))
	}
	args := []string{"generate", "--model", dir, "--tokens", strings.Join(toks, ","), "--max-new-tokens", strconv.Itoa(len(p.Greedy))}
	out, errOut, err := mtl(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(out), tokenLine(p.Greedy[:at+1]); got != want {
		t.Errorf("tokens %s, want %s (stopped at %d)", got, want, eos)
	}
	if !strings.Contains(errOut, fmt.Sprintf("stopped at the end-of-sequence token %d after %d of %d tokens", eos, at+1, len(p.Greedy))) {
		t.Errorf("no note of the stop:\n%s", errOut)
	}
	out, _, err = mtl(t, append(args, "--ignore-eos")...)
	if err != nil || strings.TrimSpace(out) != tokenLine(p.Greedy) {
		t.Errorf("--ignore-eos: %s %v, want %s", out, err, tokenLine(p.Greedy))
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// generate --against runs the prompt on a second backend and fails unless
// the tokens agree and the logits are within --tolerance of the largest:
// the CPU against itself with fusion off passes; the emulated Metal
// (a bf16 KV cache) against the CPU (f32) passes at 1e-3 and fails at 1e-7
// with the difference named.
func TestGenerateAgainst(t *testing.T) {
	args := []string{"generate", "--model", "gpt2", "--dtype", "q4", "--layers", "1", "--tokens", "464,2068,7586", "--max-new-tokens", "3"}
	// A backend the comparison cannot open is refused before the first run
	// prints anything.
	for _, bad := range [][]string{{"--against", absentGPU()}} {
		out, _, err := mtl(t, append(append(args, "--backend", "cpu"), bad...)...)
		if err == nil || !strings.HasPrefix(err.Error(), bad[0]+" "+bad[1]+": ") || out != "" {
			t.Errorf("%v: err=%v, stdout %q; want --against's error before any tokens", bad, err, out)
		}
	}
	out, errOut, err := mtl(t, append(args, "--backend", "cpu", "--against", "cpu", "--against-fusion", "off")...)
	if err != nil || !strings.Contains(errOut, "against cpu (fusion off): tokens "+strings.TrimSpace(out)) {
		t.Fatalf("cpu against cpu: %v\n%s%s", err, out, errOut)
	}
	// The CPU keeps a bf16 cache too, alike on both sides.
	out, errOut, err = mtl(t, append(args, "--backend", "cpu", "--against", "cpu", "--kv-dtype", "bf16", "--tolerance", "1e-6")...)
	if err != nil || !strings.Contains(errOut, "against cpu (fusion on): tokens "+strings.TrimSpace(out)) || strings.Contains(errOut, "keeps its KV cache") {
		t.Fatalf("cpu against cpu, --kv-dtype bf16: %v\n%s%s", err, out, errOut)
	}
	// With --json too: the JSON, then the comparison.
	out, errOut, err = mtl(t, append(args, "--backend", "cpu", "--against", "cpu", "--json")...)
	if err != nil || !strings.HasPrefix(out, `{"tokens":`) || !strings.Contains(errOut, "against cpu (fusion on)") {
		t.Fatalf("cpu against cpu, --json: %v\n%s%s", err, out, errOut)
	}
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skipf("skipping metal-emu: %v", err)
	}
	metal := append(args, "--backend", "metal-emu", "--against", "cpu")
	if _, errOut, err := mtl(t, append(metal, "--tolerance", "1e-3")...); err != nil {
		t.Errorf("metal-emu against cpu at 1e-3: %v\n%s", err, errOut)
	}
	_, _, err = mtl(t, append(metal, "--tolerance", "1e-7")...)
	if err == nil || !strings.Contains(err.Error(), "logits differ by") || !strings.Contains(err.Error(), "more than 1e-07 of the largest") {
		t.Errorf("metal-emu against cpu at 1e-7: %v, want the logits' difference named", err)
	}
	// Metal keeps the cache in the model's bf16, the CPU in f32 unless
	// asked: the failure says so, and how to compare the kernels alone.
	kvWhy := "metal-emu keeps its KV cache in bf16 and cpu in f32 (--kv-dtype bf16 keeps both in bf16)"
	if err == nil || !strings.Contains(err.Error(), kvWhy) {
		t.Errorf("metal-emu against cpu at 1e-7: %v, want %q", err, kvWhy)
	}
	_, errOut, err = mtl(t, append(metal, "--kv-dtype", "f32", "--tolerance", "1e-4")...)
	if err != nil || strings.Contains(errOut, "keeps its KV cache") {
		t.Errorf("metal-emu against cpu, both caches f32: %v\n%s", err, errOut)
	}
	_, errOut, err = mtl(t, append(metal, "--kv-dtype", "bf16", "--tolerance", "1e-4")...)
	if err != nil || strings.Contains(errOut, "keeps its KV cache") {
		t.Errorf("metal-emu against cpu, both caches bf16: %v\n%s", err, errOut)
	}
}

// --tolerance and --against-fusion say how the --against run is compared:
// without --against they were dropped without a word and the command
// passed, comparing nothing.
func TestGenerateAgainstFlagsNeedAgainst(t *testing.T) {
	args := []string{"generate", "--model", "qwen3-moe-mini", "--layers", "1", "--tokens", "1,2", "--max-new-tokens", "2", "--backend", "cpu"}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--tolerance", "0.5"}, "--tolerance goes with --against BACKEND"},
		{[]string{"--against-fusion", "off"}, "--against-fusion goes with --against BACKEND"},
		{[]string{"--tolerance", "1e-3", "--against-fusion", "on"}, "--tolerance goes with --against BACKEND"},
	} {
		out, _, err := mtl(t, append(args, tc.flags...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != "" {
			t.Errorf("%v: err=%v, stdout %q; want %q before any tokens", tc.flags, err, out, tc.want)
		}
	}
}

// absentGPU is a GPU backend no machine of this OS has: CUDA on macOS,
// Metal elsewhere.
func absentGPU() string {
	if runtime.GOOS == "darwin" {
		return "cuda"
	}
	return "metal"
}

func TestErrorsAreClear(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: x\nmodel: { preset: qwen3-moe-mini }\ncases:\n  - name: c\n    matrix: { bach: [1] }\n"), 0o644)
	broken := filepath.Join(dir, "ckpt")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, "config.json"), []byte(`{"architectures": ["GPTNeoXForCausalLM"]}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", "nope", "--tokens", "1"}, `model "nope" is neither a preset`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1,x"}, `item 2 ("x") is not a token id`},
		// --tokens is a list as the others: an empty item is one, said so
		// (it was "item 2 ("") is not a token id"), and a number past int32
		// is no id of any vocabulary, not "not a token id".
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1,,2"}, `--tokens "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", ""}, `--tokens "": item 1 of 1 is empty`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1, 99999999999"}, `--tokens: item 2 (99999999999) is no vocabulary's id: ids run from 0 to 2147483647 at most`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--against", "tpu"}, `--against "tpu": want auto, cpu, metal, metal-emu or cuda`},
		{[]string{"selftest", "--backend", "cpu", "--filter", "no-such-check-xyz"}, `--filter "no-such-check-xyz" matches no check (mtlbench selftest --backend cpu lists them)`},
		// A near miss of an op's name says which one.
		{[]string{"selftest", "--backend", "cpu", "--filter", "rmsnorm"}, `--filter "rmsnorm" matches no check (did you mean "rms_norm"?; mtlbench selftest`},
		{[]string{"selftest", "--backend", "cpu", "--filter", "xyzzy|argmx"}, `(did you mean "argmax"?; `},
		{[]string{"compare", "1", "2", "--alpha", "NaN"}, "--alpha must be between 0 and 1, got NaN"},
		{[]string{"compare", "1", "2", "--latest", "-1"}, "--latest -1: want a count of runs (0: all)"},
		{[]string{"runs", "--limit", "-3"}, "--limit -3: want a count of runs (0: all)"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--against", "cpu", "--against-fusion", "maybe"}, `--against-fusion "maybe": want on or off`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--against", "cpu", "--tolerance", "-1"}, "--tolerance -1: want a fraction of 0 or more"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--backend", "cpu", "--kv-dtype", "f8"}, `--kv-dtype: kv_dtype "f8": want auto, f32, f16 or bf16`},
		// an id past the vocabulary is named by its place in --tokens
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "9000"}, "--tokens: item 1 (9000) is outside qwen3-moe-mini's vocabulary of 8192 tokens (ids 0 to 8191)"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1,-3"}, "--tokens: item 2 (-3) is outside qwen3-moe-mini's vocabulary"},
		{[]string{"generate", "--model", broken, "--tokens", "1"}, `unknown architecture "GPTNeoXForCausalLM"`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--dtype", "int4"}, "--dtype"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--threads", "-1"}, "--threads -1: want 1 to 1024 (0: every core)"},
		// ab ran its rounds on every core for --threads -1 without a word,
		// and gave --threads 5000 to runs that refuse it.
		{[]string{"ab", "kernels", "--baseline-bin", "/bin/true", "--backend", "cpu", "--threads", "-1"}, "--threads -1: want 1 to 1024 (0: every core)"},
		{[]string{"ab", "kernels", "--baseline-bin", "/bin/true", "--backend", "cpu", "--threads", "5000"}, "--threads 5000: want 1 to 1024 (0: every core)"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--layers", "-1"}, "--layers: qwen3-moe-mini: -1 layers: want a positive count"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--layers", "99", "--backend", "cpu"}, "--layers: qwen3-moe-mini: layers=99 out of range 1..6"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--block-size", "100000000"}, "--block-size 100000000: the KV cache takes blocks of 8, 16 or 32 tokens"},
		{[]string{"tune", "--kernel", "matmul,matmul", "--shape", "m=1,n=64,k=64", "--dry-run"}, `--kernel "matmul,matmul": matmul twice`},
		{[]string{"tune", "--kernel", "matmul,", "--shape", "m=1,n=64,k=64", "--dry-run"}, `--kernel "matmul,": item 2 of 2 is empty (a comma too many, or a variable left unset?)`},
		// bench's lists of integers (-b, -p, -n, -d) name an empty item as
		// every other list does (internal/listarg): it was `empty item in "1,,2"`.
		{[]string{"bench", "-m", "qwen3-moe-mini", "-b", "1,,2", "--print-suite"}, `--batch "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "16,", "--print-suite"}, `--prompt "16,": item 2 of 2 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-n", ",4", "--print-suite"}, `--gen ",4": item 1 of 2 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-d", "0, ,512", "--print-suite"}, `--depth "0, ,512": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--request-rate", "1,,2", "--print-suite"}, `--request-rate "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{[]string{"compare", "1,,2", "3"}, `run references "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		// A tag a reference could not find again.
		{[]string{"bench", "-m", "qwen3-moe-mini", "--tag", "latest", "--db", filepath.Join(dir, "r.db")}, `--tag: tag "latest" is how a reference names the newest runs`},
		{[]string{"run", "x.yaml", "--tag", "7"}, `--tag: tag "7" is a number, which a reference reads as run 7`},
		{[]string{"peer", "import", "x.json", "--tag", "a,b"}, `--tag: tag "a,b" holds a comma`},
		// A bad flag says so in a line and where the help is, not with the
		// whole help text.
		// --raw is a row per sample, which only the data formats have.
		{[]string{"show", "1", "--format", "benchfmt", "--raw"}, "show: --raw goes with --format csv, json or jsonl (one row per sample), not --format benchfmt"},
		{[]string{"show", "1", "--raw"}, "show: --raw goes with --format csv, json or jsonl (one row per sample), not --format table"},
		{[]string{"show", "-1"}, "show: flag provided but not defined: -1 (a negative number is read as a flag; put -- before it) (see `mtlbench show --help`)"},
		{[]string{"tune", "import", "--bogus"}, "tune import: unknown flag --bogus (see `mtlbench tune import --help`)"},
		// a near miss of a flag the command has says which
		{[]string{"runs", "--limt", "3"}, "runs: unknown flag --limt (did you mean --limit?) (see `mtlbench runs --help`)"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--repetition", "3"}, "bench: unknown flag --repetition (did you mean --repetitions?)"},
		{[]string{"models", "-x"}, "models: unknown flag -x (see `mtlbench models --help`)"},
		// A command's flag given before the command's name says where it goes.
		{[]string{"--db", "r.db", "runs"}, "unknown flag --db: a flag of run, bench, runs..., given after the command's name (mtlbench run --db ...) (see `mtlbench --help`)"},
		{[]string{"--format", "csv", "show", "1"}, "unknown flag --format: a flag of models, run, bench..., given after the command's name (mtlbench models --format ...)"},
		{[]string{"suites", "--format", "csv", "list"}, "suites: unknown flag --format: a flag of list, given after the command's name (mtlbench suites list --format ...)"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--block-size", "0"}, "--block-size 0: the KV cache takes blocks of 8, 16 or 32 tokens"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--moe-chunk", "-5"}, "--moe-chunk -5: want 1 to 16777216 (token, expert) pairs a chunk"},
		// 0 ran the default chunk of 64 under a flag that asked for none.
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--moe-chunk", "0"}, "--moe-chunk 0: want 1 to 16777216 (token, expert) pairs a chunk"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--moe-chunk", "8", "--moe-strategy", "loop"}, "--moe-chunk sizes the chunks of --moe-strategy chunked, not of loop"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "-p", "4", "--timing", "bogus", "--print-suite"}, `--timing: unknown timing "bogus"`},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "--max-new-tokens", "0"}, "--max-new-tokens 0: want 1 to 16777216"},
		{[]string{"generate", "--model", "tinyllama-1.1b", "--layers", "1", "--tokens", "1", "--moe-chunk", "8"}, "--moe-chunk: model tinyllama-1.1b has no experts"},
		{[]string{"generate", "--model", "tinyllama-1.1b", "--layers", "1", "--tokens", "1", "--moe-strategy", "loop"}, "--moe-strategy: model tinyllama-1.1b has no experts"},
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "-n", "9223372036854775807"}, "--max-new-tokens 9223372036854775807: want 1 to 16777216"},
		// Past the model's positions is refused as such, not by the memory a
		// cache of that many tokens would need.
		{[]string{"generate", "--model", "qwen3-moe-mini", "--tokens", "1", "-n", "16777216", "--backend", "cpu"}, "1 prompt + 16777216 new tokens exceed the model's 4096 positions"},
		{[]string{"suites", "validate", bad}, `bad.yaml:5:15: unknown key "bach" in matrix (did you mean "batch"?)`},
		{[]string{"run", bad, "--db", filepath.Join(dir, "r.db")}, "bad.yaml:5:15"},
		{[]string{"run", "mac-smoke", "--timing", "profiled", "--db", filepath.Join(dir, "r.db")}, `--timing "profiled": want one of throughput, profile`},
		// A backend a flag chose names the flag, not the suite's backend line.
		{[]string{"run", "kernels", "--backend", absentGPU(), "--db", filepath.Join(dir, "r.db")}, "--backend " + absentGPU() + ": "},
		{[]string{"run", "kernels", "--set", "backend=" + absentGPU(), "--db", filepath.Join(dir, "r.db")}, "--set backend=" + absentGPU() + ": "},
		// bench's flags build a suite; its problems name the flag, not a
		// line of that suite.
		{[]string{"bench", "-m", "qwen3-moe-mini", "--dtype", "q9", "--db", filepath.Join(dir, "r.db")}, `--dtype: unknown dtype "q9" (did you mean "q2"?)`},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--backend", "tpu", "--dtype", "q9", "--db", filepath.Join(dir, "r.db")},
			"--dtype: unknown dtype \"q9\" (did you mean \"q2\"?)\n--backend \"tpu\": want auto, cpu, metal, metal-emu or cuda"},
		{[]string{"bench", "-m", "qwen3-moe-mini", "--witness-gpu", "M9", "--db", filepath.Join(dir, "r.db")}, `--witness-gpu: unknown Apple GPU "M9"`},
		{[]string{"bench", "-m", "nope", "--db", filepath.Join(dir, "r.db")}, `--model: model "nope" is neither a preset`},
	} {
		_, stderr, err := mtl(t, c.args...)
		msg := stderr
		if err != nil {
			msg += err.Error()
		}
		if err == nil || !strings.Contains(msg, c.want) {
			t.Errorf("%v: err=%v stderr=%q, want %q", c.args, err, stderr, c.want)
		}
	}
}

// Flags may follow the suite file, as people type them.
func TestFlagsAfterArguments(t *testing.T) {
	out, _, err := mtl(t, "suites", "validate", filepath.Join("..", "..", "suites", "ci.yaml"))
	if err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("validate: %v %s", err, out)
	}
	// Every shipped suite is valid, whatever backend it names: what only
	// that backend runs (metal-witness's Metal-only formats) is not the CPU's
	// to refuse.
	if out, stderr, err := mtl(t, append([]string{"suites", "validate"}, suites.ShippedNames()...)...); err != nil {
		t.Fatalf("validate the shipped suites: %v\n%s%s", err, out, stderr)
	}
	got := interspersed(newApp(nil, nil), []string{"mtlbench", "run", "s.yaml", "--db", "x.db", "-q", "--tag=a"})
	want := []string{"mtlbench", "run", "--db", "x.db", "-q", "--tag=a", "s.yaml"}
	if !slices.Equal(got, want) {
		t.Fatalf("interspersed = %v, want %v", got, want)
	}
}

// A peer run's JSON (tools/peers) imports as a run of kind peer whose case
// keys match the suite's.
func TestPeerImport(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	_, stderr, err := mtl(t, "peer", "import", filepath.Join("testdata", "peer", "hf.json"), "--db", db)
	if err != nil || !strings.Contains(stderr, "imported transformers 5.17.0 as run 1 (tag transformers): 1 case") {
		t.Fatalf("import: %v %s", err, stderr)
	}
	out, _, err := mtl(t, "show", "transformers", "--db", db, "--format", "csv")
	if err != nil || !strings.Contains(out, ",decode_tok_s,tok/s,higher,2,21.2,") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	// The run is dated by the file: it started and ended when the file
	// says, not when it was imported.
	out, _, err = mtl(t, "runs", "--db", db, "--format", "csv")
	if rows := csvRows(t, out); err != nil || len(rows) != 1 || rows[0]["started"] != "2026-11-21T10:00:00Z" ||
		rows[0]["ended"] != "2026-11-21T10:05:00Z" {
		t.Errorf("runs: %v %v", err, rows)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"format": "other"}`), 0o644)
	if _, _, err := mtl(t, "peer", "import", bad, "--db", db); err == nil || !strings.Contains(err.Error(), "want \"mtlbench-peer-run/1\"") {
		t.Fatalf("bad format: %v", err)
	}
}

// An interrupted case shows what its stored repetitions measured, marked
// unfinished, not "pending" in every column.
func TestShowUnfinishedCase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Kind: results.KindSuite})
	if err != nil {
		t.Fatal(err)
	}
	cs := []results.Case{{Key: "model/c/batch=1", Name: "c", Kind: results.CaseModel, Params: map[string]string{"batch": "1"}},
		{Key: "model/d/batch=1", Name: "d", Kind: results.CaseModel, Params: map[string]string{"batch": "1"}}}
	if err := db.AddCases(id, cs); err != nil {
		t.Fatal(err)
	}
	stored, _ := db.Cases(id)
	for rep, v := range []float64{100, 110} {
		if err := db.AddRep(stored[0].ID, rep, []results.Sample{{Rep: rep, Metric: "decode_tok_s", Value: v, Unit: "tok/s"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, _, err := mtl(t, "show", "1", "--db", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "c (unfinished)") || !strings.Contains(out, "105.0") || !strings.Contains(out, "│ d ") || !strings.Contains(out, "pending") {
		t.Errorf("show of an interrupted run:\n%s", out)
	}
	// A case that failed after keeping repetitions shows them, marked.
	db, err = results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(stored[0].ID, "out of memory at repetition 3"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out, _, _ = mtl(t, "show", "1", "--db", path)
	if !strings.Contains(out, "c (failed)") || !strings.Contains(out, "105.0") {
		t.Errorf("show of a case that failed after two repetitions:\n%s", out)
	}
}

// show of a run that stored no case says so, and why where its status
// tells, in place of a table, or on stderr beside the data formats' empty
// data.
func TestShowRunWithoutCases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []string{results.RunInterrupted, results.RunFailed, results.RunComplete} {
		id, err := db.CreateRun(&results.Run{SuiteName: "s", Backend: "cpu", Kind: results.KindSuite})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.FinishRun(id, st); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, tc := range []struct {
		run, format string
		stdout      string // "" where stdout holds data, and stderr says it
		want        string
	}{
		{"1", "table", "run 1 recorded no cases: it was interrupted before it stored any\n", ""},
		{"1", "md", "run 1 recorded no cases: it was interrupted before it stored any\n", ""},
		{"2", "table", "run 2 recorded no cases: it failed before it stored any\n", ""},
		{"3", "table", "run 3 recorded no cases\n", ""},
		{"1", "csv", "", "run 1 recorded no cases: it was interrupted before it stored any"},
		{"2", "json", "", "run 2 recorded no cases: it failed before it stored any"},
	} {
		t.Run(tc.run+"/"+tc.format, func(t *testing.T) {
			out, errOut, err := mtl(t, "show", tc.run, "--db", path, "--format", tc.format)
			if err != nil {
				t.Fatal(err)
			}
			if tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout = %q, want %q", out, tc.stdout)
			}
			if tc.want != "" && !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr = %q, want it to say %q", errOut, tc.want)
			}
			if tc.stdout != "" && strings.Contains(errOut, "no cases") {
				t.Errorf("stderr repeats what stdout says: %q", errOut)
			}
		})
	}
}

// bench --synthetic runs a checkpoint's architecture with seeded weights,
// packed if asked, and records that its figures are not the checkpoint's.
func TestBenchSynthetic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	ck := filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3_moe")
	if _, stderr, err := mtl(t, "bench", "-m", ck, "--synthetic", "--dtype", "q4", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--backend", "cpu", "--db", path); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cases, err := db.Cases(1)
	if err != nil || len(cases) != 1 {
		t.Fatalf("cases %v, %v", cases, err)
	}
	if p := cases[0].Params; p["weights"] != "synthetic" || p["dtype"] != "q4" || p["model"] != "qwen3_moe" {
		t.Errorf("recorded %v", p)
	}
}

// A packed --dtype on a checkpoint without --synthetic is refused, naming
// the flag that draws packed weights for its architecture: bench's own, not
// only the suite key behind it.
func TestBenchPackedCheckpointNamesSynthetic(t *testing.T) {
	ck := filepath.Join("..", "..", "runner", "testdata", "hf", "qwen3_moe")
	_, _, err := mtl(t, "bench", "-m", ck, "--dtype", "q4", "--print-suite")
	if err == nil || !strings.Contains(err.Error(), "is read as it is stored") || !strings.Contains(err.Error(), "bench's --synthetic") {
		t.Errorf("got %v, want the refusal to name bench's --synthetic", err)
	}
}

// TestFormatHelpNamesEveryFormat holds every --format flag's help to the
// formats its command accepts (table.ParseFormat's, and benchfmt where
// parseRunFormat reads the flag): selftest's once left out jsonl.
func TestFormatHelpNamesEveryFormat(t *testing.T) {
	benchfmt := map[string]bool{"run": true, "bench": true, "show": true}
	var walk func(path string, cmds []*cli.Command)
	seen := 0
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			walk(p, c.Subcommands)
			for _, f := range c.Flags {
				sf, ok := f.(*cli.StringFlag)
				if !ok || sf.Name != "format" {
					continue
				}
				seen++
				want := formatNames()
				if benchfmt[p] {
					want = append(want, formatBenchfmt)
				}
				words := strings.FieldsFunc(sf.Usage, func(r rune) bool { return !unicode.IsLetter(r) })
				for _, w := range want {
					if !slices.Contains(words, w) {
						t.Errorf("mtlbench %s --format: help %q leaves out %s", p, sf.Usage, w)
					}
				}
			}
		}
	}
	walk("", newApp(nil, nil).Commands)
	if seen < 10 {
		t.Fatalf("found %d --format flags: the walk missed commands", seen)
	}
}

// failingWriter fails every write, as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// generate's tokens are its output: a write of them that fails is an error,
// not exit 0 with nothing written, with --json or without.
func TestGenerateWriteError(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		args := []string{"mtlbench", "generate", "--model", "qwen3-moe-mini", "--layers", "1", "--backend", "cpu", "--tokens", "1,2", "--max-new-tokens", "2"}
		if asJSON {
			args = append(args, "--json")
		}
		var e bytes.Buffer
		if err := run(args, noInput{}, failingWriter{}, &e); err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("generate (--json %v) to a full disk: %v", asJSON, err)
		}
	}
}

// Whatever a command prints on standard output is what it was run for, so
// output lost to a failed write (a full disk) fails the command, one rule
// for all of them: these exited 0 with nothing written.
func TestOutputWriteErrorFails(t *testing.T) {
	for _, args := range [][]string{
		{"--version"},
		{"--help"},
		{"suites"},
		{"help", "run"},
		{"suites", "validate", "ci"},
		{"tune", "show", "--dir", t.TempDir(), "--backend", "cpu"},
		{"tune", "--kernel", "matmul", "--backend", "cpu", "--dry-run", "--dir", t.TempDir()},
	} {
		var e bytes.Buffer
		err := run(append([]string{"mtlbench"}, args...), noInput{}, failingWriter{}, &e)
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Errorf("mtlbench %s to a full disk: got %v, want the write's error", strings.Join(args, " "), err)
		} else if code := exitCode(err); code != 2 {
			t.Errorf("mtlbench %s to a full disk: exit %d, want 2", strings.Join(args, " "), code)
		}
	}
}

// A parameter count reads with three significant digits in one notation:
// a test checkpoint's 1.43M is not 1M, nor its 495104 a bare number beside
// the others' 124M, and a count at a unit's edge takes the larger unit.
func TestHumanParams(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{999, "999"},
		{1000, "1.00K"},
		{495_104, "495K"},
		{999_600, "1.00M"},
		{1_430_000, "1.43M"},
		{88_400_000, "88.4M"},
		{124_439_808, "124M"},
		{999_600_000, "1.0B"},
		{1_235_814_400, "1.2B"},
		{30_532_122_624, "30.5B"},
	} {
		if got := human(tc.n); got != tc.want {
			t.Errorf("human(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// run's closing line counts cases and repetitions in words: "1 of 1 case
// done, 1 repetition stored", not "1 of 1 cases done, 1 repetitions";
// bench's says the same, where it said only "stored in" the store.
func TestRunSaysWhatIsStored(t *testing.T) {
	for _, tc := range []struct {
		bench         bool
		batches, reps string
		want          string
	}{
		{false, "[1]", "1", "1 of 1 case done, 1 repetition stored in "},
		{false, "[1, 2]", "2", "2 of 2 cases done, 4 repetitions stored in "},
		{true, "1", "1", ": 1 of 1 case done, 1 repetition stored in "},
		{true, "1,2", "2", "2 of 2 cases done, 4 repetitions stored in "},
	} {
		dir := t.TempDir()
		db := filepath.Join(dir, "r.db")
		args := []string{"bench", "-m", "qwen3-moe-mini", "--layers", "1", "-b", tc.batches, "-p", "4", "-n", "2", "-r", tc.reps, "--warmup", "0"}
		want := tc.want
		if !tc.bench {
			suite := filepath.Join(dir, "s.yaml")
			yaml := "name: s\nbackend: cpu\nmodel: { preset: qwen3-moe-mini }\nrepetitions: " + tc.reps + "\nwarmup: 0\n" +
				"cases:\n  - name: c\n    params: { prompt_len: 4, gen_len: 2 }\n    matrix: { batch: " + tc.batches + " }\n"
			if err := os.WriteFile(suite, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			args = []string{"run", suite, "--set", "layers=1"}
		}
		want += db
		_, stderr, err := mtl(t, append(args, "--db", db, "--backend", "cpu", "-q")...)
		if err != nil || !strings.Contains(stderr, want) {
			t.Errorf("%s %s: err %v; stderr lacks %q:\n%s", args[0], tc.batches, err, want, stderr)
		}
	}
}

// A command that does not print samples refuses --format benchfmt naming
// the commands whose format it is, not as a format it has never heard of.
func TestBenchfmtNamesItsCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	for _, args := range [][]string{
		{"compare", "a", "b", "--db", db},
		{"gate", "--baseline", "a", "--candidate", "b", "--db", db},
		{"runs", "--db", db},
		{"env"},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, _, err := mtl(t, append(args, "--format", "benchfmt")...)
			if err == nil || !strings.Contains(err.Error(), "benchfmt is for the commands that print samples: show, run and bench") {
				t.Errorf("mtlbench %s --format benchfmt: %v", strings.Join(args, " "), err)
			}
		})
	}
}

// models --dtype all lists every format --dtype takes, each preset's
// memory in it: the float dtypes as well as the packed ones.
func TestModelsDtypeAllListsEveryFormat(t *testing.T) {
	out, _, err := mtl(t, "models", "--backend", "cpu", "--dtype", "all", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	col := slices.Index(rows[0], "dtype")
	if col < 0 {
		t.Fatalf("no dtype column in %q", rows[0])
	}
	listed := map[string]bool{}
	for _, r := range rows[1:] {
		if r[1] != "" && r[0] == "qwen3-moe-mini" {
			listed[r[col]] = true
		}
	}
	for _, d := range append([]string{"f32", "f16", "bf16"}, model.QuantFormats...) {
		if !listed[d] {
			t.Errorf("models --dtype all: no qwen3-moe-mini row in %s (listed: %v)", d, slices.Sorted(maps.Keys(listed)))
		}
		if _, err := model.ParseFormat(d); err != nil {
			t.Errorf("--dtype %s: %v", d, err)
		}
	}
}

// A checkpoint in a Hugging Face cache is a snapshot folder named by its
// commit, whose files link to the cache's blobs: models names it by its
// repository, as runs record it, and a folder of its own by its name.
func TestModelsNamesAHubSnapshot(t *testing.T) {
	fixture, err := filepath.Abs("../../runner/testdata/hf/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	const rev = "c1899de289a04d12100db370d81485cdf75e47ca"
	for _, tc := range []struct{ dir, want string }{
		{"hub/models--Qwen--Qwen3-0.6B/snapshots/" + rev, "Qwen3-0.6B"},
		{"Qwen3-0.6B-local", "Qwen3-0.6B-local"},
	} {
		dir := filepath.Join(t.TempDir(), filepath.FromSlash(tc.dir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"config.json", "model.safetensors"} {
			if err := os.Symlink(filepath.Join(fixture, f), filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		out, _, err := mtl(t, "models", "--backend", "cpu", "--format", "md", dir)
		if err != nil {
			t.Fatal(err)
		}
		if row := strings.Split(out, "\n")[2]; !strings.HasPrefix(row, "| "+tc.want+" ") || !strings.Contains(out, "- "+tc.want+": tensors by type") {
			t.Errorf("%s: named otherwise than %s:\n%s", tc.dir, tc.want, out)
		}
	}
}
