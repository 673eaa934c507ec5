// Package reqlen draws a workload's request lengths: runner/bench runs the
// requests it draws, and suites checks a suite against the same ones
// (docs/suites.md, range_ratio).
package reqlen

import (
	"math"
	"math/rand/v2"
)

// Bounds are the lengths a request draws from around n at range ratio r,
// both ends included, as vLLM's random dataset draws them:
// floor(n·(1-r)) to ceil(n·(1+r)), the lower no less than least.
func Bounds(n int, r float64, least int) (lo, hi int) {
	if r <= 0 {
		return n, n
	}
	// Rounded to a millionth first: 3000·1.1 is 3300.0000000000005 in
	// floats, whose ceiling would reach a token further than meant.
	round := func(x float64) float64 { return math.Round(x*1e6) / 1e6 }
	lo = max(int(math.Floor(round(float64(n)*(1-r)))), least)
	hi = max(int(math.Ceil(round(float64(n)*(1+r)))), lo)
	return lo, hi
}

// Draw is each of requests' prompt and output lengths: promptLen and
// genLen, or with a range ratio r drawn uniformly from their Bounds (at
// least 1), seeded so every repetition, build and check sees the same ones.
func Draw(requests, promptLen, genLen int, r float64, seed uint64) (prompt, gen []int) {
	prompt, gen = make([]int, requests), make([]int, requests)
	i := 0
	Each(requests, promptLen, genLen, r, seed, func(p, g int) bool {
		prompt[i], gen[i] = p, g
		i++
		return true
	})
	return prompt, gen
}

// Each calls f with each request's prompt and output lengths in turn, as
// Draw draws them, until f returns false: a check that stops at the first
// request it looks for need not draw a million.
func Each(requests, promptLen, genLen int, r float64, seed uint64, f func(prompt, gen int) bool) {
	next := Stream(promptLen, genLen, r, seed)
	for range requests {
		if !f(next()) {
			return
		}
	}
}

// Stream returns the requests' lengths one a call, in Draw's order, for a
// caller that takes them as it goes (a scheduler seating requests).
func Stream(promptLen, genLen int, r float64, seed uint64) func() (prompt, gen int) {
	plo, phi := Bounds(promptLen, r, 1)
	glo, ghi := Bounds(genLen, r, 1)
	rng := rand.New(rand.NewPCG(seed, 13))
	return func() (int, int) {
		return plo + rng.IntN(phi-plo+1), glo + rng.IntN(ghi-glo+1)
	}
}
