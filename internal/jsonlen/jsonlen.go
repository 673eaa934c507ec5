// Package jsonlen counts the entries of a JSON list or map without decoding
// them, so that a reader can refuse one longer than it takes before
// decoding it costs dozens of times its bytes.
package jsonlen

// Members counts the entries of a JSON array or object by its commas
// outside strings and nested values (0 for null or an empty one). raw is
// taken to be valid JSON, as a json.RawMessage the decoder filled is.
func Members(raw []byte) int {
	depth, n := 0, 0
	inStr, esc, some := false, false, false
	for _, c := range raw {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
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
			inStr = true
		}
		some = some || depth > 1 || (depth == 1 && c != '[' && c != '{')
	}
	if some {
		n++
	}
	return n
}
