package suites

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/internal/listarg"
)

// leadingZeroRE matches a decimal integer written with a leading zero, which
// YAML reads as octal (0016 is 14) where a range or a flag reads 16.
var leadingZeroRE = regexp.MustCompile(`^[-+]?0[0-9_]*[0-9][0-9_]*$`)

// LeadingZero says why an integer written as s (0016) is refused, "" when
// it is not so written: one reading of such a number everywhere a suite's
// or bench's integer is read.
func LeadingZero(s string) string {
	if !leadingZeroRE.MatchString(s) {
		return ""
	}
	digits := strings.ReplaceAll(strings.TrimLeft(s, "+-"), "_", "")
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil {
		return fmt.Sprintf("%s: a leading zero is not allowed (write it without)", s)
	}
	if strings.HasPrefix(s, "-") && n != 0 {
		return fmt.Sprintf("%s: a leading zero is not allowed (write -%d)", s, n)
	}
	return fmt.Sprintf("%s: a leading zero is not allowed (write %d)", s, n)
}

// tooLarge says whether err is strconv's for a number past int: the text
// is an integer, out of range, not a malformed one.
func tooLarge(err error) bool { return errors.Is(err, strconv.ErrRange) }

// maxListValues bounds what one list expands to: a typo in a range should
// fail, not queue a million cases.
const maxListValues = 1000

// ParseIntList reads llama-bench's list syntax: comma-separated items, each
// a number or a range first-last (step 1), first-last+step or
// first-last*factor. Values below min, and a value given twice, are
// refused.
func ParseIntList(s string, min int) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	add := func(v int) error {
		if v < min {
			return fmt.Errorf("%d is below %d", v, min)
		}
		// As a matrix list refuses a value twice: a typo, not a sweep.
		if seen[v] {
			return fmt.Errorf("%d is given twice", v)
		}
		seen[v] = true
		out = append(out, v)
		if len(out) > maxListValues {
			return fmt.Errorf("more than %d values", maxListValues)
		}
		return nil
	}
	// An empty item is refused in the wording of every list of the command
	// line (internal/listarg); bench names it with its flag (listarg.Named).
	items, err := listarg.Split("", s)
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		first, rest, isRange := strings.Cut(item, "-")
		// A leading minus is a negative number ("-1"), said to be below
		// min, not a range with no first value.
		if !isRange || first == "" {
			if why := LeadingZero(item); why != "" {
				return nil, fmt.Errorf("%s", why)
			}
			v, err := strconv.Atoi(item)
			if tooLarge(err) {
				return nil, fmt.Errorf("%s is out of range", item)
			}
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
			if why := LeadingZero(rest[i+1:]); why != "" {
				return nil, fmt.Errorf("range %q: step %s", item, why)
			}
			if step, err = strconv.Atoi(rest[i+1:]); tooLarge(err) {
				return nil, fmt.Errorf("range %q: step %s is out of range", item, rest[i+1:])
			} else if err != nil {
				return nil, fmt.Errorf("range %q: step %q is not an integer", item, rest[i+1:])
			}
		}
		for _, n := range []string{first, last} {
			if why := LeadingZero(n); why != "" {
				return nil, fmt.Errorf("range %q: %s", item, why)
			}
		}
		lo, err1 := strconv.Atoi(first)
		hi, err2 := strconv.Atoi(last)
		for _, e := range []struct {
			n   string
			err error
		}{{first, err1}, {last, err2}} {
			if tooLarge(e.err) {
				return nil, fmt.Errorf("range %q: %s is out of range", item, e.n)
			}
		}
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

// ParseParamList reads a list flag of integer parameter name (bench's -b,
// -p, -n and -d) as a matrix reads a range string of it: ParseIntList, then
// the parameter's bounds checked once for the whole string, naming its first
// value out of them, as expandRanges does (rangeValuesBad): a range past
// them (1-999999*2 over batch) is one error, not one for each value it
// makes.
func ParseParamList(name, s string) ([]int, error) {
	spec, ok := params[name]
	if !ok || !spec.isInt {
		return nil, fmt.Errorf("%q is not an integer parameter", name)
	}
	vals, err := ParseIntList(s, int(spec.min))
	if err != nil {
		return nil, err
	}
	msg, hint := rangeValuesBad(name, spec, vals)
	if msg == "" {
		return vals, nil
	}
	if hint != "" {
		msg += " (" + hint + ")"
	}
	// Named as a matrix names a range string: one value alone is said as
	// the value.
	if strings.ContainsAny(s, "-,") {
		msg = fmt.Sprintf("range %q: %s", s, msg)
	}
	return nil, errors.New(msg)
}
