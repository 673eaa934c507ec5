package bench

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtlbench/mtlbench/suites"
)

// ParseOverrides reads "name=value" settings (from `run --set`), each
// checked by the rules a suite file's value obeys.
func ParseOverrides(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range list {
		// Every later message echoes the setting: a line break in it would
		// split the message, and no name or value takes one.
		if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, fmt.Errorf("--set %q: holds the control character %U at byte %d; no parameter's name or value takes one", s, r, i)
		}
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

// relabel makes a case's name say what ran: an override the name does
// not carry joins it ("decode/batch=4" under `--set moe_chunk=1` is
// "decode/batch=4/moe_chunk=1"), and one that changes a value the name
// carries is said after it, the name keeping its own value:
// "moe-chunk/moe_chunk=64 (--set moe_chunk=1)". Writing the new value in
// place would give two cases of a swept parameter one label (both
// "moe-chunk/moe_chunk=1") while their keys differ; the name's own value is
// what its key, and the same case of a run without the override, say.
func relabel(name string, set map[string]string, params map[string]string) string {
	names := make([]string, 0, len(set))
	for k := range set {
		if _, ok := params[k]; ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	parts := strings.Split(name, "/")
	var changed []string
	for _, k := range names {
		found := false
		for _, p := range parts[1:] {
			if pk, pv, ok := strings.Cut(p, "="); ok && pk == k {
				found = true
				if pv != suites.KeyText(k, params[k]) {
					changed = append(changed, "--set "+k+"="+params[k])
				}
			}
		}
		if !found {
			parts = append(parts, k+"="+params[k])
		}
	}
	label := strings.Join(parts, "/")
	if len(changed) > 0 {
		label += " (" + strings.Join(changed, " ") + ")"
	}
	return label
}
