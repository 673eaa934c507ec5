package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
)

// A compiler's whole log does not become a table cell: the first error and
// what to install do.
func TestBackendStatusIsShort(t *testing.T) {
	log := strings.Repeat("kernels/x.metal:12:5: error: cannot convert 'bfloat' to 'float'\n  note: candidate...\n", 500)
	for _, err := range []error{
		fmt.Errorf("metal: %w", &emu.CompileError{Msg: log}),
		fmt.Errorf("metal: compiling the kernels: MSL 3.2, 3.1, 3.0: %s", strings.SplitN(log, "\n", 2)[0]),
	} {
		got := backendStatus("metal-emu", err)
		if len(got) > maxStatus {
			t.Errorf("status is %d bytes", len(got))
		}
		for _, want := range []string{"x.metal:12:5: error: cannot convert", "clang-19", "MTLBENCH_CLANG"} {
			if !strings.Contains(got, want) {
				t.Errorf("status %q lacks %q", got, want)
			}
		}
	}
	if got := backendStatus("cuda", errors.New("cuda: no driver\nsecond line")); got != "cuda: no driver (more: mtlbench selftest --backend cuda)" {
		t.Errorf("multi-line status: %q", got)
	}
}

// A device that reports no core count shows "-", never a 0 that reads as
// a device without cores.
func TestDeviceRowCores(t *testing.T) {
	for _, c := range []struct {
		name string
		in   bridge.DeviceInfo
		want string
	}{
		{"cpu", bridge.DeviceInfo{Backend: "cpu", Name: "Apple M2 Pro", Cores: 12}, "12"},
		{"cuda", bridge.DeviceInfo{Backend: "cuda", Name: "NVIDIA H100", Cores: 132}, "132"},
		{"metal", bridge.DeviceInfo{Backend: "metal", Name: "Apple M2 Pro"}, "-"},
		{"metal-emu", bridge.DeviceInfo{Backend: "metal-emu", Name: "msl-emu (Apple GPU emulated on the CPU)", Emulated: true}, "-"},
	} {
		if got := deviceRow(c.name, c.in)[2]; got != c.want {
			t.Errorf("%s: cores %q, want %q", c.name, got, c.want)
		}
	}
	// Every backend this machine opens, through the command.
	out, _, err := mtl(t, "devices", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		if r[2] == "0" {
			t.Errorf("devices row %q shows 0 cores", r)
		}
	}
}

// devices --format json gives a backend it cannot open null where the
// table prints "-": cores and the sizes in bytes are a number or null in
// every row, never "-" or "23.5 GiB".
func TestDevicesJSONMissingIsNull(t *testing.T) {
	for _, f := range []string{"json", "jsonl"} {
		out, _, err := mtl(t, "devices", "--format", f)
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if f == "json" {
			err = json.Unmarshal([]byte(out), &rows)
		} else {
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var r map[string]any
				if err = json.Unmarshal([]byte(l), &r); err != nil {
					break
				}
				rows = append(rows, r)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", f, err, out)
		}
		for _, r := range rows {
			// Sizes are bytes, as models gives them, not the table's "23.5 GiB".
			for _, k := range []string{"cores", "memory_bytes", "available_bytes"} {
				v, ok := r[k]
				switch v.(type) {
				case float64, nil:
				default:
					ok = false
				}
				if !ok {
					t.Errorf("%s: %s's %s is %#v, want a number or null", f, r["backend"], k, v)
				}
			}
			if r["backend"] == "cpu" && r["memory_bytes"] == nil {
				t.Errorf("%s: the cpu backend's memory is not given: %v", f, r)
			}
			for k, v := range r {
				if v == "-" {
					t.Errorf("%s: %s's %s is \"-\", want null", f, r["backend"], k)
				}
			}
		}
	}
}

// devices --pipelines writes its two tables as one document in each data
// format: a json array of titled tables, csv with a "# title" line before
// each.
func TestDevicesPipelinesFormats(t *testing.T) {
	if _, err := emu.FindCompiler(""); err != nil {
		t.Skip("no pipeline limits without a Metal backend:", err)
	}
	for _, c := range []struct {
		format string
		check  func(out string) error
	}{
		{"json", func(out string) error {
			var docs []struct {
				Title string           `json:"title"`
				Rows  []map[string]any `json:"rows"`
			}
			if err := json.Unmarshal([]byte(out), &docs); err != nil {
				return err
			}
			if len(docs) != 2 || docs[0].Title != "devices" || docs[1].Title != "pipelines" || len(docs[1].Rows) == 0 {
				return fmt.Errorf("want the devices and pipelines tables, got %+v", docs)
			}
			return nil
		}},
		{"csv", func(out string) error {
			r := csv.NewReader(strings.NewReader(out))
			r.Comment, r.FieldsPerRecord = '#', -1
			if _, err := r.ReadAll(); err != nil {
				return err
			}
			if !strings.HasPrefix(out, "# devices\n") || !strings.Contains(out, "\n# pipelines\n") {
				return fmt.Errorf("no title line before each table:\n%s", out)
			}
			return nil
		}},
		{"jsonl", func(out string) error {
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if err := json.Unmarshal([]byte(l), new(map[string]any)); err != nil {
					return fmt.Errorf("%q: %v", l, err)
				}
			}
			return nil
		}},
	} {
		out, _, err := mtl(t, "devices", "--pipelines", "--format", c.format)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.check(out); err != nil {
			t.Errorf("--format %s: %v", c.format, err)
		}
	}
}

// A device's status gives its notes and what opening it took in this
// process (CUDA's kernel compile), which runs do not record.
func TestDeviceRowStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		in   bridge.DeviceInfo
		want string
	}{
		{"cpu", bridge.DeviceInfo{Backend: "cpu", Notes: "simd: avx2+fma+f16c"}, "ok; simd: avx2+fma+f16c"},
		{"cuda", bridge.DeviceInfo{Backend: "cuda", Notes: "sm_90, 132 SMs, graphs off", Startup: "kernels from cache"},
			"ok; sm_90, 132 SMs, graphs off; kernels from cache"},
		{"metal-emu", bridge.DeviceInfo{Backend: "metal-emu", Emulated: true, Notes: "MSL 3.1, fast math off"},
			"ok (emulated: timings are not comparable with real ones); MSL 3.1, fast math off"},
		{"none", bridge.DeviceInfo{Backend: "cpu"}, "ok"},
	} {
		if got := deviceRow(c.name, c.in)[5]; got != c.want {
			t.Errorf("%s: status %q, want %q", c.name, got, c.want)
		}
	}
}

// devices --backend lists that backend alone and opens no other (metal-emu's
// first open compiles its kernels for minutes); a name of no backend is
// refused with the names there are.
func TestDevicesOneBackend(t *testing.T) {
	for _, tc := range []struct {
		backend, want string
	}{
		{"cpu", ""},
		{"auto", `--backend "auto": want cpu, metal, metal-emu or cuda`},
		{"cpuu", `--backend "cpuu": want cpu, metal, metal-emu or cuda (did you mean "cpu"?)`},
	} {
		out, _, err := mtl(t, "devices", "--backend", tc.backend, "--format", "json")
		if tc.want != "" {
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--backend %s: exit %d, %v; want %q", tc.backend, exitCode(err), err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var rows []struct {
			Backend string  `json:"backend"`
			Device  *string `json:"device"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(rows) != 1 || rows[0].Backend != tc.backend || rows[0].Device == nil {
			t.Errorf("--backend %s: rows %+v, want that backend's alone, opened\n%s", tc.backend, rows, out)
		}
	}
}
