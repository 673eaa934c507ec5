package standin

import (
	"strings"
	"testing"
)

func TestLFSSize(t *testing.T) {
	const v1 = "version https://git-lfs.github.com/spec/v1\n"
	for _, tc := range []struct {
		name, data string
		size       int64
		ok         bool
	}{
		{"pointer", v1 + "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 1503300328\n", 1503300328, true},
		{"no final newline", v1 + "oid sha256:4d7a\nsize 12345", 12345, true},
		{"extension lines first", v1 + "ext-0-foo sha256:aa\noid sha256:4d7a\nsize 7\n", 7, true},
		{"the earliest spec", "version https://hawser.github.com/spec/v1\noid sha256:4d7a\nsize 9\n", 9, true},
		{"no size", v1 + "oid sha256:4d7a\n", -1, true},
		{"a size that is none", v1 + "size twelve\n", -1, true},
		{"a safetensors header", "\x10\x00\x00\x00\x00\x00\x00\x00{}", 0, false},
		{"GGUF", "GGUF\x03\x00\x00\x00", 0, false},
		{"JSON", `{"version": "https://git-lfs.github.com/spec/v1"}`, 0, false},
		{"the version line not first", "\n" + v1 + "size 1\n", 0, false},
		{"past the spec's size", v1 + "size 1\n" + strings.Repeat(" ", MaxLFSSize), 0, false},
	} {
		size, ok := LFSSize([]byte(tc.data))
		if size != tc.size || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, size, ok, tc.size, tc.ok)
		}
	}
}

func TestWebPage(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       bool
	}{
		{"hub page", "<!DOCTYPE html>\n<html class=\"\" lang=\"en\">", true},
		{"lower case", "<!doctype html><html>", true},
		{"html alone", "<html><body>Not Found</body></html>", true},
		{"after white space and a BOM", "\xef\xbb\xbf\n  <!DOCTYPE HTML>", true},
		{"JSON", `{"html": "<html>"}`, false},
		{"GGUF", "GGUF\x03\x00\x00\x00", false},
		{"XML", `<?xml version="1.0"?><Error>AccessDenied</Error>`, false},
		{"short", "<ht", false},
		{"empty", "", false},
	} {
		if got := WebPage([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 1503300328\n", "m/model.safetensors: a Git LFS pointer to a file of 1503300328 bytes, not the file itself: the repository was cloned without Git LFS (fetch its files with git lfs pull, or download it with huggingface-cli download)"},
		{"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\n", "m/model.safetensors: a Git LFS pointer to a file, not the file itself: the repository was cloned without Git LFS (fetch its files with git lfs pull, or download it with huggingface-cli download)"},
		{"<!DOCTYPE html>\n<html>", "m/model.safetensors: a web page (HTML), not the file itself: the download of a page that shows the file, or of an error page, rather than of the file (on the Hugging Face hub, a /blob/ address rather than /resolve/; huggingface-cli download fetches the files)"},
		{`{"a": 1}`, ""},
	} {
		err := Check("m/model.safetensors", []byte(tc.data))
		if got := ""; err != nil {
			got = err.Error()
			if got != tc.want {
				t.Errorf("%q:\n got %s\nwant %s", tc.data, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%q: no error, want %s", tc.data, tc.want)
		}
	}
}
