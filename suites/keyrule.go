package suites

import (
	"sort"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// DefaultWitnessGPU is the Apple GPU the cost witness reads its counts
// against where a case names none (docs/suites.md, witness_gpu; the
// runner's kbench.DefaultAppleGPU is it).
const DefaultWitnessGPU = "M3 Ultra"

// defaultMoEChunk is the chunk size of the chunked MoE dispatch where a
// case names none (decodeModel; a kernel case's is its op's default).
const defaultMoEChunk = 64

// modelDefaults are the model cases' parameters whose default is one value
// a suite can write, spelled as keys spell it (docs/suites.md, "Model-case
// parameters"). requests and max_seqs default to the case's batch
// (keyDefaults). The others' defaults are no value to write (slo,
// prefill_budget, variant: none; threads: the backend's, and 0 is refused)
// or hang on the model or the machine (layers: the model's; moe_strategy:
// the tuned configs'; kv_dtype auto is f32 on the cpu, the model's dtype on
// Metal and CUDA), so a suite alone cannot tell that they are defaults.
var modelDefaults = map[string]string{
	ParamBatch:            "1",
	ParamPromptLen:        "128",
	ParamGenLen:           "32",
	ParamDepth:            "0",
	ParamArrival:          "all",
	ParamRangeRatio:       "0",
	ParamKVBlocks:         "0",
	string(ops.BlockSize): "16",
	ParamKVDType:          "auto",
	ParamSampling:         "greedy",
	ParamSteps:            "overlapped",
	ParamFusion:           "on",
}

// Key is the key of a case of kind in group with the parameter values
// vals, each spelled as keys spell it (KeyText): the kind, the group and
// every parameter sorted by name, less those at their default
// (keyDefaults). Keys made outside a suite (peer imports) are made by it
// too, so that they pair with a suite's.
func Key(kind, group string, vals map[string]string) string {
	vals = keyDefaults(kind, vals)
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(kind + "/" + group)
	for _, k := range names {
		b.WriteString("/" + k + "=" + vals[k])
	}
	return b.String()
}

// keyDefaults is the one rule that keys a case the same however its values
// were written: a parameter given its default is keyed as one left out
// (batch: 1, fusion: on, a kernel op's tokens: 1), and the three ways of
// asking for the chunked MoE dispatch at its default chunk (moe_strategy:
// chunked, moe_chunk: 64, both) are keyed as moe_strategy=chunked. vals
// (name -> key text) is not changed; the values left are returned. Each
// value is compared with its default as KeyText spells it, so a key stored
// by an earlier mtlbench (range_ratio=0.0) is read by the same rule.
func keyDefaults(kind string, vals map[string]string) map[string]string {
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		out[k] = v
	}
	is := func(name, def string) bool {
		v, ok := out[name]
		return ok && sameKeyText(name, v, def)
	}
	var drop []string
	strategy := "" // the op's default dispatch; a model case's is the tuned configs'
	switch kind {
	case KindModel:
		batch := vals[ParamBatch]
		if batch == "" {
			batch = modelDefaults[ParamBatch]
		}
		for name, def := range modelDefaults {
			if is(name, def) {
				drop = append(drop, name)
			}
		}
		// Both default to the batch (decodeModel).
		for _, name := range []string{ParamRequests, ParamMaxSeqs} {
			if is(name, batch) {
				drop = append(drop, name)
			}
		}
	case KindKernel:
		o, ok := ops.Lookup(ops.ID(vals[ParamOp]))
		if !ok {
			return out // not a key a suite makes: as it is
		}
		for _, u := range o.Params {
			def := u.Value
			switch {
			case u.Param == ops.MoEStrategyParam:
				strategy = u.Value
				continue
			case u.Param == ops.MoEChunk:
				continue // below: set, it asks for the chunked dispatch
			case ops.Specs[u.Param].Kind == ops.IntKind:
				def = strconv.Itoa(u.Default)
			}
			if is(string(u.Param), def) {
				drop = append(drop, string(u.Param))
			}
		}
	default:
		return out
	}
	if is(ParamWitnessGPU, applegpu.Key(DefaultWitnessGPU)) {
		drop = append(drop, ParamWitnessGPU)
	}
	for _, name := range drop {
		delete(out, name)
	}
	// A moe_chunk asks for the chunked dispatch, which sizes its chunks
	// defaultMoEChunk where none is given (decodeModel, decodeKernel).
	sName, cName, chunked := string(ops.MoEStrategyParam), string(ops.MoEChunk), string(ops.MoEChunked)
	s, hasS := out[sName]
	_, hasC := out[cName]
	switch {
	case hasC && (!hasS || sameKeyText(sName, s, chunked)):
		if is(cName, strconv.Itoa(defaultMoEChunk)) {
			out[sName] = chunked
			delete(out, cName)
		} else {
			delete(out, sName)
		}
	case !hasC && hasS && strategy != "" && sameKeyText(sName, s, strategy):
		delete(out, sName)
	}
	return out
}

// sameKeyText reports whether key text v of parameter name spells def: a
// value escaped in a key (%XX) is free text, no default.
func sameKeyText(name, v, def string) bool {
	return v == def || !strings.Contains(v, "%") && KeyText(name, v) == def
}

// KeysAs reports whether case c keys the same (Key) with parameter name
// written as value: whether it writes that value, or leaves name out or
// writes it otherwise where value is name's default among its other values
// (tokens 1 on a kernel op, requests equal to the batch). Whatever matches
// cases by a parameter's value asks it (selftest --filter), so that a
// default written and one left out are one case to it as to the key
// (docs/suites.md, "A default written is a default left out").
func (c Case) KeysAs(name, value string) bool {
	return c.keyWith(name, KeyText(name, value), true)
}

// Sets reports whether case c writes parameter name at a value other than
// its default, one that its key keeps: a value written at its default is
// as one left out (Key). Whatever reads a case's parameters as fixed by it
// asks it (the fit hint), so that a default written and one left out are
// one case to it as to the key (docs/suites.md, "A default written is a
// default left out").
func (c Case) Sets(name string) bool {
	if _, ok := c.Params[name]; !ok {
		return false
	}
	return !c.keyWith(name, "", false)
}

// keyWith reports whether c keys the same with name set to text (key text)
// where set, left out where not.
func (c Case) keyWith(name, text string, set bool) bool {
	vals := make(map[string]string, len(c.Params)+1)
	for k, v := range c.Params {
		vals[k] = canon(k, v)
	}
	was := Key(c.Kind, c.Group, vals)
	if set {
		vals[name] = text
	} else {
		delete(vals, name)
	}
	return Key(c.Kind, c.Group, vals) == was
}
