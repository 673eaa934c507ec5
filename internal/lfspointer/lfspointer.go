// Package lfspointer recognises a Git LFS pointer: the small text file a
// repository cloned without Git LFS holds in place of each large file it
// stores in LFS, as Hugging Face repositories store their weights, GGUF
// files and larger tokenizers (the format: git-lfs's docs/spec.md). Read
// as the file it stands for, it would be refused for what its first bytes
// happen to be.
package lfspointer

import (
	"bytes"
	"fmt"
	"strconv"
)

// MaxSize is the most bytes a pointer file holds (the spec's bound).
const MaxSize = 1024

// versions are the first lines a pointer may begin with: the spec's, and
// the one of the tool's earliest releases.
var versions = []string{"version https://git-lfs.github.com/spec/v1\n", "version https://hawser.github.com/spec/v1\n"}

// Size reports whether data, a whole file, is a Git LFS pointer, and the
// size it gives of the file it stands for (-1 where it gives none that
// reads as one).
func Size(data []byte) (int64, bool) {
	if len(data) > MaxSize {
		return 0, false
	}
	var rest []byte
	for _, v := range versions {
		if r, ok := bytes.CutPrefix(data, []byte(v)); ok {
			rest = r
			break
		}
	}
	if rest == nil {
		return 0, false
	}
	for line := range bytes.Lines(rest) {
		if v, ok := bytes.CutPrefix(bytes.TrimRight(line, "\n"), []byte("size ")); ok {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n >= 0 {
				return n, true
			}
		}
	}
	return -1, true
}

// Check is an error naming path where data, its whole content, is a Git
// LFS pointer, saying how to fetch the file it stands for; nil otherwise.
func Check(path string, data []byte) error {
	size, ok := Size(data)
	if !ok {
		return nil
	}
	of := "a file"
	if size >= 0 {
		of = fmt.Sprintf("a file of %d bytes", size)
	}
	return fmt.Errorf("%s: a Git LFS pointer to %s, not the file itself: the repository was cloned without Git LFS (fetch its files with git lfs pull, or download it with huggingface-cli download)", path, of)
}
