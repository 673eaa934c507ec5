package safetensors

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// model.safetensors.index.json is read as transformers reads it, through
// Python's json: a key given twice keeps its last value whole, so a
// weight_map given again replaces the first rather than adding to it.
func TestIndexKeyGivenTwice(t *testing.T) {
	ts := sampleTensors()
	for _, c := range []struct{ name, index string }{
		{"object", `{"weight_map": {"` + ts[0].Name + `": "gone.safetensors", "` + ts[1].Name + `": "s1.safetensors"},
			"weight_map": {"` + ts[1].Name + `": "s1.safetensors"}}`},
		{"scalar", `{"weight_map": {"` + ts[1].Name + `": "gone.safetensors", "` + ts[1].Name + `": "s1.safetensors"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Write(filepath.Join(dir, "s1.safetensors"), ts[1:2], nil); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(c.index), 0o644); err != nil {
				t.Fatal(err)
			}
			ck, err := OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if names := ck.Names(); len(names) != 1 || names[0] != ts[1].Name {
				t.Errorf("tensors %v, want %s alone", names, ts[1].Name)
			}
		})
	}
}

// A header is read as the safetensors library reads it (its HashMetadata
// and TensorInfo, serde-derived): a tensor named twice keeps its last
// entry, whose tiling the library then checks; a field of an entry given
// twice is refused, one of another case or spelling is not that field, and
// __metadata__ maps strings to strings, a null refused.
func TestHeaderKeysAsTheLibraryReads(t *testing.T) {
	const f32 = `{"dtype":"F32","shape":[1],"data_offsets":[0,4]}`
	for _, c := range []struct {
		name, header string
		data         int
		want         string // the tensors read, or the error
	}{
		{"name twice, same entry", `{"w":` + f32 + `,"w":` + f32 + `}`, 4, "w [0, 4]"},
		{"name twice, empty first", `{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"w":` + f32 + `}`, 4, "w [0, 4]"},
		{"name twice, escaped", `{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"\u0077":` + f32 + `}`, 4, "w [0, 4]"},
		{"name twice, bytes lost", `{"w":` + f32 + `,"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8,
			`tensor "w" starts at byte 4 of the data, where the tensors before it end at 0 (the tensors must tile the data) (the header names "w" twice: its last entry is read, as the safetensors library reads it)`},
		{"field twice", `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4],"shape":[1]}}`, 4,
			`tensor "w": invalid entry: shape is given twice (the safetensors library refuses a field given twice)`},
		{"field twice, escaped", `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4],"\u0073hape":[1]}}`, 4,
			`tensor "w": invalid entry: shape is given twice`},
		{"field in other case", `{"w":{"DType":"F32","Shape":[1],"Data_Offsets":[0,4]}}`, 4, `tensor "w": missing dtype`},
		{"field again in other case", `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"SHAPE":[2]}}`, 4, "w [0, 4]"},
		{"field again folded", `{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"ſhape":[2]}}`, 4, "w [0, 4]"},
		{"metadata key twice", `{"__metadata__":{"k":"a","k":"b"},"w":` + f32 + `}`, 4, "w [0, 4] k=b"},
		{"metadata null", `{"__metadata__":{"k":null},"w":` + f32 + `}`, 4, `__metadata__["k"] is null, want a string`},
		{"metadata twice", `{"__metadata__":{},"__metadata__":{},"w":` + f32 + `}`, 4, `header names "__metadata__" twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := rawFile(c.header, c.data)
			ts, meta, _, err := ParseHeader(file, int64(len(file)))
			var got string
			if err != nil {
				got = err.Error()
			} else {
				for _, ti := range ts {
					got += fmt.Sprintf("%s [%d, %d]", ti.Name, ti.Begin, ti.End)
				}
				for k, v := range meta {
					got += " " + k + "=" + v
				}
			}
			if !strings.HasPrefix(got, c.want) {
				t.Errorf("read %q, want %q", got, c.want)
			}
		})
	}
}

// An index's weight_map is the key so spelled: transformers reads
// index["weight_map"], so a "Weight_Map" is none.
func TestIndexKeysAsSpelled(t *testing.T) {
	ts := sampleTensors()
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "s1.safetensors"), ts[1:2], nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(`{"Weight_Map": {"`+ts[1].Name+`": "s1.safetensors"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := OpenDir(dir)
	if err == nil {
		ck.Close()
	}
	if want := IndexName + ": weight_map is empty or missing"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("%v, want %s", err, want)
	}
}

// transformers reads the index with Python's json, which reads a NaN as a
// float: one in the metadata, which nothing here reads, is no fault.
func TestIndexNonFiniteUnread(t *testing.T) {
	ts := sampleTensors()
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "s1.safetensors"), ts[1:2], nil); err != nil {
		t.Fatal(err)
	}
	index := `{"metadata": {"total_size": NaN}, "weight_map": {"` + ts[1].Name + `": "s1.safetensors"}}`
	if err := os.WriteFile(filepath.Join(dir, IndexName), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
}
