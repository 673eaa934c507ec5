//go:build linux

package cuda

import "unsafe"

// Persistent GEMV chains (kernels/cuda/quant_persist.cu, docs/cuda.md
// "Persistent GEMV chains"): single-token affine GEMVs recorded one after
// another join one qachain launch, whose producer warp streams the weights
// of all of them into shared memory while its consumers go through them,
// with a grid barrier in place of each kernel boundary.

const (
	qcMaxIns   = 8     // QC_MAXI
	qcSlot     = 16384 // QC_SLOT
	qcMaxSlots = 16    // QC_MAXSLOTS
	qcMinSlots = 4     // fewer, and the producer could not run ahead
	qcThreads  = (16 + 1) * 32
	// qcInsSlots is QCIns's 8-byte fields; a launch's arguments are
	// QCProg's: qcMaxIns instructions, then n, slots and the barrier word.
	qcInsSlots = 29
	qcArgSlots = qcMaxIns*qcInsSlots + 3
)

// qcSetup sizes the ring to the shared memory a block may ask for, beside
// the kernel's static share, and allocates the grid barrier's word. Without
// bulk copies (sm_90), or unless asked for (MTLBENCH_CUDA_CHAINS=1), no
// chains.
func (b *Backend) qcSetup() error {
	if b.cc < 90 || !b.opts.Chains {
		return nil
	}
	f, ok := b.fns["qachain"]
	if !ok {
		return nil
	}
	var static int32
	call(b.api.cuFuncGetAttribute, uintptr(unsafe.Pointer(&static)), 1, f) // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	slots := min(qcMaxSlots, (b.maxSharedBlock-int(static)-1024)/qcSlot)
	if slots < qcMinSlots {
		return nil
	}
	if err := b.check("cuFuncSetAttribute qachain", call(b.api.cuFuncSetAttribute, f, 8, uintptr(slots*qcSlot))); err != nil {
		return err
	}
	d, err := b.devAlloc(arenaAlign)
	if err != nil {
		return err
	}
	if err := b.check("cuMemsetD8", call(b.api.cuMemsetD8, uintptr(d.ptr), 0, uintptr(d.size))); err != nil {
		return err
	}
	b.qcBar, b.qcSlots = d, slots
	return nil
}

// qcTakes: a qgemv launch a chain can take: one activation row, K staged
// at once, rows whose values, scales and biases are whole 16-byte pieces
// (the bulk copies' unit) and fit a slot, and a residual only in place of
// a bias (QCIns adds one vector to each output).
func (b *Backend) qcTakes(g *qgemv) bool {
	if b.qcSlots == 0 || g.m != 1 || g.k > qaXB || b.profile || (g.residual != 0 && g.segs[0].bias != 0) {
		return false
	}
	rb, groups, _ := g.segs[0].q.args()
	sb := groups * g.segs[0].q.Spec.Scale.Size()
	row := rb + 2*sb
	if g.gu {
		row *= 2
	}
	return rb%16 == 0 && sb%16 == 0 && row <= qcSlot
}

// qcIns is g as quant_persist.cu's QCIns.
func qcIns(g *qgemv, bits int) []uint64 {
	rb, groups, sdt := g.segs[0].q.args()
	a := []uint64{g.x, i32(g.k), i32(rb), i32(groups), i32(sdt), i32(bits), boolArg(g.gu), i32(g.nsegs)}
	var w, s, bs, bias, out, n [3]uint64
	for i, sg := range g.segs[:g.nsegs] {
		w[i] = sg.q.data.ptr
		s[i], bs[i] = sg.q.sb()
		bias[i], out[i], n[i] = sg.bias, sg.out, i32(sg.q.Dims[0])
	}
	if g.residual != 0 {
		bias[0] = g.residual // the output is the residual: out = x·wᵀ + out
	}
	for _, f := range [][3]uint64{w, s, bs, bias, out, n} {
		a = append(a, f[:]...)
	}
	return append(a, g.norm.w, g.norm.out, f64(float64(g.norm.eps)))
}

// chainQA records g into the step's newest entry when that is a chain with
// room (the newest entry is never handed to the CUDA thread before the next
// is recorded: streamSegment), else as a new chain.
func (b *Backend) chainQA(g *qgemv, bits int) {
	ins := qcIns(g, bits)
	fn := b.fns["qachain"]
	if n := len(b.ents); n > 0 && n-1 >= b.flushed {
		if e := b.ents[n-1]; e.kind == entLaunch && e.fn == fn {
			a := b.args[e.a0:e.a1]
			if k := int(a[qcMaxIns*qcInsSlots]); k < qcMaxIns {
				copy(a[k*qcInsSlots:], ins)
				a[qcMaxIns*qcInsSlots] = uint64(k + 1)
				return
			}
		}
	}
	a := make([]uint64, qcArgSlots)
	copy(a, ins)
	a[qcMaxIns*qcInsSlots] = 1
	a[qcMaxIns*qcInsSlots+1] = uint64(b.qcSlots)
	a[qcMaxIns*qcInsSlots+2] = b.qcBar.ptr
	n := len(b.ents)
	b.launch("qachain", [3]int{b.sms, 1, 1}, qcThreads, a...)
	if len(b.ents) > n && b.ents[len(b.ents)-1].fn == fn {
		b.ents[len(b.ents)-1].smem = uint32(b.qcSlots * qcSlot)
	}
}
