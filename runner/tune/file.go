package tune

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/atomicfile"
	"github.com/mtlbench/mtlbench/internal/jsonerr"
	"github.com/mtlbench/mtlbench/internal/readfile"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// FormatVersion is the tuned-config file format this build writes and reads.
const FormatVersion = 1

// Entry is one tuned config: the winner for one kernel, dtype and shape
// bucket on one device, with what it was measured against.
type Entry struct {
	Device  string `json:"device"`  // bridge.DeviceInfo.Name: the CPU or GPU model
	Backend string `json:"backend"` // cpu | metal | cuda
	Kernel  string `json:"kernel"`
	DType   string `json:"dtype"`
	Shape   Shape  `json:"shape"`
	Config  Config `json:"config"`
	// Default is the baseline it was compared with; Config equals it when
	// no candidate was significantly faster.
	Default Config `json:"default"`
	// Speedup is the default's median time over the config's, P the
	// Mann-Whitney p-value of that difference, Samples per side.
	Speedup float64 `json:"speedup"`
	P       float64 `json:"p_value"`
	Samples int     `json:"samples"`
	// SourceHash is the kernel source the entry was measured on; an entry
	// whose hash differs from the running kernel's is stale and ignored.
	SourceHash  string    `json:"source_hash"`
	ToolVersion string    `json:"tool_version"`
	TunedAt     time.Time `json:"tuned_at"`
	RunID       int64     `json:"run_id,omitempty"` // the tune run in the results store it came from
	Note        string    `json:"note,omitempty"`
}

// Key identifies the entry's bucket: entries with equal keys replace each
// other on import.
func (e *Entry) Key() string {
	return strings.Join([]string{e.Device, e.Backend, e.Kernel, e.DType, e.Shape.Key()}, "|")
}

// Describe is the entry's kernel, dtype and bucket, e.g. "moe bf16
// experts=32,...,tokens=4".
func (e *Entry) Describe() string { return e.Kernel + " " + e.DType + " " + e.Shape.Key() }

// File is a tuned-config file.
type File struct {
	Format  int     `json:"format"`
	Entries []Entry `json:"entries"`
}

// ParseFile decodes a tuned-config file; name is for errors. What is wrong
// is said in the file's terms (internal/jsonerr): a key path from the
// entry's index, the value found and the one wanted, a line and column.
func ParseFile(name string, data []byte) (*File, error) {
	bad := func(err error) (*File, error) {
		return nil, fmt.Errorf("%s: not a tuned-config file: %w", name, err)
	}
	// A Windows editor saves the file with a UTF-8 byte-order mark, which
	// import, peer import and history import read past too.
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	// The format before anything else: a file of another format is named
	// as one, not by the first key this build does not know.
	var head struct {
		Format  *int            `json:"format"`
		Entries json.RawMessage `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&head); err != nil {
		if err == io.EOF {
			return bad(errors.New("the file is empty"))
		}
		return bad(jsonerr.Explain(err, data))
	}
	// One object a file: a second (two files run together) would be lost.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: more after the tuned-config object, at byte %d: a file holds one object", name, dec.InputOffset())
	}
	switch {
	case head.Format == nil:
		return bad(fmt.Errorf("it has no \"format\" (this mtlbench writes format %d)", FormatVersion))
	case *head.Format != FormatVersion:
		return nil, fmt.Errorf("%s: tuned-config format %d, this mtlbench reads %d", name, *head.Format, FormatVersion)
	}
	// A key no field reads (a misspelt "speedup" would read as none) is
	// refused as import refuses one in an export line: one rule, with the
	// field it is near (internal/jsonerr).
	if err := jsonerr.Unknown(data, &File{}); err != nil {
		return bad(err)
	}
	// So is a key one object gives twice: mtlbench writes each once, and
	// encoding/json would take the last (a config's knob) without a word.
	if err := jsonerr.Once(data); err != nil {
		return bad(err)
	}
	f := File{Format: FormatVersion}
	var raws []json.RawMessage
	if len(head.Entries) > 0 {
		if err := json.Unmarshal(head.Entries, &raws); err != nil {
			return bad(jsonerr.ExplainAt(err, head.Entries, "entries"))
		}
	}
	for i, raw := range raws {
		at := fmt.Sprintf("entries[%d]", i)
		var e Entry
		if err := json.Unmarshal(raw, &e); err != nil {
			if x := jsonerr.ExplainAt(err, raw, at); x != err {
				return bad(x)
			}
			return bad(fmt.Errorf("%s: %w", at, err))
		}
		f.Entries = append(f.Entries, e)
	}
	first := map[string]int{}
	for i, e := range f.Entries {
		if e.Device == "" || e.Backend == "" || e.Kernel == "" || e.DType == "" || len(e.Config) == 0 {
			return nil, fmt.Errorf("%s: entry %d lacks device, backend, kernel, dtype or config", name, i)
		}
		// Which of two winners of one bucket ran would depend on their order.
		if j, dup := first[e.Key()]; dup {
			return nil, fmt.Errorf("%s: entries %d and %d are both for %s on %s (%s): a bucket has one winner", name, j, i, e.Describe(), e.Device, e.Backend)
		}
		first[e.Key()] = i
	}
	return &f, nil
}

// Check refuses an entry no kernel of this build takes: an unknown backend,
// kernel or dtype, a shape dimension below 1, or a knob the kernel lacks or
// a value outside the knob's values at the entry's shape. What a device's limits allow is left to where it
// runs, whose lookup warns and keeps the default (Store).
func (e *Entry) Check() error {
	k, err := Find(e.Backend, e.Kernel)
	if err != nil {
		return err
	}
	if err := CheckDType(k, e.DType); err != nil {
		return err
	}
	if len(e.Shape) == 0 {
		return fmt.Errorf("no shape: an entry is the winner of a shape bucket")
	}
	for p, v := range e.Shape {
		if v < 1 {
			return fmt.Errorf("shape %s=%d: want at least 1", p, v)
		}
		if !slices.ContainsFunc(k.Dims, func(d ops.Dim) bool { return d.Name == p }) {
			var dims []string
			for _, d := range k.Dims {
				dims = append(dims, string(d.Name))
			}
			return fmt.Errorf("shape %s=%d: %s's buckets are over %s", p, v, e.Kernel, strings.Join(dims, ", "))
		}
	}
	for _, d := range k.Dims {
		if _, ok := e.Shape[d.Name]; !ok {
			return fmt.Errorf("shape %s lacks %s: a lookup matches every dimension, so the bucket could never be found", e.Shape.Key(), d.Name)
		}
	}
	// What it was measured against: a speedup is a ratio of times, a p-value
	// a probability.
	switch {
	case !(e.Speedup > 0) || math.IsInf(e.Speedup, 0):
		return fmt.Errorf("speedup %g: want a ratio above 0", e.Speedup)
	case !(e.P >= 0 && e.P <= 1):
		return fmt.Errorf("p_value %g: want 0 to 1", e.P)
	case e.Samples < 0:
		return fmt.Errorf("samples %d: want 0 or more", e.Samples)
	}
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 1 << 30, SIMDWidth: 32}
	if k.Backend == ops.CPU {
		lim = Limits{MaxThreads: 1 << 12}
	}
	for name, v := range e.Config {
		i := slices.IndexFunc(k.Params, func(p ops.Knob) bool { return p.Name == name })
		if i < 0 {
			return fmt.Errorf("%s has no parameter %q", e.Kernel, name)
		}
		if vals := k.Params[i].Values(e.Shape, lim); !slices.Contains(vals, v) {
			return fmt.Errorf("%s=%s is not a value of %s's %s (%s)", name, v, e.Kernel, name, strings.Join(vals, ", "))
		}
	}
	// A canonical config leaves out only the parameters its other values
	// make meaningless (a loop has no chunk): one that lacks another would
	// run with whatever the backend makes of nothing.
	for _, p := range k.Params {
		if _, ok := e.Config[p.Name]; ok {
			continue
		}
		vals := p.Values(e.Shape, lim)
		if len(vals) == 0 {
			continue
		}
		with := e.Config.Clone()
		with[p.Name] = vals[0]
		if _, kept := k.Canonicalize(with, e.Shape, lim)[p.Name]; kept {
			return fmt.Errorf("the config %s lacks %s's %s (%s)", e.Config.Key(), e.Kernel, p.Name, strings.Join(vals, ", "))
		}
	}
	if n := len(e.Device); n > maxDeviceName {
		return fmt.Errorf("a device name of %d bytes (at most %d)", n, maxDeviceName)
	}
	// A tune replaces its default only with a config measured faster.
	if len(e.Default) > 0 && !k.Canonicalize(e.Config, e.Shape, lim).Equal(k.Canonicalize(e.Default, e.Shape, lim)) {
		switch {
		case e.Speedup <= 1:
			return fmt.Errorf("config %s with speedup %g: a tuned config replaces its default (%s) only when it is faster", k.String(e.Config), e.Speedup, k.String(e.Default))
		case e.Samples == 0:
			return fmt.Errorf("config %s with no samples: a tuned config replaces its default (%s) only when measured against it", k.String(e.Config), k.String(e.Default))
		}
	}
	return nil
}

// maxDeviceName bounds an entry's device name: a CPU's or GPU's model name
// is a few dozen bytes, and it names a file.
const maxDeviceName = 256

// ReadFile reads a tuned-config file.
func ReadFile(path string) (*File, error) {
	data, err := readfile.Read(path, readfile.Index, "a tuned-config file")
	if err != nil {
		return nil, err
	}
	return ParseFile(path, data)
}

// Merge adds entries, replacing those with the same key, and reports how
// many were new, how many replaced, and how many were the stored entry
// already (Same), which is neither.
func (f *File) Merge(entries ...Entry) (added, replaced, unchanged int) {
	f.Format = FormatVersion
	idx := map[string]int{}
	for i := range f.Entries {
		idx[f.Entries[i].Key()] = i
	}
	for _, e := range entries {
		if i, ok := idx[e.Key()]; ok {
			if f.Entries[i].Same(e) {
				unchanged++
				continue
			}
			f.Entries[i] = e
			replaced++
			continue
		}
		idx[e.Key()] = len(f.Entries)
		f.Entries = append(f.Entries, e)
		added++
	}
	return added, replaced, unchanged
}

// Same reports whether e and o are one entry as a file holds it: every
// field alike, the tuning time the same instant whatever its zone (an
// exported entry read back on another machine).
func (e Entry) Same(o Entry) bool {
	if !e.TunedAt.Equal(o.TunedAt) {
		return false
	}
	e.TunedAt, o.TunedAt = time.Time{}, time.Time{}
	a, errA := json.Marshal(e)
	b, errB := json.Marshal(o)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// MergeResult merges a tuning run's entry for its bucket: as Merge does,
// except that a run that kept the default does not replace a winner an
// earlier run found for the same kernel source, which it failed to
// confirm rather than refuted (a run may lack the rounds or quiet to show
// a real gain). It reports what became of e: "new", "replaced" or "kept",
// and the stored entry that was kept.
func (f *File) MergeResult(e Entry) (string, *Entry) {
	for i := range f.Entries {
		old := &f.Entries[i]
		if old.Key() != e.Key() {
			continue
		}
		if e.Config.Equal(e.Default) && !old.Config.Equal(old.Default) && old.SourceHash == e.SourceHash {
			return "kept", old
		}
		f.Entries[i] = e
		return "replaced", nil
	}
	f.Format = FormatVersion
	f.Entries = append(f.Entries, e)
	return "new", nil
}

// sortEntries orders entries by device, backend, kernel, dtype, then the
// Log dimension values numerically, so files diff well.
func (f *File) sortEntries() {
	sort.SliceStable(f.Entries, func(i, j int) bool {
		a, b := &f.Entries[i], &f.Entries[j]
		ka := []string{a.Device, a.Backend, a.Kernel, a.DType}
		kb := []string{b.Device, b.Backend, b.Kernel, b.DType}
		for x := range ka {
			if ka[x] != kb[x] {
				return ka[x] < kb[x]
			}
		}
		return shapeLess(a.Shape, b.Shape)
	})
}

func shapeLess(a, b Shape) bool {
	names := map[ops.Param]bool{}
	for k := range a {
		names[k] = true
	}
	for k := range b {
		names[k] = true
	}
	sorted := make([]ops.Param, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		if a[k] != b[k] {
			return a[k] < b[k]
		}
	}
	return false
}

// Write stores the file at path (created with its folder), atomically: a
// reader never sees half a file; a link is written through to its target.
func (f *File) Write(path string) error {
	if path == "" {
		return fmt.Errorf("no file named to write the tuned configs to")
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder, not a tuned-config file", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Hidden and not *.json (internal/atomicfile): a write killed before its
	// rename leaves a file no folder's lookup reads (DirLayer).
	if err := atomicfile.Write(path, f.Encode); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Encode writes f to w as Write writes its file (tune export's standard
// output).
func (f *File) Encode(w io.Writer) error {
	f.Format = FormatVersion
	f.sortEntries()
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// FileName is the file, inside a tuned folder, that holds a device's
// entries for a backend: "amd-epyc.cpu.json".
func FileName(device, backend string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(device) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimSuffix(b.String(), "-")
	if name == "" {
		name = "device"
	}
	if len(name) > maxFileStem { // file systems take 255 bytes a name
		sum := sha256.Sum256([]byte(device))
		name = name[:maxFileStem-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return name + "." + backend + ".json"
}

const maxFileStem = 120
