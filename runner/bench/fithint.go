package bench

import (
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/suites"
)

// fitKnob is a length of a model case that sizes its memory: its KV cache
// (the cache holds each running request's longest) and its largest step.
type fitKnob struct {
	key string // the suite key; bench's flags say it as theirs (cmd/mtlbench)
	min int
	get func(*suites.ModelParams) *int
}

// fitKnobs are the lengths a memory refusal's hint may lower: the batch
// (with the requests and max_seqs it stands for where not set apart),
// the prompt, the output, the context before the prompt and a cache sized
// by kv_blocks.
var fitKnobs = []fitKnob{
	{suites.ParamBatch, 1, func(m *suites.ModelParams) *int { return &m.Batch }},
	{suites.ParamPromptLen, 1, func(m *suites.ModelParams) *int { return &m.PromptLen }},
	{suites.ParamGenLen, 1, func(m *suites.ModelParams) *int { return &m.GenLen }},
	{suites.ParamDepth, 0, func(m *suites.ModelParams) *int { return &m.Depth }},
	{suites.ParamKVBlocks, 1, func(m *suites.ModelParams) *int { return &m.KVBlocks }},
}

// fitHint says which of a case's lengths, each lowered alone, would bring
// it under the memory available, and to what (the largest value that fits,
// found by bisection; fits is the memory check of a case with those
// lengths): "batch 85 or less (from 65536) or prompt_len 120 or less (from
// 1000)". It is "" where none alone would: the weights or a cache of
// kv_blocks are past memory whatever the lengths.
func fitHint(c suites.Case, mp suites.ModelParams, fits func(suites.ModelParams) bool) string {
	var alone []string
	for _, k := range fitKnobs {
		cur := *k.get(&mp)
		if cur <= k.min || k.key == suites.ParamKVBlocks && cur == 0 {
			continue
		}
		with := func(v int) suites.ModelParams {
			m := mp
			*k.get(&m) = v
			if k.key == suites.ParamBatch {
				// The batch stands for the requests and the most run at
				// once, unless the case sets them.
				if _, ok := c.Params[suites.ParamRequests]; !ok {
					m.Requests = v
				}
				if _, ok := c.Params[suites.ParamMaxSeqs]; !ok {
					m.MaxSeqs = v
				}
			}
			return m
		}
		if !fits(with(k.min)) {
			continue
		}
		lo, hi := k.min, cur // fits(lo), not fits(hi)
		for hi-lo > 1 {
			if mid := lo + (hi-lo)/2; fits(with(mid)) {
				lo = mid
			} else {
				hi = mid
			}
		}
		alone = append(alone, fmt.Sprintf("%s %d or less (from %d)", k.key, lo, cur))
	}
	switch len(alone) {
	case 0:
		return ""
	case 1:
		return alone[0] + " would fit"
	}
	return "any one of " + strings.Join(alone[:len(alone)-1], ", ") + " or " + alone[len(alone)-1] + " would fit"
}
