// Package enginetest holds the engine-level check every backend's tests
// run: a prompt's logits from one prefill step against the same prompt fed
// a token a step (runner/engine, bridge/metal and bridge/cuda
// prefill_test.go), each backend with its own tolerance.
package enginetest

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/kernels/quant"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/safetensors"
)

// PromptLengths cross the GPU kernels' tiles (32 and 64 rows), the cache's
// blocks (16 slots) and the prefill attention's query blocks.
var PromptLengths = []int{1, 15, 16, 17, 300, 1000}

// Prompt is a deterministic n-token prompt over vocab token ids.
func Prompt(n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7919 + 13) % vocab)
	}
	return p
}

// PrefillAndStep opens two engines on be: one with o (its TokenBudget
// takes whole prompts; 0 is the engine's default) and one that feeds a
// token a step. The function it returns gives the logits after an n-token
// Prompt from each, failing the test (or subtest) it is given.
func PrefillAndStep(t testing.TB, be bridge.Backend, cfg *model.Config, src model.Source, o engine.Options) func(t testing.TB, n int) (whole, single []float32) {
	t.Helper()
	var engines [2]*engine.Engine
	for i, budget := range []int{o.TokenBudget, 1} {
		oo := o
		oo.TokenBudget = budget
		e, err := engine.New(be, cfg, src, oo)
		if err != nil {
			t.Fatal(err)
		}
		engines[i] = e
	}
	return func(t testing.TB, n int) ([]float32, []float32) {
		t.Helper()
		var logits [2][]float32
		for i, e := range engines {
			out, err := e.Generate([]engine.Request{{ID: n, Prompt: Prompt(n, cfg.Vocab), MaxNewTokens: 1, WantLogits: true}})
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = out[0].Logits
		}
		return logits[0], logits[1]
	}
}

// NarrowAffine opens preset (cut to layers) with synthetic MLX affine
// weights of bits bits, its MoE routers at routerBits (0: as the q4 preset
// keeps them, 8): the 2-, 3-, 5- and 6-bit checkpoints mlx-community
// publishes, which Metal runs as stored and CUDA widened
// (engine.RunConfig). The source draws the weights at those widths.
func NarrowAffine(t testing.TB, preset string, layers, bits, routerBits int) (*model.Config, model.Source) {
	t.Helper()
	cfg, src, err := model.Open(model.Spec{Model: preset, Quant: "q4", Layers: layers, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	// The source reads the same scheme: its specs are set in place.
	cfg.Quant.Default.Bits = bits
	for name, s := range cfg.Quant.Per {
		if s != nil && routerBits > 0 && strings.HasSuffix(name, "mlp.gate.weight") {
			s.Bits = routerBits
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg, src
}

// AsStored is the CPU backend running every affine width as stored, where
// the engine would load its 2-, 3-, 5- and 6-bit matrices widened
// (cpu.QuantRules.PrefersWider): the reference for the narrow kernels.
type AsStored struct{ *cpu.Backend }

// PrefersWider: none.
func (AsStored) PrefersWider(quant.Spec) bool { return false }

// NarrowAffineMatchesCPU runs NarrowAffine(preset, layers, bits, routerBits)
// on be, which must run it at runs bits (engine.RunConfig), and on the CPU
// running it as stored (AsStored): two prompts of 9 and 30 tokens give the CPU's
// tokens and last logits within tol.
func NarrowAffineMatchesCPU(t *testing.T, be bridge.Backend, preset string, layers, bits, routerBits, runs int, tol float64) {
	t.Helper()
	cfg, src := NarrowAffine(t, preset, layers, bits, routerBits)
	reqs := []engine.Request{{ID: 1, Prompt: Prompt(9, cfg.Vocab), MaxNewTokens: 3, WantLogits: true},
		{ID: 2, Prompt: Prompt(30, cfg.Vocab), MaxNewTokens: 3, WantLogits: true}}
	var outs [2][]engine.Output
	for i, b := range []bridge.Backend{AsStored{cpu.New(cpu.Options{})}, be} {
		e, err := engine.New(b, cfg, src, engine.Options{KVTokens: 256, KVDType: "f32"})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{bits, runs}[i]; e.Config().Quant.Default.Bits != want {
			t.Errorf("%s runs %d-bit weights at %d bits, want %d", b.Info().Backend, bits, e.Config().Quant.Default.Bits, want)
		}
		if outs[i], err = e.Generate(reqs); err != nil {
			t.Fatal(err)
		}
	}
	OutputsMatch(t, outs[1], outs[0], "the CPU's", tol)
}

// OutputsMatch fails t unless every request of got has the tokens of
// want's (the reference, named by whose) and its last logits within tol.
func OutputsMatch(t testing.TB, got, want []engine.Output, whose string, tol float64) {
	t.Helper()
	for i := range want {
		var d float64
		for j, v := range got[i].Logits {
			d = math.Max(d, math.Abs(float64(v-want[i].Logits[j])))
		}
		t.Logf("request %d: tokens %v, logits within %.2g of %s", i, got[i].Tokens, d, whose)
		if !slices.Equal(got[i].Tokens, want[i].Tokens) || d > tol {
			t.Errorf("request %d: tokens %v (%s %v), logits %.3g off %s", i, got[i].Tokens, whose, want[i].Tokens, d, whose)
		}
	}
}

// MLXWritten copies the checkpoint folder dir into a temporary folder with
// each .safetensors header as mlx's save_safetensors writes it: the JSON
// unpadded, so the data, and every tensor in it, may start at any byte.
// Here it starts at an odd offset, which no kernel's widest load allows.
func MLXWritten(t testing.TB, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(e.Name(), ".safetensors") {
			n := binary.LittleEndian.Uint64(b)
			header := strings.TrimRight(string(b[8:8+n]), " ")
			if (8+len(header))%2 == 0 {
				header += " "
			}
			nb := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
			b = append(append(nb, header...), b[8+n:]...)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Reference is a fixture's reference.json (tools/fixtures): for each
// prompt, the logits transformers gave at its last position and its greedy
// continuation.
type Reference struct {
	Architecture string `json:"architecture"`
	Prompts      []struct {
		Tokens     []int32   `json:"tokens"`
		LogitsLast []float32 `json:"logits_last"`
		Greedy     []int32   `json:"greedy"`
	} `json:"prompts"`
}

// ReadReference reads a fixture's reference.json.
func ReadReference(t testing.TB, path string) *Reference {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r Reference
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &r
}

// SplitFixtures are the split GGUF fixtures under root (runner/testdata),
// each as the path of its second part (a part other than the first, which
// must find the rest) and the reference of the whole file it was split
// from (tools/fixtures/make_split_fixtures.py).
func SplitFixtures(t testing.TB, root string) (parts, refs []string) {
	t.Helper()
	seconds, _ := filepath.Glob(filepath.Join(root, "gguf", "split", "*-00002-of-*.gguf"))
	if len(seconds) == 0 {
		t.Fatalf("no split GGUF fixtures under %s", filepath.Join(root, "gguf", "split"))
	}
	for _, p := range seconds {
		stem := filepath.Base(p)
		stem = stem[:strings.LastIndex(stem, "-00002-of-")]
		parts, refs = append(parts, p), append(refs, filepath.Join(root, "gguf", stem+".json"))
	}
	return parts, refs
}

// MatchesReference generates ref's last n prompts (every prompt when n is
// 0) on e: the last position's logits within tol of transformers', and the
// same greedy tokens.
func MatchesReference(t testing.TB, e *engine.Engine, ref *Reference, n int, tol float64) {
	t.Helper()
	prompts := ref.Prompts
	if n > 0 && n < len(prompts) {
		prompts = prompts[len(prompts)-n:]
	}
	for i, p := range prompts {
		out, err := e.Generate([]engine.Request{{ID: i + 1, Prompt: p.Tokens, MaxNewTokens: len(p.Greedy), WantLogits: true}})
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for j, v := range p.LogitsLast {
			d = math.Max(d, math.Abs(float64(out[0].Logits[j]-v)))
		}
		t.Logf("%d-token prompt: logits max abs error %.2g", len(p.Tokens), d)
		if d > tol {
			t.Errorf("%d-token prompt: logits max abs error %.3g > %g", len(p.Tokens), d, tol)
		}
		if !slices.Equal(out[0].Tokens, p.Greedy) {
			t.Errorf("%d-token prompt: greedy tokens %v, transformers %v", len(p.Tokens), out[0].Tokens, p.Greedy)
		}
	}
}

// drops counts the mapped bytes a backend hands back to a source
// (bridge.CopyDropper).
type drops struct{ n int64 }

func (d *drops) add(src model.MappedSource, b []byte) {
	if src.Mapped(b) {
		d.n += int64(len(b))
	}
}

type checkpointDrops struct {
	*model.Checkpoint
	drops
}

func (c *checkpointDrops) Drop(b []byte) { c.add(c.Checkpoint, b); c.Checkpoint.Drop(b) }

type ggufDrops struct {
	*model.GGUFSource
	drops
}

func (g *ggufDrops) Drop(b []byte) { g.add(g.GGUFSource, b); g.GGUFSource.Drop(b) }

// CountDrops wraps a checkpoint folder's or a GGUF file's source in one
// that counts the mapped bytes a backend hands back once it has copied them
// (bridge.CopyDropper), as the pages are given back; n reports the count.
func CountDrops(t testing.TB, src model.Source) (counted model.Source, n func() int64) {
	t.Helper()
	switch s := src.(type) {
	case *model.Checkpoint:
		c := &checkpointDrops{Checkpoint: s}
		return c, func() int64 { return c.n }
	case *model.GGUFSource:
		g := &ggufDrops{GGUFSource: s}
		return g, func() int64 { return g.n }
	}
	t.Fatalf("no drop counter for a %T", src)
	return nil, nil
}

// CopiedOnce runs the mlx fixture dir, laid out as mlx writes it
// (MLXWritten), on a backend that cannot read its unaligned tensors in place
// (a discrete GPU, or Metal's 16-byte loads): the logits within tol of
// transformers', and every byte of the weights handed back once copied, so
// the file's pages do not stay resident beside the copy.
func CopiedOnce(t *testing.T, be bridge.Backend, dir string, o engine.Options, tol float64) {
	t.Helper()
	odd := MLXWritten(t, dir)
	cfg, ck, err := model.OpenDir(odd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	src, dropped := CountDrops(t, ck)
	e, err := engine.New(be, cfg, src, o)
	if err != nil {
		t.Fatal(err)
	}
	MatchesReference(t, e, ReadReference(t, filepath.Join(dir, "reference.json")), 1, tol)
	sc, err := safetensors.OpenDir(odd)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	t.Logf("%d of the weights' %d bytes copied and handed back", dropped(), sc.TotalBytes())
	if dropped() != sc.TotalBytes() {
		t.Errorf("%d of the weights' %d bytes handed back, want all", dropped(), sc.TotalBytes())
	}
}
