// Package jsonlen counts the entries of a JSON list or map without decoding
// them, so that a reader can refuse one longer than it takes before
// decoding it costs dozens of times its bytes.
package jsonlen

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Members counts the entries of a JSON array or object by its commas
// outside strings and nested values (0 for null or an empty one). raw is
// taken to be valid JSON, as a json.RawMessage the decoder filled is.
func Members(raw []byte) int {
	depth, n := 0, 0
	some := false
	for j := 0; j < len(raw); j++ {
		c := raw[j]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			continue
		case c == ',' && depth == 1:
			n++
			continue
		case c == '"':
			if j = StringEnd(raw, j+1) - 1; j < 0 {
				j = len(raw)
			}
		}
		some = some || depth > 1 || (depth == 1 && c != '[' && c != '{')
	}
	if some {
		n++
	}
	return n
}

// StringEnd is the index just past the closing quote of the string whose
// text starts at i (just past its opening quote), or 0 where data ends
// inside it: the one reading of JSON's strings and escapes every scan here
// skips them by.
func StringEnd(data []byte, i int) int {
	for esc := false; i < len(data); i++ {
		switch c := data[i]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			return i + 1
		}
	}
	return 0
}

// Most is the most entries of a list or map at path in data: the values
// of the keys path names, one object inside another, matched as
// encoding/json matches a struct's fields (a key of other case too, each
// copy of a repeated key), so that whichever a decoder keeps is counted.
// data is walked, not copied; where it is not valid JSON the count covers
// what precedes the fault, and the decoder names the fault.
func Most(data []byte, path ...string) int {
	if len(path) == 0 {
		return Members(data)
	}
	n := 0
	eachMember(data, func(key, value []byte) {
		if keyIs(key, path[0]) {
			n = max(n, Most(value, path[1:]...))
		}
	})
	return n
}

// keyIs says whether the quoted key names field, case folded.
func keyIs(key []byte, field string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return strings.EqualFold(string(key[1:len(key)-1]), field)
	}
	var s string
	return json.Unmarshal(key, &s) == nil && strings.EqualFold(s, field)
}

// eachMember calls f with each key (quoted) and raw value of the object
// data holds, up to the end of the object or the first fault.
func eachMember(data []byte, f func(key, value []byte)) {
	i := space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	for i++; ; i++ {
		i = space(data, i)
		if i >= len(data) || data[i] != '"' {
			return
		}
		end := skip(data, i)
		if end < 0 {
			return
		}
		key := data[i:end]
		i = space(data, end)
		if i >= len(data) || data[i] != ':' {
			return
		}
		i = space(data, i+1)
		if end = skip(data, i); end < 0 {
			return
		}
		f(key, data[i:end])
		if i = space(data, end); i >= len(data) || data[i] != ',' {
			return
		}
	}
}

// space is the index of the first byte from i that is not JSON's space.
func space(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skip is the index just past the value starting at i, or -1 where data
// ends first.
func skip(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	depth := 0
	for j := i; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			end := StringEnd(data, j+1)
			if end == 0 {
				return -1
			}
			if depth == 0 {
				return end
			}
			j = end - 1
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return j + 1
			}
			if depth < 0 {
				return j // a scalar that ends its container
			}
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return j
		}
	}
	if depth == 0 {
		return len(data)
	}
	return -1
}

// Each calls f with each key (unescaped) and raw value of the object data
// holds, in order, up to the end of the object or the first fault: a walk
// that copies nothing but the keys.
func Each(data []byte, f func(key string, value []byte)) {
	eachMember(data, func(k, v []byte) {
		var s string
		if bytes.IndexByte(k, '\\') < 0 {
			s = string(k[1 : len(k)-1])
		} else if json.Unmarshal(k, &s) != nil {
			return
		}
		f(s, v)
	})
}
