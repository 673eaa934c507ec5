package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/suites"
)

// A problem of the suite bench builds from its flags names the flag behind
// it, not a line of that suite, which the user never wrote: an empty model
// read "bench:3:1: model needs a preset or a path".
func TestBenchFlagErrors(t *testing.T) {
	at := regexp.MustCompile(`bench:\d+:\d+`)
	for _, tc := range []struct {
		edit func(*quickSpec)
		want string
	}{
		{func(q *quickSpec) { q.Model = "" }, "--model: model needs a preset or a path"},
		{func(q *quickSpec) { q.Backend = "nope" }, "--backend: "},
		{func(q *quickSpec) { q.Timing = "nope" }, "--timing: "},
		{func(q *quickSpec) { q.DType = "q9" }, "--dtype: "},
	} {
		q := quickSpec{Model: "qwen3-moe-mini", Backend: "cpu", Timing: "throughput", Fit: "strict", Repetitions: 1,
			Fusion: []string{"on"}, Batch: []int{1}, Prompt: []int{4}, Gen: []int{2}, Burstiness: 1}
		tc.edit(&q)
		text, err := q.yaml()
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		_, err = suites.Parse("bench", text)
		if err == nil {
			t.Errorf("%+v: no error, want %q", q, tc.want)
			continue
		}
		got := benchFlagErrors(text, err).Error()
		if !strings.Contains(got, tc.want) || at.MatchString(got) {
			t.Errorf("%+v: %q, want %q and no position in the built suite", q, got, tc.want)
		}
	}
}
