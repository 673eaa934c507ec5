package suites

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/internal/metrics"
)

// head is the common start of the inline suites below: lines 1-3, so the
// first case entry is on line 4.
const head = "name: s\nmodel: {preset: p}\ncases:\n"

func mustParse(t *testing.T, src string) *Suite {
	t.Helper()
	s, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v\n--- input:\n%s", err, src)
	}
	return s
}

func names(cs []Case) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func TestExample(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "qwen3-moe" || s.Description != "free text" || s.Backend != "auto" || s.Timing != "throughput" {
		t.Errorf("header: %+v", s)
	}
	want := &Model{Preset: "qwen3-30b-a3b", Weights: "synthetic", DType: "bf16", Seed: 1, Layers: 4, Fit: "strict",
		Pos: Pos{"testdata/example.yaml", 4, 11}}
	if !reflect.DeepEqual(s.Model, want) {
		t.Errorf("model = %+v, want %+v", s.Model, want)
	}
	if s.Repetitions != 5 || s.Warmup != 1 || !s.Interleave || s.Cooldown != 0 {
		t.Errorf("timing settings: %+v", s)
	}
	if !reflect.DeepEqual(s.Thresholds, map[string]float64{"decode_tok_s": 0.05}) {
		t.Errorf("thresholds = %v", s.Thresholds)
	}
	if len(s.Hash) != 64 {
		t.Errorf("hash %q", s.Hash)
	}
	if got := len(s.Cases); got != 5+4*3*2 {
		t.Fatalf("%d cases", got)
	}
	c := s.Cases[5]
	if c.Name != "decode-attention/head_size=32/block_size=8/context=100" ||
		c.Key != "kernel/decode-attention/block_size=8/context=100/head_size=32/op=paged_attention_decode" ||
		c.Op != "paged_attention_decode" || c.Kind != KindKernel {
		t.Errorf("first kernel case: %+v", c)
	}
	// Model-only suite params are not applied to kernel cases.
	if _, ok := c.Params["prompt_len"]; ok {
		t.Errorf("prompt_len leaked into a kernel case")
	}
	if p := s.Positions["thresholds.decode_tok_s"]; p.Line != 17 || p.Col != 17 {
		t.Errorf("threshold position %v", p)
	}
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, head+"  - name: c\n")
	if s.Backend != "auto" || s.Timing != "throughput" || s.Repetitions != 5 || s.Warmup != 1 || !s.Interleave {
		t.Errorf("suite defaults: %+v", s)
	}
	m := s.Model
	if m.Weights != "synthetic" || m.DType != "" || m.Seed != 1 || m.Fit != "strict" || m.Layers != 0 {
		t.Errorf("model defaults: %+v", m)
	}
	if len(s.Cases) != 1 || s.Cases[0].Name != "c" || s.Cases[0].Key != "model/c" || s.Cases[0].Kind != KindModel {
		t.Errorf("cases: %+v", s.Cases)
	}
}

func TestSettings(t *testing.T) {
	s := mustParse(t, `name: x-1
model: {path: /m, weights: checkpoint, dtype: f16, seed: 3, layers: 2, fit: truncate-layers}
backend: metal-emu
timing: profile
repetitions: 3
warmup: 0
interleave: false
cooldown: 1m30s
thresholds: {ttft_ms: "2.5%", decode_tok_s: 10%}
cases: [{name: c}]
`)
	if s.Backend != "metal-emu" || s.Timing != "profile" || s.Repetitions != 3 || s.Warmup != 0 || s.Interleave || s.Cooldown != 90*time.Second {
		t.Errorf("settings: %+v", s)
	}
	want := &Model{Path: "/m", Weights: "checkpoint", DType: "f16", Seed: 3, Layers: 2, Fit: "truncate-layers", Pos: Pos{"t.yaml", 2, 15}}
	if !reflect.DeepEqual(s.Model, want) {
		t.Errorf("model = %+v, want %+v", s.Model, want)
	}
	if !reflect.DeepEqual(s.Thresholds, map[string]float64{"ttft_ms": 0.025, "decode_tok_s": 0.10}) {
		t.Errorf("thresholds = %v", s.Thresholds)
	}
}

func TestExpansion(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		names []string
		keys  []string
	}{
		{
			name:  "no matrix",
			src:   head + "  - name: one\n    params: {batch: 2}\n",
			names: []string{"one"},
			keys:  []string{"model/one/batch=2"},
		},
		{
			name: "row-major in written key order",
			src:  head + "  - name: g\n    matrix:\n      gen_len: [8, 4]\n      batch: [1, 2, 3]\n",
			names: []string{
				"g/gen_len=8/batch=1", "g/gen_len=8/batch=2", "g/gen_len=8/batch=3",
				"g/gen_len=4/batch=1", "g/gen_len=4/batch=2", "g/gen_len=4/batch=3",
			},
			keys: []string{
				"model/g/gen_len=8", "model/g/batch=2/gen_len=8", "model/g/batch=3/gen_len=8",
				"model/g/gen_len=4", "model/g/batch=2/gen_len=4", "model/g/batch=3/gen_len=4",
			},
		},
		{
			name:  "groups in file order",
			src:   head + "  - name: b\n    matrix: {batch: [1, 2]}\n  - name: a\n    op: argmax\n    matrix: {tokens: [3]}\n",
			names: []string{"b/batch=1", "b/batch=2", "a/tokens=3"},
			keys:  []string{"model/b", "model/b/batch=2", "kernel/a/op=argmax/tokens=3"},
		},
		{
			name:  "integers are canonical in keys and names",
			src:   head + "  - name: k\n    op: rope\n    matrix: {head_size: [0x20, 64], tokens: [1_000]}\n",
			names: []string{"k/head_size=32/tokens=1000", "k/head_size=64/tokens=1000"},
			keys:  []string{"kernel/k/head_size=32/op=rope/tokens=1000", "kernel/k/head_size=64/op=rope/tokens=1000"},
		},
		{
			name:  "op in the matrix",
			src:   head + "  - name: norms\n    kind: kernel\n    matrix: {op: [rms_norm, add_rms_norm], hidden: [64]}\n",
			names: []string{"norms/op=rms_norm/hidden=64", "norms/op=add_rms_norm/hidden=64"},
			keys:  []string{"kernel/norms/op=rms_norm/width=64", "kernel/norms/op=add_rms_norm/width=64"},
		},
		{
			// An alias is its op's own parameter by another name, filed under
			// that name; a case's value wins over the suite's, and of the
			// suite's the op's own name over the alias.
			name: "aliases are filed under their op's own name",
			src: "name: s\nmodel: {preset: p}\nparams: {tokens: 16, hidden: 32, k: 64}\ncases:\n  - name: mm\n    op: matmul\n    params: {m: 1}\n" +
				"  - name: mm2\n    op: matmul\n  - name: mm3\n    op: matmul\n    matrix: {tokens: [2]}\n  - name: norm\n    op: rms_norm\n    params: {hidden: 128}\n",
			names: []string{"mm", "mm2", "mm3/tokens=2", "norm"},
			keys: []string{"kernel/mm/k=64/op=matmul", "kernel/mm2/k=64/m=16/op=matmul", "kernel/mm3/k=64/m=2/op=matmul",
				"kernel/norm/op=rms_norm/tokens=16/width=128"},
		},
		{
			name:  "free text is escaped in keys",
			src:   head + "  - name: v\n    params: {variant: \"a/b=c d\", sampling: \"temperature:0.7,top_k:40,top_p:0.9\"}\n",
			names: []string{"v"},
			keys:  []string{"model/v/sampling=temperature:0.7,top_k:40,top_p:0.9/variant=a%2Fb%3Dc%20d"},
		},
		{
			name: "samplings are canonical in keys and names",
			// A top_p of 1 keeps every token, as none does: the key leaves
			// it out, and spells numbers as the sampler's float32 holds them.
			src:   head + "  - name: s\n    matrix: {sampling: [\"temperature:0\", \"top_k:5,temperature:1.0,seed:0\", \"temperature:0.50,top_p:1\", \"temperature:2.0000000001,top_p:0.999999999\", \"temperature:0.7,top_p:0.95\"]}\n",
			names: []string{"s/sampling=greedy", "s/sampling=temperature:1,top_k:5", "s/sampling=temperature:0.5", "s/sampling=temperature:2", "s/sampling=temperature:0.7,top_p:0.95"},
			keys:  []string{"model/s", "model/s/sampling=temperature:1,top_k:5", "model/s/sampling=temperature:0.5", "model/s/sampling=temperature:2", "model/s/sampling=temperature:0.7,top_p:0.95"},
		},
		{
			name:  "rates and objectives are canonical in keys and names",
			src:   head + "  - name: serve\n    params: {slo: \"e2el:2000.0,ttft:500\", range_ratio: 0.50}\n    matrix: {arrival: [\"poisson:4.0\", \"poisson:0.5\", \"gamma:2.0:0.50\", \"gamma:8:1.0\"]}\n",
			names: []string{"serve/arrival=poisson:4", "serve/arrival=poisson:0.5", "serve/arrival=gamma:2:0.5", "serve/arrival=poisson:8"},
			keys: []string{"model/serve/arrival=poisson:4/range_ratio=0.5/slo=ttft:500,e2el:2000", "model/serve/arrival=poisson:0.5/range_ratio=0.5/slo=ttft:500,e2el:2000",
				"model/serve/arrival=gamma:2:0.5/range_ratio=0.5/slo=ttft:500,e2el:2000", "model/serve/arrival=poisson:8/range_ratio=0.5/slo=ttft:500,e2el:2000"},
		},
		{
			name:  "anchors and merge keys",
			src:   "name: s\nmodel: {preset: p}\nparams: &d {batch: 2}\ncases:\n  - name: a\n    params: {<<: *d, gen_len: 3}\n  - name: b\n    params: *d\n    matrix: {prompt_len: &l [5, 6]}\n  - name: c\n    matrix: {gen_len: *l}\n",
			names: []string{"a", "b/prompt_len=5", "b/prompt_len=6", "c/gen_len=5", "c/gen_len=6"},
			keys:  []string{"model/a/batch=2/gen_len=3", "model/b/batch=2/prompt_len=5", "model/b/batch=2/prompt_len=6", "model/c/batch=2/gen_len=5", "model/c/batch=2/gen_len=6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.src)
			if got := names(s.Cases); !reflect.DeepEqual(got, tt.names) {
				t.Errorf("names:\n got %q\nwant %q", got, tt.names)
			}
			var keys []string
			for _, c := range s.Cases {
				keys = append(keys, c.Key)
			}
			if !reflect.DeepEqual(keys, tt.keys) {
				t.Errorf("keys:\n got %q\nwant %q", keys, tt.keys)
			}
		})
	}
}

// A suite's params are defaults for the cases that read them: a kernel
// case's key holds only what its op reads, so the same work keys alike
// whatever else the suite sets.
func TestSuiteParamsKeyOnlyTheirReaders(t *testing.T) {
	tests := []struct {
		name string
		src  string
		keys []string
	}{
		{
			name: "an op that does not read it",
			src:  "name: s\nparams: {k: 64}\ncases:\n  - name: mm\n    op: matmul\n    params: {m: 1, n: 8}\n  - name: norm\n    op: rms_norm\n    params: {tokens: 4, width: 8}\n",
			keys: []string{"kernel/mm/k=64/n=8/op=matmul", "kernel/norm/op=rms_norm/tokens=4/width=8"},
		},
		{
			name: "the ops of a matrix over op",
			src:  "name: s\nparams: {k: 64, width: 8}\ncases:\n  - name: k\n    kind: kernel\n    params: {tokens: 4}\n    matrix: {op: [matmul, rms_norm]}\n",
			keys: []string{"kernel/k/k=64/m=4/op=matmul", "kernel/k/op=rms_norm/tokens=4/width=8"},
		},
		{
			name: "an alias only one op reads",
			src:  "name: s\nparams: {hidden: 32, head_size: 64}\ncases:\n  - name: norm\n    op: rms_norm\n    params: {tokens: 4}\n  - name: rope\n    op: rope\n    params: {tokens: 4}\n",
			keys: []string{"kernel/norm/op=rms_norm/tokens=4/width=32", "kernel/rope/head_size=64/op=rope/tokens=4"},
		},
		{
			name: "model and kernel cases side by side",
			src:  "name: s\nmodel: {preset: p}\nparams: {batch: 2, k: 64}\ncases:\n  - name: decode\n  - name: mm\n    op: matmul\n  - name: norm\n    op: rms_norm\n    params: {tokens: 4, width: 8}\n",
			keys: []string{"model/decode/batch=2", "kernel/mm/k=64/op=matmul", "kernel/norm/op=rms_norm/tokens=4/width=8"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.src)
			var keys []string
			for _, c := range s.Cases {
				keys = append(keys, c.Key)
			}
			if !reflect.DeepEqual(keys, tt.keys) {
				t.Errorf("keys:\n got %q\nwant %q", keys, tt.keys)
			}
		})
	}
}

// A suite's moe_chunk is a default for the cases whose dispatch has
// chunks (chunked, or no strategy, which it then asks for): beside loop or
// grouped it is left out of the case and its key, from a --set too, and a
// --set moe_strategy gives or takes it as the case then reads it; one the
// case sets itself beside loop is still refused, as is a --set moe_chunk
// beside a --set moe_strategy that reads none.
func TestSuiteMoEChunkOnlyWhereRead(t *testing.T) {
	const model = "name: s\nmodel: {preset: p}\n"
	tests := []struct {
		name string
		src  string
		set  map[string]string
		keys []string
		// chunks: each case's moe_chunk after a --set, "" where it has none
		chunks []string
		// strategies: each case's decoded moe_strategy, what it runs
		strategies []string
		err        string
	}{
		{
			name: "model cases of each strategy",
			src:  model + "params: {moe_chunk: 16}\ncases:\n  - name: d\n    matrix: {moe_strategy: [loop, chunked, grouped]}\n  - name: b\n",
			keys: []string{"model/d/moe_strategy=loop", "model/d/moe_chunk=16", "model/d/moe_strategy=grouped", "model/b/moe_chunk=16"},
		},
		{
			name: "a moe kernel case of loop",
			src:  "name: s\nparams: {moe_chunk: 16}\ncases:\n  - name: m\n    op: moe\n    params: {moe_strategy: loop}\n  - name: c\n    op: moe\n",
			keys: []string{"kernel/m/moe_strategy=loop/op=moe", "kernel/c/moe_chunk=16/op=moe"},
		},
		{
			name: "the case's own moe_chunk beside loop",
			src:  model + "cases:\n  - name: d\n    params: {moe_strategy: loop, moe_chunk: 16}\n",
			err:  `t.yaml:5:28: in case "d": moe_chunk 16 sizes the chunks of moe_strategy chunked, not of loop`,
		},
		{
			name: "no case of a strategy with chunks",
			src:  model + "params: {moe_chunk: 16}\ncases:\n  - name: d\n    matrix: {moe_strategy: [loop, grouped]}\n",
			err:  `no case of this suite reads params moe_chunk`,
		},
		{
			name:   "--set beside loop",
			src:    model + "cases:\n  - name: d\n    matrix: {moe_strategy: [loop, chunked]}\n  - name: b\n",
			set:    map[string]string{"moe_chunk": "8"},
			keys:   []string{"model/d/moe_strategy=loop", "model/d/moe_strategy=chunked", "model/b"},
			chunks: []string{"", "8", "8"},
		},
		{
			name: "--set where every case is loop",
			src:  model + "cases:\n  - name: d\n    params: {moe_strategy: loop}\n",
			set:  map[string]string{"moe_chunk": "8"},
			err:  `--set moe_chunk=8: no case of suite s takes moe_chunk`,
		},
		{
			name:   "--set with the strategy that reads it",
			src:    model + "cases:\n  - name: d\n    params: {moe_strategy: loop}\n",
			set:    map[string]string{"moe_chunk": "8", "moe_strategy": "chunked"},
			keys:   []string{"model/d/moe_strategy=loop"},
			chunks: []string{"8"},
		},
		{
			// The cases keep their keys, as under any --set.
			name:       "--set moe_strategy=loop over the suite's moe_chunk",
			src:        model + "params: {moe_chunk: 16}\ncases:\n  - name: b\n  - name: c\n    params: {moe_strategy: chunked}\n",
			set:        map[string]string{"moe_strategy": "loop"},
			keys:       []string{"model/b/moe_chunk=16", "model/c/moe_chunk=16"},
			chunks:     []string{"", ""},
			strategies: []string{"loop", "loop"},
		},
		{
			name:       "--set moe_strategy=grouped over a moe kernel case's suite moe_chunk",
			src:        "name: s\nparams: {moe_chunk: 16}\ncases:\n  - name: c\n    op: moe\n",
			set:        map[string]string{"moe_strategy": "grouped"},
			keys:       []string{"kernel/c/moe_chunk=16/op=moe"},
			chunks:     []string{""},
			strategies: []string{"grouped"},
		},
		{
			name:       "--set moe_strategy=chunked gives a loop case the suite's moe_chunk",
			src:        model + "params: {moe_chunk: 16}\ncases:\n  - name: d\n    params: {moe_strategy: loop}\n  - name: b\n",
			set:        map[string]string{"moe_strategy": "chunked"},
			keys:       []string{"model/d/moe_strategy=loop", "model/b/moe_chunk=16"},
			chunks:     []string{"16", "16"},
			strategies: []string{"chunked", "chunked"},
		},
		{
			// Keyed as the matrix of the first case keys them.
			name:       "--set sweeping moe_strategy over the suite's moe_chunk",
			src:        model + "params: {moe_chunk: 16}\ncases:\n  - name: d\n    matrix: {moe_strategy: [loop, chunked]}\n  - name: b\n",
			set:        map[string]string{"moe_strategy": "[loop, chunked]"},
			keys:       []string{"model/d/moe_strategy=loop", "model/d/moe_chunk=16", "model/b/moe_strategy=loop", "model/b/moe_chunk=16"},
			chunks:     []string{"", "16", "", "16"},
			strategies: []string{"loop", "chunked", "loop", "chunked"},
		},
		{
			name: "--set moe_strategy=loop beside the case's own moe_chunk",
			src:  model + "cases:\n  - name: b\n    params: {moe_chunk: 16}\n",
			set:  map[string]string{"moe_strategy": "loop"},
			err:  `--set moe_strategy=loop: in case "b": moe_chunk 16 sizes the chunks of moe_strategy chunked, not of loop`,
		},
		{
			name: "--set moe_chunk beside --set moe_strategy=loop",
			src:  model + "params: {moe_chunk: 16}\ncases:\n  - name: b\n",
			set:  map[string]string{"moe_chunk": "8", "moe_strategy": "loop"},
			err:  `--set moe_chunk=8: no case of suite s reads moe_chunk beside --set moe_strategy=loop`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.src))
			if err == nil && tt.set != nil {
				err = s.Override(tt.set)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys, chunks, strategies []string
			for _, c := range s.Cases {
				keys = append(keys, c.Key)
				chunks = append(chunks, c.Params["moe_chunk"].Raw)
				strategies = append(strategies, string(c.Model.MoEStrategy)+string(c.Kernel.MoEStrategy))
			}
			if !reflect.DeepEqual(keys, tt.keys) {
				t.Errorf("keys:\n got %q\nwant %q", keys, tt.keys)
			}
			if tt.chunks != nil && !reflect.DeepEqual(chunks, tt.chunks) {
				t.Errorf("moe_chunk:\n got %q\nwant %q", chunks, tt.chunks)
			}
			if tt.strategies != nil && !reflect.DeepEqual(strategies, tt.strategies) {
				t.Errorf("moe_strategy:\n got %q\nwant %q", strategies, tt.strategies)
			}
		})
	}
}

func TestPrecedence(t *testing.T) {
	s := mustParse(t, `name: s
model: {preset: p}
params: {batch: 1, prompt_len: 64, gen_len: 16, head_size: 64}
cases:
  - name: g
    params: {prompt_len: 128}
    matrix: {batch: [2, 4]}
  - name: k
    op: rope
    params: {head_size: 128}
`)
	if len(s.Cases) != 3 {
		t.Fatalf("%d cases", len(s.Cases))
	}
	c := s.Cases[1]
	if c.intParam("batch", 0) != 4 || c.intParam("prompt_len", 0) != 128 || c.intParam("gen_len", 0) != 16 {
		t.Errorf("merged params: %+v", c.Params)
	}
	if v := c.Params["batch"]; v.Pos.Line != 7 || v.Pos.Col != 25 {
		t.Errorf("batch comes from %v, want the matrix at 7:25", v.Pos)
	}
	if v := c.Params["gen_len"]; v.Pos.Line != 3 {
		t.Errorf("gen_len comes from %v, want the suite params", v.Pos)
	}
	if _, ok := c.Params["head_size"]; ok {
		t.Errorf("kernel-only suite param applied to a model case")
	}
	if k := s.Cases[2]; k.intParam("head_size", 0) != 128 || k.Op != "rope" {
		t.Errorf("kernel case: %+v", k)
	}
	if _, ok := s.Cases[2].Params["batch"]; ok {
		t.Errorf("model-only suite param applied to a kernel case")
	}
}

func TestAccessors(t *testing.T) {
	s := mustParse(t, head+"  - name: c\n    params: {batch: 8, variant: \"7\", sampling: greedy}\n")
	c := s.Cases[0]
	if c.intParam("batch", 1) != 8 || c.intParam("gen_len", 32) != 32 || c.floatParam("batch", 0) != 8 || c.floatParam("x", 1.5) != 1.5 {
		t.Errorf("Int/Float")
	}
	if c.stringParam("sampling", "") != "greedy" || c.stringParam("arrival", "all") != "all" || c.stringParam("batch", "") != "8" {
		t.Errorf("String")
	}
	// A quoted number is a string: not numeric, but still readable as text.
	if c.intParam("variant", -1) != -1 || c.stringParam("variant", "") != "7" {
		t.Errorf("quoted number: %+v", c.Params["variant"])
	}
}

func TestKeyStability(t *testing.T) {
	a := `name: s
model: {preset: p}
params: {prompt_len: 128, gen_len: 8}
cases:
  - name: g
    params: {arrival: all, requests: 4}
    matrix:
      batch: [1, 2]
      block_size: [8, 16]
`
	b := `cases:
  - matrix:
      block_size: [16, 8]
      batch: [2, 1]
    params:
      requests: 4
      arrival: all
    name: g
params:
  gen_len: 8
  prompt_len: 128
model:
  preset: p
name: s
`
	keys := func(src string) []string {
		var out []string
		for _, c := range mustParse(t, src).Cases {
			out = append(out, c.Key)
		}
		sort.Strings(out)
		return out
	}
	ka, kb := keys(a), keys(b)
	if !reflect.DeepEqual(ka, kb) {
		t.Errorf("keys differ:\n%q\n%q", ka, kb)
	}
	if ka[0] != "model/g/batch=2/block_size=8/gen_len=8/requests=4" {
		t.Errorf("key %q", ka[0])
	}
}

// A GPU has several spellings; its case's name and key spell it one way,
// so "M3 Ultra", "apple m3 ultra" and its largest bin "M3 Ultra 80-core"
// make the same case.
func TestWitnessGPUKey(t *testing.T) {
	for _, v := range []string{"M3 Ultra", "apple m3 ultra", "M3-Ultra", "Apple M3 Ultra", "M3 Ultra 80-core", "M3 Ultra (80-core GPU)"} {
		s := mustParse(t, "name: s\ncases:\n  - name: g\n    op: rope\n    matrix: {witness_gpu: [\""+v+"\", M4 Max (32-core GPU)]}\n")
		var names []string
		for _, c := range s.Cases {
			names = append(names, c.Name)
		}
		want := []string{"g/witness_gpu=M3-Ultra", "g/witness_gpu=M4-Max-32-core"}
		if !reflect.DeepEqual(names, want) {
			t.Errorf("%q: names %q, want %q", v, names, want)
		}
		if got := s.Cases[0].WitnessGPU(); got != v {
			t.Errorf("%q: WitnessGPU() = %q; the case keeps the value as written", v, got)
		}
	}
}

func TestErrors(t *testing.T) {
	gated := strings.Join(metrics.Gated(), ", ")
	timedOps := strings.Join(params[ParamOp].enum, ", ")
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty", "", []string{"t.yaml:1:1: empty suite (" + emptySuiteHint + ")"}},
		{"comments only", "# nothing\n", []string{"t.yaml:1:1: empty suite (" + emptySuiteHint + ")"}},
		{"a document of nothing", "---\n", []string{"t.yaml:1:1: empty suite (" + emptySuiteHint + ")"}},
		{"a null", "~\n", []string{"t.yaml:1:1: a suite must be a map, got nothing (null)"}},
		{"tab indent", "name: t\nmodel: {preset: p}\ncases:\n\t- name: a\n", []string{"t.yaml:4:1: a tab indents this line (YAML indents with spaces only)"}},
		{"tab after spaces", "name: t\nmodel: {preset: p}\ncases:\n  - name: a\n  \tparams: {batch: 1}\n", []string{"t.yaml:5:3: a tab indents this line (YAML indents with spaces only)"}},
		// yaml.v3 gives a problem of the first line no line: it read as a
		// character that cannot start any token.
		{"tab indenting the first line", "\tname: t\nmodel: {preset: p}\ncases:\n  - name: a\n", []string{"t.yaml:1:1: a tab indents this line (YAML indents with spaces only)"}},
		{"tab after spaces on the first line", "  \tname: t\n", []string{"t.yaml:1:3: a tab indents this line (YAML indents with spaces only)"}},
		{"not a map", "- a\n", []string{"t.yaml:1:1: a suite must be a map, got a list"}},
		// yaml.v3 says these without a line: placed where they are.
		{"unknown anchor", "name: t\nmodel: {preset: p}\ncases:\n  - name: a\n    params: *nope\n", []string{"t.yaml:5:13: YAML: unknown anchor 'nope' referenced"}},
		{"unknown anchor after a longer one", "name: t\nx-a: &nopes {batch: 1}\nmodel: {preset: p}\ncases:\n  - name: a\n    params: *nopes\n  - name: b\n    params: *nope\n", []string{"t.yaml:8:13: YAML: unknown anchor 'nope' referenced"}},
		{"control character", "name: t\nmodel: {preset: p}\ncases:\n  - name: a\x01\n", []string{"t.yaml:4:12: YAML: control characters are not allowed (U+0001)"}},
		{"yaml syntax", "name: s\ncases: [\n", []string{"t.yaml:2:1: YAML: did not find expected node content"}},
		// yaml.v3 counts a parser error's line from 0: the error is said at
		// the line that opens the list or map, not the line before it.
		{"list not closed", "name: t\nbackend: cpu\ncases: [{name: d, op: matmul}\nrepetitions: 3\n", []string{"t.yaml:3:1: YAML: did not find expected ',' or ']' (a [ list on this line is not closed with ], or two of its items have no comma between them)"}},
		{"map not closed", "name: t\nmodel: {preset: p}\ncases:\n  - name: d\n    params: {batch: 1\n  - name: e\n", []string{"t.yaml:5:1: YAML: did not find expected ',' or '}' (a { map on this line is not closed with }, or two of its entries have no comma between them)"}},
		{"map not closed at the end", "name: t\nmodel: {preset: p}\ncases: [{name: d, params: {batch: 1]\n\n", []string{"t.yaml:3:1: YAML: did not find expected ',' or '}' (a { map on this line is not closed with }, or two of its entries have no comma between them)"}},
		{"key indented out of its map", "name: t\nmodel:\n  preset: p\n layers: 1\ncases: [{name: d}]\n", []string{"t.yaml:4:1: YAML: did not find expected key"}},
		// yaml.v3 reports the line that opens the list; the error is at the
		// line that broke it
		{"a key out of a list", "name: t\nmodel: {preset: p}\ncases:\n  - name: c\n    params: {batch: 1}\n\n  name: d\n", []string{"t.yaml:7:3: YAML: this line is in the list above but not an item of it (did not find expected '-' indicator) (start it with \"- \", or indent it under the item it belongs to)"}},
		{"two documents", "name: s\n---\nname: t\n", []string{`t.yaml:2:1: a suite file holds one YAML document (remove the second "---")`}},
		{"missing name and cases", "description: d\n", []string{
			`t.yaml:1:1: missing required key "name"`,
			`t.yaml:1:1: missing required key "cases"`,
		}},
		{"unknown top-level key", head + "  - name: c\nnmae: x\n", []string{`t.yaml:5:1: unknown key "nmae" at the top level (did you mean "name"?)`}},
		{"x- keys hold anchors", head + "  - name: c\nx-shared: &s {batch: 1}\nx_shared: 1\n", []string{`t.yaml:6:1: unknown key "x_shared" at the top level (keys starting with "x-" are ignored, e.g. to hold shared anchors)`}},
		// "x-" keys are ignored at the top level alone: below it, the
		// error says so.
		{"x- key in a case", head + "  - name: c\n    x-note: hi\n", []string{`t.yaml:5:5: unknown key "x-note" in case "c" (keys starting with "x-" are ignored at the top level only: hold shared anchors there)`}},
		{"x- key in the model", "name: s\nmodel: {preset: p, x-note: hi}\ncases:\n  - name: c\n", []string{`t.yaml:2:20: unknown key "x-note" in model (keys starting with "x-" are ignored at the top level only: hold shared anchors there)`}},
		{"x- key in params", head + "  - name: c\n    params: {x-note: hi}\n", []string{`t.yaml:5:14: unknown key "x-note" in params (keys starting with "x-" are ignored at the top level only: hold shared anchors there)`}},
		{"x- key in a matrix", head + "  - name: c\n    matrix: {x-b: [1]}\n", []string{`t.yaml:5:14: unknown key "x-b" in matrix (keys starting with "x-" are ignored at the top level only: hold shared anchors there)`}},
		// A higher-is-better metric falls by at most 100%: a threshold
		// there or past it would pass every run.
		{"threshold past a fall to 0", head + "  - name: c\nthresholds: {decode_tok_s: 100%, ttft_ms: 300%}\n", []string{`t.yaml:5:28: threshold decode_tok_s: decode_tok_s falls by at most 100% (to 0), so a threshold of 100% would pass every run: write less than 100%`}},
		// A key the format has at another depth says where it goes, not
		// a near key of this one (layers is not a typo of cases).
		{"model key at the top level", head + "  - name: c\nlayers: 2\n", []string{`t.yaml:5:1: unknown key "layers" at the top level (model: takes it (model: {layers: ...}); parameters go under params: or matrix:)`}},
		{"seed at the top level", head + "  - name: c\nseed: 2\n", []string{`t.yaml:5:1: unknown key "seed" at the top level (model: takes it (model: {seed: ...}))`}},
		{"matrix at the top level", head + "  - name: c\nmatrix: {batch: [1, 2]}\n", []string{`t.yaml:5:1: unknown key "matrix" at the top level (each case under cases: takes it)`}},
		{"model key in a case", head + "  - name: c\n    preset: gpt2\n", []string{`t.yaml:5:5: unknown key "preset" in case "c" (model: takes it (model: {preset: ...}))`}},
		{"top-level key in a case", head + "  - name: c\n    repetitions: 2\n", []string{`t.yaml:5:5: unknown key "repetitions" in case "c" (it is a key of the top level)`}},
		{"model key in params", head + "  - name: c\n    params: {seed: 2}\n", []string{`t.yaml:5:14: unknown key "seed" in params (model: takes it (model: {seed: ...}))`}},
		{"top-level key in a matrix", head + "  - name: c\n    matrix: {repetitions: [1, 2]}\n", []string{`t.yaml:5:14: unknown key "repetitions" in matrix (it is a key of the top level)`}},
		{"top-level key in the suite's params", "name: s\nmodel: {preset: p}\nparams: {warmup: 0}\ncases:\n  - name: c\n", []string{`t.yaml:3:10: unknown key "warmup" in params (it is a key of the top level)`}},
		{"param in the model", "name: s\nmodel: {preset: p, batch: 2}\ncases:\n  - name: c\n", []string{`t.yaml:2:20: unknown key "batch" in model (parameters go under params: or matrix:)`}},
		{"top-level key in the model", "name: s\nmodel: {preset: p, backend: cpu}\ncases:\n  - name: c\n", []string{`t.yaml:2:20: unknown key "backend" in model (it is a key of the top level)`}},
		{"param at top level", head + "  - name: c\nbatch: 8\n", []string{`t.yaml:5:1: unknown key "batch" at the top level (parameters go under params: or matrix:)`}},
		{"duplicate key", head + "  - name: c\nname: t\n", []string{`t.yaml:5:1: duplicate key "name" (first at line 1)`}},
		{"bad suite name", "name: Qwen_3\ncases: [{name: c, op: rope}]\n", []string{`t.yaml:1:7: bad suite name "Qwen_3" (use lowercase letters, digits and "-", e.g. "qwen3-moe")`}},
		{"description with an escape", head + "  - name: c\ndescription: \"a \\e]0;x\\a title\"\n", []string{`t.yaml:5:14: description holds the control character U+001B (write it as text: line breaks and tabs are the only control characters a description may hold)`}},
		{"backend typo", head + "  - name: c\nbackend: metl\n", []string{`t.yaml:5:10: unknown backend "metl" (did you mean "metal"?)`}},
		{"timing far off", head + "  - name: c\ntiming: xyz\n", []string{`t.yaml:5:9: unknown timing "xyz" (one of throughput, profile)`}},
		{"repetitions zero", head + "  - name: c\nrepetitions: 0\n", []string{`t.yaml:5:14: repetitions must be >= 1, got 0`}},
		{"repetitions past float64", head + "  - name: c\nrepetitions: 1e400\n", []string{`t.yaml:5:14: repetitions must be an integer, got 1e400, a number past float64's range`}},
		{"repetitions quoted", head + "  - name: c\nrepetitions: \"5\"\n", []string{`t.yaml:5:14: repetitions must be an integer, got string "5" (quoted, it is text: write 5 without quotes)`}},
		{"warmup negative", head + "  - name: c\nwarmup: -1\n", []string{`t.yaml:5:9: warmup must be >= 0, got -1`}},
		{"interleave yes", head + "  - name: c\ninterleave: yes\n", []string{`t.yaml:5:13: interleave must be true or false, got string "yes" (YAML 1.2 reads yes as text: write true)`}},
		{"interleave quoted", head + "  - name: c\ninterleave: 'false'\n", []string{`t.yaml:5:13: interleave must be true or false, got string "false" (quoted, it is text: write false without quotes)`}},
		{"interleave Off", head + "  - name: c\ninterleave: Off\n", []string{`t.yaml:5:13: interleave must be true or false, got string "Off" (YAML 1.2 reads Off as text: write false)`}},
		{"interleave text", head + "  - name: c\ninterleave: maybe\n", []string{`t.yaml:5:13: interleave must be true or false, got string "maybe"`}},
		{"cooldown without unit", head + "  - name: c\ncooldown: 5\n", []string{`t.yaml:5:11: bad cooldown "5" (add a unit, e.g. "5s")`}},
		{"cooldown negative", head + "  - name: c\ncooldown: -1s\n", []string{`t.yaml:5:11: cooldown must not be negative, got -1s`}},
		{"cooldown of years", head + "  - name: c\ncooldown: 100000h\n", []string{`t.yaml:5:11: cooldown of 100000h: at most 1h0m0s (a pause to let the machine cool)`}},
		{"threshold number", head + "  - name: c\nthresholds: {decode_tok_s: 5}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage like "5%", got 5 (write "5%")`}},
		// A number below 1 is as often a fraction (gate's --alpha, tune's
		// --min-gain take one) as a percentage: the hint gives both, so
		// 0.05 meant as 5% does not become a gate on 0.05%.
		{"threshold fraction", head + "  - name: c\nthresholds: {decode_tok_s: 0.05}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage like "5%", got 0.05 (write "5%" if 0.05 is a fraction, "0.05%" if a percentage)`}},
		{"threshold fraction written as a rational", head + "  - name: c\nthresholds: {decode_tok_s: .5}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage like "5%", got .5 (write "50%" if .5 is a fraction, ".5%" if a percentage)`}},
		{"threshold fraction of no exact binary hundredfold", head + "  - name: c\nthresholds: {decode_tok_s: 0.07}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage like "5%", got 0.07 (write "7%" if 0.07 is a fraction, "0.07%" if a percentage)`}},
		{"threshold one", head + "  - name: c\nthresholds: {decode_tok_s: 1}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage like "5%", got 1 (write "1%")`}},
		{"threshold garbage", head + "  - name: c\nthresholds: {decode_tok_s: fast}\n", []string{`t.yaml:5:28: threshold decode_tok_s must be a percentage >= 0 like "5%", got "fast"`}},
		{"thresholds list", head + "  - name: c\nthresholds: [5%]\n", []string{`t.yaml:5:13: thresholds must be a map, got a list`}},
		{"threshold typo", head + "  - name: c\nthresholds: {decode_toks: 5%}\n", []string{`t.yaml:5:14: threshold: no case records a metric "decode_toks" (did you mean "decode_tok_s"?)`}},
		{"threshold unknown", head + "  - name: c\nthresholds: {speed: 5%}\n", []string{`t.yaml:5:14: threshold: no case records a metric "speed" (gated metrics: ` + gated + `)`}},
		{"threshold informational", head + "  - name: c\nthresholds: {bytes_per_step: 5%}\n", []string{`t.yaml:5:14: threshold: bytes_per_step is informational (no better or worse direction): no gate compares it (gated metrics: ` + gated + `)`}},

		// A threshold on a metric no case of the suite records would pass
		// every run.
		{"threshold only kernel cases record", head + "  - name: c\nthresholds: {decode_tok_s: 5%, us_per_call: 5%}\n", []string{
			`t.yaml:5:32: threshold us_per_call: no case of this suite records it (kernel cases do) (its cases record ` + modelGated(false) + `)`}},
		{"threshold only model cases record", "name: s\ncases: [{name: k, op: rms_norm, params: {tokens: 1, width: 8}}]\nthresholds: {ttft_ms: 5%}\n", []string{
			`t.yaml:3:14: threshold ttft_ms: no case of this suite records it (model cases do) (its cases record us_per_call, gb_s, gflop_s, witness_us)`}},
		{"goodput without an slo", head + "  - name: c\nthresholds: {goodput_per_s: 5%}\n", []string{
			`t.yaml:5:14: threshold goodput_per_s: no case of this suite records it (only a model case with an slo records it) (its cases record ` + modelGated(false) + `)`}},
		{"decode metric where no case decodes", head + "  - name: c\n    params: {gen_len: 1}\nthresholds: {ttft_ms: 5%, decode_tok_s: 5%, itl_p99_ms: 5%}\n", []string{
			`t.yaml:6:27: threshold decode_tok_s: no case of this suite records it (only a model case that decodes records it: a gen_len of 1 is sampled by the prefill) (its cases record ` + prefillGated + `)`,
			`t.yaml:6:45: threshold itl_p99_ms: no case of this suite records it (only a model case that decodes records it: a gen_len of 1 is sampled by the prefill) (its cases record ` + prefillGated + `)`}},
		{"threshold only imports hold", head + "  - name: c\nthresholds: {total_tok_s: 5%}\n", []string{
			`t.yaml:5:14: threshold total_tok_s: no case of this suite records it (only imports of other tools' results hold it) (its cases record ` + modelGated(false) + `)`}},

		{"model unknown key", "name: s\nmodel: {preseet: p}\ncases: [{name: c}]\n", []string{
			`t.yaml:2:1: model needs a preset or a path`,
			`t.yaml:2:9: unknown key "preseet" in model (did you mean "preset"?)`,
		}},
		{"model preset and path", "name: s\nmodel: {preset: p, path: /m}\ncases: [{name: c}]\n", []string{`t.yaml:2:26: model has both preset and path; give exactly one`}},
		// An empty name was said as a model "" that is neither a preset
		// nor a path that exists.
		{"model preset empty", "name: s\nmodel: {preset: \"\"}\ncases: [{name: c}]\n", []string{`t.yaml:2:17: model preset is empty (mtlbench models lists the presets)`}},
		{"model path empty", "name: s\nmodel: {path: ' '}\ncases: [{name: c}]\n", []string{`t.yaml:2:15: model path is empty (a checkpoint folder or a .gguf file)`}},
		{"checkpoint without path", "name: s\nmodel: {preset: p, weights: checkpoint}\ncases: [{name: c}]\n", []string{`t.yaml:2:29: weights: checkpoint needs a model path (set path: to the checkpoint directory)`}},
		{"model dtype typo", "name: s\nmodel: {preset: p, dtype: bf61}\ncases: [{name: c}]\n", []string{`t.yaml:2:27: unknown dtype "bf61" (did you mean "bf16"?)`}},
		{"model layers zero", "name: s\nmodel: {preset: p, layers: 0}\ncases: [{name: c}]\n", []string{`t.yaml:2:28: model layers must be >= 1, got 0`}},
		// A negative seed would be wrapped to another one and recorded as
		// itself.
		{"model seed negative", "name: s\nmodel: {preset: p, seed: -1}\ncases: [{name: c}]\n", []string{`t.yaml:2:26: model seed must be from 0 to 9223372036854775807, got -1`}},
		{"model seed past int64", "name: s\nmodel: {preset: p, seed: 18446744073709551615}\ncases: [{name: c}]\n", []string{`t.yaml:2:26: model seed must be from 0 to 9223372036854775807, got 18446744073709551615`}},
		{"model seed a string", "name: s\nmodel: {preset: p, seed: x}\ncases: [{name: c}]\n", []string{`t.yaml:2:26: model seed must be an integer from 0 to 9223372036854775807, got string "x"`}},
		{"model seed leading zero", "name: s\nmodel: {preset: p, seed: 010}\ncases: [{name: c}]\n", []string{`t.yaml:2:26: model seed 010: a leading zero is not allowed (write 10)`}},
		{"model fit", "name: s\nmodel: {preset: p, fit: truncate}\ncases: [{name: c}]\n", []string{`t.yaml:2:25: unknown fit "truncate" (did you mean "truncate-layers"?)`}},
		{"model not a map", "name: s\nmodel: qwen3\ncases: [{name: c}]\n", []string{`t.yaml:2:8: model must be a map, got string "qwen3"`}},
		{"model case without model", "name: s\ncases:\n  - name: c\n", []string{`t.yaml:3:5: case "c" is a model case but the suite has no model (add a model: section with a preset or path)`}},
		// The suite's op is a default for kernel cases: a case that names
		// no op of its own is a model case unless it says kind: kernel.
		{"model case without model beside the suite's op", "name: s\nparams: {op: rms_norm, width: 8}\ncases:\n  - name: c\n", []string{`t.yaml:4:5: case "c" is a model case but the suite has no model (add kind: kernel to run the suite's op rms_norm (a case without kind: is a kernel case only where it names its op itself), or a model: section with a preset or path)`}},
		{"model case without model beside a kernel case of the suite's op", "name: s\nparams: {op: rms_norm}\ncases:\n  - {name: k, kind: kernel}\n  - {name: c, params: {batch: 2}}\n", []string{`t.yaml:5:5: case "c" is a model case but the suite has no model (add kind: kernel to run the suite's op rms_norm (a case without kind: is a kernel case only where it names its op itself), or a model: section with a preset or path)`}},

		// YAML 1.2 names anchors with any character but a flow one; the
		// parser takes ASCII letters, digits, "-" and "_": the error points
		// at the name, not at column 1.
		{"anchor of a unicode name", "name: s\ncases:\n  - {name: r, op: rms_norm, params: &日本 {width: 8}}\n", []string{`t.yaml:3:37: YAML: &日本 holds a character an anchor's name may not have here (name anchors and their aliases with ASCII letters, digits, "-" and "_" alone: the YAML parser suites are read with takes no other)`}},
		{"alias of a dotted name", "name: s\nx-a: &ok {width: 8}\ncases:\n  - name: r\n    op: rms_norm\n    params: *ok.x\n", []string{`t.yaml:6:13: YAML: *ok.x holds a character an anchor's name may not have here (name anchors and their aliases with ASCII letters, digits, "-" and "_" alone: the YAML parser suites are read with takes no other)`}},
		// In { }, a comma ends a plain value: the rest of a comma list
		// written unquoted reads as keys of their own.
		{"slo unquoted in a flow map", head + "  - {name: c, params: {batch: 1, slo: ttft:500,tpot:50}}\n", []string{`t.yaml:4:48: unknown key "tpot:50" in params (in { } a comma ends a value: quote it whole, slo: "ttft:500,tpot:50")`}},
		{"sampling of three items unquoted in a flow map", head + "  - {name: c, params: {sampling: temperature:1,top_k:5,seed:2}}\n", []string{
			`t.yaml:4:48: unknown key "top_k:5" in params (in { } a comma ends a value: quote it whole, sampling: "temperature:1,top_k:5,seed:2")`,
			`t.yaml:4:56: unknown key "seed:2" in params (in { } a comma ends a value: quote it whole, sampling: "temperature:1,top_k:5,seed:2")`}},
		{"variant unquoted in a kernel case's flow map", "name: s\ncases:\n  - name: k\n    op: rope\n    params: {variant: a,b}\n", []string{`t.yaml:5:25: unknown key "b" in params (in { } a comma ends a value: quote it whole, variant: "a,b")`}},
		{"a key without a value after a number", head + "  - {name: c, params: {batch: 1, gen_lenn}}\n", []string{`t.yaml:4:34: unknown key "gen_lenn" in params (did you mean "gen_len"?)`}},
		{"a key without a value after text, close to a parameter", head + "  - {name: c, params: {variant: a, batchh}}\n", []string{`t.yaml:4:36: unknown key "batchh" in params (did you mean "batch"?)`}},
		{"cases a map", "name: s\nmodel: {preset: p}\ncases:\n  c: {batch: 1}\n", []string{`t.yaml:4:3: cases must be a list, got a map (start each case with "- name: ...")`}},
		{"cases empty", "name: s\nmodel: {preset: p}\ncases: []\n", []string{`t.yaml:3:8: cases must not be empty`}},
		{"case not a map", head + "  - c\n", []string{`t.yaml:4:5: case 1 must be a map, got string "c"`}},
		{"case without name", head + "  - params: {batch: 1}\n", []string{`t.yaml:4:5: case 1 has no name`}},
		{"bad case name", head + "  - name: a b\n", []string{`t.yaml:4:11: bad case name "a b" (use ASCII letters, digits, ".", "_" and "-")`}},
		// A letter outside ASCII is refused, and the hint says which letters.
		{"case name non-ASCII letter", head + "  - name: matmul-ü\n", []string{`t.yaml:4:11: bad case name "matmul-ü" (use ASCII letters, digits, ".", "_" and "-")`}},
		{"case name a folder", head + "  - name: ..\n  - name: \".\"\n", []string{
			`t.yaml:4:11: bad case name ".." (a key segment of "." or ".." reads as a folder; add a letter or digit)`,
			`t.yaml:5:11: bad case name "." (a key segment of "." or ".." reads as a folder; add a letter or digit)`}},
		{"duplicate case names", head + "  - name: c\n  - name: c\n", []string{`t.yaml:5:11: duplicate case name "c" (first at line 4)`}},
		// A case repeated through an alias is said where the alias is, not
		// at the anchor's name, the first case's own line.
		{"case repeated by an alias", head + "  - &c\n    name: c\n  - *c\n", []string{
			`t.yaml:6:5: duplicate case name "c" (first at line 5) (an alias repeats its case whole: give the copy a name of its own, e.g. {<<: *c, name: c-2})`}},
		{"case key typo", head + "  - name: c\n    matrx: {batch: [1]}\n", []string{`t.yaml:5:5: unknown key "matrx" in case "c" (did you mean "matrix"?)`}},
		{"param directly in case", head + "  - name: c\n    batch: 8\n", []string{`t.yaml:5:5: unknown key "batch" in case "c" (parameters go under params: or matrix:)`}},
		{"kind typo", head + "  - name: c\n    kind: kernal\n", []string{`t.yaml:5:11: unknown kind "kernal" (did you mean "kernel"?)`}},
		// A case of no known kind is not called a model case.
		{"kind typo without a model", "name: s\ncases:\n  - name: c\n    kind: kernal\n    op: rms_norm\n", []string{`t.yaml:4:11: unknown kind "kernal" (did you mean "kernel"?)`}},
		{"kernel without op", head + "  - name: c\n    kind: kernel\n", []string{`t.yaml:4:11: kernel case "c" needs an op (one of ` + strings.Join(params[ParamOp].enum, ", ") + `)`}},
		{"op in model case", head + "  - name: c\n    kind: model\n    op: rope\n", []string{`t.yaml:6:9: op is not allowed in a model case (only kind: kernel cases take it)`}},
		{"op typo", head + "  - name: c\n    op: rmsnorm\n", []string{`t.yaml:5:9: unknown op "rmsnorm" (did you mean "rms_norm"?)`}},
		{"bad op in matrix", head + "  - name: c\n    kind: kernel\n    matrix: {op: [rope, rmsnorm]}\n", []string{`t.yaml:6:25: unknown op "rmsnorm" (did you mean "rms_norm"?)`}},
		// An op no backend times on its own (ops.Op.Cost is nil) is no
		// kernel case's: run would refuse it after validate passed it.
		{"op not timed on its own", head + "  - name: c\n    op: kv_write\n", []string{`t.yaml:5:9: op kv_write is not timed on its own (new K/V into their cache slots; backends fuse it into attention) (a kernel case times one of ` + timedOps + `)`}},
		{"untimed op in matrix", head + "  - name: c\n    kind: kernel\n    matrix: {op: [rope, kv_write]}\n", []string{`t.yaml:6:25: op kv_write is not timed on its own (new K/V into their cache slots; backends fuse it into attention) (a kernel case times one of ` + timedOps + `)`}},
		{"op twice", head + "  - name: c\n    op: rope\n    params: {op: matmul}\n", []string{`t.yaml:6:18: op is given both as op: and in params (keep one)`}},

		{"matrix key typo", head + "  - name: c\n    matrix:\n      bach: [1, 2]\n", []string{`t.yaml:6:7: unknown key "bach" in matrix (did you mean "batch"?)`}},
		{"params key typo", head + "  - name: c\n    params: {prompt_lne: 3}\n", []string{`t.yaml:5:14: unknown key "prompt_lne" in params (did you mean "prompt_len"?)`}},
		{"suite params key typo", "name: s\nparams: {hed_size: 64}\ncases: [{name: c, op: rope}]\n", []string{`t.yaml:2:10: unknown key "hed_size" in params (did you mean "head_size"?)`}},
		{"unknown param, no hint", head + "  - name: c\n    params: {zzz: 1}\n", []string{`t.yaml:5:14: unknown key "zzz" in params`}},
		{"kernel param in model case", head + "  - name: c\n    params: {head_size: 64}\n", []string{`t.yaml:5:14: head_size is a kernel-case parameter, not allowed in a model case (only kind: kernel cases take it)`}},
		// a model's dtype is said where it goes
		{"dtype in a model case", head + "  - name: c\n    params: {dtype: f16}\n", []string{`t.yaml:5:14: dtype is a kernel-case parameter, not allowed in a model case (only kind: kernel cases take it; a model case's weights take the suite's model: { dtype: ... })`}},
		{"model param in kernel case", head + "  - name: c\n    op: rope\n    matrix: {batch: [1]}\n", []string{`t.yaml:6:14: batch is a model-case parameter, not allowed in a kernel case (only kind: model cases take it)`}},
		{"params and matrix", head + "  - name: c\n    params: {batch: 1}\n    matrix: {batch: [2]}\n", []string{`t.yaml:6:14: batch is set in both params and matrix (keep one: a fixed value in params, or a list in matrix)`}},
		{"matrix scalar", head + "  - name: c\n    matrix: {batch: 8}\n", []string{`t.yaml:5:21: matrix batch must be a list, got 8 (write [8], a range such as 1-16*2, or move it to params:)`}},
		// A range past the parameter's bounds is said once, at the range,
		// not once for each value it makes.
		{"range past the bound", head + "  - name: c\n    matrix: {batch: 1-9223372036854775807*2}\n", []string{`t.yaml:5:21: matrix batch: range "1-9223372036854775807*2": batch must be from 1 to 65536, got 131072`}},
		{"range item past the bound", head + "  - name: c\n    matrix: {batch: [8, 65000-70000+1000]}\n", []string{`t.yaml:5:25: matrix batch: range "65000-70000+1000": batch must be from 1 to 65536, got 66000`}},
		{"range off the values", head + "  - name: c\n    matrix: {block_size: 8-40+8}\n", []string{`t.yaml:5:26: matrix block_size: range "8-40+8": block_size must be one of 8, 16, 32, got 24`}},
		{"range off the step", head + "  - name: c\n    op: rope\n    matrix: {head_size: [2-6, 64]}\n", []string{`t.yaml:6:26: matrix head_size: range "2-6": head_size must be a multiple of 2, got 3`}},
		{"matrix bad range", head + "  - name: c\n    matrix: {batch: 8-1}\n", []string{`t.yaml:5:21: matrix batch: range "8-1" ends before it starts (a range is first-last, first-last+step or first-last*factor, e.g. 1-16*2)`}},
		// One bound for the values a list's ranges make, whether one string
		// or items of a list hold them, as bench's -b 1-600,601-1200.
		{"range items past the list bound", head + "  - name: c\n    matrix: {batch: [1-600, 601-1200]}\n", []string{`t.yaml:5:29: matrix batch: range "601-1200" takes the list past 1000 values`}},
		{"matrix list", head + "  - name: c\n    matrix: [batch]\n", []string{`t.yaml:5:13: matrix must be a map, got a list`}},
		{"matrix empty list", head + "  - name: c\n    matrix: {batch: []}\n", []string{`t.yaml:5:21: matrix batch has an empty list`}},
		{"matrix duplicate value", head + "  - name: c\n    matrix: {batch: [1, 2, 1]}\n", []string{`t.yaml:5:28: duplicate value 1 in matrix batch (first at line 5, col 22)`}},
		{"matrix item a list", head + "  - name: c\n    matrix: {batch: [1, [2, 3]]}\n", []string{`t.yaml:5:25: matrix batch takes a list of single values, but an item is a list (each item of a matrix list is one value of the sweep)`}},
		{"params list value", head + "  - name: c\n    params: {batch: [1, 2]}\n", []string{`t.yaml:5:21: batch must be a single value, got a list (put lists under matrix:)`}},
		{"params not a map", "name: s\nparams: [1]\ncases: [{name: c, op: rope}]\n", []string{`t.yaml:2:9: params must be a map, got a list`}},

		{"string where int", head + "  - name: c\n    params: {batch: \"8\"}\n", []string{`t.yaml:5:21: batch must be an integer, got string "8" (quoted, it is text: write 8 without quotes)`}},
		{"text where int", head + "  - name: c\n    params: {batch: eight}\n", []string{`t.yaml:5:21: batch must be an integer, got string "eight"`}},
		{"quoted hex where int", head + "  - name: c\n    params: {batch: '0x10'}\n", []string{`t.yaml:5:21: batch must be an integer, got string "0x10" (quoted, it is text: write 0x10 without quotes)`}},
		{"float where int", head + "  - name: c\n    params: {batch: 1.5}\n", []string{`t.yaml:5:21: batch must be an integer, got 1.5`}},
		{"null where int", head + "  - name: c\n    params: {batch: ~}\n", []string{`t.yaml:5:21: batch must be an integer, got nothing (null)`}},
		{"int out of range", head + "  - name: c\n    params: {batch: 9223372036854775808}\n", []string{`t.yaml:5:21: batch is out of range: 9223372036854775808`}},
		// Past uint64, which YAML tags a float: still an integer, out of range.
		{"int past uint64", head + "  - name: c\n    params: {batch: 99999999999999999999}\n", []string{`t.yaml:5:21: batch is out of range: 99999999999999999999`}},
		{"negative int past uint64", head + "  - name: c\n    params: {batch: -99999999999999999999}\n", []string{`t.yaml:5:21: batch is out of range: -99999999999999999999`}},
		{"int too small", head + "  - name: c\n    params: {batch: 0}\n", []string{`t.yaml:5:21: batch must be >= 1, got 0`}},
		{"auto int negative", head + "  - name: c\n    params: {kv_blocks: -1}\n", []string{`t.yaml:5:25: kv_blocks must be >= 0 (0 = auto), got -1`}},
		{"depth negative", head + "  - name: c\n    params: {depth: -1}\n", []string{`t.yaml:5:21: depth must be >= 0, got -1`}},
		{"block size", head + "  - name: c\n    matrix: {block_size: [8, 12]}\n", []string{`t.yaml:5:30: block_size must be one of 8, 16, 32, got 12`}},
		{"head size", head + "  - name: c\n    op: rope\n    matrix: {head_size: [47]}\n", []string{`t.yaml:6:26: head_size must be a multiple of 2, got 47`}},
		{"head size too large", head + "  - name: c\n    op: rope\n    matrix: {head_size: [512]}\n", []string{`t.yaml:6:26: head_size must be from 2 to 256, got 512`}},
		{"moe strategy", head + "  - name: c\n    params: {moe_strategy: groupd}\n", []string{`t.yaml:5:28: unknown moe_strategy "groupd" (did you mean "grouped"?)`}},
		{"kernel dtype", head + "  - name: c\n    op: matmul\n    params: {dtype: fp16}\n", []string{`t.yaml:6:21: unknown dtype "fp16" (did you mean "f16"?)`}},
		{"string param bool", head + "  - name: c\n    params: {variant: true}\n", []string{`t.yaml:5:23: variant must be a string, got true`}},
		// A value is one line of every table and of the case's stored key,
		// which import refuses with a control character in it.
		{"variant line break", head + "  - name: c\n    params: {variant: \"a\\nb\"}\n", []string{`t.yaml:5:23: variant "a\nb" holds the control character U+000A (a value is one line of text)`}},
		{"variant tab in a matrix", head + "  - name: c\n    matrix: {variant: [a, \"b\\tc\"]}\n", []string{`t.yaml:5:27: variant "b\tc" holds the control character U+0009 (a value is one line of text)`}},
		{"variant escape", head + "  - name: c\n    params: {variant: \"\\e[31mred\"}\n", []string{`t.yaml:5:23: variant "\x1b[31mred" holds the control character U+001B (a value is one line of text)`}},
		{"arrival", head + "  - name: c\n    params: {arrival: \"stagger:0\"}\n", []string{`t.yaml:5:23: bad arrival "stagger:0": stagger step must be an integer >= 1 (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"arrival word", head + "  - name: c\n    params: {arrival: burst}\n", []string{`t.yaml:5:23: bad arrival "burst" (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"arrival rate zero", head + "  - name: c\n    params: {arrival: \"poisson:0\"}\n", []string{`t.yaml:5:23: bad arrival "poisson:0": rate 0 requests a second is outside 0.001 to 1e+06 (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"arrival rate word", head + "  - name: c\n    matrix: {arrival: [\"poisson:4\", \"poisson:fast\"]}\n", []string{`t.yaml:5:37: bad arrival "poisson:fast": rate "fast" is not a number (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"arrival rate nan", head + "  - name: c\n    params: {arrival: \"poisson:NaN\"}\n", []string{`t.yaml:5:23: bad arrival "poisson:NaN": rate "NaN" is not a number (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"prompt_len past any context", head + "  - name: c\n    params: {prompt_len: 9223372036854775807}\n", []string{`t.yaml:5:26: prompt_len must be from 1 to 16777216, got 9223372036854775807`}},
		// Bounds that match run --threads and what the backends use: a value
		// past them is a typo, and the error names the range.
		{"threads past run --threads", head + "  - name: c\n    params: {threads: 99999999999}\n", []string{`t.yaml:5:23: threads must be from 1 to 1024, got 99999999999`}},
		{"threads of a kernel case", head + "  - name: c\n    op: rms_norm\n    params: {tokens: 1, width: 8, threads: 1025}\n", []string{`t.yaml:6:44: threads must be from 1 to 1024, got 1025`}},
		{"moe_chunk past any step's pairs", head + "  - name: c\n    params: {moe_strategy: chunked}\n    matrix: {moe_chunk: [8, 99999999999]}\n", []string{`t.yaml:6:29: moe_chunk must be from 1 to 16777216, got 99999999999`}},
		{"repetitions past the bound", head + "  - name: c\nrepetitions: 1000000\n", []string{`t.yaml:5:14: repetitions must be from 1 to 10000, got 1000000`}},
		{"warmup past int64", head + "  - name: c\nwarmup: 99999999999999999999\n", []string{`t.yaml:5:9: warmup must be from 0 to 10000, got 99999999999999999999`}},
		{"requests past the bound", head + "  - name: c\n    params: {requests: 100000000}\n", []string{`t.yaml:5:24: requests must be from 1 to 1048576, got 100000000`}},
		{"gamma without a burstiness", head + "  - name: c\n    params: {arrival: \"gamma:4\"}\n", []string{`t.yaml:5:23: bad arrival "gamma:4": want gamma:R:B, a rate and a burstiness ` + hintGamma}},
		{"gamma burstiness zero", head + "  - name: c\n    params: {arrival: \"gamma:4:0\"}\n", []string{`t.yaml:5:23: bad arrival "gamma:4:0": burstiness 0 is outside 0.001 to 1000 ` + hintGamma}},
		{"gamma burstiness word", head + "  - name: c\n    params: {arrival: \"gamma:4:x\"}\n", []string{`t.yaml:5:23: bad arrival "gamma:4:x": burstiness "x" is not a number ` + hintGamma}},
		{"gamma rate", head + "  - name: c\n    params: {arrival: \"gamma:0:1\"}\n", []string{`t.yaml:5:23: bad arrival "gamma:0:1": rate 0 requests a second is outside 0.001 to 1e+06 ` + hintGamma}},
		{"arrival rate inf", head + "  - name: c\n    params: {arrival: \"poisson:+Inf\"}\n", []string{`t.yaml:5:23: bad arrival "poisson:+Inf": rate +Inf requests a second is outside 0.001 to 1e+06 (want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`}},
		{"slo target", head + "  - name: c\n    params: {slo: \"ttft:200,itl:50\"}\n", []string{`t.yaml:5:19: bad slo "ttft:200,itl:50": unknown target "itl" (ttft, tpot, e2el) (want "ttft:MS,tpot:MS,e2el:MS" (any of the three, milliseconds > 0))`}},
		{"slo bound", head + "  - name: c\n    params: {slo: \"ttft:0\"}\n", []string{`t.yaml:5:19: bad slo "ttft:0": ttft bound "0" must be a number of milliseconds > 0 (want "ttft:MS,tpot:MS,e2el:MS" (any of the three, milliseconds > 0))`}},
		{"slo twice", head + "  - name: c\n    params: {slo: \"tpot:5,tpot:6\"}\n", []string{`t.yaml:5:19: bad slo "tpot:5,tpot:6": tpot given twice (want "ttft:MS,tpot:MS,e2el:MS" (any of the three, milliseconds > 0))`}},
		{"range ratio one", head + "  - name: c\n    params: {range_ratio: 1}\n", []string{`t.yaml:5:27: bad range_ratio: 1 is outside [0, 1) (each request's lengths are drawn from prompt_len and gen_len times 1-r to 1+r)`}},
		{"range ratio word", head + "  - name: c\n    params: {range_ratio: wide}\n", []string{`t.yaml:5:27: bad range_ratio: "wide" is not a number (each request's lengths are drawn from prompt_len and gen_len times 1-r to 1+r)`}},
		{"slo form", head + "  - name: c\n    params: {slo: \"500\"}\n", []string{`t.yaml:5:19: bad slo "500": "500" is not target:milliseconds (want "ttft:MS,tpot:MS,e2el:MS" (any of the three, milliseconds > 0))`}},
		{"witness gpu typo", head + "  - name: c\n    params: {witness_gpu: M3 Ulta}\n", []string{`t.yaml:5:27: unknown Apple GPU "M3 Ulta" (did you mean "M3 Ultra"?)`}},
		{"witness gpu bin", head + "  - name: c\n    op: rope\n    matrix: {witness_gpu: [M2 Max 32-core]}\n", []string{`t.yaml:6:28: no bin of the M2 Max in the GPU table matches "M2 Max 32-core" (one of "M2 Max 30-core", "M2 Max 38-core", or the chip alone for its largest bin)`}},
		{"sampling", head + "  - name: c\n    matrix: {sampling: [greedy, \"temperature:0.7,top_p:2\"]}\n", []string{`t.yaml:5:33: bad sampling "temperature:0.7,top_p:2": top_p: must be in (0, 1] (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"requests fewer than batch", head + "  - name: c\n    params: {requests: 2}\n    matrix: {batch: [1, 4]}\n", []string{`t.yaml:6:25: in case "c": requests 2 are fewer than batch 4, so the batch is never full (lower batch or raise requests)`}},
		{"not UTF-8", head + "  - name: c\n    params: {variant: \"caf\xe9\"}\n", []string{`t.yaml:5:27: byte 0xE9 is not UTF-8 text (a suite is UTF-8: save the file as UTF-8)`}},
		// A number that is no integer is said to be one, not "not a number".
		{"sampling seed negative", head + "  - name: c\n    params: {sampling: \"temperature:1,seed:-1\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1,seed:-1": seed: -1 must be an integer from 0 to 18446744073709551615 (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"sampling top_k fraction", head + "  - name: c\n    params: {sampling: \"temperature:1,top_k:2.5\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1,top_k:2.5": top_k: 2.5 must be an integer >= 0 (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"sampling seed word", head + "  - name: c\n    params: {sampling: \"temperature:1,seed:abc\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1,seed:abc": seed: "abc" is not a number (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"sampling spelled twice", head + "  - name: c\n    matrix: {sampling: [greedy, \"temperature:0\"]}\n", []string{`t.yaml:5:33: duplicate value greedy in matrix sampling (first at line 5, col 25)`}},
		{"top_p below float32", head + "  - name: c\n    params: {sampling: \"temperature:1,top_p:1e-46\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1,top_p:1e-46": top_p: 1e-46 is too small (the least is 1.4e-45) (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"temperature below float32", head + "  - name: c\n    params: {sampling: \"temperature:1e-50\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1e-50": temperature: 1e-50 is too small (the least above 0 is 1.4e-45; 0 is greedy) (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},
		{"sampling option", head + "  - name: c\n    params: {sampling: \"temperature:1,min_p:0.1\"}\n", []string{`t.yaml:5:24: bad sampling "temperature:1,min_p:0.1": unknown key "min_p" (temperature, top_k, top_p and seed are read) (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`}},

		{"heads not divisible", head + "  - name: attn\n    op: paged_attention_decode\n    params: {num_heads: 12}\n    matrix: {num_kv_heads: [4, 5]}\n", []string{`t.yaml:7:32: in case "attn": num_heads 12 is not a multiple of num_kv_heads 5`}},
		{"heads from suite params", "name: s\nparams: {num_kv_heads: 8}\ncases:\n  - name: attn\n    op: rope\n    matrix: {num_heads: [8, 12, 16], tokens: [1, 2]}\n", []string{`t.yaml:6:29: in case "attn": num_heads 12 is not a multiple of num_kv_heads 8`}},
		{"moe chunk of another strategy", head + "  - name: moe\n    matrix: {moe_strategy: [chunked, loop], moe_chunk: [8]}\n", []string{`t.yaml:5:38: in case "moe": moe_chunk 8 sizes the chunks of moe_strategy chunked, not of loop (leave moe_chunk out of this case, or set moe_strategy: chunked)`}},
		// A parameter the op does not read, in the case's params or matrix;
		// a matrix's points say it once.
		{"param the op does not read", head + "  - name: norm\n    op: rms_norm\n    params: {width: 64, experts: 4}\n    matrix: {m: [1, 2]}\n", []string{
			`t.yaml:6:34: in case "norm": experts is not a parameter of rms_norm (it takes tokens, width, threads, variant, witness_gpu)`,
			`t.yaml:7:18: in case "norm": m is not a parameter of rms_norm (it takes tokens, width, threads, variant, witness_gpu)`,
		}},
		{"param one op of a matrix does not read", head + "  - name: k\n    kind: kernel\n    params: {m: 4}\n    matrix: {op: [matmul, rms_norm]}\n", []string{
			`t.yaml:6:17: in case "k": m is not a parameter of rms_norm (it takes tokens, width, threads, variant, witness_gpu)`,
		}},
		// YAML reads 0016 as octal 14 (and 0008 as no integer): refused
		// wherever an integer is, in a list, a range and a setting.
		{"leading zero", head + "  - name: a\n    params: {gen_len: 0016}\n    matrix: {prompt_len: [0008, 16], batch: 01-4}\n", []string{
			`t.yaml:5:23: gen_len 0016: a leading zero is not allowed (write 16)`,
			`t.yaml:6:27: prompt_len 0008: a leading zero is not allowed (write 8)`,
			`t.yaml:6:45: matrix batch: range "01-4": 01: a leading zero is not allowed (write 1) (a range is first-last, first-last+step or first-last*factor, e.g. 1-16*2)`,
		}},
		{"leading zero setting", "name: s\nrepetitions: 010\n" + head[8:] + "  - name: a\n", []string{
			`t.yaml:2:14: repetitions 010: a leading zero is not allowed (write 10)`,
		}},
		// max_seqs below the batch runs the batch a part at a time under
		// its label; above the requests it is never reached.
		{"max_seqs below batch", head + "  - name: c\n    params: {batch: 4, max_seqs: 1}\n", []string{
			`t.yaml:5:34: in case "c": max_seqs 1 is fewer than batch 4, so the batch never runs side by side (raise max_seqs to the batch, or lower batch)`,
		}},
		{"max_seqs in a matrix below batch", head + "  - name: c\n    params: {batch: 4}\n    matrix: {max_seqs: [4, 2]}\n", []string{
			`t.yaml:6:28: in case "c": max_seqs 2 is fewer than batch 4, so the batch never runs side by side (raise max_seqs to the batch, or lower batch)`,
		}},
		{"max_seqs past requests", head + "  - name: c\n    params: {batch: 4, max_seqs: 8}\n  - name: d\n    params: {batch: 2, requests: 6, max_seqs: 8}\n", []string{
			`t.yaml:5:34: in case "c": max_seqs 8 is more than the 4 requests (requests defaults to the batch), so it is never reached (lower max_seqs, or raise requests)`,
			`t.yaml:7:47: in case "d": max_seqs 8 is more than requests 6, so it is never reached (lower max_seqs, or raise requests)`,
		}},
		{"max_seqs past the default batch's one request", head + "  - name: c\n    params: {max_seqs: 4}\n", []string{
			`t.yaml:5:24: in case "c": max_seqs 4 is more than the 1 request (requests defaults to the batch), so it is never reached (lower max_seqs, or raise requests)`,
		}},
		// The prefill budget caps decode tokens too: below the sequences
		// run at once, only a part of the batch decodes in a step.
		{"prefill_budget below batch", head + "  - name: c\n    params: {batch: 4, prefill_budget: 3}\n", []string{
			`t.yaml:5:40: in case "c": prefill_budget 3 is fewer than batch 4, so a step decodes at most 3 of its sequences and the batch never runs side by side (raise prefill_budget to batch, or lower batch)`,
		}},
		{"prefill_budget below max_seqs", head + "  - name: c\n    params: {batch: 2, requests: 8, max_seqs: 6}\n    matrix: {prefill_budget: [6, 5]}\n", []string{
			`t.yaml:6:34: in case "c": prefill_budget 5 is fewer than max_seqs 6, so a step decodes at most 5 of its sequences and the batch never runs side by side (raise prefill_budget to max_seqs, or lower max_seqs)`,
		}},
		// Both names of one parameter in one case: which was meant cannot
		// be told.
		{"a parameter and its alias", head + "  - name: mm\n    op: matmul\n    params: {m: 4, tokens: 8}\n", []string{
			`t.yaml:6:28: in case "mm": tokens and m (line 6) are one parameter of matmul, tokens its other name (give one of them)`,
		}},
		{"an alias in the matrix", head + "  - name: norm\n    op: rms_norm\n    params: {width: 256}\n    matrix: {hidden: [64, 128]}\n", []string{
			`t.yaml:7:23: in case "norm": hidden and width (line 6) are one parameter of rms_norm, hidden its other name (give one of them)`,
		}},
		{"top_k over experts", head + "  - name: moe\n    op: moe\n    matrix: {experts: [4, 8], top_k: [8]}\n", []string{`t.yaml:6:39: in case "moe": top_k 8 is more than experts 4`}},

		{"too many cases", head + "  - name: big\n    op: matmul\n    matrix: {m: [" + seq(100) + "], n: [" + seq(101) + "]}\n", []string{
			`t.yaml:3:1: the suite expands to more than 10000 cases, over the limit of 10000 (largest group "big" at line 4 has more than 10000 cases, its matrix m (100 values) × n (101 values); shorten its matrix lists)`,
		}},
		{"too many cases over groups", head + "  - name: a\n    matrix: {batch: [" + seq(100) + "], gen_len: [" + seq(60) + "]}\n  - name: b\n    matrix: {batch: [" + seq(100) + "], gen_len: [" + seq(50) + "]}\n", []string{
			`t.yaml:3:1: the suite expands to 11000 cases, over the limit of 10000 (largest group "a" at line 4 has 6000 cases, its matrix batch (100 values) × gen_len (60 values); shorten its matrix lists)`,
		}},
		// Too many groups of a case each: no matrix to shorten.
		{"too many groups", head + groups(10001), []string{
			`t.yaml:3:1: the suite expands to 10001 cases, over the limit of 10000 (its 10001 groups are a case each; split it into suites of at most 10000 cases)`,
		}},
		{"too many groups beside a matrix of one value", head + groups(10000) + "  - name: last\n    matrix: {batch: [1]}\n", []string{
			`t.yaml:3:1: the suite expands to 10001 cases, over the limit of 10000 (its 10001 groups are a case each; split it into suites of at most 10000 cases)`,
		}},
		{"too many groups beside a matrix", head + groups(9999) + "  - name: last\n    matrix: {batch: [1, 2]}\n", []string{
			`t.yaml:3:1: the suite expands to 10001 cases, over the limit of 10000 (largest group "last" at line 10003 has 2 cases, its matrix batch (2 values); shorten its matrix lists)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error; %d cases\n--- input:\n%s", len(s.Cases), tt.src)
			}
			if s != nil {
				t.Errorf("suite returned with an error")
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q\n--- input:\n%s", got, tt.want, tt.src)
			}
		})
	}
}

// modelGated is the gated metrics model cases record, goodput only with
// an slo.
// prefillGated are the gated metrics of model cases that generate one
// token: no decode step's.
var prefillGated = func() string {
	var out []string
	for _, m := range metrics.GatedOf(metrics.ModelCase) {
		if m != metrics.SLOMetric && !slices.Contains(metrics.DecodeStep, m) {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}()

func modelGated(slo bool) string {
	var out []string
	for _, m := range metrics.GatedOf(metrics.ModelCase) {
		if m != metrics.SLOMetric || slo {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

// Thresholds on what the suite's cases record are kept: goodput where a
// case sets an slo, model and kernel metrics in a suite of both.
func TestThresholdsOnRecordedMetrics(t *testing.T) {
	for _, src := range []string{
		head + "  - name: c\n    params: {slo: \"ttft:500\"}\n  - name: d\nthresholds: {goodput_per_s: 5%, decode_tok_s: 5%}\n",
		head + "  - name: c\n  - name: k\n    op: rms_norm\n    params: {tokens: 1, width: 8}\nthresholds: {us_per_call: 5%, ttft_ms: 5%}\n",
		// One case that decodes records the decode metrics, as does one
		// whose range draws two tokens.
		head + "  - name: c\n    params: {gen_len: 1}\n  - name: d\n    params: {gen_len: 2}\nthresholds: {decode_tok_s: 5%}\n",
		head + "  - name: c\n    params: {gen_len: 1, range_ratio: 0.5}\nthresholds: {tpot_ms: 5%}\n",
	} {
		if _, err := Parse("t.yaml", []byte(src)); err != nil {
			t.Errorf("%v\n--- input:\n%s", err, src)
		}
	}
}

// seq is "1, 2, ..., n" for matrix lists.
// groups is n case groups g0, g1, ..., each of one case, one a line.
func groups(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: g%d, params: {gen_len: %d}}\n", i, i+1)
	}
	return b.String()
}

func seq(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(s, ", ")
}

func TestManyErrorsTogether(t *testing.T) {
	src := `name: s
backend: metl
model: {preset: p}
repetitions: 0
cases:
  - name: a
    matrix:
      bach: [1, 2]
  - name: a
    op: rope
    params: {head_size: 47}
`
	_, err := Parse("suites/x.yaml", []byte(src))
	want := []string{
		`suites/x.yaml:2:10: unknown backend "metl" (did you mean "metal"?)`,
		`suites/x.yaml:4:14: repetitions must be >= 1, got 0`,
		`suites/x.yaml:8:7: unknown key "bach" in matrix (did you mean "batch"?)`,
		`suites/x.yaml:9:11: duplicate case name "a" (first at line 6)`,
		`suites/x.yaml:11:25: head_size must be a multiple of 2, got 47`,
	}
	if err == nil {
		t.Fatal("no error")
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got %q\nwant %q", got, want)
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) != len(want) {
		t.Fatalf("not an ErrorList of %d: %T", len(want), err)
	}
	var one *Error
	if !errors.As(err, &one) || one.Pos != (Pos{"suites/x.yaml", 2, 10}) || one.Hint != `did you mean "metal"?` {
		t.Errorf("errors.As *Error: %+v", one)
	}
}

func TestErrorListCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; i < 150; i++ {
		b.WriteString("  - name: c" + strconv.Itoa(i) + "\n    params: {batch: 0}\n")
	}
	_, err := Parse("t.yaml", []byte(b.String()))
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxListed+1 || lines[maxListed] != "... and 50 more errors" {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestErrorAt(t *testing.T) {
	s := mustParse(t, head+"  - name: c\n    params: {batch: 64}\n")
	v := s.Cases[0].Params["batch"]
	err := s.ErrorAt(v.Pos, "batch %d needs %d KV blocks, the device has %d", 64, 900, 512)
	if got, want := err.Error(), "t.yaml:5:21: batch 64 needs 900 KV blocks, the device has 512"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := s.ErrorAt(Pos{Line: 2, Col: 3}, "x").Error(); got != "t.yaml:2:3: x" {
		t.Errorf("file not filled in: %q", got)
	}
}

func TestDidYouMean(t *testing.T) {
	cands := paramNames(KindModel)
	for in, want := range map[string]string{
		"bach":        "batch",
		"Batch":       "batch",
		"promt_len":   "prompt_len",
		"gen-len":     "gen_len",
		"max_seq":     "max_seqs",
		"x":           "",
		"zzzzzzzzzzz": "",
	} {
		if got := closest(in, cands); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestList(t *testing.T) {
	infos, err := List("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range infos {
		line := filepath.Base(in.Path) + " " + in.Name + " " + strconv.Itoa(in.Cases)
		if in.Err != nil {
			line += " ERR " + in.Err.Error()
		}
		got = append(got, line)
	}
	want := []string{
		`broken.yaml broken-suite 0 ERR testdata/broken.yaml:7:7: unknown key "bach" in matrix (did you mean "batch"?)`,
		`example.yaml qwen3-moe 29 `,
		`kernels.yml kernels 4 `,
	}
	for i := range want {
		want[i] = strings.TrimSuffix(want[i], " ")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List:\n got %q\nwant %q", got, want)
	}
	if infos[0].Description != "a suite with a typo, for List" {
		t.Errorf("broken suite description %q", infos[0].Description)
	}
	if _, err := List("testdata/nope"); err == nil {
		t.Errorf("List of a missing dir: no error")
	}
}

// A suite file that is a link to nothing is said to be one, in a folder's
// list as where it is named alone (TestShippedSuitesParse).
func TestListDanglingLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join("moved", "s.yaml"), filepath.Join(dir, "s.yaml")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	infos, err := List(dir)
	if err != nil || len(infos) != 1 {
		t.Fatalf("List: %v, %v", infos, err)
	}
	want := filepath.Join(dir, "s.yaml") + ": a link to " + filepath.Join("moved", "s.yaml") + ", which is not there"
	if got := fmt.Sprint(infos[0].Err); got != want {
		t.Errorf("List: %s, want %s", got, want)
	}
}

// Aliases let a small file reference the same big node many times; the
// work budget must stop the parse and say why. The budget counts nodes, so
// the bound holds whatever the machine's speed.
// mergeBomb is a suite whose map x-16 merges x-15 ten times over, and so
// on down to x-0: a few lines, and 10^16 paths to x-0 through the merges.
// where is the case's key that takes it (params or matrix).
func mergeBomb(where string) string {
	var b strings.Builder
	b.WriteString("name: s\nmodel: {preset: p}\nx-0: &l0 {batch: [1]}\n")
	for i := 1; i <= 16; i++ {
		fmt.Fprintf(&b, "x-%d: &l%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	fmt.Fprintf(&b, "cases:\n  - name: c\n    %s: *l16\n", where)
	return b.String()
}

// mergeList is a suite of cases cases, each taking a map whose merge key
// names another n times over (<<: [*a, *a, ...]).
func mergeList(n, cases int) string {
	var b strings.Builder
	b.WriteString("name: s\nmodel: {preset: p}\nx-a: &a {batch: 1}\nx-m: &m {<<: [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*a, ", n), ", "))
	b.WriteString("]}\ncases:\n")
	for i := range cases {
		fmt.Fprintf(&b, "  - {name: c%d, params: *m}\n", i)
	}
	return b.String()
}

// parseWithin parses src as t.yaml and fails the test if Parse has not
// returned within d: the guard of the suites that once hung it.
func parseWithin(t *testing.T, src string, d time.Duration, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := Parse("t.yaml", []byte(src))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: Parse did not return in %v", what, d)
		return nil
	}
}

// Maps merged many times over, nested, are read once each, wherever the
// case takes them: the parser's look for an op (which makes a case without
// kind: a kernel case) walked every path through the merges, and a 1 KB
// file hung validate and run. A merge's list of maps is work, counted
// wherever the merge is read: a list of 200000 aliases taken by 10000 cases
// (1 MB) ran for minutes.
func TestMergeBlowup(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"nested merges in params", mergeBomb("params"), `t.yaml:3:18: batch must be a single value, got a list (put lists under matrix:)`},
		{"nested merges in a matrix", mergeBomb("matrix"), ""},
		{"a long merge list in every case", mergeList(200000, 10000), `t.yaml:4:14: suite is too complex (too many aliases or merge keys)`},
		{"a short merge list in every case", mergeList(3, 1000), ""},
	} {
		err := parseWithin(t, tc.src, 10*time.Second, tc.name)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestAliasBlowup(t *testing.T) {
	src := "name: s\nmodel: {preset: p}\nx-case: &c {name: c, matrix: {batch: [" + seq(2000) + "]}}\ncases: [" +
		strings.Repeat("*c, ", 20000) + "*c]\n"
	_, err := Parse("t.yaml", []byte(src))
	want := []string{
		`t.yaml:3:38: suite is too complex (too many aliases or merge keys)`,
		`t.yaml:4:13: duplicate case name "c" (first at line 4) (an alias repeats its case whole: give the copy a name of its own, e.g. {<<: *c, name: c-2})`,
	}
	if err == nil || !reflect.DeepEqual(strings.Split(err.Error(), "\n"), want) {
		t.Errorf("err = %v", err)
	}
}

// A file too large to read without aliases is said to be large, not
// complex: it holds no alias or merge key to look for (TestAliasBlowup
// has one that does).
func TestLargeSuiteWithoutAliases(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a matrix list written out", "name: s\nmodel: {preset: p}\ncases:\n  - name: c\n    matrix: {prompt_len: [" + seq(1<<20+1) + "]}\n",
			`t.yaml:5:26: suite is too large: more than 1048576 map entries and list items (a suite holds at most 10000 cases: shorten its lists)`},
		{"cases written out", "name: s\nmodel: {preset: p}\ncases: [" + strings.Repeat("{}, ", 1<<20) + "{}]\n",
			`t.yaml:3:8: suite is too large: more than 1048576 map entries and list items (a suite holds at most 10000 cases: shorten its lists)`},
	} {
		err := parseWithin(t, tc.src, 60*time.Second, tc.name)
		if err == nil || !slices.Contains(strings.Split(err.Error(), "\n"), tc.want) {
			t.Errorf("%s: err = %.600v, want a line %s", tc.name, err, tc.want)
		}
	}
}

// A small file whose range items, written out or through an alias, would
// make millions of values is refused before it makes them.
func TestRangeItemsBounded(t *testing.T) {
	many := func(item string, n int) string { return strings.TrimSuffix(strings.Repeat(item+", ", n), ", ") }
	for _, tt := range []struct{ name, src, want string }{
		{"an alias of a range", "name: s\nmodel: {preset: p}\nx-r: &r \"1-1000\"\ncases:\n  - name: c\n    matrix: {batch: [" + many("*r", 2000) + "]}\n",
			`t.yaml:3:6: matrix batch: range "1-1000" takes the list past 1000 values`},
		{"ranges written out", head + "  - name: c\n    matrix: {batch: [" + many("1-1000", 2000) + "]}\n",
			`t.yaml:5:30: matrix batch: range "1-1000" takes the list past 1000 values`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Parse("t.yaml", []byte(tt.src))
			runtime.ReadMemStats(&after)
			if err == nil || !slices.Contains(strings.Split(err.Error(), "\n"), tt.want) {
				t.Errorf("err = %.600v, want a line %s", err, tt.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
				t.Errorf("%d MiB allocated", got>>20)
			}
		})
	}
}

// A flag's value is held to the suite's rule for its parameter.
func TestCheckValue(t *testing.T) {
	for _, c := range []struct{ name, value, want string }{
		{"witness_gpu", "M2 Pro", ""},
		{"witness_gpu", "M3 Ulta", `unknown Apple GPU "M3 Ulta" (did you mean "M3 Ultra"?)`},
		{"batch", "4", ""},
		{"batch", "0", "batch must be >= 1, got 0"},
		{"batch", "[1, 2]", "batch must be a single value, got a list (put lists under matrix:)"},
		{"bacth", "4", `unknown parameter "bacth"`},
		{"variant", "\"a\\nb\"", `variant "a\nb" holds the control character U+000A (a value is one line of text)`},
		{"variant", "caf\xe9", `variant "caf\xe9" is not UTF-8 text`},
	} {
		err := CheckValue(c.name, c.value)
		if got := fmt.Sprint(err); c.want == "" && err != nil || c.want != "" && got != c.want {
			t.Errorf("CheckValue(%s, %s) = %v, want %q", c.name, c.value, err, c.want)
		}
	}
}

const hintGamma = `(want "all", "stagger:N" (N >= 1), "poisson:R" (R requests a second, 0.001 to 1000000) or "gamma:R:B" (burstiness B, 0.001 to 1000))`

// A suite param is a default for the cases that read it: one no case of
// the suite reads is refused where it is written, naming what reads it;
// one some case reads, through an alias or shadowed by the cases' own, is
// kept.
func TestSuiteParamsRead(t *testing.T) {
	const kernelOnly = "name: s\nparams: {%s}\ncases:\n  - name: k\n    op: %s\n"
	const modelAndNorm = "name: s\nmodel: {preset: p}\nparams: {%s}\ncases:\n  - name: c\n  - name: k\n    op: rms_norm\n"
	tests := []struct {
		name, src, want string
	}{
		{"another kind's param", fmt.Sprintf("name: s\nmodel: {preset: p}\nparams:\n  prompt_len: 8\n  width: 512\ncases:\n  - name: c\n"),
			`t.yaml:5:3: no case of this suite reads params width (it is read by kernel cases of rms_norm, add_rms_norm, argmax, embedding, layer_norm, add_layer_norm, position_embedding, qembedding)`},
		{"another op's param", fmt.Sprintf(modelAndNorm, "prompt_len: 8, m: 8"),
			`t.yaml:3:25: no case of this suite reads params m (it is read by kernel cases of matmul, qmatmul)`},
		{"a model param near a kernel one", fmt.Sprintf(kernelOnly, "kv_dtype: f16", "paged_attention_decode"),
			`t.yaml:2:10: no case of this suite reads params kv_dtype (it is read by model cases) (did you mean "dtype"?)`},
		{"op where no case is a kernel case", "name: s\nmodel: {preset: p}\nparams: {op: rope}\ncases:\n  - name: c\n",
			`t.yaml:3:10: no case of this suite reads params op`},
		{"read by one case of two", fmt.Sprintf(modelAndNorm, "prompt_len: 8, width: 64"), ""},
		{"read through an alias", fmt.Sprintf(kernelOnly, "tokens: 4, hidden: 64", "matmul"), ""},
		{"shadowed by every case", "name: s\nmodel: {preset: p}\nparams: {gen_len: 4}\ncases:\n  - name: c\n    params: {gen_len: 8}\n", ""},
		{"the op of a case without its own", "name: s\nparams: {op: rope, tokens: 2}\ncases:\n  - name: k\n    kind: kernel\n", ""},
		{"read by every kernel case", fmt.Sprintf(kernelOnly, "variant: x", "rope"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.src))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// A case without kind: that names its op, whether as op:, in its params or
// swept by its matrix, is a kernel case (docs/suites.md, "cases").
func TestKindFromOp(t *testing.T) {
	for _, tc := range []struct{ name, group string }{
		{"op key", "    op: rms_norm\n    params: {width: 8}\n"},
		{"op in params", "    params: {op: rms_norm, width: 8}\n"},
		{"op in matrix", "    params: {width: 8}\n    matrix: {op: [rms_norm, layer_norm]}\n"},
		{"op in matrix with an alias", "    matrix: {op: [matmul, rms_norm], tokens: [1, 2]}\n"},
		{"op merged into params", "    params: {<<: *p}\n"},
		{"op merged from a list", "    params: {<<: [*w, *p]}\n"},
	} {
		anchors := "x-p: &p {op: rms_norm, width: 8}\nx-w: &w {tokens: 2}\n"
		s, err := Parse("t.yaml", []byte("name: s\n"+anchors+"cases:\n  - name: g\n"+tc.group))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, c := range s.Cases {
			if c.Kind != KindKernel {
				t.Errorf("%s: case %s is a %s case", tc.name, c.Name, c.Kind)
			}
		}
	}
}

// A tag outside YAML 1.2's core schema (!env, !!binary) is refused where it
// stands, in a file, a --set and a flag's value alike: nothing reads it, so
// the value would run as written, not as the tag says. Under the top level's
// x- keys it is the suite's to ignore, unless an alias takes it elsewhere.
// A core tag that makes a value another type than wanted is said with it.
func TestTags(t *testing.T) {
	const why = " (a suite's values are read as YAML 1.2's core types (text, numbers, true/false, null, lists and maps): remove the tag)"
	for _, tt := range []struct {
		name, src string
		want      []string // nil: parses
	}{
		{"a custom tag", head + "  - name: c\n    params: {batch: !x 4}\n", []string{"t.yaml:5:21: YAML tag !x is not read here" + why}},
		{"a custom tag on a map", head + "  - !case {name: c}\n", []string{"t.yaml:4:5: YAML tag !case is not read here" + why}},
		{"a custom tag on a key", head + "  - name: c\n    params: {!k batch: 4}\n", []string{"t.yaml:5:14: YAML tag !k is not read here" + why}},
		{"binary", "name: s\nbackend: !!binary Y3B1\ncases: [{name: c, op: rope}]\n", []string{"t.yaml:2:10: YAML tag !!binary is not read here" + why}},
		{"through an alias from x-", "name: s\nx-b: &b !env X\ncases: [{name: c, op: rope, params: {variant: *b}}]\n", []string{"t.yaml:2:6: YAML tag !env is not read here" + why}},
		{"under x- alone", "name: s\nx-a: !ignored {a: !x 1}\ncases: [{name: c, op: rope}]\n", nil},
		{"core tags", "name: !!str s\ncases: !!seq [{name: c, op: rope, params: {variant: !!str 5, tokens: !!int 2}}]\n", nil},
		{"a float tag on an integer setting", "name: s\nrepetitions: !!float 3\ncases: [{name: c, op: rope}]\n", []string{"t.yaml:2:14: repetitions must be an integer, got 3 (tagged !!float)"}},
		{"a text tag on an integer setting", "name: s\nwarmup: !!str 1\ncases: [{name: c, op: rope}]\n", []string{`t.yaml:2:9: warmup must be an integer, got string "1" (tagged !!str)`}},
		{"a float tag on an integer parameter", head + "  - name: c\n    params: {batch: !!float 4}\n", []string{"t.yaml:5:21: batch must be an integer, got 4 (tagged !!float)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.src))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q\n--- input:\n%s", got, tt.want, tt.src)
			}
		})
	}
	for _, tt := range []struct{ name, value, want string }{
		{"variant", "!x a", "--set variant=!x a: YAML tag !x is not read here" + why},
		{"batch", "[1, !x 2]", "--set batch=[1, !x 2]: YAML tag !x is not read here" + why},
		{"repetitions", "!!binary Mw==", "--set repetitions=!!binary Mw==: YAML tag !!binary is not read here" + why},
	} {
		s := mustParse(t, "name: s\ncases: [{name: c, op: rope}]\n")
		if err := s.Override(map[string]string{tt.name: tt.value}); fmt.Sprint(err) != tt.want {
			t.Errorf("--set %s=%s: %v, want %q", tt.name, tt.value, err, tt.want)
		}
	}
	if err := CheckValue(ParamWitnessGPU, "!gpu M2"); fmt.Sprint(err) != "YAML tag !gpu is not read here"+why {
		t.Errorf("CheckValue of a tagged value: %v", err)
	}
}

// Whether a case records the decode metrics (gen_len 1 at a range_ratio
// may draw outputs of 2) is looked up only for a threshold, and stops at the
// first request that decodes: every case of a million requests drew them
// all when a suite was parsed, 1000 such cases for tens of seconds, in
// every command that reads a suite.
func TestThresholdsDrawFew(t *testing.T) {
	const cases = "cases:\n  - name: c\n    params: {gen_len: 1, range_ratio: 0.9, requests: 1048576}\n    matrix: {prompt_len: 1-100, batch: 1-10}\n"
	for _, tc := range []struct{ name, src, want string }{
		{"no thresholds", "name: s\nmodel: {preset: p}\n" + cases, ""},
		{"a decode threshold", "name: s\nmodel: {preset: p}\nthresholds: {decode_tok_s: 5%}\n" + cases, ""},
	} {
		err := parseWithin(t, tc.src, 5*time.Second, tc.name+", 1000 cases of a million requests")
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A value written as a comma list of key:value items (a sampling, an slo)
// reads an item with spaces around it, or around its colon, as the item,
// as a range string's items are read (internal/listarg), and keys it one
// way: "temperature: 0.5" was refused where "top_k:3, seed:1" was read.
func TestCommaListItemSpaces(t *testing.T) {
	tests := []struct {
		name, params, key string
	}{
		{"slo", `{slo: "ttft:500, tpot:50"}`, "model/c/slo=ttft:500,tpot:50"},
		{"slo spaced both sides", `{slo: " e2el:900 ,ttft:500 "}`, "model/c/slo=ttft:500,e2el:900"},
		{"sampling", `{sampling: "temperature:0.5, top_k:3"}`, "model/c/sampling=temperature:0.5,top_k:3"},
		// spaces around the colon inside an item, as around the comma
		{"sampling, a space after the colon", `{sampling: "temperature: 0.5,top_k: 5"}`, "model/c/sampling=temperature:0.5,top_k:5"},
		{"sampling, spaces both sides of the colon", `{sampling: "temperature : 0.5 , seed :7"}`, "model/c/sampling=temperature:0.5,seed:7"},
		{"slo, a space after the colon", `{slo: "tpot: 50, ttft: 500"}`, "model/c/slo=ttft:500,tpot:50"},
		{"slo, a space before the colon", `{slo: "e2el :900"}`, "model/c/slo=e2el:900"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, head+"  - name: c\n    params: "+tt.params+"\n")
			if s.Cases[0].Key != tt.key {
				t.Errorf("key %q, want %q", s.Cases[0].Key, tt.key)
			}
		})
	}
}

// A suite is YAML 1.2, so a file that says so (%YAML 1.2, as a YAML 1.2
// emitter writes it) is read, as is %YAML 1.1, which yaml.v3 alone takes;
// another version is refused at its directive, naming it. Positions past
// the directive are the file's own.
func TestYAMLDirective(t *testing.T) {
	const body = "---\nname: s\ncases:\n  - {name: c, op: rms_norm, params: {width: 8}}\n"
	tests := []struct {
		name, src, err string
	}{
		{"1.2", "%YAML 1.2\n" + body, ""},
		{"1.2 after a comment, with its own", "# a suite\n%YAML 1.2   # the spec's\n" + body, ""},
		{"1.2 with a byte-order mark and CRLF", "\uFEFF%YAML 1.2\r\n" + strings.ReplaceAll(body, "\n", "\r\n"), ""},
		{"1.2 beside a tag directive", "%TAG !e! tag:example.com,2000:\n%YAML 1.2\n" + body, ""},
		{"1.1", "%YAML 1.1\n" + body, ""},
		{"1.2, an error further on", "%YAML 1.2\n---\nname: s\ncases:\n  - {name: c, op: rms_norm, params: {wdth: 8}}\n",
			`t.yaml:5:38: unknown key "wdth" in params (did you mean "width"?)`},
		{"1.3", "%YAML 1.3\n" + body, `t.yaml:1:7: %YAML 1.3: a suite is read as YAML 1.2 (write %YAML 1.2, or leave the directive out)`},
		{"no version", "%YAML\n" + body, `t.yaml:1:1: YAML: did not find expected version number`},
		{"a directive of another name", "%YAMLX 1.2\n" + body, `t.yaml:1:1: YAML: found unknown directive name`},
		{"2.0", "# x\n%YAML 2.0\n" + body, `t.yaml:2:7: %YAML 2.0: a suite is read as YAML 1.2 (write %YAML 1.2, or leave the directive out)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.src))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.err == "" && (len(s.Cases) != 1 || s.Cases[0].Key != "kernel/c/op=rms_norm/width=8"):
				t.Errorf("cases %+v", s.Cases)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Errorf("error %v, want %s", err, tt.err)
			}
		})
	}
}

// A model path is read as a shell would read it on a command line: a
// leading ~ or ~/ is the home folder (internal/homepath), as for --db=~/x,
// since a suite file reaches mtlbench through no shell.
func TestModelPathHome(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	tests := []struct {
		name, path, want, err string
	}{
		{"under home", "~/models/tiny", "/home/u/models/tiny", ""},
		{"home itself, quoted (~ alone is YAML's null)", `"~"`, "/home/u", ""},
		{"quoted", `"~/m x"`, "/home/u/m x", ""},
		{"a ~ further on", "./~/m", "./~/m", ""},
		{"absolute", "/m/~", "/m/~", ""},
		{"another user's home", "~bob/m", "", `t.yaml:2:15: model path "~bob/m": only ~ and ~/ are read as the home folder; write the full path (or ./~bob/m for a file of that name here)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte("name: s\nmodel: {path: "+tt.path+"}\ncases:\n  - name: c\n"))
			switch {
			case tt.err != "":
				if err == nil || err.Error() != tt.err {
					t.Errorf("error %v, want %s", err, tt.err)
				}
			case err != nil:
				t.Fatalf("Parse: %v", err)
			case s.Model.Path != tt.want:
				t.Errorf("path %q, want %q", s.Model.Path, tt.want)
			}
		})
	}
}
