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
		xt, err := be.Weight(bridge.F32, []int{1, H}, quanttest.F32Bytes(x))
		if err != nil {
			t.Fatal(err)
		}
		out, err := be.Alloc(bridge.F32, 1, H)
		if err != nil {
			t.Fatal(err)
		}
		meta := &bridge.StepMeta{NumTokens: 1, NumSeqs: 1, MaxQueryLen: 1, MaxSeqLen: 1, Positions: []int32{0},
			SlotMapping: []int32{0}, QueryStartLoc: []int32{0, 1}, SeqLens: []int32{1}, BlockTable: []int32{0}, MaxBlocks: 1, BlockSize: 16}
		if err := be.BeginStep(meta, []int32{0}, false); err != nil {
			t.Fatal(err)
		}
		be.QMoE(out, xt, w, bridge.MoEParams{})
		if _, err := be.EndStep(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, H)
		if err := be.Read(out, got); err != nil {
			t.Fatal(err)
		}
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
	}
}

// inside reports whether b lies within region.
func inside(b, region []byte) bool {
	p, r := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(region)))
	return p >= r && p+uintptr(len(b)) <= r+uintptr(len(region))
}
