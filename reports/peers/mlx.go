package peers

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// mlx_lm.benchmark prints (mlx_lm/benchmark.py):
//
//	Timing with prompt_tokens=512, generation_tokens=1024, batch_size=1.
//	(0.27: Timing with prompt_tokens=512 and generation_tokens=1024.)
//	Trial 1:  prompt_tps=1234.567, generation_tps=45.678, peak_memory=12.345
//	...
//	Averages: prompt_tps=..., generation_tps=..., peak_memory=...
//
// prompt_tps is prefill tok/s, generation_tps decode tok/s (over the whole
// batch), peak_memory GB of Metal memory. Several runs may be concatenated
// in one file; each "Timing with" line starts a case.
var (
	// mlx-lm 0.27 ran one sequence and printed "Timing with
	// prompt_tokens=512 and generation_tokens=1024."; batch_size came in 0.28.
	mlxTiming = regexp.MustCompile(`Timing with prompt_tokens=(\d+)(?:,| and) generation_tokens=(\d+)(?:, batch_size=(\d+))?`)
	mlxTrial  = regexp.MustCompile(`^Trial (\d+):\s+(.*)$`)
	mlxKV     = regexp.MustCompile(`(\w+)=([-+0-9.eE]+|nan|inf)`)
)

func parseMLX(data []byte, o Options) ([]*Run, error) {
	run := &Run{Tool: "mlx_lm.benchmark", Backend: "mlx"}
	var cur *Case
	var caseLine int
	var caseLines []int      // each case's "Timing with" line
	seen := map[string]int{} // the current case's figures: the line of each trial's metric
	// mlx_lm.benchmark prints whole lines, and "Averages:" once a case's
	// trials end: a case without it stopped, or the file was cut, before
	// its end; a last line without its line end was cut mid-line.
	var unended []int // "Timing with" lines of cases with no Averages line
	ended := true
	trialLine := 0 // the line of the latest trial
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxPeerLine)
	line := 1
	for ; sc.Scan(); line++ {
		text := sc.Text()
		if m := mlxTiming.FindStringSubmatch(text); m != nil {
			p, _ := strconv.Atoi(m[1])
			g, _ := strconv.Atoi(m[2])
			b := 1
			if m[3] != "" {
				b, _ = strconv.Atoi(m[3])
			}
			run.Cases = append(run.Cases, newCase(b, p, g, map[string]string{"model": o.modelName("")}))
			if !ended {
				unended = append(unended, caseLine)
			}
			cur, caseLine, ended = &run.Cases[len(run.Cases)-1], line, false
			caseLines = append(caseLines, line)
			clear(seen)
			continue
		}
		if strings.HasPrefix(text, "Averages:") {
			ended = true
			continue
		}
		m := mlxTrial.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: a trial before any \"Timing with\" line", line)
		}
		trialLine = line
		rep, err := strconv.Atoi(m[1])
		if err != nil || rep < 1 || rep > maxPeerReps {
			return nil, fmt.Errorf("line %d: Trial %s (trials count from 1 to %d)", line, m[1], maxPeerReps)
		}
		// Each field whole: "prompt_tps=1,234.5" or "45.6x" is no figure to
		// read the first digits of.
		for _, field := range strings.Split(m[2], ",") {
			if strings.TrimSpace(field) == "" {
				continue
			}
			k, val, ok := strings.Cut(strings.TrimSpace(field), "=")
			kv := mlxKV.FindStringSubmatch(k + "=" + val)
			if !ok || kv == nil || kv[0] != k+"="+val {
				return nil, fmt.Errorf("line %d: %q is not key=number (mlx_lm.benchmark prints prompt_tps=1234.567, generation_tps=..., peak_memory=...)", line, strings.TrimSpace(field))
			}
			v, err := strconv.ParseFloat(kv[2], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %s=%s is not a number", line, kv[1], kv[2])
			}
			key := fmt.Sprintf("%d %s", rep, kv[1])
			if at, dup := seen[key]; dup {
				return nil, fmt.Errorf("line %d: Trial %d's %s again (line %d has it) in the case of line %d", line, rep, kv[1], at, caseLine)
			}
			seen[key] = line
			switch kv[1] {
			case "prompt_tps":
				cur.add(rep-1, "prefill_tok_s", v, "tok/s")
			case "generation_tps":
				cur.add(rep-1, "decode_tok_s", v, "tok/s")
			case "peak_memory":
				cur.add(rep-1, "peak_memory_bytes", v*1e9, "B")
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, scanError(line, err, run.Tool)
	}
	if trialLine == line-1 && len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("line %d, the last, has no line end: mlx_lm.benchmark prints whole lines, so the file was cut short mid-line and the trial's last figure may be cut too; copy the whole file, or run it again", trialLine)
	}
	if !ended {
		unended = append(unended, caseLine)
	}
	for _, at := range unended {
		run.Warnings = append(run.Warnings, fmt.Sprintf("the case of line %d has no \"Averages:\" line, which mlx_lm.benchmark prints once its trials end: the benchmark stopped, or the file was cut, before the case ended; its trials read are kept", at))
	}
	for i, c := range run.Cases {
		if len(c.Samples) == 0 {
			return nil, fmt.Errorf("line %d: case %s has no trials", caseLines[i], c.Name)
		}
	}
	mergeSameKey(run)
	return []*Run{run}, nil
}
