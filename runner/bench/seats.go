package bench

import (
	"fmt"
	"strings"

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

// seatWork bounds the tokens one scheduler run of mostSideBySide schedules
// before it gives up undecided: a case of many long requests is left to run.
const seatWork = 1 << 22

// suiteSeatWork bounds the work of every scheduler run and every request
// drawn that one suite's checks make together (Check's, run's), in units
// of about 15 ns on one core (runWork, drawWork): each case's runs are
// bounded by seatWork, but a sweep of a thousand kv_blocks values over a
// million requests took minutes.
const suiteSeatWork = 1 << 27

// seatMemory bounds what one scheduler run holds, its pool's blocks and
// its requests' tokens (int32 each): a pool of billions of blocks is
// given up before it is allocated, not run out of memory.
const seatMemory = 1 << 26

// seatKey is what a scheduler run of mostSideBySide depends on: two cases
// of a sweep that run the same (the pool of the workload's size, shared by
// every kv_blocks value) run it once.
type seatKey struct {
	requests, prompt, gen, depth               int
	ratio                                      float64
	seed                                       uint64
	blocks, blockSize, budget, maxSeqs, enough int
}

// seatRun is the outcome of one scheduler run.
type seatRun struct {
	most    int
	decided bool
	// gaveUp, when not empty, says which bound stopped the run undecided
	// (not a refusal of the scheduler, which run reports as it does).
	gaveUp string
}

// poolKey groups the runs whose pools the hint's search compares: the
// same requests, scheduled alike, to seat as many.
type poolKey struct {
	requests, prompt, gen, depth int
	ratio                        float64
	seed                         uint64
	blockSize, budget, maxSeqs   int
	want                         int
}

// pools is what the runs of a poolKey found: the fewest blocks known to
// seat its want, the most known not to (0: none).
type pools struct{ seat, short int }

// suiteChecks holds the scheduler runs and draws of one suite's checks
// (Check's, or run's before any work): identical ones are made once, all
// of them together do at most suiteSeatWork, and the checks given up are
// kept to be said (notes), not passed or refused without a word.
type suiteChecks struct {
	runs       map[seatKey]seatRun
	pools      map[poolKey]*pools
	drawn      map[drawKey]drawn
	spent      int
	notChecked map[unchecked][]string // the cases of each
	order      []unchecked            // as first met
}

func newSuiteChecks() *suiteChecks {
	return &suiteChecks{runs: map[seatKey]seatRun{}, pools: map[poolKey]*pools{}, drawn: map[drawKey]drawn{}, notChecked: map[unchecked][]string{}}
}

// unchecked is a check given up, as notes says it: what was not checked
// (%s: the cases), why, and what the run does instead (a %s in it: its
// or their).
type unchecked struct{ what, why, then string }

// What the checks give up, said by suiteChecks.notes.
const (
	seatsUnchecked     = "kv_blocks of %s not checked against what seats the batch"
	seatsThen          = "the run records %s preemptions"
	positionsUnchecked = "the requests of %s not checked against the model's positions"
	kvUnchecked        = "kv_blocks of %s not checked against the longest request the run draws"
	positionsThen      = "the run refuses a request past them when it comes"
	kvThen             = "the run stops at a request they cannot hold"
	stepUnchecked      = "the largest step of %s sized for the longest request the range allows, not the longest the run draws"
)

// giveUp notes that case name's check what was given up, and why.
func (sc *suiteChecks) giveUp(what, why, then, name string) {
	u := unchecked{what, why, then}
	if _, ok := sc.notChecked[u]; !ok {
		sc.order = append(sc.order, u)
	}
	sc.notChecked[u] = append(sc.notChecked[u], name)
}

// notes are the lines that say which cases' checks were given up, one a
// check and reason, naming up to three cases and how many more.
func (sc *suiteChecks) notes() []string {
	var out []string
	for _, u := range sc.order {
		names := sc.notChecked[u]
		list := strings.Join(names[:min(len(names), 3)], ", ")
		if len(names) > 3 {
			list += fmt.Sprintf(" and %d more", len(names)-3)
		}
		which, their := "case "+list, "its"
		if len(names) > 1 {
			which, their = "cases "+list, "their"
		}
		line := fmt.Sprintf(u.what, which) + ": " + u.why
		switch {
		case strings.Contains(u.then, "%s"):
			line += "; " + fmt.Sprintf(u.then, their)
		case u.then != "":
			line += "; " + u.then
		}
		out = append(out, line)
	}
	return out
}

// drawKey is what the requests a workload draws depend on.
type drawKey struct {
	requests, prompt, gen int
	ratio                 float64
	seed                  uint64
}

// drawn is the longest request of a workload (Workload.longest), or why
// it was not found.
type drawn struct {
	i, prompt, gen int
	gaveUp         string
}

// drawWork is a drawn request's work in runWork's units.
const drawWork = 3

// longest is w.longest(), drawn once for a suite however many cases ask,
// within what is left of suiteSeatWork; why says why it gave up, if it
// did (gaveUpSuite).
func (sc *suiteChecks) longest(w Workload) (i, prompt, gen int, why string) {
	if w.RangeRatio <= 0 {
		return 0, w.PromptLen, w.GenLen, "" // nothing drawn
	}
	k := drawKey{w.Requests, w.PromptLen, w.GenLen, w.RangeRatio, w.Seed}
	d, ok := sc.drawn[k]
	if !ok {
		left := (suiteSeatWork - sc.spent) / drawWork
		n := 0
		d.i, d.prompt, d.gen = w.longestWithin(func() bool { n++; return n <= left })
		if n > left && n < w.Requests { // stopped short, not at the last request
			d = drawn{gaveUp: gaveUpSuite}
		}
		sc.spent += n * drawWork
		sc.drawn[k] = d
	}
	return d.i, d.prompt, d.gen, d.gaveUp
}

// run is mostSideBySide(w, blocks, ...), run once for a suite however many
// cases ask, within what is left of suiteSeatWork.
func (sc *suiteChecks) run(w Workload, blocks, blockSize, budget, maxSeqs, enough int) seatRun {
	k := seatKey{w.Requests, w.PromptLen, w.GenLen, w.Depth, w.RangeRatio, w.Seed, blocks, blockSize, budget, maxSeqs, enough}
	if r, ok := sc.runs[k]; ok {
		return r
	}
	r, work := mostSideBySide(w, blocks, blockSize, budget, maxSeqs, enough, suiteSeatWork-sc.spent)
	sc.spent += work
	sc.runs[k] = r
	return r
}

// The reasons a check gives up, said by suiteChecks.notes.
var (
	gaveUpCase  = fmt.Sprintf("the scheduler's run over the case's requests passed %d tokens undecided", seatWork)
	gaveUpSuite = "the suite's checks had reached their bound of work (scheduler runs and requests drawn) by then (split the suite to check the rest)"
	gaveUpPool  = fmt.Sprintf("the scheduler's run would hold more than %d blocks and tokens", seatMemory)
)

// mostSideBySide runs the scheduler over w's requests, every one arriving
// at once, as a model case hands them to the engine (its queue as deep as
// maxSeqs), on a cache of blocks, a placeholder standing for each sampled
// token (bench requests stop at their length, never at a token): the most
// requests it ran side by side, stopping once that reaches enough, and the
// work it did (runWork). It is undecided where the scheduler refused,
// which run reports as it does, or where it gave up, saying why: past
// seatWork tokens, past left units of work, or holding more than
// seatMemory.
func mostSideBySide(w Workload, blocks, blockSize, budget, maxSeqs, enough, left int) (r seatRun, work int) {
	n, queue := w.Requests, w.Requests
	if maxSeqs > 0 {
		queue = maxSeqs
	}
	// What the run holds at most: its pool, and the tokens of the
	// requests queued and running.
	p, g := w.maxLens()
	if live := min(n, 2*queue); blocks > seatMemory || (w.Depth+p+g) > (seatMemory-blocks)/live {
		return seatRun{gaveUp: gaveUpPool}, 0
	}
	if work = blocks / 16; work > left {
		return seatRun{gaveUp: gaveUpSuite}, work
	}
	kv, err := cache.New(blocks, blockSize)
	if err != nil {
		return seatRun{}, work
	}
	s := sched.New(sched.Config{TokenBudget: budget, MaxSeqs: maxSeqs}, kv)
	// Drawn as they are seated: a case of a million requests that decides
	// within its first few draws no more (Lengths' order).
	lengths := reqlen.Stream(w.PromptLen, w.GenLen, w.RangeRatio, w.Seed)
	next, tokens := 0, 0
	for next < n || s.Pending() {
		for next < n && s.Waiting() < queue {
			pl, gl := lengths()
			p := w.Depth + pl
			q := &sched.Seq{ID: next, Tokens: make([]int32, p, p+gl), Prompt: p, MaxNew: gl, Split: w.Depth}
			if s.Add(q) != nil {
				return r, work
			}
			next++
			work += 1 + (p+gl)/16
		}
		b, err := s.Next()
		if err != nil {
			return r, work
		}
		if r.most = max(r.most, s.Running()); r.most >= enough {
			r.decided = true
			return r, work
		}
		for _, it := range b.Items {
			if it.Sample {
				s.Put(it.Seq, it.Start+it.N, 0)
			}
		}
		work += runWork(b)
		if tokens += b.NumTokens; tokens > seatWork {
			r.gaveUp = gaveUpCase
			return r, work
		}
		if work > left {
			r.gaveUp = gaveUpSuite
			return r, work
		}
	}
	r.decided = true
	return r, work
}

// runWork is a scheduler step's work in units of about 15 ns on one core:
// a step's cost is mostly per item, its slots' per token.
func runWork(b *sched.Batch) int { return 10 + 10*len(b.Items) + b.NumTokens }
