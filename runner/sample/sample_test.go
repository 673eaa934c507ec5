package sample

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    Params
		wantErr bool
	}{
		{"greedy", Params{}, false},
		{"", Params{}, false},
		{"temperature:0.7", Params{Temperature: 0.7}, false},
		{"temperature:1,top_k:40,top_p:0.9,seed:3", Params{Temperature: 1, TopK: 40, TopP: 0.9, Seed: 3}, false},
		// One grammar with the suites' sampling: temperature 0 is greedy,
		// keys in any order, each once.
		{"temperature:0", Params{}, false},
		{"seed:9,top_p:0.5,temperature:2", Params{Temperature: 2, TopP: 0.5, Seed: 9}, false},
		{"temperature:0,top_k:5", Params{}, true},
		{"seed:3", Params{}, true},
		{"temperature:1,temperature:2", Params{}, true},
		{"top_k:5", Params{}, true},
		{"temperature:1,top_p:1.5", Params{}, true},
		{"temperature:NaN", Params{}, true},
		{"temperature:Inf", Params{}, true},
		{"temperature:1e39", Params{}, true},
		{"temperature:1,top_p:NaN", Params{}, true},
		{"temperature:1,beam:4", Params{}, true},
		{"hot", Params{}, true},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if (err != nil) != c.wantErr {
			t.Errorf("Parse(%q) err = %v, wantErr %v", c.in, err, c.wantErr)
			continue
		}
		if err == nil && got != c.want {
			t.Errorf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestGreedyAndTruncation(t *testing.T) {
	logits := []float32{0.1, 3, 2.9, -1, 0}
	if got := New(Params{}, 0).Next(logits); got != 1 {
		t.Fatalf("greedy = %d, want 1", got)
	}
	// top_k 2 only ever yields the two best tokens.
	s := New(Params{Temperature: 5, TopK: 2, Seed: 1}, 0)
	seen := map[int32]int{}
	for range 2000 {
		seen[s.Next(logits)]++
	}
	if len(seen) != 2 || seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("top_k=2 drew %v", seen)
	}
	// top_p small keeps only the best.
	s = New(Params{Temperature: 1, TopP: 0.01, Seed: 1}, 0)
	for range 100 {
		if tok := s.Next(logits); tok != 1 {
			t.Fatalf("top_p=0.01 drew %d", tok)
		}
	}
}

func TestSeededIsReproducible(t *testing.T) {
	logits := make([]float32, 100)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	draw := func(seed, stream uint64) []int32 {
		s := New(Params{Temperature: 1, Seed: seed}, stream)
		var out []int32
		for range 50 {
			out = append(out, s.Next(logits))
		}
		return out
	}
	a, b, c := draw(7, 0), draw(7, 0), draw(7, 1)
	same := func(x, y []int32) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("same seed gave different tokens")
	}
	if same(a, c) {
		t.Fatal("different streams gave identical tokens")
	}
}

// Errors name the value in the flag's terms, not strconv's.
func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"temperature:1e308":    `sampling "temperature:1e308": temperature: 1e308 is out of range`,
		"temperature:warm":     `sampling "temperature:warm": temperature: "warm" is not a number`,
		"temperature:1,seed:x": `sampling "temperature:1,seed:x": seed: "x" is not a number`,
	} {
		if _, err := Parse(in); err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
}
