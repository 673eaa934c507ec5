//go:build linux

package cuda_test

import (
	"encoding/json"
	"fmt"
	"github.com/mtlbench/mtlbench/kernels"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	. "github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/selftest"
)

var (
	shared     *Backend
	sharedErr  error
	sharedOnce sync.Once
)

// gpu returns the backend every test shares, or skips the test with the
// reason there is none (no driver, no device).
func gpu(t *testing.T) *Backend {
	t.Helper()
	sharedOnce.Do(func() {
		o, err := envconfig.CUDA()
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = New(o)
	})
	if sharedErr != nil {
		if strings.HasPrefix(sharedErr.Error(), "no CUDA") {
			t.Skip(sharedErr)
		}
		t.Fatal(sharedErr)
	}
	return shared
}

// envOptions are the backend options the environment asks for.
func envOptions(t *testing.T) Options {
	t.Helper()
	o, err := envconfig.CUDA()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// openWith opens a second backend on the environment's options as change
// leaves them, closed when the test ends.
func openWith(t *testing.T, change func(*Options)) *Backend {
	t.Helper()
	o := envOptions(t)
	change(&o)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func TestInfo(t *testing.T) {
	b := gpu(t)
	info := b.Info()
	t.Logf("%+v", info)
	if info.Backend != "cuda" || info.MemoryBytes <= 0 || info.AvailableBytes <= 0 || info.Cores <= 0 {
		t.Fatalf("info %+v", info)
	}
	// The kernels' compile time differs from run to run of one setup: it is
	// the process's startup, not a note a run records and compare sets
	// side by side.
	if strings.Contains(info.Notes, "kernels") || !strings.HasPrefix(info.Startup, "kernels ") {
		t.Errorf("notes %q, startup %q: want the kernels' compile in the startup alone", info.Notes, info.Startup)
	}
}

const fixtureDir = "../../runner/testdata/hf"

type reference struct {
	Prompts []struct {
		Tokens     []int32   `json:"tokens"`
		LogitsLast []float32 `json:"logits_last"`
		Greedy     []int32   `json:"greedy"`
	} `json:"prompts"`
}

func openFixture(t *testing.T, arch string, be bridge.Backend, moe bridge.MoEParams) *engine.Engine {
	t.Helper()
	dir := filepath.Join(fixtureDir, arch)
	cfg, err := model.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := model.OpenCheckpoint(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if !src.Has("lm_head.weight") {
		cfg.TieEmbed = true
	}
	e, err := engine.New(be, cfg, src, engine.Options{MoE: moe})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The transformers fixtures: last-prompt-position logits within 1e-4 of
// transformers' and the same greedy tokens as transformers and the CPU
// backend, for every architecture (and every MoE strategy).
func TestFixtures(t *testing.T) {
	b := gpu(t)
	archs, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "reference.json"))
	if len(archs) == 0 {
		t.Skip("no fixtures at " + fixtureDir)
	}
	for _, p := range archs {
		arch := filepath.Base(filepath.Dir(p))
		strategies := []bridge.MoEParams{{}}
		if strings.Contains(arch, "moe") {
			strategies = []bridge.MoEParams{{Strategy: bridge.MoEGrouped}, {Strategy: bridge.MoELoop}, {Strategy: bridge.MoEChunked, ChunkSize: 3}}
		}
		for _, mp := range strategies {
			t.Run(arch+"/"+string(mp.Strategy), func(t *testing.T) {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				var ref reference
				if err := json.Unmarshal(data, &ref); err != nil {
					t.Fatal(err)
				}
				ge := openFixture(t, arch, b, mp)
				ce := openFixture(t, arch, cpu.New(cpu.Options{}), mp)
				for i, pr := range ref.Prompts {
					req := []engine.Request{{ID: i, Prompt: pr.Tokens, MaxNewTokens: len(pr.Greedy), WantLogits: true}}
					got, err := ge.Generate(req)
					if err != nil {
						t.Fatal(err)
					}
					want, err := ce.Generate(req)
					if err != nil {
						t.Fatal(err)
					}
					d := kernels.MaxAbsDiff(got[0].Logits, pr.LogitsLast)
					t.Logf("prompt %d (%d tokens): logits max abs error %.2g vs transformers, %.2g vs cpu; tokens %v",
						i, len(pr.Tokens), d, kernels.MaxAbsDiff(got[0].Logits, want[0].Logits), got[0].Tokens)
					if d > 1e-4 {
						t.Errorf("prompt %d: logits max abs error %.3g > 1e-4", i, d)
					}
					if !equalTokens(got[0].Tokens, pr.Greedy) || !equalTokens(got[0].Tokens, want[0].Tokens) {
						t.Errorf("prompt %d: greedy tokens %v, transformers %v, cpu %v", i, got[0].Tokens, pr.Greedy, want[0].Tokens)
					}
				}
			})
		}
	}
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func miniRequests(vocab, n, prompt, gen int) []engine.Request {
	var reqs []engine.Request
	for i := 0; i < n; i++ {
		p := make([]int32, prompt+i)
		for j := range p {
			p[j] = int32((j*7919 + i*104729 + 13) % vocab)
		}
		reqs = append(reqs, engine.Request{ID: i, Prompt: p, MaxNewTokens: gen, WantLogits: true})
	}
	return reqs
}

// runMini generates on a synthetic model; sync runs each step to its end
// before the next is recorded. The KV cache is f32, as the CPU backend keeps
// it, so the CPU's logits are a reference to 1e-3 (a bf16 cache is checked
// by TestPrefillMatchesTokenByToken and TestFlashAttentionMatchesReference).
func runMini(t *testing.T, be bridge.Backend, preset string, layers int, reqs []engine.Request, sync bool) ([]engine.Output, *engine.Engine) {
	t.Helper()
	name, quant, _ := strings.Cut(preset, "@") // "preset@q4": synthetic packed weights
	cfg, src, err := model.Open(model.Spec{Model: name, Quant: quant, Layers: layers, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	e, err := engine.New(be, cfg, src, engine.Options{Synchronous: sync, TokenBudget: 64, KVDType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return out, e
}

// Graph replay gives the same tokens as direct launches, bit for bit, and
// so do steps that start running while they are recorded and decode steps
// queued behind the step computing their tokens; the GPU agrees with the
// CPU on a bf16 MoE model with chunked prefill.
func TestGraphsMatchDirect(t *testing.T) {
	b := gpu(t)
	direct := openWith(t, func(o *Options) { o.NoGraphs = true })
	reqs := miniRequests(8192, 4, 40, 24)
	g, _ := runMini(t, b, "qwen3-moe-mini", 0, reqs, true)
	if b.GraphCount() == 0 {
		t.Error("no CUDA graph was captured")
	}
	if n := b.LastStepSegments(); n < 2 {
		t.Errorf("the last step ran in %d segment(s); a 6-layer decode step should start before it is recorded", n)
	}
	chained := b.ChainedSteps()
	o, _ := runMini(t, b, "qwen3-moe-mini", 0, reqs, false)
	if n := b.ChainedSteps() - chained; n < 20 {
		t.Errorf("%d decode steps were queued behind the step computing their tokens, want at least 20", n)
	}
	for i := range reqs {
		if !equalTokens(o[i].Tokens, g[i].Tokens) || kernels.MaxAbsDiff(o[i].Logits, g[i].Logits) != 0 {
			t.Errorf("request %d: overlapped steps differ from synchronous ones: tokens %v, %v", i, o[i].Tokens, g[i].Tokens)
		}
	}
	whole := openWith(t, func(o *Options) { o.NoStream = true })
	w, _ := runMini(t, whole, "qwen3-moe-mini", 0, reqs, false)
	if n := whole.LastStepSegments(); n != 1 {
		t.Errorf("with NoStream the last step ran in %d segments", n)
	}
	d, _ := runMini(t, direct, "qwen3-moe-mini", 0, reqs, false)
	c, _ := runMini(t, cpu.New(cpu.Options{}), "qwen3-moe-mini", 0, reqs, false)
	for i := range reqs {
		if !equalTokens(g[i].Tokens, d[i].Tokens) {
			t.Errorf("request %d: graph tokens %v, direct %v", i, g[i].Tokens, d[i].Tokens)
		}
		if !equalTokens(g[i].Tokens, w[i].Tokens) || kernels.MaxAbsDiff(g[i].Logits, w[i].Logits) != 0 {
			t.Errorf("request %d: streamed steps differ from whole ones: tokens %v, %v", i, g[i].Tokens, w[i].Tokens)
		}
		diff := kernels.MaxAbsDiff(g[i].Logits, c[i].Logits)
		same := 0
		for j := range g[i].Tokens {
			if g[i].Tokens[j] == c[i].Tokens[j] {
				same++
			}
		}
		t.Logf("request %d: first logits within %.2g of the CPU's; %d/%d tokens as the CPU", i, diff, same, len(g[i].Tokens))
		if diff > 1e-3 {
			t.Errorf("request %d: logits differ from the CPU's by %.3g", i, diff)
		}
	}
}

// An engine made again on the same weights, as each repetition of a
// benchmark makes one, gets the device addresses the one before it had, so
// its steps replay the graphs already held: from the third engine on (the
// second captures what the first ran once), no step list is launched
// directly or captured again. The requests ask for no logits, so every
// decode step, the first behind its prompt, is queued behind the step
// computing its tokens, and the tokens are those of steps run one by one.
// An engine that prefills a long prompt in between (a suite's prefill case
// between two decode repetitions) takes larger scratch buffers than a
// decode step, and leaves the next engine's graphs as they were.
func TestEnginesAgainReplayTheirGraphs(t *testing.T) {
	gpu(t)
	b := openWith(t, func(*Options) {})
	const gen = 24
	reqs := miniRequests(8192, 1, 40, gen)
	reqs[0].WantLogits = false
	for _, preset := range []string{"qwen3-moe-mini", "qwen3-moe-mini@q4"} {
		name, quant, _ := strings.Cut(preset, "@")
		cfg, opened, err := model.Open(model.Spec{Model: name, Quant: quant, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer opened.Close()
		src := model.NewCached(opened) // the weights a benchmark's repetitions share
		generate := func(opts engine.Options, reqs []engine.Request) []engine.Output {
			opts.KVDType = "f32"
			opts.TokenBudget = max(opts.TokenBudget, 64)
			e, err := engine.New(b, cfg, src, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			out, err := e.Generate(reqs)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		want := generate(engine.Options{Synchronous: true}, reqs)
		var misses []int
		for i := range 5 {
			if i == 4 {
				generate(engine.Options{TokenBudget: 1024}, miniRequests(8192, 1, 1000, 2))
			}
			before, chained := b.GraphMisses(), b.ChainedSteps()
			out := generate(engine.Options{}, reqs)
			misses = append(misses, b.GraphMisses()-before)
			if n := b.ChainedSteps() - chained; n != gen-1 {
				t.Errorf("%s: %d of %d decode steps queued behind the step computing their tokens", preset, n, gen-1)
			}
			for i := range reqs {
				if !equalTokens(out[i].Tokens, want[i].Tokens) {
					t.Errorf("%s, request %d: tokens %v, one step at a time %v", preset, i, out[i].Tokens, want[i].Tokens)
				}
			}
		}
		t.Logf("%s: step lists without a graph, engine by engine (a long prefill before the fifth): %v", preset, misses)
		if misses[0] == 0 || misses[2] != 0 || misses[3] != 0 || misses[4] != 0 {
			t.Errorf("%s: step lists without a graph, engine by engine (a long prefill before the fifth): %v; want none from the third engine on", preset, misses)
		}
	}
}

// The blocks the pool keeps count as available memory, and go back to the
// driver when an allocation of another size would not fit beside them.
func TestPoolGivesWayToOtherSizes(t *testing.T) {
	b := gpu(t)
	free := b.Info().AvailableBytes
	n := int(free / 4 * 6 / 10) // f32 values: 60% of what is free
	x, err := b.Alloc(bridge.F32, n)
	if err != nil {
		t.Fatal(err)
	}
	b.Free(x)
	y, err := b.Alloc(bridge.F32, 1) // takes in the free: x's block joins the pool
	if err != nil {
		t.Fatal(err)
	}
	b.Free(y)
	if got := b.Info().AvailableBytes; got < free-64<<20 {
		t.Errorf("%d bytes available with the freed block pooled, want about %d", got, free)
	}
	z, err := b.Alloc(bridge.F32, n+1<<20) // another size, which fits only without x's block
	if err != nil {
		t.Fatalf("allocating 60%% of the free memory after freeing as much: %v", err)
	}
	b.Free(z)
}

// Every step the GPU runs reports its span on the GPU's clock, whether it
// ran alone, streamed while recorded, overlapped with the next or profiled;
// a step the host waited for took the host at least that long.
func TestStepDeviceTime(t *testing.T) {
	b := gpu(t)
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, opts := range []engine.Options{{Synchronous: true}, {}, {Profile: true}} {
		opts.TokenBudget = 64
		e, err := engine.New(b, cfg, src, opts)
		if err != nil {
			t.Fatal(err)
		}
		reqs := miniRequests(cfg.Vocab, 2, 24, 12)
		for _, r := range reqs {
			r.WantLogits = false
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		steps := 0
		for e.Pending() {
			res, err := e.Step()
			if err != nil {
				t.Fatal(err)
			}
			if res.Tokens == 0 {
				continue
			}
			steps++
			d := res.Stats.DeviceTime
			if d <= 0 || d > time.Second {
				t.Errorf("%+v: step %d of %d tokens: device time %v", opts, steps, res.Tokens, d)
			}
			if (opts.Synchronous || opts.Profile) && d > res.Duration {
				t.Errorf("%+v: step %d: device time %v longer than the host waited for it (%v)", opts, steps, d, res.Duration)
			}
		}
		if steps < 10 {
			t.Errorf("%+v: %d steps", opts, steps)
		}
	}
}

// A step's metadata, token ids and results move through step_begin and
// step_end, kernels inside its graph whose arguments (the pinned buffers of
// the step's slot) are set before each launch; moved with copies around the
// graph instead, every step gives the same tokens, logits and expert
// counts, from as many graphs.
func TestStepKernelsMatchCopies(t *testing.T) {
	gpu(t)
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	copies, err := New(Options{NoStepKernels: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copies.Close()
	reqs := miniRequests(8192, 3, 20, 16)
	restore := SetGraphedBeginMax(0) // every step_begin before its graph
	kb, _ := runMini(t, b, "qwen3-moe-mini", 0, reqs, false)
	restore()
	k, _ := runMini(t, b, "qwen3-moe-mini", 0, reqs, false)
	c, _ := runMini(t, copies, "qwen3-moe-mini", 0, reqs, false)
	for i := range kb {
		if !equalTokens(kb[i].Tokens, k[i].Tokens) || kernels.MaxAbsDiff(kb[i].Logits, k[i].Logits) != 0 {
			t.Errorf("request %d: tokens %v with step_begin before the graph, %v in it", i, kb[i].Tokens, k[i].Tokens)
		}
	}
	if nk, nc := b.LastStepLaunches(), copies.LastStepLaunches(); nk != nc+2 {
		t.Errorf("the last step launched %d kernels, %d with copies: want step_begin and step_end more", nk, nc)
	}
	if gk, gc := b.GraphCount(), copies.GraphCount(); gk < gc || gk == 0 {
		t.Errorf("%d graphs with the step kernels, %d with copies: want as many", gk, gc)
	}
	for i := range k {
		if !equalTokens(k[i].Tokens, c[i].Tokens) || kernels.MaxAbsDiff(k[i].Logits, c[i].Logits) != 0 {
			t.Errorf("request %d: tokens %v with the step kernels, %v with copies", i, k[i].Tokens, c[i].Tokens)
		}
	}
	touched := func(be bridge.Backend) [][]int {
		cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		e, err := engine.New(be, cfg, src, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range miniRequests(8192, 2, 9, 6) {
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		var out [][]int
		for e.Pending() {
			r, err := e.Step()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.Stats.ExpertsTouched)
		}
		return out
	}
	tk, tc := touched(b), touched(copies)
	if fmt.Sprint(tk) != fmt.Sprint(tc) || len(tk) == 0 || len(tk[len(tk)-1]) == 0 {
		t.Errorf("experts touched per step: %v with the step kernels, %v with copies", tk, tc)
	}
}

// The decode-step fusions (RoPE into attention, the single-token MoE router
// into its routing, an RMSNorm into the GEMV after it and its residual add
// into the GEMV before) launch fewer kernels and give what the separate
// kernels give: logits within 1e-4, the same greedy tokens.
func TestFusionsMatchUnfused(t *testing.T) {
	b := gpu(t)
	plain, err := New(Options{NoFuse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	fewerLaunches(t, "fused", b, "unfused", plain, []launchCase{
		{"qwen3-moe-mini", 0, 2, 8192, 0},
		{"tinyllama-1.1b", 2, 3, 32000, 0},
		// Packed weights take the same fusions (quant_int.cu's staging
		// folds the norm; the residual is the GEMV's in-place bias), and a
		// packed MoE takes its norm and residual too.
		// A packed LM head takes the argmax in too (qgemv_argmax), where
		// its rows a warp have a qagemv_am kernel: 4 for 32000 rows, not
		// the 2 of 8192.
		{"qwen3-moe-mini@q4", 0, 4, 8192, 0},
		{"tinyllama-1.1b@q4", 2, 3, 32000, 1},
		{"tinyllama-1.1b@q8", 2, 3, 32000, 1},
	})
}

// launchCase is a preset (layers 0: the preset's) whose decode steps on one
// backend take perLayer kernels fewer a layer, and perStep fewer outside
// the layers, than on another (both 0: as many).
type launchCase struct {
	preset   string
	layers   int
	perLayer int
	vocab    int
	perStep  int
}

// fewerLaunches runs each case on backends a and b: the same tokens,
// logits within 1e-4, and a's decode steps perLayer kernels a layer fewer.
func fewerLaunches(t *testing.T, aName string, a *Backend, bName string, b *Backend, cases []launchCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			reqs := miniRequests(c.vocab, 1, 5, 12)
			ao, e := runMini(t, a, c.preset, c.layers, reqs, false)
			an := a.LastStepLaunches()
			bo, _ := runMini(t, b, c.preset, c.layers, reqs, false)
			bn := b.LastStepLaunches()
			d := kernels.MaxAbsDiff(ao[0].Logits, bo[0].Logits)
			layers := e.Config().Layers
			t.Logf("%d layers: %d kernels a decode step %s, %d %s; logits within %.2g; tokens %v",
				layers, an, aName, bn, bName, d, ao[0].Tokens)
			if d > 1e-4 {
				t.Errorf("%s logits differ by %.3g", aName, d)
			}
			if !equalTokens(ao[0].Tokens, bo[0].Tokens) {
				t.Errorf("%s tokens %v, %s %v", aName, ao[0].Tokens, bName, bo[0].Tokens)
			}
			fewer := c.perLayer*layers + c.perStep
			if c.perLayer == 0 && c.perStep == 0 && an != bn || an > bn-fewer {
				t.Errorf("%d kernels %s against %d %s: want %d fewer", an, aName, bn, bName, fewer)
			}
		})
	}
}

// Single-token affine GEMVs recorded one after another run as one
// persistent launch (quant_persist.cu): o, gate/up, down and the next
// layer's q/k/v of a dense model, o and the router of a MoE one. The
// logits match the GEMVs launched apart (the same staging and dots, summed
// in another order), and a chain takes the launches it joins.
func TestChainsMatchSeparate(t *testing.T) {
	gpu(t)
	apart := openWith(t, func(o *Options) { o.Chains = false })
	b := openWith(t, func(o *Options) { o.Chains = true })
	if b.ChainSlots() == 0 {
		t.Skip("no persistent chains on this GPU (sm_90 and a ring of 4 slots needed)")
	}
	// The LM head joins the last chain, so its argmax is a launch of its
	// own, where apart the LM head takes it in (qgemv_argmax): one more.
	fewerLaunches(t, "chained", b, "apart", apart, []launchCase{
		{"tinyllama-1.1b@q4", 2, 3, 32000, -1},
		{"tinyllama-1.1b@q8", 2, 3, 32000, -1},
		{"qwen3-moe-mini@q4", 0, 1, 8192, 0},
		{"qwen2-0.5b@q4", 2, 0, 151936, 0}, // k = 896: scales of 28 bytes a row, so no chains
	})
}

// Decode steps of more tokens than the GEMV kernels take run their matmuls
// on cuBLAS; q, k and v (and gate and up) round their shared input to half
// once: two launches fewer a layer for q, k and v, one for gate and up, and
// the same logits and tokens as with each matmul rounding its own.
func TestGemmGroupSharesRounding(t *testing.T) {
	b := gpu(t)
	defer b.SetFusions()
	others := quanttest.FusionsBut(b, "gemv_shared_input")
	reqs := miniRequests(32000, 10, 1, 6) // one prefill step, then decode steps of 10 tokens
	b.SetFusions(others...)
	apart, e := runMini(t, b, "tinyllama-1.1b", 2, reqs, false)
	apartN := b.LastStepLaunches()
	b.SetFusions()
	shared, _ := runMini(t, b, "tinyllama-1.1b", 2, reqs, false)
	sharedN := b.LastStepLaunches()
	layers := e.Config().Layers
	t.Logf("%d kernels a decode step of %d tokens with the rounding shared, %d apart", sharedN, len(reqs), apartN)
	if want := apartN - 3*layers; sharedN != want {
		t.Errorf("%d kernels a step, want %d (%d apart, 3 fewer a layer)", sharedN, want, apartN)
	}
	for i := range reqs {
		if d := kernels.MaxAbsDiff(shared[i].Logits, apart[i].Logits); d > 1e-6 || !equalTokens(shared[i].Tokens, apart[i].Tokens) {
			t.Errorf("request %d: tokens %v against %v, logits within %.3g", i, shared[i].Tokens, apart[i].Tokens, d)
		}
	}
}

// Profile mode reports per-op timings under the engine's marks.
func TestProfile(t *testing.T) {
	b := gpu(t)
	cfg, src, err := model.Open(model.Spec{Model: "qwen3-moe-mini", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	e, err := engine.New(b, cfg, src, engine.Options{Profile: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(engine.Request{ID: 1, Prompt: []int32{1, 2, 3}, MaxNewTokens: 3}); err != nil {
		t.Fatal(err)
	}
	var last *engine.StepResult
	for e.Pending() {
		if last, err = e.Step(); err != nil {
			t.Fatal(err)
		}
	}
	comps := map[string]bool{}
	for _, tm := range last.Stats.Timings {
		comps[tm.Component] = true
		if tm.Duration <= 0 {
			t.Errorf("timing %+v", tm)
		}
	}
	if !comps[bridge.CompAttention] || !comps[bridge.CompMoE] || !comps[bridge.CompNorm] {
		t.Errorf("components %v", comps)
	}
	if len(last.Stats.ExpertsTouched) != cfg.Layers {
		t.Errorf("experts touched %v for %d layers", last.Stats.ExpertsTouched, cfg.Layers)
	}
	t.Logf("%d timings, experts touched %v", len(last.Stats.Timings), last.Stats.ExpertsTouched)
}

// Each entry of the CUDA fusion table, with those whose work it needs done
// alongside, gives the tokens and logits of unfused steps with fewer
// kernels; the engine's fusion switch (fusion: off) keeps only the Always
// entries and matches the backend-wide switch.
func TestEachFusionMatchesUnfused(t *testing.T) {
	b := gpu(t)
	reqs := miniRequests(32000, 1, 5, 8)
	run := func(noFusion bool) ([]engine.Output, int) {
		cfg, src, err := model.Open(model.Spec{Model: "tinyllama-1.1b", Layers: 2, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		e, err := engine.New(b, cfg, src, engine.Options{TokenBudget: 64, NoFusion: noFusion})
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.Generate(reqs)
		if err != nil {
			t.Fatal(err)
		}
		return out, b.LastStepLaunches()
	}
	b.SetFusions()
	off, offN := run(true)
	for _, set := range [][]string{nil, {"rope_attention", "gemv_shared_input"}, {"rmsnorm_gemv", "gemv_shared_input"},
		{"gemv_residual", "rmsnorm_gemv", "gemv_shared_input"}} {
		t.Run(fmt.Sprint(set), func(t *testing.T) {
			b.SetFusions(set...)
			defer b.SetFusions()
			on, onN := run(false)
			d := kernels.MaxAbsDiff(on[0].Logits, off[0].Logits)
			t.Logf("%d kernels a decode step, %d with fusion off; logits within %.2g", onN, offN, d)
			if d > 1e-4 || !equalTokens(on[0].Tokens, off[0].Tokens) {
				t.Errorf("tokens %v against %v, logits within %.3g", on[0].Tokens, off[0].Tokens, d)
			}
			if onN >= offN {
				t.Errorf("%d kernels fused, not fewer than %d", onN, offN)
			}
		})
	}
}

// quantFixtureDir holds packed checkpoints (MLX folders, GGUF files) with
// transformers' logits on their dequantized weights
// (tools/fixtures/make_quant_fixtures.py).
const quantFixtureDir = "../../runner/testdata"

// TestQuantFixtures: every MLX and GGUF fixture on the GPU, logits within
// 1e-3 of transformers and equal greedy tokens.
func TestQuantFixtures(t *testing.T) {
	b := gpu(t)
	refs, _ := filepath.Glob(filepath.Join(quantFixtureDir, "mlx", "*", "reference.json"))
	ggufRefs, _ := filepath.Glob(filepath.Join(quantFixtureDir, "gguf", "*.json"))
	refs = append(refs, ggufRefs...)
	if len(refs) == 0 {
		t.Skip("no quantized fixtures at " + quantFixtureDir)
	}
	var paths []string
	for _, ref := range refs {
		path := filepath.Dir(ref)
		if strings.HasSuffix(filepath.Dir(ref), "gguf") {
			path = strings.TrimSuffix(ref, ".json") + ".gguf"
		}
		paths = append(paths, path)
	}
	parts, splitRefs := enginetest.SplitFixtures(t, quantFixtureDir)
	paths, refs = append(paths, parts...), append(refs, splitRefs...)
	for i, path := range paths {
		ref := refs[i]
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(ref)
			if err != nil {
				t.Fatal(err)
			}
			var r reference
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatal(err)
			}
			cfg, src, err := model.Open(model.Spec{Model: path})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			e, err := engine.New(b, cfg, src, engine.Options{KVDType: "f32"})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range r.Prompts {
				out, err := e.Generate([]engine.Request{{ID: i, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true}})
				if err != nil {
					t.Fatal(err)
				}
				d := kernels.MaxAbsDiff(out[0].Logits, p.LogitsLast)
				t.Logf("prompt %d: logits max abs error %.2g", i, d)
				if d > 1e-3 {
					t.Errorf("prompt %d: logits max abs error %.3g > 1e-3", i, d)
				}
				if fmt.Sprint(out[0].Tokens) != fmt.Sprint(p.Greedy) {
					t.Errorf("prompt %d: greedy %v, transformers %v", i, out[0].Tokens, p.Greedy)
				}
			}
		})
	}
}

// An mlx-lm folder as mlx writes it (no header padding, its tensors at odd
// offsets) runs as transformers does, and every weight's file pages are
// handed back once on the device (bridge.CopyDropper).
func TestMLXWrittenCopiedOnce(t *testing.T) {
	b := gpu(t)
	for _, fx := range []string{"llama-q4", "qwen3_moe-q4"} {
		t.Run(fx, func(t *testing.T) {
			enginetest.CopiedOnce(t, b, filepath.Join(quantFixtureDir, "mlx", fx), engine.Options{KVDType: "f32"}, 1e-3)
		})
	}
}

// TestQuantSelftest: the packed-weight ops of every format against
// kernels/quant's reference.
// The integer affine kernels (quant_int.cu) keep a lane's loads in flight
// in registers, within the 128 a thread their two blocks an SM allow: a
// spill puts them through local memory (fetching a pass of loads before
// the kernel's wait did, at 150-300 bytes a thread, and made TinyLlama's q4
// decode 11% slower: docs/cuda.md). A frame of a few words is not that:
// qagemv_affine4_c1_r2 and _c4_r1 keep 32 bytes with their first loads
// held across the staging (NVRTC 13), and were faster for it. The tensor-core packed
// kernels (quant_mma.cu) hold a tile's accumulators and a unit's loads the
// same way.
const maxPackedLocalBytes = 32

// logKernelResources logs a loaded kernel's registers and local memory a
// thread, and returns the latter.
func logKernelResources(t *testing.T, b *Backend, name string) (localBytes int) {
	t.Helper()
	local, err := b.KernelLocalBytes(name)
	if err != nil {
		t.Fatal(err)
	}
	regs, err := b.KernelRegisters(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d registers, %d bytes of local memory", name, regs, local)
	return local
}

func TestPackedKernelsKeepToRegisters(t *testing.T) {
	b := gpu(t)
	n := 0
	for _, name := range KernelNames() {
		if !strings.HasPrefix(name, "qa") && !strings.HasPrefix(name, "qmma") { // qagemv, qamoe, qarouter, qachain
			continue
		}
		n++
		local := logKernelResources(t, b, name)
		if local > maxPackedLocalBytes {
			t.Errorf("%s: %d bytes of local memory a thread (at most %d)", name, local, maxPackedLocalBytes)
		}
	}
	if n == 0 {
		t.Fatal("no integer affine kernels loaded")
	}
}

func TestQuantSelftest(t *testing.T) {
	b := gpu(t)
	for _, f := range []string{"qmatmul", "qmoe", "qembedding"} {
		rs, err := selftest.RunWith(b, selftest.Options{Filter: f}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			t.Fatalf("no %s checks", f)
		}
		for _, r := range rs {
			switch {
			case r.Skipped && refused(b, r.Case):
				t.Logf("%s: skipped, as it should be: %v", r.Case, r.Err)
			case !r.Passed() || r.Skipped:
				t.Errorf("%s %s: %v", r.Case, r.Shape, r.Err)
			default:
				t.Logf("%s: max abs error %.2g", r.Case, r.MaxErr)
			}
		}
	}
}

// refused: a selftest case whose packed dtype the backend refuses (affine
// widths other than 4 and 8, which the engine runs widened).
func refused(b *Backend, name string) bool {
	_, d, ok := strings.Cut(name, "dtype=")
	if !ok {
		return false
	}
	d, _, _ = strings.Cut(d, "/")
	q, ok := ops.DType(d).Quant()
	return ok && b.SupportsQuant(q) != nil
}
