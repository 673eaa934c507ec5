package suites

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/internal/shquote"
)

// readSuite reads the suite file at path: the one place a suite file is
// read, so that a file of another kind given by mistake (the results
// database, a model's weights or its checkpoint folder) is named for what
// it is and for the command that takes it, whether or not it is small
// enough to read whole.
func readSuite(path string) ([]byte, error) {
	if err := linkTrouble(path); err != nil {
		return nil, err
	}
	data, err := readfile.Read(path, readfile.Suite, "a suite")
	if errors.Is(err, readfile.ErrNotAFile) && isCheckpoint(path) {
		q := shquote.Quote(path)
		return nil, readfile.NotA(fmt.Sprintf("%s: a checkpoint folder (it holds config.json), not a suite (%s)", path, modelHint(q)))
	}
	if errors.Is(err, readfile.ErrNotAFile) && isFolder(path) {
		// A folder of suites (run suites/) was meant as the suites in it.
		if files := suiteFiles(path); len(files) > 0 {
			return nil, readfile.NotA(fmt.Sprintf("%s: a folder, not a suite; it holds %s (`mtlbench suites list %s` lists them): name one, such as %s",
				path, plural.Of(len(files), "suite file"), shquote.Quote(path), shquote.Quote(files[0])))
		}
	}
	head := data
	if err != nil {
		head = readfile.Head(path)
	}
	if e := NotAText(path, head, "a suite"); e != nil {
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

// dbHint names the commands that read the results database at q.
func dbHint(q string) string {
	return fmt.Sprintf("mtlbench keeps its results in one: list its runs with `mtlbench runs --db %s`, or report them with `mtlbench report --db %s`", q, q)
}

// weightsHint is for a safetensors file, or another file of a checkpoint
// folder, at path: the folder is what runs.
func weightsHint(path string) string {
	dir := filepath.Dir(path)
	if !isCheckpoint(dir) {
		// No command would run the folder: say what it lacks.
		where := dir
		if dir == "." {
			where = "the current folder"
		}
		return fmt.Sprintf("a checkpoint is the folder that holds it and its config.json, which %s lacks", where)
	}
	return "a checkpoint is the folder that holds it and its config.json: " + modelHint(shquote.Quote(dir))
}

// NotAText is the error for the file at path, whose first bytes are head,
// given where what is wanted: NotA for a file of another kind, and for a
// compressed one (an export sent as runs.jsonl.gz) its compression, with
// the command that decompresses it. nil where neither tells: the reader
// of what judges the file.
func NotAText(path string, head []byte, what string) error {
	if c, ok := readfile.Compression(head); ok {
		return readfile.NotA(fmt.Sprintf("%s: %s-compressed, not %s (decompress it first: %s %s)", path, c.Name, what, c.File, shquote.Quote(path)))
	}
	return NotA(path, readfile.KindOf(head), what)
}

// NotA is the error for a file at path of kind k (its first bytes'
// readfile.KindOf) given where what is wanted ("a suite", "an export
// file"): the results database, a GGUF file or a safetensors file, named
// with the commands that read it. It is nil for Unknown, which the
// reader of what judges, and an input error (readfile.ErrNotAFile).
func NotA(path string, k readfile.Kind, what string) error {
	var hint string
	switch k {
	case readfile.SQLite:
		hint = dbHint(shquote.Quote(path))
	case readfile.GGUF:
		hint = modelHint(shquote.Quote(path))
	case readfile.Safetensors:
		// A checkpoint is a folder: its config.json says what the tensors are.
		hint = weightsHint(path)
	default:
		return nil
	}
	return readfile.NotA(fmt.Sprintf("%s: %s, not %s (%s)", path, k, what, hint))
}

// NotAModel is the error for a model path (bench -m, generate --model, a
// suite's model: {path: ...}) that is a regular file but no GGUF file, by
// the rule a suite path of another kind is named (NotAText): the results
// database, a safetensors file or another file of a checkpoint folder, or
// a suite, with the commands that take it. It is an input error.
func NotAModel(path string) error {
	q := shquote.Quote(path)
	var what, hint string
	switch k := readfile.KindOf(readfile.Head(path)); {
	case k == readfile.SQLite:
		what, hint = k.String(), dbHint(q)
	case k == readfile.Safetensors:
		what, hint = k.String(), weightsHint(path)
	case k == readfile.Unknown && isCheckpoint(filepath.Dir(path)):
		// config.json or tokenizer.json given for the folder that holds it.
		what, hint = "a file of a checkpoint folder", weightsHint(path)
	case k == readfile.Unknown && IsSuite(path):
		what, hint = "a suite", fmt.Sprintf("run it with `mtlbench run %s`", q)
	case isEmptyFile(path):
		// Said as empty, not as missing GGUF's magic: a download or copy
		// that failed leaves one.
		what, hint = "an empty file", "give a checkpoint folder (config.json and safetensors) or a GGUF file; an empty one is often a download or copy that failed"
	default:
		return readfile.NotA(fmt.Sprintf("model %q is a file but not a GGUF file (it does not open with GGUF's magic): give a checkpoint folder (config.json and safetensors) or a GGUF file", path))
	}
	return readfile.NotA(fmt.Sprintf("model %q is %s, not a checkpoint (%s)", path, what, hint))
}

// ShippedSuiteHint says, of a model name that is no preset and no path,
// that it names a built-in suite and how to run it; "" for another name.
func ShippedSuiteHint(name string) string {
	base := suiteName(name)
	if !slices.Contains(ShippedNames(), base) {
		return ""
	}
	return fmt.Sprintf("%s is a built-in suite: run it with `mtlbench run %s`", name, shquote.Quote(base))
}

// FolderHint says, of a folder given as a model that has no config.json,
// what makes it look a suite's: its name has a suite file's extension (a
// folder never is a suite, docs/suites.md), or it holds suite files, with
// the commands that take them; "" for neither.
func FolderHint(dir string) string {
	var found []string
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if p := filepath.Join(dir, e.Name()); suiteName(e.Name()) != e.Name() && !isFolder(p) {
				found = append(found, p)
			}
		}
	}
	q := shquote.Quote(dir)
	dir = filepath.Clean(dir) // "x.yaml/" is named x.yaml
	var held string
	switch len(found) {
	case 0:
	case 1:
		held = fmt.Sprintf("it holds the suite %s: run it with `mtlbench run %s`", filepath.Base(found[0]), shquote.Quote(found[0]))
	default:
		held = fmt.Sprintf("it holds %d suites (%s, ...): `mtlbench suites list %s` lists them, `mtlbench run %s` runs one", len(found), filepath.Base(found[0]), q, shquote.Quote(found[0]))
	}
	if suiteName(dir) == dir {
		return held
	}
	named := fmt.Sprintf("it is named like a suite file (%s), but is a folder, and a suite is a file (`mtlbench run FILE`)", filepath.Ext(dir))
	if held == "" {
		return named
	}
	return named + "; " + held
}

// IsSuite says whether the file at path is a suite: named as suites are
// (.yaml, .yml), or one that parses. A reader of another kind of file
// (a model, a tokenizer) asks it to name a suite given by mistake.
func IsSuite(path string) bool {
	if suiteName(path) != path {
		return true
	}
	_, err := Load(path)
	return err == nil
}

// suiteName is name without a suite file's extension (.yaml or .yml, in
// any case), the one rule for what names a suite file, by which a folder
// is listed and a built-in suite named: `run ci.yml` is `run ci`, as a
// folder's ci.yml is listed as a suite.
func suiteName(name string) string {
	switch ext := filepath.Ext(name); strings.ToLower(ext) {
	case ".yaml", ".yml":
		return strings.TrimSuffix(name, ext)
	}
	return name
}

// isFolder says whether path is a folder, or a link resolving to one: never
// a suite, whatever its name, wherever a suite is named, listed or run
// (docs/suites.md). A regular file, or a link resolving to one, is a suite
// file; a link that resolves to nothing is the file meant (linkTrouble).
func isFolder(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// linkTrouble is the error of a path that is a symbolic link resolving to
// no file: to nothing (the file meant, not a built-in suite's name, and not
// "no such file", which names no link), or round a loop of links, an input
// error as a folder given for a suite is, not a suite found invalid.
func linkTrouble(path string) error {
	_, err := os.Stat(path)
	if err == nil {
		return nil
	}
	target, lerr := os.Readlink(path)
	if lerr != nil {
		return nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notFound{fmt.Sprintf("%s: a link to %s, which is not there", path, target)}
	case errors.Is(err, syscall.ELOOP):
		return readfile.NotA(fmt.Sprintf("%s: a link to %s, in a loop of links that reaches no file", path, target))
	}
	return nil
}

// isEmptyFile reports whether path is a regular file of no bytes.
func isEmptyFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Size() == 0
}

// suiteFiles are the files dir holds named as suites (*.yaml, *.yml), as
// List reads them, sorted; unread.
func suiteFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); suiteName(e.Name()) != e.Name() && !isFolder(p) {
			out = append(out, p)
		}
	}
	return out
}
