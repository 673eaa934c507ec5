// Package applegpu is the table of Apple silicon GPUs: GPU core count and
// memory bandwidth of each chip bin from M1 to M5, with where Apple
// published them. The emulator's cost witness reads launches against a
// chosen GPU's cores (docs/metal-kernels.md), and reports draw the
// bandwidth roofline of a documented machine.
package applegpu

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// GPU is one bin of an Apple chip: a chip sold with several GPU core counts
// has a row per count.
type GPU struct {
	Chip  string // "M3 Max": the chip as MTLDevice.name says it, without "Apple "
	Cores int    // GPU cores of this bin
	// BandwidthGBs is the unified memory bandwidth Apple states, in GB/s
	// (10^9 bytes per second).
	BandwidthGBs float64
	Source       string // Apple's page stating the figures
	Note         string // where a figure is derived rather than stated
}

// Name is the GPU's MTLDevice.name, e.g. "Apple M3 Ultra".
func (g GPU) Name() string { return "Apple " + g.Chip }

// Label names the bin so that Lookup finds this bin again: its Name for
// the chip's largest bin, which Lookup gives for the chip alone, and with
// its core count for another ("Apple M4 Max 32-core", 410 GB/s, where
// "Apple M4 Max" is the 40-core 546 GB/s bin). Witness figures record it
// (docs/metal-kernels.md, "Which Mac").
func (g GPU) Label() string {
	if bins := Bins(g.Chip); len(bins) > 0 && bins[len(bins)-1].Cores == g.Cores {
		return g.Name()
	}
	return g.Name() + " " + strconv.Itoa(g.Cores) + "-core"
}

// BytesPerSecond is the memory bandwidth in bytes per second.
func (g GPU) BytesPerSecond() float64 { return g.BandwidthGBs * 1e9 }

// SecondsFor is the least time moving bytes through memory takes on this
// GPU: the bandwidth roofline of a memory-bound kernel or decode step.
func (g GPU) SecondsFor(bytes int64) float64 { return float64(bytes) / g.BytesPerSecond() }

// SimdgroupsPerCore is simdgroups launched (mtl.Cost.Simdgroups) per GPU
// core; a dispatch under about 2 leaves cores idle or unable to hide memory
// latency.
func (g GPU) SimdgroupsPerCore(simdgroups int64) float64 {
	if g.Cores == 0 {
		return 0
	}
	return float64(simdgroups) / float64(g.Cores)
}

const (
	srcM1      = "https://www.apple.com/newsroom/2020/11/apple-unleashes-m1/"
	srcM1ProMx = "https://www.apple.com/newsroom/2021/10/introducing-m1-pro-and-m1-max-the-most-powerful-chips-apple-has-ever-built/"
	srcM1Ultra = "https://www.apple.com/newsroom/2022/03/apple-unveils-m1-ultra-the-worlds-most-powerful-chip-for-a-personal-computer/"
	srcM2      = "https://www.apple.com/newsroom/2022/06/apple-unveils-m2-with-breakthrough-performance-and-capabilities/"
	srcM2ProMx = "https://www.apple.com/newsroom/2023/01/apple-unveils-m2-pro-and-m2-max-next-generation-chips-for-next-level-workflows/"
	srcM2Ultra = "https://www.apple.com/newsroom/2023/06/apple-introduces-m2-ultra/"
	srcM3      = "https://www.apple.com/newsroom/2023/10/apple-unveils-m3-m3-pro-and-m3-max-the-most-advanced-chips-for-a-personal-computer/"
	srcM3Ultra = "https://www.apple.com/newsroom/2025/03/apple-reveals-m3-ultra-taking-apple-silicon-to-a-new-extreme/"
	srcM4      = "https://www.apple.com/newsroom/2024/05/apple-introduces-m4-chip/"
	srcM4ProMx = "https://www.apple.com/newsroom/2024/10/apple-introduces-m4-pro-and-m4-max/"
	srcM5      = "https://www.apple.com/newsroom/2025/10/apple-unleashes-m5-the-next-big-leap-in-ai-performance-for-apple-silicon/"
	srcM5ProMx = "https://www.apple.com/newsroom/2026/03/apple-debuts-m5-pro-and-m5-max-to-supercharge-the-most-demanding-pro-workflows/"

	noteM1     = "bandwidth not stated for M1: LPDDR4X-4266 on a 128-bit bus; Apple's M2 page calls its 100GB/s 50% more than M1"
	noteBins   = "per-bin bandwidth from the tech specs of the Macs with this chip; the newsroom page states the largest bin"
	noteUltra3 = "the newsroom page says over 800GB/s; Mac Studio (2025) tech specs state 819GB/s"
	noteBase   = "the smaller bin ships in MacBook Air and iMac configurations (their tech specs)"
	noteTop    = "the newsroom page states the largest bin only; the smaller bins are left out until their bandwidth is stated"
)

// Table lists every bin, by generation, then tier, then cores.
var Table = []GPU{
	{"M1", 7, 68.25, srcM1, noteM1 + "; " + noteBase},
	{"M1", 8, 68.25, srcM1, noteM1},
	{"M1 Pro", 14, 200, srcM1ProMx, ""},
	{"M1 Pro", 16, 200, srcM1ProMx, ""},
	{"M1 Max", 24, 400, srcM1ProMx, ""},
	{"M1 Max", 32, 400, srcM1ProMx, ""},
	{"M1 Ultra", 48, 800, srcM1Ultra, ""},
	{"M1 Ultra", 64, 800, srcM1Ultra, ""},
	{"M2", 8, 100, srcM2, noteBase},
	{"M2", 10, 100, srcM2, ""},
	{"M2 Pro", 16, 200, srcM2ProMx, ""},
	{"M2 Pro", 19, 200, srcM2ProMx, ""},
	{"M2 Max", 30, 400, srcM2ProMx, ""},
	{"M2 Max", 38, 400, srcM2ProMx, ""},
	{"M2 Ultra", 60, 800, srcM2Ultra, ""},
	{"M2 Ultra", 76, 800, srcM2Ultra, ""},
	{"M3", 8, 100, srcM3, noteBase},
	{"M3", 10, 100, srcM3, ""},
	{"M3 Pro", 14, 150, srcM3, noteBins},
	{"M3 Pro", 18, 150, srcM3, noteBins},
	{"M3 Max", 30, 300, srcM3, noteBins},
	{"M3 Max", 40, 400, srcM3, noteBins},
	{"M3 Ultra", 60, 819, srcM3Ultra, noteUltra3},
	{"M3 Ultra", 80, 819, srcM3Ultra, noteUltra3},
	{"M4", 8, 120, srcM4, noteBase},
	{"M4", 10, 120, srcM4, ""},
	{"M4 Pro", 16, 273, srcM4ProMx, ""},
	{"M4 Pro", 20, 273, srcM4ProMx, ""},
	{"M4 Max", 32, 410, srcM4ProMx, noteBins},
	{"M4 Max", 40, 546, srcM4ProMx, noteBins},
	{"M5", 10, 153, srcM5, ""},
	{"M5 Pro", 20, 307, srcM5ProMx, noteTop},
	{"M5 Max", 40, 614, srcM5ProMx, noteTop},
}

// Chips lists each chip of the table once, in the table's order: the names
// a GPU may be given by ("M4 Max"), for help and error messages.
func Chips() []string {
	var out []string
	for _, g := range Table {
		if len(out) == 0 || out[len(out)-1] != g.Chip {
			out = append(out, g.Chip)
		}
	}
	return out
}

// nameRE reads "Apple M3 Max", "m3 max", "M3 Max (30-core GPU)" or
// "M3 Max 30-core"; parse turns hyphens and underscores ("M3-Max") into
// spaces first.
var nameRE = regexp.MustCompile(`^(?:apple\s+)?(m\d+)(?:\s+(pro|max|ultra))?(?:\s*\(?\s*(\d+)[- ]?cores?\b.*)?$`)

// parse splits a GPU name into its chip ("M3 Max") and core count (0: not
// given).
func parse(name string) (chip string, cores int, ok bool) {
	name = strings.NewReplacer("-", " ", "_", " ").Replace(name)
	m := nameRE.FindStringSubmatch(strings.ToLower(strings.Join(strings.Fields(name), " ")))
	if m == nil {
		return "", 0, false
	}
	chip = strings.ToUpper(m[1])
	if m[2] != "" {
		chip += " " + strings.ToUpper(m[2][:1]) + m[2][1:]
	}
	if m[3] != "" {
		cores, _ = strconv.Atoi(m[3])
	}
	return chip, cores, true
}

// ChipOf is the chip a GPU name names ("Apple M4 Max 32-core": "M4 Max"),
// whether or not the table has it; false when the name names no chip.
func ChipOf(name string) (string, bool) {
	chip, _, ok := parse(name)
	return chip, ok
}

// Key spells a GPU name one way, without spaces, for case names and keys:
// "Apple M3 Ultra" and "m3 ultra" give "M3-Ultra", "M4 Max (32-core GPU)"
// gives "M4-Max-32-core"; "" when the name names no chip. The chip's
// largest bin is the chip alone, as Lookup reads it ("M3 Ultra 80-core" is
// "M3-Ultra"), so one GPU keys one way.
func Key(name string) string {
	chip, cores, ok := parse(name)
	if !ok {
		return ""
	}
	k := strings.ReplaceAll(chip, " ", "-")
	if bins := Bins(chip); len(bins) > 0 && bins[len(bins)-1].Cores == cores {
		cores = 0
	}
	if cores > 0 {
		k += "-" + strconv.Itoa(cores) + "-core"
	}
	return k
}

// Bins lists a chip's bins, fewest cores first. The name is matched without
// regard to case, with or without "Apple " ("Apple M3 Ultra", "m3 ultra");
// a core count in it ("M3 Max 30-core") keeps that bin only.
func Bins(name string) []GPU {
	chip, cores, ok := parse(name)
	if !ok {
		return nil
	}
	var out []GPU
	for _, g := range Table {
		if g.Chip == chip && (cores == 0 || g.Cores == cores) {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Cores < out[b].Cores })
	return out
}

// Lookup finds a GPU by name as Bins reads it. Without a core count it
// gives the chip's largest bin, the one the documented machines (an M3
// Ultra with 80 cores) have and the one Apple's headline figures describe.
func Lookup(name string) (GPU, bool) {
	bins := Bins(name)
	if len(bins) == 0 {
		return GPU{}, false
	}
	return bins[len(bins)-1], true
}

// LookupCores finds the bin of a chip with the given GPU core count, as a
// Mac reports it (system_profiler's "Total Number of Cores").
func LookupCores(name string, cores int) (GPU, bool) {
	for _, g := range Bins(name) {
		if g.Cores == cores {
			return g, true
		}
	}
	return GPU{}, false
}

// ForDevice is the bin of the GPU a Mac reports: its MTLDevice.name
// ("Apple M4 Max") and the IORegistry's GPU core count (0: unknown). A
// count the chip has a bin for picks that bin; an unknown count, or one
// no bin of the chip has (a bin the table lacks), gives Lookup's default
// bin with a note saying so, never another bin's figures as this GPU's.
// false where the name names no chip of the table.
func ForDevice(name string, cores int) (g GPU, note string, ok bool) {
	def, ok := Lookup(name)
	if !ok {
		return GPU{}, "", false
	}
	if cores <= 0 {
		return def, "GPU core count unknown: figures of the " + strconv.Itoa(def.Cores) + "-core bin", true
	}
	if b, ok := LookupCores(name, cores); ok {
		return b, "", true
	}
	return def, "no " + strconv.Itoa(cores) + "-core bin of the " + def.Chip + " in the table: figures of the " +
		strconv.Itoa(def.Cores) + "-core bin", true
}
