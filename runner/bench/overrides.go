package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mtlbench/mtlbench/suites"
)

// ParseOverrides reads "name=value" settings (from `run --set`), each
// checked by the rules a suite file's value obeys.
func ParseOverrides(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("--set %q: want name=value", s)
		}
		v = strings.TrimSpace(v)
		// The second would silently win, and the run would record one of
		// two values asked for.
		if prev, dup := out[k]; dup && prev == v {
			return nil, fmt.Errorf("--set %s given twice (%s both times): give it once", k, v)
		} else if dup {
			return nil, fmt.Errorf("--set %s given twice (%s, %s): give one value, or a list --set %s=[%s,%s] to sweep both", k, prev, v, k, prev, v)
		}
		if err := suites.CheckOverride(k, v); err != nil {
			return nil, err // it names the --set
		}
		out[k] = v
	}
	return out, nil
}

// relabel makes a case's name say what ran: each override the case took
// (params holds it) replaces its "name=value" part, or is appended, so
// `--set moe_chunk=1` turns "moe-chunk/moe_chunk=64" into
// "moe-chunk/moe_chunk=1". The key stays, so compare still pairs the case
// with its unchanged twin (and notes the parameter that differs).
func relabel(name string, set map[string]string, params map[string]string) string {
	names := make([]string, 0, len(set))
	for k := range set {
		if _, ok := params[k]; ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	parts := strings.Split(name, "/")
	for _, k := range names {
		found := false
		for i, p := range parts {
			if pk, _, ok := strings.Cut(p, "="); ok && pk == k {
				parts[i] = k + "=" + params[k]
				found = true
			}
		}
		if !found {
			parts = append(parts, k+"="+params[k])
		}
	}
	return strings.Join(parts, "/")
}
