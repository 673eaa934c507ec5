package applegpu

import (
	"slices"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name  string
		chip  string
		cores int
		gbs   float64
	}{
		{"Apple M3 Ultra", "M3 Ultra", 80, 819},
		{"apple m3 ultra", "M3 Ultra", 80, 819},
		{"M3 Ultra", "M3 Ultra", 80, 819},
		{"  Apple   M4 Max ", "M4 Max", 40, 546},
		{"Apple M4 Max 32-core", "M4 Max", 32, 410},
		{"Apple M3 Max (30-core GPU)", "M3 Max", 30, 300},
		{"Apple M1", "M1", 8, 68.25},
		{"Apple M2 Pro", "M2 Pro", 19, 200},
		{"Apple M1 Ultra", "M1 Ultra", 64, 800},
		{"Apple M5", "M5", 10, 153},
		{"M5 Max", "M5 Max", 40, 614},
		{"m5 pro 20-core", "M5 Pro", 20, 307},
		{"M3-Ultra", "M3 Ultra", 80, 819},
		{"M4_Max-32-core", "M4 Max", 32, 410},
	} {
		g, ok := Lookup(c.name)
		if !ok || g.Chip != c.chip || g.Cores != c.cores || g.BandwidthGBs != c.gbs {
			t.Errorf("Lookup(%q) = %+v, %v; want %s with %d cores at %v GB/s", c.name, g, ok, c.chip, c.cores, c.gbs)
		}
	}
	for _, name := range []string{"", "Apple M9 Max", "NVIDIA H100", "Apple M3 Max 31-core", "M5 Pro 16-core", "msl-emu (Apple GPU emulated on the CPU)"} {
		if g, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v, want none", name, g)
		}
	}
	if g, ok := LookupCores("Apple M3 Ultra", 60); !ok || g.Cores != 60 || g.BandwidthGBs != 819 {
		t.Errorf("LookupCores(M3 Ultra, 60) = %+v, %v", g, ok)
	}
	if bins := Bins("M2 Max"); len(bins) != 2 || bins[0].Cores != 30 || bins[1].Cores != 38 {
		t.Errorf("Bins(M2 Max) = %+v", bins)
	}
}

// TestTable checks every family and tier the table promises is there, each
// row with an Apple source, and bins listed in order.
func TestTable(t *testing.T) {
	want := []string{"M1", "M1 Pro", "M1 Max", "M1 Ultra", "M2", "M2 Pro", "M2 Max", "M2 Ultra",
		"M3", "M3 Pro", "M3 Max", "M3 Ultra", "M4", "M4 Pro", "M4 Max", "M5", "M5 Pro", "M5 Max"}
	if got := Chips(); !slices.Equal(got, want) {
		t.Errorf("Chips() = %q,\nwant %q", got, want)
	}
	rows := 0
	for _, chip := range want {
		bins := Bins("Apple " + chip)
		if len(bins) == 0 {
			t.Errorf("no row for %s", chip)
		}
		rows += len(bins)
		for _, g := range bins {
			if g.Cores <= 0 || g.BandwidthGBs <= 0 || !strings.HasPrefix(g.Source, "https://www.apple.com/") {
				t.Errorf("%s: bad row %+v", chip, g)
			}
			if got, _ := LookupCores(g.Name(), g.Cores); got != g {
				t.Errorf("LookupCores(%q, %d) = %+v", g.Name(), g.Cores, got)
			}
			if got, ok := Lookup(g.Label()); !ok || got != g {
				t.Errorf("Lookup(%q) = %+v, %v; want the bin it labels, %+v", g.Label(), got, ok, g)
			}
		}
	}
	if len(Table) != rows {
		t.Errorf("%d rows, %d of them found by chip", len(Table), rows)
	}
}

func TestDerived(t *testing.T) {
	g, _ := Lookup("Apple M3 Ultra")
	if got := g.SimdgroupsPerCore(16); got != 0.2 {
		t.Errorf("16 simdgroups on 80 cores: %v per core, want 0.2", got)
	}
	if got := g.SecondsFor(819e6); got != 1e-3 {
		t.Errorf("SecondsFor(819 MB) = %v, want 1 ms", got)
	}
}

func TestKey(t *testing.T) {
	for name, want := range map[string]string{
		"Apple M3 Ultra": "M3-Ultra", "m3 ultra": "M3-Ultra", "M3-Ultra": "M3-Ultra",
		"M4 Max (32-core GPU)": "M4-Max-32-core", "Apple M1": "M1", "M9 Max": "M9-Max", "H100": "",
		// The largest bin is the chip alone, as Lookup reads it: one GPU,
		// one key.
		"M4 Max 40-core": "M4-Max", "M3 Ultra (80-core GPU)": "M3-Ultra", "M3-Ultra-80-core": "M3-Ultra",
		"M1 8-core": "M1", "M1 7-core": "M1-7-core", "M9 Max 12-core": "M9-Max-12-core",
	} {
		if got := Key(name); got != want {
			t.Errorf("Key(%q) = %q, want %q", name, got, want)
		}
		if g, ok := Lookup(name); ok && Key(name) != "" {
			if k, _ := Lookup(Key(name)); k != g {
				t.Errorf("Lookup(Key(%q)) = %+v, want %+v", name, k, g)
			}
		}
	}
}

// TestForDevice picks the bin of a device's name and core count, and falls
// back to the chip's default bin, with a note, where the count is unknown
// or names no bin.
func TestForDevice(t *testing.T) {
	for _, c := range []struct {
		name      string
		cores     int
		wantCores int
		gbs       float64
		note      string // a part of the note; "" wants none
		ok        bool
	}{
		{"Apple M4 Max", 32, 32, 410, "", true},
		{"Apple M4 Max", 40, 40, 546, "", true},
		{"Apple M4 Max", 0, 40, 546, "core count unknown", true},
		{"Apple M4 Max", 36, 40, 546, "no 36-core bin of the M4 Max", true},
		{"Apple M3 Ultra", 60, 60, 819, "", true},
		{"Apple M1", 7, 7, 68.25, "", true},
		{"Apple M9", 10, 0, 0, "", false},
		{"msl-emu (Apple GPU emulated on the CPU)", 80, 0, 0, "", false},
	} {
		g, note, ok := ForDevice(c.name, c.cores)
		if ok != c.ok || g.Cores != c.wantCores || g.BandwidthGBs != c.gbs ||
			(c.note == "") != (note == "") || !strings.Contains(note, c.note) {
			t.Errorf("ForDevice(%q, %d) = %d cores, %v GB/s, %q, %v; want %d cores, %v GB/s, a note with %q, %v",
				c.name, c.cores, g.Cores, g.BandwidthGBs, note, ok, c.wantCores, c.gbs, c.note, c.ok)
		}
	}
}
