package engine

import (
	"runtime"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/runner/sample"
)

// A batch of sampled sequences holds one sampler's scratch, not one each:
// sized by the vocabulary (1.2 MiB for Qwen3's), it would be memory the fit
// check does not count, as much again as the sampled rows' logits it does
// (a batch of 256 on Qwen3: 310 MiB).
func TestSampledBatchSharesTheScratch(t *testing.T) {
	cfg, err := model.Preset("qwen3-moe-mini")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = cfg.WithLayers(1); err != nil {
		t.Fatal(err)
	}
	const seqs = 64
	e, err := New(cpu.New(cpu.Options{}), cfg, model.NewCached(model.NewSynthetic(1, bridge.BF16)), Options{KVTokens: seqs * 16, MaxSeqs: seqs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reqs := func(first int, sp sample.Params) []Request {
		var rs []Request
		for i := range seqs {
			rs = append(rs, Request{ID: first + i, Prompt: []int32{int32(i), 7, 9, 11}, MaxNewTokens: 3, Sampling: sp})
		}
		return rs
	}
	// The steps' workspaces and the host's copy of the logits, made once.
	if _, err := e.Generate(reqs(0, sample.Params{Temperature: 1, TopK: 1})); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for _, r := range reqs(seqs, sample.Params{Temperature: 1, TopP: 0.9}) {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grew := int64(ms.HeapAlloc) - int64(before)
	// One scratch over 8192 logits and the requests' own state: tens to
	// hundreds of KiB; a scratch a sequence held 4 MiB.
	if limit := int64(2 << 20); grew > limit {
		t.Errorf("%d sampled sequences hold %d KiB after two steps, want at most %d KiB", seqs, grew>>10, limit>>10)
	}
}
