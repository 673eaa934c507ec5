package tidy

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchproc"

	"github.com/mtlbench/mtlbench/results"
)

// A case's benchfmt name holds every parameter of its key, at the value
// the case ran with, so benchstat pairs only cases compare pairs; groups
// whose names differ by a separator before a digit stay apart.
func TestBenchName(t *testing.T) {
	for _, c := range []struct {
		c    results.Case
		want string
	}{
		{results.Case{Name: "decode/batch=1", Key: "model/decode/batch=1/gen_len=64/prompt_len=128"},
			"Decode/batch=1/gen_len=64/prompt_len=128"},
		// the parameters the name leaves out (a serving case's requests, slo)
		{results.Case{Name: "bench/batch=2/arrival=poisson:50", Key: "model/bench/arrival=poisson:50/batch=2/requests=8/slo=ttft:1"},
			"Bench/arrival=poisson:50/batch=2/requests=8/slo=ttft:1"},
		// a run --set value: the key keeps the suite's, the params what ran
		{results.Case{Name: "moe-chunk/moe_chunk=1", Key: "model/moe-chunk/moe_chunk=64", Params: map[string]string{"moe_chunk": "1"}},
			"MoeChunk/moe_chunk=1"},
		{results.Case{Name: "norm-2", Key: "kernel/norm-2/width=8"}, "Norm_2/width=8"},
		{results.Case{Name: "norm2", Key: "kernel/norm2/width=8"}, "Norm2/width=8"},
		{results.Case{Name: "serve fast/batch=1"}, "Serve_fast/batch=1"},
		// A tune run's bucket and config are lists of pairs, kept whole:
		// its k param must not stand for the bucket, or buckets of another
		// m or n would be one benchmark.
		{results.Case{Name: "matmul bf16 k=512,m=1,n=32,threads=2 even/2t", Key: "tune/matmul/bf16/k=512,m=1,n=32,threads=2/piece=even,threads=2",
			Params: map[string]string{"k": "512", "m": "1", "param_n": "32", "threads": "2", "piece": "even"}},
			"Matmul/bf16/k=512,m=1,n=32,threads=2/piece=even,threads=2"},
	} {
		if got := BenchName(c.c); got != c.want {
			t.Errorf("BenchName(%q, key %q) = %q, want %q", c.c.Name, c.c.Key, got, c.want)
		}
	}
}

// A case's configuration lines carry what it measured beside its key (the
// model, its weight format and seed), so benchstat keeps runs of two seeds
// apart as compare does; a value the case did not record is left out.
func TestBenchConfigIdentity(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   map[string]string
	}{
		{map[string]string{"model": "qwen3_moe", "dtype": "bf16", "seed": "7"}, map[string]string{"model": "qwen3_moe", "dtype": "bf16", "seed": "7"}},
		{map[string]string{"op": "matmul"}, map[string]string{}},
	} {
		got := map[string]string{}
		for _, kv := range benchConfig(&results.Run{ID: 1}, results.Case{Params: c.params}) {
			if kv[0] == "model" || kv[0] == "dtype" || kv[0] == "seed" {
				got[kv[0]] = kv[1]
			}
		}
		if len(got) != len(c.want) || got["model"] != c.want["model"] || got["dtype"] != c.want["dtype"] || got["seed"] != c.want["seed"] {
			t.Errorf("params %v: configuration %v, want %v", c.params, got, c.want)
		}
	}
}

// benchfmt.Reader (what benchstat reads with) reads WriteBenchfmt's output
// back: every value the statistics keep, in its unit, under a name whose
// parts are the case key's parameters (so benchstat's /variant and the like
// read what compare pairs on), one name per key. Values a metric cannot take
// (a store from before the checks on storing) are left out, as show and
// compare leave them out.
func TestBenchfmtRoundTrip(t *testing.T) {
	us := func(rep int, v float64) results.Sample {
		return results.Sample{Rep: rep, Metric: "us_per_call", Value: v, Unit: "us"}
	}
	gb := func(rep int, v float64) results.Sample {
		return results.Sample{Rep: rep, Metric: "gb_s", Value: v, Unit: "GB/s"}
	}
	kcase := func(id int64, name, key string, params map[string]string, status string) results.Case {
		return results.Case{ID: id, Name: name, Key: key, Kind: results.CaseKernel, Params: params, Status: status}
	}
	for _, tc := range []struct {
		name    string
		cases   []results.Case
		samples map[int64][]results.Sample
		// want: one line per benchmark result read back, its name's parts
		// (base|part|part...) then value unit pairs
		want []string
	}{
		{"free text in parameters",
			[]results.Case{
				kcase(1, "norm/variant=tile%2F32", "kernel/norm/op=rms_norm/variant=tile%2F32/width=8", map[string]string{"op": "rms_norm", "variant": "tile/32", "width": "8"}, results.CaseDone),
				kcase(2, "norm/variant=a%20b", "kernel/norm/op=rms_norm/variant=a%20b/width=8", map[string]string{"op": "rms_norm", "variant": "a b", "width": "8"}, results.CaseDone),
				kcase(3, "norm/variant=a_b", "kernel/norm/op=rms_norm/variant=a_b/width=8", map[string]string{"op": "rms_norm", "variant": "a_b", "width": "8"}, results.CaseDone),
				// variant is a matmul key's last part: "-2" would read as GOMAXPROCS
				kcase(4, "mm/variant=v-2", "kernel/mm/k=8/m=1/n=8/op=matmul/variant=v-2", map[string]string{"k": "8", "m": "1", "n": "8", "op": "matmul", "variant": "v-2"}, results.CaseDone),
				kcase(5, "norm/variant=é", "kernel/norm/op=rms_norm/variant=é/width=8", map[string]string{"op": "rms_norm", "variant": "é", "width": "8"}, results.CaseDone),
			},
			map[int64][]results.Sample{1: {us(0, 1)}, 2: {us(0, 2)}, 3: {us(0, 3)}, 4: {us(0, 4)}, 5: {us(0, 5)}},
			[]string{
				"Norm|/op=rms_norm|/variant=tile%2F32|/width=8 1 us-per-call",
				"Norm|/op=rms_norm|/variant=a%20b|/width=8 2 us-per-call",
				"Norm|/op=rms_norm|/variant=a_b|/width=8 3 us-per-call",
				"Mm|/k=8|/m=1|/n=8|/op=matmul|/variant=v%2D2 4 us-per-call",
				"Norm|/op=rms_norm|/variant=é|/width=8 5 us-per-call",
			}},
		{"a --set value and a value the key spells one way",
			[]results.Case{
				{ID: 1, Name: "moe-chunk", Key: "model/moe-chunk/batch=4/moe_chunk=64", Kind: results.CaseModel, Params: map[string]string{"batch": "4", "moe_chunk": "1"}, Status: results.CaseDone},
				{ID: 2, Name: "serve", Key: "model/serve/arrival=poisson:4/batch=2", Kind: results.CaseModel, Params: map[string]string{"batch": "2", "arrival": "poisson:4.0"}, Status: results.CaseDone},
			},
			map[int64][]results.Sample{
				1: {{Rep: 0, Metric: "decode_tok_s", Value: 10, Unit: "tok/s"}},
				2: {{Rep: 0, Metric: "decode_tok_s", Value: 20, Unit: "tok/s"}},
			},
			[]string{
				"MoeChunk|/batch=4|/moe_chunk=1 10 decode-tok-s",
				"Serve|/arrival=poisson:4|/batch=2 20 decode-tok-s",
			}},
		{"repetitions and statuses",
			[]results.Case{
				kcase(1, "none", "kernel/none/width=1", map[string]string{"width": "1"}, results.CaseFailed),
				kcase(2, "one", "kernel/one/width=2", map[string]string{"width": "2"}, results.CaseDone),
				kcase(3, "many", "kernel/many/width=3", map[string]string{"width": "3"}, results.CaseDone),
				kcase(4, "unfinished", "kernel/unfinished/width=4", map[string]string{"width": "4"}, results.CasePending),
				kcase(5, "skipped", "kernel/skipped/width=5", map[string]string{"width": "5"}, results.CaseSkipped),
			},
			map[int64][]results.Sample{
				2: {us(0, 1.5), gb(0, 2.5)},
				3: {us(2, 3), us(0, 1), us(1, 2), gb(0, 10), gb(1, 20), gb(2, 30)},
				4: {us(0, 7)},
			},
			[]string{
				"One|/width=2 1.5 us-per-call 2.5 gb-s",
				"Many|/width=3 1 us-per-call 10 gb-s",
				"Many|/width=3 2 us-per-call 20 gb-s",
				"Many|/width=3 3 us-per-call 30 gb-s",
				"Unfinished|/width=4 7 us-per-call",
			}},
		{"very large and very small values keep every digit",
			[]results.Case{kcase(1, "x", "kernel/x/width=1", map[string]string{"width": "1"}, results.CaseDone)},
			map[int64][]results.Sample{1: {us(0, 5e-324), gb(0, 9.999999999999999e17), us(1, 1.0/3), gb(1, 0), us(2, 123456789.12345679), gb(2, 1e-300)}},
			[]string{
				"X|/width=1 5e-324 us-per-call 9.999999999999999e+17 gb-s",
				"X|/width=1 0.3333333333333333 us-per-call 0 gb-s",
				"X|/width=1 1.2345678912345679e+08 us-per-call 1e-300 gb-s",
			}},
		{"values no metric can take are left out, and a repetition of only those",
			[]results.Case{kcase(1, "x", "kernel/x/width=1", map[string]string{"width": "1"}, results.CaseDone)},
			map[int64][]results.Sample{1: {us(0, 1), gb(0, -5), us(1, math.NaN()), gb(1, math.Inf(1)), us(2, 3), gb(2, 2e18)}},
			[]string{
				"X|/width=1 1 us-per-call",
				"X|/width=1 3 us-per-call",
			}},
		{"a metric named with a space, in a store from before names were checked",
			[]results.Case{kcase(1, "x", "kernel/x/width=1", map[string]string{"width": "1"}, results.CaseDone)},
			map[int64][]results.Sample{1: {{Rep: 0, Metric: "lat ms", Value: 2, Unit: "ms"}}},
			[]string{"X|/width=1 2 lat-ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Run{Run: &results.Run{ID: 1, SuiteName: "s"}, Cases: tc.cases, Samples: tc.samples}
			var buf bytes.Buffer
			if err := WriteBenchfmt(&buf, []*Run{r}); err != nil {
				t.Fatal(err)
			}
			written := buf.String()
			rd := benchfmt.NewReader(&buf, "out.txt")
			var got []string
			for rd.Scan() {
				switch rec := rd.Result().(type) {
				case *benchfmt.SyntaxError:
					t.Errorf("benchfmt cannot read it back: %v\n%s", rec, written)
				case *benchfmt.Result:
					base, parts := rec.Name.Parts()
					line := string(base)
					for _, p := range parts {
						line += "|" + string(p)
					}
					for _, v := range rec.Values {
						if v.OrigUnit != "" && v.Unit != v.OrigUnit {
							t.Errorf("%s: benchfmt rescaled %v %s to %v %s", line, v.OrigValue, v.OrigUnit, v.Value, v.Unit)
						}
						line += " " + strconv.FormatFloat(v.Value, 'g', -1, 64) + " " + v.Unit
					}
					got = append(got, line)
				}
			}
			if err := rd.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("read back\n%s\nwant\n%s\nwritten:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"), written)
			}
		})
	}
}

// Two runs of one case, on one machine, compare under benchstat's own
// defaults (-table .config -col .file): the run, tag, build and overrides
// that tell any two runs apart are named on a line benchfmt readers pass
// over, not as configuration, which would put each run in a table of its
// own; what was measured and where (model, backend, machine) stays
// configuration, and runs that differ there stay apart.
func TestBenchfmtRunsCompareInBenchstat(t *testing.T) {
	c := results.Case{ID: 1, Name: "decode/batch=1", Key: "model/decode/batch=1", Kind: results.CaseModel,
		Params: map[string]string{"batch": "1", "model": "m", "dtype": "bf16"}, Status: results.CaseDone}
	run := func(id int64, tag, commit, version, backend string) *Run {
		m := results.Machine{OS: "darwin", Arch: "arm64", CPUModel: "Apple M3 Max", GPUName: "Apple M3 Max"}
		r := &results.Run{ID: id, SuiteName: "s", Tag: tag, GitCommit: commit, ToolVersion: version, Backend: backend, TimingMode: "throughput",
			Machine: m, Overrides: map[string]string{"fusion": tag}}
		return &Run{Run: r, Cases: []results.Case{c}, Samples: map[int64][]results.Sample{1: {{Rep: 0, Metric: "decode_tok_s", Value: float64(id), Unit: "tok/s"}}}}
	}
	for _, tc := range []struct {
		name     string
		old, new *Run
		tables   int
		oldLine  string
	}{
		{"two builds", run(3, "base", "abc123", "v1", "metal"), run(7, "pr", "def456", "v2", "metal"), 1, "# run 3: tag base, commit abc123, version v1, overrides fusion=base\n"},
		{"two backends", run(3, "base", "abc123", "v1", "metal"), run(7, "pr", "abc123", "v1", "cpu"), 2, "# run 3: tag base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pp benchproc.ProjectionParser
			table, err := pp.Parse(".config", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pp.Parse(".file", nil); err != nil {
				t.Fatal(err)
			}
			tables := map[benchproc.Key]bool{}
			for i, r := range []*Run{tc.old, tc.new} {
				var buf bytes.Buffer
				if err := WriteBenchfmt(&buf, []*Run{r}); err != nil {
					t.Fatal(err)
				}
				if i == 0 && !strings.Contains(buf.String(), tc.oldLine) {
					t.Errorf("the run is not named (%q):\n%s", tc.oldLine, buf.String())
				}
				rd := benchfmt.NewReader(&buf, []string{"old.txt", "new.txt"}[i])
				for rd.Scan() {
					if res, ok := rd.Result().(*benchfmt.Result); ok {
						tables[table.Project(res)] = true
					}
				}
				if err := rd.Err(); err != nil {
					t.Fatal(err)
				}
			}
			if len(tables) != tc.tables {
				t.Errorf("benchstat would make %d tables, want %d: %v", len(tables), tc.tables, tables)
			}
		})
	}
}

// goos and goarch say where the run ran: a run that records neither (a
// llama-bench import, whose file names only its CPU and GPU) writes
// neither, rather than those of the machine that shows it.
func TestBenchConfigMachine(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    results.Machine
		want []string // goos, goarch as written; "" for none
	}{
		{"recorded", results.Machine{OS: "darwin", Arch: "arm64", CPUModel: "Apple M3 Max"}, []string{"darwin", "arm64"}},
		{"not recorded", results.Machine{CPUModel: "Apple M3 Max", GPUName: "Apple M3 Max"}, []string{"", ""}},
	} {
		got := map[string]string{}
		for _, kv := range benchConfig(&results.Run{ID: 1, Machine: tc.m}, results.Case{}) {
			got[kv[0]] = kv[1]
		}
		if got["goos"] != tc.want[0] || got["goarch"] != tc.want[1] {
			t.Errorf("%s: goos %q, goarch %q; want %q, %q", tc.name, got["goos"], got["goarch"], tc.want[0], tc.want[1])
		}
	}
}
