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

// Shipped returns the text of a built-in suite by name ("ci" or "ci.yaml").
func Shipped(name string) ([]byte, error) {
	base := strings.TrimSuffix(name, ".yaml") + ".yaml"
	if base != path.Base(base) {
		return nil, fmt.Errorf("no built-in suite %q", name)
	}
	data, err := shipped.ReadFile(base)
	if err != nil {
		return nil, fmt.Errorf("no suite file or built-in suite %q (built in: %s)", name, strings.Join(ShippedNames(), ", "))
	}
	return data, nil
}

// Resolve loads the suite arg names: a file when one exists at that path
// (a path always wins), else the built-in suite of that name. A bare name
// that is a folder here (`kernels` in the repository) is the built-in
// suite when there is one, as a folder is never a suite.
func Resolve(arg string) (*Suite, error) {
	if fi, err := os.Stat(arg); err == nil {
		if !fi.IsDir() || strings.ContainsAny(arg, `/\`) || !slices.Contains(ShippedNames(), strings.TrimSuffix(arg, ".yaml")) {
			return Load(arg)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if strings.ContainsAny(arg, `/\`) {
		return nil, fmt.Errorf("open %s: no such file (built-in suites: %s)", arg, strings.Join(ShippedNames(), ", "))
	}
	data, err := Shipped(arg)
	if err != nil {
		return nil, err
	}
	return Parse(ShippedPrefix+strings.TrimSuffix(arg, ".yaml")+".yaml", data)
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
