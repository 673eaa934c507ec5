package bench

import (
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/suites"
)

// fitKnob is a number of a model case that sizes its memory: its KV cache
// (the cache holds each running request's longest, for max_seqs of them)
// and its largest step (the prefill budget's tokens at most).
type fitKnob struct {
	key string // the suite key; bench's flags say it as theirs (cmd/mtlbench)
	// floor is the least value the suites take for it in this case
	// (max_seqs no fewer than the batch, prefill_budget than max_seqs).
	floor func(suites.ModelParams) int
	get   func(*suites.ModelParams) *int
	// unset is what a value of 0 means ("" where 0 is a value): the hint
	// then looks for the largest value that fits up to the suites' bound.
	unset string
}

func floorOf(n int) func(suites.ModelParams) int {
	return func(suites.ModelParams) int { return n }
}

// fitKnobs are the numbers a memory refusal's hint may lower, in the order
// it names them: the batch (with the requests and max_seqs it stands for
// where not set apart), max_seqs set above the batch, the prompt, the
// output, the context before the prompt, the prefill budget and a cache
// sized by kv_blocks. kv_dtype follows them (fitHint).
var fitKnobs = []fitKnob{
	{key: suites.ParamBatch, floor: floorOf(1), get: func(m *suites.ModelParams) *int { return &m.Batch }},
	{key: suites.ParamMaxSeqs, floor: func(m suites.ModelParams) int { return m.Batch }, get: func(m *suites.ModelParams) *int { return &m.MaxSeqs }},
	{key: suites.ParamPromptLen, floor: floorOf(1), get: func(m *suites.ModelParams) *int { return &m.PromptLen }},
	{key: suites.ParamGenLen, floor: floorOf(1), get: func(m *suites.ModelParams) *int { return &m.GenLen }},
	{key: suites.ParamDepth, floor: floorOf(0), get: func(m *suites.ModelParams) *int { return &m.Depth }},
	{key: suites.ParamPrefillBudget, floor: func(m suites.ModelParams) int { return max(m.MaxSeqs, 1) },
		get: func(m *suites.ModelParams) *int { return &m.PrefillBudget }, unset: "none"},
	{key: suites.ParamKVBlocks, floor: floorOf(1), get: func(m *suites.ModelParams) *int { return &m.KVBlocks }},
}

// FitHintKeys are the suite keys a memory refusal's hint may name, in its
// order: a caller that says them otherwise (bench's flags) knows them all.
func FitHintKeys() []string {
	var keys []string
	for _, k := range fitKnobs {
		keys = append(keys, k.key)
	}
	return append(keys, suites.ParamKVDType)
}

// kvChoice is the KV cache dtype a case runs and the smaller ones its
// backend keeps, largest first, for the hint's kv_dtype.
type kvChoice struct {
	From    string   // the case's kv_dtype as it runs: "f32", "auto: f32"
	Smaller []string // e.g. f16, bf16: the hint names the first that fits
}

// fitHint says which of a case's numbers, each lowered alone, would bring
// it under the memory available, and to what (the largest value that fits,
// found by bisection; fits is the memory check of a case with those
// parameters): "batch 85 or less (from 65536) or prompt_len 120 or less
// (from 1000)", and a smaller kv_dtype of kv that fits ("kv_dtype f16
// (from f32)"). It is "" where none alone would: the weights or a cache of
// kv_blocks are past memory whatever the lengths.
func fitHint(c suites.Case, mp suites.ModelParams, kv kvChoice, fits func(suites.ModelParams) bool) string {
	var alone []string
	for _, k := range fitKnobs {
		cur, floor := *k.get(&mp), k.floor(mp)
		hi := cur // the value that does not fit
		if cur == 0 && k.unset != "" {
			hi = suites.MaxTokens + 1
		} else if cur <= floor || k.key == suites.ParamKVBlocks && cur == 0 {
			continue
		}
		with := func(v int) suites.ModelParams {
			m := mp
			*k.get(&m) = v
			if k.key == suites.ParamBatch {
				// The batch stands for the requests and the most run at
				// once, unless the case sets them apart from it: written
				// equal to the batch they are its default, as in its key
				// (docs/suites.md, "A default written is a default left out").
				if !c.Sets(suites.ParamRequests) {
					m.Requests = v
				}
				if !c.Sets(suites.ParamMaxSeqs) {
					m.MaxSeqs = v
				}
			}
			return m
		}
		if !fits(with(floor)) {
			continue
		}
		lo := floor // fits(lo), not fits(hi)
		for hi-lo > 1 {
			if mid := lo + (hi-lo)/2; fits(with(mid)) {
				lo = mid
			} else {
				hi = mid
			}
		}
		from := k.unset
		if cur != 0 || from == "" {
			from = fmt.Sprint(cur)
		}
		if floor > 1 {
			alone = append(alone, fmt.Sprintf("%s %d to %d (from %s)", k.key, floor, lo, from))
		} else {
			alone = append(alone, fmt.Sprintf("%s %d or less (from %s)", k.key, lo, from))
		}
	}
	for _, dt := range kv.Smaller {
		m := mp
		m.KVDType = dt
		if fits(m) {
			alone = append(alone, fmt.Sprintf("%s %s (from %s)", suites.ParamKVDType, dt, kv.From))
			break
		}
	}
	switch len(alone) {
	case 0:
		return ""
	case 1:
		return alone[0] + " would fit"
	}
	return "any one of " + strings.Join(alone[:len(alone)-1], ", ") + " or " + alone[len(alone)-1] + " would fit"
}
