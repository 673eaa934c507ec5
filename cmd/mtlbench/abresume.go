package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mtlbench/mtlbench/internal/atomicfile"
	"github.com/mtlbench/mtlbench/results"
)

// abStateFile is where an ab's folder records the settings it runs with.
const abStateFile = "ab.json"

// abState is what an ab records in its folder before its first round, so
// that --resume finishes that comparison and no other: rounds of other
// binaries, suite or settings would be paired with its rounds.
type abState struct {
	Suite     string   `json:"suite"` // absolute path
	SuiteHash string   `json:"suite_hash"`
	Baseline  abBinary `json:"baseline"`
	Candidate abBinary `json:"candidate"`
	Set       []string `json:"set,omitempty"`
	Backend   string   `json:"backend,omitempty"`
	Threads   int      `json:"threads,omitempty"`
	Rounds    int      `json:"rounds"`
	DB        string   `json:"db,omitempty"` // absolute, "" without --db
	Tag       string   `json:"tag,omitempty"`
	// Temporary: the folder is ab's own, removed once the comparison ends.
	Temporary bool `json:"temporary,omitempty"`
	// Recorded are the ids in DB of the runs recorded there so far, each
	// side's in round order: recording again replaces them.
	Recorded [2][]int64 `json:"recorded,omitempty"`
}

// abBinary is a side's binary: its path and what it holds, since a binary
// rebuilt at the same path is other code.
type abBinary struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

func binaryOf(path string) (abBinary, error) {
	f, err := os.Open(path)
	if err != nil {
		return abBinary{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return abBinary{}, fmt.Errorf("%s: %w", path, err)
	}
	return abBinary{Path: path, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (st *abState) save(dir string) error {
	return atomicfile.Write(filepath.Join(dir, abStateFile), func(w io.Writer) error {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		return e.Encode(st)
	})
}

// readABState reads the state of the ab whose folder dir is.
func readABState(dir string) (*abState, error) {
	b, err := os.ReadFile(filepath.Join(dir, abStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--resume %s: no %s there: not a folder an ab kept (an interrupted ab names it)", dir, abStateFile)
	}
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	var st abState
	if err := json.Unmarshal(b, &st); err != nil || st.Rounds < 1 {
		return nil, fmt.Errorf("--resume %s: %s is not an ab's state (%v)", dir, abStateFile, err)
	}
	return &st, nil
}

// differ lists what of now the ab that recorded st did not run with.
func (st *abState) differ(now *abState) []string {
	var out []string
	add := func(what, was, is string) {
		if was != is {
			out = append(out, fmt.Sprintf("%s %s (now %s)", what, was, is))
		}
	}
	orNone := func(s string) string {
		if s == "" {
			return "none"
		}
		return s
	}
	add("suite", st.Suite, now.Suite)
	if st.Suite == now.Suite && st.SuiteHash != now.SuiteHash {
		out = append(out, fmt.Sprintf("suite %s as it was (hash %.12s, now %.12s)", st.Suite, st.SuiteHash, now.SuiteHash))
	}
	for _, b := range []struct {
		flag     string
		was, now abBinary
	}{{"--baseline-bin", st.Baseline, now.Baseline}, {"--candidate-bin", st.Candidate, now.Candidate}} {
		add(b.flag, b.was.Path, b.now.Path)
		if b.was.Path == b.now.Path && b.was.SHA256 != b.now.SHA256 {
			out = append(out, fmt.Sprintf("%s %s as it was (sha256 %.12s, now %.12s: rebuilt since)", b.flag, b.was.Path, b.was.SHA256, b.now.SHA256))
		}
	}
	add("--set", orNone(strings.Join(st.Set, " --set ")), orNone(strings.Join(now.Set, " --set ")))
	add("--backend", orNone(st.Backend), orNone(now.Backend))
	add("--threads", fmt.Sprint(st.Threads), fmt.Sprint(now.Threads))
	add("--rounds", fmt.Sprint(st.Rounds), fmt.Sprint(now.Rounds))
	add("--db", orNone(st.DB), orNone(now.DB))
	if st.DB != "" || now.DB != "" {
		add("--tag", st.Tag, now.Tag)
	}
	return out
}

// abRound is what a side has left to run of the round an ab resumes in.
type abRound struct {
	resume int64 // its interrupted run, which run --resume finishes; 0: a new run
	done   bool  // its run of the round is complete
}

// abProgress reads the side databases of an interrupted ab of rounds
// rounds: the complete rounds (both sides' runs complete), and what each
// side has left of the next.
func abProgress(sides [2]abSide, rounds int) (complete int, next [2]abRound, err error) {
	var runs [2][]results.Run
	for i, side := range sides {
		if _, err := os.Stat(side.db); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		db, err := results.Open(side.db)
		if err != nil {
			return 0, next, fmt.Errorf("%s runs: %w", side.label, err)
		}
		rs, err := db.Runs(results.RunFilter{Tag: side.tag})
		db.Close()
		if err != nil {
			return 0, next, fmt.Errorf("%s runs: %w", side.label, err)
		}
		slices.Reverse(rs) // oldest first: round order
		runs[i] = rs
	}
	done := func(i, r int) bool { return r < len(runs[i]) && runs[i][r].Status == results.RunComplete }
	for complete < rounds && done(0, complete) && done(1, complete) {
		complete++
	}
	for i, side := range sides {
		// Rounds pair by run: a run past the round resumed would pair with
		// the wrong one.
		if len(runs[i]) > complete+1 {
			return 0, next, fmt.Errorf("%s holds %d %s runs, past round %d that is to be resumed: not the state an interrupted ab leaves", side.db, len(runs[i]), side.tag, complete+1)
		}
		if complete < len(runs[i]) {
			r := runs[i][complete]
			next[i] = abRound{resume: r.ID, done: r.Status == results.RunComplete}
		}
	}
	return complete, next, nil
}
