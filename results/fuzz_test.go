package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSchemaVersion: whatever user_version a file holds, opening it is a
// database or a clear error (too new, invalid), never a panic.
func FuzzSchemaVersion(f *testing.F) {
	for _, v := range []int32{0, 1, int32(len(migrations)), int32(len(migrations)) + 1, -1, -2147483648, 2147483647} {
		f.Add(v)
	}
	tmpl := filepath.Join(f.TempDir(), "empty.db")
	db, err := Open(tmpl)
	if err != nil {
		f.Fatal(err)
	}
	db.Close()
	data, err := os.ReadFile(tmpl)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v int32) {
		path := filepath.Join(t.TempDir(), "r.db")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.SQL().Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		db, err = Open(path)
		switch {
		case v < 0:
			if !errors.Is(err, ErrSchemaInvalid) {
				t.Fatalf("version %d: %v", v, err)
			}
		case int(v) > len(migrations):
			if !errors.Is(err, ErrSchemaTooNew) {
				t.Fatalf("version %d: %v", v, err)
			}
		case err == nil:
			db.Close()
		}
	})
}
