package jsonlen

import "testing"

// Members counts a list's or map's entries whatever their contents hold.
func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
	}{
		{``, 0}, {`null`, 0}, {`[]`, 0}, {`{ }`, 0}, {`[ 1 ]`, 1}, {`["a,b", "c\",d"]`, 2},
		{`[[1,2],[3,[4,5]],{"a":1,"b":2}]`, 3}, {`{"a,":[1,2],"b":{"c":3}}`, 2}, {`["\\", ","]`, 2},
		{`[[]]`, 1}, {`[{}, {}]`, 2},
	} {
		if got := Members([]byte(tc.raw)); got != tc.want {
			t.Errorf("Members(%s) = %d, want %d", tc.raw, got, tc.want)
		}
	}
}
