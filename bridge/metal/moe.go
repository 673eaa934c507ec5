package metal

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// packedExperts is a MoE layer's experts in one buffer, so one dispatch
// reaches every expert: expert e's gate, up and down at
// base + e*stride + off[0], off[1], off[2] elements (layoutOf).
type packedExperts struct {
	dt     bridge.DType
	buf    *dbuf
	base   int // bytes
	stride int // elements between experts
	off    [3]int
	size   int                // bytes of all experts
	w      *bridge.MoEWeights // the weights last found to lie here (holds)
}

// holds reports whether every expert of w lies in pk's buffer where pk
// says: an engine may reuse one expert's tensor of an earlier engine
// (byHost, by its host bytes) while the others are new.
func (pk *packedExperts) holds(w *bridge.MoEWeights) bool {
	es := pk.dt.Size()
	for i, ts := range [3][]bridge.Tensor{w.Gate, w.Up, w.Down} {
		for e, t := range ts {
			if x := tt(t); x.buf != pk.buf || x.off != pk.base+(e*pk.stride+pk.off[i])*es {
				return false
			}
		}
	}
	return true
}

// expertLayout is where a layer's experts lie in one region, in elements:
// expert e's matrix i (gate, up, down) at e*stride + off[i].
type expertLayout struct {
	stride int
	off    [3]int
}

// sideBySide is the layout experts makes when it copies: each expert's
// gate, up and down together (as NewExperts lays them).
func sideBySide(ih int) expertLayout { return expertLayout{3 * ih, [3]int{0, ih, 2 * ih}} }

// layoutOf is the layout of E experts of ih elements of es bytes a matrix,
// matrix i of expert e at addr(i, e), when there is one: a fixed stride
// between experts, an offset for each matrix, and the 3·E matrices tiling
// one region from base with no gap. Side by side per expert, or every
// gate, then every up, then every down (a weight source's stacks,
// runner/model owned.place), or a GGUF file's three stacked tensors in the
// order its writer chose, all pass.
func layoutOf(E, ih, es int, addr func(i, e int) uintptr) (lay expertLayout, base uintptr, ok bool) {
	n := uintptr(ih * es)
	var all []uintptr
	for i := 0; i < 3; i++ {
		for e := 0; e < E; e++ {
			all = append(all, addr(i, e))
		}
	}
	slices.Sort(all)
	base = all[0]
	for k := 1; k < len(all); k++ {
		if all[k]-all[k-1] < n {
			return lay, 0, false // overlapping
		}
	}
	if all[len(all)-1]+n-base != uintptr(len(all))*n {
		return lay, 0, false // a gap
	}
	stride := uintptr(3 * ih * es)
	if E > 1 {
		if addr(0, 1) < addr(0, 0) {
			return lay, 0, false
		}
		stride = addr(0, 1) - addr(0, 0)
	}
	for i := 0; i < 3; i++ {
		for e := 0; e < E; e++ {
			if addr(i, e) != addr(i, 0)+uintptr(e)*stride {
				return lay, 0, false
			}
		}
		if (addr(i, 0)-base)%uintptr(es) != 0 {
			return lay, 0, false
		}
		lay.off[i] = int(addr(i, 0)-base) / es
	}
	if stride%uintptr(es) != 0 {
		return lay, 0, false
	}
	lay.stride = int(stride) / es
	return lay, base, true
}

// NewExperts allocates a MoE layer's expert weights (zeroed) packed as the
// MoE kernels read them, and returns them as per-expert tensors: a loader
// that fills these needs no repacking at the first MoE call.
func (b *Backend) NewExperts(dt bridge.DType, experts, hidden, inter int) (gate, up, down []bridge.Tensor, err error) {
	if dt != bridge.F32 && dt != bridge.F16 && dt != bridge.BF16 {
		return nil, nil, nil, fmt.Errorf("metal: %v expert weights", dt)
	}
	ih := inter * hidden
	buf, err := b.newBuffer(experts * 3 * ih * dt.Size())
	if err != nil {
		return nil, nil, nil, err
	}
	b.owned = append(b.owned, buf)
	for e := 0; e < experts; e++ {
		at := func(i int, shape []int) bridge.Tensor {
			return &tensor{dt: dt, shape: shape, n: ih, buf: buf, off: (e*3 + i) * ih * dt.Size()}
		}
		gate = append(gate, at(0, []int{inter, hidden}))
		up = append(up, at(1, []int{inter, hidden}))
		down = append(down, at(2, []int{hidden, inter}))
	}
	return gate, up, down, nil
}

// experts returns w's packed experts, laid out on first use: experts that
// already lie in a layout the kernels read (layoutOf), in one buffer or in
// mapped host memory (then aliased as one region), are read in place;
// others are copied into one buffer. Either way their tensors are re-pointed at
// the region and their own buffers released (the first MoE call of a
// layer precedes any other use of its experts, so no encoded dispatch
// holds them).
func (b *Backend) experts(w *bridge.MoEWeights) *packedExperts {
	E := len(w.Gate)
	if E == 0 || len(w.Up) != E || len(w.Down) != E {
		b.fail("moe: %d gate, %d up, %d down experts", len(w.Gate), len(w.Up), len(w.Down))
		return nil
	}
	first := tt(w.Gate[0])
	if pk := b.packed[first]; pk != nil && (pk.w == w || pk.holds(w)) {
		pk.w = w // checked once an engine: its steps pass the same weights
		return pk
	}
	H, I := w.Hidden, w.Inter
	ih := H * I
	dt := first.dt
	es := dt.Size()
	if dtName(dt) == "" {
		b.fail("moe: %v expert weights", dt)
		return nil
	}
	mats := [3][]bridge.Tensor{w.Gate, w.Up, w.Down}
	for e := 0; e < E; e++ {
		for i := range mats {
			if x := tt(mats[i][e]); x.dt != dt || x.n != ih {
				b.fail("moe: expert %d: %v tensor of %d elements, want %v of %dx%d", e, x.dt, x.n, dt, I, H)
				return nil
			}
		}
	}
	size := E * 3 * ih * es
	pk := &packedExperts{dt: dt, size: size}
	at := func(i, e int) *tensor { return tt(mats[i][e]) }
	inBuf, inHost := true, true
	for i := range mats {
		for e := 0; e < E; e++ {
			inBuf = inBuf && at(i, e).buf == first.buf
			inHost = inHost && at(i, e).buf.mapped
		}
	}
	if inBuf {
		if lay, base, ok := layoutOf(E, ih, es, func(i, e int) uintptr { return uintptr(at(i, e).off) }); ok {
			pk.buf, pk.base, pk.stride, pk.off = first.buf, int(base), lay.stride, lay.off
			pk.w, b.packed[first] = w, pk
			return pk
		}
	}
	var buf *dbuf
	if inHost {
		host := func(i, e int) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(at(i, e).contents()))) }
		if lay, base, ok := layoutOf(E, ih, es, host); ok {
			region := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(first.contents())), int(base-host(0, 0)))), size)
			if t, err := b.WeightMapped(dt, []int{size / es}, region); err == nil {
				buf, pk.base, pk.stride, pk.off = t.(*tensor).buf, t.(*tensor).off, lay.stride, lay.off
				t.(*tensor).owned = false // b.owned releases it
			}
		}
	}
	if buf == nil {
		var err error
		if buf, err = b.newBuffer(size); err != nil {
			b.fail("moe: packing the experts: %v", err)
			return nil
		}
		lay := sideBySide(ih)
		pk.base, pk.stride, pk.off = 0, lay.stride, lay.off
		dst := buf.Contents()
		for e := 0; e < E; e++ {
			for i := range mats {
				c := at(i, e).contents()
				copy(dst[(e*pk.stride+pk.off[i])*es:], c)
				if at(i, e).buf.mapped {
					b.dropCopied(c)
				}
			}
		}
	}
	b.share(buf, 3*E)
	for e := 0; e < E; e++ {
		for i := range mats {
			x := tt(mats[i][e])
			switch {
			case x.owned && x.buf != buf:
				b.release(x.buf)
			case !x.owned && x.buf.shared > 0:
				b.unshare(x.buf) // an earlier layout's region
			}
			x.buf, x.off, x.owned = buf, pk.base+(e*pk.stride+pk.off[i])*es, false
		}
	}
	pk.buf = buf
	pk.w, b.packed[first] = w, pk
	return pk
}

// moeTokens checks a MoE block's (float or packed) output, input and top-k
// the one way for both, and returns its tokens; 0: nothing to encode.
func (b *Backend) moeTokens(name string, o, xs *tensor, w *bridge.MoEWeights) int {
	if !b.checkF32(name, o, xs) {
		return 0
	}
	K, E := w.TopK, len(w.Gate)
	T := xs.n / w.Hidden
	if T == 0 {
		return 0
	}
	if K < 1 || K > E || K > moeMaxTopK {
		b.fail("%s: top-k %d of %d experts (1 to min(%d, experts))", name, K, E, moeMaxTopK)
		return 0
	}
	return T
}

// MoE encodes a sparse MoE block: router matmul, route (softmax, top-k,
// renormalise, distinct-expert count), group the pairs by expert in chunks
// (the strategy), the two expert GEMMs over the tiles, and the weighted
// combine. Nothing is read back: the tile grid is sized for the worst case
// and unused tiles exit at once.
func (b *Backend) MoE(out, x bridge.Tensor, w *bridge.MoEWeights, mp bridge.MoEParams) {
	b.moe(out, x, w, mp, false, moeFold{})
}

// moe encodes a MoE block: a decode step's in three dispatches (moeDecode),
// others as above, where fusedRoute runs the router GEMV and the routing as
// one dispatch (moe_router_route); fold's residual, when set, receives the
// output added into it by the combine, and its norm only a decode step's
// block takes (fusion.go).
func (b *Backend) moe(out, x bridge.Tensor, w *bridge.MoEWeights, mp bridge.MoEParams, fusedRoute bool, fold moeFold) {
	residual := fold.residual
	o, xs, router := tt(out), tt(x), tt(w.Router)
	T := b.moeTokens("moe", o, xs, w)
	if T == 0 {
		return
	}
	H, I, K := w.Hidden, w.Inter, w.TopK
	E := len(w.Gate)
	pk := b.experts(w)
	if pk == nil {
		return
	}
	tu := b.moeTuning(w, T)
	P := T * K
	if b.moeBlock(w, T, mp) {
		b.moeDecode(o, xs, w, pk, T, E, K, H, I, tu, fold)
		return
	}
	// The expert kernels by the rows per routed expert (tile occupancy):
	// matvec tiles of up to 8 rows while an expert's rows mostly fit one,
	// else simdgroup_matrix tiles, whose down GEMM adds its weighted rows
	// into out (cleared by the routing) in place of the combine.
	rows := ops.MetalMoERows(T, E, K)
	useMV := rows <= tu.MoEMatVecMaxRows
	if fold.g != nil && (!useMV || fusedRoute || !b.moeRouterFolds(w, T)) {
		b.fail("moe: an RMSNorm folded into a block that cannot take it")
		return
	}

	// Router logits (with fold's norm), then routing.
	var logits view
	if !fusedRoute {
		logits = b.routerLogits(xs, w, T, fold)
	}
	ids, weights, flags, counts, slot, ok := b.routing(E, P)
	if !ok {
		return
	}
	norm := uint32(0)
	if w.NormTopK {
		norm = 1
	}
	tile := tu.MoETile
	if tile == (Tile{}) {
		tile = tileOf(ops.MetalMoETile(rows))
	}
	rt := min(1024, max(32, align(E, 32)))
	b.args(argBytes(b, routeArgs{Tokens: uint32(T), Experts: uint32(E), TopK: uint32(K), NormTopK: norm, StatsSlot: uint32(slot),
		Hidden: uint32(H)}))
	if fusedRoute {
		b.in(1, xs)
		b.in(6, router)
	} else {
		b.bind(1, logits, false)
	}
	b.bind(2, ids, true)
	b.bind(3, weights, true)
	b.bind(4, flags, true)
	b.bind(5, view{counts, 0, 4 * countChunk}, true)
	if !useMV {
		b.out(7, o)
	}
	b.bind(8, view{b.step.errBuf, 0, 16}, true)
	b.threadgroupMemory(4 * E)
	route := b.pipeline("moe_route", fcRoute, boolInt[!useMV])
	if fusedRoute {
		// Every simdgroup computes logits: the router is the step's read.
		route, rt = b.pipeline(routerRouteKernel[router.dt], fcRoute, boolInt[!useMV]), 1024
	}
	b.dispatchGroups(route, [3]int{T, 1, 1}, [3]int{threadsFor(route, rt), 1, 1})

	tileRows := tile.BM
	if useMV {
		tileRows = min(8, T, moeChunk(mp, P))
	}
	perm, tileList, tiles := b.moeGroup(ids, T, E, K, tileRows, mp, tu)

	// Expert GEMMs: h = silu(x W_gate^T) * (x W_up^T) per pair, in expert
	// order; y = h W_down^T, back in pair order.
	h := b.scratchView("moe.h", 4*P*I)
	var y view
	if useMV {
		y = b.scratchView("moe.y", 4*P*H)
	}
	wv := view{pk.buf, pk.base, pk.size}
	names := moeKernels[pk.dt]
	gu := moeGemmArgs{N: uint32(I), K: uint32(H), TopK: uint32(K), Tiles: uint32(tiles), ExpertStride: uint64(pk.stride),
		WOffset: uint64(pk.off[0]), W2Offset: uint64(pk.off[1]), Experts: uint32(E), Eps: fold.eps}
	dn := moeGemmArgs{N: uint32(H), K: uint32(I), TopK: uint32(K), Tiles: uint32(tiles), ExpertStride: uint64(pk.stride),
		WOffset: uint64(pk.off[2]), Experts: uint32(E)}
	for pass, a := range []moeGemmArgs{gu, dn} {
		var p mtl.Pipeline
		var groups, tpg [3]int
		if useMV {
			r, sgs := tu.MoEMatVecRows, tu.MoESimdgroups
			if pass == 0 {
				p = b.pipeline(names[pass], fcMoEMVGateUp, int32(r), int32(tileRows), boolInt[fold.g != nil])
			} else {
				p = b.pipeline(names[pass], fcMoEMV, int32(r), int32(tileRows))
			}
			sgs = simdgroupsFor(p, sgs)
			groups, tpg = [3]int{ceilDiv(int(a.N), sgs*r), tiles, 1}, [3]int{32 * sgs, 1, 1}
		} else {
			t := tile
			mem, stages, ok := b.tileMemory("moe", t, 2-pass, pk.dt)
			if !ok {
				return
			}
			if pass == 0 {
				p = b.pipeline(names[2], fcMoEMM, int32(t.BM), int32(t.BN), int32(t.BK), int32(t.SGM), int32(t.SGN), int32(stages))
			} else {
				p = b.pipeline(names[3], fcMoEDown, int32(t.BM), int32(t.BN), int32(t.BK), int32(t.SGM), int32(t.SGN), int32(stages),
					boolInt[residual != nil])
			}
			groups, tpg = [3]int{ceilDiv(int(a.N), t.BN), tiles, 1}, [3]int{t.Threads(), 1, 1}
			b.threadgroupMemory(mem)
		}
		if !b.fits(p, tpg) {
			return
		}
		b.args(argBytes(b, a))
		if pass == 0 {
			b.in(1, xs)
		} else {
			b.bind(1, h, false)
		}
		b.bind(2, wv, false)
		b.bind(3, perm, false)
		b.bind(4, tileList, false)
		switch {
		case pass == 0:
			b.bind(5, h, true)
			if fold.g != nil {
				b.in(6, fold.g)
			}
		case useMV:
			b.bind(5, y, true)
		default: // the weighted scatter-add: out, and the residual with it
			b.out(5, o)
			b.bind(6, weights, false)
			b.bind(7, flags, true)
			if residual != nil {
				b.bind(8, residual.view(), true)
			}
		}
		b.dispatchGroups(p, groups, tpg)
	}
	if !useMV {
		return
	}

	b.moeCombine(o, y, ids, weights, flags, residual, T, E, K, H)
}

// moeCombine encodes moe_combine: out[t] = Σ_j weights[t·K+j]·y[t·K+j],
// also added into residual when it is set; it clears the experts' flags.
func (b *Backend) moeCombine(o *tensor, y, ids, weights, flags view, residual *tensor, T, E, K, H int) {
	ct := min(1024, max(32, align(ceilDiv(H, 4), 32)))
	b.args(argBytes(b, combineArgs{Tokens: uint32(T), Hidden: uint32(H), TopK: uint32(K), Experts: uint32(E)}))
	b.bind(1, y, false)
	b.bind(2, weights, false)
	b.bind(3, ids, false)
	b.bind(4, flags, true)
	b.out(5, o)
	if residual != nil {
		b.bind(6, residual.view(), true)
	}
	p := b.pipeline("moe_combine", fcCombine, boolInt[residual != nil])
	b.dispatchGroups(p, [3]int{T, 1, 1}, [3]int{threadsFor(p, ct), 1, 1})
}

// moePerPair reports whether a MoE block of T tokens on the expert GEMVs
// runs its (token, expert) pairs one at a time (the decode block:
// moeDecode, qmoe's three dispatches) rather than grouped by expert in the
// strategy's chunks (moe_group's tiles, an expert's weights read once a
// tile). One token's pairs are distinct experts, so every strategy's groups
// are single pairs; the loop strategy, or chunks of one pair, is that
// schedule at any batch (docs/metal-kernels.md, "Grouped expert GEMVs").
func moePerPair(T int, mp bridge.MoEParams) bool {
	return T == 1 || mp.Strategy == bridge.MoELoop || (mp.Strategy == bridge.MoEChunked && mp.ChunkSize <= 1)
}

// moeBlock reports whether a float MoE block over T tokens runs as a decode
// step's three dispatches (moeDecode): few enough rows a routed expert for
// the GEMVs, fusion on, its pairs one at a time (moePerPair), and within
// the kernels' bounds, the device's threads a threadgroup among them.
func (b *Backend) moeBlock(w *bridge.MoEWeights, T int, mp bridge.MoEParams) bool {
	E, K := len(w.Gate), w.TopK
	if mp.Unfused || !moePerPair(T, mp) || E == 0 || E > moeRouteExperts || K > moeSumTopK {
		return false
	}
	tu := b.moeTuning(w, T)
	if ops.MetalMoERows(T, E, K) > tu.MoEMatVecMaxRows {
		return false
	}
	// moe_mv_sum wants a simdgroup for each of a token's experts.
	g := tt(w.Gate[0])
	if g == nil || moeBlockKernels[g.dt][1] == "" {
		return false
	}
	sum := b.pipeline(moeBlockKernels[g.dt][1], fcMoESum, int32(tu.MoEMatVecRows), 1, 0)
	return sum != nil && sumSimdgroups(sum, K) > 0
}

// moeMatVec reports whether a float MoE block over T tokens runs its
// experts on the GEMVs (moe_mv_*: at most the tuning's MoEMatVecMaxRows
// rows a routed expert), which can take the norm before the block.
func (b *Backend) moeMatVec(w *bridge.MoEWeights, T int) bool {
	E, K := len(w.Gate), w.TopK
	return E > 0 && ops.MetalMoERows(T, E, K) <= b.moeTuning(w, T).MoEMatVecMaxRows
}

// moeTuning is the tuning of a float MoE block over T tokens, looked up for
// its experts' dtype as matmulTuning is for a matrix's.
func (b *Backend) moeTuning(w *bridge.MoEWeights, T int) *Tuning {
	dtype := ""
	if len(w.Gate) > 0 {
		if g := tt(w.Gate[0]); g != nil {
			dtype = g.dt.String()
		}
	}
	return b.tuned(ops.MoE, dtype, moeDims, T, len(w.Gate), w.TopK, w.Hidden, w.Inter)
}

// moeDecode encodes a decode step's float MoE block in three dispatches, as
// qmoe does a packed one (docs/metal-kernels.md, "The MoE block in a decode
// step"): the router GEMV (with fold's norm), moe_mv_pair (gate/up with
// SwiGLU, each pair routing its token from the logits) and moe_mv_sum (the
// down projections summed under the routing weights, and fold's residual).
func (b *Backend) moeDecode(o, xs *tensor, w *bridge.MoEWeights, pk *packedExperts, T, E, K, H, I int, tu *Tuning,
	fold moeFold) {
	P := T * K
	logits := b.routerLogits(xs, w, T, fold)
	ids, weights, flags, counts, slot, ok := b.routing(E, P)
	if !ok {
		return
	}
	names := moeBlockKernels[pk.dt]
	r := tu.MoEMatVecRows
	pair := b.pipeline(names[0], fcMoEPair, int32(r), 1, boolInt[fold.g != nil])
	sum := b.pipeline(names[1], fcMoESum, int32(r), 1, boolInt[fold.residual != nil])
	if pair == nil || sum == nil {
		return // the pipeline's failure is the step's
	}
	sgs, sumSgs := simdgroupsFor(pair, tu.MoESimdgroups), sumSimdgroups(sum, K)
	if sumSgs == 0 {
		b.fail("moe: %s takes %d threads, fewer than a simdgroup for each of %d experts", names[1],
			sum.MaxTotalThreadsPerThreadgroup(), K)
		return
	}
	h := b.scratchView("moe.h", 4*P*I)
	wv := view{pk.buf, pk.base, pk.size}
	b.args(argBytes(b, moeGemmArgs{N: uint32(I), K: uint32(H), TopK: uint32(K), ExpertStride: uint64(pk.stride),
		WOffset: uint64(pk.off[0]), W2Offset: uint64(pk.off[1]), Experts: uint32(E), NormTopK: uint32(boolInt[w.NormTopK]), StatsSlot: uint32(slot),
		Eps: fold.eps}))
	b.in(1, xs)
	b.bind(2, wv, false)
	b.bind(3, ids, true)
	b.bind(4, h, true)
	b.bind(5, logits, false)
	b.bind(6, weights, true)
	b.bind(7, flags, true)
	b.bind(8, view{counts, 0, 4 * countChunk}, true)
	if fold.g != nil {
		b.in(9, fold.g)
	}
	b.bind(10, view{b.step.errBuf, 0, 16}, true)
	b.dispatchGroups(pair, [3]int{ceilDiv(I, sgs*r), P, 1}, [3]int{32 * sgs, 1, 1})

	b.args(argBytes(b, moeGemmArgs{N: uint32(H), K: uint32(I), TopK: uint32(K), ExpertStride: uint64(pk.stride),
		WOffset: uint64(pk.off[2]), Experts: uint32(E)}))
	b.bind(1, h, false)
	b.bind(2, wv, false)
	b.bind(3, ids, false)
	b.bind(4, weights, false)
	b.bind(5, flags, true)
	b.out(6, o)
	if fold.residual != nil {
		b.bind(7, fold.residual.view(), true)
	}
	b.dispatchGroups(sum, [3]int{ceilDiv(H, sumSgs/K*r), T, 1}, [3]int{32 * sumSgs, 1, 1})
}

// fcMoEPair: moe_mv_pair's rows a simdgroup, columns (1) and folded norm;
// fcMoESum: moe_mv_sum's rows, columns (1) and residual.
var (
	fcMoEPair = []fcSpec{{fcMVRows, false}, {fcMVCols, false}, {fcMVNorm, true}}
	// fcMoEMVGateUp: moe_mv_gate_up's rows a simdgroup, tile rows and
	// folded norm.
	fcMoEMVGateUp = fcMoEPair
	fcMoESum      = []fcSpec{{fcMVRows, false}, {fcMVCols, false}, {fcMoEResidual, true}}
)

// routing returns a MoE call's routing scratch for P pairs of E experts:
// the pairs' experts and weights, the experts' flags, and the buffer and
// word of the call's distinct-expert count (countSlot); ok false when a
// buffer could not be had (the step has failed).
func (b *Backend) routing(E, P int) (ids, weights, flags view, counts *dbuf, slot int, ok bool) {
	ids, weights = b.scratchView("moe.ids", 4*P), b.scratchView("moe.weights", 4*P)
	flags = view{b.expertFlags(E), 0, 4 * E}
	counts, slot = b.countSlot()
	return ids, weights, flags, counts, slot, flags.buf != nil && counts != nil
}

// moeChunk is the pairs of one chunk by strategy: all P (grouped), one
// (loop) or the given size (chunked).
func moeChunk(mp bridge.MoEParams, P int) int {
	switch mp.Strategy {
	case bridge.MoELoop:
		return 1
	case bridge.MoEChunked:
		return min(max(mp.ChunkSize, 1), P)
	}
	return P
}

// moeGroup encodes moe_group over the routed pairs (ids, T tokens of K of
// E experts): chunks of pairs by strategy, each sorted by expert into
// tiles of at most tileRows rows of one expert (an expert takes at most one
// pair per token, so few tokens make short tiles). It returns the pairs in
// expert order, the tiles and their count.
func (b *Backend) moeGroup(ids view, T, E, K, tileRows int, mp bridge.MoEParams, tu *Tuning) (perm, tileList view, tiles int) {
	P := T * K
	chunk := moeChunk(mp, P)
	chunks := ceilDiv(P, chunk)
	perChunk := min(ceilDiv(chunk, tileRows)+min(E, chunk), chunk)
	tiles = chunks * perChunk
	perm = b.scratchView("moe.perm", 4*P)
	tileList = b.scratchView("moe.tiles", moeTileSize*tiles)
	b.args(argBytes(b, groupArgs{Pairs: uint32(P), Experts: uint32(E), Chunk: uint32(chunk), TileRows: uint32(tileRows), TilesPerChunk: uint32(perChunk)}))
	b.bind(1, ids, false)
	b.bind(2, perm, true)
	b.bind(3, tileList, true)
	b.threadgroupMemory(moeGroupBytes * E)
	p := b.pipeline("moe_group", fcNone)
	b.dispatchGroups(p, [3]int{chunks, 1, 1}, [3]int{threadsFor(p, min(tu.MoEGroupThreads, max(32, align(chunk, 32)))), 1, 1})
	return perm, tileList, tiles
}

// tileOf reads a tile from its tuning-space knobs.
func tileOf(c ops.Config) Tile {
	return Tile{BM: c.Int(ops.KnobBM), BN: c.Int(ops.KnobBN), BK: c.Int(ops.KnobBK), SGM: c.Int(ops.KnobSGM), SGN: c.Int(ops.KnobSGN)}
}
