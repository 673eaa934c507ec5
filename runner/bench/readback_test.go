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
			for _, c := range sum.Cases {
				if c.Status != results.CaseDone || c.RepsDone != 2 && c.Kind == results.CaseModel {
					t.Errorf("case %s: %s with %d repetitions, want done with 2", c.Name, c.Status, c.RepsDone)
				}
			}
		})
	}
}
