package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/mtlbench/mtlbench/results"
)

// A poisson arrival's times are the same for every repetition of a seed,
// start at once, and their gaps average 1/rate.
func TestArrivals(t *testing.T) {
	if a := (Workload{Requests: 4}).Arrivals(); a != nil {
		t.Fatalf("arrivals without a rate: %v", a)
	}
	w := Workload{Requests: 20000, Rate: 50, Seed: 3}
	a := w.Arrivals()
	if !slices.Equal(a, w.Arrivals()) {
		t.Fatal("the same seed gave other arrivals")
	}
	if other := (Workload{Requests: 20000, Rate: 50, Seed: 4}).Arrivals(); slices.Equal(a, other) {
		t.Fatal("another seed gave the same arrivals")
	}
	if a[0] != 0 {
		t.Errorf("first arrival at %v, want at once", a[0])
	}
	if !slices.IsSorted(a) {
		t.Fatal("arrivals out of order")
	}
	// 19999 exponential gaps of mean 20 ms: their mean is within 3% with
	// odds far past a billion to one (its standard error is 0.7%).
	mean := a[len(a)-1].Seconds() / float64(len(a)-1)
	if math.Abs(mean-1.0/50) > 0.03/50 {
		t.Errorf("mean gap %.5f s, want %.5f", mean, 1.0/50)
	}
	// Exponential gaps: about e^-1 of them are longer than the mean.
	longer := 0
	for i := 1; i < len(a); i++ {
		if a[i]-a[i-1] > 20*time.Millisecond {
			longer++
		}
	}
	if f := float64(longer) / float64(len(a)-1); math.Abs(f-math.Exp(-1)) > 0.02 {
		t.Errorf("%.3f of the gaps are longer than the mean, want %.3f (exponential)", f, math.Exp(-1))
	}
}

// Gamma arrivals, as vLLM's --burstiness draws them: the same mean gap,
// a variance of 1/(R^2 B); burstiness 1 is the Poisson arrivals exactly.
func TestGammaArrivals(t *testing.T) {
	poisson := Workload{Requests: 500, Rate: 50, Seed: 3}.Arrivals()
	if one := (Workload{Requests: 500, Rate: 50, Seed: 3, Burstiness: 1}).Arrivals(); !slices.Equal(one, poisson) {
		t.Error("burstiness 1 gave other arrivals than Poisson ones")
	}
	for _, b := range []float64{0.25, 0.5, 4} {
		w := Workload{Requests: 20000, Rate: 50, Seed: 3, Burstiness: b}
		a := w.Arrivals()
		if !slices.Equal(a, w.Arrivals()) || a[0] != 0 || !slices.IsSorted(a) {
			t.Fatalf("burstiness %g: not seeded, not from 0 or out of order", b)
		}
		var sum, sq float64
		for i := 1; i < len(a); i++ {
			g := (a[i] - a[i-1]).Seconds()
			sum, sq = sum+g, sq+g*g
		}
		n := float64(len(a) - 1)
		mean := sum / n
		variance := sq/n - mean*mean
		// The mean's standard error is 1/sqrt(n*B) of it (at most 1.4%
		// here) and the variance's sqrt((2+6/B)/n) of it (at most 3.7%).
		if math.Abs(mean-1.0/50) > 0.06/50 {
			t.Errorf("burstiness %g: mean gap %.5f s, want %.5f", b, mean, 1.0/50)
		}
		if want := 1 / (50 * 50 * b); math.Abs(variance-want) > 0.2*want {
			t.Errorf("burstiness %g: gap variance %.3g, want %.3g", b, variance, want)
		}
	}
}

// A request's latencies count from its arrival, and goodput counts the
// requests within every bound of the slo.
func TestRequestLatencies(t *testing.T) {
	at := func(ms ...float64) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m*float64(time.Millisecond)))
		}
		return out
	}
	// Offsets from the repetition's start, 8 bytes a token for every token
	// of it, where a time.Time took 24.
	if size := unsafe.Sizeof(reqTimes{}.tokens[0]); size != 8 {
		t.Errorf("a token's time takes %d bytes, want 8", size)
	}
	times := []reqTimes{
		{added: 0, tokens: at(100, 110, 120)},                // ttft 100, tpot 10, e2el 120
		{added: 50 * time.Millisecond, tokens: at(400, 440)}, // waited: ttft 350, tpot 40, e2el 390
		{added: 60 * time.Millisecond, tokens: at(160)},      // one token: ttft 100, no tpot
		{added: 70 * time.Millisecond},                       // never served
	}
	for _, tt := range []struct {
		slo  map[string]float64
		good int
	}{
		{nil, -1},
		{map[string]float64{"ttft": 200}, 2},
		{map[string]float64{"ttft": 400, "tpot": 20}, 2}, // a one-token request meets any tpot bound
		{map[string]float64{"e2el": 120}, 2},
		{map[string]float64{"e2el": 119.9}, 1},
		{map[string]float64{"ttft": 1000, "tpot": 1000, "e2el": 1000}, 3},
	} {
		l := requestLatencies(times, tt.slo)
		if l.good != tt.good {
			t.Errorf("slo %v: %d good requests, want %d", tt.slo, l.good, tt.good)
		}
		if l.completed != 3 || l.generated != 6 {
			t.Errorf("%d completed, %d tokens; want 3 and 6", l.completed, l.generated)
		}
		if want := []float64{100, 350, 100}; !approxEqual(l.ttft, want) {
			t.Errorf("ttft %v, want %v", l.ttft, want)
		}
		if want := []float64{120, 390, 100}; !approxEqual(l.e2el, want) {
			t.Errorf("e2el %v, want %v", l.e2el, want)
		}
		if want := []float64{10, 40}; !approxEqual(l.tpot, want) {
			t.Errorf("tpot %v, want %v", l.tpot, want)
		}
		if want := []float64{10, 10, 40}; !approxEqual(l.itl, want) {
			t.Errorf("itl %v, want %v", l.itl, want)
		}
		got := map[string]float64{}
		for _, s := range l.samples(2 * time.Second) {
			got[s.Metric] = s.Value
		}
		if got["request_per_s"] != 1.5 || got["output_tok_s"] != 3 || got["ttft_ms"] != 100 || got["e2el_ms"] != 120 {
			t.Errorf("samples %v", got)
		}
		if g, ok := got["goodput_per_s"]; ok != (tt.slo != nil) || ok && g != float64(tt.good)/2 {
			t.Errorf("slo %v: goodput_per_s %v (recorded %v)", tt.slo, g, ok)
		}
	}
}

func approxEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// A serving case runs its requests as they arrive on the wall clock: a
// repetition lasts at least until the last arrival, every request is
// served, and its figures are recorded under vLLM's names.
func TestServingCase(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 2
warmup: 0
cases:
  - name: serve
    params: { batch: 2, prompt_len: 4, gen_len: 3, requests: 5, arrival: "poisson:40", slo: "ttft:60000,e2el:60000" }
`)
	arrivals := Workload{Requests: 5, Rate: 40, Seed: uint64(s.Model.Seed)}.Arrivals()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	db := openDB(t)
	sum, err := Run(ctx, s, Options{DB: db, BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	samples, err := db.Samples(sum.Cases[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	byRep := map[int]map[string]results.Sample{}
	for _, smp := range samples {
		if byRep[smp.Rep] == nil {
			byRep[smp.Rep] = map[string]results.Sample{}
		}
		byRep[smp.Rep][smp.Metric] = smp
	}
	if len(byRep) != 2 {
		t.Fatalf("%d repetitions recorded", len(byRep))
	}
	for rep, m := range byRep {
		for _, name := range []string{"request_per_s", "goodput_per_s", "ttft_ms", "ttft_p99_ms", "tpot_ms", "tpot_p99_ms", "e2el_ms", "e2el_p99_ms", "output_tok_s"} {
			if _, ok := m[name]; !ok {
				t.Errorf("rep %d records no %s", rep, name)
			}
		}
		// Five requests over a wall of at least the last arrival.
		if limit := 5 / arrivals[4].Seconds(); m["request_per_s"].Value > limit {
			t.Errorf("rep %d: %.2f requests a second, more than the %.2f the arrivals allow", rep, m["request_per_s"].Value, limit)
		}
		// A cache for the two running at once serves all five.
		if p := m["preemptions"].Value; p != 0 {
			t.Errorf("rep %d: %g preemptions", rep, p)
		}
		// Every request met the generous slo.
		if g, r := m["goodput_per_s"].Value, m["request_per_s"].Value; g != r {
			t.Errorf("rep %d: goodput %.3f of %.3f requests a second", rep, g, r)
		}
		if m["e2el_ms"].Value < m["ttft_ms"].Value || m["output_tok_s"].Unit != "tok/s" || m["request_per_s"].Unit != "req/s" {
			t.Errorf("rep %d: %v", rep, m)
		}
	}
}

// Without a range ratio every request has the case's lengths and the
// prompts are those of the build before range ratios; with one, lengths
// are drawn over the whole of their bounds, the same for every repetition.
func TestLengths(t *testing.T) {
	w := Workload{Requests: 4000, PromptLen: 100, GenLen: 10, Seed: 2}
	p, g := w.Lengths()
	for i := range p {
		if p[i] != 100 || g[i] != 10 {
			t.Fatalf("request %d: %d, %d tokens without a range ratio", i, p[i], g[i])
		}
	}
	// The prompts draw their ids from a stream of their own, as they did
	// before lengths could vary, so recorded workloads keep their tokens.
	prompts := w.Prompts(1000)
	ids := rand.New(rand.NewPCG(2, 7))
	for i, pr := range prompts[:2] {
		for j, id := range pr {
			if want := int32(ids.IntN(1000)); id != want {
				t.Fatalf("prompt %d token %d: id %d, want %d", i, j, id, want)
			}
		}
	}
	if len(prompts[0]) != 100 || len(prompts[3999]) != 100 {
		t.Fatalf("prompts of %d and %d tokens", len(prompts[0]), len(prompts[3999]))
	}
	w.RangeRatio = 0.5
	p, g = w.Lengths()
	p2, g2 := w.Lengths()
	if !slices.Equal(p, p2) || !slices.Equal(g, g2) {
		t.Fatal("the same seed drew other lengths")
	}
	seenP, seenG := map[int]int{}, map[int]int{}
	for i := range p {
		seenP[p[i]]++
		seenG[g[i]]++
	}
	// 50..150 and 5..15, every length drawn (101 and 11 of them, each
	// expected about 40 and 364 times in 4000 draws).
	for l := 50; l <= 150; l++ {
		if seenP[l] == 0 {
			t.Errorf("prompt length %d never drawn", l)
		}
	}
	for l := 5; l <= 15; l++ {
		if seenG[l] == 0 {
			t.Errorf("output length %d never drawn", l)
		}
	}
	if len(seenP) != 101 || len(seenG) != 11 {
		t.Errorf("%d prompt lengths and %d output lengths drawn, want 101 and 11", len(seenP), len(seenG))
	}
	for i, pr := range w.Prompts(1000) {
		if len(pr) != p[i] {
			t.Fatalf("request %d: a prompt of %d tokens, its length %d", i, len(pr), p[i])
		}
	}
	if got, want := w.KVTokens(16, 0), 4000*176; got != want {
		t.Errorf("KVTokens = %d, want %d (the longest request, 150+15 tokens, in blocks of 16)", got, want)
	}
	if got, want := w.KVTokens(16, 8), 8*176; got != want {
		t.Errorf("KVTokens at 8 at once = %d, want %d", got, want)
	}
}

// A case with a range ratio runs requests of its drawn lengths.
func TestRangeRatioCase(t *testing.T) {
	s := loadSuite(t, `name: x
model: { preset: qwen3-moe-mini, layers: 1 }
backend: cpu
repetitions: 1
warmup: 0
cases:
  - name: spread
    params: { batch: 3, prompt_len: 8, gen_len: 6, requests: 6, range_ratio: 0.5, arrival: "poisson:1000" }
`)
	mp := s.Cases[0].Model
	w := Workload{Requests: mp.Requests, PromptLen: mp.PromptLen, GenLen: mp.GenLen, RangeRatio: mp.RangeRatio, Seed: uint64(s.Model.Seed)}
	prompts, gens := w.Lengths()
	if slices.Min(gens) == slices.Max(gens) || slices.Min(prompts) == slices.Max(prompts) {
		t.Fatalf("the seed drew equal lengths %v, %v: the test would not tell", prompts, gens)
	}
	request := w.requests(100)
	for i := range w.Requests {
		r := request()
		if r.ID != i || len(r.Prompt) != prompts[i] || r.MaxNewTokens != gens[i] {
			t.Errorf("request %d (id %d): %d prompt tokens to %d new, want %d to %d", i, r.ID, len(r.Prompt), r.MaxNewTokens, prompts[i], gens[i])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	sum, err := Run(ctx, s, Options{DB: openDB(t), BandwidthBuffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Failed > 0 {
		t.Fatalf("%d cases failed", sum.Failed)
	}
}
