package clip

import (
	"strconv"
	"strings"
	"testing"
)

// A string of at most Most characters is quoted whole, a longer one cut
// to its first Most-3 with its length said, whatever its length in bytes.
func TestQuote(t *testing.T) {
	long := strings.Repeat("é", 1<<20)
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"gpt2", `"gpt2"`},
		{"a\nb\x00\xff", `"a\nb\x00\xff"`},
		{strings.Repeat("x", Most), `"` + strings.Repeat("x", Most) + `"`},
		{strings.Repeat("x", Most+1), `"` + strings.Repeat("x", Most-3) + `..." (` + strconv.Itoa(Most+1) + ` characters)`},
		{long, `"` + strings.Repeat("é", Most-3) + `..." (1048576 characters)`},
	} {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%.20q) = %.80s, want %.80s", c.in, got, c.want)
		}
	}
}

// A key is named bare where it is short and plain, else as Quote names it.
func TestKey(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"w", "w"},
		{"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"},
		{strings.Repeat("x", Most), strings.Repeat("x", Most)},
		{strings.Repeat("x", Most+1), `"` + strings.Repeat("x", Most-3) + `..." (` + strconv.Itoa(Most+1) + ` characters)`},
		{"a\nb", `"a\nb"`},
		{"a\x00", `"a\x00"`},
	} {
		if got := Key(c.in); got != c.want {
			t.Errorf("Key(%.20q) = %.80s, want %.80s", c.in, got, c.want)
		}
	}
}

// The tensor names of the checkpoints mtlbench reads are quoted whole: an
// error about a packed matrix must say which of its weight, scales and
// biases, and which projection, it means (docs/architecture.md, "Where
// input is checked").
func TestQuoteKeepsTensorNames(t *testing.T) {
	for _, name := range []string{
		"model.layers.31.post_attention_layernorm.weight",              // Llama, 47
		"model.layers.93.mlp.experts.127.down_proj.weight",             // Qwen3-MoE, 48
		"model.layers.47.mlp.switch_mlp.gate_proj.biases",              // mlx-lm's Qwen3-MoE, 47
		"model.layers.31.block_sparse_moe.experts.7.w1.weight",         // Mixtral, 52
		"model.layers.31.block_sparse_moe.switch_mlp.gate_proj.scales", // mlx-lm's Mixtral, 60
		"model.layers.127.block_sparse_moe.switch_mlp.down_proj.biases",
	} {
		if got, want := Quote(name), `"`+name+`"`; got != want {
			t.Errorf("Quote(%s) = %s, want it whole", want, got)
		}
		if got := Key(name); got != name {
			t.Errorf("Key(%s) = %s, want it bare", name, got)
		}
	}
}
