package bench

import (
	"github.com/mtlbench/mtlbench/internal/reqlen"
	"github.com/mtlbench/mtlbench/runner/cache"
	"github.com/mtlbench/mtlbench/runner/sample"
	"github.com/mtlbench/mtlbench/runner/sched"
	"github.com/mtlbench/mtlbench/suites"
)

// caseWorkload is the workload a model case runs.
func caseWorkload(s *suites.Suite, mp suites.ModelParams) Workload {
	return Workload{Requests: mp.Requests, PromptLen: mp.PromptLen, GenLen: mp.GenLen, Depth: mp.Depth, Seed: uint64(s.Model.Seed),
		Stagger: mp.Stagger, Rate: mp.Rate, Burstiness: mp.Burstiness, SLO: mp.SLO, RangeRatio: mp.RangeRatio, Sampling: sample.Of(mp.Sampling)}
}

// caseTokenBudget is the prefill budget a model case's engine runs with:
// prefill_budget, or at a depth without one the batch's prompts in one
// step (llama-bench's pp @ d): the context is filled in chunks of it, then
// the prompts after the depth are one step and decode together.
func caseTokenBudget(mp suites.ModelParams) int {
	if mp.Depth > 0 && mp.PrefillBudget == 0 {
		prompt, _ := mp.MaxLens()
		return prompt * max(min(mp.MaxSeqs, mp.Requests), 1)
	}
	return mp.PrefillBudget
}

// seatWork bounds the tokens mostSideBySide schedules before it gives up
// undecided: a case of many long requests is left to run.
const seatWork = 1 << 22

// mostSideBySide runs the scheduler over w's requests, every one arriving
// at once, as a model case hands them to the engine (its queue as deep as
// maxSeqs), on a cache of blocks, a placeholder standing for each sampled
// token (bench requests stop at their length, never at a token): the most
// requests it ran side by side, stopping once that reaches enough. decided
// is false where it gave up (past seatWork tokens) or the scheduler
// refused, which run reports as it does.
func mostSideBySide(w Workload, blocks, blockSize, budget, maxSeqs, enough int) (most int, decided bool) {
	kv, err := cache.New(blocks, blockSize)
	if err != nil {
		return 0, false
	}
	s := sched.New(sched.Config{TokenBudget: budget, MaxSeqs: maxSeqs}, kv)
	// Drawn as they are seated: a case of a million requests that decides
	// within its first few draws no more (Lengths' order).
	lengths := reqlen.Stream(w.PromptLen, w.GenLen, w.RangeRatio, w.Seed)
	n, queue := w.Requests, w.Requests
	if maxSeqs > 0 {
		queue = maxSeqs
	}
	next, work := 0, 0
	for next < n || s.Pending() {
		for next < n && s.Waiting() < queue {
			pl, gl := lengths()
			p := w.Depth + pl
			q := &sched.Seq{ID: next, Tokens: make([]int32, p, p+gl), Prompt: p, MaxNew: gl, Split: w.Depth}
			if s.Add(q) != nil {
				return most, false
			}
			next++
		}
		b, err := s.Next()
		if err != nil {
			return most, false
		}
		if most = max(most, s.Running()); most >= enough {
			return most, true
		}
		for _, it := range b.Items {
			if it.Sample {
				s.Put(it.Seq, it.Start+it.N, 0)
			}
		}
		if work += b.NumTokens; work > seatWork {
			return most, false
		}
	}
	return most, true
}
