package tuner

import (
	"fmt"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/runner/tune"
)

// StatusSkipped is a bucket a --skip-tuned run did not tune again: the
// tuned-config file holds a winner tuned for exactly it (docs/tuning.md,
// "Resuming an interrupted tune").
const StatusSkipped = "skipped"

// Stored is the winner Options.Tuned holds for b when it was tuned for
// exactly what this run would tune, else nil and, where an entry of the
// bucket is there, why it is tuned again. Exactly: the same device,
// backend, kernel, dtype and shape (the entry's key), the same kernel
// source (the engine's staleness rule), tool version and commit (the tune
// run the entry names, in this run's store), the same default, and a
// winner among the candidates this run would time. A --skip-tuned
// --dry-run lists each bucket by it, timing nothing.
func (o *Options) Stored(b Bucket) (*tune.Entry, string) {
	if o.Tuned == nil {
		return nil, ""
	}
	k := b.Kernel
	want := tune.Entry{Device: tune.DeviceName(o.Backend), Backend: o.Backend.Info().Backend, Kernel: string(k.Op), DType: b.DType, Shape: b.Shape}
	var e *tune.Entry
	for i := range o.Tuned.Entries {
		if o.Tuned.Entries[i].Key() == want.Key() {
			e = &o.Tuned.Entries[i]
		}
	}
	if e == nil {
		return nil, ""
	}
	if err := e.Check(); err != nil {
		return nil, "its stored entry is refused: " + err.Error()
	}
	lim := tune.LimitsFor(o.Backend, string(k.Op), b.DType)
	def := k.DefaultConfig(b.Shape, lim)
	cands, _ := k.Candidates(b.Shape, lim)
	inSpace := false
	for _, c := range cands {
		inSpace = inSpace || c.Equal(k.Canonicalize(e.Config, b.Shape, lim))
	}
	if h := tune.SourceHash(o.Backend, string(k.Op)); e.SourceHash != h {
		return nil, fmt.Sprintf("its winner was tuned on kernel source %q, this build's is %q", e.SourceHash, h)
	}
	if e.ToolVersion != o.ToolVersion {
		return nil, fmt.Sprintf("its winner was tuned by mtlbench %s, this is %s", e.ToolVersion, o.ToolVersion)
	}
	if !k.Canonicalize(e.Default, b.Shape, lim).Equal(def) {
		return nil, fmt.Sprintf("its winner was measured against the default %s, this build's is %s", k.String(e.Default), k.String(def))
	}
	if !inSpace {
		return nil, fmt.Sprintf("its winner %s is not a candidate of this build's space", k.String(e.Config))
	}
	// The commit is not in the file, but the tune run that wrote the entry
	// recorded it: an entry of no run in this store (imported, another
	// --db) cannot be shown to be this build's.
	if o.DB == nil || e.RunID == 0 {
		return nil, "its winner names no tune run in this results database to show which commit tuned it"
	}
	run, err := o.DB.GetRun(e.RunID)
	switch {
	case err != nil:
		return nil, fmt.Sprintf("its winner's tune run %d cannot be read from %s: %v", e.RunID, o.DB.Path(), err)
	case run.Kind != results.KindTune || run.Backend != want.Backend:
		return nil, fmt.Sprintf("run %d of %s, which its winner names, is not a %s tune run", e.RunID, o.DB.Path(), want.Backend)
	case run.GitCommit != o.GitCommit:
		return nil, fmt.Sprintf("its winner was tuned at commit %q, this build is %q", run.GitCommit, o.GitCommit)
	}
	return e, ""
}

// skipped is the result of a bucket stored already: its stored winner,
// which the run's report lists with the buckets it tuned.
func skipped(b Bucket, e *tune.Entry) *Result {
	return &Result{Bucket: b, Default: e.Default, Winner: e.Config, Speedup: e.Speedup, P: e.P, Entry: e, Skipped: true,
		Verdict: fmt.Sprintf("tuned earlier (run %d), not again: %s", e.RunID, e.Note)}
}
