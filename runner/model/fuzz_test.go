package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParseHFConfig: any config.json is a config or an error, quickly,
// never a panic or a huge allocation (sizes are checked by arithmetic).
func FuzzParseHFConfig(f *testing.F) {
	for _, arch := range []string{"llama", "llama_bias", "llama_mlp_bias", "qwen2", "qwen3", "qwen3_moe", "mixtral", "mistral", "gpt2", "llama3", "qwen3_yarn"} {
		if b, err := os.ReadFile(filepath.Join("..", "testdata", "hf", arch, "config.json")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"architectures":["Qwen3MoeForCausalLM"],"num_hidden_layers":1000000000,"num_experts":1000000000}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"rope_theta":-1,"rms_norm_eps":-1}`))
	f.Add([]byte(`{"architectures":["Qwen3MoeForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_experts":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		c, err := ParseHFConfig("config.json", data)
		if err == nil {
			if c.Validate() != nil {
				t.Fatal("ParseHFConfig returned a config Validate rejects")
			}
			if c.Params() <= 0 || c.WeightBytes(0) < 0 {
				t.Fatalf("params %d", c.Params())
			}
			if !c.LearnedPositions() {
				for i, f := range c.Rotary().InvFreq(c.HeadDim) {
					if !(f >= 0) || math.IsInf(float64(f), 0) {
						t.Fatalf("rotary frequency %d is %g", i, f)
					}
				}
			}
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}
