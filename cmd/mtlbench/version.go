package main

import (
	"os/exec"
	"runtime/debug"
	"strings"

	"github.com/mtlbench/mtlbench/runner/envconfig"
)

// version and commit may be set at build time with
// -ldflags "-X main.version=v1.2.3 -X main.commit=<sha>"; otherwise they
// come from the build information the go command stamps into the binary
// (the module version, vcs.revision and vcs.modified).
var (
	version = ""
	commit  = ""
)

// buildInfo is what the binary knows of its own source.
type buildInfo struct {
	Version  string // module version or -X main.version; "devel" when neither
	Commit   string // full revision; "" when the build recorded none
	Modified bool   // built from a tree with uncommitted changes
	Go       string // the Go toolchain
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		b.Go = bi.GoVersion
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// String is the --version line: version, commit (+dirty) and toolchain.
func (b buildInfo) String() string {
	s := b.Version
	if b.Commit != "" {
		s += " commit " + b.Commit
		if b.Modified {
			s += "+dirty"
		}
	} else {
		// go run, -buildvcs=false (as GOFLAGS may set it) and a tree
		// outside git all leave the stamp out, not only the last.
		s += " (no commit recorded: the build stamped no VCS revision (go run, -buildvcs=false or no git checkout) and had no -ldflags -X main.commit; make build sets it)"
	}
	return s + " " + b.Go
}

// provenance is what a run records about the code that made it: the
// binary's commit (MTLBENCH_GIT_COMMIT wins, for builds that lost their VCS
// stamp), and the working directory's commit when it is a checkout at
// another commit, so a run started from another tree says so.
func provenance() (binary, tree string) {
	b := readBuildInfo()
	binary = b.Commit
	if v := envconfig.GitCommit(); v != "" {
		binary = v
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err == nil {
		tree = strings.TrimSpace(string(out))
	}
	switch {
	case binary == "":
		// A binary without a stamp (go run, go test): the tree is the
		// best we know, and it is the binary's in that case.
		return tree, ""
	case tree == "" || strings.HasPrefix(tree, binary) || strings.HasPrefix(binary, tree):
		return binary, ""
	}
	return binary, tree
}

// gitCommit is the commit recorded with runs.
func gitCommit() string {
	c, _ := provenance()
	return c
}
