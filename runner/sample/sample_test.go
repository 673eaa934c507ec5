package sample

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mtlbench/mtlbench/suites"
)

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
		// float32 reads it as 0: the case would run greedy, keyed as sampled
		"temperature:1e-50": `sampling "temperature:1e-50": temperature: 1e-50 is too small (the least above 0 is 1.4e-45; 0 is greedy)`,
	} {
		if _, err := Parse(in); err == nil || err.Error() != want {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
}

// A value the parser accepts is greedy to the sampler exactly when its key
// says greedy.
func TestKeySaysWhatTheSamplerDoes(t *testing.T) {
	for _, in := range []string{"greedy", "temperature:0", "temperature:1e-45", "temperature:1.5e-45", "temperature:0.7",
		"temperature:3.4e38", "temperature:1,top_p:1.4e-45", "temperature:1e-40,top_k:2"} {
		s, err := suites.ParseSampling(in)
		if err != nil {
			t.Errorf("ParseSampling(%q): %v", in, err)
			continue
		}
		if p := Of(s); p.Greedy() != (s.String() == "greedy") || p.Greedy() != s.Greedy() {
			t.Errorf("%q: the sampler runs greedy %v, the key says %q", in, p.Greedy(), s.String())
		}
	}
}

// ranked is the sampler's definition taken literally: the whole vocabulary
// sorted by logit (stable, so ties keep the lower index first), the first
// TopK kept, weights exp((l-max)/T) summed in that order, the shortest
// prefix holding TopP of them, and r = u times their sum walked down it.
func ranked(p Params, rng *rand.Rand, logits []float32, idx []int) int32 {
	u := rng.Float64()
	keep := len(idx)
	if p.TopK > 0 && p.TopK < keep {
		keep = p.TopK
	}
	mx := logits[idx[0]]
	var probs []float32
	var sum float64
	for _, i := range idx[:keep] {
		e := math.Exp(float64((logits[i] - mx) / p.Temperature))
		probs = append(probs, float32(e))
		sum += e
	}
	if p.TopP > 0 && p.TopP < 1 {
		c := 0.0
		for j, pr := range probs {
			if c += float64(pr) / sum; c >= float64(p.TopP) {
				keep = j + 1
				break
			}
		}
		probs, sum = probs[:keep], 0
		for _, pr := range probs {
			sum += float64(pr)
		}
	}
	r := u * sum
	for j, pr := range probs {
		if r -= float64(pr); r < 0 {
			return int32(idx[j])
		}
	}
	return int32(idx[len(probs)-1])
}

// ranking is the vocabulary sorted by logit, stable.
func ranking(logits []float32) []int {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
	return idx
}

// The sampler draws what the literal definition draws, token for token
// from the same seed, over vocabularies large and small, flat and peaked,
// with ties, at every truncation: it ranks only what its walk can reach,
// by the bins the walk ends in or, where a bin's edge is too near the
// draw, the whole prefix before them (every walk, with a margin of 1).
func TestNextMatchesRanking(t *testing.T) {
	for _, margin := range []float64{binMargin, 1} {
		t.Run(fmt.Sprintf("margin=%g", margin), func(t *testing.T) {
			defer func(m float64) { binMargin = m }(binMargin)
			binMargin = margin
			testNextMatchesRanking(t)
		})
	}
}

func testNextMatchesRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type dist struct {
		name   string
		logits []float32
	}
	gauss := func(n int, sd float64) []float32 {
		l := make([]float32, n)
		for i := range l {
			l[i] = float32(r.NormFloat64() * sd)
		}
		return l
	}
	ties := gauss(4096, 2)
	for i := range ties {
		ties[i] = float32(math.Round(float64(ties[i])*2) / 2) // many equal logits
	}
	zeros := make([]float32, 5000) // +0 and -0 tie, as they compare
	for i := range zeros {
		switch i % 3 {
		case 1:
			zeros[i] = float32(math.Copysign(0, -1))
		case 2:
			zeros[i] = float32(r.NormFloat64() * 1e-3)
		}
	}
	peaked := gauss(32000, 1)
	peaked[1234] = 40 // one token holds nearly all the weight
	dists := []dist{
		{"vocab 151936, sd 3", gauss(151936, 3)},
		{"vocab 32000, sd 0.05 (flat)", gauss(32000, 0.05)},
		{"vocab 4096, ties", ties},
		{"vocab 32000, one dominant", peaked},
		{"vocab 5", []float32{0.1, 3, 2.9, -1, 0}},
		{"vocab 300, equal", make([]float32, 300)},
		{"vocab 5000, zeros of both signs", zeros},
	}
	for _, d := range dists {
		n, order := len(d.logits), ranking(d.logits)
		for _, p := range []Params{
			{Temperature: 0.7}, {Temperature: 1, TopP: 0.9}, {Temperature: 0.3, TopP: 0.5}, {Temperature: 5, TopP: 0.99},
			{Temperature: 0.8, TopK: 40}, {Temperature: 1, TopK: 1}, {Temperature: 2, TopK: 20, TopP: 0.8},
			{Temperature: 1, TopK: n - 1}, {Temperature: 1, TopK: n}, {Temperature: 1.3, TopK: n + 5, TopP: 0.95},
		} {
			p.Seed = 11
			s, ref := New(p, 2), rand.New(rand.NewPCG(p.Seed, 2))
			draws := 60
			if n > 5000 {
				draws = 15
			}
			for j := range draws {
				got, want := s.Next(d.logits), ranked(p, ref, d.logits, order)
				if got != want {
					t.Fatalf("%s, %v: draw %d gave %d, the ranking %d", d.name, p, j, got, want)
				}
			}
		}
	}
}

// BenchmarkNext samples from Qwen3's vocabulary (151,936 logits): the
// sampler, and the ranking of the whole vocabulary (ranked) it stands for.
// A step that samples waits for it, on every backend.
//
//	go test -run '^$' -bench Next ./runner/sample/
func BenchmarkNext(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	// Logits of spread 3, and of spread 0.3: a random model's, whose
	// nucleus holds most of the vocabulary.
	for _, sd := range []float64{3, 0.3} {
		logits := make([]float32, 151936)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * sd)
		}
		for _, p := range []Params{{Temperature: 0.7}, {Temperature: 0.7, TopP: 0.9}, {Temperature: 0.7, TopK: 40}} {
			name := fmt.Sprintf("sd=%g/%v", sd, p)
			b.Run(name, func(b *testing.B) {
				s := New(p, 0)
				for range b.N {
					s.Next(logits)
				}
			})
			b.Run(name+"/ranked", func(b *testing.B) {
				rng := rand.New(rand.NewPCG(0, 0))
				for range b.N {
					ranked(p, rng, logits, ranking(logits))
				}
			})
		}
	}
}
