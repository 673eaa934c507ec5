package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// A run whose cases cannot be read back from the store once it ends (a
// store damaged under it) says so, and its summary keeps the cases as
// recorded, repetitions and all, rather than reading as a run that stored
// nothing.
func TestRunSaysItsCasesCouldNotBeReadBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt bool
		wantErr string
	}{
		{"read back", false, ""},
		{"not read back", true, "could not be read back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, tinySuite)
			db := openDB(t)
			progress := func(e Event) {
				if tc.corrupt && e.Done == e.Total {
					// every repetition stored: the cases' rows no longer read
					if _, err := db.SQL().Exec(`UPDATE cases SET params_json = 'not json'`); err != nil {
						t.Error(err)
					}
				}
			}
			sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Progress: progress})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("run: %v, want %q", err, tc.wantErr)
			}
			if sum == nil || len(sum.Cases) != 3 {
				t.Fatalf("summary %+v: want the run's 3 cases", sum)
			}
			// as it ended: a complete run has nothing to resume
			if sum.Run.Status != results.RunComplete {
				t.Errorf("summary's run is %s, want complete", sum.Run.Status)
			}
			for _, c := range sum.Cases {
				if c.Status != results.CaseDone || c.RepsDone != 2 && c.Kind == results.CaseModel {
					t.Errorf("case %s: %s with %d repetitions, want done with 2", c.Name, c.Status, c.RepsDone)
				}
			}
		})
	}
}

// A run and its cases are stored together: a store that refuses the cases
// (a trigger stands in for a full disk) leaves no run without them, and
// one that takes them leaves the run with every case.
func TestRunIsStoredWithItsCases(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
		runs   int
	}{
		{"cases taken", false, 1},
		{"cases refused", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, tinySuite)
			db := openDB(t)
			if tc.refuse {
				if _, err := db.SQL().Exec(`CREATE TRIGGER no_cases BEFORE INSERT ON cases
					BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
			if (err != nil) != tc.refuse || tc.refuse && !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("run: %v, want it refused %v", err, tc.refuse)
			}
			runs, err := db.Runs(results.RunFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tc.runs {
				t.Fatalf("%d runs stored, want %d", len(runs), tc.runs)
			}
			for _, r := range runs {
				if cases, err := db.Cases(r.ID); err != nil || len(cases) != 3 {
					t.Errorf("run %d stored with %d cases (%v), want 3", r.ID, len(cases), err)
				}
			}
		})
	}
}

// A run stored without its cases (by an earlier mtlbench, whose store
// failed between the two) resumes by adding and measuring every case, not
// by reporting the run complete with none; one with all of them adds none.
func TestResumeOfARunWithoutCases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		drop     string // the cases taken away, as SQL's WHERE
		measured int    // repetitions the resume measures
	}{
		{"every case missing", "1", 3},
		{"no case missing", "0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSuite(t, tinySuite)
			db := openDB(t)
			sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().Exec(`DELETE FROM cases WHERE ` + tc.drop); err != nil {
				t.Fatal(err)
			}
			if _, err := db.SQL().Exec(`UPDATE runs SET status = 'interrupted'`); err != nil {
				t.Fatal(err)
			}
			cases := map[string]bool{}
			if _, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: -1, Resume: sum.RunID,
				Progress: func(e Event) {
					if e.Rep >= 0 {
						cases[e.Case] = true
					}
				}}); err != nil {
				t.Fatal(err)
			}
			if len(cases) != tc.measured {
				t.Errorf("the resume measured %d cases (%v), want %d", len(cases), cases, tc.measured)
			}
			stored, err := db.Cases(sum.RunID)
			if err != nil || len(stored) != 3 {
				t.Fatalf("run %d holds %d cases (%v), want 3", sum.RunID, len(stored), err)
			}
			for _, c := range stored {
				if c.Status != results.CaseDone {
					t.Errorf("case %s is %s", c.Name, c.Status)
				}
			}
		})
	}
}
