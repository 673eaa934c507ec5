package gguf

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/mtlbench/mtlbench/internal/plural"
)

// Split files. llama.cpp's gguf-split and gguf-py's writer
// (convert_hf_to_gguf.py --split-max-tensors, --split-max-size) cut a model
// into parts named NAME-00001-of-0000N.gguf. Each part is a GGUF file of its
// own with split.no (from 0), split.count and split.tensors.count; the first
// holds the model's metadata, and the tensors are spread over the parts,
// each part's offsets into its own data. Open maps every part and serves
// them as one file (docs/quantization.md, "GGUF files").

// maxParts is the most parts split.count, a u16, can name.
const maxParts = 1<<16 - 1

// Open maps and validates path. When path is one part of a split file, the
// other parts are found beside it by the names gguf-split gives them, and
// all are opened as one file, whichever part path names.
func Open(path string) (*File, error) {
	f, err := openPart(path)
	if err != nil {
		return nil, err
	}
	no, count, err := splitKeys(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if count <= 1 {
		// A part whose split.count was made 1 (a part of a split file, its
		// keys edited) would be read as the whole model, its missing
		// tensors then named one by one with no word of why.
		if err := checkTensorCount(f, 1); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	names, err := partNames(path, no, count)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	parts := make([]*File, count)
	parts[no] = f
	g, err := joinParts(path, names, parts)
	if err != nil {
		for _, p := range parts {
			if p != nil {
				p.Close()
			}
		}
		return nil, err
	}
	return g, nil
}

// splitKeys reads a part's place: count 0 for a file that is not split.
func splitKeys(f *File) (no, count int, err error) {
	c, ok, err := splitInt(f, "split.count", 0, maxParts)
	if err != nil || !ok || c <= 1 {
		return 0, int(c), err
	}
	n, ok, err := splitInt(f, "split.no", 0, c-1)
	if err == nil && !ok {
		err = fmt.Errorf("split.count is %d but there is no split.no to say which part this is", c)
	}
	return int(n), int(c), err
}

// splitInt reads an integer split key within [lo, hi].
func splitInt(f *File, key string, lo, hi int64) (int64, bool, error) {
	v, ok := f.KV[key]
	if !ok {
		return 0, false, nil
	}
	switch v.Type {
	case U8, I8, U16, I16, U32, I32, I64:
	case U64:
		if v.Uint > uint64(hi) {
			return 0, true, fmt.Errorf("%s is %d (%d to %d)", key, v.Uint, lo, hi)
		}
	default:
		return 0, true, fmt.Errorf("%s is a %v, not an integer", key, v.Type)
	}
	if v.Int < lo || v.Int > hi {
		return 0, true, fmt.Errorf("%s is %d (%d to %d)", key, v.Int, lo, hi)
	}
	return v.Int, true, nil
}

// partNames are the paths of the count parts of the split file path is
// part no+1 of: its name with gguf-split's "-%05d-of-%05d" numbered anew,
// "-of-" and ".gguf" spelt as path spells them (a name matched regardless
// of case is kept as the files are named: "-OF-" stays "-OF-").
func partNames(path string, no, count int) ([]string, error) {
	suffix := fmt.Sprintf("-%05d-of-%05d.gguf", no+1, count)
	if len(path) <= len(suffix) || !strings.EqualFold(path[len(path)-len(suffix):], suffix) {
		return nil, fmt.Errorf("part %d of %d of a split GGUF file (split.no, split.count), but its name does not end in %q as gguf-split names the parts, so the others cannot be found: give the parts their written names, or merge them (llama-gguf-split --merge FIRST-PART OUT.gguf)",
			no+1, count, suffix)
	}
	prefix, written := path[:len(path)-len(suffix)], path[len(path)-len(suffix):]
	of, ext := written[6:10], written[len(written)-len(".gguf"):]
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d%s%05d%s", prefix, i+1, of, count, ext)
	}
	return names, nil
}

// joinParts opens the parts not yet open (nil in parts), checks that each
// is the part its name says, and folds their tensors into the first.
func joinParts(path string, names []string, parts []*File) (*File, error) {
	count := len(parts)
	for i, name := range names {
		if parts[i] != nil {
			continue
		}
		p, err := openPart(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: part %d of %d of the split GGUF file is missing (%s is another part; a split file's parts must lie together, named as gguf-split wrote them)",
				name, i+1, count, path)
		}
		if err != nil {
			return nil, err
		}
		parts[i] = p
		no, c, err := splitKeys(p)
		switch {
		case err == nil && c <= 1:
			says := "no split.count"
			if _, ok := p.KV["split.count"]; ok {
				says = fmt.Sprintf("split.count %d", c)
			}
			err = fmt.Errorf("its name makes it part %d of %d of a split file, but its metadata has %s: a file of its own", i+1, count, says)
		case err == nil && (c != count || no != i):
			err = fmt.Errorf("split.no %d and split.count %d make it part %d of %d, but its name makes it part %d of %d", no, c, no+1, c, i+1, count)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	f := parts[0]
	for i, p := range parts[1:] {
		for _, t := range p.Tensors {
			if j, dup := f.byName[t.Name]; dup {
				return nil, fmt.Errorf("%s: tensor %q is in part %d and again in part %d (%s)", f.Path, t.Name, f.Tensors[j].part+1, i+2, p.Path)
			}
			t.part = i + 1
			f.byName[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
		}
	}
	if err := checkTensorCount(f, count); err != nil {
		return nil, err
	}
	f.more, f.Parts = parts[1:], names
	return f, nil
}

// checkTensorCount holds f, of count parts joined, to its split.tensors.count
// where it has one.
func checkTensorCount(f *File, count int) error {
	want, ok, err := splitInt(f, "split.tensors.count", 0, 1<<62)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", f.Path, err)
	case !ok || int(want) == len(f.Tensors):
		return nil
	case count == 1:
		return fmt.Errorf("%s: split.tensors.count is %d, but the file holds %s: a part of a split file whose split.count says it is whole?", f.Path, want, plural.Of(len(f.Tensors), "tensor"))
	}
	return fmt.Errorf("%s: split.tensors.count is %d, but the %d parts hold %d tensors", f.Path, want, count, len(f.Tensors))
}
