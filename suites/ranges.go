package suites

import (
	"fmt"
	"strconv"
	"strings"
)

// maxListValues bounds what one list expands to: a typo in a range should
// fail, not queue a million cases.
const maxListValues = 1000

// ParseIntList reads llama-bench's list syntax: comma-separated items, each
// a number or a range first-last (step 1), first-last+step or
// first-last*factor. Values below min are refused.
func ParseIntList(s string, min int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	add := func(v int) error {
		if v < min {
			return fmt.Errorf("%d is below %d", v, min)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
		if len(out) > maxListValues {
			return fmt.Errorf("more than %d values", maxListValues)
		}
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("empty item in %q", s)
		}
		first, rest, isRange := strings.Cut(item, "-")
		if !isRange {
			v, err := strconv.Atoi(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer or a range (first-last, first-last+step, first-last*factor)", item)
			}
			if err := add(v); err != nil {
				return nil, err
			}
			continue
		}
		op, step := byte('+'), 1
		last := rest
		if i := strings.IndexAny(rest, "+*"); i >= 0 {
			op, last = rest[i], rest[:i]
			var err error
			if step, err = strconv.Atoi(rest[i+1:]); err != nil {
				return nil, fmt.Errorf("range %q: step %q is not an integer", item, rest[i+1:])
			}
		}
		lo, err1 := strconv.Atoi(first)
		hi, err2 := strconv.Atoi(last)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("range %q: want first-last, first-last+step or first-last*factor", item)
		}
		if hi < lo {
			return nil, fmt.Errorf("range %q ends before it starts", item)
		}
		switch {
		case op == '+' && step < 1:
			return nil, fmt.Errorf("range %q: step must be at least 1", item)
		case op == '*' && (step < 2 || lo < 1):
			return nil, fmt.Errorf("range %q: factor must be at least 2, from a first value of at least 1", item)
		}
		for v := lo; v <= hi; {
			if err := add(v); err != nil {
				return nil, fmt.Errorf("range %q: %w", item, err)
			}
			// Stop before the next value passes last: computed as a
			// bound, so a range up to the largest int does not wrap.
			if op == '*' {
				if v > hi/step {
					break
				}
				v *= step
			} else {
				if v > hi-step {
					break
				}
				v += step
			}
		}
	}
	return out, nil
}
