// Command ggmlwitness runs decode ops on the Metal emulator twice, once with
// mtlbench's kernels and once with llama.cpp's (ggml's ggml-metal.metal,
// read from a checkout given at run time), holds both to the Go references,
// and prints the cost witness of each side by side (docs/metal-kernels.md,
// "Against llama.cpp's kernels").
//
//	go run ./tools/ggmlwitness -ggml ~/src/ggml
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: the usage is printed
		}
		fmt.Fprintln(os.Stderr, "ggmlwitness:", err)
		os.Exit(2)
	}
}

// config is what the flags ask for.
type config struct {
	ggml     string // a ggml or llama.cpp checkout, or the three files in one folder
	cache    string // the emulator's library cache ("": its default)
	gpu      string // the Apple GPU simdgroups per core are counted against
	ops      []string
	width    int   // RMSNorm's row
	n, k     int   // the GEMVs' rows and columns
	contexts []int // decode attention's context lengths
	heads    [3]int
	// mergeBarrier inserts a simdgroup_barrier before the vec attention
	// kernel's two stores over words its lanes have read (source.go,
	// lockstepReads), so contexts past maxContext and heads of 128 run
	// on the emulator as on a GPU.
	mergeBarrier bool
	// reverseLanes runs llama.cpp's kernels with each simdgroup's lanes
	// last to first (emu.Options.ReverseLanes): the two places read then
	// store, so that order runs them as lanes in lockstep do, with the
	// source as llama.cpp ships it.
	reverseLanes bool
}

// maxContext is the longest context llama.cpp's decode attention runs
// with one simdgroup a workgroup (32 workgroups of 32 keys, twice).
const maxContext = 2048

// allOps are the ops the tool compares, in the order the table lists them.
var allOps = []string{"rms_norm", "q4_0", "q8_0", "q4_k", "attention"}

func parseArgs(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("ggmlwitness", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var opList, ctxList, heads string
	fs.StringVar(&c.ggml, "ggml", "", "a ggml or llama.cpp checkout, or a folder holding ggml-metal.metal, ggml-metal-impl.h and ggml-common.h (required)")
	fs.StringVar(&c.cache, "cache", "", "the emulator's library cache (default: MTLBENCH_EMU_CACHE or the user cache)")
	fs.StringVar(&c.gpu, "gpu", "M3 Ultra", "the Apple GPU simdgroups per core are counted against (bridge/mtl/applegpu)")
	fs.StringVar(&opList, "ops", strings.Join(allOps, ","), "the ops to compare, of "+strings.Join(allOps, ", "))
	fs.IntVar(&c.width, "width", 4096, "RMSNorm's row")
	fs.IntVar(&c.n, "n", 4096, "the GEMVs' output rows")
	fs.IntVar(&c.k, "k", 4096, "the GEMVs' input columns (a multiple of 256)")
	fs.StringVar(&ctxList, "contexts", "512,2048", "decode attention's context lengths (multiples of 32, at most 2048)")
	fs.BoolVar(&c.mergeBarrier, "merge-barrier", false, "insert a simdgroup_barrier before llama.cpp's vec attention's two stores over threadgroup words its lanes have read (its merge of simdgroups, and S and M after its keys), which lets contexts past 2048 and heads of 128 run on the emulator (it changes no load or store)")
	fs.BoolVar(&c.reverseLanes, "reverse-lanes", false, "run llama.cpp's kernels with each simdgroup's lanes last to first, the order in which its vec attention's reads before its two stores run as in lockstep, which lets contexts past 2048 and heads of 128 run with its source unchanged (docs/msl-subset.md, \"Lanes in lockstep\")")
	fs.StringVar(&heads, "heads", "32/4/64", "decode attention's query heads/KV heads/head size (64, or 128 with -merge-barrier or -reverse-lanes)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if c.ggml == "" {
		return nil, errors.New("-ggml: a ggml or llama.cpp checkout is needed (git clone https://github.com/ggml-org/ggml)")
	}
	for _, o := range strings.Split(opList, ",") {
		o = strings.TrimSpace(o)
		if !slices.Contains(allOps, o) {
			return nil, fmt.Errorf("-ops: unknown op %q (want some of %s)", o, strings.Join(allOps, ", "))
		}
		c.ops = append(c.ops, o)
	}
	if c.width <= 0 || c.width%4 != 0 {
		return nil, fmt.Errorf("-width=%d: must be a positive multiple of 4", c.width)
	}
	if c.n <= 0 {
		return nil, fmt.Errorf("-n=%d: must be positive", c.n)
	}
	if c.k <= 0 || c.k%256 != 0 {
		return nil, fmt.Errorf("-k=%d: must be a positive multiple of 256 (Q4_K's block)", c.k)
	}
	for _, s := range strings.Split(ctxList, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v <= 0 || v%32 != 0 {
			return nil, fmt.Errorf("-contexts: %q is not a positive multiple of 32", s)
		}
		c.contexts = append(c.contexts, v)
	}
	// Past maxContext llama.cpp's host gives each workgroup two
	// simdgroups, whose merge reads and rewrites threadgroup words within
	// a simdgroup as if its lanes ran in lockstep; the emulator's lanes do
	// not (docs/metal-kernels.md, "Against llama.cpp's kernels").
	lockstep := c.mergeBarrier || c.reverseLanes
	if m := slices.Max(c.contexts); m > maxContext && !lockstep {
		return nil, fmt.Errorf("-contexts: %d is past %d, where llama.cpp's vec kernel runs 2 simdgroups a workgroup, whose merge the emulator's lanes first to last do not run as a GPU does (-merge-barrier or -reverse-lanes runs it)", m, maxContext)
	}
	parts := strings.Split(heads, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("-heads=%q: want query heads/KV heads/head size, e.g. 32/4/64", heads)
	}
	for i, s := range parts {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("-heads=%q: %q is not a positive count", heads, s)
		}
		c.heads[i] = v
	}
	if c.heads[0]%c.heads[1] != 0 {
		return nil, fmt.Errorf("-heads=%q: the query heads must be a multiple of the KV heads", heads)
	}
	// The encoding and the reference were held to llama.cpp's vec kernels
	// for these two head sizes (docs/metal-kernels.md).
	if d := c.heads[2]; d != 64 && d != 128 {
		return nil, fmt.Errorf("-heads=%q: head size %d (64 or 128)", heads, d)
	}
	// Heads of 128 store S and M over words their lanes have just read,
	// as lanes in lockstep may (source.go, lockstepReads).
	if c.heads[2] == 128 && !lockstep {
		return nil, fmt.Errorf("-heads=%q: heads of 128 store over threadgroup words their lanes have just read, which the emulator's lanes first to last do not run as a GPU does (-merge-barrier or -reverse-lanes runs it)", heads)
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	src, err := readGGML(c.ggml)
	if err != nil {
		return err
	}
	if c.mergeBarrier {
		if src, err = insertMergeBarrier(src); err != nil {
			return err
		}
	}
	cases := c.cases()
	ours, err := openOurs(c)
	if err != nil {
		return err
	}
	defer ours.Close()
	theirs, err := openGGML(c, src)
	if err != nil {
		return err
	}
	var rows []row
	for _, cs := range cases {
		r, err := ours.run(cs)
		if err != nil {
			return err
		}
		rows = append(rows, r)
		g, err := theirs.run(cs, r.Ideal)
		if err != nil {
			return err
		}
		rows = append(rows, g)
	}
	writeTable(stdout, rows, c.gpu)
	return nil
}
