package results

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// Writers that open a new file at the same moment: one switches it to WAL
// while the others open it, which SQLite answers with SQLITE_BUSY without
// consulting the busy timeout. Open waits that out as it waits for locks.
func TestConcurrentOpensOfANewFile(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("new-%d.db", round))
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				db, err := Open(path)
				if err != nil {
					errs[i] = err
					return
				}
				errs[i] = db.Close()
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, opener %d: %v", round, i, err)
			}
		}
	}
}
