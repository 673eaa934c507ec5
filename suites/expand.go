package suites

import (
	"fmt"
	"github.com/mtlbench/mtlbench/internal/plural"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"sort"
	"strings"
)

// Where a merged value came from (Case.from); a cross-field error points
// at the more specific of the two values, since that is the one the user
// varied.
const (
	fromSuite  = iota // a default of the suite's params
	fromCase          // the case's own params
	fromMatrix        // the case's matrix point
	fromSet           // a --set (Suite.Override)
)

// expand turns the valid groups into cases, enforcing MaxCases before
// allocating anything.
func (p *parser) expand(groups []*group, suiteParams map[string]Value, casesPos Pos) {
	total, biggestN, valid := 0, 0, 0
	var biggest *group
	for _, g := range groups {
		if !g.ok {
			continue
		}
		valid++
		n := 1
		for _, vals := range g.mvals {
			n = min(n*len(vals), MaxCases+1) // saturate so huge matrices cannot overflow
		}
		if n > biggestN {
			biggest, biggestN = g, n
		}
		total += n
	}
	if total > MaxCases {
		count := fmt.Sprintf("%d", total)
		if biggestN > MaxCases {
			count = fmt.Sprintf("more than %d", MaxCases)
		}
		// The keys and their lengths say which list to shorten; with no
		// matrix, every group is one case and the groups are too many.
		hint := fmt.Sprintf("its %d groups are a case each; split it into suites of at most %d cases", valid, MaxCases)
		if biggestN > 1 {
			var lists []string
			for i, k := range biggest.mkeys {
				lists = append(lists, fmt.Sprintf("%s (%s)", k, plural.Of(len(biggest.mvals[i]), "value")))
			}
			hint = fmt.Sprintf("largest group %q at line %d has %s, its matrix %s; shorten its matrix lists",
				biggest.name, biggest.pos.Line, caseCount(biggestN), strings.Join(lists, " × "))
		}
		p.errs.add(casesPos, hint, "the suite expands to %s cases, over the limit of %d", count, MaxCases)
		return
	}

	keys := map[string]Pos{}
	for _, g := range groups {
		if !g.ok {
			continue
		}
		idx := make([]int, len(g.mvals))
		for {
			c := Case{Group: g.name, Kind: g.kind, Pos: g.pos,
				Params: make(map[string]Value, len(g.fixed)+len(idx)), from: make(map[string]int, len(g.fixed)+len(idx))}
			for name, v := range g.fixed {
				c.Params[name], c.from[name] = v, fromCase
			}
			var name strings.Builder
			name.WriteString(g.name)
			for i, k := range g.mkeys {
				v := g.mvals[i][idx[i]]
				c.Params[k], c.from[k] = v, fromMatrix
				name.WriteString("/" + k + "=" + canon(k, v))
			}
			c.Name = name.String()
			p.settle(&c, suiteParams)
			c.Key = caseKey(c)
			p.crossCheck(c, c.from)
			c.decode()
			if first, dup := keys[c.Key]; dup {
				p.errs.add(c.Pos, "", "case %s repeats the case at line %d", c.Name, first.Line)
			} else {
				keys[c.Key] = c.Pos
			}
			p.s.Cases = append(p.s.Cases, c)

			// Row-major: the last matrix key varies fastest.
			i := len(idx) - 1
			for ; i >= 0; i-- {
				idx[i]++
				if idx[i] < len(g.mvals[i]) {
					break
				}
				idx[i] = 0
			}
			if i < 0 {
				break
			}
		}
	}
}

// caseCount is n cases, or "more than MaxCases cases" past the limit.
func caseCount(n int) string {
	if n > MaxCases {
		return fmt.Sprintf("more than %d cases", MaxCases)
	}
	return plural.Of(n, "case")
}

// settle gives case c the suite's params (defaults) it reads, and only
// those, beside the values it set itself (its params, its matrix point, a
// --set), which stay: a default its op or moe_strategy does not read is no
// part of its work, and kept it would key the same work apart by it (or
// refuse a moe_chunk beside loop). Run as a case is made and again after
// each --set, which may change what it reads (moe_strategy: loop reads no
// moe_chunk, chunked does); the one place this rule is applied.
func (p *parser) settle(c *Case, defaults map[string]Value) {
	if c.from == nil {
		c.from = map[string]int{}
	}
	suite := func(name string) bool {
		at, ok := c.from[name]
		return ok && at == fromSuite
	}
	for name := range c.from {
		if suite(name) {
			delete(c.Params, name)
			delete(c.from, name)
		}
	}
	for name, v := range defaults {
		if _, own := c.Params[name]; !own && params[name].kinds.has(c.Kind) {
			c.Params[name], c.from[name] = v, fromSuite
		}
	}
	// The op may be a default too (a suite's op: every kernel case runs).
	c.Op = ops.ID(c.stringParam(ParamOp, ""))
	for _, name := range sortedKeys(c.Params) {
		if suite(name) && !reads(*c, name) {
			delete(c.Params, name)
			delete(c.from, name)
		}
	}
	p.aliases(c, c.from)
}

// ownKey keys case c by the values it set itself, less parameter name:
// cases alike in it differ only in name (and in the defaults that follow
// from it), so a --set sweeping name makes one set of cases of them.
func ownKey(c Case, name string) string {
	own := c
	own.Params = map[string]Value{}
	for k, v := range c.Params {
		if at, ok := c.from[k]; k != name && (!ok || at != fromSuite) {
			own.Params[k] = v
		}
	}
	return caseKey(own)
}

// caseKey is "kind/group/a=1/b=2" over the parameters sorted by name, so
// the same case gets the same key however the YAML is ordered, less those
// at their default (Key, keyDefaults), so it gets the same key whether a
// default was written or left out.
func caseKey(c Case) string {
	vals := make(map[string]string, len(c.Params))
	for k, v := range c.Params {
		vals[k] = canon(k, v)
	}
	return Key(c.Kind, c.Group, vals)
}

// aliases files a kernel case's alias under its op's own name (matmul's
// tokens as m, rms_norm's hidden as width), so one piece of work has one key
// and runs what it says. Of the two names given at once, the case's (its
// params, matrix or a --set) wins over the suite's defaults, and the op's
// own name over an alias when both are the suite's; both in one case is an
// error, since which one meant the work cannot be told.
func (p *parser) aliases(c *Case, src map[string]int) {
	if c.Kind != KindKernel {
		return
	}
	o, ok := ops.Lookup(c.Op)
	if !ok {
		return
	}
	for _, u := range o.Params {
		alias, name := string(u.Alias), string(u.Param)
		a, ok := c.Params[alias]
		if alias == "" || !ok {
			continue
		}
		if v, both := c.Params[name]; both {
			switch {
			case src[alias] >= fromCase && src[name] >= fromCase:
				once := c.Group + "\x00" + string(o.ID) + "\x00alias\x00" + alias
				if !p.said[once] {
					if p.said == nil {
						p.said = map[string]bool{}
					}
					p.said[once] = true
					p.errs.add(a.Pos, "give one of them", "in case %q: %s and %s (line %d) are one parameter of %s, %s its other name", c.Group, alias, name, v.Pos.Line, o.ID, alias)
				}
				continue
			case src[alias] <= src[name]:
				delete(c.Params, alias)
				delete(src, alias)
				continue
			}
		}
		a.Key = alias
		c.Params[name], src[name] = a, src[alias]
		delete(c.Params, alias)
		delete(src, alias)
	}
}

// ownName is the name case c's op reads parameter name under: an alias is
// its op's own parameter by another name.
func ownName(c Case, name string) string {
	if c.Kind != KindKernel {
		return name
	}
	if o, ok := ops.Lookup(c.Op); ok {
		return string(o.OwnName(ops.Param(name)))
	}
	return name
}

// crossCheck applies the checks that involve two parameters, once merged.
func (p *parser) crossCheck(c Case, src map[string]int) {
	pick := func(a, b string) Pos {
		if src[a] > src[b] {
			return c.Params[a].Pos
		}
		return c.Params[b].Pos
	}
	// A parameter the op never reads would file cases that run the same
	// work under different keys, as an override none reads would; a suite's
	// params stay defaults for the ops that read them.
	if o, ok := ops.Lookup(c.Op); ok && c.Kind == KindKernel {
		for _, name := range sortedKeys(c.Params) {
			if name == ParamOp || src[name] == fromSuite || takes(c, name) {
				continue
			}
			once := c.Group + "\x00" + string(o.ID) + "\x00" + name
			if p.said[once] {
				continue
			}
			if p.said == nil {
				p.said = map[string]bool{}
			}
			p.said[once] = true
			p.errs.add(c.Params[name].Pos, "it takes "+opTakes(o), "in case %q: %s is not a parameter of %s", c.Group, name, o.ID)
		}
	}
	if h, ok := c.Params["num_heads"]; ok {
		if kv, ok := c.Params["num_kv_heads"]; ok && kv.Int > 0 && h.Int%kv.Int != 0 {
			p.errs.add(pick("num_heads", "num_kv_heads"), "", "in case %q: num_heads %d is not a multiple of num_kv_heads %d", c.Group, h.Int, kv.Int)
		}
	}
	// A batch more than the requests is never full: its figures are those
	// of the smaller batch, filed under the larger.
	if r, ok := c.Params[ParamRequests]; ok {
		if b, ok := c.Params[ParamBatch]; ok && r.Int < b.Int {
			p.errs.add(pick(ParamBatch, ParamRequests), "lower batch or raise requests", "in case %q: requests %d are fewer than batch %d, so the batch is never full", c.Group, r.Int, b.Int)
		}
	}
	// max_seqs bounds the sequences run at once: below the batch the batch
	// runs a part at a time under its label; above the requests it is never
	// reached, and each value would be a case of its own running the same work.
	if m, ok := c.Params[ParamMaxSeqs]; ok && m.IsNum {
		batch, bwhat := int64(1), "the default batch 1"
		if b, ok := c.Params[ParamBatch]; ok && b.IsNum {
			batch, bwhat = b.Int, fmt.Sprintf("batch %d", b.Int)
		}
		reqs, rwhat := batch, fmt.Sprintf("the %s (requests defaults to the batch)", plural.Of(int(batch), "request"))
		if r, ok := c.Params[ParamRequests]; ok && r.IsNum {
			reqs, rwhat = r.Int, fmt.Sprintf("requests %d", r.Int)
		}
		switch {
		case m.Int < batch:
			p.errs.add(pick(ParamBatch, ParamMaxSeqs), "raise max_seqs to the batch, or lower batch",
				"in case %q: max_seqs %d is fewer than %s, so the batch never runs side by side", c.Group, m.Int, bwhat)
		case m.Int > reqs:
			p.errs.add(pick(ParamRequests, ParamMaxSeqs), "lower max_seqs, or raise requests",
				"in case %q: max_seqs %d is more than %s, so it is never reached", c.Group, m.Int, rwhat)
		}
	}
	// The prefill budget caps every token of a step, decode tokens first (as
	// vLLM's max_num_batched_tokens, which it holds to max_num_seqs or
	// more): below the sequences run at once, a part of them decodes at a
	// time and the batch never runs side by side.
	if pb, ok := c.Params[ParamPrefillBudget]; ok && pb.IsNum {
		seats, name, what := int64(1), ParamBatch, "the default batch 1"
		if b, ok := c.Params[ParamBatch]; ok && b.IsNum {
			seats, what = b.Int, fmt.Sprintf("batch %d", b.Int)
		}
		if m, ok := c.Params[ParamMaxSeqs]; ok && m.IsNum {
			seats, name, what = m.Int, ParamMaxSeqs, fmt.Sprintf("max_seqs %d", m.Int)
		}
		if pb.Int < seats {
			p.errs.add(pick(name, ParamPrefillBudget), "raise prefill_budget to "+name+", or lower "+name,
				"in case %q: prefill_budget %d is fewer than %s, so a step decodes at most %d of its sequences and the batch never runs side by side",
				c.Group, pb.Int, what, pb.Int)
		}
	}
	// A chunk size sizes the chunked dispatch's chunks only: under another
	// strategy each value would be a case of its own running the same work.
	if k, ok := c.Params[string(ops.MoEChunk)]; ok {
		if s, ok := c.Params[string(ops.MoEStrategyParam)]; ok && s.Raw != string(ops.MoEChunked) {
			p.errs.add(pick(string(ops.MoEChunk), string(ops.MoEStrategyParam)), "leave moe_chunk out of this case, or set moe_strategy: chunked",
				"in case %q: moe_chunk %s sizes the chunks of moe_strategy chunked, not of %s", c.Group, k.Raw, s.Raw)
		}
	}
	if k, ok := c.Params["top_k"]; ok {
		if e, ok := c.Params["experts"]; ok && k.Int > e.Int {
			p.errs.add(pick("experts", "top_k"), "", "in case %q: top_k %d is more than experts %d", c.Group, k.Int, e.Int)
		}
	}
}

// opTakes lists the parameters a kernel case of op o reads, for errors.
func opTakes(o *ops.Op) string {
	var names []string
	for _, u := range o.Params {
		names = append(names, string(u.Param))
	}
	names = append(names, string(ops.Threads), string(ops.Variant), ParamWitnessGPU)
	return strings.Join(names, ", ")
}

func sortedKeys(m map[string]Value) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
