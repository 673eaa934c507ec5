package suites

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/shquote"
)

// readSuite reads the suite file at path: the one place a suite file is
// read, so that a file of another kind given by mistake (the results
// database, a model's weights or its checkpoint folder) is named for what
// it is and for the command that takes it, whether or not it is small
// enough to read whole.
func readSuite(path string) ([]byte, error) {
	data, err := readfile.Read(path, readfile.Suite, "a suite")
	if errors.Is(err, readfile.ErrNotAFile) && isCheckpoint(path) {
		q := shquote.Quote(path)
		return nil, readfile.NotA(fmt.Sprintf("%s: a checkpoint folder (it holds config.json), not a suite (%s)", path, modelHint(q)))
	}
	head := data
	if err != nil {
		head = readfile.Head(path)
	}
	if e := notASuite(path, readfile.KindOf(head)); e != nil {
		return nil, e
	}
	return data, err
}

// isCheckpoint says whether dir is a checkpoint folder as bench -m takes
// one: its config.json says what the model is (transformers and mlx-lm
// both write it).
func isCheckpoint(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "config.json"))
	return err == nil && fi.Mode().IsRegular()
}

// modelHint names the commands that run the model at q, a path quoted for
// the shell.
func modelHint(q string) string {
	return fmt.Sprintf("benchmark it with `mtlbench bench -m %s`, run it with `mtlbench generate --model %s`, or name it in a suite's model: {path: ...}", q, q)
}

// notASuite is the error for a suite path that holds a file of kind k,
// naming the commands that read it; nil for Unknown, which the YAML parser
// judges. It is an input error, as a folder given for a suite is.
func notASuite(path string, k readfile.Kind) error {
	var hint string
	switch k {
	case readfile.SQLite:
		q := shquote.Quote(path)
		hint = fmt.Sprintf("mtlbench keeps its results in one: list its runs with `mtlbench runs --db %s`, or report them with `mtlbench report --db %s`", q, q)
	case readfile.GGUF:
		hint = modelHint(shquote.Quote(path))
	case readfile.Safetensors:
		// A checkpoint is a folder: its config.json says what the tensors are.
		hint = "a checkpoint is the folder that holds it and its config.json: " + modelHint(shquote.Quote(filepath.Dir(path)))
	default:
		return nil
	}
	return readfile.NotA(fmt.Sprintf("%s: %s, not a suite (%s)", path, k, hint))
}
