package bench

import "testing"

// A case's label says what ran: an override replaces the value the name
// carries, or joins the name when the name carried none.
func TestRelabel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    map[string]string
		params map[string]string
		want   string
	}{
		{"moe-chunk/moe_chunk=64", map[string]string{"moe_chunk": "1"}, map[string]string{"moe_chunk": "1", "batch": "4"}, "moe-chunk/moe_chunk=1"},
		{"decode/batch=4", map[string]string{"moe_chunk": "1"}, map[string]string{"moe_chunk": "1", "batch": "4"}, "decode/batch=4/moe_chunk=1"},
		{"matmul/m=8", map[string]string{"moe_chunk": "1"}, map[string]string{"m": "8"}, "matmul/m=8"},
		{"decode/batch=4", map[string]string{"fusion": "off", "batch": "2"}, map[string]string{"fusion": "off", "batch": "2"}, "decode/batch=2/fusion=off"},
		{"decode", nil, map[string]string{"batch": "1"}, "decode"},
	} {
		if got := relabel(tc.name, tc.set, tc.params); got != tc.want {
			t.Errorf("relabel(%q, %v) = %q, want %q", tc.name, tc.set, got, tc.want)
		}
	}
}
