//go:build unix

package metal

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/bridge/quanttest"
	"github.com/mtlbench/mtlbench/kernels"
	"github.com/mtlbench/mtlbench/kernels/quant"
)

// Weights in mmap'd memory are aliased, not copied, also when they start
// mid-page, as long as they are 16-byte aligned (the kernels' widest load);
// unaligned ones and heap memory through Weight are copied.
func TestWeightMappedAliases(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	be, err := New(emu.New(emu.Options{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i)
	}
	for _, c := range []struct {
		off   int
		alias bool
	}{{112, true}, {100, false}, {page, true}} {
		data := mem[c.off : c.off+4*1000] // 1000 f32, crossing a page
		w, err := be.WeightMapped(bridge.F32, []int{1000}, data)
		if err != nil {
			t.Fatal(err)
		}
		got := w.(*tensor).contents()
		if aliased := unsafe.SliceData(got) == unsafe.SliceData(data); aliased != c.alias || string(got) != string(data) {
			t.Errorf("offset %d: aliased %v, want %v (equal contents: %v)", c.off, aliased, c.alias, string(got) == string(data))
		}
	}
	data := mem[100 : 100+4*1000]
	c, err := be.Weight(bridge.F32, []int{1000}, data)
	if err != nil {
		t.Fatal(err)
	}
	if cc := c.(*tensor).contents(); unsafe.SliceData(cc) == unsafe.SliceData(data) || string(cc) != string(data) {
		t.Fatal("Weight did not make an equal copy")
	}
}

// A MoE layer's packed experts stacked in mapped memory, as mlx-lm's
// switch_mlp and GGUF's ffn_*_exps tensors lie in their files, are read in
// place: the expert kernels' regions alias the mapping and nothing is
// counted against the working set for them. Experts mapped apart from each
// other are gathered into a buffer of the backend's and their mapped bytes
// handed to the loader's drop (bridge.CopyDropper); experts from the heap
// are gathered too. All three give the reference's output.
func TestStackedExpertsAliased(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	const E, K, H, I = 4, 2, 128, 256
	spec := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	sizes := func(rows, k int) (int, int) {
		return rows * spec.RowBytes(k), rows * spec.Groups(k) * spec.Scale.Size()
	}
	gd, gs := sizes(E*I, H)
	dd, ds := sizes(E*H, I)
	page := os.Getpagesize()
	total := 2*(gd+2*gs) + dd + 2*ds + 9*16 // gate, up and down: values, scales and biases, each 16-byte aligned
	mem, err := unix.Mmap(-1, 0, (total+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	off := 0
	take := func(n int) []byte {
		b := mem[off : off+n : off+n]
		off = (off + n + 15) &^ 15
		return b
	}
	r := rand.New(rand.NewPCG(1, 2))
	gate := quant.Random(spec, E*I, H, 0.1, r, take(gd), take(gs), take(gs))
	up := quant.Random(spec, E*I, H, 0.1, r, take(gd), take(gs), take(gs))
	down := quant.Random(spec, E*H, I, 0.05, r, take(dd), take(ds), take(ds))
	router := make([]float32, E*H)
	x := make([]float32, H)
	for i := range router {
		router[i] = float32(r.NormFloat64()) * 0.5
	}
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	want := make([]float32, H)
	quant.MoE(want, x, nil, router, quant.Experts{Gate: gate, Up: up, Down: down, Count: E}, K, true, H, I)

	// apart holds each expert's parts copied one by one, 16 bytes between
	// them, so no matrix's experts lie at a fixed stride.
	apart, err := unix.Mmap(-1, 0, (total+E*9*32+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(apart)
	aoff := 0
	spread := func(b []byte) []byte {
		c := apart[aoff : aoff+len(b) : aoff+len(b)]
		copy(c, b)
		aoff = (aoff + len(b) + 16 + 15) &^ 15
		return c
	}
	for _, layout := range []string{"stacked", "apart", "heap"} {
		be, err := New(emu.New(emu.Options{}), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer be.Close()
		// The loader's drop counts what lies in the mappings, as a
		// checkpoint's gives back only its files' pages.
		var dropped int
		be.DropCopied(func(b []byte) {
			if inside(b, apart) || inside(b, mem) {
				dropped += len(b)
			}
		})
		upload := func(m *quant.Matrix) bridge.Tensor {
			var q bridge.Tensor
			var err error
			switch layout {
			case "stacked":
				q, err = be.QuantWeightMapped(m.Spec, []int{m.Rows, m.K}, m.Data, m.Scales, m.Biases)
			case "apart":
				q, err = be.QuantWeightMapped(m.Spec, []int{m.Rows, m.K}, spread(m.Data), spread(m.Scales), spread(m.Biases))
			default:
				q, err = be.QuantWeight(m.Spec, []int{m.Rows, m.K}, slices.Clone(m.Data), slices.Clone(m.Scales), slices.Clone(m.Biases))
			}
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		rt, err := be.Weight(bridge.F32, []int{E, H}, quanttest.F32Bytes(router))
		if err != nil {
			t.Fatal(err)
		}
		w := &bridge.MoEWeights{Router: rt, TopK: K, NormTopK: true, Hidden: H, Inter: I}
		for e := 0; e < E; e++ {
			w.Gate = append(w.Gate, upload(gate.Expert(e, E)))
			w.Up = append(w.Up, upload(up.Expert(e, E)))
			w.Down = append(w.Down, upload(down.Expert(e, E)))
		}
		got := runMoE(t, be, w, x, 1, H, true)
		e := quanttest.RelErr(got, want)
		info := be.Info()
		used := info.MemoryBytes - info.AvailableBytes
		t.Logf("%s: relative error %.2g, %d bytes of the working set in use, %d handed back", layout, e, used, dropped)
		if e > 1e-5 {
			t.Errorf("%s: relative error %.3g", layout, e)
		}
		inPlace := layout == "stacked"
		pk := be.qpacked[w.Gate[0].(*qtensor)]
		all := 0
		for i, m := range []*quant.Matrix{gate, up, down} {
			for _, part := range []struct {
				v    view
				want []byte
			}{{pk.data[i], m.Data}, {pk.scales[i], m.Scales}, {pk.biases[i], m.Biases}} {
				got := part.v.buf.Contents()[part.v.off : part.v.off+part.v.size]
				if aliased := unsafe.SliceData(got) == unsafe.SliceData(part.want); aliased != inPlace || string(got) != string(part.want) {
					t.Errorf("%s, matrix %d: aliased %v (equal bytes: %v)", layout, i, aliased, string(got) == string(part.want))
				}
				all += len(part.want)
			}
		}
		if experts := int64(len(gate.Data) + len(up.Data) + len(down.Data)); inPlace && used >= experts || !inPlace && used < experts {
			t.Errorf("%s: %d bytes of the working set in use, the experts' values are %d", layout, used, experts)
		}
		want := 0
		if layout == "apart" {
			want = all
		}
		if dropped != want {
			t.Errorf("%s: %d bytes handed back to the loader, want %d", layout, dropped, want)
		}
		freeExperts(t, be, w, int64(len(gate.Data)+len(up.Data)+len(down.Data)))
	}
}

// freeExperts frees w's experts and holds the backend to giving back the
// region they were laid out in: less than a quarter of their bytes stays
// in use. Before, a gathered region stayed until the backend closed, and
// packed matrices were never freed.
func freeExperts(t *testing.T, be *Backend, w *bridge.MoEWeights, bytes int64) {
	t.Helper()
	for _, ts := range [][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		for _, x := range ts {
			be.Free(x)
		}
	}
	be.Trim()
	info := be.Info()
	if used := info.MemoryBytes - info.AvailableBytes; used >= bytes/4 {
		t.Errorf("%d bytes in use once the experts (%d bytes) are freed", used, bytes)
	}
}

// inside reports whether b lies within region.
func inside(b, region []byte) bool {
	p, r := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(region)))
	return p >= r && p+uintptr(len(b)) <= r+uintptr(len(region))
}

// A MoE layer's float experts that lie in mapped memory in a layout the
// kernels read (layoutOf: each expert's matrices side by side, or each
// matrix's experts stacked, the stacks in any order: a weight source's, a
// GGUF file's) are read in place; experts mapped apart from each other, or on the heap, are
// gathered into a buffer of the backend's, and mapped bytes so copied are
// handed to the loader's drop. Every layout gives the reference's output,
// with prefill's tiles (four tokens) and decode's (one).
func TestFloatExpertsInPlace(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	const E, K, H, I = 4, 2, 64, 96
	const ih = H * I
	r := rand.New(rand.NewPCG(3, 4))
	experts := make([]kernels.Expert, E)
	for e := range experts {
		for _, m := range []*[]float32{&experts[e].Gate, &experts[e].Up, &experts[e].Down} {
			*m = make([]float32, ih)
			for i := range *m {
				(*m)[i] = float32(r.NormFloat64()) * 0.1
			}
		}
	}
	router := make([]float32, E*H)
	for i := range router {
		router[i] = float32(r.NormFloat64()) * 0.5
	}
	page := os.Getpagesize()
	size := (3*E*ih*4 + E*3*64 + page - 1) / page * page
	for _, c := range []struct {
		layout  string
		at      func(e, i int) int // byte offset of expert e's matrix i in the mapping; -1: on the heap
		inPlace bool
	}{
		{"per expert", func(e, i int) int { return (e*3 + i) * ih * 4 }, true},
		{"per matrix", func(e, i int) int { return (i*E + e) * ih * 4 }, true},
		{"per matrix, down first", func(e, i int) int { return ((i+1)%3*E + e) * ih * 4 }, true},
		{"per expert, up first", func(e, i int) int { return (e*3 + (i+2)%3) * ih * 4 }, true},
		{"apart", func(e, i int) int { return (e*3 + i) * (ih*4 + 64) }, false},
		{"heap", func(e, i int) int { return -1 }, false},
	} {
		for _, tokens := range []int{1, 4} {
			mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Munmap(mem)
			be, err := New(emu.New(emu.Options{}), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			var dropped int
			be.DropCopied(func(b []byte) {
				if inside(b, mem) {
					dropped += len(b)
				}
			})
			w := &bridge.MoEWeights{TopK: K, NormTopK: true, Hidden: H, Inter: I}
			if w.Router, err = be.Weight(bridge.F32, []int{E, H}, quanttest.F32Bytes(router)); err != nil {
				t.Fatal(err)
			}
			hosts := map[bridge.Tensor][]byte{}
			for e := range experts {
				for i, m := range [][]float32{experts[e].Gate, experts[e].Up, experts[e].Down} {
					shape := []int{I, H}
					if i == 2 {
						shape = []int{H, I}
					}
					var x bridge.Tensor
					var host []byte
					if off := c.at(e, i); off >= 0 {
						host = mem[off : off+ih*4]
						copy(host, quanttest.F32Bytes(m))
						x, err = be.WeightMapped(bridge.F32, shape, host)
					} else {
						host = slices.Clone(quanttest.F32Bytes(m))
						x, err = be.Weight(bridge.F32, shape, host)
					}
					if err != nil {
						t.Fatal(err)
					}
					hosts[x] = host
					w.Gate, w.Up, w.Down = appendExpert(w.Gate, w.Up, w.Down, i, x)
				}
			}
			x := make([]float32, tokens*H)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			want := make([]float32, tokens*H)
			kernels.MoE(want, x, router, experts, K, true, H, I)
			got := runMoE(t, be, w, x, tokens, H, false)
			if e := quanttest.RelErr(got, want); e > 1e-5 {
				t.Errorf("%s, %d tokens: relative error %.3g", c.layout, tokens, e)
			}
			info := be.Info()
			used := info.MemoryBytes - info.AvailableBytes
			for _, ts := range [][]bridge.Tensor{w.Gate, w.Up, w.Down} {
				for _, x := range ts {
					host := hosts[x]
					got := x.(*tensor).contents()
					if aliased := unsafe.SliceData(got) == unsafe.SliceData(host); aliased != c.inPlace || string(got) != string(host) {
						t.Errorf("%s: aliased %v, want %v (equal bytes: %v)", c.layout, aliased, c.inPlace, string(got) == string(host))
					}
				}
			}
			if all := int64(3 * E * ih * 4); c.inPlace && used >= all || !c.inPlace && used < all {
				t.Errorf("%s: %d bytes of the working set in use, the experts are %d", c.layout, used, all)
			}
			if want := map[bool]int{true: 3 * E * ih * 4}[c.layout == "apart"]; dropped != want {
				t.Errorf("%s: %d bytes handed back to the loader, want %d", c.layout, dropped, want)
			}
			freeExperts(t, be, w, int64(3*E*ih*4))
		}
	}
}

// appendExpert appends x to the gate, up or down list, as i says.
func appendExpert(gate, up, down []bridge.Tensor, i int, x bridge.Tensor) ([]bridge.Tensor, []bridge.Tensor, []bridge.Tensor) {
	switch i {
	case 0:
		gate = append(gate, x)
	case 1:
		up = append(up, x)
	default:
		down = append(down, x)
	}
	return gate, up, down
}

// runMoE runs w's MoE block (QMoE where packed, else MoE) on tokens rows
// of x as one step.
func runMoE(t *testing.T, be *Backend, w *bridge.MoEWeights, x []float32, tokens, hidden int, packed bool) []float32 {
	t.Helper()
	xt, err := be.Weight(bridge.F32, []int{tokens, hidden}, quanttest.F32Bytes(x))
	if err != nil {
		t.Fatal(err)
	}
	out, err := be.Alloc(bridge.F32, tokens, hidden)
	if err != nil {
		t.Fatal(err)
	}
	pos := make([]int32, tokens)
	for i := range pos {
		pos[i] = int32(i)
	}
	meta := &bridge.StepMeta{NumTokens: tokens, NumSeqs: 1, MaxQueryLen: tokens, MaxSeqLen: tokens, Positions: pos,
		SlotMapping: pos, QueryStartLoc: []int32{0, int32(tokens)}, SeqLens: []int32{int32(tokens)}, BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16}
	if err := be.BeginStep(meta, make([]int32, tokens), false); err != nil {
		t.Fatal(err)
	}
	if packed {
		be.QMoE(out, xt, w, bridge.MoEParams{})
	} else {
		be.MoE(out, xt, w, bridge.MoEParams{})
	}
	if _, err := be.EndStep(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, tokens*hidden)
	if err := be.Read(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// An engine may get one expert's tensor of an earlier engine back (the
// backend keeps tensors by their host bytes for a benchmark's repetitions)
// while the layer's other experts are new: the experts laid out for the
// earlier engine are then not these, and are laid out again. Before, the
// earlier layout was reused and the new experts' weights never read.
func TestExpertsReusedInPart(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	const E, K, H, I = 4, 2, 128, 256
	spec := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	be, err := New(emu.New(emu.Options{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	r := rand.New(rand.NewPCG(5, 6))
	router := make([]float32, E*H)
	for i := range router {
		router[i] = float32(r.NormFloat64()) * 0.5
	}
	rt, err := be.Weight(bridge.F32, []int{E, H}, quanttest.F32Bytes(router))
	if err != nil {
		t.Fatal(err)
	}
	// stacked draws a matrix of E experts into mapped memory, as a source's
	// stacks lie.
	stacked := func(rows, k int) *quant.Matrix {
		n := E * rows
		page := os.Getpagesize()
		sz := func(b int) int { return (b + page - 1) / page * page }
		d, g := n*spec.RowBytes(k), n*spec.Groups(k)*spec.Scale.Size()
		mem, err := unix.Mmap(-1, 0, sz(d)+2*sz(g), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Munmap(mem) })
		return quant.Random(spec, n, k, 0.1, r, mem[:d:d], mem[sz(d):sz(d)+g:sz(d)+g], mem[sz(d)+sz(g):sz(d)+sz(g)+g])
	}
	x := make([]float32, H)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	run := func(gate, up, down [E]*quant.Matrix) []float32 {
		w := &bridge.MoEWeights{Router: rt, TopK: K, NormTopK: true, Hidden: H, Inter: I}
		for e := 0; e < E; e++ {
			for i, m := range []*quant.Matrix{gate[e], up[e], down[e]} {
				q, err := be.QuantWeightMapped(m.Spec, []int{m.Rows, m.K}, m.Data, m.Scales, m.Biases)
				if err != nil {
					t.Fatal(err)
				}
				w.Gate, w.Up, w.Down = appendExpert(w.Gate, w.Up, w.Down, i, q)
			}
		}
		got := runMoE(t, be, w, x, 1, H, true)
		want := make([]float32, H)
		var ex quant.Experts
		ex.Count = E
		ex.Gate, ex.Up, ex.Down = joined(gate[:]), joined(up[:]), joined(down[:])
		quant.MoE(want, x, nil, router, ex, K, true, H, I)
		if e := quanttest.RelErr(got, want); e > 1e-5 {
			t.Errorf("relative error %.3g", e)
		}
		return got
	}
	experts := func(g, u, d *quant.Matrix) (gate, up, down [E]*quant.Matrix) {
		for e := 0; e < E; e++ {
			gate[e], up[e], down[e] = g.Expert(e, E), u.Expert(e, E), d.Expert(e, E)
		}
		return
	}
	g1, u1, d1 := experts(stacked(I, H), stacked(I, H), stacked(H, I))
	run(g1, u1, d1)
	g2, u2, d2 := experts(stacked(I, H), stacked(I, H), stacked(H, I))
	g2[0] = g1[0] // the first expert's gate is the earlier engine's tensor
	run(g2, u2, d2)
}

// joined is the experts' matrices as one, expert after expert.
func joined(ms []*quant.Matrix) *quant.Matrix {
	j := &quant.Matrix{Spec: ms[0].Spec, K: ms[0].K}
	for _, m := range ms {
		j.Rows += m.Rows
		j.Data = append(j.Data, m.Data...)
		j.Scales = append(j.Scales, m.Scales...)
		j.Biases = append(j.Biases, m.Biases...)
	}
	return j
}

// A region of experts aliased in place is released with its last expert,
// while the tensor that aliased it stays among those kept by their host
// bytes. The same bytes handed over again (a kernel case drawn again from
// the same seed into memory mapped at the same place, a checkpoint mapped
// again) make new experts: the kept region ran its kernels on a released
// buffer ("a buffer was released before the command buffer ran").
func TestExpertsMappedAgain(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	const E, K, H, I = 4, 2, 128, 64
	spec := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	mats, x, router, want := mappedExperts(t, spec, E, K, H, I, rand.New(rand.NewPCG(3, 4)))
	be, rt := routedEmu(t, router, E, H)
	for round := range 2 {
		w := expertWeights(t, rt, mats, spec, K, H, I, be.QuantWeightMapped)
		if e := quanttest.RelErr(runMoE(t, be, w, x, 1, H, true), want); e > 1e-5 {
			t.Errorf("round %d: relative error %.3g", round, e)
		}
		for _, ts := range [][]bridge.Tensor{w.Gate, w.Up, w.Down} {
			for _, q := range ts {
				be.Free(q)
			}
		}
	}
}

// Experts handed out twice for the same host bytes, as a second build over
// one cached checkpoint gets them after the first engine has run its MoE
// (its experts laid out in a region, in place or gathered), outlive the
// second build's Free when it fails: the first engine's MoE still runs, and
// the region goes once the first frees them too. Before, the second Free
// dropped the experts' shares of the region under the first engine.
func TestExpertsHeldTwice(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip(err)
	}
	const E, K, H, I = 4, 2, 128, 256
	spec := quant.Spec{Type: quant.Affine, Bits: 4, Group: 64, Scale: quant.BF16}
	mats, x, router, want := mappedExperts(t, spec, E, K, H, I, rand.New(rand.NewPCG(5, 6)))
	for _, mapped := range []bool{true, false} {
		be, rt := routedEmu(t, router, E, H)
		upload := be.QuantWeight
		if mapped {
			upload = be.QuantWeightMapped
		}
		build := func() *bridge.MoEWeights { return expertWeights(t, rt, mats, spec, K, H, I, upload) }
		first := build()
		if e := quanttest.RelErr(runMoE(t, be, first, x, 1, H, true), want); e > 1e-5 {
			t.Fatalf("mapped %v: the first build: relative error %.3g", mapped, e)
		}
		second := build()
		for _, ts := range [][]bridge.Tensor{second.Gate, second.Up, second.Down} {
			for _, q := range ts {
				be.Free(q)
			}
		}
		if e := quanttest.RelErr(runMoE(t, be, first, x, 1, H, true), want); e > 1e-5 {
			t.Errorf("mapped %v: the first build once the second freed its experts: relative error %.3g", mapped, e)
		}
		freeExperts(t, be, first, int64(len(mats[0].Data)+len(mats[1].Data)+len(mats[2].Data)))
	}
}

// mappedExperts draws a MoE layer's E packed experts of spec from r, each
// matrix's experts stacked in memory mapped for the test (as a checkpoint's
// lie), an input and a router, and the reference's output for them.
func mappedExperts(t *testing.T, spec quant.Spec, E, K, H, I int, r *rand.Rand) (mats [3]*quant.Matrix, x, router, want []float32) {
	t.Helper()
	page := os.Getpagesize()
	for i, rows := range [][2]int{{E * I, H}, {E * I, H}, {E * H, I}} {
		var parts [3][]byte
		g := rows[0] * spec.Groups(rows[1]) * spec.Scale.Size()
		for j, n := range []int{rows[0] * spec.RowBytes(rows[1]), g, g} {
			m, err := unix.Mmap(-1, 0, (n+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Munmap(m) })
			parts[j] = m[:n]
		}
		mats[i] = quant.Random(spec, rows[0], rows[1], 0.1, r, parts[0], parts[1], parts[2])
	}
	x, router = make([]float32, H), make([]float32, E*H)
	for i := range router {
		router[i] = float32(r.NormFloat64()) * 0.5
	}
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	want = make([]float32, H)
	quant.MoE(want, x, nil, router, quant.Experts{Gate: mats[0], Up: mats[1], Down: mats[2], Count: E}, K, true, H, I)
	return mats, x, router, want
}

// expertWeights is a MoE block over mats' experts (mappedExperts) and
// router rt, each expert's matrices handed to the backend by upload.
func expertWeights(t *testing.T, rt bridge.Tensor, mats [3]*quant.Matrix, spec quant.Spec, K, H, I int,
	upload func(quant.Spec, []int, []byte, []byte, []byte) (bridge.Tensor, error)) *bridge.MoEWeights {
	t.Helper()
	E := rt.Shape()[0]
	w := &bridge.MoEWeights{Router: rt, TopK: K, NormTopK: true, Hidden: H, Inter: I}
	for e := 0; e < E; e++ {
		for i, dst := range []*[]bridge.Tensor{&w.Gate, &w.Up, &w.Down} {
			m := mats[i].Expert(e, E)
			q, err := upload(spec, []int{m.Rows, m.K}, m.Data, m.Scales, m.Biases)
			if err != nil {
				t.Fatal(err)
			}
			*dst = append(*dst, q)
		}
	}
	return w
}

// routedEmu is a backend on the emulator, closed with the test, holding
// router, E rows of H.
func routedEmu(t *testing.T, router []float32, E, H int) (*Backend, bridge.Tensor) {
	t.Helper()
	be, err := New(emu.New(emu.Options{}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	rt, err := be.Weight(bridge.F32, []int{E, H}, quanttest.F32Bytes(router))
	if err != nil {
		t.Fatal(err)
	}
	return be, rt
}
