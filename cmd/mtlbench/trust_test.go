package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// show prints the error a failed case stored, where `run` sends the user.
func TestShowPrintsStoredErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := db.CreateRun(&results.Run{SuiteName: "s", Tag: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []results.Case{{Key: "model/a", Name: "a", Kind: "model"}, {Key: "model/b", Name: "b", Kind: "model"}}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	if err := db.FailCase(cases[0].ID, "kv cache: out of blocks"); err != nil {
		t.Fatal(err)
	}
	if err := db.AddRep(cases[1].ID, 0, []results.Sample{{Rep: 0, Metric: "decode_tok_s", Value: 1, Unit: "tok/s"}}, nil); err != nil {
		t.Fatal(err)
	}
	db.FinishRun(id, results.RunInterrupted)
	db.Close()
	_, stderr, err := mtl(t, "show", "t", "--db", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"case a failed: kv cache: out of blocks", "case b unfinished: 1 repetitions stored"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("show's stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// The gate's turns: the sides alternate step by step, and rounds alternate
// which goes first.
func TestABTurns(t *testing.T) {
	var got strings.Builder
	for r := range 2 {
		for i := range 4 {
			got.WriteByte("AB"[abTurn(r, i)])
		}
		got.WriteByte(' ')
	}
	if got.String() != "ABAB BABA " {
		t.Errorf("turns %q", got.String())
	}
}
