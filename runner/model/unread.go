package model

import (
	"fmt"
	"strings"

	"github.com/mtlbench/mtlbench/internal/plural"
)

// Unread names the tensors of src's checkpoint folder that its model does
// not read: stored under no name Checkpoint.Check found a tensor of the
// config under. A Qwen3 folder whose config.json says LlamaForCausalLM
// leaves its QK-norms here, and runs as another model. nil for any other
// source (a GGUF file holding such tensors is refused: ggufUnused).
func Unread(src Source) []string {
	if ck := checkpointOf(src); ck != nil {
		return ck.unread
	}
	return nil
}

// UnreadNote says what Unread found, for `mtlbench models`' notes and the
// warning the commands that load a model print (WarnUnread): up to four
// names, the count of the rest, and what it likely means. "" when every
// tensor is read.
func UnreadNote(src Source) string {
	names := Unread(src)
	if len(names) == 0 {
		return ""
	}
	count, list := tensorsNamed(names)
	return fmt.Sprintf("%s not read, none of the %s model config.json describes (%s): if its \"architectures\" is wrong, the figures are another model's",
		count, checkpointOf(src).unreadBy, list)
}

// tensorsNamed is "1 tensor is" or "N tensors are", and up to four of
// names with the count of the rest: how the messages about tensors a model
// does not read (UnreadNote, ggufUnused) count and name them.
func tensorsNamed(names []string) (count, list string) {
	list = strings.Join(names[:min(len(names), 4)], ", ")
	if len(names) > 4 {
		list += fmt.Sprintf(" and %d more", len(names)-4)
	}
	if len(names) == 1 {
		return plural.Of(1, "tensor") + " is", list
	}
	return plural.Of(len(names), "tensor") + " are", list
}

// WarnUnread gives warn the one line every command that loads src says
// before any work (models, generate, run, bench, suites validate, ab, tune),
// where src's checkpoint folder holds tensors its model does not read:
// path, the model as the user named it, then UnreadNote; and before it each
// of the folder's Notes (a file its loader passed over), which name their
// file. Nothing otherwise.
func WarnUnread(path string, src Source, warn func(string)) {
	if warn == nil {
		return
	}
	for _, n := range Notes(src) {
		warn(n)
	}
	if note := UnreadNote(src); note != "" {
		warn(path + ": " + note)
	}
}

// Notes are the Config.Notes of src's checkpoint folder: what its loader
// passed over. nil for other sources.
func Notes(src Source) []string {
	if ck := checkpointOf(src); ck != nil && ck.cfg != nil {
		return ck.cfg.Notes
	}
	return nil
}

// checkpointOf is the checkpoint folder src reads, nil for other sources.
func checkpointOf(src Source) *Checkpoint {
	if c, ok := src.(*Cached); ok {
		src = c.Source
	}
	ck, _ := src.(*Checkpoint)
	return ck
}

// ignoredUnread reports whether stored tensor name is one transformers
// drops without a word as it loads cfg's model: a buffer its modules
// compute themselves (the per-layer rotary_emb.inv_freq of old Llama-family
// checkpoints; GPT-2's causal mask attn.bias and attn.masked_bias), and an
// LM head the config ties to the embedding (docs/architecture.md, "Where
// input is checked").
func ignoredUnread(cfg *Config, name string) bool {
	switch {
	case cfg.GPT2():
		if strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias") {
			return true
		}
	case strings.HasSuffix(name, "rotary_emb.inv_freq"):
		return true
	}
	return name == "lm_head.weight" && cfg.TieEmbed
}
