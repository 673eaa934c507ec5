package peers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mtlbench/mtlbench/internal/jsonerr"
)

// lbRow is one llama-bench result (-o json prints an array of them, -o jsonl
// one a line); tools/llama-bench/README.md in llama.cpp lists the fields.
type lbRow struct {
	BuildCommit   string          `json:"build_commit"`
	BuildNumber   int             `json:"build_number"`
	CPUInfo       string          `json:"cpu_info"`
	GPUInfo       string          `json:"gpu_info"`
	Backends      string          `json:"backends"`
	ModelFilename string          `json:"model_filename"`
	ModelType     string          `json:"model_type"`
	ModelSize     int64           `json:"model_size"`
	ModelNParams  int64           `json:"model_n_params"`
	NBatch        int             `json:"n_batch"`
	NUbatch       int             `json:"n_ubatch"`
	NThreads      int             `json:"n_threads"`
	TypeK         string          `json:"type_k"`
	TypeV         string          `json:"type_v"`
	NGPULayers    int             `json:"n_gpu_layers"`
	FlashAttn     json.RawMessage `json:"flash_attn"` // a bool in older builds, -1/0/1 in newer
	NPrompt       *int            `json:"n_prompt"`
	NGen          *int            `json:"n_gen"`
	NDepth        int             `json:"n_depth"`
	TestTime      string          `json:"test_time"`
	AvgTs         float64         `json:"avg_ts"`
	// SamplesNs are the repetitions' times, whole nanoseconds; SamplesTs
	// the rates llama-bench derives from them, printed with six significant
	// digits (tools/llama-bench/llama-bench.cpp, json_printer).
	SamplesNs []uint64  `json:"samples_ns"`
	SamplesTs []float64 `json:"samples_ts"`

	// settings are every field of the row but the test and its figures,
	// as written: llama-bench sweeps many more than the ones read above
	// (n_cpu_moe, -ot's tensor_buft_overrides, split_mode, ...).
	settings map[string]string
	// where names the row in the file: "result 3" of -o json's array,
	// "line 3" of -o jsonl.
	where string
}

// lbResult are the fields of a row that say which test it is and what it
// measured; every other field is a setting.
var lbResult = map[string]bool{"n_prompt": true, "n_gen": true, "n_depth": true, "test_time": true,
	"avg_ns": true, "stddev_ns": true, "avg_ts": true, "stddev_ts": true, "samples_ns": true, "samples_ts": true}

// readSettings keeps the row's settings from its JSON.
func (r *lbRow) readSettings(raw []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	r.settings = map[string]string{}
	for k, v := range all {
		if !lbResult[k] {
			r.settings[k] = string(bytes.TrimSpace(v))
		}
	}
	return nil
}

// config is what makes two rows one run: the same build, model, machine and
// settings, differing only in the test (prompt, gen, depth).
func (r lbRow) config() string {
	keys := slices.Sorted(maps.Keys(r.settings))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + r.settings[k] + "\x00")
	}
	return b.String()
}

// checkSamples says why the row holds no figure to keep: llama-bench -r 0
// runs no repetition and writes empty samples beside an avg_ts of 0, and no
// test it times takes 0 ns or runs at 0 tokens a second.
func (r lbRow) checkSamples() error {
	if len(r.samples()) == 0 {
		return fmt.Errorf("samples_ns and samples_ts are empty and avg_ts %g: no repetition was timed (llama-bench -r 0); run it with -r 1 or more", r.AvgTs)
	}
	for i, ns := range r.SamplesNs {
		if ns == 0 {
			return fmt.Errorf("samples_ns[%d] is 0: llama-bench times a test at more than 0 ns", i)
		}
	}
	if len(r.SamplesNs) == 0 {
		for i, v := range r.SamplesTs {
			if !(v > 0) {
				return fmt.Errorf("samples_ts[%d] is %g: llama-bench times a test at more than 0 tokens a second", i, v)
			}
		}
	}
	return nil
}

// test is the row's test as llama-bench's table names it: pp512, tg128,
// pp512+tg128, with " @ d4096" at a depth.
func (r lbRow) test() string {
	p, g := *r.NPrompt, *r.NGen
	t := fmt.Sprintf("pp%d+tg%d", p, g)
	switch {
	case g == 0:
		t = fmt.Sprintf("pp%d", p)
	case p == 0:
		t = fmt.Sprintf("tg%d", g)
	}
	if r.NDepth > 0 {
		t += fmt.Sprintf(" @ d%d", r.NDepth)
	}
	return t
}

// samples are the row's repetitions in tokens a second: the tokens the
// test ran (n_prompt + n_gen, as llama-bench counts them) over each
// repetition's samples_ns, exact where samples_ts is rounded to six
// digits; a file without samples_ns gives its samples_ts, one without
// either its avg_ts.
func (r lbRow) samples() []float64 {
	if len(r.SamplesNs) > 0 {
		tokens := float64(*r.NPrompt + *r.NGen)
		out := make([]float64, len(r.SamplesNs))
		for i, ns := range r.SamplesNs {
			out[i] = 1e9 * tokens / float64(ns)
		}
		return out
	}
	if len(r.SamplesTs) > 0 {
		return r.SamplesTs
	}
	if r.AvgTs > 0 {
		return []float64{r.AvgTs}
	}
	return nil
}

// llamaBenchText says what to do with llama-bench's other outputs, its
// default markdown table, -o csv and -o sql, which hold its means and deviations
// but not its samples; nil for anything else.
func llamaBenchText(t []byte) error {
	head, _, _ := bytes.Cut(t, []byte("\n"))
	h := string(bytes.ToLower(head))
	switch {
	case strings.HasPrefix(h, "|") && hasCells(h, "test", "t/s"):
		return fmt.Errorf("llama-bench's markdown table (its default output) holds no samples: run it again with -o json (or -o jsonl)")
	case strings.Contains(h, "n_prompt,") && strings.Contains(h, "avg_ts"):
		return fmt.Errorf("llama-bench's -o csv: run it again with -o json (or -o jsonl), which this reads")
	case strings.HasPrefix(h, "create table if not exists llama_bench") || strings.HasPrefix(h, "insert into llama_bench"),
		// Older builds named the table test.
		(strings.HasPrefix(h, "create table if not exists test (") || strings.HasPrefix(h, "insert into test (")) &&
			bytes.Contains(t, []byte("n_prompt")) && bytes.Contains(t, []byte("avg_ts")):
		return fmt.Errorf("llama-bench's -o sql holds no samples: run it again with -o json (or -o jsonl)")
	}
	return nil
}

// hasCells reports whether a markdown table's row holds the cells named,
// however they are padded (llama-bench right-aligns some columns).
func hasCells(row string, names ...string) bool {
	var cells []string
	for _, c := range strings.Split(row, "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	for _, n := range names {
		if !slices.Contains(cells, n) {
			return false
		}
	}
	return true
}

func readLlamaBench(data []byte) ([]lbRow, error) {
	t := bytes.TrimSpace(data)
	if err := llamaBenchText(t); err != nil {
		return nil, err
	}
	if len(t) > 0 && t[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(t, &raw); err != nil {
			// llama-bench writes each result as it is timed and the closing ]
			// last: a run stopped midway (interrupted, a test that failed in
			// a build that quits on one) leaves the array open.
			var se *json.SyntaxError
			if errors.As(err, &se) && se.Offset >= int64(len(t)) {
				return nil, fmt.Errorf("line %d: the file ends inside llama-bench's -o json array, before its closing ]: the run stopped before its end; run it again (with -o jsonl each result is a whole line as it finishes)",
					1+bytes.Count(t, []byte("\n")))
			}
			return nil, fmt.Errorf("not llama-bench -o json: %w", jsonerr.Explain(err, t))
		}
		rows := make([]lbRow, len(raw))
		for i, r := range raw {
			if err := json.Unmarshal(r, &rows[i]); err != nil {
				return nil, fmt.Errorf("result %d: %w", i+1, jsonFieldError(err, r))
			}
			if err := rows[i].readSettings(r); err != nil {
				return nil, fmt.Errorf("result %d: %w", i+1, jsonerr.Explain(err, r))
			}
			rows[i].where = fmt.Sprintf("result %d", i+1)
		}
		return rows, nil
	}
	// One object over several lines (another tool's pretty-printed JSON)
	// is no -o jsonl, whose results are one a line.
	if len(t) > 0 && t[0] == '{' && bytes.IndexByte(t, '\n') >= 0 && json.Valid(t) {
		return nil, fmt.Errorf("one JSON object over several lines: not llama-bench's -o json (an array of results) or -o jsonl (a result a line)")
	}
	var rows []lbRow
	sc := bufio.NewScanner(bytes.NewReader(t))
	sc.Buffer(nil, maxPeerLine)
	line := 1
	for ; sc.Scan(); line++ {
		l := bytes.TrimSpace(sc.Bytes())
		if len(l) == 0 {
			continue
		}
		var r lbRow
		if err := json.Unmarshal(l, &r); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("line %d: %w", line, jsonFieldError(err, l))
			}
			// JSON that ends before its result does, on the file's last
			// line: llama-bench writes each result's line whole, so the
			// file was cut short mid-line (a copy that stopped).
			var se *json.SyntaxError
			if errors.As(err, &se) && se.Offset >= int64(len(l)) && !sc.Scan() && sc.Err() == nil {
				return nil, fmt.Errorf("line %d: the line ends (after %d bytes) before its result does: llama-bench writes each result's line whole, so the file was cut short mid-line; copy the whole file, or run llama-bench again", line, len(l))
			}
			return nil, fmt.Errorf("line %d: not llama-bench -o jsonl: %w", line, jsonerr.ExplainLine(err, l))
		}
		if err := r.readSettings(l); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, jsonerr.ExplainLine(err, l))
		}
		r.where = fmt.Sprintf("line %d", line)
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, scanError(line, err, "llama-bench")
	}
	return rows, nil
}

// parseLlamaBench maps llama-bench's tests onto bench cases. llama-bench
// times prompt processing (pp P: n_prompt P, n_gen 0) and generation
// (tg N: n_gen N, n_prompt 0) apart, at a depth of d tokens already in the
// cache; an mtlbench case prompt_len P, gen_len N, batch 1 measures both,
// decoding after its P-token prompt. So the case gets its prefill_tok_s
// from pp P at depth 0 and its decode_tok_s from tg N at depth P (the same
// context as mtlbench's decode), else from tg N at depth 0, recorded in
// the case's peer_decode_depth. A combined test (pg: both set) is kept as
// prompt_gen_tok_s.
func parseLlamaBench(data []byte, o Options) ([]*Run, error) {
	rows, err := readLlamaBench(data)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no results")
	}
	var order []string
	groups := map[string][]lbRow{}
	for _, r := range rows {
		if r.NPrompt == nil || r.NGen == nil {
			return nil, fmt.Errorf("%s has no n_prompt or n_gen: not llama-bench output", r.where)
		}
		if *r.NPrompt < 0 || *r.NGen < 0 || r.NDepth < 0 {
			return nil, fmt.Errorf("%s: n_prompt %d, n_gen %d, n_depth %d: token counts cannot be negative", r.where, *r.NPrompt, *r.NGen, r.NDepth)
		}
		if *r.NPrompt == 0 && *r.NGen == 0 {
			return nil, fmt.Errorf("%s: n_prompt and n_gen are both 0: a test of no tokens, which llama-bench does not run", r.where)
		}
		// -embd 1 makes every token of the test an output, an embedding
		// (llama.cpp's src/llama-context.cpp, output_all): neither
		// mtlbench's prefill (the last token's logits) nor its decode.
		if r.settings["embeddings"] == "true" {
			return nil, fmt.Errorf("%s (%s): embeddings is true (llama-bench -embd 1): the test timed the model computing an embedding for every token, not a generation nor a prompt for one, which every mtlbench case measures; it cannot be imported: run llama-bench with -embd 0 (its default) to compare",
				r.where, r.test())
		}
		if err := r.checkSamples(); err != nil {
			return nil, fmt.Errorf("%s (%s): %w", r.where, r.test(), err)
		}
		k := r.config()
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	// --model names one model: given to the runs of several (llama-bench
	// -m a.gguf -m b.gguf), it would have compare pool them.
	if o.Model != "" {
		var models []string
		for _, r := range rows {
			if m := r.ModelFilename + " (" + r.ModelType + ")"; !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
		if len(models) > 1 {
			return nil, fmt.Errorf("--model %s names one model, but the file holds %d: %s; import each model's results from a file of its own (llama-bench -m with one model), each with its --model",
				o.Model, len(models), strings.Join(models, ", "))
		}
	}
	// The settings the runs differ in name each run: its cases carry them
	// as peer_<field> and its notes list them.
	var differ []string
	if len(order) > 1 {
		first := groups[order[0]][0].settings
		keys := map[string]bool{}
		for _, k := range order {
			for f := range groups[k][0].settings {
				keys[f] = true
			}
		}
		for f := range keys {
			for _, k := range order[1:] {
				if v, ok := groups[k][0].settings[f]; !ok || v != first[f] {
					differ = append(differ, f)
					break
				}
			}
			if _, ok := first[f]; !ok && !slices.Contains(differ, f) {
				differ = append(differ, f)
			}
		}
		slices.Sort(differ)
	}
	lacks := unrunTests(rows, groups, order)
	var runs []*Run
	for _, k := range order {
		run := llamaBenchRun(groups[k], o)
		if len(lacks[k]) > 0 {
			run.Warnings = append(run.Warnings, fmt.Sprintf("the results with the settings of %s lack %s, a test and depth the file's other results ran (the file ends at %s): llama-bench runs every test at every setting, so the run stopped midway (interrupted, or a test that failed), the file was cut short at a line's end (-o jsonl writes no closing line), or it joins runs of other tests; run llama-bench again for them",
				groups[k][0].where, strings.Join(lacks[k], ", "), rows[len(rows)-1].where))
		}
		if len(differ) > 0 {
			var notes []string
			for _, f := range differ {
				v := strings.Trim(groups[k][0].settings[f], `"`)
				notes = append(notes, f+" "+v)
				for i := range run.Cases {
					run.Cases[i].Params["peer_"+f] = v
				}
			}
			run.Notes += "; differs from the file's other runs in " + strings.Join(notes, ", ")
		}
		runs = append(runs, run)
	}
	return runs, nil
}

type pd struct{ n, depth int }

// unrunTests names, by config, the tests the file ran at other settings
// and not at that config's. llama-bench runs each test (pp, tg and pg
// sizes) at each depth and at each setting of its lists
// (get_cmd_params_instances), writing each as it ends; a failed test is
// skipped, and -o jsonl has no end to miss, so a run stopped or a file cut
// at a line's end is told only by the grid it leaves unfinished.
func unrunTests(rows []lbRow, groups map[string][]lbRow, order []string) map[string][]string {
	type pgd struct{ p, g, d int }
	var tests []pgd // each (prompt, gen) at each depth, in the file's order
	var sizes [][2]int
	var depths []int
	for _, r := range rows {
		if s := [2]int{*r.NPrompt, *r.NGen}; !slices.Contains(sizes, s) {
			sizes = append(sizes, s)
		}
		if !slices.Contains(depths, r.NDepth) {
			depths = append(depths, r.NDepth)
		}
	}
	for _, d := range depths {
		for _, s := range sizes {
			tests = append(tests, pgd{s[0], s[1], d})
		}
	}
	out := map[string][]string{}
	for _, k := range order {
		ran := map[pgd]bool{}
		for _, r := range groups[k] {
			ran[pgd{*r.NPrompt, *r.NGen, r.NDepth}] = true
		}
		for _, t := range tests {
			if !ran[t] {
				p, g := t.p, t.g
				out[k] = append(out[k], lbRow{NPrompt: &p, NGen: &g, NDepth: t.d}.test())
			}
		}
	}
	return out
}

func llamaBenchRun(rows []lbRow, o Options) *Run {
	first := rows[0]
	run := &Run{Tool: "llama.cpp", ToolVersion: fmt.Sprintf("build %d (%s)", first.BuildNumber, first.BuildCommit),
		Backend: first.backend(), TimingMode: "throughput"}
	run.Machine.CPUModel, run.Machine.GPUName = first.CPUInfo, first.GPUInfo
	run.HasMachine = first.CPUInfo != "" || first.GPUInfo != ""
	if t, err := time.Parse(time.RFC3339, first.TestTime); err == nil {
		run.StartedAt = t
	} else if first.TestTime != "" {
		run.Warnings = append(run.Warnings, fmt.Sprintf("test_time %q is not an RFC 3339 time as llama-bench writes it: the run is dated by the file's modification time (from standard input, by the import)", first.TestTime))
	}
	// llama-bench escapes a byte above 0x7f where char is signed (Apple
	// arm64) as \u%04x of a negative int cut to 7 characters, "\ufffff":
	// the text is lost, and two names that differ there read the same.
	for _, f := range []struct{ name, v string }{{"model_filename", first.ModelFilename}, {"cpu_info", first.CPUInfo}, {"gpu_info", first.GPUInfo}} {
		if strings.ContainsRune(f.v, '\uffff') {
			run.Warnings = append(run.Warnings, fmt.Sprintf("%s %q: llama-bench wrote its non-ASCII characters as \\ufffff (its JSON escape of a signed char), which keeps nothing of them; it is kept as written", f.name, f.v))
		}
	}
	labels := map[string]string{
		"model": o.modelName(first.ModelType), "dtype": quantOf(first.ModelType),
		"peer_model_file": first.ModelFilename,
	}
	// The settings the file writes, each as a label and in the notes; an
	// older build writes fewer (no n_ubatch before 2024, f16_kv before
	// type_k and type_v), and a field it lacks is no setting of 0.
	notes := []string{fmt.Sprintf("llama-bench: %s (%s)", first.ModelFilename, first.ModelType)}
	for _, f := range []struct{ field, label, note, value string }{
		{"n_batch", "peer_n_batch", "n_batch", strconv.Itoa(first.NBatch)},
		{"n_ubatch", "peer_n_ubatch", "n_ubatch", strconv.Itoa(first.NUbatch)},
		{"n_threads", "peer_threads", "threads", strconv.Itoa(first.NThreads)},
		{"n_gpu_layers", "peer_n_gpu_layers", "ngl", strconv.Itoa(first.NGPULayers)},
		{"type_k", "peer_type_k", "K", first.TypeK},
		{"type_v", "peer_type_v", "V", first.TypeV},
	} {
		if _, ok := first.settings[f.field]; ok {
			labels[f.label] = f.value
			notes = append(notes, f.note+" "+f.value)
		}
	}
	run.Notes = strings.Join(notes, ", ")
	pp := map[pd][]float64{}
	tg := map[pd][]float64{}
	var ppKeys, tgKeys []pd
	var pgRows []lbRow
	for _, r := range rows {
		p, g := *r.NPrompt, *r.NGen
		switch {
		case p > 0 && g > 0:
			pgRows = append(pgRows, r)
		case p > 0:
			k := pd{p, r.NDepth}
			if _, ok := pp[k]; !ok {
				ppKeys = append(ppKeys, k)
			}
			pp[k] = append(pp[k], r.samples()...)
		case g > 0:
			k := pd{g, r.NDepth}
			if _, ok := tg[k]; !ok {
				tgKeys = append(tgKeys, k)
			}
			tg[k] = append(tg[k], r.samples()...)
		}
	}
	usedTG := map[pd]bool{}
	addCase := func(prompt, gen int, extra map[string]string) *Case {
		l := map[string]string{}
		for k, v := range labels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		run.Cases = append(run.Cases, newCase(1, prompt, gen, l))
		return &run.Cases[len(run.Cases)-1]
	}
	var gensRun []int // the generation lengths tested, in file order
	for _, g := range tgKeys {
		if !slices.Contains(gensRun, g.n) {
			gensRun = append(gensRun, g.n)
		}
	}
	for _, p := range ppKeys {
		if p.depth != 0 {
			// A prompt after depth tokens: mtlbench's case at that depth
			// (bench -d), for each generation length tested, decoding
			// after depth + prompt tokens where llama-bench timed that.
			gens := gensRun
			if len(gens) == 0 {
				gens = []int{0} // prompts alone: a case of no decode
			}
			for _, n := range gens {
				extra := map[string]string{"depth": strconv.Itoa(p.depth)}
				at := pd{n, p.depth + p.n}
				_, timed := tg[at]
				if timed {
					extra["peer_decode_depth"] = strconv.Itoa(at.depth)
					usedTG[at] = true
				}
				c := addCase(p.n, n, extra)
				for i, v := range pp[p] {
					c.add(i, "prefill_tok_s", v, "tok/s")
				}
				if timed {
					for i, v := range tg[at] {
						c.add(i, "decode_tok_s", v, "tok/s")
					}
				}
			}
			continue
		}
		gens := 0
		for _, g := range tgKeys {
			if g.depth != 0 && g.depth != p.n {
				continue
			}
			// Prefer the decode at this prompt's depth; depth 0 only where
			// there is none.
			at := pd{g.n, p.n}
			if g.depth == 0 {
				if _, ok := tg[at]; ok {
					continue
				}
				at = g
			}
			gens++
			usedTG[at] = true
			c := addCase(p.n, g.n, map[string]string{"peer_decode_depth": strconv.Itoa(at.depth)})
			for i, v := range pp[p] {
				c.add(i, "prefill_tok_s", v, "tok/s")
			}
			for i, v := range tg[at] {
				c.add(i, "decode_tok_s", v, "tok/s")
			}
		}
		if gens == 0 {
			c := addCase(p.n, 0, nil)
			for i, v := range pp[p] {
				c.add(i, "prefill_tok_s", v, "tok/s")
			}
		}
	}
	for _, g := range tgKeys {
		if usedTG[g] {
			continue
		}
		// Decode after g.depth tokens: mtlbench's decode after a prompt of
		// that length.
		c := addCase(g.depth, g.n, map[string]string{"peer_decode_depth": strconv.Itoa(g.depth)})
		for i, v := range tg[g] {
			c.add(i, "decode_tok_s", v, "tok/s")
		}
	}
	for _, r := range pgRows {
		extra := map[string]string{}
		if r.NDepth > 0 {
			extra["depth"] = strconv.Itoa(r.NDepth)
		}
		c := addCase(*r.NPrompt, *r.NGen, extra)
		for i, v := range r.samples() {
			c.add(i, "prompt_gen_tok_s", v, "tok/s")
		}
	}
	mergeSameKey(run)
	return run
}

// mergeSameKey folds cases that ended up with one key (a pg test beside a
// pp+tg pair of the same sizes) into one.
func mergeSameKey(run *Run) {
	idx := map[string]int{}
	var out []Case
	for _, c := range run.Cases {
		if i, ok := idx[c.Key]; ok {
			// Repetitions continue after the ones already there, per metric.
			next := map[string]int{}
			for _, s := range out[i].Samples {
				next[s.Metric] = max(next[s.Metric], s.Rep+1)
			}
			for _, s := range c.Samples {
				s.Rep += next[s.Metric]
				out[i].Samples = append(out[i].Samples, s)
			}
			continue
		}
		idx[c.Key] = len(out)
		out = append(out, c)
	}
	run.Cases = out
}

// quantOf is the weight type in llama.cpp's model type ("qwen2 7B Q4_K -
// Medium" -> "Q4_K - Medium"): what follows the size, the first word that
// starts with a digit, or "?B" for a size llama.cpp does not name; the
// model type itself when there is none.
func quantOf(modelType string) string {
	f := strings.Fields(modelType)
	for i, w := range f {
		if (w[0] >= '0' && w[0] <= '9' || w[0] == '?') && i+1 < len(f) {
			rest := f[i+1:]
			if rest[0] == "mostly" && len(rest) > 1 {
				rest = rest[1:]
			}
			return dtypeName(strings.Join(rest, " "))
		}
	}
	return modelType
}

// dtypeName spells llama.cpp's file type as mtlbench records a dtype, so
// the two sides' cases say the same: BF16 as bf16, "Q4_K - Medium" as
// q4_k_m (llama-quantize's name for it).
func dtypeName(t string) string {
	t = strings.ToLower(t)
	for long, short := range map[string]string{" - small": "_s", " - medium": "_m", " - large": "_l"} {
		t = strings.ReplaceAll(t, long, short)
	}
	return t
}

// lbOldBackends are the flags llama-bench wrote, one a backend it was built
// with, before its backends field, in the order its get_backend chose one.
var lbOldBackends = []struct{ field, name string }{{"cuda", "CUDA"}, {"vulkan", "Vulkan"}, {"kompute", "Kompute"},
	{"metal", "Metal"}, {"sycl", "SYCL"}, {"opencl", "OpenCL"}, {"gpu_blas", "GPU BLAS"}, {"blas", "BLAS"}}

// backendList is the row's backends as llama-bench lists them; from a build
// older than its backends field (2023-24: "metal": true, ...), the flags set.
func (r lbRow) backendList() string {
	if r.Backends != "" {
		return r.Backends
	}
	var list []string
	for _, b := range lbOldBackends {
		if r.settings[b.field] == "true" {
			list = append(list, b.name)
		}
	}
	return strings.Join(list, ",")
}

// backend is the backend that ran the model's layers, in mtlbench's words.
// llama-bench lists every backend it was built with ("Metal,BLAS"); the
// GPU one ran the layers it was given, n_gpu_layers of them (-1: all) on
// the devices named (tools/llama-bench/llama-bench.cpp, test::get_values).
// With none given (-ngl 0, or -dev none) the layers ran on the CPU,
// whatever the build lists.
func (r lbRow) backend() string {
	_, ngl := r.settings["n_gpu_layers"]
	if ngl && r.NGPULayers == 0 || r.settings["devices"] == `"none"` {
		return "cpu"
	}
	return llamaBackend(r.backendList())
}

// llamaBackend is the backend of a build's list that runs the layers
// offloaded: the GPU one, else the first listed, else the CPU.
func llamaBackend(list string) string {
	parts := strings.Split(strings.ToLower(list), ",")
	for _, p := range parts {
		switch p = strings.TrimSpace(p); p {
		case "metal", "cuda", "vulkan", "rocm", "sycl":
			return p
		}
	}
	if strings.TrimSpace(parts[0]) == "" {
		return "cpu"
	}
	return strings.TrimSpace(parts[0])
}
