package jsonlen

import (
	"encoding/json"
	"slices"
	"testing"
)

// Members counts a list's or map's entries whatever their contents hold.
func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{``, 0}, {`null`, 0}, {`[]`, 0}, {`{ }`, 0}, {`[ 1 ]`, 1}, {`["a,b", "c\",d"]`, 2},
		{`[[1,2],[3,[4,5]],{"a":1,"b":2}]`, 3}, {`{"a,":[1,2],"b":{"c":3}}`, 2}, {`["\\", ","]`, 2},
		{`[[]]`, 1}, {`[{}, {}]`, 2},
	} {
		if got := Members([]byte(tc.raw)); got != tc.want {
			t.Errorf("Members(%s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}

// Most finds the lists at a path as encoding/json would decode them, and
// counts them without decoding.
func TestMost(t *testing.T) {
	for _, tc := range []struct {
		data string
		path []string
		want int
	}{
		{`{"model":{"vocab":{"a":0,"b":1},"merges":["a b"]}}`, []string{"model", "vocab"}, 2},
		{`{"model":{"vocab":{"a":0,"b":1},"merges":["a b"]}}`, []string{"model", "merges"}, 1},
		{`{"x":"}{","model" : { "type":"BPE", "merges" : [1,2,3] } }`, []string{"model", "merges"}, 3},
		{`{"Model":{"MERGES":[1,2]},"model":{"merges":[1]}}`, []string{"model", "merges"}, 2},
		{`{"mod\u0065l":{"merges":[1,2,3,4]}}`, []string{"model", "merges"}, 4},
		{`{"model":{"merges":[1,2]},"model":{"merges":[1,2,3]}}`, []string{"model", "merges"}, 3},
		{`{"a":[{"merges":[1,2]}],"model":null}`, []string{"model", "merges"}, 0},
		{`{"model":{"merges":[1,2,`, []string{"model", "merges"}, 0},
		{`[1,2]`, []string{"model"}, 0},
		{`{"n":-1.5e3,"t":true,"weight_map":{"a":"b","c":"d"}}`, []string{"weight_map"}, 2},
		{``, []string{"model"}, 0},
	} {
		if got := Most([]byte(tc.data), tc.path...); got != tc.want {
			t.Errorf("Most(%s, %v) = %d, want %d", tc.data, tc.path, got, tc.want)
		}
	}
}

// Members agrees with encoding/json on every valid list, and Most never
// panics on any input.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`[]`, `[1,"a,b",[2,3],{"x":[4]}]`, `{"a":1,"b":{"c":[1,2]}}`, `{"model":{"merges":["a b"]}}`, `["\\\"",","]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		Most(data, "model", "merges")
		var list []json.RawMessage
		if json.Valid(data) && json.Unmarshal(data, &list) == nil && list != nil {
			if got := Members(data); got != len(list) {
				t.Fatalf("Members(%s) = %d, encoding/json reads %d", data, got, len(list))
			}
		}
	})
}

// Each walks an object's members in order, keys unescaped, values as
// their text.
func TestEach(t *testing.T) {
	var got []string
	Each([]byte(` {"a": 1, "b\u0063": [2, {"x": "}"}], "d": null} `), func(k string, v []byte) {
		got = append(got, k+"="+string(v))
	})
	want := []string{"a=1", `bc=[2, {"x": "}"}]`, "d=null"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
