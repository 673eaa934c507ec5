package results

import (
	"strings"
	"testing"
)

// A results path that is a folder says so, not "disk I/O error".
func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), dir+" is a directory: want a results database file") {
		t.Errorf("Open(dir): %v", err)
	}
}
