package metal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	kmetal "github.com/mtlbench/mtlbench/kernels/metal"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// Tile is a simdgroup_matrix GEMM tile: BM x BN outputs per threadgroup of
// SGM x SGN simdgroups, BK deep per staged k step.
type Tile struct {
	BM, BN, BK, SGM, SGN int
}

func (t Tile) String() string { return fmt.Sprintf("%dx%dx%d/%dx%d", t.BM, t.BN, t.BK, t.SGM, t.SGN) }

// Threads is the threadgroup size the tile runs with.
func (t Tile) Threads() int { return 32 * t.SGM * t.SGN }

// memory is the tile's threadgroup memory and staging buffers with mats
// weight matrices staged stage bytes an element (ops.MetalTileMemory).
func (t Tile) memory(mats, stage int) (bytes, stages int) {
	return ops.MetalTileMemory(t.BM, t.BN, t.BK, mats, stage, tileMemory)
}

// tileMemory is the threadgroup memory a GEMM tile may take: 32 KiB less
// the kernels' static arrays.
const tileMemory = 32<<10 - 1024

func (t Tile) check(what string, dual bool) error {
	if err := t.rules(what); err != nil {
		return err
	}
	mats := 1
	if dual {
		mats = 2
	}
	// Checked for f16/bf16 weights (2 bytes staged); f32 weights are
	// checked at their dispatch.
	if n, _ := t.memory(mats, 2); n > tileMemory {
		return fmt.Errorf("%s tile %v: %d bytes of threadgroup memory exceed 31 KiB", what, t, n)
	}
	return nil
}

// checkPacked is check for a packed tile (quant.metal's qmm_accumulate):
// k steps of one 32-value unit, and its float staging of mats weight
// matrices within the tile memory.
func (t Tile) checkPacked(what string, mats int) error {
	if err := t.rules(what); err != nil {
		return err
	}
	if t.BK != qmmBK {
		return fmt.Errorf("%s tile %v: k steps of %d, not one %d-value unit", what, t, t.BK, qmmBK)
	}
	if n, _ := qmmMemory(t, mats); n > tileMemory {
		return fmt.Errorf("%s tile %v: %d bytes of threadgroup memory with %d weight matrices exceed 31 KiB", what, t, n, mats)
	}
	return nil
}

// rules are a tile's shape rules: simdgroups, 8x8 tiles a simdgroup, rows
// (the kernels' per-row arrays) and k step.
func (t Tile) rules(what string) error {
	tm, tn := 0, 0
	if t.SGM > 0 && t.SGN > 0 {
		tm, tn = t.BM/(8*t.SGM), t.BN/(8*t.SGN)
	}
	switch {
	case t.SGM < 1 || t.SGN < 1 || t.SGM*t.SGN > 32:
		return fmt.Errorf("%s tile %v: 1 to 32 simdgroups", what, t)
	case t.BM%(8*t.SGM) != 0 || t.BN%(8*t.SGN) != 0 || tm < 1 || tn < 1:
		return fmt.Errorf("%s tile %v: BM must be a multiple of 8*SGM and BN of 8*SGN", what, t)
	case tm > 4 || tn > 4:
		return fmt.Errorf("%s tile %v: at most 4x4 8x8 tiles per simdgroup", what, t)
	case t.BM > 64:
		return fmt.Errorf("%s tile %v: BM at most 64", what, t)
	case t.BK != 8 && t.BK != 16 && t.BK != 32:
		return fmt.Errorf("%s tile %v: BK is 8, 16 or 32", what, t)
	}
	return nil
}

// Tuning holds every launch shape and variant choice of the kernels: what
// a tuner explores. Zero fields take the defaults (DefaultTuning).
type Tuning struct {
	// NormThreads is the threadgroup size of rms_norm and add_rms_norm (one
	// threadgroup per row), 32..1024; 0 sizes it from the row width.
	NormThreads int
	// EltThreads is the threadgroup size of the element-wise kernels.
	EltThreads int
	// RoPEHeads is the heads (one simdgroup each) per rope threadgroup.
	RoPEHeads int
	// ArgmaxThreads is the threadgroup size of argmax, ArgmaxPart the values
	// of a row one threadgroup scans (ops.MetalArgmaxParts; -1: a row each).
	ArgmaxThreads, ArgmaxPart int

	// MatVecMaxM: a matmul of at most this many activation rows (1..8) runs
	// the simd_sum matvec kernel, a larger one simdgroup_matrix tiles.
	MatVecMaxM int
	// MatVecRows is the weight rows (outputs) each matvec simdgroup computes
	// (1..4), MatVecSimdgroups the simdgroups of a matvec threadgroup.
	MatVecRows, MatVecSimdgroups int
	// MatMulTile is the dense simdgroup_matrix tile.
	MatMulTile Tile
	// QMatMulTile is the packed matmul's tile (qmatmul_mm), for more rows
	// than the GEMVs take; BK is one 32-value unit.
	QMatMulTile Tile
	// QMatVecRows is the weight rows each packed GEMV simdgroup computes
	// (qmatvec, 1..4), QMatVecSimdgroups the simdgroups of its threadgroup.
	QMatVecRows, QMatVecSimdgroups int
	// QMoEMatVecRows and QMoESimdgroups are the same for the packed expert
	// GEMVs (qmoe_mv), up to MoEMatVecMaxRows rows per routed expert.
	QMoEMatVecRows, QMoESimdgroups int
	// QMoETile is the packed experts' tile (qmoe_mm_gate_up, qmoe_mm_down)
	// above MoEMatVecMaxRows rows per routed expert; BK is one 32-value
	// unit.
	QMoETile Tile

	// AttnSimdgroups is the most simdgroups of an attention threadgroup,
	// each running its own online softmax over a run of the keys; a partition
	// of fewer keys takes fewer (ops.MetalAttnSimdgroups).
	AttnSimdgroups int
	// AttnHeadsPerGroup caps the query heads one threadgroup serves (1, 2,
	// 4 or 8; the largest that divides the GQA group is used).
	AttnHeadsPerGroup int
	// AttnPartitionSize is the most keys a split-K partition takes: a step
	// whose tokens read more keys than it (the longest context, or at most
	// a sliding window) runs the partitioned kernel and a reduce, its keys
	// spread evenly over as many partitions as that needs.
	// Negative: always single pass.
	AttnPartitionSize int
	// AttnPartitions, when positive, sets the partition count instead
	// (kbench's partitions parameter): size = ceil(most keys read / count).
	AttnPartitions int
	// AttnTwoPhase writes the new keys with kv_write before the attention
	// (seed 004's two-phase fused decode) instead of inside it.
	AttnTwoPhase bool
	// AttnPrefillMinQuery: a step whose longest query has at least this
	// many tokens runs the tiled prefill kernel (kv_write first), else the
	// per-token kernel; negative: never tiled.
	AttnPrefillMinQuery int
	// AttnPrefillHeads caps the query heads (one simdgroup each) of a
	// prefill threadgroup, which share the K and V it stages (1, 2, 4 or 8;
	// the largest that divides the GQA group is used).
	AttnPrefillHeads int
	// AttnPrefillKeys is the keys a prefill threadgroup stages per step (8,
	// 16 or 32; halved where an f32 cache's stage would not fit).
	AttnPrefillKeys int
	// AttnPrefillQueries is the query tokens of a prefill threadgroup's
	// tile (8, 16 or 32; a simdgroup per 8 of them and query head), which
	// share the K and V it stages; halved where the pipeline takes fewer
	// threads.
	AttnPrefillQueries int

	// MoEMatVecMaxRows: a MoE call whose rows per routed expert
	// (ops.MetalMoERows of its tokens, experts and top-k) are at most this
	// runs the simd_sum expert kernels (tiles of up to 8 rows), else the
	// simdgroup_matrix ones with MoETile; negative: never.
	MoEMatVecMaxRows int
	MoEMatVecRows    int
	MoESimdgroups    int // simdgroups of a simd_sum expert threadgroup
	// MoETile is the expert GEMM tile; zero: chosen by the rows per routed
	// expert (ops.MetalMoETile).
	MoETile Tile
	// MoEGroupThreads is the threadgroup size of the grouping kernel (one
	// threadgroup per chunk of pairs).
	MoEGroupThreads int
}

// DefaultTuning is what a zero Tuning field means.
var DefaultTuning = Tuning{
	EltThreads: 256, RoPEHeads: 4, ArgmaxThreads: ops.MetalArgmaxThreads, ArgmaxPart: ops.MetalArgmaxPart,
	MatVecMaxM: 8, MatVecRows: 4, MatVecSimdgroups: 4,
	MatMulTile:  Tile{BM: 64, BN: 64, BK: 32, SGM: 2, SGN: 2},
	QMatMulTile: qmmTile, QMoETile: qmoeTile, QMatVecRows: qmvRows, QMatVecSimdgroups: qmvSimdgroups,
	QMoEMatVecRows: qRows, QMoESimdgroups: qSimdgroups,
	AttnSimdgroups: 32, AttnHeadsPerGroup: 8, AttnPartitionSize: 512,
	AttnPrefillMinQuery: 8, AttnPrefillHeads: 8, AttnPrefillKeys: 16, AttnPrefillQueries: 16,
	MoEMatVecMaxRows: ops.MetalMoEMatVecMaxRows, MoEMatVecRows: 4, MoESimdgroups: 4,
	MoEGroupThreads: 256,
}

// withDefaults fills zero fields.
func (t Tuning) withDefaults() Tuning {
	d := DefaultTuning
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&t.EltThreads, d.EltThreads)
	def(&t.RoPEHeads, d.RoPEHeads)
	def(&t.ArgmaxThreads, d.ArgmaxThreads)
	def(&t.ArgmaxPart, d.ArgmaxPart)
	def(&t.MatVecMaxM, d.MatVecMaxM)
	def(&t.MatVecRows, d.MatVecRows)
	def(&t.MatVecSimdgroups, d.MatVecSimdgroups)
	def(&t.QMatVecRows, d.QMatVecRows)
	def(&t.QMatVecSimdgroups, d.QMatVecSimdgroups)
	def(&t.QMoEMatVecRows, d.QMoEMatVecRows)
	def(&t.QMoESimdgroups, d.QMoESimdgroups)
	if t.MatMulTile == (Tile{}) {
		t.MatMulTile = d.MatMulTile
	}
	if t.QMatMulTile == (Tile{}) {
		t.QMatMulTile = d.QMatMulTile
	}
	if t.QMoETile == (Tile{}) {
		t.QMoETile = d.QMoETile
	}
	def(&t.AttnSimdgroups, d.AttnSimdgroups)
	def(&t.AttnHeadsPerGroup, d.AttnHeadsPerGroup)
	def(&t.AttnPartitionSize, d.AttnPartitionSize)
	def(&t.AttnPrefillMinQuery, d.AttnPrefillMinQuery)
	def(&t.AttnPrefillHeads, d.AttnPrefillHeads)
	def(&t.AttnPrefillKeys, d.AttnPrefillKeys)
	def(&t.AttnPrefillQueries, d.AttnPrefillQueries)
	def(&t.MoEMatVecMaxRows, d.MoEMatVecMaxRows)
	def(&t.MoEMatVecRows, d.MoEMatVecRows)
	def(&t.MoESimdgroups, d.MoESimdgroups)
	def(&t.MoEGroupThreads, d.MoEGroupThreads)
	return t
}

// Check reports a tuning no kernel can run, naming the field.
func (t Tuning) Check() error {
	t = t.withDefaults()
	threads := func(name string, v, lo int) error {
		if v < lo || v > 1024 {
			return fmt.Errorf("%s=%d: %d to 1024 threads", name, v, lo)
		}
		return nil
	}
	for _, c := range []struct {
		name  string
		v, lo int
	}{{"NormThreads", max(t.NormThreads, 32), 32}, {"EltThreads", t.EltThreads, 1}, {"ArgmaxThreads", t.ArgmaxThreads, 32},
		{"MoEGroupThreads", t.MoEGroupThreads, 32}, {"RoPEHeads", 32 * t.RoPEHeads, 32},
		{"MatVecSimdgroups", 32 * t.MatVecSimdgroups, 32}, {"QMatVecSimdgroups", 32 * t.QMatVecSimdgroups, 32},
		{"QMoESimdgroups", 32 * t.QMoESimdgroups, 32},
		{"AttnSimdgroups", 32 * t.AttnSimdgroups, 32},
		{"MoESimdgroups", 32 * t.MoESimdgroups, 32},
		{"AttnPrefillHeads, AttnPrefillQueries", 32 * t.AttnPrefillHeads * max(t.AttnPrefillQueries/8, 1), 32}} {
		if err := threads(c.name, c.v, c.lo); err != nil {
			return err
		}
	}
	switch {
	case t.MatVecMaxM < 1 || t.MatVecMaxM > 8:
		return fmt.Errorf("MatVecMaxM=%d: 1 to 8", t.MatVecMaxM)
	case t.MatVecRows < 1 || t.MatVecRows > 4:
		return fmt.Errorf("MatVecRows=%d: 1 to 4", t.MatVecRows)
	case t.QMatVecRows < 1 || t.QMatVecRows > maxQMatVecRows:
		return fmt.Errorf("QMatVecRows=%d: 1 to %d", t.QMatVecRows, maxQMatVecRows)
	case t.QMoEMatVecRows < 1 || t.QMoEMatVecRows > 4:
		return fmt.Errorf("QMoEMatVecRows=%d: 1 to 4", t.QMoEMatVecRows)
	case t.MoEMatVecRows < 1 || t.MoEMatVecRows > 4:
		return fmt.Errorf("MoEMatVecRows=%d: 1 to 4", t.MoEMatVecRows)
	case t.AttnHeadsPerGroup != 1 && t.AttnHeadsPerGroup != 2 && t.AttnHeadsPerGroup != 4 && t.AttnHeadsPerGroup != 8:
		return fmt.Errorf("AttnHeadsPerGroup=%d: 1, 2, 4 or 8", t.AttnHeadsPerGroup)
	case t.AttnPrefillHeads != 1 && t.AttnPrefillHeads != 2 && t.AttnPrefillHeads != 4 && t.AttnPrefillHeads != 8:
		return fmt.Errorf("AttnPrefillHeads=%d: 1, 2, 4 or 8", t.AttnPrefillHeads)
	case t.AttnPrefillKeys != 8 && t.AttnPrefillKeys != 16 && t.AttnPrefillKeys != 32:
		return fmt.Errorf("AttnPrefillKeys=%d: 8, 16 or 32", t.AttnPrefillKeys)
	case !slices.Contains(prefillQueries[:], t.AttnPrefillQueries):
		return fmt.Errorf("AttnPrefillQueries=%d: 8, 16 or 32", t.AttnPrefillQueries)
	}
	if err := t.MatMulTile.check("MatMulTile", false); err != nil {
		return err
	}
	if err := t.QMatMulTile.checkPacked("QMatMulTile", 1); err != nil {
		return err
	}
	if err := t.QMoETile.checkPacked("QMoETile", 2); err != nil {
		return err
	}
	if t.MoETile == (Tile{}) {
		return nil
	}
	return t.MoETile.check("MoETile", true)
}

// kernelFiles are the sources each tunable kernel family is built from.
var kernelFiles = map[string][]string{
	"matmul":    {"mtlbench.h", "gemm.h", "matmul.metal"},
	"moe":       {"mtlbench.h", "gemm.h", "moe.metal", "matmul.metal"},
	"attention": {"mtlbench.h", "attention.metal"},
	"rms_norm":  {"mtlbench.h", "norm.h", "norm.metal"},
	"rope":      {"mtlbench.h", "norm.h", "norm.metal"},
	"argmax":    {"mtlbench.h", "elementwise.metal"},
	// The ops' names, as tuned configs key their kernels.
	"paged_attention_decode":  {"mtlbench.h", "attention.metal"},
	"paged_attention_prefill": {"mtlbench.h", "attention.metal"},
	"qmatmul":                 {"mtlbench.h", "gemm.h", "quant.metal"},
	"qmoe":                    {"mtlbench.h", "gemm.h", "quant.metal", "moe.metal"},
	"add_rms_norm":            {"mtlbench.h", "norm.h", "norm.metal"},
	"layer_norm":              {"mtlbench.h", "norm.h", "layernorm.metal"},
	"add_layer_norm":          {"mtlbench.h", "norm.h", "layernorm.metal"},
}

// KernelSourceHash is the sha256 (hex) of the MSL a tunable kernel family
// ("matmul", "moe", "attention", "rms_norm", "rope", "argmax", or an op
// with a Metal tuning space) is built from, "" for another name, so a
// tuned config is dropped once its kernel changes.
func KernelSourceHash(kernel string) string {
	files := kernelFiles[kernel]
	if files == nil {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		data, err := kmetal.Sources.ReadFile(f)
		if err != nil {
			panic(err) // embedded at build time: cannot fail
		}
		h.Write([]byte(f + "\x00"))
		h.Write(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (t Tuning) String() string {
	t = t.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "norm=%d elt=%d rope=%d argmax=%d/%d mv=m<=%d,%dr,%dsg mm=%v attn=%dsg,qh<=%d,part=%d",
		t.NormThreads, t.EltThreads, t.RoPEHeads, t.ArgmaxThreads, t.ArgmaxPart, t.MatVecMaxM, t.MatVecRows, t.MatVecSimdgroups,
		t.MatMulTile, t.AttnSimdgroups, t.AttnHeadsPerGroup, t.AttnPartitionSize)
	if t.AttnPartitions > 0 {
		fmt.Fprintf(&b, "/%dparts", t.AttnPartitions)
	}
	if t.AttnTwoPhase {
		b.WriteString(",two-phase")
	}
	fmt.Fprintf(&b, ",prefill=q>=%d,qh<=%d,%dkeys,%dqueries", t.AttnPrefillMinQuery, t.AttnPrefillHeads, t.AttnPrefillKeys,
		t.AttnPrefillQueries)
	mm := "auto"
	if t.MoETile != (Tile{}) {
		mm = t.MoETile.String()
	}
	fmt.Fprintf(&b, " moe=rows<=%d,%dr,%dsg,mm=%s,group=%d", t.MoEMatVecMaxRows, t.MoEMatVecRows, t.MoESimdgroups, mm, t.MoEGroupThreads)
	fmt.Fprintf(&b, " qmv=%dr,%dsg qmm=%v qmoe=%dr,%dsg,mm=%v", t.QMatVecRows, t.QMatVecSimdgroups, t.QMatMulTile,
		t.QMoEMatVecRows, t.QMoESimdgroups, t.QMoETile)
	return b.String()
}
