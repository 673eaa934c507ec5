package engine

import (
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/bridge/half"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
)

// raggedRequests are 8 prompts of different lengths.
func raggedRequests(vocab int, newTokens int) []Request {
	var reqs []Request
	for i := 0; i < 8; i++ {
		n := 1 + (i*7)%23
		p := make([]int32, n)
		for j := range p {
			p[j] = int32((i*131 + j*17 + 3) % vocab)
		}
		reqs = append(reqs, Request{ID: i, Prompt: p, MaxNewTokens: newTokens, WantLogits: true})
	}
	return reqs
}

func aloneOutputs(t *testing.T, arch string, reqs []Request) []Output {
	t.Helper()
	var outs []Output
	for _, r := range reqs {
		e := openFixture(t, arch, cpu.New(cpu.Options{}), Options{})
		o, err := e.Generate([]Request{r})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o[0])
	}
	return outs
}

func sameOutputs(t *testing.T, what string, got, want []Output, tol float64) {
	t.Helper()
	for i := range want {
		if !slices.Equal(got[i].Tokens, want[i].Tokens) {
			t.Errorf("%s: request %d tokens %v, alone %v", what, want[i].ID, got[i].Tokens, want[i].Tokens)
		}
		if d := kernels.MaxAbsDiff(got[i].Logits, want[i].Logits); d > tol {
			t.Errorf("%s: request %d logits differ by %.3g from alone", what, want[i].ID, d)
		}
	}
}

// A batch of 8 ragged requests, with and without chunked prefill, with a
// small block size and with a cache so small that sequences get preempted,
// gives each request the tokens it gets alone.
func TestBatchingEqualsAlone(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3_moe"} {
		reqs := raggedRequests(512, 12)
		alone := aloneOutputs(t, arch, reqs)
		for _, c := range []struct {
			name string
			opts Options
		}{
			{"one-shot", Options{}},
			{"chunked-prefill-5", Options{TokenBudget: 5}},
			{"block-size-8", Options{BlockSize: 8}},
			{"max-seqs-3", Options{MaxSeqs: 3, BlockSize: 32}},
			{"preempting", Options{BlockSize: 8, KVTokens: 80}},
		} {
			t.Run(arch+"/"+c.name, func(t *testing.T) {
				e := openFixture(t, arch, cpu.New(cpu.Options{}), c.opts)
				got, err := e.Generate(reqs)
				if err != nil {
					t.Fatal(err)
				}
				// Chunked and batched runs sum in other orders: allow f32 noise.
				sameOutputs(t, c.name, got, alone, 2e-5)
			})
		}
	}
}

// The preempting configuration above must really preempt.
func TestSmallCachePreempts(t *testing.T) {
	e := openFixture(t, "llama", cpu.New(cpu.Options{}), Options{BlockSize: 8, KVTokens: 80})
	prompts := 0
	for _, r := range raggedRequests(512, 12) {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
		prompts += len(r.Prompt)
	}
	preempted, decoded, sampled, recomputed, prefilled, computed := 0, 0, 0, 0, 0, 0
	for e.Pending() {
		res, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		preempted += res.Preempted
		decoded, recomputed = decoded+res.DecodeTokens, recomputed+res.RecomputeTokens
		prefilled, computed = prefilled+res.PrefillTokens, computed+res.Tokens
		if res.PrefillTokens+res.DecodeTokens+res.RecomputeTokens != res.Tokens {
			t.Fatalf("step of %d tokens: %d prefill + %d decode + %d recompute", res.Tokens, res.PrefillTokens, res.DecodeTokens, res.RecomputeTokens)
		}
		for _, s := range res.Sampled {
			if !s.First {
				sampled++
			}
		}
		if used := e.KV().NumBlocks() - e.KV().FreeBlocks(); used > e.KV().NumBlocks() {
			t.Fatalf("cache over-committed: %d blocks used", used)
		}
	}
	if preempted == 0 {
		t.Fatal("no sequence was preempted; the test does not exercise preemption")
	}
	// A preempted sequence's generated tokens computed again are no decode
	// tokens: the decode tokens are the tokens sampled after the first.
	if decoded != sampled || recomputed == 0 {
		t.Errorf("%d decode tokens for %d tokens sampled after the first, %d recomputed", decoded, sampled, recomputed)
	}
	// Each prompt token is prefill once, however often its sequence is
	// preempted: the prompt computed again is recompute.
	if prefilled != prompts {
		t.Errorf("%d prefill tokens for prompts of %d tokens (%d computed, %d recomputed)", prefilled, prompts, computed, recomputed)
	}
	if e.KV().FreeBlocks() != e.KV().NumBlocks() {
		t.Fatalf("%d blocks leaked after all requests finished", e.KV().NumBlocks()-e.KV().FreeBlocks())
	}
}

// A request that joins while others decode does not change their tokens.
func TestJoinMidFlight(t *testing.T) {
	reqs := raggedRequests(512, 16)[:3]
	alone := aloneOutputs(t, "qwen3_moe", reqs)
	e := openFixture(t, "qwen3_moe", cpu.New(cpu.Options{}), Options{})
	got := map[int][]int32{}
	if err := e.Add(reqs[0]); err != nil {
		t.Fatal(err)
	}
	for step := 0; e.Pending(); step++ {
		if step == 4 {
			e.Add(reqs[1])
		}
		if step == 9 {
			e.Add(reqs[2])
		}
		res, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Sampled {
			got[s.ReqID] = append(got[s.ReqID], s.Token)
		}
	}
	for i, r := range reqs {
		if !slices.Equal(got[r.ID], alone[i].Tokens) {
			t.Errorf("request %d: %v, alone %v", r.ID, got[r.ID], alone[i].Tokens)
		}
	}
}

// Every MoE dispatch strategy computes the same tokens.
func TestMoEStrategiesAgree(t *testing.T) {
	reqs := raggedRequests(512, 8)
	var base []Output
	for _, p := range []bridge.MoEParams{
		{Strategy: bridge.MoEGrouped}, {Strategy: bridge.MoELoop},
		{Strategy: bridge.MoEChunked, ChunkSize: 1}, {Strategy: bridge.MoEChunked, ChunkSize: 7},
		{Strategy: bridge.MoEChunked, ChunkSize: 256},
	} {
		e := openFixture(t, "qwen3_moe", cpu.New(cpu.Options{}), Options{MoE: p})
		out, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		if base == nil {
			base = out
			continue
		}
		sameOutputs(t, fmt.Sprintf("%s/%d", p.Strategy, p.ChunkSize), out, base, 2e-5)
	}
}

func TestBadRequests(t *testing.T) {
	e := openFixture(t, "llama", cpu.New(cpu.Options{}), Options{KVTokens: 64})
	cases := []struct {
		req  Request
		want string
	}{
		{Request{ID: 1, Prompt: []int32{1, 512}, MaxNewTokens: 1}, "token id 512 at position 1 is outside the vocabulary (0..511)"},
		{Request{ID: 2, Prompt: []int32{-3}, MaxNewTokens: 1}, "token id -3"},
		{Request{ID: 3, Prompt: nil, MaxNewTokens: 1}, "empty prompt"},
		{Request{ID: 4, Prompt: []int32{1}, MaxNewTokens: 0}, "at least 1"},
		{Request{ID: 5, Prompt: make([]int32, 60), MaxNewTokens: 10}, "does not fit in the KV cache"},
		{Request{ID: 6, Prompt: make([]int32, 200), MaxNewTokens: 100}, "exceed the model's 256 positions"},
		// A sum of prompt and new tokens near the largest int would wrap.
		{Request{ID: 7, Prompt: make([]int32, 3), MaxNewTokens: math.MaxInt}, "exceed the model's 256 positions"},
		// Sampling the sampler cannot draw by: a NaN temperature picked the
		// least likely token, the bounds were ignored.
		{Request{ID: 8, Prompt: []int32{1}, MaxNewTokens: 1, Sampling: sample.Params{Temperature: float32(math.NaN())}}, "request 8: sampling temperature NaN"},
		{Request{ID: 9, Prompt: []int32{1}, MaxNewTokens: 1, Sampling: sample.Params{Temperature: float32(math.Inf(1))}}, "sampling temperature +Inf"},
		{Request{ID: 10, Prompt: []int32{1}, MaxNewTokens: 1, Sampling: sample.Params{Temperature: 1, TopK: -3}}, "sampling top_k -3"},
		{Request{ID: 11, Prompt: []int32{1}, MaxNewTokens: 1, Sampling: sample.Params{Temperature: 1, TopP: 2}}, "sampling top_p 2"},
		{Request{ID: 12, Prompt: []int32{1}, MaxNewTokens: 1, Sampling: sample.Params{Temperature: 1, TopP: float32(math.NaN())}}, "sampling top_p NaN"},
	}
	for _, c := range cases {
		err := e.Add(c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("request %d: err = %v, want it to say %q", c.req.ID, err, c.want)
		}
	}
	if e.Pending() {
		t.Error("a refused request was queued")
	}
}

func TestModelTooBigIsRefusedBeforeLoading(t *testing.T) {
	_, err := CheckFitPreset("tinyllama-1.1b", 1<<30)
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a FitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"tinyllama-1.1b needs", "GiB", "1.0 GiB available", "first"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

// gatherCounter counts the backend's row gathers.
type gatherCounter struct {
	bridge.Backend
	n int
}

func (g *gatherCounter) GatherRows(out, x bridge.Tensor) {
	g.n++
	g.Backend.GatherRows(out, x)
}

// A step whose every token samples (decode) hands the LM head the final
// norm's output with no gather; a step with a prompt of several tokens
// gathers their last rows. (The transformers fixtures check the tokens of
// decode steps without the gather.)
func TestDecodeStepsSkipTheGather(t *testing.T) {
	be := &gatherCounter{Backend: cpu.New(cpu.Options{})}
	e := openFixture(t, "llama", be, Options{})
	reqs := raggedRequests(512, 5)[1:3] // prompts of 8 and 15 tokens
	for _, r := range reqs {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	var prefills, decodes int
	out := make([]Output, len(reqs))
	for e.Pending() {
		before := be.n
		r, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Sampled {
			o := &out[s.ReqID-reqs[0].ID]
			o.ID, o.Tokens = s.ReqID, append(o.Tokens, s.Token)
			if s.Logits != nil {
				o.Logits = s.Logits
			}
		}
		switch got := be.n - before; {
		case r.PrefillTokens > 0:
			prefills++
			if got != 1 {
				t.Errorf("a step with %d prompt tokens gathered %d times, want once", r.PrefillTokens, got)
			}
		case got != 0:
			t.Errorf("a decode step of %d sequences gathered %d times", r.Seqs, got)
		default:
			decodes++
		}
	}
	if prefills == 0 || decodes == 0 {
		t.Fatalf("%d prefill and %d decode steps: the test needs both", prefills, decodes)
	}
	sameOutputs(t, "batched", out, aloneOutputs(t, "llama", reqs), 1e-5)
}

// f32Cache is a backend that keeps its KV cache in f32 alone (no
// bridge.KVCacheDTypes): the interface hides the CPU backend's KVDTypes.
type f32Cache struct{ bridge.Backend }

// modelCache is the CPU backend keeping a cache of no chosen dtype in the
// model's, as Metal and CUDA do.
type modelCache struct{ *cpu.Backend }

func (modelCache) ExactKVByDefault() bool { return false }

func TestKVDType(t *testing.T) {
	plain, exact, half := f32Cache{cpu.New(cpu.Options{})}, cpu.New(cpu.Options{}), modelCache{cpu.New(cpu.Options{})}
	tests := []struct {
		be    bridge.Backend
		model bridge.DType
		req   string
		want  bridge.DType
		err   string
	}{
		{plain, bridge.BF16, "", bridge.F32, ""},
		{plain, bridge.BF16, "auto", bridge.F32, ""},
		{plain, bridge.BF16, "f32", bridge.F32, ""},
		{plain, bridge.BF16, "bf16", 0, "kv_dtype bf16: the cpu backend keeps its KV cache in f32"},
		{exact, bridge.BF16, "auto", bridge.F32, ""},
		{exact, bridge.F16, "", bridge.F32, ""},
		{exact, bridge.BF16, "bf16", bridge.BF16, ""},
		{exact, bridge.F32, "f16", bridge.F16, ""},
		{half, bridge.BF16, "auto", bridge.BF16, ""},
		{half, bridge.F16, "", bridge.F16, ""},
		{half, bridge.F32, "auto", bridge.F32, ""},
		{half, bridge.BF16, "f32", bridge.F32, ""},
		{half, bridge.F32, "f16", bridge.F16, ""},
		{half, bridge.BF16, "int8", 0, `kv_dtype "int8": want auto, f32, f16 or bf16`},
	}
	for _, tt := range tests {
		got, err := KVDType(tt.be, tt.model, tt.req)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%T %v %q: err %v, want %q", tt.be, tt.model, tt.req, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%T %v %q: %v %v, want %v", tt.be, tt.model, tt.req, got, err, tt.want)
		}
	}
}

// roundedKV is the CPU backend with an f32 cache fed keys and values
// rounded to dt (nearest even) before they are stored: the reference a
// cache kept in dt must equal.
type roundedKV struct {
	*cpu.Backend
	dt bridge.DType
}

func (r roundedKV) Attention(out, q, k, v bridge.Tensor, c bridge.KVCache, heads, kvHeads, headDim int, scale float32, window int) {
	round := func(x bridge.Tensor) bridge.Tensor {
		f := make([]float32, x.Len())
		if err := r.Read(x, f); err != nil {
			panic(err)
		}
		u := make([]uint16, len(f))
		if r.dt == bridge.BF16 {
			half.F32ToBF16(u, f)
			half.BF16ToF32(f, u)
		} else {
			half.F32ToF16(u, f)
			half.F16ToF32(f, u)
		}
		t, err := r.Weight(bridge.F32, x.Shape(), unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)))
		if err != nil {
			panic(err)
		}
		return t
	}
	r.Backend.Attention(out, q, round(k), round(v), c, heads, kvHeads, headDim, scale, window)
}

// A CPU run whose KV cache is kept in f16 or bf16 stores 2-byte values and
// gives what an f32 cache fed the same rounded keys and values gives (to
// the CPU attention's 1e-5), and not what the f32 cache gives: the
// rounding reaches the logits.
func TestHalfKVCacheMatchesRoundedReference(t *testing.T) {
	reqs := raggedRequests(256, 4)
	run := func(be bridge.Backend, kv string) ([]Output, *Engine) {
		e := openFixture(t, "llama", be, Options{KVDType: kv})
		o, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		return o, e
	}
	f32, _ := run(cpu.New(cpu.Options{}), "f32")
	for _, dt := range []bridge.DType{bridge.F16, bridge.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			got, e := run(cpu.New(cpu.Options{}), dt.String())
			if k := e.cache[0].K; e.KVDType() != dt || k.DType() != dt || dt.Size() != 2 {
				t.Errorf("cache kept in %v (%v tensors of %d bytes a value)", e.KVDType(), k.DType(), k.DType().Size())
			}
			want, _ := run(roundedKV{cpu.New(cpu.Options{}), dt}, "f32")
			sameOutputs(t, dt.String()+" cache against the rounded f32 one", got, want, 1e-5)
			var d float64
			for i := range got {
				d = max(d, kernels.MaxAbsDiff(got[i].Logits, f32[i].Logits))
			}
			if d < 1e-4 {
				t.Errorf("%v cache: logits within %.3g of the f32 cache's: the rounding did not reach them", dt, d)
			}
			t.Logf("%v cache: logits %.3g from the f32 cache's", dt, d)
		})
	}
}

// allocCounter is a backend that keeps the tensors an engine allocates
// until it frees them.
type allocCounter struct {
	bridge.Backend
	allocs int
	live   map[bridge.Tensor]bool
}

func (a *allocCounter) Alloc(dt bridge.DType, shape ...int) (bridge.Tensor, error) {
	t, err := a.Backend.Alloc(dt, shape...)
	if err == nil {
		a.allocs++
		a.live[t] = true
	}
	return t, err
}

func (a *allocCounter) Free(t bridge.Tensor) {
	delete(a.live, t)
	a.Backend.Free(t)
}

// Close hands back everything the engine allocated (its KV cache and the
// workspaces of every step shape it ran), so the next engine on the backend
// reuses that memory; a second Close does nothing.
func TestCloseFreesWhatTheEngineAllocated(t *testing.T) {
	be := &allocCounter{Backend: cpu.New(cpu.Options{}), live: map[bridge.Tensor]bool{}}
	e := openFixture(t, "llama", be, Options{BlockSize: 8, KVTokens: 80})
	if _, err := e.Generate(raggedRequests(e.Config().Vocab, 3)[:3]); err != nil {
		t.Fatal(err)
	}
	if be.allocs <= 2*e.Config().Layers {
		t.Fatalf("%d tensors allocated: the test ran no workspace", be.allocs)
	}
	e.Close()
	if len(be.live) != 0 {
		t.Errorf("%d of %d tensors still allocated after Close", len(be.live), be.allocs)
	}
	e.Close()
}

// A request ends at its first stop token, kept as its last, while the
// others of the batch run on to their lengths as before.
func TestStopTokens(t *testing.T) {
	reqs := raggedRequests(512, 8)[:3]
	alone := aloneOutputs(t, "llama", reqs)
	// Stop the first request at the first token of its run not seen before
	// in it, past the first.
	full := alone[0].Tokens
	at := -1
	for j := 1; j < len(full); j++ {
		if !slices.Contains(full[:j], full[j]) {
			at = j
			break
		}
	}
	if at < 0 {
		t.Skip("the fixture's first request repeats one token")
	}
	reqs[0].Stop = []int32{full[at]}
	e := openFixture(t, "llama", cpu.New(cpu.Options{}), Options{})
	got, err := e.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0].Tokens, full[:at+1]) {
		t.Errorf("stopped request: %v, want %v", got[0].Tokens, full[:at+1])
	}
	sameOutputs(t, "beside a stopped request", got[1:], alone[1:], 2e-5)
	if e.KV().FreeBlocks() != e.KV().NumBlocks() {
		t.Errorf("%d blocks leaked", e.KV().NumBlocks()-e.KV().FreeBlocks())
	}
}

// The layers a FitError offers leave a tenth of the memory to spare: a
// model truncated to fill memory to the byte leaves the machine nothing.
func TestFitOffersLayersWithRoom(t *testing.T) {
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	need := func(n int) int64 {
		c, _ := cfg.WithLayers(n)
		return c.WeightBytes(bridge.BF16) + c.KVBytesPerToken(bridge.BF16)*64
	}
	for _, avail := range []int64{need(1), need(1) * 10 / 9, need(3), need(3) * 10 / 9, need(cfg.Layers) - 1} {
		var fe *FitError
		if err := CheckFit(cfg, bridge.BF16, bridge.BF16, 64, 0, avail, "here"); !errors.As(err, &fe) {
			t.Fatalf("%d bytes: %v, want a FitError", avail, err)
		}
		room := avail - avail/10
		n := fe.MaxLayers
		if n > 0 && need(n) > room || n+1 < cfg.Layers && need(n+1) <= room {
			t.Errorf("%d bytes: %d layers offered (%d bytes); want the most that take at most %d", avail, n, need(n), room)
		}
	}
	// Three layers that fill memory exactly are not offered.
	var fe *FitError
	if errors.As(CheckFit(cfg, bridge.BF16, bridge.BF16, 64, 0, need(3), "here"), &fe); fe.MaxLayers >= 3 {
		t.Errorf("memory three layers fill: %d layers offered", fe.MaxLayers)
	}
}

// A batch Generate refuses in part is refused whole: no request of it is
// left queued to run, and leak its tokens into, the next Generate; nor does
// Generate run requests queued on the engine before it.
func TestGenerateRefusesTheWholeBatch(t *testing.T) {
	reqs := raggedRequests(512, 4)[:3]
	alone := aloneOutputs(t, "llama", reqs[2:])
	e := openFixture(t, "llama", cpu.New(cpu.Options{}), Options{KVTokens: 64})
	bad := func(f func(r *Request)) Request {
		r := reqs[1]
		f(&r)
		return r
	}
	for _, c := range []struct {
		name  string
		batch []Request
		want  string
	}{
		{"nothing to generate", []Request{reqs[0], bad(func(r *Request) { r.MaxNewTokens = 0 })}, "request 1: max new tokens must be at least 1"},
		{"id twice", []Request{reqs[0], bad(func(r *Request) { r.ID = reqs[0].ID })}, "request 0: id given twice (requests 1 and 2 of 2)"},
		{"past the cache", []Request{reqs[0], bad(func(r *Request) { r.MaxNewTokens = 60 })}, "does not fit in the KV cache"},
	} {
		_, err := e.Generate(c.batch)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", c.name, err, c.want)
		}
		if e.Pending() || e.KV().FreeBlocks() != e.KV().NumBlocks() {
			t.Fatalf("%s: a request of the refused batch is left queued", c.name)
		}
	}
	got, err := e.Generate(reqs[2:])
	if err != nil {
		t.Fatal(err)
	}
	sameOutputs(t, "after refused batches", got, alone, 2e-5)

	if err := e.Add(reqs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Generate(reqs[2:]); err == nil || !strings.Contains(err.Error(), "already has requests queued (1)") {
		t.Errorf("Generate beside a queued request: err = %v", err)
	}
}

// A step samples one row a sequence, its last token, and a sequence holds
// a block of the cache at least: an engine of no max_seqs counts a step's
// logits for as many rows as the cache has blocks, not one a token (a
// 3008-token cache of qwen3-moe-mini: 188 MiB more).
func TestFitCountsOneLogitRowASequence(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	be := cpu.New(cpu.Options{Threads: 1})
	const kvTokens, block = 3008, 16
	rows := kvTokens / block
	avail := RunConfig(be, cfg).WeightBytes(src.DType()) + cfg.KVBytesPerToken(bridge.F32)*kvTokens + StepBytes(cfg, be.ActDType(), kvTokens, rows)
	e, err := New(be, cfg, src, Options{KVTokens: kvTokens, BlockSize: block, KVDType: "f32", AvailableMemory: avail, MemoryWhere: "here"})
	if err != nil {
		t.Fatalf("a cache of %d blocks, its steps' logits counted for %d rows: %v", kvTokens/block, rows, err)
	}
	e.Close()
}

// The fit check counts the KV cache as it is allocated, in whole blocks:
// 17 tokens in blocks of 16 take 32 tokens' memory. Before, memory for 17
// passed, and a refusal named a cache smaller than the one allocated.
func TestFitCountsWholeBlocks(t *testing.T) {
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Layers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	be := cpu.New(cpu.Options{Threads: 1})
	w := RunConfig(be, cfg).WeightBytes(src.DType())
	perToken := cfg.KVBytesPerToken(bridge.F32)
	for _, c := range []struct {
		tokens, block int
		fits          bool
	}{{17, 16, false}, {32, 16, true}, {17, 8, false}, {24, 8, true}} {
		cached := (c.tokens + c.block - 1) / c.block * c.block
		alloc := int64(cached) * perToken
		tokens, rows := LargestStep(cached, 0, 0, cached/c.block)
		step := StepBytes(cfg, be.ActDType(), tokens, rows)
		avail := w + int64(c.tokens)*perToken + step
		if c.fits {
			avail = w + alloc + step
		}
		e, err := New(be, cfg, src, Options{KVTokens: c.tokens, BlockSize: c.block, KVDType: "f32", AvailableMemory: avail, MemoryWhere: "here"})
		var fe *FitError
		switch {
		case c.fits && err != nil:
			t.Errorf("%d tokens in blocks of %d, %d bytes available: %v", c.tokens, c.block, avail, err)
		case !c.fits && !errors.As(err, &fe):
			t.Errorf("%d tokens in blocks of %d allocate %d bytes of cache; %d bytes available passed (err %v)", c.tokens, c.block, alloc, avail, err)
		case !c.fits && fe.KV != alloc:
			t.Errorf("%d tokens in blocks of %d: refusal names a %d-byte cache, want the %d allocated", c.tokens, c.block, fe.KV, alloc)
		}
		if e != nil {
			e.Close()
		}
	}
}
