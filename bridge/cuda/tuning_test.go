//go:build linux

package cuda_test

import "testing"

// The probe reads device memory at a rate between a PCIe link's and any
// HBM's.
func TestBandwidth(t *testing.T) {
	b := gpu(t)
	bw, err := b.MeasureBandwidth()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: read bandwidth %.0f GB/s", b.Info().Name, bw/1e9)
	if bw < 100e9 || bw > 20e12 {
		t.Errorf("read bandwidth %.3g B/s is implausible", bw)
	}
}
