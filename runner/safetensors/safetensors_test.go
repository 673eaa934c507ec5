package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/mtlbench/mtlbench/internal/clip"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rawFile assembles a file from a literal header and dataLen zero bytes.
func rawFile(header string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, dataLen)...)
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

func sampleTensors() []WriteTensor {
	return []WriteTensor{
		{Name: "model.embed_tokens.weight", DType: "BF16", Shape: []int{4, 8}, Data: seq(64)},
		{Name: "model.layers.0.mlp.up_proj.weight", DType: "F32", Shape: []int{3, 5}, Data: seq(60)},
		{Name: "odd", DType: "U8", Shape: []int{3}, Data: seq(3)},
		{Name: "empty", DType: "F16", Shape: []int{0, 7}, Data: nil},
		{Name: "scalar", DType: "I64", Shape: []int{}, Data: seq(8)},
		{Name: "ids", DType: "I32", Shape: []int{2}, Data: seq(8)},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	in := sampleTensors()
	meta := map[string]string{"format": "pt", "note": `quotes " and <tags>`}
	if err := Write(path, in, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Path() != path {
		t.Errorf("Path = %q", f.Path())
	}
	if f.dataStart%8 != 0 {
		t.Errorf("data section starts at %d, not 8-byte aligned", f.dataStart)
	}
	if got := f.Metadata(); !mapsEqual(got, meta) {
		t.Errorf("Metadata = %v, want %v", got, meta)
	}
	ts := f.Tensors()
	if len(ts) != len(in) {
		t.Fatalf("%d tensors, want %d", len(ts), len(in))
	}
	for i := 1; i < len(ts); i++ {
		if ts[i].Begin < ts[i-1].Begin {
			t.Errorf("Tensors not sorted by Begin: %v", ts)
		}
	}
	for _, w := range in {
		info, ok := f.Info(w.Name)
		if !ok {
			t.Fatalf("Info(%q) missing", w.Name)
		}
		if info.DType != w.DType || !slices.Equal(info.Shape, w.Shape) || info.Size() != int64(len(w.Data)) {
			t.Errorf("Info(%q) = %+v", w.Name, info)
		}
		b, err := f.Bytes(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, w.Data) {
			t.Errorf("Bytes(%q) = %v, want %v", w.Name, b, w.Data)
		}
		if cap(b) != len(b) {
			t.Errorf("Bytes(%q): cap %d > len %d; append would clobber the next tensor", w.Name, cap(b), len(b))
		}
	}
	if _, err := f.Bytes("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Bytes(nope) err = %v", err)
	}
	// Callers get copies: mutating them must not corrupt the File.
	ts[0].Shape[0] = 99
	if info, _ := f.Info(ts[0].Name); info.Shape[0] == 99 {
		t.Error("Tensors shares Shape with the File")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := f.Bytes(in[0].Name); err == nil {
		t.Error("Bytes after Close succeeded")
	}
}

func TestNoMetadata(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.safetensors")
	if err := Write(path, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors()) != 0 || f.Metadata() != nil {
		t.Errorf("got %v %v", f.Tensors(), f.Metadata())
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

const upProj = "model.layers.0.mlp.up_proj.weight"

// headerCases are broken files; each error must contain every string in want.
var headerCases = []struct {
	name string
	file []byte
	want []string
}{
	{"shorter than 8 bytes", []byte{1, 2, 3}, []string{"3 bytes", "fewer than the 8-byte"}},
	{"empty file", nil, []string{"0 bytes"}},
	{"header beyond file", append(binary.LittleEndian.AppendUint64(nil, 1234), make([]byte, 92)...),
		[]string{"truncated: header says 1234 bytes, file has 100"}},
	{"absurd header length", binary.LittleEndian.AppendUint64(nil, 1<<62), []string{"over the limit of 100000000 bytes"}},
	// The library's limit is 100,000,000 bytes, not 100 MiB.
	{"header length past the library's", binary.LittleEndian.AppendUint64(nil, 100_000_001), []string{"header length 100000001 is over the limit of 100000000 bytes"}},
	{"invalid JSON", rawFile(`{"a": {`, 0), []string{"not valid JSON"}},
	{"empty header", rawFile(``, 0), []string{"not valid JSON"}},
	{"not an object", rawFile(`[1, 2]`, 0), []string{"not a JSON object"}},
	{"trailing junk", rawFile(`{} x`, 0), []string{"trailing data"}},
	{"bad UTF-8", rawFile("{\"\xff\":1}", 0), []string{"header is not UTF-8 text at line 1, column 3: byte 0xff begins no UTF-8 character"}},
	{"entry not an object", rawFile(`{"w": 5}`, 0), []string{`tensor "w": invalid entry: w is a JSON number, want an object`}},
	{"missing dtype", rawFile(`{"w":{"shape":[1],"data_offsets":[0,1]}}`, 1), []string{`tensor "w"`, "missing dtype"}},
	{"missing shape", rawFile(`{"w":{"dtype":"U8","data_offsets":[0,1]}}`, 1), []string{`tensor "w"`, "missing shape"}},
	{"missing offsets", rawFile(`{"w":{"dtype":"U8","shape":[1]}}`, 1), []string{`tensor "w"`, "missing data_offsets"}},
	{"unknown dtype", rawFile(`{"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}}`, 2),
		[]string{`tensor "w"`, `unknown dtype "Q4_K"`}},
	// A name or dtype of megabytes is quoted cut short (internal/clip),
	// not copied into the message.
	{"a name of a megabyte", rawFile(`{"`+strings.Repeat("n", 1<<20)+`":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}}`, 2),
		[]string{`tensor "` + strings.Repeat("n", clip.Most-3) + `..." (1048576 characters): unknown dtype "Q4_K"`}},
	// The same name set in the path of a field of the wrong type, and a
	// __metadata__ key of a megabyte.
	{"a name of a megabyte in a field's path", rawFile(`{"`+strings.Repeat("n", 1<<20)+`":{"dtype":"F32","shape":[1.5],"data_offsets":[0,6]}}`, 6),
		[]string{`invalid entry: "` + strings.Repeat("n", clip.Most-3) + `..." (1048576 characters).shape is a JSON number 1.5, want a whole number`}},
	{"a metadata key of a megabyte", rawFile(`{"__metadata__":{"`+strings.Repeat("k", 1<<20)+`":null}}`, 0),
		[]string{`__metadata__["` + strings.Repeat("k", clip.Most-3) + `..." (1048576 characters)] is null, want a string`}},
	{"a dtype of a megabyte", rawFile(`{"w":{"dtype":"`+strings.Repeat("Q", 1<<20)+`","shape":[2],"data_offsets":[0,2]}}`, 2),
		[]string{`tensor "w": unknown dtype "` + strings.Repeat("Q", clip.Most-3) + `..." (1048576 characters)`}},
	{"a dtype of the format's not read", rawFile(`{"w":{"dtype":"F8_E4M3FNUZ","shape":[2],"data_offsets":[0,2]}}`, 2),
		[]string{`tensor "w": dtype F8_E4M3FNUZ, which the safetensors format has, is not one mtlbench reads (BF16, BOOL, C64,`}},
	{"size mismatch", rawFile(`{"`+upProj+`":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,100]}}`, 100),
		[]string{`tensor "` + upProj + `": data_offsets [0, 100] hold 100 bytes but shape [4 8] of BF16 needs 64`}},
	{"offsets beyond data", rawFile(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}}`, 20),
		[]string{`tensor "w"`, "run past the end of the data section (20 bytes)"}},
	{"reversed offsets", rawFile(`{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}`, 8), []string{`tensor "w"`, "reversed"}},
	{"negative offset", rawFile(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[-2,0]}}`, 8), []string{`tensor "w"`, "negative"}},
	{"three offsets", rawFile(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2,4]}}`, 8), []string{`tensor "w"`, "[begin, end]"}},
	{"overlapping tensors", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12),
		[]string{`"a" [0, 8]`, `"b" [4, 12]`, "overlap"}},
	{"negative dims", rawFile(`{"w":{"dtype":"F32","shape":[-1,-4],"data_offsets":[0,16]}}`, 16),
		[]string{`tensor "w"`, "negative dimension -1"}},
	{"shape overflow", rawFile(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0),
		[]string{`tensor "w"`, "overflows"}},
	{"shape beyond int64", rawFile(`{"w":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}}`, 0),
		[]string{`tensor "w": invalid entry: w.shape is 99999999999999999999, beyond the 64-bit whole numbers it is read as`}},
	{"fractional dim", rawFile(`{"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,6]}}`, 6), []string{`tensor "w": invalid entry: w.shape is a JSON number 1.5, want a whole number`}},
	{"string dim", rawFile(`{"w":{"dtype":"F32","shape":["96"],"data_offsets":[0,6]}}`, 6), []string{`tensor "w": invalid entry: w.shape is a JSON string ("96"), want a whole number`}},
	// serde_json refuses half a surrogate pair, which encoding/json would
	// read as U+FFFD.
	{"lone surrogate", rawFile(`{"w\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1),
		[]string{`header is not read: a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 4`}},
	// serde_json's recursion limit: the library reads 127 levels at most.
	{"nested too deep", rawFile(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":`+strings.Repeat("[", 126)+strings.Repeat("]", 126)+`}}`, 1),
		[]string{"header is not read: lists and objects nest deeper than 127 levels"}},
	{"duplicate name", rawFile(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2),
		[]string{`"w" twice`}},
	{"metadata not strings", rawFile(`{"__metadata__":{"n":1}}`, 0), []string{"__metadata__ is a JSON number, want a string (__metadata__ maps strings to strings)"}},
	{"too many dims", rawFile(`{"w":{"dtype":"U8","shape":[`+strings.Repeat("1,", 64)+`1],"data_offsets":[0,1]}}`, 1),
		[]string{`tensor "w": its lists hold more numbers than a shape of at most 64 dimensions`}},
	{"65 dims, one offset", rawFile(`{"w":{"dtype":"U8","shape":[`+strings.Repeat("1,", 64)+`1],"data_offsets":[0]}}`, 1),
		[]string{`tensor "w": shape has 65 dimensions, more than 64`}},
}

// A header's lists are refused by their length as they are read: a shape
// or data_offsets of millions of numbers, held as Go ints, would cost
// dozens of times the header's bytes before their length was checked.
func TestLongListsNotHeld(t *testing.T) {
	for _, field := range []string{"shape", "data_offsets"} {
		t.Run(field, func(t *testing.T) {
			list := "[" + strings.Repeat("1,", 1<<20) + "1]"
			entry := `"shape":` + list + `,"data_offsets":[0,1]`
			want := `tensor "w": its lists hold more numbers than a shape of at most 64 dimensions and data_offsets of two`
			if field == "data_offsets" {
				entry = `"shape":[1],"data_offsets":` + list
			}
			path := filepath.Join(t.TempDir(), "m.safetensors")
			file := rawFile(`{"w":{"dtype":"U8",`+entry+`}}`, 1)
			if err := os.WriteFile(path, file, 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			f, err := Open(path)
			runtime.ReadMemStats(&after)
			if err == nil {
				f.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 6*uint64(len(file)) {
				t.Errorf("refusing a %d-byte header allocated %d bytes", len(file), got)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range headerCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".safetensors")
			if err := os.WriteFile(path, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range append([]string{filepath.Base(path)}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %.400q (%d bytes) lacks %q", err, len(err.Error()), w)
				}
			}
		})
	}
}

func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open(dir) err = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "absent.safetensors")); err == nil || !strings.Contains(err.Error(), "absent.safetensors") {
		t.Errorf("Open(absent) err = %v", err)
	}
}

func TestParseHeaderAccepts(t *testing.T) {
	// A zero-size tensor sits where the tensors before it end.
	file := rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},"b":{"dtype":"U8","shape":[8],"data_offsets":[16,24]}}  `, 24)
	ts, meta, start, err := ParseHeader(file, int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if meta != nil || start != int64(len(file)-24) {
		t.Errorf("meta %v start %d", meta, start)
	}
	var names []string
	for _, ti := range ts {
		names = append(names, ti.Name)
	}
	if !slices.Equal(names, []string{"a", "e", "b"}) {
		t.Errorf("order %v", names)
	}
	// Only the header prefix is needed when the file size is known.
	if _, _, _, err := ParseHeader(file[:start], int64(len(file))); err != nil {
		t.Errorf("prefix: %v", err)
	}
	if _, _, _, err := ParseHeader(file[:start-1], int64(len(file))); err == nil {
		t.Error("short prefix accepted")
	}
}

// The tensors tile the data, as the format's own library requires: a hole
// between two, data before the first, or bytes after the last are refused.
func TestParseHeaderTiles(t *testing.T) {
	for _, c := range []struct{ hdr, want string }{
		{`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}}`, `tensor "b" starts at byte 8 of the data, where the tensors before it end at 4`},
		{`{"a":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}`, `tensor "a" starts at byte 4 of the data, where the tensors before it end at 0`},
		{`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, "the tensors end at byte 8 of the data, which holds 12: 4 bytes after them"},
		// An empty tensor inside another's bytes, which the safetensors
		// library's validate refuses as it walks the tensors by offset.
		{`{"a":{"dtype":"U8","shape":[12],"data_offsets":[0,12]},"e":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}}`, `tensor "e" starts at byte 4 of the data, where the tensors before it end at 12`},
	} {
		file := rawFile(c.hdr, 12)
		if _, _, _, err := ParseHeader(file, int64(len(file))); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.hdr, err, c.want)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		ts   []WriteTensor
		want string
	}{
		{"size", []WriteTensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: seq(7)}}, `tensor "w": 7 data bytes`},
		{"dtype", []WriteTensor{{Name: "w", DType: "F99", Shape: []int{1}, Data: seq(1)}}, "unknown dtype"},
		{"dup", []WriteTensor{{Name: "w", DType: "U8", Data: seq(1)}, {Name: "w", DType: "U8", Data: seq(1)}}, "twice"},
		{"reserved", []WriteTensor{{Name: "__metadata__", DType: "U8", Data: seq(1)}}, "reserved"},
		{"negative", []WriteTensor{{Name: "w", DType: "U8", Shape: []int{-1}}}, "negative"},
	}
	for _, tc := range cases {
		path := filepath.Join(dir, tc.name+".safetensors")
		err := Write(path, tc.ts, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name+".safetensors") {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: file written despite error", tc.name)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func writeIndex(t *testing.T, dir string, wm map[string]string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 123}, "weight_map": wm})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shardedDir writes sampleTensors split over two shards plus an index.
func shardedDir(t *testing.T) (string, []WriteTensor) {
	t.Helper()
	dir := t.TempDir()
	ts := sampleTensors()
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	if err := Write(filepath.Join(dir, s1), ts[:3], map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, s2), ts[3:], nil); err != nil {
		t.Fatal(err)
	}
	wm := map[string]string{}
	for i, w := range ts {
		wm[w.Name] = s1
		if i >= 3 {
			wm[w.Name] = s2
		}
	}
	writeIndex(t, dir, wm)
	return dir, ts
}

func TestShardedCheckpoint(t *testing.T) {
	dir, ts := shardedDir(t)
	// A stray file outside the index must be ignored.
	if err := Write(filepath.Join(dir, "adapter.safetensors"), ts[:1], nil); err != nil {
		t.Fatal(err)
	}
	c, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []string
	var total int64
	for _, w := range ts {
		want = append(want, w.Name)
		total += int64(len(w.Data))
	}
	slices.Sort(want)
	if got := c.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if c.TotalBytes() != total {
		t.Errorf("TotalBytes = %d, want %d", c.TotalBytes(), total)
	}
	if len(c.Files()) != 2 {
		t.Errorf("Files = %v", c.Files())
	}
	for i, w := range ts {
		b, info, err := c.Bytes(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, w.Data) || info.DType != w.DType || !slices.Equal(info.Shape, w.Shape) {
			t.Errorf("%s: got %v %+v", w.Name, b, info)
		}
		shard := "model-00001-of-00002.safetensors"
		if i >= 3 {
			shard = "model-00002-of-00002.safetensors"
		}
		if got := c.File(w.Name); got != filepath.Join(dir, shard) {
			t.Errorf("File(%s) = %s", w.Name, got)
		}
		if _, ok := c.Info(w.Name); !ok {
			t.Errorf("Info(%s) missing", w.Name)
		}
	}
	if _, _, err := c.Bytes("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Bytes(nope) err = %v", err)
	}
	if c.File("nope") != "" {
		t.Error("File(nope) not empty")
	}
}

func TestCheckpointLayouts(t *testing.T) {
	ts := sampleTensors()
	t.Run("single", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
		// Beside model.safetensors, other files are not part of the model.
		if err := Write(filepath.Join(dir, "other.safetensors"), ts[:1], nil); err != nil {
			t.Fatal(err)
		}
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Names()) != len(ts) || len(c.Files()) != 1 {
			t.Errorf("Names %v Files %v", c.Names(), c.Files())
		}
	})
	// An index beside model.safetensors: the single file, as transformers
	// loads it first.
	t.Run("single beside an index", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "shard.safetensors"), ts[:1], nil); err != nil {
			t.Fatal(err)
		}
		idx := `{"weight_map": {"` + ts[0].Name + `": "shard.safetensors"}}`
		os.WriteFile(filepath.Join(dir, IndexName), []byte(idx), 0o644)
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Names()) != len(ts) || len(c.Files()) != 1 || !strings.HasSuffix(c.Files()[0], "model.safetensors") {
			t.Errorf("Names %v Files %v", c.Names(), c.Files())
		}
	})
	// Mistral's repositories hold their own format beside the Hugging Face
	// shards: the same weights under other names, which transformers never
	// reads, so neither are they read here.
	t.Run("loose shards beside mistral's own format", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "model-00001-of-00002.safetensors"), ts[:2], nil); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), ts[2:], nil); err != nil {
			t.Fatal(err)
		}
		own := []WriteTensor{{Name: "tok_embeddings.weight", DType: ts[0].DType, Shape: ts[0].Shape, Data: ts[0].Data}}
		if err := Write(filepath.Join(dir, "consolidated.safetensors"), own, nil); err != nil {
			t.Fatal(err)
		}
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Names()) != len(ts) || len(c.Files()) != 2 || slices.Contains(c.Names(), own[0].Name) {
			t.Errorf("Names %v Files %v", c.Names(), c.Files())
		}
	})
	t.Run("loose shards", func(t *testing.T) {
		dir := t.TempDir()
		if err := Write(filepath.Join(dir, "a.safetensors"), ts[:2], nil); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, "b.safetensors"), ts[2:], nil); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "README.md"), []byte("hi"), 0o644)
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Names()) != len(ts) || len(c.Files()) != 2 {
			t.Errorf("Names %v Files %v", c.Names(), c.Files())
		}
	})
}

func TestOpenDirErrors(t *testing.T) {
	ts := sampleTensors()
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"empty dir", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
		}, []string{"no .safetensors files"}},
		{"missing shard", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "s1.safetensors"), ts[:1], nil)
			writeIndex(t, dir, map[string]string{ts[0].Name: "s1.safetensors", ts[1].Name: "s2.safetensors"})
		}, []string{IndexName, "s2.safetensors", "missing"}},
		{"tensor missing in shard", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "s1.safetensors"), ts[:1], nil)
			writeIndex(t, dir, map[string]string{ts[0].Name: "s1.safetensors", "lm_head.weight": "s1.safetensors"})
		}, []string{IndexName, `"lm_head.weight"`, "s1.safetensors", "does not contain"}},
		{"tensor in other shard", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "s1.safetensors"), ts[:1], nil)
			Write(filepath.Join(dir, "s2.safetensors"), ts[1:2], nil)
			writeIndex(t, dir, map[string]string{ts[0].Name: "s2.safetensors", ts[1].Name: "s2.safetensors"})
		}, []string{ts[0].Name, "s2.safetensors", "does not contain"}},
		{"duplicate across files", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "a.safetensors"), ts[:2], nil)
			Write(filepath.Join(dir, "b.safetensors"), ts[1:3], nil)
		}, []string{ts[1].Name, "a.safetensors", "b.safetensors", "in both"}},
		{"duplicate across indexed shards", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "a.safetensors"), ts[:2], nil)
			Write(filepath.Join(dir, "b.safetensors"), ts[1:3], nil)
			writeIndex(t, dir, map[string]string{ts[0].Name: "a.safetensors", ts[2].Name: "b.safetensors"})
		}, []string{ts[1].Name, "a.safetensors", "b.safetensors", "in both"}},
		// A null shard is no file, which transformers' loader fails on
		// (os.path.join of None): named as the null it is, not as "".
		{"index maps a tensor to null", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "s1.safetensors"), ts[:1], nil)
			raw := `{"weight_map": {"` + ts[0].Name + `": "s1.safetensors", "lm_head.weight": null}}`
			if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(raw), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{IndexName, `weight_map["lm_head.weight"] is null`, "want the name of a shard"}},
		{"index escapes folder", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{"w": "../evil.safetensors"})
		}, []string{IndexName, "../evil.safetensors", "not a file inside"}},
		// A shard that is a folder is refused naming the index and a tensor
		// it maps there, not as a bare path.
		{"index names the folder", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{"w": "."})
		}, []string{IndexName, `tensor "w" maps to "."`, "not a file (a folder)"}},
		{"index names a subfolder", func(t *testing.T, dir string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			writeIndex(t, dir, map[string]string{"w": "sub/"})
		}, []string{IndexName, `tensor "w" maps to "sub/"`, "not a file (a folder)"}},
		{"index empty", func(t *testing.T, dir string) {
			writeIndex(t, dir, map[string]string{})
		}, []string{IndexName, "weight_map"}},
		{"index bad JSON", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexName), []byte("{"), 0o644)
		}, []string{IndexName, "not valid JSON"}},
		{"index not UTF-8", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexName), []byte("{\"weight_map\": {\"w\": \"a\xff.safetensors\"}}"), 0o644)
		}, []string{IndexName + ": not UTF-8 text at line 1, column 24: byte 0xff begins no UTF-8 character"}},
		{"index weight_map a list", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"weight_map": [1, 2]}`), 0o644)
		}, []string{IndexName + ": weight_map is a JSON array, want an object"}},
		// Numbered shards without their index: one the numbering says
		// there is, missing, is named, before any of its tensors are
		// reported missing one by one.
		{"numbered shard missing, no index", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "model-00001-of-00003.safetensors"), ts[:1], nil)
			Write(filepath.Join(dir, "model-00003-of-00003.safetensors"), ts[1:2], nil)
		}, []string{"model-00002-of-00003.safetensors is missing", "part 2 of 3", IndexName}},
		{"numbered shards of two sets, no index", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "model-00001-of-00002.safetensors"), ts[:1], nil)
			Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), ts[1:2], nil)
			Write(filepath.Join(dir, "model-00001-of-00003.safetensors"), ts[2:3], nil)
		}, []string{"model-00002-of-00003.safetensors is missing"}},
		// Mistral's own format alone is no folder transformers reads: named
		// as what it is, not read for tensors under names no model has.
		{"mistral's own format alone", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "consolidated.safetensors"), ts, nil)
			os.WriteFile(filepath.Join(dir, "params.json"), []byte("{}"), 0o644)
		}, []string{"consolidated.safetensors is Mistral's own checkpoint format", "transformers does not read", "model-*.safetensors"}},
		{"mistral's own format in parts alone", func(t *testing.T, dir string) {
			Write(filepath.Join(dir, "consolidated-00001-of-00002.safetensors"), ts[:1], nil)
			Write(filepath.Join(dir, "consolidated-00002-of-00002.safetensors"), ts[1:], nil)
		}, []string{"consolidated-00001-of-00002.safetensors is Mistral's own checkpoint format"}},
		// A repository cloned without Git LFS holds pointers in place of
		// its shards: named as such, not read as a header.
		{"git lfs pointer", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1503300328\n"), 0o644)
		}, []string{"model.safetensors: a Git LFS pointer to a file of 1503300328 bytes, not the file itself: the repository was cloned without Git LFS"}},
		{"web page", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), []byte("<!DOCTYPE html>\n<html class=\"\" lang=\"en\">\n<head><title>Qwen3-0.6B-Q8_0.gguf</title>"), 0o644)
		}, []string{"model.safetensors: a web page (HTML), not the file itself"}},
		{"broken shard", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), rawFile(`{"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4), 0o644)
		}, []string{"model.safetensors", `tensor "w"`, "negative"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			c, err := OpenDir(dir)
			if err == nil {
				c.Close()
				t.Fatal("OpenDir succeeded")
			}
			// Every error starts with the folder or the file in it at fault.
			if !strings.HasPrefix(err.Error(), dir) {
				t.Errorf("error %q does not start with the folder", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %.400q (%d bytes) lacks %q", err, len(err.Error()), w)
				}
			}
		})
	}
}

func FuzzParseHeader(f *testing.F) {
	for _, tc := range headerCases {
		f.Add(tc.file, uint16(0))
	}
	hdr, err := encodeHeader(sampleTensors(), map[string]string{"format": "pt"})
	if err != nil {
		f.Fatal(err)
	}
	valid := rawFile(string(hdr), 143)
	f.Add(valid, uint16(0))
	f.Add(valid[:len(valid)-10], uint16(10))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}}`, 16), uint16(0))
	for _, tc := range headerForms {
		f.Add(rawFile(tc.header, 4), uint16(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, extra uint16) {
		// extra models a file longer than the bytes at hand.
		size := int64(len(data)) + int64(extra)
		ts, _, start, err := ParseHeader(data, size)
		if err != nil {
			return
		}
		if start < 8 || start > int64(len(data)) {
			t.Fatalf("dataStart %d outside the %d bytes given", start, len(data))
		}
		var end int64
		for i, ti := range ts {
			if ti.Begin < 0 || ti.End < ti.Begin || start+ti.End > size {
				t.Fatalf("tensor %q [%d, %d] outside file of %d bytes (data at %d)", ti.Name, ti.Begin, ti.End, size, start)
			}
			if i > 0 && ti.Begin < ts[i-1].Begin {
				t.Fatalf("not sorted")
			}
			if ti.End > ti.Begin {
				if ti.Begin < end {
					t.Fatalf("tensor %q overlaps", ti.Name)
				}
				end = ti.End
			}
			elem, ok := DTypeSize(ti.DType)
			if !ok || ti.NumElements()*int64(elem) != ti.End-ti.Begin {
				t.Fatalf("tensor %q size does not match shape", ti.Name)
			}
		}
	})
}

// BenchmarkParseHeader parses a header the size of a large MoE checkpoint's.
func BenchmarkParseHeader(b *testing.B) {
	var ts []WriteTensor
	for i := range 20000 {
		name := "model.layers." + strconv.Itoa(i/64) + ".mlp.experts." + strconv.Itoa(i%64) + ".down_proj.weight"
		ts = append(ts, WriteTensor{Name: name, DType: "BF16", Shape: []int{2, 2}, Data: make([]byte, 8)})
	}
	hdr, err := encodeHeader(ts, nil)
	if err != nil {
		b.Fatal(err)
	}
	file := rawFile(string(hdr), 8*len(ts))
	b.SetBytes(int64(len(hdr)))
	for b.Loop() {
		if _, _, _, err := ParseHeader(file, int64(len(file))); err != nil {
			b.Fatal(err)
		}
	}
}

// A shard that is a symlink to a missing file, or one that leads back to
// itself, is named for what it is, not skipped.
func TestDanglingShard(t *testing.T) {
	for _, tc := range []struct{ name, target, want string }{
		{"model.safetensors", "/nonexistent/blob", "model.safetensors: a symlink to /nonexistent/blob, which is missing"},
		{"model-00002-of-00002.safetensors", "/nonexistent/blob", "model-00002-of-00002.safetensors: a symlink to /nonexistent/blob, which is missing"},
		{"model.safetensors", "model.safetensors", "model.safetensors: a symlink to model.safetensors, which leads back to a symlink without end (too many levels of symbolic links)"},
		{"model-00001-of-00001.safetensors", "model-00001-of-00001.safetensors", "model-00001-of-00001.safetensors: a symlink to model-00001-of-00001.safetensors, which leads back to a symlink without end"},
	} {
		dir := t.TempDir()
		if err := os.Symlink(tc.target, filepath.Join(dir, tc.name)); err != nil {
			t.Skip("no symlinks here:", err)
		}
		_, err := OpenDir(dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: %v, want %q", tc.name, tc.target, err, tc.want)
		}
	}
}

// emptyTensors is a header of n empty F32 tensors named prefix0, prefix1...
func emptyTensors(prefix string, n int) []byte {
	var h strings.Builder
	h.WriteString("{")
	for i := range n {
		if i > 0 {
			h.WriteString(",")
		}
		fmt.Fprintf(&h, `"%s%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, prefix, i)
	}
	h.WriteString("}")
	return rawFile(h.String(), 0)
}

// A bound on the tensors refuses a checkpoint past it, file by file and in
// all, before the rest of a header is read; at the bound it opens.
func TestOpenDirMaxTensors(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]int // file -> tensors
		max   int
		want  string // "" = opens
	}{
		{"at the bound", map[string]int{"model.safetensors": 10}, 10, ""},
		{"no bound", map[string]int{"model.safetensors": 50}, 0, ""},
		{"past the bound", map[string]int{"model.safetensors": 11}, 10, "model.safetensors: the header lists more than 10 tensors, more than the model could read: it is another model's checkpoint, or a damaged one"},
		{"shards past it together", map[string]int{"a.safetensors": 6, "b.safetensors": 6}, 10, "b.safetensors: the header lists more than 4 tensors, more than the model could read: it is another model's checkpoint, or a damaged one (the checkpoint's other files hold 6, of at most 10)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for f, n := range c.files {
				os.WriteFile(filepath.Join(dir, f), emptyTensors(strings.TrimSuffix(f, ".safetensors"), n), 0o644)
			}
			ck, err := OpenDirMax(dir, c.max)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("error %v, want it to open", err)
			case c.want != "" && (err == nil || !strings.HasSuffix(err.Error(), c.want) || !errors.Is(err, ErrTooManyTensors)):
				t.Errorf("error %v, want %s", err, c.want)
			}
			if ck != nil {
				ck.Close()
			}
		})
	}
}

// An index listing more tensors than the bound is refused by its count,
// before its map is decoded: with little allocated beyond the file's bytes.
func TestIndexCountedFirst(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries int
		max     int
		want    string
	}{
		{"a million", 1 << 20, 10, "weight_map lists 1048576 tensors, more than the 10 the model could read"},
		{"one past", 11, 10, "weight_map lists 11 tensors, more than the 10 the model could read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var b strings.Builder
			b.WriteString(`{"metadata": {"total_size": 0}, "weight_map": {`)
			for i := range c.entries {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, `"t%d": "m.safetensors"`, i)
			}
			b.WriteString("}}")
			if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := OpenDirMax(dir, c.max)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrTooManyTensors) {
				t.Fatalf("error %v, want %s", err, c.want)
			}
			// Reading the file takes its size; decoding the map, ten.
			if got := after.TotalAlloc - before.TotalAlloc; got > 3*uint64(b.Len())/2+1<<20 {
				t.Errorf("allocated %d KB for an index of %d KB", got>>10, b.Len()>>10)
			}
		})
	}
}

// A header's __metadata__ of more entries than its bound is refused by
// their count, before they are decoded; at the bound it parses.
func TestMetadataCounted(t *testing.T) {
	meta := func(n int) []byte {
		var h strings.Builder
		h.WriteString(`{"__metadata__":{`)
		for i := range n {
			if i > 0 {
				h.WriteString(",")
			}
			fmt.Fprintf(&h, `"%x":""`, i)
		}
		h.WriteString(`},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`)
		return rawFile(h.String(), 4)
	}
	for _, c := range []struct {
		n    int
		want string
	}{
		{MaxMetadata, ""},
		{MaxMetadata + 1, "__metadata__ holds 65537 entries, more than the 65536 a header may hold"},
	} {
		b := meta(c.n)
		_, m, _, err := ParseHeader(b, int64(len(b)))
		switch {
		case c.want == "" && (err != nil || len(m) != c.n):
			t.Errorf("%d entries: %d read, %v", c.n, len(m), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%d entries: %v, want %q", c.n, err, c.want)
		}
	}
}

// A header of many members too short to be tensor entries is refused
// with little allocated: room for the tensors is made by the most the
// header's bytes could describe, not by its count of members.
func TestHeaderMembersNotTensors(t *testing.T) {
	const size = 16 << 20
	var h strings.Builder
	h.WriteString("{")
	for i := 0; h.Len() < size; i++ {
		if i > 0 {
			h.WriteString(",")
		}
		h.WriteString(`"a":0`)
	}
	h.WriteString("}")
	file := rawFile(h.String(), 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, _, err := ParseHeader(file, int64(len(file)))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), `tensor "a": invalid entry: a is a JSON number, want an object`) {
		t.Errorf("error %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 3*size/2+1<<20 {
		t.Errorf("allocated %d KB for a header of %d KB, want at most 1.5 times its bytes", got>>10, size>>10)
	}
}

// A header is read in place: parsing one allocates what its tensors and
// __metadata__ hold, not copies of its text or generic JSON values, which
// cost up to six times a header's bytes, and nineteen times those of a
// header of many small tensors.
func TestHeaderReadInPlace(t *testing.T) {
	const size = 16 << 20
	long := strings.Repeat("a", size)
	var tensors, meta strings.Builder
	tensors.WriteString("{")
	for i := 0; tensors.Len() < size; i++ {
		if i > 0 {
			tensors.WriteString(",")
		}
		fmt.Fprintf(&tensors, `"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
	}
	tensors.WriteString(`,"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`)
	extra := strings.ReplaceAll(tensors.String(), `[0,0]}`, `[0,0],"note":"x"}`)
	meta.WriteString(`{"__metadata__":{`)
	for i := range MaxMetadata {
		if i > 0 {
			meta.WriteString(",")
		}
		fmt.Fprintf(&meta, `"%x":"%s"`, i, long[:size/MaxMetadata])
	}
	meta.WriteString(`},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`)
	const w = `"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}`
	for _, c := range []struct {
		name   string
		header string
		most   float64 // bytes allocated per byte of header
	}{
		{"a long __metadata__ value", `{"__metadata__":{"k":"` + long + `"},` + w + `}`, 1.1},
		{"a long escaped __metadata__ value", `{"__metadata__":{"k":"` + strings.Repeat(`\u00e9\n`, size/8) + `"},` + w + `}`, 1.1},
		{"many __metadata__ entries", meta.String(), 1.5},
		{"a long tensor name", `{"` + long + `":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 1.1},
		{"a long unknown field", `{"w":{"dtype":"F32","x":"` + long + `","shape":[1],"data_offsets":[0,4]}}`, 0.1},
		{"long padding", `{` + w + strings.Repeat(" ", size) + `}`, 0.1},
		{"many tensors", tensors.String(), 2},
		{"many tensors, each with a field of its own", extra, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := rawFile(c.header, 4)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, _, err := ParseHeader(file, int64(len(file)))
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; float64(got) > c.most*float64(len(c.header))+1<<20 {
				t.Errorf("allocated %d KB for a header of %d KB, want at most %.1f times its bytes", got>>10, len(c.header)>>10, c.most)
			}
		})
	}
}

// headerForms are headers of forms writers do not give but JSON allows:
// each reads as the safetensors library reads it (names and __metadata__
// unescaped, a surrogate pair as its character; unknown fields skipped; a
// null __metadata__). TestHeaderKeysAsTheLibraryReads has keys given twice or
// in other case.
var headerForms = []struct {
	name, header string
	tensor       string            // the one tensor's name
	shape        []int             // its shape
	meta         map[string]string // the __metadata__ read
}{
	{"escaped name", `{"\u0077\n\"\\\/\ud83d\ude00x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, "w\n\"\\/\U0001F600x", []int{1}, nil},
	{"unknown fields", `{"w":{"x":{"y":["]"]},"dtype":"F32","shape":[ 1 ],"data_offsets":[ 0 , 4 ],"z":null}}`, "w", []int{1}, nil},
	{"spaces everywhere", " \n{ \"w\" : { \"dtype\" : \"F32\" , \"shape\" : [ 1 , 1 ] , \"data_offsets\" : [ 0 , 4 ] } }\t ", "w", []int{1, 1}, nil},
	{"null __metadata__", `{"__metadata__":null,"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, "w", []int{1}, nil},
	{"__metadata__ of escapes", `{"__metadata__":{"k\u00e9":"a\tb"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, "w", []int{1}, map[string]string{"k\u00e9": "a\tb"}},
}

func TestHeaderForms(t *testing.T) {
	for _, tc := range headerForms {
		file := rawFile(tc.header, 4)
		ts, meta, _, err := ParseHeader(file, int64(len(file)))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(ts) != 1 || ts[0].Name != tc.tensor || !slices.Equal(ts[0].Shape, tc.shape) || !maps.Equal(meta, tc.meta) {
			t.Errorf("%s: read %+v and %q, want %q of shape %v and %q", tc.name, ts, meta, tc.tensor, tc.shape, tc.meta)
		}
	}
}
