package results

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/homepath"
	"github.com/mtlbench/mtlbench/internal/readfile"
	_ "modernc.org/sqlite" // registers the "sqlite" driver (pure Go, no cgo)
)

// BusyTimeout is how long a write waits for another process's transaction
// before failing; benchmark writes are short, so 10 s means "something hung".
const BusyTimeout = 10 * time.Second

// ErrNotFound is wrapped by lookups of a run or case that does not exist.
var ErrNotFound = errors.New("not found")

// Options are how a store is opened; the zero value is Open's.
type Options struct {
	// BusyTimeout is how long one statement waits for a lock another
	// process holds (0: BusyTimeout). A Recorder may wait longer, in turns
	// of this.
	BusyTimeout time.Duration
}

func (o Options) busy() time.Duration {
	if o.BusyTimeout > 0 {
		return o.BusyTimeout
	}
	return BusyTimeout
}

// DB is an open results store. Its methods are safe for concurrent use.
type DB struct {
	sql      *sql.DB
	path     string
	readOnly bool
	busy     time.Duration
	// file is the database file as opened: SQLite goes on writing a file
	// removed or replaced under it, and what it writes there is lost.
	file os.FileInfo
	// onClose runs as Close closes the store (OnClose).
	onClose []func()
	// batch, on the DB that Batch hands its function, is the transaction
	// every statement runs in: the pool's one connection is its.
	batch *sql.Tx
}

// stmts is what *sql.DB and *sql.Tx share.
type stmts interface {
	Exec(query string, args ...any) (sql.Result, error)
	Query(query string, args ...any) (*sql.Rows, error)
	QueryRow(query string, args ...any) *sql.Row
}

// q is where a statement runs: the batch's transaction, else the pool.
func (db *DB) q() stmts {
	if db.batch != nil {
		return db.batch
	}
	return db.sql
}

// DefaultPath is $XDG_DATA_HOME/mtlbench/results.db, else
// ~/.local/share/mtlbench/results.db: where the commands keep results unless
// told otherwise (MTLBENCH_DB, --db).
func DefaultPath() string {
	// The XDG spec says relative values are invalid and must be ignored.
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "mtlbench", "results.db")
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "share", "mtlbench", "results.db")
	}
	return "results.db"
}

// Resolve is the absolute path of the database a command names (--db,
// MTLBENCH_DB): a leading ~ or ~/ is the home folder, as a shell would
// have made it, since an environment file, a Makefile or --db=~/r.db pass
// it on unexpanded; any other ~name is refused rather than taken as a
// folder named so in the working directory.
func Resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("results: no database path")
	}
	// filepath.Abs drops a trailing separator, and a store would be made as
	// a file where the path named a folder (--db ~/results/).
	if strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(filepath.Separator)) {
		return "", fmt.Errorf("results: database path %s names a folder (it ends in %c): name the database file, such as %s", path, path[len(path)-1], path+"results.db")
	}
	expanded, err := homepath.Expand(path)
	if err != nil {
		return "", fmt.Errorf("results: database path %s: %w", path, err)
	}
	abs, err := filepath.Abs(expanded)
	if err != nil {
		return "", fmt.Errorf("results: database path %s: %w", path, err)
	}
	return abs, nil
}

// Open opens (creating it and its parent directories if needed) the results
// database at path and upgrades its schema to the latest version. A
// database this process may not write (a read-only file or folder) is
// opened read-only instead, when its schema is current: it can be read,
// and writes fail. A database another program made (tables, but not
// mtlbench's) is refused with ErrNotResults, unchanged.
func Open(path string) (*DB, error) { return OpenWith(path, Options{}) }

// OpenWith is Open with options.
func OpenWith(path string, o Options) (*DB, error) {
	path, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	// SQLite's own words for these ("disk I/O error") say nothing of why.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory"
		}
		return nil, fmt.Errorf("results: %s is %s: want a results database file", path, what)
	}
	// A file this process may not write is opened by SQLite all the same,
	// for reading, which it says only at the first write (a run's, once its
	// model is built and its cases prepared): open it read-only here, as
	// one in a read-only folder is, so OpenToWrite refuses it before the
	// work. A file that read-only open does not take goes the usual way,
	// which says what it is.
	if st, err := os.Stat(path); err == nil && st.Size() > 0 && fileWritable(path) != nil {
		if ro, err := openReadOnly(path, o); err == nil {
			return ro, nil
		}
	}
	db, err := openWith(path, migrations, o)
	if err != nil && isFileFault(err) {
		return nil, fileFaultErr(path, err)
	}
	if err != nil && isReadOnlyErr(err) {
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			// Nothing to read: SQLite's "unable to open database file"
			// says neither which folder nor why.
			return nil, fmt.Errorf("results: %s cannot be made: this process may not write the folder %s; name a database in a folder it may write (--db, MTLBENCH_DB)",
				path, existingFolder(path))
		}
		ro, rerr := openReadOnly(path, o)
		if rerr == nil {
			return ro, nil
		}
		if errors.Is(rerr, ErrUnreadWAL) {
			return nil, rerr
		}
		if !os.IsNotExist(rerr) {
			return nil, fmt.Errorf("%w (and read-only: %v)", err, rerr)
		}
	}
	return db, err
}

// existingFolder is the nearest folder above path that is there: the one
// a new store, and the folders between, would be made in.
func existingFolder(path string) string {
	d := filepath.Dir(path)
	for {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			return d
		}
		d = filepath.Dir(d)
	}
}

// FileInPath is the folder of path, or a folder above it, that is a file
// instead ("" when none is): mkdir's "not a directory" names neither.
func FileInPath(path string) string {
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil {
			if !st.IsDir() {
				return d
			}
			return ""
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// CheckNew says why a store could not be made at abs (a path Resolve gave,
// where no file is), making nothing: a file where a folder of its path
// should be, or a nearest folder there this process may not write. A
// command that records checks so before its work and makes the store only
// as it first records, so that one refused on the way leaves none behind.
func CheckNew(abs string) error {
	if f := FileInPath(abs); f != "" {
		return fmt.Errorf("results: %s cannot be made: %s is a file, not a folder; name a database path in a folder", abs, f)
	}
	d := filepath.Dir(abs)
	for {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		d = filepath.Dir(d)
	}
	if err := writable(d); err != nil {
		return fmt.Errorf("results: %s cannot be made: folder %s cannot be written (%v); record into another with --db or MTLBENCH_DB", abs, d, err)
	}
	return nil
}

// isReadOnlyErr tells the errors of a file this process may not write.
func isReadOnlyErr(err error) bool {
	msg := err.Error()
	return errors.Is(err, os.ErrPermission) || strings.Contains(msg, "readonly database") ||
		strings.Contains(msg, "read-only") || strings.Contains(msg, "unable to open database file")
}

// OpenReadOnly opens an existing database for reading only: nothing is
// created, migrated or written. It must be mtlbench's; one at an older
// schema version is read through an upgraded private copy (readUpgraded).
func OpenReadOnly(path string) (*DB, error) {
	db, err := openReadOnly(path, Options{})
	if err != nil && isFileFault(err) {
		if abs, rerr := Resolve(path); rerr == nil {
			return nil, fileFaultErr(abs, err)
		}
	}
	return db, err
}

func openReadOnly(path string, o Options) (*DB, error) {
	abs, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var last error
	for _, extra := range readOnlyModesFor(abs) {
		if strings.Contains(extra, "immutable=1") {
			// immutable=1 reads the main file alone: the commits still in
			// the write-ahead log would be silently missing.
			if st, err := os.Stat(abs + "-wal"); err == nil && st.Size() > 0 {
				return nil, fmt.Errorf("results: %s: %w here: its latest commits are in %s-wal, which SQLite reads only where it may create %s-shm beside it; "+
					"copy %s and %s-wal together to a writable folder, or make this one writable",
					abs, ErrUnreadWAL, filepath.Base(abs), filepath.Base(abs), filepath.Base(abs), filepath.Base(abs))
			}
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busy().Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		db, err := sql.Open("sqlite", u.String()+"?"+extra+"&"+q.Encode())
		if err != nil {
			last = err
			continue
		}
		db.SetMaxOpenConns(1)
		// A connection that cannot read here may with the next mode.
		if _, err := userVersion(db); err != nil {
			db.Close()
			last = err
			continue
		}
		v, err := checkSchema(db, abs)
		if err != nil {
			db.Close()
			return nil, err
		}
		switch {
		case v > len(migrations):
			db.Close()
			return nil, tooNew(abs, v, len(migrations))
		case v < len(migrations):
			defer db.Close()
			return readUpgraded(db, abs, v, o)
		}
		return &DB{sql: db, path: abs, readOnly: true, busy: o.busy()}, nil
	}
	return nil, fmt.Errorf("results: open %s read-only: %w", abs, last)
}

// readUpgraded reads a store at an older schema version v, which this
// process may not upgrade in place, through a private copy upgraded to the
// latest one: results already measured stay readable (docs/data.md,
// "Other commands"). The copy is taken away as the store is closed.
func readUpgraded(src *sql.DB, abs string, v int, o Options) (_ *DB, err error) {
	dir, err := os.MkdirTemp("", "mtlbench-store-")
	if err != nil {
		return nil, fmt.Errorf("results: %s is read-only and at schema version %d, older than this mtlbench's %d; copy it to upgrade a copy: %w", abs, v, len(migrations), err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	cp := filepath.Join(dir, filepath.Base(abs))
	// VACUUM INTO reads one consistent snapshot, through a read-only connection.
	if _, err := src.Exec(`VACUUM INTO ?`, cp); err != nil {
		return nil, fmt.Errorf("results: copy %s (read-only, schema version %d) to upgrade it in %s: %w", abs, v, dir, err)
	}
	up, err := openWith(cp, migrations, o)
	if err != nil {
		return nil, fmt.Errorf("results: upgrade a copy of %s (read-only, schema version %d): %w", abs, v, err)
	}
	if err := up.Close(); err != nil {
		return nil, err
	}
	db, err := openReadOnly(cp, o)
	if err != nil {
		return nil, err
	}
	db.path = abs
	db.OnClose(func() { os.RemoveAll(dir) })
	return db, nil
}

// ErrUnreadWAL: a database in a folder this process may not write holds
// commits in its write-ahead log that SQLite cannot apply there.
var ErrUnreadWAL = errors.New("its write-ahead log cannot be read")

// readOnlyModes are the ways OpenReadOnly tries, in order: mode=ro reads a
// WAL database when its -shm can be used (or created); immutable=1 reads a
// file in a folder nobody may write (no locks, and no WAL).
var readOnlyModes = []string{"mode=ro", "mode=ro&immutable=1"}

// readOnlyModesFor is readOnlyModes for the store at abs as it stands. A
// mode=ro connection makes a -wal and a -shm where the folder may be
// written and, unable to checkpoint, leaves them behind: where none of
// SQLite's files is beside the store, no process has it open in WAL mode
// and every commit is in the file itself, so it is read as immutable and
// the folder is left as it was. With a -wal or -shm there (a writer
// running, or one killed), mode=ro shares its index and reads its commits
// (docs/data.md, "Other commands").
func readOnlyModesFor(abs string) []string {
	for _, f := range []string{abs + "-wal", abs + "-shm", abs + "-journal"} {
		if _, err := os.Lstat(f); err == nil || !errors.Is(err, os.ErrNotExist) {
			return readOnlyModes
		}
	}
	return readOnlyModes[len(readOnlyModes)-1:]
}

// ReadOnly reports whether the database was opened for reading only.
func (db *DB) ReadOnly() bool { return db.readOnly }

// ErrReadOnly: a command that records results was given a store it may
// not write.
var ErrReadOnly = errors.New("this process may not write it")

// OpenToWrite opens the database as Open does for a command that records
// results (run, bench, tune, import): one this process may not write is
// refused here, before the command's work, not at its first write.
func OpenToWrite(path string) (*DB, error) { return OpenToWriteWith(path, Options{}) }

// OpenToWriteWith is OpenToWrite with options.
func OpenToWriteWith(path string, o Options) (*DB, error) {
	db, err := OpenWith(path, o)
	if err != nil {
		return nil, err
	}
	if db.ReadOnly() {
		db.Close()
		return nil, fmt.Errorf("%s: %w", readOnlyWords(db.path), ErrReadOnly)
	}
	return db, nil
}

func readOnlyWords(path string) string {
	return fmt.Sprintf("the results database %s cannot be written (record into another with --db or MTLBENCH_DB; show, compare and report still read this one)", path)
}

func open(path string, steps []migration) (*DB, error) { return openWith(path, steps, Options{}) }

func openWith(path string, steps []migration, o Options) (_ *DB, err error) {
	abs, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		if f := FileInPath(abs); f != "" {
			return nil, fmt.Errorf("results: %s cannot be made: %s is a file, not a folder; name a database path in a folder", abs, f)
		}
		return nil, fmt.Errorf("results: create directory for %s: %w", abs, err)
	}
	if _, serr := os.Lstat(abs); errors.Is(serr, os.ErrNotExist) {
		// A store this open made and could not finish (a full disk) is
		// taken away, not left as an empty file a later command refuses;
		// not where another process holds it (it made the file too).
		defer func() {
			if err != nil && !isBusy(err) {
				for _, f := range []string{abs, abs + "-wal", abs + "-shm"} {
					os.Remove(f)
				}
			}
		}()
	}
	db, err := sql.Open("sqlite", dsn(abs, o.busy()))
	if err != nil {
		return nil, fmt.Errorf("results: open %s: %w", abs, err)
	}
	// One connection: SQLite allows one writer anyway, and a single
	// connection keeps per-connection pragmas and our queueing simple.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	whileBusy := func(f func() error) error { return whileBusy(f, o.busy()) }
	if err := whileBusy(db.Ping); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: open %s: %w", abs, err)
	}
	// Nothing is written before the file is known to be new or mtlbench's:
	// WAL mode and the schema would both change another program's database.
	var v int
	if err := whileBusy(func() error { var err error; v, err = checkSchema(db, abs); return err }); err != nil {
		db.Close()
		return nil, err
	}
	// A newer mtlbench's file is refused before setWAL, which would write
	// its header (a rollback-journal file becomes a WAL one).
	if v > len(steps) {
		db.Close()
		return nil, tooNew(abs, v, len(steps))
	}
	if err := whileBusy(func() error { return setWAL(db) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("results: open %s: %w", abs, err)
	}
	if err := migrate(db, abs, steps); err != nil {
		db.Close()
		if !strings.Contains(err.Error(), abs) {
			// a step that failed (a full disk) says which file it was upgrading
			err = fmt.Errorf("results: upgrade %s to schema version %d: %w", abs, len(steps), err)
		}
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("results: open %s: %w", abs, err)
	}
	return &DB{sql: db, path: abs, busy: o.busy(), file: st}, nil
}

// setWAL switches the file to WAL, so readers never block the writer and
// processes can share it; the mode is kept in the file.
func setWAL(db *sql.DB) error {
	var mode string
	return db.QueryRow(`PRAGMA journal_mode = WAL`).Scan(&mode)
}

// whileBusy runs f, retrying for up to patience while SQLite answers
// SQLITE_BUSY: connections opening a new file at once race to switch it to
// WAL, and the losers get SQLITE_BUSY without the busy handler being
// consulted.
func whileBusy(f func() error, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	wait := time.Millisecond
	for {
		err := f()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// StoreError says what to tell a user whose command failed in the store
// itself (SQLite's own error: a read-only file, a lock another process held
// past BusyTimeout, a full disk), naming the database; "" for any other
// error.
func (db *DB) StoreError(err error) string {
	if errors.Is(err, ErrStoreMoved) {
		return "the results database " + db.path
	}
	code, ok := sqliteCode(err)
	if !ok {
		return ""
	}
	switch code {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		waited := db.busy
		if u := (*UnstoredError)(nil); errors.As(err, &u) && u.Waited > waited {
			waited = u.Waited
		}
		if w := (*waitedError)(nil); errors.As(err, &w) && w.waited > waited {
			waited = w.waited
		}
		return fmt.Sprintf("the results database %s was locked by another process for more than %v", db.path, roundTime(waited))
	case 8: // SQLITE_READONLY
		return readOnlyWords(db.path)
	case 10, 11, 13, 26: // SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB
		return "the results database " + fileFaultWords(db.path, code)
	}
	return "the results database " + db.path
}

// FromStore reports whether err is SQLite's own, or ErrStoreMoved: the
// store failed, not the work whose results it was keeping.
func FromStore(err error) bool {
	_, ok := sqliteCode(err)
	var u *unreadableError
	return ok || errors.Is(err, ErrStoreMoved) || errors.As(err, &u)
}

// unreadableError is a stored value mtlbench did not write as it stands (a
// time that is no time, parameters that are no JSON object, a sample that
// is no number): the file was edited by hand or by another program. It is
// the store's failure, as SQLite's own errors are, not the command's.
type unreadableError struct{ err error }

func (e *unreadableError) Error() string { return e.err.Error() }
func (e *unreadableError) Unwrap() error { return e.err }

// unreadable marks err, from reading a row back, as the row's fault
// unless SQLite's own error says the file failed.
func unreadable(err error) error {
	if _, ok := sqliteCode(err); ok || err == nil || errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return &unreadableError{err}
}

// readErr names the database and what to do where err is a row it cannot
// read back (docs/data.md: a store's failure names the database).
func (db *DB) readErr(err error) error {
	var u *unreadableError
	if !errors.As(err, &u) {
		return err
	}
	return fmt.Errorf("%w: the results database %s holds a value mtlbench did not write (edited by hand, or by another program): restore it from a copy, or record into another with --db or MTLBENCH_DB", err, db.path)
}

// ErrStoreMoved: the database file was removed or replaced while it was
// open; SQLite writes on into the file it opened, which nothing reads.
var ErrStoreMoved = errors.New("removed or replaced while open (SQLite's writes since went to the old file)")

// checkFile says whether the database's path still names the file that
// was opened (ErrStoreMoved when not).
func (db *DB) checkFile() error {
	if db.file == nil {
		return nil
	}
	st, err := os.Stat(db.path)
	if err == nil && os.SameFile(st, db.file) {
		return nil
	}
	return fmt.Errorf("results: %s was %w", db.path, ErrStoreMoved)
}

// isFileFault reports whether err is SQLite's SQLITE_CORRUPT or SQLITE_NOTADB
// (the file is no SQLite database, or a damaged one), SQLITE_FULL or
// SQLITE_IOERR.
func isFileFault(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code == 10 || code == 11 || code == 13 || code == 26)
}

// fileFaultErr names the file and what to do in place of SQLite's own words
// ("file is not a database (26)"), which name neither; SQLite's error stays
// wrapped, so FromStore still tells it.
func fileFaultErr(path string, err error) error {
	code, _ := sqliteCode(err)
	var inner interface {
		error
		Code() int
	}
	if errors.As(err, &inner) {
		err = inner
	}
	return fmt.Errorf("results: %s (SQLite: %w)", fileFaultWords(path, code), err)
}

func fileFaultWords(path string, code int) string {
	switch code {
	case 13:
		return fmt.Sprintf("%s is on a full disk (free space there, or record into another with --db or MTLBENCH_DB)", path)
	case 10:
		// On a full disk the -shm beside a WAL store cannot grow: an I/O
		// error (SQLITE_IOERR_SHMSIZE), not SQLITE_FULL.
		return fmt.Sprintf("%s could not be read or written (a full disk, or a file system SQLite cannot lock or map, as some network shares): free space there, or keep the store on a local disk", path)
	}
	if code == 26 {
		// A model's file is named as such: moving it aside is no advice.
		if k := readfile.KindOf(readfile.Head(path)); k == readfile.GGUF || k == readfile.Safetensors {
			return fmt.Sprintf("%s is %s, not an SQLite database: check that --db or MTLBENCH_DB names a results database", path, k)
		}
		return fmt.Sprintf("%s is not an SQLite database: check that --db or MTLBENCH_DB names a results database, or move the file aside for a new store to be made there", path)
	}
	return fmt.Sprintf("%s is damaged (truncated, or overwritten in part): restore it from a copy, or move it and its -wal aside for a new store to be made there (sqlite3's .recover may save its runs)", path)
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code == 5
}

// sqliteCode is the primary result code of an error SQLite returned.
func sqliteCode(err error) (int, bool) {
	var c interface{ Code() int }
	if !errors.As(err, &c) {
		return 0, false
	}
	return c.Code() & 0xff, true
}

// dsn builds a file: URI so that any character in the path (even '?' or
// '#') survives, with the connection settings as driver parameters (WAL is
// not one: open switches to it once it knows the file is mtlbench's):
//   - busy_timeout, so that a connection waits for another's locks;
//   - synchronous=NORMAL, safe in WAL (a power cut may lose the last commits,
//     never corrupts) and much faster per commit;
//   - _txlock=immediate: every transaction takes the write lock at BEGIN, so
//     a second process waits in the busy handler instead of failing with
//     SQLITE_BUSY when a read transaction tries to upgrade to a write.
func dsn(abs string, busy time.Duration) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return u.String() + "?" + q.Encode()
}

// Close closes the database.
func (db *DB) Close() error {
	err := db.sql.Close()
	for _, f := range db.onClose {
		f()
	}
	db.onClose = nil
	return err
}

// OnClose has Close run f once the store is closed: what watches over a
// command while it holds the store ends with it.
func (db *DB) OnClose(f func()) { db.onClose = append(db.onClose, f) }

// CloseWaiting closes the store as Close does, and waits, up to patience,
// for a statement still running on its connection to end and the
// connection to close with it: SQLite takes its -wal and -shm away as the
// last connection closes, so a process about to exit (a signal) leaves the
// folder as a finished command would. It reports whether the connection
// closed in time.
func (db *DB) CloseWaiting(patience time.Duration) bool {
	db.sql.Close()
	deadline := time.Now().Add(patience)
	for db.sql.Stats().OpenConnections > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// CloseNew closes a store this command made, and where it holds no run
// (the command failed at its first write: a full disk, an import whose
// batch was refused) removes it with its -wal and -shm, so that a refused
// command leaves nothing a later one would find empty (docs/data.md). It
// reports whether it removed the store.
//
// A store another process has open is theirs too, as openWith keeps a new
// store another holds: a command that opened it before its work records
// its run there later, and is not to find it gone. SQLite leaves WAL mode
// only where no other connection has the file open, so the switch tells,
// without waiting. The runs are counted again under an exclusive lock, and
// the files removed before letting go: a process that opens the store
// meanwhile waits for the lock and then finds the file gone
// (ErrStoreMoved), its run not lost. A lock it cannot take keeps the store.
func (db *DB) CloseNew() (removed bool, err error) {
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	if db.readOnly {
		return false, nil
	}
	ctx := context.Background()
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	runs := func() (int, error) {
		var n int
		return n, conn.QueryRowContext(ctx, `SELECT count(*) FROM runs`).Scan(&n)
	}
	if n, err := runs(); err != nil || n > 0 {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA busy_timeout = 0`); err != nil {
		return false, err
	}
	var mode string
	switched := true
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode = DELETE`).Scan(&mode); err != nil {
		if isBusy(err) {
			return false, nil // another process has it open
		}
		// The switch writes the WAL's pages into the file, which a full
		// disk (why the first write failed, often) refuses: in WAL mode
		// still, the lock below keeps out a process that opens it now.
		switched = false
	} else if mode != "delete" {
		return false, nil
	}
	keep := func() {
		if switched {
			conn.ExecContext(ctx, `PRAGMA journal_mode = WAL`)
		}
	}
	if _, err := conn.ExecContext(ctx, `BEGIN EXCLUSIVE`); err != nil {
		keep()
		return false, nil
	}
	if n, err := runs(); err != nil || n > 0 {
		conn.ExecContext(ctx, `ROLLBACK`)
		keep()
		return false, err
	}
	defer conn.ExecContext(ctx, `ROLLBACK`)
	for _, f := range []string{db.path, db.path + "-journal", db.path + "-wal", db.path + "-shm"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	return true, nil
}

// Path is the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Holds reports whether path is the database's file or one of SQLite's
// beside it (-wal, -shm, -journal), by name or by link: a command that
// wrote its output there would destroy every run in the store.
func (db *DB) Holds(path string) bool { return StoreHolds(db.path, path) }

// StoreHolds is Holds for the store at store (absolute), which need not
// be there yet: a command checks its outputs before it makes the store.
func StoreHolds(store, path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	out, outErr := os.Stat(abs)
	for _, f := range []string{store, store + "-wal", store + "-shm", store + "-journal"} {
		if abs == f {
			return true
		}
		if st, err := os.Stat(f); err == nil && outErr == nil && os.SameFile(st, out) {
			return true
		}
	}
	return false
}

// SQL gives direct access for ad-hoc read queries (reports). The pool has
// one connection: close each *sql.Rows before running another query.
func (db *DB) SQL() *sql.DB { return db.sql }

// SchemaVersion reports the file's PRAGMA user_version.
func (db *DB) SchemaVersion() (int, error) { return userVersion(db.sql) }

// tx runs f in a write transaction (BEGIN IMMEDIATE through _txlock),
// committing if f returns nil and rolling back otherwise.
func (db *DB) tx(f func(tx *sql.Tx) error) error {
	if db.batch != nil {
		return f(db.batch) // Batch commits or rolls back the whole
	}
	tx, err := db.sql.Begin()
	if err != nil {
		return fmt.Errorf("results: begin: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: commit: %w", err)
	}
	return nil
}

// Batch runs f on a DB whose every statement, read or write, runs in one
// write transaction: all that f stores is committed when it returns nil,
// and none of it otherwise (an import of several files stores them all or
// nothing). f must use only the DB it is given, never db, whose one
// connection the transaction holds.
func (db *DB) Batch(f func(b *DB) error) error {
	if db.batch != nil {
		return f(db)
	}
	return db.tx(func(tx *sql.Tx) error {
		b := *db
		b.batch = tx
		return f(&b)
	})
}

// BatchWaiting is Batch for a command that stores what it has read
// (import, peer import): a write lock another process holds past the busy
// timeout (a run's long write, another import) is waited for again, up to
// wait in all (MTLBENCH_DB_WAIT, as a run's writes wait), telling note once.
// It tries again only while the transaction could not begin, before f ran.
func (db *DB) BatchWaiting(wait time.Duration, note func(string), f func(b *DB) error) error {
	start := time.Now()
	noted := false
	for {
		ran := false
		err := db.Batch(func(b *DB) error { ran = true; return f(b) })
		if err == nil {
			// A file removed or replaced under SQLite took the batch, and
			// it is lost with it: the import did not reach the store.
			return db.checkFile()
		}
		if ran || !isBusy(err) {
			return err
		}
		if time.Since(start) >= wait {
			return &waitedError{err, time.Since(start)}
		}
		if !noted && note != nil {
			noted = true
			note(fmt.Sprintf("the results database %s has been locked by another process for %v; waiting up to %v in all for it",
				db.path, roundTime(time.Since(start)), roundTime(wait)))
		}
		time.Sleep(10 * time.Millisecond) // a lock refused at once is not spun on
	}
}

// waitedError is a write that waited for the store's lock, in all, this
// long: StoreError says so.
type waitedError struct {
	err    error
	waited time.Duration
}

func (e *waitedError) Error() string { return e.err.Error() }
func (e *waitedError) Unwrap() error { return e.err }

// timeLayout is fixed-width UTC so that text order is time order and
// SQLite's date functions accept it.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func fmtTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, s.String)
	if err != nil {
		// Accept other RFC 3339 forms someone may have typed by hand.
		if t2, err2 := time.Parse(time.RFC3339Nano, s.String); err2 == nil {
			return t2.UTC(), nil
		}
		return time.Time{}, fmt.Errorf("results: bad time %q: %w", s.String, err)
	}
	return t, nil
}

// now is the clock, truncated to what timeLayout stores so that a value
// handed back to the caller equals the one read back later.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
