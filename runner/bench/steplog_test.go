package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/results"
)

// The step log has every step of every model case's warm-up and
// repetitions, in order, and nothing of kernel cases or of the repetition
// that prices profiling: per repetition a prefill step, then decode steps
// until each request has its tokens.
func TestStepLogHasEveryStep(t *testing.T) {
	for _, timing := range []string{"throughput", "profile"} {
		t.Run(timing, func(t *testing.T) {
			s := loadSuite(t, tinySuite, "%TIMING%", timing)
			var buf bytes.Buffer
			if _, err := Run(context.Background(), s, Options{DB: openDB(t), BandwidthBuffer: 16 << 20, Steps: &buf}); err != nil {
				t.Fatal(err)
			}
			got := map[string][]StepRecord{}
			var order []string
			for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
				var r StepRecord
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("line %d: %v: %s", i+1, err, line)
				}
				k := fmt.Sprintf("%s rep %d", r.Case, r.Rep)
				if len(got[k]) == 0 {
					order = append(order, k)
				}
				got[k] = append(got[k], r)
			}
			// Interleaved: each case's warm-up, then repetition by repetition.
			want := []string{"decode/batch=1 rep -1", "decode/batch=2 rep -1", "decode/batch=1 rep 0", "decode/batch=2 rep 0",
				"decode/batch=1 rep 1", "decode/batch=2 rep 1"}
			if strings.Join(order, ", ") != strings.Join(want, ", ") {
				t.Fatalf("logged %v, want %v", order, want)
			}
			for _, k := range order {
				rs := got[k]
				// gen_len 4: the prefill samples the first token, 3 decode steps the rest.
				if len(rs) != 4 {
					t.Fatalf("%s: %d steps, want 4: %+v", k, len(rs), rs)
				}
				batch := 1
				if strings.Contains(k, "batch=2") {
					batch = 2
				}
				for i, r := range rs {
					kind, tokens := "decode", batch
					if i == 0 {
						kind, tokens = "prefill", 8*batch
					}
					if r.Step != i || r.Kind != kind || r.Tokens != tokens || r.Seqs != batch || r.Ms <= 0 {
						t.Errorf("%s, step %d: %+v; want step %d, a %s step of %d tokens, %d sequences, a time", k, i, r, i, kind, tokens, batch)
					}
				}
			}
		})
	}
}

// A step log that cannot be written stops the run once the repetition in
// hand is stored, naming the log.
func TestStepLogWriteErrorKeepsTheRepetition(t *testing.T) {
	s := loadSuite(t, tinySuite)
	db := openDB(t)
	// Two warm-ups of 4 steps each are written; the first repetition's
	// first step is not.
	w := &failingWriter{ok: 8}
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: 16 << 20, Steps: w})
	if err == nil || !strings.Contains(err.Error(), "step log: disk full") {
		t.Fatalf("run with a failing step log: %v", err)
	}
	run, _ := db.GetRun(sum.RunID)
	if run.Status != results.RunFailed {
		t.Errorf("run status %q, want %q", run.Status, results.RunFailed)
	}
	for _, c := range sum.Cases {
		samples, _ := db.Samples(c.ID)
		if want := c.Name == "decode/batch=1"; hasMetric(samples, "decode_tok_s") != want {
			t.Errorf("case %s: %d samples stored; want the first repetition only for decode/batch=1", c.Name, len(samples))
		}
	}
}

// failingWriter takes ok writes, then fails.
type failingWriter struct{ ok int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok == 0 {
		return 0, errors.New("disk full")
	}
	w.ok--
	return len(p), nil
}

// A case whose rows sample records the host's draw (sample_ms), and so do
// its steps' log lines; a greedy case, whose tokens are the argmax, does
// not.
func TestSampledCasesRecordTheDraw(t *testing.T) {
	s := loadSuite(t, `name: draw
model:
  preset: qwen3-moe-mini
  layers: 1
repetitions: 1
warmup: 0
params: { batch: 1, prompt_len: 8, gen_len: 4 }
cases:
  - name: decode
    matrix:
      sampling: [greedy, "temperature:0.8,top_p:0.9"]
`)
	db := openDB(t)
	var buf bytes.Buffer
	sum, err := Run(context.Background(), s, Options{DB: db, BandwidthBuffer: 16 << 20, Steps: &buf})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sum.Cases {
		m := caseMetrics(t, db, c.ID)
		sampled := c.Params["sampling"] != "greedy"
		if d, ok := m["sample_ms"]; ok != sampled || (sampled && (d <= 0 || d > m["step_ms"])) {
			t.Errorf("case %s: sample_ms %g (recorded: %v) against step_ms %g", c.Name, d, ok, m["step_ms"])
		}
	}
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var r StepRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		if sampled := strings.Contains(r.Case, "temperature"); (r.SampleMs > 0) != sampled || r.SampleMs > r.Ms {
			t.Errorf("line %d: %s", i+1, line)
		}
	}
}
