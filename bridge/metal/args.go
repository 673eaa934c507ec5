package metal

import "unsafe"

// The argument structs of kernels/metal/mtlbench.h, field for field,
// padding included: the msl tag names the C field, and TestArgLayouts
// checks sizes and offsets against the header as the kernel compiler lays
// it out.

type normArgs struct {
	Rows uint32  `msl:"rows"`
	Dim  uint32  `msl:"dim"`
	Eps  float32 `msl:"eps"`
	Pad0 uint32  `msl:"_pad0"`
}

type eltArgs struct {
	N    uint32 `msl:"n"`
	Pad0 uint32 `msl:"_pad0"`
	Pad1 uint32 `msl:"_pad1"`
	Pad2 uint32 `msl:"_pad2"`
}

type embedArgs struct {
	Tokens uint32 `msl:"tokens"`
	Dim    uint32 `msl:"dim"`
	Vocab  uint32 `msl:"vocab"`
	Pad0   uint32 `msl:"_pad0"`
}

type gatherArgs struct {
	Rows    uint32 `msl:"rows"`
	Dim     uint32 `msl:"dim"`
	SrcRows uint32 `msl:"src_rows"`
	Pad0    uint32 `msl:"_pad0"`
}

type ropeArgs struct {
	Tokens  uint32  `msl:"tokens"`
	Heads   uint32  `msl:"heads"`
	KVHeads uint32  `msl:"kv_heads"`
	HeadDim uint32  `msl:"head_dim"`
	Eps     float32 `msl:"eps"`
	Pad0    uint32  `msl:"_pad0"`
	Pad1    uint32  `msl:"_pad1"`
	Pad2    uint32  `msl:"_pad2"`
}

type matArgs struct {
	M    uint32 `msl:"m"`
	N    uint32 `msl:"n"`
	K    uint32 `msl:"k"`
	Pad0 uint32 `msl:"_pad0"`
}

type fusedMVArgs struct {
	M    uint32  `msl:"m"`
	K    uint32  `msl:"k"`
	N0   uint32  `msl:"n0"`
	N1   uint32  `msl:"n1"`
	N2   uint32  `msl:"n2"`
	Eps  float32 `msl:"eps"`
	Pad0 uint32  `msl:"_pad0"`
	Pad1 uint32  `msl:"_pad1"`
}

type attnArgs struct {
	NumTokens     uint32  `msl:"num_tokens"`
	NumSeqs       uint32  `msl:"num_seqs"`
	Heads         uint32  `msl:"heads"`
	KVHeads       uint32  `msl:"kv_heads"`
	HeadDim       uint32  `msl:"head_dim"`
	BlockSize     uint32  `msl:"block_size"`
	MaxBlocks     uint32  `msl:"max_blocks"`
	NumBlocks     uint32  `msl:"num_blocks"`
	PartitionSize uint32  `msl:"partition_size"`
	NumPartitions uint32  `msl:"num_partitions"`
	HeadsPerGroup uint32  `msl:"heads_per_group"`
	Scale         float32 `msl:"scale"`
	NumTiles      uint32  `msl:"num_tiles"`
	Eps           float32 `msl:"eps"`
	MergeSlots    uint32  `msl:"merge_slots"`
	Window        uint32  `msl:"window"`
}

type argmaxArgs struct {
	Rows  uint32 `msl:"rows"`
	N     uint32 `msl:"n"`
	Part  uint32 `msl:"part"`
	Parts uint32 `msl:"parts"`
	Lead  uint32 `msl:"lead"`
	Pad0  uint32 `msl:"_pad0"`
	Pad1  uint32 `msl:"_pad1"`
	Pad2  uint32 `msl:"_pad2"`
}

type routeArgs struct {
	Tokens    uint32 `msl:"tokens"`
	Experts   uint32 `msl:"experts"`
	TopK      uint32 `msl:"top_k"`
	NormTopK  uint32 `msl:"norm_topk"`
	StatsSlot uint32 `msl:"stats_slot"`
	Hidden    uint32 `msl:"hidden"`
	Pad1      uint32 `msl:"_pad1"`
	Pad2      uint32 `msl:"_pad2"`
}

type groupArgs struct {
	Pairs         uint32 `msl:"pairs"`
	Experts       uint32 `msl:"experts"`
	Chunk         uint32 `msl:"chunk"`
	TileRows      uint32 `msl:"tile_rows"`
	TilesPerChunk uint32 `msl:"tiles_per_chunk"`
	Pad0          uint32 `msl:"_pad0"`
	Pad1          uint32 `msl:"_pad1"`
	Pad2          uint32 `msl:"_pad2"`
}

type moeGemmArgs struct {
	N            uint32 `msl:"n"`
	K            uint32 `msl:"k"`
	TopK         uint32 `msl:"top_k"`
	Tiles        uint32 `msl:"tiles"`
	ExpertStride uint64 `msl:"expert_stride"`
	WOffset      uint64 `msl:"w_offset"`
	W2Offset     uint64 `msl:"w2_offset"`
	Experts      uint32 `msl:"experts"`
	// NormTopK, StatsSlot and Eps: moe_mv_pair's routing and folded norm.
	NormTopK  uint32  `msl:"norm_topk"`
	StatsSlot uint32  `msl:"stats_slot"`
	Eps       float32 `msl:"eps"`
	Pad0      uint32  `msl:"_pad0"`
	Pad1      uint32  `msl:"_pad1"`
}

type combineArgs struct {
	Tokens  uint32 `msl:"tokens"`
	Hidden  uint32 `msl:"hidden"`
	TopK    uint32 `msl:"top_k"`
	Experts uint32 `msl:"experts"`
}

// moeTileSize is sizeof(MoETile): expert, row0, rows, padding.
const moeTileSize = 16

// argStructs lists every struct with its C name, for the layout test.
var argStructs = map[string]any{
	"NormArgs": normArgs{}, "EltArgs": eltArgs{}, "EmbedArgs": embedArgs{}, "GatherArgs": gatherArgs{},
	"RopeArgs": ropeArgs{}, "MatArgs": matArgs{}, "FusedMVArgs": fusedMVArgs{}, "AttnArgs": attnArgs{}, "ArgmaxArgs": argmaxArgs{},
	"RouteArgs": routeArgs{}, "GroupArgs": groupArgs{}, "MoEGemmArgs": moeGemmArgs{}, "CombineArgs": combineArgs{},
}

// argBytes views v as the bytes setBytes copies, through the backend's
// scratch (no allocation per dispatch; the encoder copies the bytes).
func argBytes[T any](b *Backend, v T) []byte {
	n := unsafe.Sizeof(v)
	*(*T)(unsafe.Pointer(&b.argScratch[0])) = v
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.argScratch[0])), n)
}

type qMatArgs struct {
	M        uint32  `msl:"m"`
	N        uint32  `msl:"n"`
	K        uint32  `msl:"k"`
	RowBytes uint32  `msl:"row_bytes"`
	Groups   uint32  `msl:"groups"`
	TopK     uint32  `msl:"top_k"`
	Experts  uint32  `msl:"experts"`
	Pad0     uint32  `msl:"_pad0"`
	WStride  uint64  `msl:"w_stride"`
	SStride  uint64  `msl:"s_stride"`
	Eps      float32 `msl:"eps"`
	N1       uint32  `msl:"n1"`
	N2       uint32  `msl:"n2"`
	// GroupShift: log2 of an affine group's 32-value units (qGroupShift).
	GroupShift uint32 `msl:"group_shift"`
	// NormTopK and StatsSlot: qmoe_mv's routing (routeArgs' fields).
	NormTopK  uint32 `msl:"norm_topk"`
	StatsSlot uint32 `msl:"stats_slot"`
	Pad1      uint32 `msl:"_pad1"`
	Pad2      uint32 `msl:"_pad2"`
}

func init() { argStructs["QMatArgs"] = qMatArgs{} }
