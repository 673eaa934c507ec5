package suites

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// shipped are the suites of this folder, built into the binary so that
// `mtlbench run ci` works from any directory.
//
//go:embed *.yaml
var shipped embed.FS

// ShippedPrefix marks a suite read from the binary in Suite.File and in
// listings ("shipped:ci.yaml"), so errors and stored runs say where it came
// from.
const ShippedPrefix = "shipped:"

// ShippedNames lists the built-in suites by name (file name without .yaml),
// sorted.
func ShippedNames() []string {
	entries, _ := fs.ReadDir(shipped, ".")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Shipped returns the text of a built-in suite by name ("ci", "ci.yaml" or
// "ci.yml": suiteName).
func Shipped(name string) ([]byte, error) {
	base := suiteName(name) + ".yaml"
	if base != path.Base(base) {
		return nil, fmt.Errorf("no built-in suite %q", name)
	}
	data, err := shipped.ReadFile(base)
	if err != nil {
		guess := ""
		if d := didYouMean(suiteName(name), ShippedNames()); d != "" {
			guess = " (" + d + ")"
		}
		return nil, notFound{fmt.Sprintf("no suite file or built-in suite %q (built in: %s)%s", name, strings.Join(ShippedNames(), ", "), guess)}
	}
	return data, nil
}

// notFound says no suite file or built-in suite has a name; it is an
// fs.ErrNotExist, as a missing file's error is, so that a command tells a
// suite that is not there from one that is invalid (exit 2, not 1).
type notFound struct{ msg string }

func (e notFound) Error() string { return e.msg }
func (e notFound) Unwrap() error { return fs.ErrNotExist }

// Resolve loads the suite arg names (Source).
func Resolve(arg string) (*Suite, error) {
	file, data, err := Source(arg)
	if err != nil {
		return nil, err
	}
	return Parse(file, data)
}

// Source reads the suite arg names, and gives the file name its positions
// use: a file when one exists at that path (a path always wins), else the
// built-in suite of that name, also as its positions name it
// ("shipped:ci.yaml"). A bare name that is a folder here (`kernels` in the
// repository) is the built-in suite when there is one, as a folder is
// never a suite.
func Source(arg string) (file string, data []byte, err error) {
	if _, err := os.Stat(arg); err == nil {
		if !isFolder(arg) || strings.ContainsAny(arg, `/\`) || !slices.Contains(ShippedNames(), suiteName(arg)) {
			data, err := readSuite(arg)
			return arg, data, err
		}
	} else if lerr := linkTrouble(arg); lerr != nil {
		return "", nil, lerr
	} else if !errors.Is(err, fs.ErrNotExist) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said below, without Go's "stat"
		}
		return "", nil, fmt.Errorf("%s: %w", arg, err)
	}
	name := strings.TrimPrefix(arg, ShippedPrefix)
	if strings.ContainsAny(name, `/\`) {
		return "", nil, notFound{fmt.Sprintf("%s: no such file (built-in suites: %s)", arg, strings.Join(ShippedNames(), ", "))}
	}
	data, err = Shipped(name)
	if err != nil {
		return "", nil, err
	}
	return ShippedPrefix + suiteName(name) + ".yaml", data, nil
}

// ListShipped summarises the built-in suites as List does a folder.
func ListShipped() []Info {
	var out []Info
	for _, name := range ShippedNames() {
		data, _ := Shipped(name)
		file := ShippedPrefix + name + ".yaml"
		out = append(out, info(file, name, data))
	}
	return out
}
