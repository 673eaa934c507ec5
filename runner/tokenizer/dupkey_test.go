package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A key tokenizer.json gives twice means what HF tokenizers (serde_json)
// makes of it: its hand-written readers (the file's top level, the BPE
// model) and maps keep the last value whole, the components read through
// its untagged enums too, and its derived structs (an added token,
// truncation, padding, the post-processors, the model's type) refuse the
// file. Each case's outcome is the tokenizers 0.23 Node binding's.
func TestKeyGivenTwice(t *testing.T) {
	const ab = `"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "x": 3, "y": 4}, "merges": ["a b"]}`
	tok := func(id int, content, extra string) string {
		return fmt.Sprintf(`{"id": %d, "content": %q, %s"single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}`, id, content, extra)
	}
	for _, c := range []struct {
		name, json, text string
		want             []int32
		err              string
	}{
		{name: "model", json: `{` + ab + `, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []}}`, text: "ab", want: []int32{0, 1}},
		{name: "merges", json: `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"], "merges": []}}`, text: "ab", want: []int32{0, 1}},
		{name: "a vocab entry", json: `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "b": 3}, "merges": ["a b"]}}`, text: "b", want: []int32{3}},
		{name: "a pattern", json: `{` + ab + `, "pre_tokenizer": {"type": "Split", "pattern": {"String": "a"}, "pattern": {"Regex": "b"}, "behavior": "Removed", "invert": false}}`,
			text: "abab", want: []int32{0, 0}},
		{name: "the normalizer", json: `{` + ab + `, "normalizer": {"type": "Replace", "pattern": {"String": "a"}, "content": "x"}, "normalizer": {"type": "Replace", "pattern": {"String": "b"}, "content": "y"}}`,
			text: "ab", want: []int32{0, 4}},
		{name: "a special token", json: `{` + ab + `, "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], ` +
			`"special_tokens": {"x": {"id": "x", "ids": [3], "tokens": ["x"]}, "x": {"id": "x", "ids": [4], "tokens": ["x"]}}}}`, text: "a", want: []int32{4, 0}},
		{name: "a special token in a Sequence", json: `{` + ab + `, "post_processor": {"type": "Sequence", "processors": [{"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "x", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], ` +
			`"special_tokens": {"x": {"id": "x", "ids": [3], "tokens": ["x"]}, "x": {"id": "x", "ids": [4], "tokens": ["x"]}}}]}}`, text: "a", want: []int32{4, 0}},
		{name: "an added token's field", json: `{` + ab + `, "added_tokens": [` + tok(3, "x", `"content": "y", `) + `]}`,
			err: `key "content" is given twice in added_tokens[0] (at line 1, column 126 and at line 1, column 142)`},
		{name: "the model's type", json: `{"model": {"type": "BPE", "type": "BPE", "vocab": {"a": 0}, "merges": []}}`,
			err: `key "type" is given twice in model (at line 1, column 12 and at line 1, column 27)`},
		{name: "a template's field", json: `{` + ab + `, "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "single": [], "pair": [], "special_tokens": {}}}`,
			err: `key "single" is given twice in post_processor`},
		{name: "a special token's field", json: `{` + ab + `, "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}], "pair": [], ` +
			`"special_tokens": {"x": {"id": "x", "ids": [3], "ids": [3], "tokens": ["x"]}}}}`, err: `key "ids" is given twice in post_processor.special_tokens.x`},
		{name: "truncation's field", json: `{` + ab + `, "truncation": {"direction": "Right", "max_length": 1, "max_length": 2, "strategy": "LongestFirst", "stride": 0}}`,
			err: `key "max_length" is given twice in truncation`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := Parse([]byte(c.json))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "HF tokenizers refuses") {
					t.Fatalf("%v, want %q", err, c.err)
				}
				return
			}
			checkEncodes(t, c.name, tk, err, c.text, c.want)
		})
	}
}

// mistral-common reads tekken.json with Python's json: a config given
// again replaces the first whole, so one that leaves out what the first
// gives is short of it, not completed by it.
func TestTekkenKeyGivenTwice(t *testing.T) {
	full, err := json.Marshal(tekkenFile())
	if err != nil {
		t.Fatal(err)
	}
	data := string(full[:len(full)-1]) + `, "config": {"version": "v3"}}`
	if _, err := ParseTekken([]byte(data)); err == nil || !strings.Contains(err.Error(), "config.") {
		t.Errorf("a config given again without its pattern: %v, want it refused for what it lacks", err)
	}
}

// A key is a field as spelled, as serde matches it: one of other case is
// another key, which HF's readers skip (the BPE model, a part's fields) or
// refuse where it leaves a required field missing (a part's "type", a
// pattern's "String"). Each case's outcome is the tokenizers 0.23 Node
// binding's.
func TestKeysAsSpelled(t *testing.T) {
	const ab = `"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "x": 3, "y": 4}, "merges": ["a b"]}`
	for _, c := range []struct {
		name, json, text string
		want             []int32
		err              string
	}{
		{name: "merges", json: `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"], "Merges": []}}`, text: "ab", want: []int32{2}},
		{name: "vocab", json: `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "Vocab": {"q": 0}, "merges": ["a b"]}}`, text: "ab", want: []int32{2}},
		{name: "unk_token", json: `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3}, "merges": ["a b"], "unk_token": "<unk>", "Unk_Token": "a"}}`,
			text: "abz", want: []int32{2, 3}},
		{name: "a part's field", json: `{` + ab + `, "normalizer": {"type": "Replace", "pattern": {"String": "a"}, "content": "x", "Content": "y"}}`, text: "ab", want: []int32{3, 1}},
		{name: "a pattern's kind", json: `{` + ab + `, "normalizer": {"type": "Replace", "pattern": {"string": "b"}, "content": "x"}}`, err: "normalizer: "},
		{name: "a part's type", json: `{` + ab + `, "normalizer": {"Type": "Lowercase"}}`, err: "normalizer: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := Parse([]byte(c.json))
			if c.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), c.err) {
					t.Fatalf("%v, want an error starting %q", err, c.err)
				}
				return
			}
			checkEncodes(t, c.name, tk, err, c.text, c.want)
		})
	}
}

// mistral-common reads tekken.json's keys as spelled (data["config"]): a
// "Config" is not the config.
func TestTekkenKeysAsSpelled(t *testing.T) {
	f := tekkenFile()
	f["Config"] = f["config"]
	delete(f, "config")
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTekken(data); err == nil || err.Error() != "not a tekken.json: no config" {
		t.Errorf("%v, want no config", err)
	}
}

// HF tokenizers (serde_json) refuses a string holding half a surrogate pair,
// anywhere in the file, where encoding/json would read U+FFFD; the Node
// binding refuses each of these.
func TestLoneSurrogateRefused(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\ud800": 2}, "merges": []}}`, `not a tokenizer.json: a string holds \ud800, half of a UTF-16 surrogate pair without its other half, at line 1, column 54`},
		{`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "x\udc00": 2}, "merges": []}}`, `\udc00, half of a UTF-16 surrogate pair`},
		{`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "decoder": {"type": "Fuse", "x": "\ud800"}}`, `\ud800, half of a UTF-16 surrogate pair`},
	} {
		if _, err := Parse([]byte(c.json)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.json, err, c.want)
		}
	}
	// A pair is its character.
	tk, err := Parse([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "\ud83d\ude00": 1}, "merges": []}}`))
	checkEncodes(t, "a pair", tk, err, "\U0001F600", []int32{1})
}

// A value of the wrong type is placed by its line and column, as a syntax
// error is.
func TestTypeErrorPlaced(t *testing.T) {
	_, err := Parse([]byte("{\"model\": {\"type\": \"BPE\",\n  \"vocab\": {\"a\": \"0\"}, \"merges\": []}}"))
	if want := `not a tokenizer.json: model.vocab is a JSON string ("0"), want a whole number (at line 2, column 18)`; err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
}

// HF tokenizers (serde_json) reads lists and objects nested at most 127
// deep, anywhere in the file: the Node binding reads 125 lists in a
// normalizer's field and refuses 126.
func TestNestingLimit(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	file := func(n int) string {
		return `{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}, "normalizer": {"type": "Lowercase", "x": ` + nest(n) + `}}`
	}
	tk, err := Parse([]byte(file(125)))
	checkEncodes(t, "125 deep", tk, err, "ab", []int32{0, 1})
	if _, err := Parse([]byte(file(126))); err == nil || !strings.Contains(err.Error(), "not a tokenizer.json: lists and objects nest deeper than 127 levels at line 1, column 235") {
		t.Errorf("126 deep: %v", err)
	}
}

// mistral-common reads a NaN as Python's json does, a float: in a key it
// does not read, the file is read.
func TestTekkenNonFiniteUnread(t *testing.T) {
	f := tekkenFile()
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), `"config":{`, `"config":{"audio_scale":NaN,`, 1)
	if _, err := ParseTekken([]byte(text)); err != nil {
		t.Errorf("%v", err)
	}
}

// BenchmarkParseVocab reads a tokenizer.json of 150,000 tokens: its text is
// checked to be JSON once for the reading rules (jsonerr.Serde), not once
// for each.
func BenchmarkParseVocab(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"version": "1.0", "model": {"type": "BPE", "vocab": {`)
	for i := range 150000 {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `"t%dx": %d`, i, i)
	}
	sb.WriteString(`}, "merges": []}}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
