//go:build linux

package tune

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/runner/envconfig"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/suites"
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
	shapes := map[string][]Shape{
		"matmul": {{"m": 1, "n": 1000, "k": 2048}, {"m": 3, "n": 4096, "k": 512}, {"m": 8, "n": 200, "k": 1024}},
		"paged_attention_decode": {{"seqs": 3, "context": 300, "num_heads": 8, "num_kv_heads": 2, "head_size": 128, "block_size": 16},
			{"seqs": 1, "context": 2000, "num_heads": 4, "num_kv_heads": 4, "head_size": 64, "block_size": 32}},
		"moe": {{"tokens": 1, "experts": 16, "top_k": 4, "hidden": 512, "intermediate": 256},
			{"tokens": 5, "experts": 16, "top_k": 4, "hidden": 512, "intermediate": 264}},
	}
	lim := LimitsOf(b)
	for _, k := range Kernels("cuda") {
		for _, s := range shapes[k.Name] {
			s, err := k.Normalize(s, lim)
			if err != nil {
				t.Fatal(err)
			}
			c := suites.Case{Kind: suites.KindKernel, Op: k.Name, Name: k.Name, Params: map[string]suites.Value{}}
			for name, v := range k.OpParams(s) {
				c.Params[name] = suites.Value{Raw: strconv.Itoa(v), Int: int64(v), Float: float64(v), IsNum: true}
			}
			c.Params["dtype"] = suites.Value{Raw: "bf16"}
			bench, err := kbench.Prepare(b, c)
			if err != nil {
				t.Fatal(err)
			}
			cands, _ := k.Space(s, lim)
			for _, cfg := range cands {
				b.SetLaunchConfig(k.Name, func(map[string]int) (map[string]string, bool) { return cfg, true })
				if _, err := bench.Check(); err != nil {
					t.Errorf("%s %s config %s: %v", k.Name, s.Key(), k.String(cfg), err)
				}
			}
			b.SetLaunchConfig(k.Name, nil)
			t.Logf("%s %s: %d configs checked", k.Name, s.Key(), len(cands))
			bench.Close()
		}
	}
}
