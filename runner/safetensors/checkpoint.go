package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/jsonlen"
)

// IndexName is the shard index that HuggingFace writes next to sharded weights.
const IndexName = "model.safetensors.index.json"

// Checkpoint is a model folder: one model.safetensors, shards listed in
// model.safetensors.index.json, or (without an index) every *.safetensors
// file in the folder but Mistral's own (mistralOwn). Tensor names are
// unique across its files.
type Checkpoint struct {
	dir   string
	files []*File
	where map[string]int // tensor name -> index into files
	names []string       // sorted
	total int64
}

type index struct {
	// A null is kept apart from "" to be named as what it is.
	WeightMap map[string]*string `json:"weight_map"`
}

// Memory is the memory the checkpoint's files hold: their mappings.
func (c *Checkpoint) Memory() [][]byte {
	var out [][]byte
	for _, f := range c.files {
		out = append(out, f.Memory())
	}
	return out
}

// OpenDir opens the checkpoint in dir. model.safetensors wins over an
// index beside it, as transformers' loader picks it first.
func OpenDir(dir string) (*Checkpoint, error) {
	return OpenDirMax(dir, 0)
}

// ErrTooManyTensors is the error of a checkpoint holding more tensors than
// the bound OpenDirMax was given.
var ErrTooManyTensors = errors.New("it is another model's checkpoint, or a damaged one")

// ErrNoWeights is the error of a folder holding no .safetensors file, which
// a caller knowing the folder's configuration can name better.
var ErrNoWeights = errors.New("no .safetensors files")

// OpenDirMax is OpenDir refusing a checkpoint of more than maxTensors
// tensors (0: no bound) as soon as a header is past it: a header of
// millions of empty tensors costs seconds and gigabytes to read whole.
func OpenDirMax(dir string, maxTensors int) (*Checkpoint, error) {
	single := filepath.Join(dir, "model.safetensors")
	if fi, err := os.Stat(single); err == nil && !fi.IsDir() {
		return openFiles(dir, []string{single}, nil, maxTensors)
	}
	idxPath := filepath.Join(dir, IndexName)
	raw, err := readfile.Read(idxPath, readfile.Index, "a checkpoint index")
	switch {
	case err == nil:
		return openIndexed(dir, idxPath, raw, maxTensors)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	// Without an index, model.safetensors alone is the checkpoint even if
	// other .safetensors files (e.g. adapters) sit beside it.
	if _, err := os.Stat(single); err == nil {
		return openFiles(dir, []string{single}, nil, maxTensors)
	} else if err := danglingLink(single); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths, own []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		// Stat, not e.Type(): HuggingFace caches hold shards as symlinks.
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			if mistralOwn(e.Name()) {
				own = append(own, p)
			} else {
				paths = append(paths, p)
			}
		} else if err := danglingLink(p); err != nil {
			return nil, err
		}
	}
	if len(paths) == 0 && len(own) > 0 {
		return nil, fmt.Errorf("%s: %s is Mistral's own checkpoint format (mistral_inference's tensor names, described by params.json), which transformers does not read: mtlbench reads the Hugging Face shards (model-*.safetensors and %s) that Mistral's repositories hold beside it", dir, filepath.Base(own[0]), IndexName)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: %w (and no %s)", dir, ErrNoWeights, IndexName)
	}
	if err := missingPart(dir, paths); err != nil {
		return nil, err
	}
	return openFiles(dir, paths, nil, maxTensors)
}

// mistralOwn reports whether a file is of Mistral's own checkpoint format
// (consolidated.safetensors, or consolidated-00001-of-00002.safetensors),
// which Mistral's hub repositories hold beside the Hugging Face shards: the
// same weights under other names, never read by transformers' loader, which
// reads model.safetensors or the index alone.
func mistralOwn(name string) bool { return strings.HasPrefix(name, "consolidated") }

// numbered is a shard's name as transformers' save_pretrained writes it,
// PREFIX-00001-of-00004.safetensors.
var numbered = regexp.MustCompile(`^(.*)-([0-9]+)-of-([0-9]+)\.safetensors$`)

// missingPart names a shard that numbered shards without their index say
// there is but the folder lacks (a download cut short): read without it,
// its tensors would be reported missing one by one, with no word of why.
func missingPart(dir string, paths []string) error {
	have := map[string]bool{}
	for _, p := range paths {
		have[filepath.Base(p)] = true
	}
	for _, p := range paths {
		m := numbered.FindStringSubmatch(filepath.Base(p))
		if m == nil {
			continue
		}
		count, err := strconv.Atoi(m[3])
		if err != nil || count > 1<<16 {
			continue // no numbering a writer gives
		}
		for i := 1; i <= count; i++ {
			name := fmt.Sprintf("%s-%0*d-of-%s.safetensors", m[1], len(m[2]), i, m[3])
			if !have[name] {
				return fmt.Errorf("%s: %s is missing, part %d of %d beside %s, and there is no %s to say the folder holds the checkpoint without it (a download cut short?)",
					dir, name, i, count, filepath.Base(p), IndexName)
			}
		}
	}
	return nil
}

// danglingLink names a symlink whose target is missing, as a half-cleaned
// HuggingFace cache leaves a shard: skipped, its tensors would be reported
// missing with no word of why.
func danglingLink(p string) error {
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	if _, err := os.Stat(p); err != nil {
		target, _ := os.Readlink(p)
		// A link that leads back to itself is not a missing file.
		what := "is missing"
		if errors.Is(err, syscall.ELOOP) {
			what = "leads back to a symlink without end"
		}
		return fmt.Errorf("%s: a symlink to %s, which %s (%v)", p, target, what, errors.Unwrap(err))
	}
	return nil
}

func openIndexed(dir, idxPath string, raw []byte, maxTensors int) (*Checkpoint, error) {
	if err := jsonerr.UTF8(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", idxPath, err)
	}
	// The tensors are counted before the map is decoded: decoded, each
	// entry costs ten times its bytes.
	if n := jsonlen.Most(raw, "weight_map"); maxTensors > 0 && n > maxTensors {
		return nil, fmt.Errorf("%s: weight_map lists %d tensors, more than the %d the model could read: %w", idxPath, n, maxTensors, ErrTooManyTensors)
	}
	// transformers reads the index with Python's json: a key given twice
	// keeps its last value whole, where encoding/json would merge two
	// weight_maps.
	var idx index
	if err := json.Unmarshal(jsonerr.Python(raw, &idx), &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", idxPath, jsonerr.ExplainFile(err, raw))
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is empty or missing", idxPath)
	}
	weightMap := make(map[string]string, len(idx.WeightMap))
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		shard := idx.WeightMap[name]
		if shard == nil {
			// transformers' loader fails on it (os.path.join of None).
			return nil, fmt.Errorf("%s: weight_map[%q] is null, want the name of a shard", idxPath, name)
		}
		weightMap[name] = *shard
	}
	var shards []string
	first := map[string]string{} // a shard's first tensor, which errors about it name
	for _, name := range slices.Sorted(maps.Keys(weightMap)) {
		shard := weightMap[name]
		// The index is untrusted input: keep it from pointing outside dir.
		if !filepath.IsLocal(shard) {
			return nil, fmt.Errorf("%s: tensor %q maps to %q, which is not a file inside the folder", idxPath, name, shard)
		}
		shard = filepath.Clean(shard)
		if !slices.Contains(shards, shard) {
			shards = append(shards, shard)
			first[shard] = name
		}
	}
	slices.Sort(shards)
	paths := make([]string, len(shards))
	for i, s := range shards {
		paths[i] = filepath.Join(dir, s)
		fi, err := os.Stat(paths[i])
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%s names shard %s, which is missing", idxPath, s)
		case err != nil:
			return nil, fmt.Errorf("%s names shard %s: %w", idxPath, s, err)
		case !fi.Mode().IsRegular():
			// Refused here, not by the open, so the error names the index.
			kind := "a folder"
			if !fi.IsDir() {
				kind = fi.Mode().Type().String()
			}
			return nil, fmt.Errorf("%s: tensor %q maps to %q, which is not a file (%s)", idxPath, first[s], weightMap[first[s]], kind)
		}
	}
	return openFiles(dir, paths, func(c *Checkpoint) error {
		for _, name := range slices.Sorted(maps.Keys(weightMap)) {
			want := filepath.Join(dir, weightMap[name])
			i, ok := c.where[name]
			if !ok || c.files[i].path != want {
				return fmt.Errorf("%s: tensor %q is mapped to %s, which does not contain it", idxPath, name, weightMap[name])
			}
		}
		return nil
	}, maxTensors)
}

// openFiles opens every path and builds the name table; check, if given,
// validates the result before it is returned.
func openFiles(dir string, paths []string, check func(*Checkpoint) error, maxTensors int) (*Checkpoint, error) {
	c := &Checkpoint{dir: dir, where: make(map[string]int)}
	fail := func(err error) (*Checkpoint, error) {
		c.Close()
		return nil, err
	}
	for _, p := range paths {
		left := -1
		if maxTensors > 0 {
			left = maxTensors - len(c.names)
		}
		f, err := open(p, left)
		if err != nil {
			if errors.Is(err, ErrTooManyTensors) && len(c.names) > 0 {
				err = fmt.Errorf("%w (the checkpoint's other files hold %d, of at most %d)", err, len(c.names), maxTensors)
			}
			return fail(err)
		}
		c.files = append(c.files, f)
		fi := len(c.files) - 1
		for _, t := range f.tensors {
			if prev, dup := c.where[t.Name]; dup {
				return fail(fmt.Errorf("%s: tensor %q is in both %s and %s", dir, t.Name, c.files[prev].path, p))
			}
			c.where[t.Name] = fi
			c.names = append(c.names, t.Name)
			c.total += t.End - t.Begin
		}
	}
	slices.Sort(c.names)
	if check != nil {
		if err := check(c); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// Dir is the folder given to OpenDir.
func (c *Checkpoint) Dir() string { return c.dir }

// Files lists the paths of the opened files, sorted.
func (c *Checkpoint) Files() []string {
	out := make([]string, len(c.files))
	for i, f := range c.files {
		out[i] = f.path
	}
	return out
}

// Names lists all tensor names, sorted. The result is a copy.
func (c *Checkpoint) Names() []string { return slices.Clone(c.names) }

// Info describes the named tensor.
func (c *Checkpoint) Info(name string) (TensorInfo, bool) {
	i, ok := c.where[name]
	if !ok {
		return TensorInfo{}, false
	}
	return c.files[i].Info(name)
}

// Bytes returns the named tensor's bytes (read-only, valid until Close) and
// its description.
func (c *Checkpoint) Bytes(name string) ([]byte, TensorInfo, error) {
	i, ok := c.where[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("%s: no tensor %q in checkpoint", c.dir, name)
	}
	f := c.files[i]
	b, err := f.Bytes(name)
	if err != nil {
		return nil, TensorInfo{}, err
	}
	t, _ := f.Info(name)
	return b, t, nil
}

// File is the path of the file holding the named tensor, or "" if none does.
func (c *Checkpoint) File(name string) string {
	i, ok := c.where[name]
	if !ok {
		return ""
	}
	return c.files[i].path
}

// TotalBytes is the sum of all tensor sizes.
func (c *Checkpoint) TotalBytes() int64 { return c.total }

// Close unmaps every file; slices from Bytes must not be used afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// Mapped reports whether b lies inside one of the checkpoint's file mappings.
func (c *Checkpoint) Mapped(b []byte) bool {
	for _, f := range c.files {
		if f.Mapped(b) {
			return true
		}
	}
	return false
}

// Drop gives back the pages of b where it lies in one of the checkpoint's
// file mappings (File.Drop); other memory is left alone.
func (c *Checkpoint) Drop(b []byte) {
	for _, f := range c.files {
		if f.Mapped(b) {
			f.Drop(b)
			return
		}
	}
}
