package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuilder is a strings.Builder that stopOnSignals's goroutine and
// the test may use at once.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A signal is answered before the command's context ends: a command that
// stops at once, as a run between steps does, still says why. Said by a
// goroutine once the context had ended, the answer came after the run's
// last line or, the process having exited, never (TestClosedTerminalStopsARun
// under load). Ending the context without a signal says nothing.
func TestSignalAnsweredBeforeTheStop(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGINT, "mtlbench: interrupt signal received: stopping once the step in hand ends"},
		{syscall.SIGTERM, "mtlbench: terminated signal received: stopping once the step in hand ends"},
		{syscall.SIGHUP, "mtlbench: hangup signal received: stopping once the step in hand ends"},
		{0, ""}, // the command ends on its own
	} {
		if tc.sig == syscall.SIGHUP && signal.Ignored(syscall.SIGHUP) {
			continue // under nohup stopOnSignals leaves SIGHUP alone
		}
		var w lockedBuilder
		ctx, stop := stopOnSignals(context.Background(), &w)
		if tc.sig == 0 {
			stop()
		} else if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatalf("%v: the context did not end", tc.sig)
		}
		got := w.String()
		if tc.want == "" && got != "" || tc.want != "" && (strings.Count(got, tc.want) != 1 || !strings.HasSuffix(got, "\n")) {
			t.Errorf("%v: said %q as the context ended, want %q once", tc.sig, got, tc.want)
		}
		stop()
	}
}
