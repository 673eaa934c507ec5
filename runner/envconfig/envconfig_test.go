package envconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mtlbench/mtlbench/bridge/cuda"
	"github.com/mtlbench/mtlbench/bridge/metal"
	"github.com/mtlbench/mtlbench/bridge/mtl/emu"
	"github.com/mtlbench/mtlbench/results"
)

func clean(t *testing.T) {
	for _, v := range Vars {
		t.Setenv(v.Name, "")
	}
}

func TestCUDAOptions(t *testing.T) {
	clean(t)
	if o, err := CUDA(); err != nil || o.Device != 0 || o.NoFuse || o.Prefetch || len(o.Libs) != 0 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	t.Setenv("MTLBENCH_CUDA_DEVICE", "2")
	t.Setenv("MTLBENCH_CUDA_FUSE", "0")
	t.Setenv("MTLBENCH_CUDA_GRAPHS", "off")
	t.Setenv("MTLBENCH_CUDA_STREAM", "1") // on: the default
	t.Setenv("MTLBENCH_CUDA_PREFETCH", "true")
	t.Setenv("MTLBENCH_CUDA_LIBS", "/a::/b")
	t.Setenv("MTLBENCH_CUDA_CACHE", "/c")
	o, err := CUDA()
	if err != nil {
		t.Fatal(err)
	}
	want := cuda.Options{Device: 2, NoFuse: true, NoGraphs: true, Prefetch: true, Libs: []string{"/a", "/b"}, CacheDir: "/c"}
	if o.Device != want.Device || o.NoFuse != want.NoFuse || o.NoGraphs != want.NoGraphs || o.NoStream ||
		o.Prefetch != want.Prefetch || !slices.Equal(o.Libs, want.Libs) || o.CacheDir != want.CacheDir {
		t.Fatalf("got %+v, want %+v", o, want)
	}
	t.Setenv("MTLBENCH_CUDA_DEVICE", "first")
	if _, err := CUDA(); err == nil {
		t.Fatal("a device that is not a number passed")
	}
}

// The Metal switches reach the backend's options; MTLBENCH_METAL_FAST_MATH
// is on unless turned off.
func TestMetalOptions(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want metal.Options
	}{
		{nil, metal.Options{}},
		{map[string]string{"MTLBENCH_METAL_FAST_MATH": "0"}, metal.Options{NoFastMath: true}},
		{map[string]string{"MTLBENCH_METAL_FAST_MATH": "off"}, metal.Options{NoFastMath: true}},
		{map[string]string{"MTLBENCH_METAL_FAST_MATH": "1"}, metal.Options{}},
		{map[string]string{"MTLBENCH_METAL_MSL": "3.0", "MTLBENCH_METAL_SERIAL": "1", "MTLBENCH_METAL_STREAM": "0"},
			metal.Options{LanguageVersion: "3.0", SerialDispatch: true, NoStream: true}},
	} {
		clean(t)
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		if got := Metal(); got != c.want {
			t.Errorf("%v: Metal() = %+v, want %+v", c.env, got, c.want)
		}
	}
}

func TestDBAndEmu(t *testing.T) {
	clean(t)
	if DB() != results.DefaultPath() {
		t.Errorf("DB() = %q, want the default", DB())
	}
	t.Setenv("MTLBENCH_DB", "/x/my.db")
	if DB() != "/x/my.db" {
		t.Errorf("DB() = %q", DB())
	}
	t.Setenv("MTLBENCH_EMU_CFLAGS", "-O0  -g")
	t.Setenv("MTLBENCH_CLANG", "clang++-21")
	if e, err := Emu(); err != nil || !slices.Equal(e.CFlags, []string{"-O0", "-g"}) || e.Clang != "clang++-21" || e.DispatchTimeout != 0 {
		t.Errorf("Emu() = %+v, %v", e, err)
	}
}

// MTLBENCH_EMU_TIMEOUT is the emulator's dispatch time limit: a duration,
// or 0 for none; anything else is refused, naming the variable.
func TestEmuTimeout(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, true}, {"5m", 5 * time.Minute, true}, {" 90s ", 90 * time.Second, true}, {"0", -1, true},
		{"0s", -1, true}, {"-3s", 0, false}, {"30", 0, false}, {"soon", 0, false},
	} {
		clean(t)
		t.Setenv("MTLBENCH_EMU_TIMEOUT", c.v)
		e, err := Emu()
		switch {
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "MTLBENCH_EMU_TIMEOUT")):
			t.Errorf("%q: got %v, want an error naming MTLBENCH_EMU_TIMEOUT", c.v, err)
		case c.ok && (err != nil || e.DispatchTimeout != c.want):
			t.Errorf("%q: got %v, %v; want %v", c.v, e.DispatchTimeout, err, c.want)
		}
	}
}

// MTLBENCH_EMU_REVERSE_LANES reaches the emulator's options; a value that
// is neither on nor off is refused, naming it.
func TestEmuReverseLanes(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"", false}, {"0", false}, {"1", true}, {"true", true}, {"off", false}} {
		clean(t)
		t.Setenv("MTLBENCH_EMU_REVERSE_LANES", c.v)
		if e, err := Emu(); err != nil || e.ReverseLanes != c.want {
			t.Errorf("%q: got %v, %v; want %v", c.v, e.ReverseLanes, err, c.want)
		}
	}
	clean(t)
	t.Setenv("MTLBENCH_EMU_REVERSE_LANES", "reverse")
	if err := Check(); err == nil || !strings.Contains(err.Error(), "MTLBENCH_EMU_REVERSE_LANES") {
		t.Errorf("Check() = %v, want an error naming MTLBENCH_EMU_REVERSE_LANES", err)
	}
}

func TestValuesSayTheSource(t *testing.T) {
	clean(t)
	t.Setenv("MTLBENCH_TUNED", "/t")
	t.Setenv("XDG_DATA_HOME", "/data")
	// A path default is shown as the path it resolves to here.
	paths := map[string]string{"MTLBENCH_DB": "/data/mtlbench/results.db", "MTLBENCH_HISTORY": "/data/mtlbench/history",
		"MTLBENCH_EMU_CACHE": emu.DefaultCacheDir(), "MTLBENCH_CUDA_CACHE": cuda.DefaultCacheDir()}
	for _, v := range Values() {
		want, source := v.Default, "default"
		switch {
		case v.Name == "MTLBENCH_TUNED":
			want, source = "/t", "environment"
		case paths[v.Name] != "":
			want = paths[v.Name]
		}
		if v.Value != want || v.Source != source {
			t.Errorf("%+v: want value %q from %s", v, want, source)
		}
	}
}

func TestUnknownNamePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Get of a name outside the table did not panic")
		}
	}()
	Get("MTLBENCH_NOT_IN_THE_TABLE")
}

// Every MTLBENCH_* name the module's Go files and docs mention is in the
// table, documented, and only this package reads the environment for one.
func TestTableCoversTheModule(t *testing.T) {
	names := map[string]bool{}
	for _, v := range Vars {
		if !strings.HasPrefix(v.Name, "MTLBENCH_") || v.Default == "" || v.Area == "" || v.Meaning == "" {
			t.Errorf("incomplete entry %+v", v)
		}
		if names[v.Name] {
			t.Errorf("%s twice", v.Name)
		}
		names[v.Name] = true
	}
	re := regexp.MustCompile(`MTLBENCH_[A-Z0-9_]*[A-Z0-9]`)
	read := regexp.MustCompile(`(os\.Getenv|os\.LookupEnv|getenv)\("MTLBENCH_`)
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".md") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllIndex(data, -1) {
			n := string(data[m[0]:m[1]])
			if strings.HasPrefix(string(data[m[1]:]), "_*") { // a family: MTLBENCH_CUDA_*
				continue
			}
			if !names[n] && n != "MTLBENCH_NOT_IN_THE_TABLE" {
				t.Errorf("%s mentions %s, which the table lacks", p, n)
			}
		}
		if read.Match(data) {
			t.Errorf("%s reads an MTLBENCH_ variable itself", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Check names each variable set to what mtlbench cannot take, and passes
// the values it can.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, value, want string
	}{
		{"MTLBENCH_METAL_SERIAL", "yes", `MTLBENCH_METAL_SERIAL="yes": want 1 or 0`},
		{"MTLBENCH_CUDA_GRAPHS", "nope", `MTLBENCH_CUDA_GRAPHS="nope"`},
		{"MTLBENCH_METAL_MSL", "3", `MTLBENCH_METAL_MSL="3": want a version such as 3.2 or 3.1 or 3.0`},
		{"MTLBENCH_METAL_MSL", "2.0", ""}, // Metal's to refuse: auto falls back
		{"MTLBENCH_CUDA_DEVICE", "-5", `MTLBENCH_CUDA_DEVICE="-5"`},
		{"MTLBENCH_TEST_SLOWDOWN", "abc", `MTLBENCH_TEST_SLOWDOWN="abc"`},
		{"MTLBENCH_EMU_TIMEOUT", "abc", `MTLBENCH_EMU_TIMEOUT="abc": want a duration`},
		// A negative duration, or a wait of 0, is a duration: the error
		// says which it wants, not "want a duration".
		{"MTLBENCH_EMU_TIMEOUT", "-1s", `MTLBENCH_EMU_TIMEOUT="-1s": want a duration of 0 or more`},
		{"MTLBENCH_DB_WAIT", "0", `MTLBENCH_DB_WAIT="0": want a duration above 0 such as 30s or 10m (unset: 2m0s)`},
		{"MTLBENCH_DB_WAIT", "-1s", `MTLBENCH_DB_WAIT="-1s": want a duration above 0`},
		{"MTLBENCH_DB_WAIT", "soon", `MTLBENCH_DB_WAIT="soon": want a duration above 0`},
		{"MTLBENCH_EMU_TIMEOUT", "0", ""},
		{"MTLBENCH_TUNED", "envconfig_test.go", `MTLBENCH_TUNED="envconfig_test.go": a file`},
		{"MTLBENCH_METAL_SERIAL", "on", ""},
		{"MTLBENCH_CUDA_GRAPHS", "0", ""},
		{"MTLBENCH_METAL_MSL", "3.1", ""},
		{"MTLBENCH_TUNED", t.TempDir(), ""},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			err := Check()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}

// A path variable's leading ~ or ~/ is the home folder, as the shell an
// environment file bypasses would have made it; ~name is refused by Check,
// naming the variable.
func TestPathVariablesExpandHome(t *testing.T) {
	clean(t)
	t.Setenv("HOME", "/home/u")
	t.Setenv("MTLBENCH_HISTORY", "~/h")
	t.Setenv("MTLBENCH_TUNED", "~")
	t.Setenv("MTLBENCH_EMU_CACHE", "~/cache/emu")
	t.Setenv("MTLBENCH_CUDA_LIBS", "~/lib:/opt/lib")
	if got := HistoryDir(); got != "/home/u/h" {
		t.Errorf("HistoryDir %q", got)
	}
	if got := TunedDir(); got != "/home/u" {
		t.Errorf("TunedDir %q", got)
	}
	if e, _ := Emu(); e.CacheDir != "/home/u/cache/emu" {
		t.Errorf("Emu().CacheDir %q", e.CacheDir)
	}
	if o, _ := CUDA(); !slices.Equal(o.Libs, []string{"/home/u/lib", "/opt/lib"}) {
		t.Errorf("CUDA().Libs %q", o.Libs)
	}
	if err := Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	// env shows the path the commands use.
	for _, v := range Values() {
		if v.Name == "MTLBENCH_HISTORY" && v.Value != "/home/u/h" {
			t.Errorf("Values: MTLBENCH_HISTORY %q", v.Value)
		}
	}
	t.Setenv("MTLBENCH_TUNED", "~bob/tuned")
	if err := Check(); err == nil || !strings.Contains(err.Error(), `MTLBENCH_TUNED="~bob/tuned": only ~ and ~/ are read as the home folder`) {
		t.Errorf("Check with ~bob: %v", err)
	}
}

// An unknown MTLBENCH_ variable is warned of, with the known name it is
// close to where there is one. The names are built so that
// TestTableCoversTheModule does not read them as names the module uses.
func TestUnknownWarnings(t *testing.T) {
	const p = "MTLBENCH_"
	for _, c := range []struct{ set, want string }{
		{p + "CUDA_CHIANS", "did you mean " + p + "CUDA_CHAINS?"},
		{p + "DBB", "did you mean " + p + "DB?"},
		{p + "metal_serial", "did you mean " + p + "METAL_SERIAL?"},
		{p + "ZZZQQQ", "(a misspelling?)"},
	} {
		t.Run(c.set, func(t *testing.T) {
			t.Setenv(c.set, "1")
			var got []string
			for _, w := range UnknownWarnings() {
				if strings.HasPrefix(w, "warning: "+c.set+" is set, but mtlbench reads no such variable") {
					got = append(got, w)
				}
			}
			if len(got) != 1 || !strings.Contains(got[0], c.want) {
				t.Errorf("got %q, want one warning of %s with %q", got, c.set, c.want)
			}
		})
	}
}
