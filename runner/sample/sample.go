// Package sample picks the next token from logits: greedy, or seeded
// temperature sampling with optional top-k and top-p truncation.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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

// Check refuses params the sampler would not draw by: a NaN or infinite
// temperature (every weight NaN, or all equal), a negative top-k, a top-p
// outside [0, 1]. Next would otherwise run them without a word, picking the
// least likely token or ignoring the bound.
func (p Params) Check() error {
	t := float64(p.Temperature)
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0):
		return fmt.Errorf("sampling temperature %v: want a finite number (0 or less: greedy)", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("sampling top_k %d: want 0 (no limit) or more", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("sampling top_p %v: want a number in [0, 1] (0 or 1: no limit)", p.TopP)
	}
	return nil
}

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

// Of is a decoded sampling value as the sampler takes it, converted by the
// rule the parser checks values against, so that a value it accepts as
// sampled is sampled.
func Of(s suites.Sampling) Params {
	return Params{Temperature: suites.SamplerFloat(s.Temperature), TopK: s.TopK, TopP: suites.SamplerFloat(s.TopP), Seed: s.Seed}
}

// Sampler draws tokens for one request; its generator is seeded so a run is
// reproducible.
type Sampler struct {
	p   Params
	rng *rand.Rand
	*Scratch
}

// Scratch is what a draw works in, sized by the vocabulary: 1.2 MiB after
// a top-p draw over Qwen3's 151,936 logits. Samplers whose draws never
// overlap (an engine's, which draws each sampled row of a step in turn)
// share one (NewIn), so a batch of sampled sequences holds one, not one
// each, which no fit check counts.
type Scratch struct {
	probs []float32
	idx   []int
	heap  []int
	bins  []uint16
	hist  [nbins]float64 // weigh's sums by bin
	w     []float32      // each token's weight, as weigh found it
	parts []weightPart
	// rankIndex's scratch: keys, the keys and indices being moved, and
	// the counts of one pass
	keys, keys2 []uint32
	idx2        []int
	count       []int
}

// New returns a sampler with a scratch of its own; stream separates the
// random streams of requests that share a seed.
func New(p Params, stream uint64) *Sampler { return NewIn(p, stream, nil) }

// NewIn returns a sampler drawing in sc, which other samplers may share as
// long as their draws never overlap; nil: one of its own, made at its
// first draw (a greedy sampler never makes one).
func NewIn(p Params, stream uint64, sc *Scratch) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, stream)), Scratch: sc}
}

// Next picks a token from logits. With a temperature T it ranks the
// tokens by logit, highest first (ties to the lower index), keeps the
// first TopK, weighs each exp((l-max)/T), keeps the shortest prefix holding
// TopP of the weight, and draws one by weight: a uniform r over the kept
// weight, walked down the ranking.
//
// A vocabulary of 150k tokens is not sorted for it: the walk only ever
// reaches a short prefix of the ranking. Top-k selects its k tokens with a
// heap; otherwise the weights are binned by their eighth of a power of two
// (nbins), the bins before the draw's are passed by their sums, and only
// the one or two bins the walk ends in are ranked (binWalk).
func (s *Sampler) Next(logits []float32) int32 {
	if s.p.Greedy() {
		return int32(argmax(logits))
	}
	if s.Scratch == nil {
		s.Scratch = new(Scratch)
	}
	u := s.rng.Float64()
	n := len(logits)
	if k := s.p.TopK; k > 0 && k < n {
		s.idx = s.topK(logits, k)
		mx := logits[s.idx[0]]
		var sum float64
		s.probs = s.probs[:0]
		for _, i := range s.idx {
			e := math.Exp(float64((logits[i] - mx) / s.p.Temperature))
			sum += e
			s.probs = append(s.probs, float32(e))
		}
		return s.walk(s.idx, sum, u)
	}
	mx := logits[argmax(logits)]
	sum, hist := s.weigh(logits, mx)
	if tok, ok := s.binWalk(logits, sum, u, hist); ok {
		return tok
	}
	// A bin's edge lies within rounding of the draw, which is rare: rank
	// every token, as the definition does.
	s.idx = s.idx[:0]
	for i := range n {
		s.idx = append(s.idx, i)
	}
	s.rankIndex(logits, s.idx)
	s.probs = s.probs[:0]
	for _, i := range s.idx {
		s.probs = append(s.probs, s.w[i])
	}
	return s.walk(s.idx, sum, u)
}

// binMargin is how near, relative to the weights' sum, binWalk lets a
// bin's edge come to what the walk must pass: the bins' sums are added in
// another order than the walk's, a rounding of about 1e-16 of the sum.
// (A variable so that tests can make every walk rank its whole prefix.)
var binMargin = 1e-9

// binWalk draws as walk does over the ranking, but passes whole bins by
// their sums (in hist) and ranks only the bin the top-p prefix ends in
// and the bin the draw ends in. It declines (ok false) where an edge of
// those bins lies within binMargin of what the walk must pass there.
func (s *Sampler) binWalk(logits []float32, sum, u float64, hist *[nbins]float64) (int32, bool) {
	// bin finds the bin among the first lim in which a walk passing need
	// ends, and the weight of the bins before it.
	bin := func(need float64, lim int) (int, float64, bool) {
		acc := 0.0
		for b := range lim {
			next := acc + hist[b]
			if next > need {
				return b, acc, need-acc > binMargin*sum && next-need > binMargin*sum
			}
			acc = next
		}
		return 0, 0, false
	}
	if !(s.p.TopP > 0 && s.p.TopP < 1) {
		r := u * sum
		b, before, ok := bin(r, nbins)
		if !ok {
			return 0, false
		}
		return s.walkBin(s.rankBin(logits, b), r-before)
	}
	// The shortest prefix holding TopP of the weight ends in bin b1.
	topP := float64(s.p.TopP)
	b1, before, ok := bin(topP*sum, nbins)
	if !ok {
		return 0, false
	}
	idx := s.rankBin(logits, b1)
	c, keep := before/sum, -1
	kept := before
	for j, i := range idx {
		kept += float64(s.w[i])
		if c += float64(s.w[i]) / sum; c >= topP {
			keep = j + 1
			break
		}
	}
	if keep < 0 {
		return 0, false
	}
	r := u * kept
	if b2, before2, ok := bin(r, b1); ok {
		return s.walkBin(s.rankBin(logits, b2), r-before2)
	} else if r < before+binMargin*sum {
		return 0, false // in an earlier bin, or near its edge
	}
	if kept-r <= binMargin*sum {
		return 0, false
	}
	return s.walkBin(idx[:keep], r-before)
}

// rankBin is bin b's tokens, ranked.
func (s *Sampler) rankBin(logits []float32, b int) []int {
	s.idx = s.idx[:0]
	for i, x := range s.bins {
		if int(x) == b {
			s.idx = append(s.idx, i)
		}
	}
	s.rankIndex(logits, s.idx)
	return s.idx
}

// walkBin takes each ranked token's weight from r until it goes negative.
func (s *Sampler) walkBin(idx []int, r float64) (int32, bool) {
	for _, i := range idx {
		if r -= float64(s.w[i]); r < 0 {
			return int32(i), true
		}
	}
	return 0, false
}

// walk draws from the kept tokens ranked in idx, weighed in s.probs, whose
// weights sum to sum: the shortest prefix holding TopP of the weight, then
// r = u times its weight, less each token's weight in turn until it goes
// negative (the last token, should rounding leave r short).
func (s *Sampler) walk(idx []int, sum, u float64) int32 {
	if s.p.TopP > 0 && s.p.TopP < 1 {
		c := 0.0
		for j, pr := range s.probs {
			if c += float64(pr) / sum; c >= float64(s.p.TopP) {
				s.probs = s.probs[:j+1]
				break
			}
		}
		sum = 0
		for _, pr := range s.probs {
			sum += float64(pr)
		}
	}
	r := u * sum
	for j, pr := range s.probs {
		if r -= float64(pr); r < 0 {
			return int32(idx[j])
		}
	}
	return int32(idx[len(s.probs)-1])
}

// nbins is the bins of weights: a float64 weight's exponent and its
// three leading mantissa bits, bin 0 the largest (1), each bin an eighth
// of a power of two below the one before, the last every weight below
// 2^-(nbins/8-1). Fine bins keep the one a walk ends in short.
const nbins = 512

// weighChunk is the tokens one goroutine weighs at a time: the partial
// sums are added in chunk order, so the sum is the same on every machine.
const weighChunk = 16384

// weightPart is one chunk's share of weigh's sums.
type weightPart struct {
	sum  float64
	hist [nbins]float64
}

// weigh returns the sum of every token's weight exp((l-mx)/T) and the sums
// by bin of the weights as the walk takes them (rounded to float32), and
// notes each token's bin in s.bins. A large vocabulary is weighed in
// chunks on the host's cores, idle while a step samples.
func (s *Sampler) weigh(logits []float32, mx float32) (float64, *[nbins]float64) {
	n := len(logits)
	s.bins = slices.Grow(s.bins[:0], n)[:n]
	s.w = slices.Grow(s.w[:0], n)[:n]
	chunks := (n + weighChunk - 1) / weighChunk
	s.parts = slices.Grow(s.parts[:0], chunks)[:chunks]
	work := func(c int) {
		lo, hi := c*weighChunk, min(n, (c+1)*weighChunk)
		var p weightPart // the goroutine's own: parts side by side share cache lines
		for i, l := range logits[lo:hi] {
			e := math.Exp(float64((l - mx) / s.p.Temperature))
			p.sum += e
			// The exponent and three mantissa bits: 8184 for 1, one less
			// for each eighth of a halving; 0 for zero.
			b := 8184 - int(math.Float64bits(e)>>49)
			b = min(max(b, 0), nbins-1)
			w := float32(e)
			p.hist[b] += float64(w)
			s.bins[lo+i] = uint16(b)
			s.w[lo+i] = w
		}
		s.parts[c] = p
	}
	if workers := min(runtime.GOMAXPROCS(0), chunks); workers > 1 {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for c := int(next.Add(1) - 1); c < chunks; c = int(next.Add(1) - 1) {
					work(c)
				}
			})
		}
		wg.Wait()
	} else {
		for c := range chunks {
			work(c)
		}
	}
	sum, hist := 0.0, &s.hist
	*hist = [nbins]float64{}
	for i := range s.parts {
		p := &s.parts[i]
		sum += p.sum
		for b, m := range p.hist {
			hist[b] += m
		}
	}
	return sum, hist
}

// better ranks token a before b: a higher logit, or the same and a lower
// index.
func better(logits []float32, a, b int) bool {
	return logits[a] > logits[b] || (logits[a] == logits[b] && a < b)
}

// rank sorts idx into the ranking.
func (s *Sampler) rank(logits []float32, idx []int) {
	slices.SortFunc(idx, func(a, b int) int {
		if better(logits, a, b) {
			return -1
		}
		return 1
	})
}

// rankIndex sorts idx, in index order, into the ranking: a stable radix
// sort of the logits' bits, so ties keep index order. A flat
// distribution's walk reaches most of a vocabulary of 150k tokens, which a
// comparison sort takes tens of milliseconds to rank. Below 64k tokens
// four passes of 8 bits are cheaper than two of 16, whose counts alone are
// 65,536 words to clear a pass.
func (s *Sampler) rankIndex(logits []float32, idx []int) {
	n := len(idx)
	if n < 1024 {
		s.rank(logits, idx)
		return
	}
	digit := 16
	if n < 1<<16 {
		digit = 8
	}
	s.keys = slices.Grow(s.keys[:0], n)[:n]
	s.keys2 = slices.Grow(s.keys2[:0], n)[:n]
	s.idx2 = slices.Grow(s.idx2[:0], n)[:n]
	s.count = slices.Grow(s.count[:0], 1<<digit)[:1<<digit]
	mask := uint32(1)<<digit - 1
	for j, i := range idx {
		s.keys[j] = descending(logits[i])
	}
	keys, keys2, from, to := s.keys, s.keys2, idx, s.idx2
	for shift := 0; shift < 32; shift += digit {
		clear(s.count)
		for _, k := range keys {
			s.count[k>>shift&mask]++
		}
		at := 0
		for d, c := range s.count {
			s.count[d], at = at, at+c
		}
		for j, k := range keys {
			d := k >> shift & mask
			keys2[s.count[d]], to[s.count[d]] = k, from[j]
			s.count[d]++
		}
		keys, keys2, from, to = keys2, keys, to, from
	}
	// An even number of passes: the ranked indices are back in idx.
}

// descending is a key that sorts logits, as unsigned integers, from the
// highest: -0 as +0, so the two tie as they compare.
func descending(l float32) uint32 {
	if l == 0 {
		l = 0
	}
	b := math.Float32bits(l)
	if b>>31 != 0 {
		return b // negative: larger magnitudes rank later
	}
	return ^b &^ (1 << 31) // positive: larger ones rank first, before every negative
}

// topK returns the first k of the ranking, ranked: a heap of the best k
// so far, its worst at the root.
func (s *Sampler) topK(logits []float32, k int) []int {
	h := s.heap[:0]
	down := func(j int) {
		for {
			w, l, r := j, 2*j+1, 2*j+2
			if l < len(h) && better(logits, h[w], h[l]) {
				w = l
			}
			if r < len(h) && better(logits, h[w], h[r]) {
				w = r
			}
			if w == j {
				return
			}
			h[j], h[w] = h[w], h[j]
			j = w
		}
	}
	i := 0
	for ; i < len(logits) && len(h) < k; i++ {
		h = append(h, i)
		for j := len(h) - 1; j > 0 && better(logits, h[(j-1)/2], h[j]); j = (j - 1) / 2 {
			h[j], h[(j-1)/2] = h[(j-1)/2], h[j]
		}
	}
	if len(h) > 0 {
		// A later token ranks after every one in the heap that it ties, so
		// only a higher logit than the root's enters: one compare a token,
		// against a register.
		worst := logits[h[0]]
		for ; i < len(logits); i++ {
			if logits[i] > worst {
				h[0] = i
				down(0)
				worst = logits[h[0]]
			}
		}
	}
	s.heap = h
	idx := append(s.idx[:0], h...)
	s.rank(logits, idx)
	return idx
}

// argmax is the first index of the largest value (0 for none, or when the
// first is NaN, which nothing exceeds).
func argmax(x []float32) int {
	if len(x) == 0 {
		return 0
	}
	best, bv := 0, x[0]
	for i, v := range x {
		if v > bv {
			best, bv = i, v
		}
	}
	return best
}
