package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// row is one side of one op: what its kernels' dispatches counted.
type row struct {
	Op, Shape, Impl string
	Kernels         string  // the kernels dispatched, "+" between
	MaxErr          float64 // against the Go reference
	Ideal           int64   // the op's ideal bytes (mtlbench's cost model), the same on both sides
	Stats           mtl.StepStats
	// SimdgroupsPerCore is against the table's GPU.
	SimdgroupsPerCore float64
}

// writeTable prints rows as one Markdown table, the columns of
// docs/metal-kernels.md's "The metrics".
func writeTable(w io.Writer, rows []row, gpu string) {
	fmt.Fprintf(w, "simdgroups per core of an %s; bytes in MB (10^6)\n\n", gpu)
	fmt.Fprintln(w, "| op | shape | kernel | dispatches | max abs err | ideal | counted | footprint | traffic eff | footprint eff | B/load | lanes/load | critical loads | simdgroups/core | barriers/TG |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		s := r.Stats
		fmt.Fprintf(w, "| %s | %s | %s: %s | %d | %.2g | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f | %.1f | %d | %.1f | %.1f |\n",
			r.Op, r.Shape, r.Impl, code(r.Kernels), s.Dispatches, r.MaxErr, mb(r.Ideal), mb(s.Bytes()), mb(s.Footprint()),
			s.TrafficEfficiency(r.Ideal), s.FootprintEfficiency(r.Ideal), s.BytesPerLoad(), s.LanesPerLoad(),
			s.CriticalLoads, r.SimdgroupsPerCore, s.BarriersPerThreadgroup())
	}
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// code quotes each kernel name for Markdown.
func code(kernels string) string {
	parts := strings.Split(kernels, "+")
	for i, p := range parts {
		parts[i] = "`" + p + "`"
	}
	return strings.Join(parts, "+")
}
