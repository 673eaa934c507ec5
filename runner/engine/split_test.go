package engine_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/runner/engine"
	"github.com/mtlbench/mtlbench/runner/engine/enginetest"
	"github.com/mtlbench/mtlbench/runner/model"
)

// A GGUF file split into parts by gguf-py's writer runs as the whole file
// it was split from: opened by any of its parts, transformers' logits on
// the CPU, every prompt.
func TestSplitGGUFMatchesTransformers(t *testing.T) {
	parts, refs := enginetest.SplitFixtures(t, "../testdata")
	for i, second := range parts {
		ref := enginetest.ReadReference(t, refs[i])
		all, _ := filepath.Glob(strings.Replace(second, "-00002-of-", "-*-of-", 1))
		for _, part := range all {
			t.Run(filepath.Base(part), func(t *testing.T) {
				cfg, src, err := model.Open(model.Spec{Model: part})
				if err != nil {
					t.Fatal(err)
				}
				defer src.Close()
				if want := fmt.Sprintf("(%d parts)", len(all)); !strings.HasSuffix(src.Describe(), want) {
					t.Errorf("described as %q, want the %d parts", src.Describe(), len(all))
				}
				if want := strings.TrimSuffix(filepath.Base(refs[i]), ".json"); cfg.Name != want {
					t.Errorf("named %q, want the whole file's %q", cfg.Name, want)
				}
				e, err := engine.New(cpu.New(cpu.Options{}), cfg, src, engine.Options{})
				if err != nil {
					t.Fatal(err)
				}
				enginetest.MatchesReference(t, e, ref, 0, 1e-3)
			})
		}
	}
}
