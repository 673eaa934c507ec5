// Package homepath reads a leading ~ in a path as the home folder, as a
// shell would have: paths from environment files, Makefiles and
// --flag=~/x reach mtlbench unexpanded, and taken as they are they would
// make a folder named ~ in the working directory.
package homepath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Expand returns path with a leading ~ or ~/ replaced by the home folder.
// Another ~name (a user's home, which a shell would look up) is refused,
// as is ~ where there is no home folder; any other path is returned as it
// is.
func Expand(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~")
	if !ok {
		return path, nil
	}
	if rest != "" && !strings.HasPrefix(rest, "/") && !strings.HasPrefix(rest, string(filepath.Separator)) {
		return "", fmt.Errorf("only ~ and ~/ are read as the home folder; write the full path (or ./%s for a file of that name here)", path)
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", fmt.Errorf("no home folder to read ~ as (%v); write the full path", err)
	}
	return home + rest, nil
}
