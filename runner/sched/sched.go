// Package sched is the continuous-batching scheduler: requests join and
// leave between steps, running sequences decode one token a step, prompts
// are prefilled in chunks under a per-step token budget, and a sequence that
// no longer fits in the KV cache is preempted (its blocks freed, its tokens
// recomputed later) rather than corrupting another.
package sched

import (
	"errors"
	"fmt"
	"slices"

	"github.com/mtlbench/mtlbench/runner/cache"
)

// Seq is a request's state inside the engine.
type Seq struct {
	ID     int
	Tokens []int32 // prompt followed by generated tokens
	Prompt int     // prompt length
	MaxNew int
	// Computed is how many of Tokens have their K/V in the cache.
	Computed int
	// Preemptions counts how often the sequence lost its cache.
	Preemptions int
	// Reached is the most of Tokens ever computed: past a preemption, the
	// positions below it are computed again.
	Reached  int
	Finished bool
	// Stop are tokens that end the sequence when it samples one (a model's
	// end-of-sequence tokens), before MaxNew; nil: it runs to MaxNew.
	Stop []int32
	// Split, when positive, is a prompt position no prefill chunk crosses;
	// a running sequence that reached it waits until every sequence that
	// can run has, so the prompt after it is prefilled in one step across
	// the batch and decoded together (a benchmark's prefill at a depth).
	Split int
}

// atSplit reports whether q has computed up to its split and not past it.
func (q *Seq) atSplit() bool { return q.Split > 0 && q.Computed == q.Split }

// belowSplit reports whether q has not yet computed up to its split.
func (q *Seq) belowSplit() bool { return q.Split > 0 && q.Computed < q.Split }

// chunk is how many of q's tokens the step takes under budget: up to its
// split first.
func (q *Seq) chunk(budget int) int {
	n := min(len(q.Tokens)-q.Computed, budget)
	if q.belowSplit() {
		n = min(n, q.Split-q.Computed)
	}
	return n
}

// Generated is the number of generated tokens.
func (s *Seq) Generated() int { return len(s.Tokens) - s.Prompt }

// Item is one sequence's share of a step: tokens [Start, Start+N) of Tokens.
type Item struct {
	Seq   *Seq
	Start int
	N     int
	Slots []int32
	// Sample is set when the chunk reaches the end of the known tokens, so
	// the step's logits for its last token pick the next token.
	Sample bool
	// Recompute is how many of the chunk's first tokens a preempted
	// sequence had computed before: work done again, neither prefill nor
	// decode.
	Recompute int
}

// Batch is one step's work, decodes first.
type Batch struct {
	Items     []Item
	NumTokens int
	Preempted []*Seq
}

// Config bounds a step.
type Config struct {
	// TokenBudget caps tokens per step (chunked prefill); 0 means no cap.
	TokenBudget int
	// MaxSeqs caps sequences per step; 0 means no cap.
	MaxSeqs int
}

// Scheduler orders the work of many sequences over a shared cache.
type Scheduler struct {
	cfg     Config
	kv      *cache.Manager
	waiting []*Seq // FIFO; preempted sequences go to the front
	running []*Seq // admission order
}

// New returns a scheduler over kv.
func New(cfg Config, kv *cache.Manager) *Scheduler {
	return &Scheduler{cfg: cfg, kv: kv}
}

// ErrTooLong is returned when a request can never fit in the cache.
var ErrTooLong = errors.New("request does not fit in the KV cache")

// Check refuses a sequence whose prompt plus generation could never fit in
// the whole cache, before any work is spent on it.
func (s *Scheduler) Check(q *Seq) error {
	// Against the room the prompt leaves: a prompt plus MaxNew near the
	// largest int would wrap negative and pass.
	if room := s.kv.NumBlocks()*s.kv.BlockSize() - len(q.Tokens); q.MaxNew > room {
		// The caller names the request: its id is the caller's own.
		return fmt.Errorf("%w: %d prompt + %d new tokens need more than the cache holds, %d (%d blocks of %d)",
			ErrTooLong, len(q.Tokens), q.MaxNew, s.kv.NumBlocks()*s.kv.BlockSize(), s.kv.NumBlocks(), s.kv.BlockSize())
	}
	return nil
}

// Add queues a sequence Check accepts.
func (s *Scheduler) Add(q *Seq) error {
	if err := s.Check(q); err != nil {
		return fmt.Errorf("request %d: %w", q.ID, err)
	}
	s.waiting = append(s.waiting, q)
	return nil
}

// Pending reports whether any sequence is waiting or running.
func (s *Scheduler) Pending() bool { return len(s.waiting)+len(s.running) > 0 }

// Running is the number of admitted sequences.
func (s *Scheduler) Running() int { return len(s.running) }

// Waiting is the number of sequences not yet admitted.
func (s *Scheduler) Waiting() int { return len(s.waiting) }

// Next builds the next step's batch and allocates its cache slots.
func (s *Scheduler) Next() (*Batch, error) {
	b := &Batch{}
	budget := s.cfg.TokenBudget
	if budget <= 0 {
		budget = int(^uint(0) >> 1)
	}
	held := s.held(budget)
	// Running sequences first: each continues its prefill or decodes.
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		n := q.chunk(budget)
		if n <= 0 || held && q.atSplit() {
			continue
		}
		for !s.kv.CanGrow(q.ID, n) {
			// Preempt the newest other sequence; if none is left, this one
			// goes back to waiting itself.
			victim := len(s.running) - 1
			if s.running[victim] == q {
				if len(b.Items) == 0 && len(s.running) == 1 {
					return nil, fmt.Errorf("%w: sequence %d cannot grow even alone", cache.ErrNoBlocks, q.ID)
				}
				victim = -1
			}
			if victim < 0 {
				s.preempt(len(s.running)-1, b)
				q = nil
				break
			}
			s.preempt(victim, b)
		}
		if q == nil {
			break
		}
		if it, err := s.schedule(q, n); err != nil {
			return nil, err
		} else {
			b.Items = append(b.Items, it)
			budget -= n
		}
	}
	// Then admit waiting sequences while budget, seats and blocks allow. A
	// step that had to preempt admits no one while it has other work: the
	// blocks it freed are the preempted sequence's, and taking them back at
	// once would recompute it only to preempt it again.
	for len(s.waiting) > 0 && budget > 0 && (s.cfg.MaxSeqs == 0 || len(s.running) < s.cfg.MaxSeqs) &&
		(len(b.Preempted) == 0 || len(b.Items) == 0) {
		q := s.waiting[0]
		n := q.chunk(budget)
		if !s.kv.CanGrow(q.ID, n) {
			break
		}
		s.waiting = s.waiting[1:]
		s.running = append(s.running, q)
		it, err := s.schedule(q, n)
		if err != nil {
			return nil, err
		}
		b.Items = append(b.Items, it)
		budget -= n
	}
	for _, it := range b.Items {
		b.NumTokens += it.N
	}
	if len(b.Items) == 0 && s.Pending() {
		return nil, fmt.Errorf("%w: no waiting request fits (%d of %d blocks free)", cache.ErrNoBlocks, s.kv.FreeBlocks(), s.kv.NumBlocks())
	}
	return b, nil
}

// held reports whether sequences at their split wait this step: some
// running sequence is still below its split and has the blocks for its next
// chunk, or the next waiting one is and would be admitted (a seat and blocks
// for its first chunk). A sequence that cannot grow does not hold the
// others: they hold the blocks it waits for, so they run (and preempt it)
// rather than wait for it forever. Nor do they wait when a sequence that
// runs beside them would have to preempt for its chunk (holdFree): the
// blocks it lacks are theirs, kept idle, and the step would preempt the
// newest sequence, maybe the one needing them, to do nothing else, again
// each step, while the one they wait for never got in.
func (s *Scheduler) held(budget int) bool {
	return s.holdsFor(budget) && s.holdFree(budget)
}

func (s *Scheduler) holdsFor(budget int) bool {
	for _, q := range s.running {
		if q.belowSplit() && s.kv.CanGrow(q.ID, q.chunk(budget)) {
			return true
		}
	}
	if len(s.waiting) == 0 || s.cfg.MaxSeqs > 0 && len(s.running) >= s.cfg.MaxSeqs {
		return false
	}
	q := s.waiting[0]
	return q.belowSplit() && s.kv.CanGrow(q.ID, q.chunk(budget))
}

// holdFree reports whether the running sequences that are not at their
// split all get the blocks for this step's chunks, in the order Next takes
// them under budget, from the free ones: holding the others preempts no one.
func (s *Scheduler) holdFree(budget int) bool {
	free := s.kv.FreeBlocks()
	for _, q := range s.running {
		if budget <= 0 {
			break
		}
		n := q.chunk(budget)
		if n <= 0 || q.atSplit() {
			continue
		}
		if free -= s.kv.BlocksNeeded(q.ID, n); free < 0 {
			return false
		}
		budget -= n
	}
	return true
}

func (s *Scheduler) schedule(q *Seq, n int) (Item, error) {
	slots, err := s.kv.Grow(q.ID, n, nil)
	if err != nil {
		return Item{}, err
	}
	it := Item{Seq: q, Start: q.Computed, N: n, Slots: slots, Sample: q.Computed+n == len(q.Tokens),
		Recompute: min(max(q.Reached-q.Computed, 0), n)}
	q.Computed += n
	q.Reached = max(q.Reached, q.Computed)
	return it, nil
}

// preempt frees running[i]'s cache and puts it at the front of the queue; its
// tokens so far become its new prompt to recompute.
func (s *Scheduler) preempt(i int, b *Batch) {
	q := s.running[i]
	s.running = append(s.running[:i], s.running[i+1:]...)
	s.kv.Free(q.ID)
	q.Computed = 0
	q.Preemptions++
	s.waiting = append([]*Seq{q}, s.waiting...)
	b.Preempted = append(b.Preempted, q)
}

// Append records a sampled token; it finishes the sequence (and frees its
// cache) when it has generated MaxNew tokens.
func (s *Scheduler) Append(q *Seq, tok int32) { s.Put(q, len(q.Tokens), tok) }

// Put records the token sampled for position i of q: the next one, or the
// placeholder Ahead left there. The sequence finishes once its last token
// is known and it has generated MaxNew tokens or sampled a stop token.
func (s *Scheduler) Put(q *Seq, i int, tok int32) {
	if i == len(q.Tokens) {
		q.Tokens = append(q.Tokens, tok)
	} else {
		q.Tokens[i] = tok
	}
	if i == len(q.Tokens)-1 && (q.Generated() >= q.MaxNew || slices.Contains(q.Stop, tok)) && !q.Finished {
		s.Finish(q)
	}
}

// Pending is the placeholder Ahead stores for a token still being sampled;
// as a token id it is outside every vocabulary.
const Pending int32 = -1

// Ahead builds the step after prev while prev still runs, for an engine
// that records one step while the device computes the one before. Every
// sequence of prev decodes the token prev is sampling, stored as Pending
// until Put fills it in. It returns nil unless that step is exactly what
// Next would build once prev's tokens are known: prev sampled a token for
// every running sequence, in order (a decode token, or a prompt's last
// chunk); none of them finishes with it; nothing waits to be admitted; the
// budget and the free blocks cover every sequence, so no one is preempted.
func (s *Scheduler) Ahead(prev *Batch) (*Batch, error) {
	n := len(prev.Items)
	if n == 0 || n != len(s.running) || len(s.waiting) > 0 || len(prev.Preempted) > 0 ||
		(s.cfg.TokenBudget > 0 && n > s.cfg.TokenBudget) {
		return nil, nil
	}
	need := 0
	for i, it := range prev.Items {
		q := it.Seq
		// A sequence that may stop at the token being sampled cannot be
		// assumed to go on.
		if q != s.running[i] || !it.Sample || q.Finished || len(q.Stop) > 0 ||
			q.Computed != len(q.Tokens) || it.Start+it.N != len(q.Tokens) || q.Generated()+1 >= q.MaxNew {
			return nil, nil
		}
		need += s.kv.BlocksNeeded(q.ID, 1)
	}
	if need > s.kv.FreeBlocks() {
		return nil, nil
	}
	b := &Batch{Items: make([]Item, 0, n), NumTokens: n}
	for _, it := range prev.Items {
		q := it.Seq
		q.Tokens = append(q.Tokens, Pending)
		next, err := s.schedule(q, 1)
		if err != nil {
			return nil, err
		}
		b.Items = append(b.Items, next)
	}
	return b, nil
}

// Finish ends a sequence and returns its blocks.
func (s *Scheduler) Finish(q *Seq) {
	q.Finished = true
	s.kv.Free(q.ID)
	for i, r := range s.running {
		if r == q {
			s.running = append(s.running[:i], s.running[i+1:]...)
			return
		}
	}
	for i, r := range s.waiting {
		if r == q {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}
