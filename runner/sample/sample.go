// Package sample picks the next token from logits: greedy, or seeded
// temperature sampling with optional top-k and top-p truncation.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/mtlbench/mtlbench/suites"
)

// Params configure sampling. Temperature 0 means greedy.
type Params struct {
	Temperature float32
	TopK        int     // 0: no limit
	TopP        float32 // 0 or 1: no limit
	Seed        uint64
}

// Greedy reports whether the params pick the argmax.
func (p Params) Greedy() bool { return p.Temperature <= 0 }

func (p Params) String() string {
	if p.Greedy() {
		return "greedy"
	}
	s := fmt.Sprintf("temperature:%g", p.Temperature)
	if p.TopK > 0 {
		s += fmt.Sprintf(",top_k:%d", p.TopK)
	}
	if p.TopP > 0 && p.TopP < 1 {
		s += fmt.Sprintf(",top_p:%g", p.TopP)
	}
	return s
}

// Parse reads a sampling value in the suites' grammar
// (suites.ParseSampling): "greedy", or "temperature:T[,top_k:K][,top_p:P][,seed:S]"
// in any order, temperature 0 being greedy.
func Parse(s string) (Params, error) {
	p, err := suites.ParseSampling(s)
	return Of(p), err
}

// Of is a decoded sampling value as the sampler takes it.
func Of(s suites.Sampling) Params {
	return Params{Temperature: float32(s.Temperature), TopK: s.TopK, TopP: float32(s.TopP), Seed: s.Seed}
}

// Sampler draws tokens for one request; its generator is seeded so a run is
// reproducible.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	probs []float32
	idx   []int
}

// New returns a sampler; stream separates the random streams of requests
// that share a seed.
func New(p Params, stream uint64) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, stream))}
}

// Next picks a token from logits.
func (s *Sampler) Next(logits []float32) int32 {
	if s.p.Greedy() {
		return int32(argmax(logits))
	}
	n := len(logits)
	s.idx = s.idx[:0]
	for i := 0; i < n; i++ {
		s.idx = append(s.idx, i)
	}
	// Sort candidates by logit so top-k and top-p are prefixes.
	slices.SortStableFunc(s.idx, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	keep := n
	if s.p.TopK > 0 && s.p.TopK < keep {
		keep = s.p.TopK
	}
	s.probs = s.probs[:0]
	mx := logits[s.idx[0]]
	var sum float64
	for _, i := range s.idx[:keep] {
		e := math.Exp(float64((logits[i] - mx) / s.p.Temperature))
		s.probs = append(s.probs, float32(e))
		sum += e
	}
	if s.p.TopP > 0 && s.p.TopP < 1 {
		var c float64
		for j, pr := range s.probs {
			c += float64(pr) / sum
			if c >= float64(s.p.TopP) {
				keep = j + 1
				break
			}
		}
		s.probs = s.probs[:keep]
		sum = 0
		for _, pr := range s.probs {
			sum += float64(pr)
		}
	}
	r := s.rng.Float64() * sum
	for j, pr := range s.probs {
		r -= float64(pr)
		if r < 0 {
			return int32(s.idx[j])
		}
	}
	return int32(s.idx[len(s.probs)-1])
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
