package suites

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Model cases decode into ModelParams with the defaults the runner used to
// apply itself.
func TestDecodeModel(t *testing.T) {
	def := ModelParams{Batch: 1, PromptLen: 128, GenLen: 32, Requests: 1, MaxSeqs: 1, BlockSize: 16, Fusion: true, KVDType: "auto"}
	with := func(f func(*ModelParams)) ModelParams { m := def; f(&m); return m }
	tests := []struct {
		name   string
		params string
		want   ModelParams
	}{
		{"defaults", "{}", def},
		{"batch sets requests and max_seqs", "{batch: 8}", with(func(m *ModelParams) { m.Batch, m.Requests, m.MaxSeqs = 8, 8, 8 })},
		{"requests and max_seqs given", "{batch: 4, requests: 20, max_seqs: 8}", with(func(m *ModelParams) { m.Batch, m.Requests, m.MaxSeqs = 4, 20, 8 })},
		{"lengths", "{prompt_len: 512, gen_len: 64, layers: 2}", with(func(m *ModelParams) { m.PromptLen, m.GenLen, m.Layers = 512, 64, 2 })},
		{"cache", "{kv_blocks: 100, prefill_budget: 256, block_size: 32}", with(func(m *ModelParams) { m.KVBlocks, m.PrefillBudget, m.BlockSize = 100, 256, 32 })},
		{"arrival all", "{arrival: all}", def},
		{"arrival stagger", `{arrival: "stagger:3"}`, with(func(m *ModelParams) { m.Stagger = 3 })},
		{"arrival poisson", `{arrival: "poisson:2.5"}`, with(func(m *ModelParams) { m.Rate, m.Burstiness = 2.5, 1 })},
		{"arrival gamma", `{arrival: "gamma:2.5:0.25"}`, with(func(m *ModelParams) { m.Rate, m.Burstiness = 2.5, 0.25 })},
		{"range ratio", `{range_ratio: 0.25}`, with(func(m *ModelParams) { m.RangeRatio = 0.25 })},
		{"slo", `{slo: "ttft:500,tpot:40.5"}`, with(func(m *ModelParams) { m.SLO = map[string]float64{"ttft": 500, "tpot": 40.5} })},
		{"greedy", "{sampling: greedy}", def},
		{"sampling", `{sampling: "temperature:0.7,top_k:40,top_p:0.9"}`, with(func(m *ModelParams) { m.Sampling = Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9} })},
		{"sampling seed", `{sampling: "seed:7,temperature:1"}`, with(func(m *ModelParams) { m.Sampling = Sampling{Temperature: 1, Seed: 7} })},
		{"temperature 0", `{sampling: "temperature:0"}`, def},
		{"steps", "{steps: synchronous}", with(func(m *ModelParams) { m.Synchronous = true })},
		{"steps overlapped", "{steps: overlapped}", def},
		{"moe strategy alone", "{moe_strategy: loop}", with(func(m *ModelParams) { m.MoEStrategy, m.MoEChunk = ops.MoELoop, 64 })},
		{"moe chunk alone", "{moe_chunk: 16}", with(func(m *ModelParams) { m.MoEStrategy, m.MoEChunk = ops.MoEChunked, 16 })},
		{"moe both", "{moe_strategy: chunked, moe_chunk: 8}", with(func(m *ModelParams) { m.MoEStrategy, m.MoEChunk = ops.MoEChunked, 8 })},
		{"fusion off", "{fusion: off}", with(func(m *ModelParams) { m.Fusion = false })},
		{"fusion on", "{fusion: on}", def},
		{"kv dtype", "{kv_dtype: f16}", with(func(m *ModelParams) { m.KVDType = "f16" })},
		{"threads and variant", "{threads: 4, variant: fast}", with(func(m *ModelParams) { m.Threads, m.Variant = 4, "fast" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, head+"  - name: c\n    params: "+tt.params+"\n")
			if got := s.Cases[0].Model; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// fusion is sweepable like any parameter, and part of each case's key.
func TestFusionMatrix(t *testing.T) {
	s := mustParse(t, head+"  - name: c\n    matrix: {fusion: [on, off]}\n")
	if got := names(s.Cases); !reflect.DeepEqual(got, []string{"c/fusion=on", "c/fusion=off"}) {
		t.Fatalf("cases %v", got)
	}
	if !s.Cases[0].Model.Fusion || s.Cases[1].Model.Fusion {
		t.Errorf("fusion decoded as %v, %v", s.Cases[0].Model.Fusion, s.Cases[1].Model.Fusion)
	}
}

// Kernel cases decode into ops.Args: integers by declared name, enums typed.
func TestDecodeKernel(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want ops.Args
	}{
		{"matmul", "op: matmul\n    params: {m: 4, n: 64, k: 32, dtype: f16}",
			ops.Args{Op: ops.MatMul, Ints: ops.Shape{ops.M: 4, ops.N: 64, ops.K: 32}, DType: ops.F16}},
		{"moe", "op: moe\n    params: {tokens: 8, experts: 16, top_k: 2, moe_strategy: chunked, moe_chunk: 4}",
			ops.Args{Op: ops.MoE, Ints: ops.Shape{ops.Tokens: 8, ops.Experts: 16, ops.TopK: 2, ops.MoEChunk: 4}, MoEStrategy: ops.MoEChunked}},
		{"attention", "op: paged_attention_decode\n    params: {seqs: 2, context: 100, head_size: 64, block_size: 8, partitions: 0, variant: v2}",
			ops.Args{Op: ops.PagedAttentionDecode, Ints: ops.Shape{ops.Seqs: 2, ops.Context: 100, ops.HeadSize: 64, ops.BlockSize: 8, ops.Partitions: 0}, Variant: "v2"}},
		{"no params", "op: argmax", ops.Args{Op: ops.Argmax, Ints: ops.Shape{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, "name: s\ncases:\n  - name: c\n    kind: kernel\n    "+tt.src+"\n")
			c := s.Cases[0]
			got := c.Kernel
			if c.Op != tt.want.Op || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Bad values give the same file:line:col errors whatever parameter they
// belong to, including the new fusion.
func TestTypedErrors(t *testing.T) {
	tests := []struct {
		name, params, want string
	}{
		{"fusion", "{fusion: maybe}", `t.yaml:5:22: unknown fusion "maybe" (one of on, off)`},
		{"fusion bool", "{fusion: true}", `t.yaml:5:22: fusion must be one of on, off, got true`},
		{"steps null", "{steps: ~}", `t.yaml:5:21: steps must be one of overlapped, synchronous, got nothing (null)`},
		{"moe strategy", "{moe_strategy: sorted}", `t.yaml:5:28: unknown moe_strategy "sorted" (one of loop, chunked, grouped)`},
		{"block size", "{block_size: 12}", `t.yaml:5:26: block_size must be one of 8, 16, 32, got 12`},
		{"batch", "{batch: 0}", `t.yaml:5:21: batch must be >= 1, got 0`},
		{"kernel param on a model case", "{head_size: 64}", `t.yaml:5:14: head_size is a kernel-case parameter, not allowed in a model case`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(head+"  - name: c\n    params: "+tt.params+"\n"))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}

// --set values obey the rules of the file's values, and re-decode cases.
func TestOverride(t *testing.T) {
	for _, tt := range []struct{ name, value, want string }{
		{"batch", "x", "batch must be an integer, got string \"x\""},
		{"batch", "0", "batch must be >= 1, got 0"},
		{"batch", "1e12", "batch must be an integer, got 1e12"},
		{"requests", "0", "requests must be >= 1, got 0"},
		{"block_size", "12", "block_size must be one of 8, 16, 32, got 12"},
		{"steps", "sideways", `unknown steps "sideways" (one of overlapped, synchronous)`},
		{"kv_blocks", "-5", "kv_blocks must be >= 0 (0 = auto), got -5"},
		{"fusion", "maybe", `unknown fusion "maybe" (one of on, off)`},
		{"head_size", "81", "head_size must be a multiple of 2, got 81"},
		{"head_size", "320", "head_size must be from 2 to 256, got 320"},
		{"moe_strategy", "grouped2", `unknown moe_strategy "grouped2" (did you mean "grouped"?)`},
		{"bach", "8", `unknown parameter or setting "bach" (did you mean "batch"?)`},
		{"warmupp", "1", `unknown parameter or setting "warmupp" (did you mean "warmup"?)`},
		{"op", "rope", `op cannot be overridden (it names the case)`},
		// The model section's keys are not case parameters.
		// Each names the bench flag that sets it, where one does: the seed
		// was told to take bench's -m, --dtype or --fit, none of which sets it.
		{"seed", "3", "--set seed=3: seed is a key of the suite's model section, which --set does not change (write it in the suite)"},
		{"fit", "truncate-layers", "--set fit=truncate-layers: fit is a key of the suite's model section, which --set does not change (write it in the suite, or give bench's --fit)"},
		{"model.dtype", "q4", "--set model.dtype=q4: dtype is a key of the suite's model section, which --set does not change (write it in the suite, or give bench's --dtype)"},
		{"preset", "gpt2", "--set preset=gpt2: preset is a key of the suite's model section, which --set does not change (write it in the suite, or give bench's -m)"},
		{"model.weights", "checkpoint", "--set model.weights=checkpoint: weights is a key of the suite's model section, which --set does not change (write it in the suite, or give bench's --synthetic)"},
		{"model.layers", "2", "--set model.layers=2: the model section is not overridden; --set layers=2 sets every model case's layers"},
		{"repetitions", "0", "repetitions must be >= 1, got 0"},
		{"timing", "fast", `unknown timing "fast" (one of throughput, profile)`},
		{"batch", "[1, x]", `batch must be an integer, got string "x"`},
		{"batch", "[]", "an empty list sweeps nothing"},
		{"batch", "010", "batch 010: a leading zero is not allowed (write 10)"},
		{"batch", "[2, 2]", "--set batch=[2, 2]: duplicate value 2 in the list"},
		{"batch", "[16, 0x10]", "--set batch=[16, 0x10]: duplicate value 16 in the list"},
		{"width", "[128,128]", "--set width=[128,128]: duplicate value 128 in the list"},
		{"batch", "{a: 1}", "batch takes a value or a list of values, not a map"},
		// An empty value, whatever it sets, is said as one (a variable
		// left unset?), where each check said it its own way.
		{"batch", "", "--set batch=: an empty value (give one, or leave the --set out; a variable left unset?)"},
		{"kv_dtype", "", "--set kv_dtype=: an empty value (give one, or leave the --set out; a variable left unset?)"},
		{"backend", " ", "--set backend= : an empty value (give one, or leave the --set out; a variable left unset?)"},
		{"repetitions", "", "--set repetitions=: an empty value (give one, or leave the --set out; a variable left unset?)"},
		{"bach", "", `unknown parameter or setting "bach" (did you mean "batch"?)`},
		{"sampling", "temperature:NaN", `bad sampling "temperature:NaN": temperature: must be a number >= 0 (0 is greedy) (want greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]")`},
	} {
		if err := CheckOverride(tt.name, tt.value); err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("%s=%s: got %v, want %s", tt.name, tt.value, err, tt.want)
		}
	}

	s := mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: m\n    params: {batch: 2}\n  - name: k\n    kind: kernel\n    op: moe\n")
	key := s.Cases[0].Key
	if err := s.Override(map[string]string{"batch": "8", "fusion": "off", "moe_chunk": "16"}); err != nil {
		t.Fatal(err)
	}
	m, k := s.Cases[0], s.Cases[1]
	if m.Model.Batch != 8 || m.Model.Fusion || m.Model.MoEChunk != 16 || m.Model.MoEStrategy != ops.MoEChunked || m.Key != key {
		t.Errorf("model case after override: %+v key %s", m.Model, m.Key)
	}
	if v, _ := k.Kernel.Int(ops.MoEChunk); v != 16 || k.Kernel.MoEStrategy != ops.MoEChunked {
		t.Errorf("kernel case after override: %+v", k.Kernel)
	}
	if _, ok := k.Params["batch"]; ok {
		t.Error("batch applied to a kernel case")
	}
	// An overridden value is placed at its --set, not at the case.
	if p := m.PosOf("batch").String(); p != "--set batch=8" {
		t.Errorf("batch's position %q, want the --set", p)
	}
	// An alias sets its op's own parameter: --set tokens on a matmul case
	// runs its m, a sweep labels and keys it m.
	s3 := mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: mm\n    op: matmul\n    params: {m: 1}\n  - name: norm\n    op: rms_norm\n")
	if err := s3.Override(map[string]string{"tokens": "64"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range s3.Cases {
		want := map[string]string{"mm": "m", "norm": "tokens"}[c.Name]
		if v, _ := c.Kernel.Int(ops.Param(want)); v != 64 {
			t.Errorf("case %s after --set tokens=64: %s=%d (%v)", c.Name, want, v, c.Params)
		}
		if _, ok := c.Params["tokens"]; ok && c.Name == "mm" {
			t.Errorf("case mm keeps the alias beside m: %v", c.Params)
		}
	}
	s4 := mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: mm\n    op: matmul\n    matrix: {m: [1, 2]}\n")
	if err := s4.Override(map[string]string{"tokens": "[4, 8]"}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(names(s4.Cases)); got != "[mm/m=4 mm/m=8]" {
		t.Errorf("--set tokens=[4, 8] over a matrix of m: cases %s", got)
	}
	// So is an overridden setting, not at the suite's line.
	s2 := mustParse(t, "name: s\nbackend: cpu\ntiming: throughput\nmodel: {preset: p}\ncases:\n  - name: m\n")
	if err := s2.Override(map[string]string{"backend": "metal-emu"}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"backend": "--set backend=metal-emu", "timing": "t.yaml:3:9"} {
		if p := s2.Positions[key].String(); p != want {
			t.Errorf("%s's position %q, want %q", key, p, want)
		}
	}
	if err := s.Override(map[string]string{"block_size": "12"}); err == nil || !strings.Contains(err.Error(), "block_size must be one of 8, 16, 32, got 12") {
		t.Errorf("bad override: %v", err)
	}
	// An override no case reads (experts on a matmul and a model case) is
	// refused, naming who reads it; one a case's op reads is not.
	s = mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: m\n  - name: k\n    kind: kernel\n    op: matmul\n")
	for set, want := range map[string]string{"experts": "no case of suite s takes experts (it is read by kernel cases of moe, qmoe)",
		"head_size": "it is read by kernel cases of paged_attention_decode", "n": "", "threads": "", "batch": ""} {
		err := s.Override(map[string]string{set: "4"})
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("--set %s=4: %v, want %q", set, err, want)
		}
	}

	// A kernel case whose op does not read an override keeps its params
	// (rms_norm and m), as a suite file could not give it the value.
	s = mustParse(t, "name: s\ncases:\n  - name: mm\n    op: matmul\n  - name: norm\n    op: rms_norm\n")
	if err := s.Override(map[string]string{"m": "[4, 8]"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Cases {
		got = append(got, c.Name)
		if _, ok := c.Params["m"]; ok && c.Op == ops.RMSNorm {
			t.Errorf("%s: m applied to rms_norm", c.Name)
		}
	}
	if strings.Join(got, " ") != "mm/m=4 mm/m=8 norm" {
		t.Errorf("cases after --set m=[4, 8]: %v", got)
	}

	// Settings, YAML values with commas, and lists that sweep.
	s = mustParse(t, "name: s\nmodel: {preset: p}\ncases:\n  - name: m\n    matrix: {batch: [1, 4]}\n  - name: k\n    kind: kernel\n    op: moe\n")
	err := s.Override(map[string]string{"repetitions": "3", "warmup": "0", "timing": "profile",
		"sampling": "temperature:0.7,top_k:40", "batch": "[2, 8, 16]"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Repetitions != 3 || s.Warmup != 0 || s.Timing != "profile" {
		t.Errorf("settings: repetitions %d warmup %d timing %s", s.Repetitions, s.Warmup, s.Timing)
	}
	var names []string
	for _, c := range s.Cases {
		names = append(names, c.Name)
		if c.Kind == KindModel && (c.Model.Sampling.Temperature != 0.7 || c.Model.Sampling.TopK != 40) {
			t.Errorf("%s: sampling %+v", c.Name, c.Model.Sampling)
		}
	}
	if got := strings.Join(names, " "); got != "m/batch=2 m/batch=8 m/batch=16 k" {
		t.Errorf("swept cases: %s", got)
	}
	if s.Cases[0].Key == s.Cases[1].Key || s.Cases[1].Model.Batch != 8 {
		t.Errorf("swept case keys %q %q, batch %d", s.Cases[0].Key, s.Cases[1].Key, s.Cases[1].Model.Batch)
	}
}

// A range ratio's bounds are vLLM's: floor(n·(1-r)) to ceil(n·(1+r)), the
// lower bound no less than the least length, without float dust past an
// exact product.
func TestLenBounds(t *testing.T) {
	for _, tc := range []struct {
		n     int
		r     float64
		least int
		lo    int
		hi    int
	}{
		{128, 0, 1, 128, 128},
		{128, 0.5, 1, 64, 192},
		{100, 0.25, 1, 75, 125},
		{3000, 0.1, 1, 2700, 3300},
		{7, 0.3, 1, 4, 10}, // 4.9 down, 9.1 up
		{1, 0.9, 1, 1, 2},
		{2, 0.99, 1, 1, 4},
		{2, 0.99, 0, 0, 4},
	} {
		lo, hi := LenBounds(tc.n, tc.r, tc.least)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("LenBounds(%d, %g, %d) = %d, %d; want %d, %d", tc.n, tc.r, tc.least, lo, hi, tc.lo, tc.hi)
		}
	}
	if p, g := (ModelParams{PromptLen: 100, GenLen: 10, RangeRatio: 0.5}).MaxLens(); p != 150 || g != 15 {
		t.Errorf("MaxLens = %d, %d; want 150, 15", p, g)
	}
}

// An integer is recorded as its key spells it, however it was written.
func TestRecordedIntegersAreCanonical(t *testing.T) {
	s := mustParse(t, head+"  - name: a\n    params: {prompt_len: 0x10, gen_len: 1_000, batch: +4, variant: \"x y\"}\n")
	c := s.Cases[0]
	rec := c.Recorded()
	for k, want := range map[string]string{"prompt_len": "16", "gen_len": "1000", "batch": "4", "variant": "x y"} {
		if rec[k] != want {
			t.Errorf("recorded %s = %q, want %q", k, rec[k], want)
		}
		if k != "variant" && !strings.Contains(c.Key, k+"="+want) {
			t.Errorf("key %s does not hold %s=%s", c.Key, k, want)
		}
	}
}

// A --set list that sweeps more cases than a suite may hold is refused,
// with the count, before a case of the sweep is made: a long list over a
// large suite would otherwise take every byte of memory first.
func TestOverrideSweepCountedFirst(t *testing.T) {
	big := "name: s\nmodel: {preset: p}\ncases:\n  - name: m\n    matrix: {gen_len: 1-100, prompt_len: 1-99}\n  - name: k\n    op: rms_norm\n    matrix: {tokens: 1-100}\n"
	for _, tt := range []struct {
		src, name, value, want string
	}{
		{big, "batch", "[" + seq(50) + "]", "--set batch=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, ...: the sweep makes 495100 cases, over the limit of 10000 (50 values; shorten the list)"},
		// Cases that differ only in the swept parameter are one set of
		// swept cases, so a sweep over a matrix's own key counts it once.
		{big, "gen_len", "[" + seq(102) + "]", "--set gen_len=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, ...: the sweep makes 10198 cases, over the limit of 10000 (102 values; shorten the list)"},
		{big, "width", "[1, 2]", "--set width=[1, 2]: the sweep makes 10100 cases, over the limit of 10000 (2 values; shorten the list)"},
	} {
		s := mustParse(t, tt.src)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := s.Override(map[string]string{tt.name: tt.value})
		runtime.ReadMemStats(&after)
		if err == nil || err.Error() != tt.want {
			t.Errorf("--set %s: %v, want %s", tt.name, err, tt.want)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
			t.Errorf("--set %s: %d MiB allocated before the refusal", tt.name, got>>20)
		}
		if len(s.Cases) != 10000 {
			t.Errorf("--set %s: the refused sweep changed the suite's cases (%d)", tt.name, len(s.Cases))
		}
	}
	// Up to the limit it sweeps.
	s := mustParse(t, big)
	if err := s.Override(map[string]string{"gen_len": "[" + seq(100) + "]"}); err != nil || len(s.Cases) != 10000 {
		t.Errorf("--set gen_len of 100 values: %v, %d cases", err, len(s.Cases))
	}
}

// A --set that takes away what a threshold compares (gen_len=1: no case
// decodes) is refused as the file would be, naming the --set and the
// threshold's line; one that leaves a case decoding is kept.
func TestOverrideKeepsThresholdsRecorded(t *testing.T) {
	src := head + "  - name: c\n    params: {gen_len: 4}\nthresholds: {ttft_ms: 5%, decode_tok_s: 5%}\n"
	for _, tt := range []struct {
		set  map[string]string
		want string
	}{
		{map[string]string{"gen_len": "1"}, "--set gen_len=1 (the threshold at t.yaml:6:41): threshold decode_tok_s: no case of this suite records it (only a model case that decodes records it: a gen_len of 1 is sampled by the prefill)"},
		{map[string]string{"gen_len": "[1, 2]"}, ""},
		{map[string]string{"gen_len": "1", "range_ratio": "0.5"}, ""},
		{map[string]string{"batch": "2"}, ""},
	} {
		s := mustParse(t, src)
		err := s.Override(tt.set)
		if tt.want == "" {
			if err != nil {
				t.Errorf("--set %v: %v", tt.set, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("--set %v: %v, want it to say %q", tt.set, err, tt.want)
		}
	}
}

// A --set list of an integer parameter takes ranges as a matrix list does
// (1-4, 1-16*2, [1-2, 8]), sweeping their values; a bad range or a value
// twice is refused naming the --set.
func TestOverrideRanges(t *testing.T) {
	const suite = "name: s\nmodel: {preset: p}\ncases:\n  - name: m\n    params: {batch: 2}\n"
	for _, tc := range []struct{ value, want string }{
		{"1-4", "[m/batch=1 m/batch=2 m/batch=3 m/batch=4]"},
		{"1-16*2", "[m/batch=1 m/batch=2 m/batch=4 m/batch=8 m/batch=16]"},
		{"[1-2, 8]", "[m/batch=1 m/batch=2 m/batch=8]"},
		{"1,3", "[m/batch=1 m/batch=3]"},
		{"4-1", "--set batch=4-1: "},
		{"1-4,2", "--set batch=1-4,2: "},
		{"[1-2, 2]", "--set batch=[1-2, 2]: duplicate value 2 in the list"},
		// An alias in the list is its anchor's value; an item that is no
		// single value is said as such.
		{"[&a 1, *a]", "--set batch=[&a 1, *a]: duplicate value 1 in the list"},
		{"[&a 1, 2]", "[m/batch=1 m/batch=2]"},
		{"[1, [2]]", "--set batch=[1, [2]]: batch takes a list of single values, but an item is a list"},
		{"1-999999*2", `--set batch=1-999999*2: batch: range "1-999999*2": batch must be from 1 to 65536, got 131072`},
	} {
		s := mustParse(t, suite)
		err := s.Override(map[string]string{"batch": tc.value})
		if strings.HasPrefix(tc.want, "--set") {
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("--set batch=%s: %v, want %q", tc.value, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("--set batch=%s: %v", tc.value, err)
			continue
		}
		if got := fmt.Sprint(names(s.Cases)); got != tc.want {
			t.Errorf("--set batch=%s: cases %s, want %s", tc.value, got, tc.want)
		}
	}
}

// TestOverrideOwnNameOverAlias checks that --set of an op's parameter
// beside its other name (matmul's m and tokens) gives each case the name its
// op reads as its own, as the suite's params do, rather than whichever
// --set sorts last; an alias none then reads is refused.
func TestOverrideOwnNameOverAlias(t *testing.T) {
	mixed := "name: s\ncases:\n  - name: mm\n    op: matmul\n  - name: norm\n    op: rms_norm\n"
	only := "name: s\ncases:\n  - name: mm\n    op: matmul\n"
	for _, tt := range []struct {
		name, src string
		set       map[string]string
		want      map[string]string // case -> param=value
		err       string
	}{
		{"mixed", mixed, map[string]string{"m": "4", "tokens": "5"}, map[string]string{"mm": "m=4", "norm": "tokens=5"}, ""},
		{"mixed sweep", mixed, map[string]string{"m": "4", "tokens": "[5]"}, map[string]string{"mm": "m=4", "norm/tokens=5": "tokens=5"}, ""},
		{"matmul only", only, map[string]string{"m": "4", "tokens": "5"}, nil,
			"--set tokens=5: no case of suite s reads tokens beside --set m=4: matmul reads tokens as m (give one of the two)"},
		{"hidden and k", only, map[string]string{"hidden": "64", "k": "32"}, nil,
			"--set hidden=64: no case of suite s reads hidden beside --set k=32: matmul reads hidden as k (give one of the two)"},
	} {
		s := mustParse(t, tt.src)
		err := s.Override(tt.set)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: %v, want %s", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := map[string]string{}
		for _, c := range s.Cases {
			for k, v := range c.Params {
				if k == "m" || k == "tokens" {
					got[c.Name] = k + "=" + canon(k, v)
				}
			}
		}
		if !maps.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// With a range_ratio, a decode metric's threshold is judged by the gen
// lengths the run draws (reqlen.Draw, from the model's seed), not by the
// range's bound: gen_len 1 at range_ratio 0.5 allows 2 tokens, but seed 0's
// three requests draw 1, 1, 1, so no case would record decode_tok_s; the
// error names the case whose draws those are.
func TestRangeRatioDrawsDecode(t *testing.T) {
	const refused = "threshold decode_tok_s: no case of this suite records it (only a model case that decodes records it: a gen_len of 1 is sampled by the prefill; " +
		"case c (t.yaml:4:5): range_ratio 0.5 allows gen_len 2, but each of its 3 requests draws 1 from seed 0)"
	suite := func(seed, params string) string {
		return "name: s\nmodel: {preset: p, seed: " + seed + "}\ncases:\n  - name: c\n    params: {" + params + "}\nthresholds: {ttft_ms: 5%, decode_tok_s: 5%}\n"
	}
	for _, tc := range []struct {
		name, src string
		set       map[string]string
		want      string // "" accepted
	}{
		{"draws all 1", suite("0", "gen_len: 1, range_ratio: 0.5, requests: 3"), nil, "t.yaml:6:27: " + refused},
		{"draws a 2", suite("7", "gen_len: 1, range_ratio: 0.5, requests: 3"), nil, ""},
		{"no range", suite("0", "gen_len: 2"), nil, ""},
		{"--set draws all 1", suite("0", "gen_len: 4, requests: 3"), map[string]string{"gen_len": "1", "range_ratio": "0.5"},
			"--set gen_len=1 --set range_ratio=0.5 (the threshold at t.yaml:6:41): " + refused},
		{"--set draws a 2", suite("7", "gen_len: 4, requests: 3"), map[string]string{"gen_len": "1", "range_ratio": "0.5"}, ""},
	} {
		s, err := Parse("t.yaml", []byte(tc.src))
		if err == nil && tc.set != nil {
			err = s.Override(tc.set)
		}
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

// An empty item of a range is said as every list's is, but where it was
// written: in a file by its line, with no word of a variable left unset
// (none is, in a file), and, as no range written wrong, without the
// range syntax's hint; on the command line (--set) as bench's flags say it.
func TestEmptyRangeItemSaysWhere(t *testing.T) {
	head := "name: r\nmodel: {preset: qwen3-moe-mini}\ncases:\n  - name: d\n    kind: model\n    matrix: "
	for _, tc := range []struct{ matrix, set, want string }{
		{`{batch: "1-4,,8"}`, "", `r.yaml:6:21: matrix batch: "1-4,,8": item 2 of 3 is empty (a comma too many?)`},
		{`{batch: [16, "1-4,"]}`, "", `r.yaml:6:26: matrix batch: "1-4,": item 2 of 2 is empty (a comma too many?)`},
		{"{batch: [1]}", "1,,2", `--set batch=1,,2: batch: "1,,2": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
		{"{batch: [1]}", "[1,,2]", `--set batch=[1,,2]: batch: "[1,,2]": item 2 of 3 is empty (a comma too many, or a variable left unset?)`},
	} {
		s, err := Parse("r.yaml", []byte(head+tc.matrix+"\n"))
		if err == nil && tc.set != "" {
			err = s.Override(map[string]string{"batch": tc.set})
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("matrix %s, --set batch=%s: %v\nwant %s", tc.matrix, tc.set, err, tc.want)
		}
	}
}
