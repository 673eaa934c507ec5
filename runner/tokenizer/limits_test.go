package tokenizer

import (
	"encoding/json"
	"fmt"
	"github.com/mtlbench/mtlbench/internal/clip"
	"runtime"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/runner/gguf"
)

// repeated is n copies of item joined by commas.
func repeated(item string, n int) string {
	var b strings.Builder
	b.Grow(n * (len(item) + 1))
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	return b.String()
}

// A tokenizer file whose vocabulary, merges or added tokens run to
// millions of entries is refused by their count, naming the list, before
// they are decoded: with little allocated, whatever the file's size.
func TestListLimits(t *testing.T) {
	tokens := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"t%d":%d`, i, i)
		}
		return b.String()
	}
	bpe := `{"model":{"type":"BPE","vocab":{%s},"merges":[%s]}%s}`
	added := `,"added_tokens":[` + repeated(`{"id":0,"content":"a","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}`, MaxVocab+1) + `]`
	tekken := `{"config":{"pattern":"x","default_vocab_size":10,"default_num_special_tokens":0,"version":"v3"},"vocab":[%s]}`
	for _, tc := range []struct {
		name, data, want string
	}{
		{"vocab", fmt.Sprintf(bpe, tokens(MaxVocab+1), "", ""), "model.vocab holds 2097153 entries, more than the 2097152"},
		{"duplicate ids", fmt.Sprintf(bpe, repeated(`"a":0`, 3*MaxVocab), "", ""), "model.vocab holds 6291456 entries"},
		{"merges", fmt.Sprintf(bpe, `"a":0,"b":1,"ab":2`, repeated(`"a b"`, maxMerges+1), ""), "model.merges holds 8388609 entries, more than the 8388608"},
		{"merge pairs", fmt.Sprintf(bpe, `"a":0,"b":1,"ab":2`, repeated(`["a","b"]`, maxMerges+1), ""), "model.merges holds 8388609 entries"},
		{"added tokens", fmt.Sprintf(bpe, `"a":0`, "", added), "added_tokens holds 2097153 entries"},
		{"tekken vocab", fmt.Sprintf(tekken, repeated(`{"rank":0,"token_bytes":"AA=="}`, MaxVocab+1)), "vocab holds 2097153 entries"},
		{"within bounds", fmt.Sprintf(bpe, `"a":0,"b":1,"ab":2`, `"a b", ["a", "b"]`, ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The lists are counted where they lie, not copied.
			if got := parseAllocs(t, []byte(tc.data), tc.want); tc.want != "" && got > uint64(len(tc.data))/8+1<<20 {
				t.Errorf("allocated %d MB for a file of %d MB", got>>20, len(tc.data)>>20)
			}
		})
	}
}

// A GGUF file's token types, scores or merges longer than they may be are
// refused by their length, naming the key, before their values are copied
// out of the file.
func TestGGUFListLimits(t *testing.T) {
	tokens := kv{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "a"}}
	spm := kv{"tokenizer.ggml.model", "llama"}
	gpt2 := kv{"tokenizer.ggml.model", "gpt2"}
	const long = 4 << 20
	for _, tc := range []struct {
		name string
		kvs  []kv
		want string
	}{
		{"types", []kv{spm, tokens, {"tokenizer.ggml.token_type", make([]int32, long)}}, "tokenizer.ggml.token_type holds 4194304 types for 4 tokens"},
		{"scores", []kv{spm, tokens, {"tokenizer.ggml.scores", make([]float32, long)}}, "tokenizer.ggml.scores holds 4194304 scores for 4 tokens"},
		{"merges", []kv{gpt2, tokens, {"tokenizer.ggml.pre", "gpt-2"}, {"tokenizer.ggml.merges", make([]string, maxMerges+1)}},
			"metadata tokenizer.ggml.merges is an array of 8388609 values, more than the 8388608 it may hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ggufFile(t, tc.kvs...)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err = FromGGUF(f)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("allocated %d KB before refusing the file", got>>10)
			}
		})
	}
}

// A pattern's regex longer than a tokenizer's ever is refused by its
// length before it is compiled (a 20 MB alternation compiled to a GB).
func TestRegexLimit(t *testing.T) {
	alternation := func(n int) string {
		var b strings.Builder
		for i := 0; b.Len() < n; i++ {
			if i > 0 {
				b.WriteByte('|')
			}
			fmt.Fprintf(&b, "w%d", i)
		}
		return b.String()[:n]
	}
	long, _ := json.Marshal(alternation(maxRegex + 1))
	ok, _ := json.Marshal(alternation(maxRegex - 1))
	bpe := `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},%s}`
	tekken := `{"config":{"pattern":%s,"default_vocab_size":276,"default_num_special_tokens":20,"version":"v3"},"vocab":[]}`
	want := "is 65537 bytes, more than the 65536 a tokenizer's pattern may take"
	for _, tc := range []struct {
		name, data, want string
	}{
		{"split", fmt.Sprintf(bpe, `"pre_tokenizer":{"type":"Split","pattern":{"Regex":`+string(long)+`},"behavior":"Isolated","invert":false}`), want},
		{"replace", fmt.Sprintf(bpe, `"normalizer":{"type":"Replace","pattern":{"Regex":`+string(long)+`},"content":"x"}`), want},
		{"tekken", fmt.Sprintf(tekken, long), want},
		{"within the bound", fmt.Sprintf(bpe, `"pre_tokenizer":{"type":"Split","pattern":{"Regex":`+string(ok)+`},"behavior":"Isolated","invert":false}`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid file: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// The normalizers' texts of the added tokens are held to a budget all
// together: a long token that a Replace grows 60 times is refused, naming
// it shortened, before the text is made.
func TestAddedTokensNormalizedBudget(t *testing.T) {
	file := func(n int, tokens int) []byte {
		var added []string
		for i := range tokens {
			added = append(added, fmt.Sprintf(`{"id":%d,"content":"%s%s","single_word":false,"lstrip":false,"rstrip":false,"normalized":true,"special":false}`,
				2+i, strings.Repeat("a", n), strings.Repeat("b", i)))
		}
		return []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[]},` +
			`"normalizer":{"type":"Replace","pattern":{"String":"a"},"content":"` + strings.Repeat("c", 60) + `"},` +
			`"added_tokens":[` + strings.Join(added, ",") + `]}`)
	}
	for _, tc := range []struct {
		name      string
		n, tokens int
		want      string
	}{
		{"short", 10, 3, ""},
		{"one long token", 4 << 20, 1, `added token "` + strings.Repeat("a", clip.Most-3) + `..." (4194304 characters): the normalizers make the added tokens' texts more than 64 MiB together`},
		{"many tokens", 512 << 10, 4, "the normalizers make the added tokens' texts more than 64 MiB together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := file(tc.n, tc.tokens)
			if got := parseAllocs(t, data, tc.want); got > 8*uint64(len(data))+addedBudget {
				t.Errorf("allocated %d MB for a file of %d MB", got>>20, len(data)>>20)
			}
		})
	}
}

// parseAllocs parses data, fails unless it gives an error holding want (or
// none where want is ""), and returns the bytes the parse allocated.
func parseAllocs(t *testing.T, data []byte, want string) uint64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(data)
	runtime.ReadMemStats(&after)
	switch {
	case want == "" && err != nil:
		t.Fatalf("valid file: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("got %.300v, want %q", err, want)
	}
	return after.TotalAlloc - before.TotalAlloc
}
