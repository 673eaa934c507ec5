package suites

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Sampling is a decoded sampling parameter; a zero Temperature is greedy.
// One grammar serves a suite's sampling and generate's --sampling.
type Sampling struct {
	Temperature float64
	TopK        int     // 0: no limit
	TopP        float64 // 0: no limit
	Seed        uint64
}

// SamplerFloat is a sampling number as runner/sample computes with it, in
// float32. ParseSampling refuses a value above 0 that this reads as 0: the
// case would sample greedily (a temperature) or without a limit (a top_p)
// under a key that says otherwise.
func SamplerFloat(x float64) float32 { return float32(x) }

// Greedy reports whether the sampler picks the argmax: a temperature it
// reads as 0.
func (s Sampling) Greedy() bool { return SamplerFloat(s.Temperature) <= 0 }

// SamplingSyntax is the grammar ParseSampling reads, for help and hints.
const SamplingSyntax = `greedy or "temperature:T[,top_k:K][,top_p:P][,seed:S]"`

// SamplingError is a sampling value ParseSampling refused, and why.
type SamplingError struct{ Value, Why string }

func (e *SamplingError) Error() string { return fmt.Sprintf("sampling %q: %s", e.Value, e.Why) }

// ParseSampling reads "greedy" (or "") or comma-separated key:value pairs
// in any order: temperature (0 is greedy, as vLLM takes it), top_k (0: no
// limit), top_p (in (0, 1]) and seed; top_k, top_p and seed need a
// temperature above 0.
func ParseSampling(s string) (Sampling, error) {
	var out Sampling
	if s == "" || s == "greedy" {
		return out, nil
	}
	bad := func(format string, a ...any) (Sampling, error) {
		return Sampling{}, &SamplingError{Value: s, Why: fmt.Sprintf(format, a...)}
	}
	seen := map[string]bool{}
	for _, part := range pairs(s) {
		k, v, ok := strings.Cut(part, ":")
		if !ok {
			return bad("%q is not key:value", part)
		}
		if seen[k] {
			return bad("%s given twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "temperature":
			out.Temperature, err = strconv.ParseFloat(v, 64)
			switch t := out.Temperature; {
			case err != nil:
			case !(t >= 0): // NaN too
				err = fmt.Errorf("must be a number >= 0 (0 is greedy)")
			case t > math.MaxFloat32: // the sampler divides in float32
				err = fmt.Errorf("%s is out of range", v)
			case t > 0 && SamplerFloat(t) == 0:
				err = fmt.Errorf("%s is too small (the least above 0 is %.2g; 0 is greedy)", v, math.SmallestNonzeroFloat32)
			}
		case "top_k":
			out.TopK, err = strconv.Atoi(v)
			if err == nil && out.TopK < 0 {
				err = fmt.Errorf("must not be negative")
			}
		case "top_p":
			out.TopP, err = strconv.ParseFloat(v, 64)
			switch p := out.TopP; {
			case err != nil:
			case !(p > 0 && p <= 1):
				err = fmt.Errorf("must be in (0, 1]")
			case SamplerFloat(p) == 0:
				err = fmt.Errorf("%s is too small (the least is %.2g)", v, math.SmallestNonzeroFloat32)
			}
		case "seed":
			out.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return bad("unknown key %q (temperature, top_k, top_p and seed are read)", k)
		}
		var ne *strconv.NumError
		if errors.As(err, &ne) {
			// strconv's own words name Go's functions, not the value.
			err = fmt.Errorf("%q is not a number", v)
			// A number that is no integer (top_k:2.5, seed:-1) is one.
			if _, ferr := strconv.ParseFloat(v, 64); ferr == nil && ne.Err == strconv.ErrSyntax {
				switch k {
				case "top_k":
					err = fmt.Errorf("%s must be an integer >= 0", v)
				case "seed":
					err = fmt.Errorf("%s must be an integer from 0 to %d", v, uint64(math.MaxUint64))
				}
			}
			if ne.Err == strconv.ErrRange {
				err = fmt.Errorf("%s is out of range", v)
			}
		}
		if err != nil {
			return bad("%s: %v", k, err)
		}
	}
	if out.Greedy() && (seen["top_k"] || seen["top_p"] || seen["seed"]) {
		return bad("top_k, top_p and seed need a temperature above 0")
	}
	return out, nil
}

// String spells the sampling as case keys do, one way for every way of
// writing what the sampler runs: "greedy", or temperature, then top_k,
// top_p and seed where they limit anything (top_k 0 and a top_p of 1 keep
// every token, as runner/sample reads them; seed 0), numbers as the
// float32 the sampler computes with, in their shortest form, so
// "temperature:1,top_p:1" and "temperature:1.00000001" are the one case
// "temperature:1" runs.
func (s Sampling) String() string {
	if s.Greedy() {
		return "greedy"
	}
	g := func(x float64) string { return strconv.FormatFloat(float64(SamplerFloat(x)), 'g', -1, 32) }
	out := "temperature:" + g(s.Temperature)
	if s.TopK > 0 {
		out += ",top_k:" + strconv.Itoa(s.TopK)
	}
	if p := SamplerFloat(s.TopP); p > 0 && p < 1 {
		out += ",top_p:" + g(s.TopP)
	}
	if s.Seed != 0 {
		out += ",seed:" + strconv.FormatUint(s.Seed, 10)
	}
	return out
}

// samplingKey is a sampling's case-key spelling ("" if it is none).
func samplingKey(v string) string {
	if s, err := ParseSampling(v); err == nil {
		return s.String()
	}
	return ""
}

// Vocabulary keys the model cases as they run on a model of vocab tokens
// (named model, for errors): a top_k of vocab or more keeps every token,
// as none does (runner/sample), so the sampling a case's key and name
// spell is spelled without it, and the case pairs with one without it in
// compare and gate. Its recorded sampling stays as written. Key and name
// are rewritten as they stand, since a --set keeps the key the suite gave.
// Two cases that become one are refused, as a suite's repeated case is.
func (s *Suite) Vocabulary(model string, vocab int) error {
	var errs ErrorList
	keys := map[string]Case{}      // each key's first case, named as written
	unlimited := map[string]bool{} // keys of cases whose top_k was dropped
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.Kind != KindModel {
			continue
		}
		written := *c
		if key, ok := unlimitTopK(c.Key, vocab); ok {
			c.Key = key
			unlimited[key] = true
		}
		c.Name, _ = unlimitTopK(c.Name, vocab)
		if c.Model.Sampling.TopK >= vocab {
			c.Model.Sampling.TopK = 0
		}
		first, dup := keys[c.Key]
		if !dup {
			keys[c.Key] = written
			continue
		}
		if unlimited[c.Key] {
			errs = append(errs, s.ErrorAt(c.PosOf(ParamSampling), "case %s repeats case %s (line %d): %s has %d tokens, so a top_k of %d or more keeps every token, as none does",
				written.Name, first.Name, first.Pos.Line, model, vocab, vocab).(*Error))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// unlimitTopK respells the sampling segment of a case key or name
// ("/sampling=..."), where its top_k is vocab or more, as the sampler runs
// it: without one.
func unlimitTopK(keyOrName string, vocab int) (string, bool) {
	parts := strings.Split(keyOrName, "/")
	changed := false
	for i := 1; i < len(parts); i++ {
		v, ok := strings.CutPrefix(parts[i], ParamSampling+"=")
		if !ok {
			continue
		}
		smp, err := ParseSampling(v)
		if err != nil || smp.TopK == 0 || smp.TopK < vocab {
			continue
		}
		smp.TopK = 0
		parts[i], changed = ParamSampling+"="+smp.String(), true
	}
	return strings.Join(parts, "/"), changed
}
