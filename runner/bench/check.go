package bench

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/backends"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/kbench"
	"github.com/mtlbench/mtlbench/runner/model"
	"github.com/mtlbench/mtlbench/suites"
)

// Check is what `suites validate` adds to the suite parser's rules: the
// checks that need the model's configuration (no weights are read) and a
// kernel case's parameters as `run` reads them (nothing is allocated), so a
// suite that would fail at run time fails here first. warn, when set, gets
// what run says without stopping (model.WarnUnread), before the checks end.
func Check(s *suites.Suite, warn func(string)) error {
	errs, err := checkKernels(s)
	if err != nil {
		return err
	}
	// A parameter one backend alone reads, on another backend the suite
	// names (auto is run's to resolve).
	if s.Backend != "auto" {
		for _, c := range s.Cases {
			errs = append(errs, otherBackendRefused(s, c, s.Backend, nil)...)
		}
	}
	if s.Model == nil {
		if len(errs) > 0 {
			return errs
		}
		return nil
	}
	sm := s.Model
	cfg, src, err := openModel(s)
	if err != nil {
		return err
	}
	model.WarnUnread(sm.Path, src, warn)
	src.Close()
	if err := s.Vocabulary(cfg.Name, cfg.Vocab); err != nil {
		errs = append(errs, err.(suites.ErrorList)...)
	}
	sc := newSuiteChecks()
	kvbe, err := kvBackend(s)
	if err != nil {
		return err
	}
	if kvbe != nil {
		defer kvbe.Close()
	}
	for _, c := range s.Cases {
		if c.Kind != suites.KindModel {
			continue
		}
		if e := layersPast(s, c, cfg); e != nil {
			errs = append(errs, e)
			continue
		}
		var kvErr error
		if kvbe != nil {
			_, kvErr = kvDType(s, c, kvbe, kvbe.ActDType())
		}
		for _, err := range []error{checkMoE(s, c, cfg), checkPositions(s, c, cfg, sc), checkKVBlocks(s, c, sc), kvErr} {
			if e, ok := err.(*suites.Error); ok {
				errs = append(errs, e)
			} else if err != nil {
				return err
			}
		}
	}
	if warn != nil {
		for _, n := range sc.notes() {
			warn(n)
		}
	}
	if len(errs) > 0 {
		return dedupe(errs)
	}
	return nil
}

// kvBackend is the backend Check asks which KV cache dtypes it keeps, as
// run asks it (kvDType), where the suite names one and a model case sets a
// kv_dtype: the cpu backend, which opens on any machine; nil for another,
// which run asks on the machine that has it.
func kvBackend(s *suites.Suite) (bridge.Backend, error) {
	if s.Backend != "cpu" || !slices.ContainsFunc(s.Cases, func(c suites.Case) bool {
		return c.Kind == suites.KindModel && c.Model.KVDType != "auto"
	}) {
		return nil, nil
	}
	be, err := backends.Open(s.Backend, backends.Options{})
	if err != nil {
		return nil, fmt.Errorf("checking kv_dtype: %w", err)
	}
	return be, nil
}

// CheckModel refuses a suite whose model does not open (an unknown preset,
// a path that holds no checkpoint, layers past its depth), reading its
// configuration and no weights: a command that records checks it before it
// creates or opens its results database, so a refused model leaves no file.
func CheckModel(s *suites.Suite) error {
	if s.Model == nil {
		return nil
	}
	cfg, src, err := openModel(s)
	if err != nil {
		return err
	}
	src.Close()
	var errs suites.ErrorList
	for _, c := range s.Cases {
		if e := layersPast(s, c, cfg); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return dedupe(errs)
	}
	return nil
}

// layersPast is the error of a model case c whose layers are past the
// depth of its model, in run's words (model.Open refuses the count there);
// nil where they fit.
func layersPast(s *suites.Suite, c suites.Case, cfg *model.Config) *suites.Error {
	if c.Kind != suites.KindModel || c.Model.Layers <= cfg.ModelLayers {
		return nil
	}
	err := &model.LayersError{Model: cfg.Name, Layers: c.Model.Layers, Max: cfg.ModelLayers}
	e, _ := s.ErrorAt(c.PosOf(suites.ParamLayers), "case %s: %v", c.Name, err).(*suites.Error)
	return e
}

// openModel opens the configuration of s's model, an error at the value
// it is about (modelError).
func openModel(s *suites.Suite) (*model.Config, model.Source, error) {
	spec, err := model.SuiteSpec(s.Model, s.Model.Layers)
	if err != nil {
		return nil, nil, modelError(s, err)
	}
	cfg, src, err := model.Open(spec)
	if err != nil {
		return nil, nil, modelError(s, err)
	}
	// Every model case records the model's name (a folder's or file's
	// name, a GGUF file's metadata) as its model parameter, one line of
	// each table and export line, which import refuses with a line break
	// in it (results.CheckLine): refused here, before a run stores it.
	if err := results.CheckLine("model name", cfg.Name); err != nil {
		src.Close()
		return nil, nil, s.ErrorAt(s.Model.Pos, "%v: every case records it as its model parameter, one line of text (rename the folder or file)", err)
	}
	return cfg, src, nil
}

// vocabulary keys s's model cases by its model's vocabulary
// (suites.Suite.Vocabulary), before any case is prepared: only the model
// says how many tokens a top_k keeps. A model that does not open is left
// to prepare, which says why.
func vocabulary(s *suites.Suite) error {
	if s.Model == nil || !slices.ContainsFunc(s.Cases, func(c suites.Case) bool {
		return c.Kind == suites.KindModel && c.Model.Sampling.TopK > 0
	}) {
		return nil
	}
	spec, err := model.SuiteSpec(s.Model, s.Model.Layers)
	if err != nil {
		return nil
	}
	cfg, src, err := model.Open(spec)
	if err != nil {
		return nil
	}
	src.Close()
	return s.Vocabulary(cfg.Name, cfg.Vocab)
}

// WarnUnread gives warn the line run says of the suite's checkpoint folder
// where it holds tensors the model does not read (model.WarnUnread), for a
// command that checks a suite without running it here (ab, whose sides
// run it). A model that does not open says nothing: the run refuses it.
func WarnUnread(s *suites.Suite, warn func(string)) {
	if s.Model == nil {
		return
	}
	spec, err := model.SuiteSpec(s.Model, s.Model.Layers)
	if err != nil {
		return
	}
	_, src, err := model.Open(spec)
	if err != nil {
		return
	}
	defer src.Close()
	model.WarnUnread(s.Model.Path, src, warn)
}

// modelError is err, met opening the suite's model, at the value it is
// about: the model's layers where they are past its depth, else the
// preset or path.
func modelError(s *suites.Suite, err error) error {
	pos := s.Model.Pos
	if le := (*model.LayersError)(nil); errors.As(err, &le) {
		if p, ok := s.Positions["model.layers"]; ok {
			pos = p
		}
	}
	return s.ErrorAt(pos, "%v", err)
}

// checkMoE refuses MoE parameters on a model without experts: its cases
// would run the same work under different keys.
func checkMoE(s *suites.Suite, c suites.Case, cfg *model.Config) error {
	if cfg.NumExperts > 0 {
		return nil
	}
	for _, name := range []string{string(ops.MoEStrategyParam), string(ops.MoEChunk)} {
		if v, ok := c.Params[name]; ok {
			return s.ErrorAt(v.Pos, "%s %s: model %s has no experts (only a mixture-of-experts model reads moe_strategy and moe_chunk)", name, v.Raw, cfg.Name)
		}
	}
	return nil
}

// dedupe drops an error a case repeats word for word at the position of
// another's (a value many cases share).
func dedupe(errs suites.ErrorList) suites.ErrorList {
	seen := map[string]bool{}
	out := errs[:0]
	for _, e := range errs {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// checkPositions rejects a case whose sequences outgrow what the model runs
// exactly (model.Config.Context): the positions it was trained for (its
// rotary tables and, for learned embeddings, its position table end there).
// The requests it draws are sc's, shared by the suite's cases.
func checkPositions(s *suites.Suite, c suites.Case, cfg *model.Config, sc *suiteChecks) error {
	mp := c.Model
	n, what := cfg.Context()
	// With a range ratio, the longest request the run draws must fit, not
	// the longest the range allows, which none may reach; where that one
	// fits, nothing is drawn.
	w := caseWorkload(s, mp)
	if p, g := w.maxLens(); n <= 0 || mp.Depth+p+g <= n {
		return nil
	}
	i, prompt, gen, why := sc.longest(w)
	if why != "" {
		sc.giveUp(positionsUnchecked, why, positionsThen, c.Name)
		return nil
	}
	if mp.Depth+prompt+gen <= n {
		return nil
	}
	lens := fmt.Sprintf("prompt_len %d + gen_len %d", prompt, gen)
	if mp.RangeRatio > 0 {
		lens = fmt.Sprintf("prompt_len %d and gen_len %d at range_ratio %g draw request %d of %d + %d", mp.PromptLen, mp.GenLen, mp.RangeRatio, i, prompt, gen)
	}
	total := mp.Depth + prompt + gen
	if mp.Depth > 0 {
		lens = fmt.Sprintf("depth %d + %s", mp.Depth, lens)
	}
	at, lower := overLengths(total-n, mp.Depth, prompt, gen)
	return s.ErrorAt(c.PosOf(at), "case %s: %s = %d tokens, more than the %s of %s (hint: lower %s)",
		c.Name, lens, total, what, cfg.Name, lower)
}

// overLengths says which of a request's lengths to lower so that it sheds
// over tokens: those that can alone (depth down to 0, prompt_len and
// gen_len to 1), else every one that can be lowered, and the parameter the
// error stands at, the longest of them. A depth of 1 beside a gen_len of
// 5000 hinted "lower depth", at depth's line.
func overLengths(over, depth, prompt, gen int) (at, lower string) {
	parts := []struct {
		name     string
		val, min int
	}{{suites.ParamDepth, depth, 0}, {suites.ParamPromptLen, prompt, 1}, {suites.ParamGenLen, gen, 1}}
	var names []string
	longest := -1
	for _, alone := range []bool{true, false} {
		for _, p := range parts {
			if p.val-p.min >= over || !alone && p.val > p.min {
				names = append(names, p.name)
				if p.val > longest {
					at, longest = p.name, p.val
				}
			}
		}
		if len(names) > 0 {
			break
		}
	}
	if len(names) == 0 { // nothing left to lower: the model's positions are too few
		return suites.ParamPromptLen, "prompt_len or gen_len"
	}
	return at, strings.Join(names, " or ")
}

// checkKVBlocks refuses a case whose kv_blocks cannot hold one request of
// depth + prompt + gen tokens, which could never run. Fewer blocks than
// the batch needs side by side is what kv_blocks is for: the scheduler
// preempts, and the case records how often (`preemptions`). But fewer than
// the batch's prompts take, where each is prefilled whole (no
// prefill_budget, no depth), all of one length (no range_ratio) and all
// arrive at once, preempt nothing: the
// scheduler seats a request only where its prompt fits, so the batch would
// run a part at a time under its label, as a max_seqs below it would. The
// scheduler runs that decide it are sc's, shared by the suite's cases.
func checkKVBlocks(s *suites.Suite, c suites.Case, sc *suiteChecks) error {
	mp := c.Model
	kb, bs := mp.KVBlocks, mp.BlockSize
	if kb <= 0 || bs <= 0 {
		return nil
	}
	// The longest request the run draws, not the longest its range_ratio
	// allows, which none may reach (docs/suites.md, range_ratio); where
	// the longest it allows fits, nothing is drawn.
	w := caseWorkload(s, mp)
	i, pl, gl := 0, 0, 0
	if p, g := w.maxLens(); (mp.Depth+p+g+bs-1)/bs > kb {
		var why string
		if i, pl, gl, why = sc.longest(w); why != "" {
			sc.giveUp(kvUnchecked, why, kvThen, c.Name)
			return nil
		}
	}
	// Named as the position checks name theirs: a matrix's line, or a
	// --set that replaced it, holds many cases.
	if need := (mp.Depth + pl + gl + bs - 1) / bs; need > kb {
		which := "one request"
		if mp.RangeRatio > 0 {
			which = fmt.Sprintf("its longest request (request %d at range_ratio %g)", i, mp.RangeRatio)
		}
		return s.ErrorAt(c.PosOf(suites.ParamKVBlocks), "case %s: kv_blocks=%d hold %d tokens, but %s of %d+%d tokens needs %d blocks of %d (hint: raise kv_blocks to %d or more)",
			c.Name, kb, kb*bs, which, mp.Depth+pl, gl, need, bs, need)
	}
	if mp.Stagger > 0 || mp.Rate > 0 {
		return nil // when requests arrive, and so who is seated, is the run's
	}
	// Prompts of many lengths (a range_ratio's) seat as the scheduler
	// seats the ones the run draws: no one length stands for them all.
	if mp.PrefillBudget > 0 || mp.Depth > 0 || mp.RangeRatio > 0 {
		return seatsChunked(s, c, sc)
	}
	if per := (mp.PromptLen + bs - 1) / bs; mp.Batch*per > kb {
		return s.ErrorAt(c.PosOf(suites.ParamKVBlocks), "case %s: kv_blocks=%d seat %d of the batch's %d prompts of %d tokens (%d blocks of %d each), so the batch would run a part at a time under its label and nothing is preempted (hint: raise kv_blocks to %d or more, or lower batch to %d)",
			c.Name, kb, kb/per, mp.Batch, mp.PromptLen, per, bs, mp.Batch*per, max(kb/per, 1))
	}
	return nil
}

// seatsChunked refuses a case whose kv_blocks, where prompts are prefilled
// a chunk at a time (prefill_budget, or a depth) or are of the lengths a
// range_ratio draws, never let the scheduler
// run as many of its requests side by side as a cache of the workload's
// size does: the scheduler's own run over the requests, all arriving at
// once, decides it (mostSideBySide), so a pool that seats them, preempting
// as it must, is taken, and the hint is the smallest that does. A run
// given up past its bounds leaves the case unchecked, noted in sc.
func seatsChunked(s *suites.Suite, c suites.Case, sc *suiteChecks) error {
	mp := c.Model
	kb, bs := mp.KVBlocks, mp.BlockSize
	w, budget := caseWorkload(s, mp), caseTokenBudget(mp)
	seats := mp.Requests
	if mp.MaxSeqs > 0 {
		seats = min(seats, mp.MaxSeqs)
	}
	full := w.KVTokens(bs, mp.MaxSeqs) / bs
	if kb >= full {
		return nil
	}
	r := sc.run(w, full, bs, budget, mp.MaxSeqs, seats)
	if r.gaveUp != "" {
		sc.giveUp(seatsUnchecked, r.gaveUp, seatsThen, c.Name)
	}
	if !r.decided {
		return nil
	}
	want := r.most
	r = sc.run(w, kb, bs, budget, mp.MaxSeqs, want)
	if r.gaveUp != "" {
		sc.giveUp(seatsUnchecked, r.gaveUp, seatsThen, c.Name)
	}
	got := r.most
	if !r.decided || got >= want {
		return nil
	}
	// The least pool that seats as many, by bisection between kv_blocks
	// and the workload's size, which does: a pool of more blocks seats no
	// fewer (TestCheckKVBlocksSeatTheBatch checks the one below the hint),
	// so what another case of the suite found of the same requests
	// narrows it.
	pk := poolKey{w.Requests, w.PromptLen, w.GenLen, w.Depth, w.RangeRatio, w.Seed, bs, budget, mp.MaxSeqs, want}
	known := sc.pools[pk]
	if known == nil {
		known = &pools{seat: full}
		sc.pools[pk] = known
	}
	lo, hi := kb, full
	if known.short < known.seat && known.seat <= full && known.seat > kb {
		lo, hi = max(kb, known.short), known.seat
	}
	cut := ""
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		r := sc.run(w, mid, bs, budget, mp.MaxSeqs, want)
		if r.gaveUp == gaveUpSuite {
			cut = "; fewer blocks were not tried: " + gaveUpSuite
			break
		}
		if r.decided && r.most >= want {
			hi = mid
		} else {
			lo = mid
		}
	}
	if cut == "" {
		known.seat, known.short = min(known.seat, hi), max(known.short, lo)
	}
	how := fmt.Sprintf("prefilled %d tokens a step", budget)
	if budget == 0 {
		how = "drawn at range_ratio " + strconv.FormatFloat(mp.RangeRatio, 'g', -1, 64) + ", each prefilled whole"
	}
	return s.ErrorAt(c.PosOf(suites.ParamKVBlocks), "case %s: kv_blocks=%d run at most %d of the batch's %d requests side by side as their prompts are %s, where a cache of their size runs %d, so the batch would run a part at a time under its label (hint: raise kv_blocks to %d or more%s)",
		c.Name, kb, got, seats, how, want, hi, cut)
}

// checkKernels plans each kernel case as run prepares it (kbench.Need) on
// the CPU backend: the parameters' errors are run's, word for word. Memory
// and what the suite's backend runs are left to run, on the machine and
// backend that has them.
func checkKernels(s *suites.Suite) (suites.ErrorList, error) {
	var errs suites.ErrorList
	var be bridge.Backend
	for _, c := range s.Cases {
		if c.Kind != suites.KindKernel {
			continue
		}
		if be == nil {
			b, err := backends.Open("cpu", backends.Options{})
			if err != nil {
				return nil, fmt.Errorf("checking kernel cases: %w", err)
			}
			defer b.Close()
			be = b
		}
		_, err := kbench.Need(be, c.Kernel)
		if errors.Is(err, errors.ErrUnsupported) {
			// What the CPU cannot run (a Metal-only format, a KV dtype) is
			// the backend's to say: run skips such a case where it lacks it.
			continue
		}
		if err != nil {
			errs = append(errs, kernelErrors(s, c, err)...)
		}
	}
	return errs, nil
}

// kernelErrors is a kernel case's error as the suite's errors: one for each
// parameter it names (kbench joins them), each at that parameter and naming
// the case, so no line of a joined error stands without either.
func kernelErrors(s *suites.Suite, c suites.Case, err error) suites.ErrorList {
	all := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	}
	var out suites.ErrorList
	for _, e := range all {
		pos := kernelPos(c, e)
		// A parameter written under its alias is named as written.
		if pe, ok := e.(*kbench.ParamError); ok && c.Params[pe.Param].Key != "" {
			e = &kbench.ParamError{Param: c.Params[pe.Param].Key, Value: pe.Value, Msg: pe.Msg}
		}
		se, ok := s.ErrorAt(pos, "case %s: %v", c.Name, e).(*suites.Error)
		if !ok {
			se = &suites.Error{Pos: pos, Msg: fmt.Sprintf("case %s: %v", c.Name, e)}
		}
		out = append(out, se)
	}
	return out
}

// kernelPos is where a kernel case's error points: the parameter it names
// (a `run --set` value: the --set), else the case.
func kernelPos(c suites.Case, err error) suites.Pos {
	if pe := (*kbench.ParamError)(nil); errors.As(err, &pe) {
		return c.PosOf(pe.Param)
	}
	return c.Pos
}
