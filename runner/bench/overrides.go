package bench

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/suites"
)

// ParseOverrides reads "name=value" settings (from `run --set`).
func ParseOverrides(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want name=value", s)
		}
		if suites.ParamKinds(k) == nil {
			return nil, fmt.Errorf("--set %q: unknown parameter %q", s, k)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// applyOverrides sets params on every case of a kind that takes them. The
// case keys stay as the suite defines them: an override stands for a change
// to the code or its defaults, which the gate must compare case by case
// against runs made without it.
func applyOverrides(s *suites.Suite, set map[string]string) {
	if len(set) == 0 {
		return
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		params := make(map[string]suites.Value, len(c.Params)+len(set))
		for k, v := range c.Params {
			params[k] = v
		}
		for k, raw := range set {
			if !slices.Contains(suites.ParamKinds(k), c.Kind) {
				continue
			}
			v := suites.Value{Raw: raw, Pos: c.Pos}
			if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
				v.Int, v.Float, v.IsNum = n, float64(n), true
			} else if f, err := strconv.ParseFloat(raw, 64); err == nil {
				v.Float, v.IsNum = f, true
			}
			params[k] = v
		}
		c.Params = params
	}
}

// overrideNote describes overrides for the run's notes.
func overrideNote(set map[string]string) string {
	if len(set) == 0 {
		return ""
	}
	var kv []string
	for k, v := range set {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return "overrides: " + strings.Join(kv, " ")
}
