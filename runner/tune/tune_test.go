package tune

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeGEMM is how a GPU kernel declares its space: threadgroup size, tile
// sizes and split-K partitions, pruned by threadgroup memory and max
// threads per threadgroup.
var fakeGEMM = &Kernel{
	Backend: "fakegpu", Op: "gemm",
	Dims:  []Dim{{Name: "m", Default: 1, Match: Log}, {Name: "n", Default: 4096, Match: Exact}, {Name: "k", Default: 4096, Match: Exact}},
	DType: "f16",
	Params: []Param{
		{Name: "threadgroup", Values: Pow2(32, 2048)},
		{Name: "tile_m", Values: Pow2(8, 64)},
		{Name: "tile_n", Values: Pow2(8, 64)},
		{Name: "split_k", Values: Pow2(1, 8)},
	},
	Constraints: []Constraint{
		{Name: "threadgroup memory", Check: func(c Config, s Shape, l Limits) error {
			// A and B tiles of 32 k-columns each, in f16.
			need := (c.Int("tile_m") + c.Int("tile_n")) * 32 * 2
			if need > l.ThreadgroupMemory {
				return fmt.Errorf("tiles need %d bytes, the device has %d", need, l.ThreadgroupMemory)
			}
			return nil
		}},
		{Name: "max threads", Check: func(c Config, s Shape, l Limits) error {
			if c.Int("threadgroup") > l.MaxThreads {
				return fmt.Errorf("%d threads exceed %d per threadgroup", c.Int("threadgroup"), l.MaxThreads)
			}
			return nil
		}},
		{Name: "split-K", Check: func(c Config, s Shape, l Limits) error {
			if s["k"]/c.Int("split_k") < 256 {
				return fmt.Errorf("k=%d in %d partitions leaves fewer than 256 per partition", s["k"], c.Int("split_k"))
			}
			return nil
		}},
	},
	Default: func(Shape, Limits) Config {
		return Config{"threadgroup": "256", "tile_m": "32", "tile_n": "32", "split_k": "1"}
	},
}

func TestSpacePrunesByConstraint(t *testing.T) {
	defer Register(fakeGEMM)()
	lim := Limits{MaxThreads: 1024, ThreadgroupMemory: 4096, SIMDWidth: 32}
	s, err := fakeGEMM.Normalize(Shape{"m": 8, "k": 1024}, lim)
	if err != nil {
		t.Fatal(err)
	}
	if s["n"] != 4096 {
		t.Fatalf("n default not filled: %v", s)
	}
	cands, pruned := fakeGEMM.Candidates(s, lim)
	grid := 7 * 4 * 4 * 4
	if len(cands)+len(pruned) != grid {
		t.Fatalf("%d candidates + %d pruned, want the %d grid points", len(cands), len(pruned), grid)
	}
	reasons := map[string]int{}
	for _, p := range pruned {
		reasons[strings.SplitN(p.Reason, ":", 2)[0]]++
	}
	// Tiles (tm+tn)*64 bytes > 4096 when tm+tn > 64: (64,8) (64,16) (64,32)
	// (64,64) (32,64) (16,64) (8,64): 7 of 16 tile pairs.
	if reasons["threadgroup memory"] != 7*7*4 {
		t.Errorf("threadgroup memory pruned %d, want %d (reasons %v)", reasons["threadgroup memory"], 7*7*4, reasons)
	}
	// 2048 threads exceed 1024 (with tiles that fit: 9 pairs).
	if reasons["max threads"] != 9*4 {
		t.Errorf("max threads pruned %d, want %d", reasons["max threads"], 9*4)
	}
	// k=1024 allows split_k 1, 2, 4 (>= 256 per partition), not 8.
	if reasons["split-K"] != 6*9 {
		t.Errorf("split-K pruned %d, want %d", reasons["split-K"], 6*9)
	}
	for _, c := range cands {
		if err := fakeGEMM.Check(c, s, lim); err != nil {
			t.Errorf("candidate %v violates %v", c, err)
		}
	}
	if !cands[0].Equal(fakeGEMM.Default(s, lim)) {
		t.Errorf("the default is not the first candidate: %v", cands[0])
	}
	// A device with more threadgroup memory keeps the big tiles.
	big, _ := fakeGEMM.Candidates(s, Limits{MaxThreads: 1024, ThreadgroupMemory: 32768})
	if len(big) <= len(cands) {
		t.Errorf("more threadgroup memory kept %d candidates, no more than %d", len(big), len(cands))
	}
}

func TestCPUSpaces(t *testing.T) {
	lim := Limits{MaxThreads: 2}
	moe, _ := Find("cpu", "moe")
	s, err := moe.Normalize(Shape{"tokens": 4, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256}, lim)
	if err != nil {
		t.Fatal(err)
	}
	if s["threads"] != 2 {
		t.Fatalf("threads not taken from the device: %v", s)
	}
	cands, pruned := moe.Candidates(s, lim)
	var got []string
	for _, c := range cands {
		got = append(got, moe.String(c))
	}
	// 16 pairs: chunk 1 is the loop, chunks of 16 or more are grouped, and
	// a chunk size means nothing to loop or grouped.
	if want := []string{"grouped", "loop", "chunked/2", "chunked/4", "chunked/8"}; !reflect.DeepEqual(got, want) {
		t.Errorf("moe candidates %v, want %v", got, want)
	}
	// Every grid point is a candidate or pruned; the default (grouped)
	// comes first, so the nine grouped points are all duplicates of it.
	if len(cands)+len(pruned) != 1+3*9 {
		t.Errorf("%d + %d configs, want the default and the 27 grid points", len(cands), len(pruned))
	}

	mm, _ := Find("cpu", "matmul")
	s, _ = mm.Normalize(Shape{"m": 1, "n": 128, "k": 512}, lim)
	cands, pruned = mm.Candidates(s, lim)
	for _, c := range cands {
		if p := c.Int("piece"); p > 128 || p > 0 && (128+p-1)/p < c.Int("threads") {
			t.Errorf("matmul candidate %v breaks piece <= n or coverage", c)
		}
	}
	byReason := map[string]int{}
	for _, p := range pruned {
		byReason[strings.SplitN(p.Reason, ":", 2)[0]]++
	}
	if byReason["piece <= n"] != 4 || byReason["coverage"] != 1 {
		t.Errorf("matmul pruned %v, want 4 by piece <= n (256, 512 x 2 threads) and 1 by coverage (128 rows, 2 threads)", byReason)
	}
}

func TestNeighbours(t *testing.T) {
	moe, _ := Find("cpu", "moe")
	lim := Limits{MaxThreads: 2}
	s, _ := moe.Normalize(Shape{"tokens": 16, "top_k": 4}, lim)
	var got []string
	for _, m := range moe.Neighbours(Config{"strategy": "chunked", "chunk": "8"}, s, lim) {
		got = append(got, moe.String(m.Config))
	}
	if want := []string{"loop", "grouped", "chunked/4", "chunked/16"}; !reflect.DeepEqual(got, want) {
		t.Errorf("neighbours %v, want %v", got, want)
	}
}

// entry is a moe entry for the CPU test device.
func entry(tokens int, cfg Config, hash string) Entry {
	return Entry{Device: "Test CPU", Backend: "cpu", Kernel: "moe", DType: "bf16",
		Shape:  Shape{"tokens": tokens, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256, "threads": 2},
		Config: cfg, Default: Config{"strategy": "grouped"}, Speedup: 1.1, P: 0.001, Samples: 20,
		SourceHash: hash, ToolVersion: "test", TunedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func query(tokens int, hash string) Query {
	return Query{Device: "Test CPU", Backend: "cpu", Kernel: "moe", DType: "bf16", SourceHash: hash, Limits: Limits{MaxThreads: 2},
		Shape: Shape{"tokens": tokens, "experts": 32, "top_k": 4, "hidden": 512, "intermediate": 256, "threads": 2}}
}

func layer(name string, es ...Entry) Layer {
	l := Layer{Name: name, Where: name}
	for _, e := range es {
		l.Entries = append(l.Entries, Located{Entry: e, File: name + ".json"})
	}
	return l
}

func chunked(n int) Config { return Config{"strategy": "chunked", "chunk": strconv.Itoa(n)} }

func TestLookupOrder(t *testing.T) {
	const h = "h1"
	env := layer(FromEnv, entry(4, chunked(2), h))
	user := layer(FromUser, entry(4, chunked(4), h))
	shipped := layer(FromShipped, entry(4, chunked(8), h))
	for _, tc := range []struct {
		layers []Layer
		want   string
	}{
		{[]Layer{env, user, shipped}, "chunked/2 (env override)"},
		{[]Layer{user, shipped}, "chunked/4 (user cache)"},
		{[]Layer{shipped}, "chunked/8 (shipped)"},
		{nil, "grouped (default)"},
	} {
		c, err := NewStore(tc.layers...).Lookup(query(4, h))
		if err != nil {
			t.Fatal(err)
		}
		if c.String() != tc.want {
			t.Errorf("%d layers: got %s, want %s", len(tc.layers), c, tc.want)
		}
	}
	// Nearness before priority: an exact bucket in the shipped layer beats
	// the override's bucket two octaves away.
	far := layer(FromEnv, entry(16, chunked(2), h))
	c, _ := NewStore(far, shipped).Lookup(query(4, h))
	if c.String() != "chunked/8 (shipped)" {
		t.Errorf("exact shipped bucket vs far override: got %s", c)
	}
}

// Two files of one folder holding the same bucket: the newer tune's entry
// is used, whichever file's name comes first.
func TestLookupNewerOfOneBucket(t *testing.T) {
	const h = "h1"
	old, cur := entry(4, Config{"strategy": "loop"}, h), entry(4, chunked(2), h)
	old.TunedAt = cur.TunedAt.AddDate(-1, 0, 0)
	for _, order := range [][]Located{
		{{Entry: old, File: "a-backup.json"}, {Entry: cur, File: "b.json"}},
		{{Entry: cur, File: "a.json"}, {Entry: old, File: "b-backup.json"}},
	} {
		c, err := NewStore(Layer{Name: FromUser, Entries: order}).Lookup(query(4, h))
		if err != nil {
			t.Fatal(err)
		}
		if c.String() != "chunked/2 (user cache)" {
			t.Errorf("%s first: got %s, want the newer chunked/2", order[0].File, c)
		}
	}
}

func TestDefaultStoreReadsOverrideAndUserCache(t *testing.T) {
	tmp := t.TempDir()
	envDir, cache := filepath.Join(tmp, "override"), filepath.Join(tmp, "cache")
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", tmp) // os.UserCacheDir on macOS
	user, err := UserDir()
	if err != nil {
		t.Fatal(err)
	}
	write := func(dir string, es ...Entry) {
		f := &File{}
		f.Merge(es...)
		if err := f.Write(filepath.Join(dir, FileName("Test CPU", "cpu"))); err != nil {
			t.Fatal(err)
		}
	}
	write(user, entry(4, chunked(4), "h"), entry(16, chunked(16), "h"))
	write(envDir, entry(4, chunked(2), "h"))
	s := Default(envDir, nil)
	if len(s.Layers) != 3 || s.Layers[0].Name != FromEnv || s.Layers[1].Name != FromUser || s.Layers[2].Name != FromShipped {
		t.Fatalf("layers %+v", s.Layers)
	}
	for tokens, want := range map[int]string{4: "chunked/2 (env override)", 16: "chunked/16 (user cache)"} {
		c, _ := s.Lookup(query(tokens, "h"))
		if c.String() != want {
			t.Errorf("tokens=%d: got %s, want %s", tokens, c, want)
		}
	}
	// A broken file is a warning, not a failure: the other layers still work.
	os.WriteFile(filepath.Join(envDir, "broken.json"), []byte("{"), 0o644)
	var warned []string
	s = Default(envDir, func(m string) { warned = append(warned, m) })
	if len(warned) != 1 || !strings.Contains(warned[0], "broken.json") {
		t.Errorf("warnings %q, want one about broken.json", warned)
	}
	if c, _ := s.Lookup(query(4, "h")); c.String() != "chunked/2 (env override)" {
		t.Errorf("after a broken file: %s", c)
	}
	// An override folder that is not there is said in words, the folder
	// named ("open DIR: ..." was Go's); a user cache not made yet is none.
	missing := filepath.Join(tmp, "nowhere")
	warned = nil
	t.Setenv("XDG_CACHE_HOME", filepath.Join(tmp, "no-cache"))
	t.Setenv("HOME", filepath.Join(tmp, "no-home"))
	s = Default(missing, func(m string) { warned = append(warned, m) })
	if want := "tuned configs: override folder: " + missing + ": no such file or directory"; len(warned) != 1 || warned[0] != want {
		t.Errorf("warnings %q, want only %q", warned, want)
	}
}

func TestNearestBucket(t *testing.T) {
	s := NewStore(layer(FromUser, entry(1, chunked(2), "h"), entry(4, chunked(4), "h"), entry(16, chunked(8), "h")))
	for _, tc := range []struct {
		tokens int
		want   string
	}{
		{1, "chunked/2"},  // exact
		{2, "chunked/2"},  // one octave from 1 and from 4: the smaller bucket
		{3, "chunked/4"},  // nearer 4
		{8, "chunked/4"},  // tie between 4 and 16
		{12, "chunked/8"}, // nearer 16
		{64, "chunked/8"}, // two octaves from 16: still applies
		{65, "grouped"},   // more than two octaves from every bucket
	} {
		c, err := s.Lookup(query(tc.tokens, "h"))
		if err != nil {
			t.Fatal(err)
		}
		// Canonical for the query's shape: chunked/8 at tokens=1 (4 pairs)
		// would be grouped, so compare the entry's config where it applies.
		got := c.Kernel.String(c.Config)
		if c.Entry != nil {
			got = c.Kernel.String(c.Entry.Config)
		}
		if got != tc.want {
			t.Errorf("tokens=%d: got %s, want %s", tc.tokens, got, tc.want)
		}
	}
	// Exact dimensions must match: another expert count or thread count
	// falls back to the default.
	q := query(4, "h")
	q.Shape["experts"] = 64
	if c, _ := s.Lookup(q); !c.IsDefault() {
		t.Errorf("experts=64 took %s", c)
	}
	q = query(4, "h")
	q.Shape["threads"] = 8
	if c, _ := s.Lookup(q); !c.IsDefault() {
		t.Errorf("threads=8 took %s", c)
	}
	// The chosen config is made canonical for the query: chunked/4 tuned at
	// 4 tokens (16 pairs) is grouped for one token (4 pairs).
	s = NewStore(layer(FromUser, entry(4, chunked(4), "h")))
	if c, _ := s.Lookup(query(1, "h")); c.String() != "grouped (user cache)" {
		t.Errorf("chunked/4 at tokens=1: %s", c)
	}
}

func TestStaleEntryIgnoredWithWarning(t *testing.T) {
	var warned []string
	s := NewStore(layer(FromUser, entry(4, chunked(4), "old-hash")), layer(FromShipped, entry(4, chunked(8), "new-hash")))
	s.Warn = func(m string) { warned = append(warned, m) }
	for range 3 {
		c, err := s.Lookup(query(4, "new-hash"))
		if err != nil {
			t.Fatal(err)
		}
		if c.String() != "chunked/8 (shipped)" {
			t.Fatalf("got %s, want the fresh shipped entry", c)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "stale") || !strings.Contains(warned[0], "user cache") {
		t.Errorf("warnings %q, want one stale warning about the user cache entry", warned)
	}
	if len(s.Warnings()) != 1 {
		t.Errorf("Warnings() = %q", s.Warnings())
	}
	// An unknown hash (a backend that cannot tell) checks nothing.
	if c, _ := s.Lookup(query(4, "")); c.String() != "chunked/4 (user cache)" {
		t.Errorf("without a hash: %s", c)
	}
	// A config the kernel does not accept is skipped with a warning too.
	s = NewStore(layer(FromUser, entry(4, Config{"strategy": "teleport"}, "h")))
	if c, _ := s.Lookup(query(4, "h")); !c.IsDefault() || len(s.Warnings()) != 1 {
		t.Errorf("bad config: %s, warnings %q", c, s.Warnings())
	}
	// So is an entry `tune import` refuses (tune show: refused): a config
	// measured slower than its default, a bucket without the threads a
	// lookup matches.
	slower := entry(4, chunked(4), "h")
	slower.Speedup = 0.5
	noThreads := entry(4, chunked(4), "h")
	delete(noThreads.Shape, "threads")
	for _, e := range []Entry{slower, noThreads} {
		s = NewStore(layer(FromUser, e))
		if c, _ := s.Lookup(query(4, "h")); !c.IsDefault() || len(s.Warnings()) != 1 || !strings.Contains(s.Warnings()[0], "refused") {
			t.Errorf("%+v: %s, warnings %q", e, c, s.Warnings())
		}
	}
}

// An entry Merge is given that is the stored one is neither new nor a
// replacement: one whose tuning time is the same instant in another zone
// (read back on another machine) is the same entry; any field that
// differs makes it a replacement.
func TestMergeUnchanged(t *testing.T) {
	stored := entry(16, chunked(8), "h")
	otherZone := stored
	otherZone.TunedAt = stored.TunedAt.In(time.FixedZone("UTC+9", 9*3600))
	later := stored
	later.TunedAt = stored.TunedAt.Add(time.Second)
	noted := stored
	noted.Note = "retuned"
	otherConfig := entry(16, chunked(4), "h")
	for _, c := range []struct {
		name                       string
		e                          Entry
		added, replaced, unchanged int
	}{
		{"identical", entry(16, chunked(8), "h"), 0, 0, 1},
		{"another zone", otherZone, 0, 0, 1},
		{"tuned later", later, 0, 1, 0},
		{"a note", noted, 0, 1, 0},
		{"another config", otherConfig, 0, 1, 0},
		{"another bucket", entry(4, chunked(8), "h"), 1, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &File{}
			f.Merge(stored)
			a, r, u := f.Merge(c.e)
			if a != c.added || r != c.replaced || u != c.unchanged {
				t.Errorf("%d added, %d replaced, %d unchanged; want %d, %d, %d", a, r, u, c.added, c.replaced, c.unchanged)
			}
		})
	}
}

func TestFileRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "t.json")
	f := &File{}
	f.Merge(entry(16, chunked(8), "h"), entry(1, Config{"strategy": "loop"}, "h"))
	if err := f.Write(p); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if !strings.Contains(string(data), `"chunk": 8`) {
		t.Errorf("integers are not written as numbers:\n%s", data)
	}
	g, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if g.Entries[0].Shape["tokens"] != 1 {
		t.Errorf("entries not sorted by bucket: %v", g.Entries[0].Shape)
	}
	if !reflect.DeepEqual(g.Entries[1], f.Entries[1]) || !reflect.DeepEqual(g.Entries[0], f.Entries[0]) {
		t.Errorf("round trip differs:\n%+v\n%+v", g.Entries, f.Entries)
	}
	added, replaced, unchanged := g.Merge(entry(16, chunked(4), "h"), entry(4, chunked(2), "h"))
	if added != 1 || replaced != 1 || unchanged != 0 || len(g.Entries) != 3 {
		t.Errorf("merge: %d added, %d replaced, %d unchanged, %d entries", added, replaced, unchanged, len(g.Entries))
	}
	if _, err := ParseFile("x", []byte(`{"format": 99, "entries": []}`)); err == nil {
		t.Error("a newer format was accepted")
	}
	var c Config
	if err := json.Unmarshal([]byte(`{"chunk": 16, "strategy": "chunked"}`), &c); err != nil || c.Int("chunk") != 16 {
		t.Errorf("config JSON: %v %v", c, err)
	}
}

// A tuning run that kept the default does not erase a winner an earlier
// run found for the same kernel source; a winner, or the default found for
// another source, replaces what was there.
func TestMergeResult(t *testing.T) {
	grouped := Config{"strategy": "grouped"}
	for _, tc := range []struct {
		name     string
		stored   []Entry
		in       Entry
		want     string
		keptConf Config
	}{
		{"first", nil, entry(16, grouped, "h"), "new", grouped},
		{"default after a winner", []Entry{entry(16, chunked(8), "h")}, entry(16, grouped, "h"), "kept", chunked(8)},
		{"winner after a winner", []Entry{entry(16, chunked(8), "h")}, entry(16, chunked(4), "h"), "replaced", chunked(4)},
		{"default after a stale winner", []Entry{entry(16, chunked(8), "old")}, entry(16, grouped, "h"), "replaced", grouped},
		{"default after the default", []Entry{entry(16, grouped, "h")}, entry(16, grouped, "h"), "replaced", grouped},
		{"another bucket", []Entry{entry(16, chunked(8), "h")}, entry(4, grouped, "h"), "new", grouped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &File{Entries: tc.stored}
			what, _ := f.MergeResult(tc.in)
			if what != tc.want {
				t.Errorf("%s, want %s", what, tc.want)
			}
			for _, e := range f.Entries {
				if e.Key() == tc.in.Key() && !e.Config.Equal(tc.keptConf) {
					t.Errorf("the file holds %v, want %v", e.Config, tc.keptConf)
				}
			}
		})
	}
}

// The shipped files must parse: a broken one would be silently skipped.
func TestShippedFilesParse(t *testing.T) {
	names, _ := filepath.Glob("shipped/*.json")
	for _, n := range names {
		f, err := ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range f.Entries {
			k, err := Find(e.Backend, e.Kernel)
			if err != nil {
				t.Errorf("%s: %v", n, err)
				continue
			}
			if err := k.Check(e.Config, e.Shape, Limits{MaxThreads: e.Shape["threads"]}); err != nil && !e.Config.Equal(e.Default) {
				t.Errorf("%s: %s: %v", n, e.Describe(), err)
			}
			if e.SourceHash == "" || e.Samples == 0 {
				t.Errorf("%s: %s lacks a source hash or samples", n, e.Describe())
			}
			// The lookup refuses what import would.
			if err := e.Check(); err != nil {
				t.Errorf("%s: %s: %v", n, e.Describe(), err)
			}
		}
	}
	if l := ShippedLayer(); len(l.Entries) == 0 && len(names) > 0 {
		t.Error("shipped files exist but none was embedded")
	}
}

func TestFileName(t *testing.T) {
	if got := FileName("Apple M3 Ultra", "metal"); got != "apple-m3-ultra.metal.json" {
		t.Error(got)
	}
	if got := FileName("AMD EPYC 7B13 64-Core Processor", "cpu"); got != "amd-epyc-7b13-64-core-processor.cpu.json" {
		t.Error(got)
	}
}

// A tuned-config file that cannot be read is named by what is wrong with it
// in the file's own terms (the key path from the entry's index, the JSON
// value found and the one wanted, a line and column), never by Go's types;
// a file of another format says so before any key it holds.
func TestParseFileErrors(t *testing.T) {
	const e0 = `{"device": "Test CPU", "backend": "cpu", "kernel": "moe", "dtype": "bf16", `
	for _, c := range []struct{ name, in, want string }{
		{"empty", ``, `x.json: not a tuned-config file: the file is empty`},
		{"list", `[]`, `x.json: not a tuned-config file: the file is a JSON array, want an object`},
		{"syntax", "{\n  \"format\": 1,,\n}", `x.json: not a tuned-config file: not valid JSON at line 2, column 15: invalid character ',' looking for beginning of object key string`},
		{"cut short", `{"format": 1, "entries": [`, `x.json: not a tuned-config file: not valid JSON: the text ends inside a value: cut short`},
		{"no format", `{"entries": []}`, `x.json: not a tuned-config file: it has no "format" (this mtlbench writes format 1)`},
		{"format as text", `{"format": "1", "entries": []}`, `x.json: not a tuned-config file: format is a JSON string ("1"), want a whole number`},
		{"newer format, new keys", `{"format": 2, "entries": [{"bucket": "x"}], "devices": {}}`, `x.json: tuned-config format 2, this mtlbench reads 1`},
		{"older format", `{"format": 0, "entries": []}`, `x.json: tuned-config format 0, this mtlbench reads 1`},
		{"unknown key", `{"format": 1, "entries": [], "extra": 1}`, `x.json: not a tuned-config file: unknown field extra`},
		{"entries an object", `{"format": 1, "entries": {}}`, `x.json: not a tuned-config file: entries is a JSON object, want a list`},
		{"entry a number", `{"format": 1, "entries": [5]}`, `x.json: not a tuned-config file: entries[0] is a JSON number, want an object`},
		{"shape as text", `{"format": 1, "entries": [` + e0 + `"shape": {"tokens": "4"}}]}`, `x.json: not a tuned-config file: entries[0].shape is a JSON string ("4"), want a whole number`},
		{"config a number", `{"format": 1, "entries": [` + e0 + `"config": 5}]}`, `x.json: not a tuned-config file: entries[0].config is a JSON number, want an object`},
		{"config a string", `{"format": 1, "entries": [` + e0 + `"config": "grouped"}]}`, `x.json: not a tuned-config file: entries[0].config is a JSON string, want an object`},
		{"unknown entry key", `{"format": 1, "entries": [` + e0 + `"speedupx": 2}]}`, `x.json: not a tuned-config file: unknown field entries[0].speedupx (did you mean "speedup"?)`},
		{"misspelt entries", `{"format": 1, "entires": []}`, `x.json: not a tuned-config file: unknown field entires (did you mean "entries"?)`},
		{"a key twice", `{"format": 1, "entries": [], "entries": []}`, `x.json: not a tuned-config file: key "entries" is given twice in the top level (at line 1, column 15 and at line 1, column 30)`},
		{"a knob twice", `{"format": 1, "entries": [` + e0 + `"config": {"chunk": 8, "chunk": 16}}]}`, `x.json: not a tuned-config file: key "chunk" is given twice in entries[0].config (at line 1, column 113 and at line 1, column 125)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFile("x.json", []byte(c.in))
			if err == nil || err.Error() != c.want {
				t.Errorf("got  %v\nwant %s", err, c.want)
			}
		})
	}
}

// A written tuned-config file is readable by others, as every file the
// tool writes is (a shared MTLBENCH_TUNED folder, an export to pass on),
// and what a write leaves behind when killed midway (its temporary file)
// is never read as a tuned-config file of the folder.
func TestWriteModeAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "test-cpu.cpu.json")
	f := &File{}
	f.Merge(entry(16, chunked(8), "h"))
	if err := f.Write(p); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("written with mode %v (%v), want -rw-r--r--", st.Mode().Perm(), err)
	}
	// A write killed before its rename, by this build and by older ones.
	data, _ := os.ReadFile(p)
	for _, name := range []string{".test-cpu.cpu.json.tmp123", ".tuned-123.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := DirLayer(FromUser, dir)
	if err != nil || len(l.Entries) != 1 {
		t.Errorf("%d entries, %v; want the one entry of the written file and no error", len(l.Entries), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("%d files in the folder, want the written one and the two left there", len(ents))
	}
}

// TestFileWriteThroughLink: a tuned-config file reached through a link (a
// shared folder's file linked into the cache) is replaced where it lies and
// stays linked.
func TestFileWriteThroughLink(t *testing.T) {
	dir := t.TempDir()
	real, link := filepath.Join(dir, "shared.json"), filepath.Join(dir, "t.json")
	f := &File{}
	f.Merge(entry(16, chunked(8), "h"))
	if err := f.Write(real); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("shared.json", link); err != nil {
		t.Fatal(err)
	}
	f.Merge(entry(1, Config{"strategy": "loop"}, "h"))
	if err := f.Write(link); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a link: %v %v", link, st.Mode(), err)
	}
	if g, err := ReadFile(real); err != nil || len(g.Entries) != 2 {
		t.Errorf("the link's target holds %v (%v), want both entries", g, err)
	}
}

// A tuned-config file as a Windows editor saves it (a byte-order mark,
// CRLF line ends) reads as the file without them, as the other files a
// command imports do: the mark was refused as no JSON.
func TestParseFileAsWindowsSavesIt(t *testing.T) {
	f := &File{}
	f.Merge(entry(16, chunked(8), "h"))
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	if err := f.Write(p); err != nil {
		t.Fatal(err)
	}
	plain, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseFile("x.json", plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, text string }{
		{"CRLF line ends", strings.ReplaceAll(string(plain), "\n", "\r\n")},
		{"a byte-order mark", "\uFEFF" + string(plain)},
		{"a byte-order mark and CRLF", "\uFEFF" + strings.ReplaceAll(string(plain), "\n", "\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFile("x.json", []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read %+v, want %+v", got, want)
			}
		})
	}
}
