package sched

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mtlbench/mtlbench/runner/cache"
)

func seq(id, prompt, maxNew int) *Seq {
	return &Seq{ID: id, Tokens: make([]int32, prompt), Prompt: prompt, MaxNew: maxNew}
}

// Decodes go first, prefill is chunked under the budget, and a chunk only
// samples when it reaches the end of the prompt.
func TestChunkedPrefillUnderBudget(t *testing.T) {
	kv, _ := cache.New(64, 16)
	s := New(Config{TokenBudget: 10}, kv)
	a, b := seq(1, 4, 3), seq(2, 25, 2)
	s.Add(a)
	s.Add(b)
	var steps [][]Item
	for s.Pending() {
		bt, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if bt.NumTokens > 10 {
			t.Fatalf("step of %d tokens over the budget of 10", bt.NumTokens)
		}
		steps = append(steps, bt.Items)
		for _, it := range bt.Items {
			if it.Sample {
				s.Append(it.Seq, 0)
			}
		}
	}
	// step 0: a's prompt (4) + 6 of b; a samples, b does not
	first := steps[0]
	if len(first) != 2 || first[0].N != 4 || !first[0].Sample || first[1].N != 6 || first[1].Sample {
		t.Fatalf("first step %+v", first)
	}
	// step 1: a decodes first (1 token), then 9 more of b
	if it := steps[1][0]; it.Seq != a || it.N != 1 {
		t.Fatalf("second step does not start with a's decode: %+v", steps[1])
	}
	if !a.Finished || !b.Finished || b.Generated() != 2 || a.Generated() != 3 {
		t.Fatalf("a=%d/%v b=%d/%v", a.Generated(), a.Finished, b.Generated(), b.Finished)
	}
	if kv.FreeBlocks() != 64 {
		t.Fatalf("%d blocks leaked", 64-kv.FreeBlocks())
	}
}

func TestRefusesWhatNeverFits(t *testing.T) {
	for _, c := range []struct{ prompt, maxNew int }{
		{60, 10}, {65, 1}, {1, 64}, {1, math.MaxInt}, {2, math.MaxInt - 1},
	} {
		kv, _ := cache.New(4, 16)
		s := New(Config{}, kv)
		if err := s.Add(seq(1, c.prompt, c.maxNew)); !errors.Is(err, ErrTooLong) {
			t.Errorf("%d prompt + %d new tokens in 64: err = %v, want ErrTooLong", c.prompt, c.maxNew, err)
		}
		if s.Pending() {
			t.Errorf("%d prompt + %d new tokens in 64: refused request is queued", c.prompt, c.maxNew)
		}
	}
	kv, _ := cache.New(4, 16)
	if err := New(Config{}, kv).Add(seq(1, 1, 63)); err != nil {
		t.Errorf("a request filling the cache: %v", err)
	}
}

// When the cache runs out, the newest sequence is preempted and later
// recomputed from its tokens so far; the others keep their blocks.
func TestPreemptsNewest(t *testing.T) {
	kv, _ := cache.New(4, 4) // 16 slots
	s := New(Config{}, kv)
	a, b := seq(1, 7, 8), seq(2, 7, 8)
	s.Add(a)
	s.Add(b)
	preempted := 0
	for s.Pending() {
		bt, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range bt.Preempted {
			preempted++
			if p != b {
				t.Fatalf("preempted sequence %d, want the newest (2)", p.ID)
			}
		}
		for _, it := range bt.Items {
			if it.Sample {
				s.Append(it.Seq, 1)
			}
		}
	}
	if preempted == 0 || b.Preemptions == 0 {
		t.Fatal("no preemption although both sequences cannot fit")
	}
	if a.Generated() != 8 || b.Generated() != 8 {
		t.Fatalf("generated a=%d b=%d, want 8 each", a.Generated(), b.Generated())
	}
}

// The step that ends a prompt samples its first token, so the first decode
// step can be built behind it; a chunk that leaves part of the prompt, or a
// sequence that ends with the token being sampled, has none built ahead.
func TestAheadFollowsAPromptsLastChunk(t *testing.T) {
	kv, _ := cache.New(64, 4)
	s := New(Config{TokenBudget: 4}, kv)
	a, b := seq(1, 6, 3), seq(2, 3, 1)
	for _, q := range []*Seq{a, b} {
		if err := s.Add(q); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Next() // a's first 4 prompt tokens
	if err != nil {
		t.Fatal(err)
	}
	if ahead, err := s.Ahead(first); err != nil || ahead != nil {
		t.Fatalf("Ahead of a chunk inside the prompt = %v, %v; want none", ahead, err)
	}
	last, err := s.Next() // a's last 2 prompt tokens, b's 3 cut to 2 by the budget
	if err != nil {
		t.Fatal(err)
	}
	if ahead, err := s.Ahead(last); err != nil || ahead != nil {
		t.Fatalf("Ahead of a step with b's prompt unfinished = %v, %v; want none", ahead, err)
	}
	s.Put(a, 6, 100)
	third, err := s.Next() // a decodes, b's last prompt token samples b's only token
	if err != nil {
		t.Fatal(err)
	}
	if ahead, err := s.Ahead(third); err != nil || ahead != nil {
		t.Fatalf("Ahead of a step finishing b = %v, %v; want none", ahead, err)
	}

	kv, _ = cache.New(64, 4)
	s = New(Config{TokenBudget: 8}, kv)
	c, d := seq(3, 5, 4), seq(4, 2, 2)
	for _, q := range []*Seq{c, d} {
		if err := s.Add(q); err != nil {
			t.Fatal(err)
		}
	}
	prefill, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	ahead, err := s.Ahead(prefill)
	if err != nil || ahead == nil {
		t.Fatalf("Ahead of both prompts' last chunks = %v, %v; want their first decode step", ahead, err)
	}
	for i, it := range ahead.Items {
		q := []*Seq{c, d}[i]
		if it.Seq != q || it.Start != q.Prompt || it.N != 1 || !it.Sample || q.Tokens[it.Start] != Pending {
			t.Errorf("item %d: sequence %d at %d+%d (sample %v), want sequence %d's first decode of a pending token", i, it.Seq.ID, it.Start, it.N, it.Sample, q.ID)
		}
	}
}

// Scheduling each step ahead of the previous step's tokens (as an engine
// that overlaps steps does) builds exactly the batches Next would, with the
// same slots, or refuses; the placeholders all end up filled.
func TestAheadMatchesNext(t *testing.T) {
	cases := []struct {
		name            string
		blocks, bsz     int
		cfg             Config
		prompts, maxNew []int
	}{
		{"roomy", 64, 4, Config{}, []int{5, 3, 9}, []int{7, 12, 1}},
		{"tight cache", 6, 4, Config{}, []int{6, 6}, []int{9, 9}},
		{"budget below the batch", 64, 4, Config{TokenBudget: 2}, []int{2, 2, 2}, []int{5, 5, 5}},
		{"seat cap", 64, 4, Config{MaxSeqs: 2}, []int{3, 4, 5}, []int{6, 2, 4}},
		{"chunked prompts", 64, 4, Config{TokenBudget: 5}, []int{7, 4, 2}, []int{3, 1, 6}},
	}
	tok := func(q *Seq, at int) int32 { return int32(q.ID*1000 + at) }
	describe := func(b *Batch) string {
		s := fmt.Sprint("preempt", len(b.Preempted), ":")
		for _, it := range b.Items {
			s += fmt.Sprintf(" %d@%d+%d%v/%v", it.Seq.ID, it.Start, it.N, it.Slots, it.Sample)
		}
		return s
	}
	run := func(t *testing.T, c int, ahead bool) (log []string, seqs []*Seq, aheads int) {
		tc := cases[c]
		kv, _ := cache.New(tc.blocks, tc.bsz)
		s := New(tc.cfg, kv)
		for i, p := range tc.prompts {
			q := seq(i+1, p, tc.maxNew[i])
			seqs = append(seqs, q)
			if err := s.Add(q); err != nil {
				t.Fatal(err)
			}
		}
		var cur *Batch
		for cur != nil || s.Pending() {
			if cur == nil {
				b, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				cur = b
				log = append(log, describe(b))
			}
			var next *Batch
			if ahead {
				b, err := s.Ahead(cur)
				if err != nil {
					t.Fatal(err)
				}
				if b != nil {
					aheads++
					next = b
					log = append(log, describe(b))
				}
			}
			for _, it := range cur.Items {
				if it.Sample {
					s.Put(it.Seq, it.Start+it.N, tok(it.Seq, it.Start+it.N))
				}
			}
			cur = next
		}
		if kv.FreeBlocks() != tc.blocks {
			t.Fatalf("%d blocks leaked", tc.blocks-kv.FreeBlocks())
		}
		return log, seqs, aheads
	}
	for c, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, wantSeqs, _ := run(t, c, false)
			got, gotSeqs, aheads := run(t, c, true)
			if aheads == 0 {
				t.Error("no step was scheduled ahead")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("batches differ\nahead: %q\nnext:  %q", got, want)
			}
			for i, q := range gotSeqs {
				if fmt.Sprint(q.Tokens) != fmt.Sprint(wantSeqs[i].Tokens) || !q.Finished {
					t.Fatalf("sequence %d: tokens %v (finished %v), want %v", q.ID, q.Tokens, q.Finished, wantSeqs[i].Tokens)
				}
			}
		})
	}
}

// A split prompt: no chunk crosses the split, and a sequence at it waits
// until the others reach theirs, so the prompts after it are one step and
// the sequences decode together; seats full, nothing waits on a sequence
// that cannot be admitted.
func TestPrefillSplit(t *testing.T) {
	for _, maxSeqs := range []int{0, 1} {
		kv, _ := cache.New(64, 16)
		s := New(Config{TokenBudget: 16, MaxSeqs: maxSeqs}, kv)
		a, b := seq(1, 28, 3), seq(2, 28, 3)
		a.Split, b.Split = 20, 20
		s.Add(a)
		s.Add(b)
		var log []string
		for s.Pending() {
			bt, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			step := ""
			for _, it := range bt.Items {
				if it.Start < 20 && it.Start+it.N > 20 {
					t.Fatalf("chunk [%d,%d) of %d crosses the split", it.Start, it.Start+it.N, it.Seq.ID)
				}
				step += fmt.Sprintf("%d:%d+%d ", it.Seq.ID, it.Start, it.N)
				if it.Sample {
					s.Append(it.Seq, 0)
				}
			}
			log = append(log, step)
		}
		want := "[1:0+16  1:16+4 2:0+12  2:12+8  1:20+8 2:20+8  1:28+1 2:28+1  1:29+1 2:29+1 ]"
		if maxSeqs == 1 {
			want = "[1:0+16  1:16+4  1:20+8  1:28+1  1:29+1  2:0+16  2:16+4  2:20+8  2:28+1  2:29+1 ]"
		}
		if got := fmt.Sprint(log); got != want {
			t.Errorf("max_seqs %d: steps\n%s\nwant\n%s", maxSeqs, got, want)
		}
	}
}

// drain runs s to the end, sampling token 0 wherever a step samples, and
// fails past maxSteps: a scheduler that stops making progress livelocks
// rather than erring.
func drain(t *testing.T, s *Scheduler, maxSteps int) (steps, preempted int) {
	t.Helper()
	for s.Pending() {
		if steps == maxSteps {
			t.Fatalf("still pending after %d steps (%d running, %d waiting)", steps, s.Running(), s.Waiting())
		}
		bt, err := s.Next()
		if err != nil {
			t.Fatalf("step %d: %v", steps, err)
		}
		for _, it := range bt.Items {
			if it.Sample {
				s.Append(it.Seq, 0)
			}
		}
		steps++
		preempted += len(bt.Preempted)
	}
	return steps, preempted
}

// A split prompt in a cache too small for the whole batch at its split: the
// sequences at the split do not wait for one that cannot get blocks, so the
// batch finishes with preemptions instead of spinning or failing.
func TestPrefillSplitTightCache(t *testing.T) {
	for _, c := range []struct{ batch, blocks int }{
		{2, 10}, {2, 11}, {2, 12}, {2, 15},
		{3, 10}, {3, 11}, {3, 12}, {3, 15}, {3, 19},
		{4, 12}, {4, 15}, {4, 30},
	} {
		t.Run(fmt.Sprintf("batch%d/blocks%d", c.batch, c.blocks), func(t *testing.T) {
			kv, _ := cache.New(c.blocks, 8)
			s := New(Config{TokenBudget: 8 * c.batch, MaxSeqs: c.batch}, kv)
			var qs []*Seq
			for i := range c.batch {
				q := seq(i, 72, 8)
				q.Split = 64
				if err := s.Add(q); err != nil {
					t.Fatal(err)
				}
				qs = append(qs, q)
			}
			_, preempted := drain(t, s, 100*c.batch*80)
			for _, q := range qs {
				if !q.Finished || q.Generated() != 8 {
					t.Fatalf("seq %d: finished %v with %d tokens", q.ID, q.Finished, q.Generated())
				}
			}
			if preempted == 0 && c.blocks < 10*c.batch {
				t.Errorf("%d blocks for %d sequences of 10 blocks: no preemption", c.blocks, c.batch)
			}
			if kv.FreeBlocks() != c.blocks {
				t.Fatalf("%d blocks leaked", c.blocks-kv.FreeBlocks())
			}
		})
	}
}

// Any mix of prompts, splits, budgets, seats and cache sizes where each
// request fits the cache alone ends, every sequence generating all its
// tokens, and leaks no block.
func TestSchedulerAlwaysEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		block := 1 << rng.IntN(4)
		n := 1 + rng.IntN(5)
		var qs []*Seq
		longest := 0
		for i := range n {
			q := seq(i, 1+rng.IntN(40), 1+rng.IntN(10))
			if rng.IntN(2) == 0 && q.Prompt > 1 {
				q.Split = 1 + rng.IntN(q.Prompt-1)
			}
			longest = max(longest, q.Prompt+q.MaxNew)
			qs = append(qs, q)
		}
		need := (longest + block - 1) / block
		blocks := need + rng.IntN(need*n+1)
		cfg := Config{TokenBudget: rng.IntN(3) * (1 + rng.IntN(48)), MaxSeqs: rng.IntN(n + 1)}
		kv, _ := cache.New(blocks, block)
		s := New(cfg, kv)
		for _, q := range qs {
			if err := s.Add(q); err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
		t.Run(fmt.Sprintf("trial%d", trial), func(t *testing.T) {
			drain(t, s, 20000)
			for _, q := range qs {
				if !q.Finished || q.Generated() != q.MaxNew {
					t.Fatalf("%+v %d blocks of %d: seq %d finished %v with %d of %d tokens",
						cfg, blocks, block, q.ID, q.Finished, q.Generated(), q.MaxNew)
				}
			}
			if kv.FreeBlocks() != blocks {
				t.Fatalf("%d blocks leaked", blocks-kv.FreeBlocks())
			}
		})
	}
}

// A stop token ends its sequence when sampled, before MaxNew, and the step
// after it is not built ahead: the sequence may end with the token being
// sampled.
func TestStopToken(t *testing.T) {
	kv, _ := cache.New(16, 4)
	s := New(Config{}, kv)
	q := seq(1, 3, 10)
	q.Stop = []int32{7}
	s.Add(q)
	next := []int32{5, 6, 7, 8}
	for i := 0; s.Pending(); i++ {
		bt, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if ahead, _ := s.Ahead(bt); ahead != nil {
			t.Fatal("a step built ahead of a sequence that may stop")
		}
		s.Append(q, next[i])
	}
	if !q.Finished || q.Generated() != 3 || q.Tokens[len(q.Tokens)-1] != 7 {
		t.Fatalf("finished %v after %v", q.Finished, q.Tokens[q.Prompt:])
	}
	if kv.FreeBlocks() != 16 {
		t.Fatalf("%d blocks leaked", 16-kv.FreeBlocks())
	}
}

// Sequences held at their split keep their blocks idle; a sequence that
// runs beside them and needs those blocks must not preempt itself in a step
// that then does nothing. Two shapes of it: the step errs (the preempted
// sequence, now first in the queue, cannot be admitted back and nothing
// else ran), or it repeats forever (it is admitted back, recomputes the same
// chunk and preempts itself again, while the waiting sequence the others
// are held for never gets in).
func TestHeldSplitsDoNotStarveTheirNeighbour(t *testing.T) {
	for _, c := range []struct {
		name          string
		blocks, block int
		cfg           Config
		seqs          [][3]int // prompt, max new, split
	}{
		{"errs", 17, 2, Config{TokenBudget: 26, MaxSeqs: 3}, [][3]int{{11, 8, 10}, {30, 4, 0}, {26, 8, 4}}},
		{"spins", 81, 1, Config{TokenBudget: 18}, [][3]int{{28, 9, 24}, {33, 10, 26}, {39, 8, 0}, {3, 6, 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kv, _ := cache.New(c.blocks, c.block)
			s := New(c.cfg, kv)
			var qs []*Seq
			for i, p := range c.seqs {
				q := seq(i, p[0], p[1])
				q.Split = p[2]
				if err := s.Add(q); err != nil {
					t.Fatal(err)
				}
				qs = append(qs, q)
			}
			drain(t, s, 1000)
			for _, q := range qs {
				if !q.Finished || q.Generated() != q.MaxNew {
					t.Fatalf("seq %d: finished %v with %d of %d tokens", q.ID, q.Finished, q.Generated(), q.MaxNew)
				}
			}
			if kv.FreeBlocks() != c.blocks {
				t.Fatalf("%d blocks leaked", c.blocks-kv.FreeBlocks())
			}
		})
	}
}

// As TestSchedulerAlwaysEnds, with requests arriving over the first steps
// instead of all at once: a request that arrives mid-run joins sequences
// already at their split.
func TestSchedulerAlwaysEndsWithArrivals(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 30000 {
		block := 1 << rng.IntN(4)
		n := 1 + rng.IntN(5)
		var qs []*Seq
		var at []int
		longest := 0
		for range n {
			q := seq(len(qs), 1+rng.IntN(40), 1+rng.IntN(10))
			if rng.IntN(2) == 0 && q.Prompt > 1 {
				q.Split = 1 + rng.IntN(q.Prompt-1)
			}
			longest = max(longest, q.Prompt+q.MaxNew)
			qs = append(qs, q)
			at = append(at, rng.IntN(8))
		}
		need := (longest + block - 1) / block
		blocks := need + rng.IntN(need*n+1)
		cfg := Config{TokenBudget: rng.IntN(3) * (1 + rng.IntN(48)), MaxSeqs: rng.IntN(n + 1)}
		kv, _ := cache.New(blocks, block)
		s := New(cfg, kv)
		added := 0
		for step := 0; added < n || s.Pending(); step++ {
			if step == 20000 {
				t.Fatalf("trial %d (%+v, %d blocks of %d): still pending after %d steps", trial, cfg, blocks, block, step)
			}
			for i, q := range qs {
				if at[i] == step {
					if err := s.Add(q); err != nil {
						t.Fatalf("trial %d: %v", trial, err)
					}
					added++
				}
			}
			if !s.Pending() {
				continue
			}
			bt, err := s.Next()
			if err != nil {
				t.Fatalf("trial %d (%+v, %d blocks of %d): step %d: %v", trial, cfg, blocks, block, step, err)
			}
			for _, it := range bt.Items {
				if it.Sample {
					s.Append(it.Seq, 0)
				}
			}
		}
		for _, q := range qs {
			if !q.Finished || q.Generated() != q.MaxNew {
				t.Fatalf("trial %d: seq %d finished %v with %d of %d tokens", trial, q.ID, q.Finished, q.Generated(), q.MaxNew)
			}
		}
		if kv.FreeBlocks() != blocks {
			t.Fatalf("trial %d: %d blocks leaked", trial, blocks-kv.FreeBlocks())
		}
	}
}
