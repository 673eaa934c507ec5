package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mtlbench/mtlbench/results"
)

// closingOnSignal is set once closeOnSignals has closed the store for a
// signal and is ending the process: main then leaves the exit to it, so
// the command's own error (its store closed under it) is not said.
var closingOnSignal atomic.Bool

// closeOnSignals watches, while a command that only reads the store has
// it open, for Ctrl-C, SIGTERM and a closed terminal's SIGHUP (left alone
// under nohup): killed at once, the process left SQLite's -wal and -shm
// beside the store, which its connection takes away as it closes. The
// watch begins before the store opens and ends as the command closes it;
// on a signal the store is closed, the statement in hand let end, and the
// process exits 130 (README.md, "Exit status"; docs/data.md, "Other
// commands"). opened takes what opening the store gave.
func closeOnSignals(c *cli.Context) (opened func(*results.DB, error)) {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	var store atomic.Pointer[results.DB]
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			signal.Stop(ch) // at once: a signal after the command is not caught
			close(done)
		})
	}
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch) // the next signal kills
			select {
			case <-done:
				return // the store was closed: a signal after it is not the watch's
			default:
			}
			closingOnSignal.Store(true)
			if db := store.Load(); db != nil {
				fmt.Fprintf(c.App.ErrWriter, "mtlbench: %v signal received: closing the results database %s\n", sig, db.Path())
				db.CloseWaiting(5 * time.Second)
			}
			os.Exit(130)
		case <-done:
		}
	}()
	return func(db *results.DB, err error) {
		if err != nil {
			stop()
			return
		}
		store.Store(db)
		db.OnClose(stop)
	}
}
