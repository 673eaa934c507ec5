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
		if err := suites.CheckOverride(k, v); err != nil {
			return nil, fmt.Errorf("--set %q: %w", s, err)
		}
		out[k] = v
	}
	return out, nil
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
