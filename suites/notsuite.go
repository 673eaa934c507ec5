package suites

import (
	"fmt"
	"path/filepath"

	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/shquote"
)

// readSuite reads the suite file at path: the one place a suite file is
// read, so that a file of another kind given by mistake (the results
// database, a model's weights) is named for what it is and for the command
// that takes it, whether or not it is small enough to read whole.
func readSuite(path string) ([]byte, error) {
	data, err := readfile.Read(path, readfile.Suite, "a suite")
	head := data
	if err != nil {
		head = readfile.Head(path)
	}
	if e := notASuite(path, readfile.KindOf(head)); e != nil {
		return nil, e
	}
	return data, err
}

// notASuite is the error for a suite path that holds a file of kind k,
// naming the commands that read it; nil for Unknown, which the YAML parser
// judges. It is an input error, as a folder given for a suite is.
func notASuite(path string, k readfile.Kind) error {
	q := shquote.Quote(path)
	var hint string
	switch k {
	case readfile.SQLite:
		hint = fmt.Sprintf("mtlbench keeps its results in one: list its runs with `mtlbench runs --db %s`, or report them with `mtlbench report --db %s`", q, q)
	case readfile.GGUF:
		hint = fmt.Sprintf("benchmark it with `mtlbench bench -m %s`, run it with `mtlbench generate --model %s`, or name it in a suite's model: {path: ...}", q, q)
	case readfile.Safetensors:
		// A checkpoint is a folder: its config.json says what the tensors are.
		dir := shquote.Quote(filepath.Dir(path))
		hint = fmt.Sprintf("a checkpoint is the folder that holds it and its config.json: benchmark it with `mtlbench bench -m %s`, run it with `mtlbench generate --model %s`, or name the folder in a suite's model: {path: ...}", dir, dir)
	default:
		return nil
	}
	return readfile.NotA(fmt.Sprintf("%s: %s, not a suite (%s)", path, k, hint))
}
