package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
)

// A checkpoint's float dtype (what `auto` gives its KV cache) is its float
// weights', as its config.json states it: never its packed matrices' scales
// (the mlx fixtures keep an f32 model's 8-bit router scales in bf16).
func TestCheckpointFloatDType(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "*", "*"))
	checked := 0
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			continue
		}
		var cfg struct {
			DType      string `json:"dtype"`
			TorchDType string `json:"torch_dtype"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		stated := cfg.DType
		if stated == "" {
			stated = cfg.TorchDType
		}
		want, ok := map[string]bridge.DType{"float32": bridge.F32, "float16": bridge.F16, "bfloat16": bridge.BF16}[stated]
		if !ok {
			continue
		}
		c, err := OpenCheckpoint(dir, nil)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if got := c.DType(); got != want {
			t.Errorf("%s: dtype %v, its config.json says %s", filepath.Base(dir), got, stated)
		}
		c.Close()
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d checkpoints state their dtype", checked)
	}
}

// A float dtype asked of a checkpoint whose every matrix is packed would
// change nothing: refused, naming the file; where float matrices remain it
// converts them.
func TestFloatDTypeOfPackedCheckpoint(t *testing.T) {
	bf := bridge.BF16
	for _, tc := range []struct {
		path    string
		refused bool
	}{
		{filepath.Join("..", "testdata", "gguf", "llama-q4_0.gguf"), true},
		{filepath.Join("..", "testdata", "mlx", "llama-q4"), true},
		{filepath.Join("..", "testdata", "hf", "llama"), false},
	} {
		_, src, err := Open(Spec{Model: tc.path, DType: &bf})
		if tc.refused {
			if err == nil || !strings.Contains(err.Error(), tc.path+": every matrix is packed") {
				t.Errorf("%s: %v", tc.path, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		src.Close()
	}
}
