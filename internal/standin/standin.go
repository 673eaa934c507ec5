// Package standin recognises what a download may leave in place of the
// file it was for: a Git LFS pointer, the small text file a repository
// cloned without Git LFS holds for each large file it stores in LFS (as
// Hugging Face repositories store their weights, GGUF files and larger
// tokenizers; the format: git-lfs's docs/spec.md), and a web page, what a
// download of a file's page on the hub rather than of the file gives. Read
// as the file it stands for, either would be refused for what its first
// bytes happen to be.
package standin

import (
	"bytes"
	"fmt"
	"strconv"
)

// MaxLFSSize is the most bytes a pointer file holds (the spec's bound).
const MaxLFSSize = 1024

// versions are the first lines a pointer may begin with: the spec's, and
// the one of the tool's earliest releases.
var versions = []string{"version https://git-lfs.github.com/spec/v1\n", "version https://hawser.github.com/spec/v1\n"}

// LFSSize reports whether data, a whole file, is a Git LFS pointer, and
// the size it gives of the file it stands for (-1 where it gives none that
// reads as one).
func LFSSize(data []byte) (int64, bool) {
	if len(data) > MaxLFSSize {
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

// webPageStarts are how an HTML page begins, past a byte order mark and
// white space, in any case.
var webPageStarts = []string{"<!doctype html", "<html"}

// WebPage reports whether data, a file's bytes (only its first are read),
// is an HTML page.
func WebPage(data []byte) bool {
	head := data[:min(len(data), 512)]
	head = bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	for _, s := range webPageStarts {
		if len(head) >= len(s) && bytes.EqualFold(head[:len(s)], []byte(s)) {
			return true
		}
	}
	return false
}

// Check is an error naming path where data, its whole content, is a Git
// LFS pointer or a web page, saying how to fetch the file it stands for;
// nil otherwise.
func Check(path string, data []byte) error {
	if size, ok := LFSSize(data); ok {
		of := "a file"
		if size >= 0 {
			of = fmt.Sprintf("a file of %d bytes", size)
		}
		return fmt.Errorf("%s: a Git LFS pointer to %s, not the file itself: the repository was cloned without Git LFS (fetch its files with git lfs pull, or download it with huggingface-cli download)", path, of)
	}
	if WebPage(data) {
		return fmt.Errorf("%s: a web page (HTML), not the file itself: the download of a page that shows the file, or of an error page, rather than of the file (on the Hugging Face hub, a /blob/ address rather than /resolve/; huggingface-cli download fetches the files)", path)
	}
	return nil
}
