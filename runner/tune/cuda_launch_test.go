//go:build linux

package tune

import (
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// Every config in the declared space of every CUDA tunable kernel computes
// what the reference does, at shapes with ragged edges: a candidate the
// tuner might pick must never be wrong.
func TestLaunchConfigsMatchReference(t *testing.T) {
	o, err := envconfig.CUDA()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cuda.New(o)
	if err != nil {
		if strings.HasPrefix(err.Error(), "no CUDA") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer b.Close()
	shapes := map[ops.ID][]Shape{
		ops.MatMul: {{ops.M: 1, ops.N: 1000, ops.K: 2048}, {ops.M: 3, ops.N: 4096, ops.K: 512}, {ops.M: 8, ops.N: 200, ops.K: 1024}},
		ops.PagedAttentionDecode: {{ops.Seqs: 3, ops.Context: 300, ops.NumHeads: 8, ops.NumKVHeads: 2, ops.HeadSize: 128, ops.BlockSize: 16},
			{ops.Seqs: 1, ops.Context: 2000, ops.NumHeads: 4, ops.NumKVHeads: 4, ops.HeadSize: 64, ops.BlockSize: 32}},
		ops.MoE: {{ops.Tokens: 1, ops.Experts: 16, ops.TopK: 4, ops.Hidden: 512, ops.Intermediate: 256},
			{ops.Tokens: 5, ops.Experts: 16, ops.TopK: 4, ops.Hidden: 512, ops.Intermediate: 264}},
		ops.QMatMul: {{ops.M: 1, ops.N: 1000, ops.K: 2048}, {ops.M: 3, ops.N: 4099, ops.K: 512}, {ops.M: 9, ops.N: 200, ops.K: 1024}},
	}
	lim := LimitsOf(b)
	for _, k := range Kernels("cuda") {
		for _, s := range shapes[k.Op] {
			s, err := k.Normalize(s, lim)
			if err != nil {
				t.Fatal(err)
			}
			bench, err := kbench.Prepare(b, ops.Args{Op: k.Op, Ints: k.OpParams(s), DType: ops.DType(k.DType)})
			if err != nil {
				t.Fatal(err)
			}
			cands, _ := k.Candidates(s, lim)
			for _, cfg := range cands {
				b.SetLaunchConfig(string(k.Op), func(string, map[string]int) (map[string]string, bool) { return cfg, true })
				if _, err := bench.Check(); err != nil {
					t.Errorf("%s %s config %s: %v", k.Op, s.Key(), k.String(cfg), err)
				}
			}
			b.SetLaunchConfig(string(k.Op), nil)
			t.Logf("%s %s: %d configs checked", k.Op, s.Key(), len(cands))
			bench.Close()
		}
	}
}
