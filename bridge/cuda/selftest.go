package cuda

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/kernels/ops"
	"github.com/mtlbench/mtlbench/runner/kbench"
)

// SelftestCase is one op and shape the selftest checks against the pure-Go
// reference (runner/kbench's checks, on the values the backend holds).
type SelftestCase struct {
	Op     string
	Params []any // name, value pairs: ints as numbers, strings as written
}

// SelftestCases cover every op of the contract: small odd shapes that take
// the kernels' tail and scalar paths, and Qwen3-30B-A3B's decode shapes,
// which take the fast paths (GEMV, gather-GEMV MoE, split-K attention,
// cuBLAS above 8 rows).
var SelftestCases = []SelftestCase{
	{"embedding", []any{"tokens", 4, "width", 48, "n", 100, "dtype", "f16"}},
	{"embedding", []any{"tokens", 16, "hidden", 2048, "n", 32000, "dtype", "bf16"}},
	{"rms_norm", []any{"tokens", 3, "width", 96}},
	{"rms_norm", []any{"tokens", 16, "width", 2048}},
	{"add_rms_norm", []any{"tokens", 3, "width", 96}},
	{"add_rms_norm", []any{"tokens", 1, "width", 2048}},
	{"rope", []any{"tokens", 3, "num_heads", 4, "num_kv_heads", 2, "head_size", 96}},
	{"rope", []any{"tokens", 16, "num_heads", 32, "num_kv_heads", 4, "head_size", 128}},
	{"silu_mul", []any{"tokens", 2, "intermediate", 100}},
	{"silu_mul", []any{"tokens", 16, "intermediate", 6144}},
	{"matmul", []any{"m", 3, "n", 17, "k", 33, "dtype", "f32"}},
	{"matmul", []any{"m", 20, "n", 8, "k", 16, "dtype", "f16"}},
	{"matmul", []any{"m", 1, "n", 2048, "k", 4096, "dtype", "bf16"}},
	{"matmul", []any{"m", 1, "n", 4096, "k", 2048, "dtype", "f16"}},
	{"matmul", []any{"m", 8, "n", 5120, "k", 2048, "dtype", "bf16"}},
	{"matmul", []any{"m", 16, "n", 4096, "k", 2048, "dtype", "bf16"}},
	{"matmul", []any{"m", 128, "n", 512, "k", 2048, "dtype", "f32"}},
	{"matmul", []any{"m", 2, "n", 151936, "k", 2048, "dtype", "bf16"}},
	{"moe", []any{"tokens", 5, "experts", 8, "top_k", 2, "hidden", 32, "intermediate", 24, "dtype", "f32", "moe_strategy", "loop"}},
	{"moe", []any{"tokens", 40, "experts", 8, "top_k", 3, "hidden", 32, "intermediate", 16, "moe_strategy", "chunked", "moe_chunk", 7}},
	{"moe", []any{"tokens", 4, "experts", 4, "top_k", 4, "hidden", 16, "intermediate", 8, "dtype", "f16"}},
	{"moe", []any{"tokens", 3, "experts", 6, "top_k", 2, "hidden", 20, "intermediate", 12, "dtype", "f32"}},
	{"moe", []any{"tokens", 1, "experts", 128, "top_k", 8, "hidden", 2048, "intermediate", 768, "dtype", "bf16"}},
	{"moe", []any{"tokens", 16, "experts", 128, "top_k", 8, "hidden", 2048, "intermediate", 768, "dtype", "bf16"}},
	{"moe", []any{"tokens", 64, "experts", 128, "top_k", 8, "hidden", 2048, "intermediate", 768, "dtype", "bf16", "moe_strategy", "chunked", "moe_chunk", 64}},
	{"argmax", []any{"tokens", 3, "width", 1000}},
	{"argmax", []any{"tokens", 16, "width", 151936}},
	{"paged_attention_decode", []any{"seqs", 3, "context", 37, "num_heads", 4, "num_kv_heads", 2, "head_size", 32, "block_size", 8}},
	{"paged_attention_decode", []any{"seqs", 2, "context", 20, "num_heads", 8, "num_kv_heads", 1, "head_size", 64, "block_size", 32}},
	{"paged_attention_decode", []any{"seqs", 1, "context", 1000, "num_heads", 32, "num_kv_heads", 4, "head_size", 128, "block_size", 16}},
	{"paged_attention_decode", []any{"seqs", 16, "context", 200, "num_heads", 32, "num_kv_heads", 4, "head_size", 128, "block_size", 16}},
	{"paged_attention_prefill", []any{"seqs", 2, "tokens", 9, "context", 13, "num_heads", 4, "num_kv_heads", 2, "head_size", 32, "block_size", 8}},
	{"paged_attention_prefill", []any{"seqs", 1, "tokens", 40, "num_heads", 4, "num_kv_heads", 2, "head_size", 96, "block_size", 16}},
	{"paged_attention_prefill", []any{"seqs", 1, "tokens", 128, "context", 300, "num_heads", 32, "num_kv_heads", 4, "head_size", 128, "block_size", 16}},
}

// Case builds the typed arguments kbench prepares.
func (c SelftestCase) Case() ops.Args {
	a := ops.Args{Op: ops.ID(c.Op), Ints: ops.Shape{}}
	for i := 0; i+1 < len(c.Params); i += 2 {
		name := ops.Param(c.Params[i].(string))
		switch v := c.Params[i+1].(type) {
		case int:
			a.Ints[name] = v
		case string:
			switch name {
			case ops.DTypeParam:
				a.DType = ops.DType(v)
			case ops.MoEStrategyParam:
				a.MoEStrategy = ops.MoEStrategy(v)
			}
		}
	}
	return a
}

// tolerance describes the bound kbench.Check applies to a case.
func (c SelftestCase) tolerance(act bridge.DType) string {
	if c.Op == "argmax" {
		return "exact"
	}
	dt := act
	for i := 0; i+1 < len(c.Params); i += 2 {
		if c.Params[i] == "dtype" {
			dt, _ = bridge.ParseDType(c.Params[i+1].(string))
		}
	}
	switch {
	case c.Op == "matmul" || c.Op == "moe" || c.Op == "embedding":
		if !hasParam(c, "dtype") {
			dt = bridge.BF16
		}
	}
	switch {
	case dt == bridge.BF16 || act == bridge.BF16:
		return "3e-2 rel"
	case dt == bridge.F16 || act == bridge.F16:
		return "5e-3 rel"
	}
	return "1e-4 rel"
}

func hasParam(c SelftestCase, name string) bool {
	for i := 0; i+1 < len(c.Params); i += 2 {
		if c.Params[i] == name {
			return true
		}
	}
	return false
}

// SelftestResult is one case's outcome.
type SelftestResult struct {
	Case      SelftestCase
	Desc      string
	MaxErr    float64
	UsPerCall float64
	Err       error
}

// RunSelftest checks every case on be: against the reference, then timed
// (which exercises graph capture and replay on a GPU), then checked again.
// It writes a table to w and returns the results; the last line of the
// table is "N passed, M failed".
func RunSelftest(be bridge.Backend, w io.Writer, cases []SelftestCase) []SelftestResult {
	info := be.Info()
	fmt.Fprintf(w, "selftest: %s backend on %s (%s)\n", info.Backend, info.Name, info.Notes)
	fmt.Fprintf(w, "every op against the pure-Go reference (kernels package); tolerance relative to max(1, max|ref|), activations %v\n\n", be.ActDType())
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tcase\tmax err\ttolerance\tus/call\tresult")
	var out []SelftestResult
	passed, failed := 0, 0
	filter := os.Getenv("MTLBENCH_SELFTEST_FILTER") // substrings of "op k=v ...", '|' separated
	for _, c := range cases {
		if filter != "" && !matches(c, filter) {
			continue
		}
		r := runCase(be, c)
		out = append(out, r)
		res := "ok"
		if r.Err != nil {
			res = "FAIL: " + r.Err.Error()
			failed++
		} else {
			passed++
		}
		us := "-"
		if r.UsPerCall > 0 {
			us = fmt.Sprintf("%.1f", r.UsPerCall)
		}
		desc := strings.TrimPrefix(r.Desc, c.Op+" ")
		fmt.Fprintf(tw, "%s\t%s\t%.2g\t%s\t%s\t%s\n", c.Op, desc, r.MaxErr, c.tolerance(be.ActDType()), us, res)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d passed, %d failed\n", passed, failed)
	return out
}

func runCase(be bridge.Backend, c SelftestCase) (r SelftestResult) {
	r.Case = c
	r.Desc = c.Op
	b, err := kbench.Prepare(be, c.Case())
	if err != nil {
		r.Err = err
		return r
	}
	defer b.Close()
	r.Desc = b.Describe()
	if r.MaxErr, r.Err = b.Check(); r.Err != nil || os.Getenv("MTLBENCH_SELFTEST_CHECK_ONLY") == "1" {
		return r
	}
	s, err := b.Run()
	if err != nil {
		r.Err = err
		return r
	}
	for _, x := range s {
		if x.Metric == "us_per_call" {
			r.UsPerCall = x.Value
		}
	}
	e2, err := b.Check()
	r.MaxErr = max(r.MaxErr, e2)
	if err != nil {
		r.Err = fmt.Errorf("after timing: %w", err)
	}
	return r
}

func matches(c SelftestCase, filter string) bool {
	s := c.Op
	for i := 0; i+1 < len(c.Params); i += 2 {
		s += fmt.Sprintf(" %v=%v", c.Params[i], c.Params[i+1])
	}
	for _, f := range strings.Split(filter, "|") {
		if f != "" && strings.Contains(s+" ", f) {
			return true
		}
	}
	return false
}

// Failed reports whether any result failed.
func Failed(rs []SelftestResult) error {
	var errs []error
	for _, r := range rs {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Desc, r.Err))
		}
	}
	return errors.Join(errs...)
}
