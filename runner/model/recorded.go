package model

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mtlbench/mtlbench/internal/suggest"
)

// CheckRecordedName says whether name can be the model a run records, for
// a name given to be recorded without opening a model (peer import
// --model), so that its cases line up with mtlbench's own: a preset, or
// the name Open gives a checkpoint, its folder's base name (a Hugging Face
// cache snapshot's repository's: checkpointName) or its GGUF file's name
// without .gguf. A path or a file name is never recorded, and
// a name within a few edits of a preset is taken for a typo of it (one
// that differs only in case is a checkpoint's: Qwen3-30B-A3B). The error
// begins with the name quoted, for the caller to prefix with its flag.
func CheckRecordedName(name string) error {
	switch {
	case IsPreset(name):
		return nil
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%q: an empty model name (give a preset: %s)", name, joinNames(PresetNames()))
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("%q: a run records a checkpoint by its folder's name (%q), never a path or a repository id", name, filepath.Base(filepath.Clean(name)))
	case strings.EqualFold(filepath.Ext(name), ".gguf"):
		return fmt.Errorf("%q: a run records a GGUF file by its name without .gguf (%q)", name, strings.TrimSuffix(name, filepath.Ext(name)))
	}
	if best := suggest.Typo(name, PresetNames()); best != "" && !strings.EqualFold(best, name) {
		return fmt.Errorf("%q is no preset (did you mean %q?); a checkpoint's runs record its folder's name, a GGUF file's its name without .gguf", name, best)
	}
	return nil
}
