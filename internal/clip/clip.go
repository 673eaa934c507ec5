// Package clip quotes a string a file holds for a message: a checkpoint's
// metadata value or a tokenizer's entry may run to hundreds of megabytes,
// which an error echoing it whole would copy to the terminal.
package clip

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Most is the most characters of a string Quote keeps: enough for every
// tensor name of the checkpoints mtlbench reads (mlx-lm's Mixtral's
// model.layers.N.block_sparse_moe.switch_mlp.gate_proj.scales has 60), as
// llama.cpp's GGML_MAX_NAME is, so an error names its tensor whole.
const Most = 64

// Quote is s quoted as Go's %q quotes it where it has at most Most
// characters; a longer s is cut to its first Most-3, "..." after them, and
// its length in characters said.
func Quote(s string) string {
	n := 0
	for i := range s {
		if n == Most-3 {
			if rest := utf8.RuneCountInString(s[i:]); n+rest > Most {
				return fmt.Sprintf("%s (%d characters)", strconv.Quote(s[:i]+"..."), n+rest)
			}
			break
		}
		n++
	}
	return strconv.Quote(s)
}

// Key is s for a key path a message names (w.shape, quantization.bits): s
// bare where it has at most Most characters and %q would leave it as it
// is, else Quote's; a file's key or tensor name of megabytes set in a path
// is cut as Quote cuts it.
func Key(s string) string {
	if q := Quote(s); q != `"`+s+`"` {
		return q
	}
	return s
}
