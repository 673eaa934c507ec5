package selftest

import (
	"os"
	"strings"
	"testing"

	"github.com/mtlbench/mtlbench/bridge"
	"github.com/mtlbench/mtlbench/bridge/cpu"
	"github.com/mtlbench/mtlbench/suites"
)

func TestCPUPassesEveryCheck(t *testing.T) {
	rs, err := Run(cpu.New(cpu.Options{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 150 {
		t.Fatalf("only %d checks", len(rs))
	}
	failed := Failed(rs)
	for _, r := range rs {
		if !r.Passed() {
			t.Errorf("%s %s: %v", r.Case, r.Shape, r.Err)
		}
	}
	if failed != 0 {
		t.Fatalf("%d checks failed", failed)
	}
}

// A backend with a broken op fails the selftest.
type brokenNorm struct{ *cpu.Backend }

func (b brokenNorm) RMSNorm(out, x, w bridge.Tensor, eps float32) {
	b.Backend.RMSNorm(out, x, w, eps*1e6+1)
}

func TestBrokenBackendFails(t *testing.T) {
	rs, err := Run(brokenNorm{cpu.New(cpu.Options{})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Failed(rs) == 0 {
		t.Fatal("a broken RMSNorm passed the selftest")
	}
}

// The model-shape checks, timed and checked again, on the CPU: every one
// must pass there, so a failure on a GPU is the GPU's.
func TestCPUPassesModelShapes(t *testing.T) {
	cases, err := ModelCases()
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() || os.Getenv("CI") != "" {
		// The largest shapes take half a minute of reference loops.
		small := cases[:0]
		for _, c := range cases {
			if !matches(c, "experts=128 |n=151936 |width=151936 |context=1000 |tokens=128 |n=5120 |k=4096 ") {
				small = append(small, c)
			}
		}
		cases = small
	}
	o := Options{Timed: true}
	rs, err := RunCases(cpu.New(cpu.Options{}), cases, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 {
		t.Fatal("no checks ran")
	}
	for _, r := range rs {
		if r.Skipped || r.UsPerCall <= 0 {
			t.Errorf("%s %s: not timed (%v)", r.Case, r.Shape, r.Err)
		}
	}
	if err := Err(rs); err != nil {
		t.Fatal(err)
	}
}

func TestFilter(t *testing.T) {
	cases, err := ModelCases()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := RunCases(cpu.New(cpu.Options{}), cases, Options{Filter: "argmax-1 |add-rms-norm-2 "}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Case)
	}
	if strings.Join(got, ",") != "add-rms-norm-2,argmax-1" {
		t.Fatalf("filter kept %v", got)
	}
}

// dropsBias runs matmul and qmatmul as if no bias were given, as a kernel
// that ignores its bias binding would.
type dropsBias struct{ *cpu.Backend }

func (b dropsBias) MatMul(out, x, w, _ bridge.Tensor)  { b.Backend.MatMul(out, x, w, nil) }
func (b dropsBias) QMatMul(out, x, w, _ bridge.Tensor) { b.Backend.QMatMul(out, x, w, nil) }

// The selftest holds biased GEMVs and GEMMs, float and packed, to the
// reference: the CPU passes them and a backend that drops the bias fails
// each shape.
func TestBiasedMatMuls(t *testing.T) {
	for _, tc := range []struct {
		name, shape string
	}{
		{"matmul-bias", "matmul m=1 "},
		{"matmul-bias", "matmul m=16 "},
		{"qmatmul-bias", "qmatmul m=1 "},
		{"qmatmul-bias", "qmatmul m=16 "},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			for _, be := range []struct {
				b    bridge.Backend
				fail bool
			}{{cpu.New(cpu.Options{}), false}, {dropsBias{cpu.New(cpu.Options{})}, true}} {
				rs, err := RunWith(be.b, Options{Filter: "bias=1"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, r := range rs {
					if !strings.HasPrefix(r.Case, tc.name+"/") || !strings.HasPrefix(r.Shape, tc.shape) {
						continue
					}
					n++
					if !strings.HasSuffix(r.Shape, " bias") {
						t.Errorf("%s: shape does not say bias", r.Shape)
					}
					if r.Passed() == be.fail {
						t.Errorf("%T: %s passed=%v (err %v)", be.b, r.Shape, r.Passed(), r.Err)
					}
				}
				if n == 0 {
					t.Fatalf("no %s check of %q", tc.name, tc.shape)
				}
			}
		})
	}
}

// A --filter part that names one parameter's value keeps the checks that
// key as it, so a default (tokens 1, dtype bf16) keeps the checks that
// leave it out as those that write it: it kept only those that wrote it.
// Other parts stay substrings of "name op k=v ...".
func TestFilterMatchesDefaultsLeftOut(t *testing.T) {
	s, err := suites.Parse("filter.yaml", []byte(`name: filter
cases:
  - name: left-out
    op: embedding
    params: { n: 100, width: 64 }
  - name: written
    op: embedding
    params: { n: 100, width: 64, tokens: 1, dtype: bf16 }
  - name: other
    op: embedding
    params: { n: 100, width: 96, tokens: 3, dtype: f32 }
`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Replace(s.Cases[0].Key, "/left-out/", "/written/", 1) != s.Cases[1].Key {
		t.Fatalf("%s and %s key apart", s.Cases[0].Key, s.Cases[1].Key)
	}
	for _, tc := range []struct{ filter, want string }{
		{"tokens=1", "left-out,written"},
		{"tokens=1 ", "left-out,written"},
		{" tokens=1 ", "left-out,written"},
		{"tokens=0x1", "left-out,written"},
		{"dtype=bf16 ", "left-out,written"},
		{"tokens=3 ", "other"},
		{"dtype=f32", "other"},
		{"width=64 |tokens=3", "left-out,written,other"},
		{"width=6", "left-out,written"}, // a substring, as before
		{"written", "written"},
		{"embedding dtype=bf16", "written"}, // more than one k=v: a substring only
		{"tokens=2", ""},
		{"layers=1", ""}, // no parameter of the op
	} {
		rs, err := RunCases(cpu.New(cpu.Options{}), s.Cases, Options{Filter: tc.filter}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Case)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("--filter %q kept %v, want %s", tc.filter, got, tc.want)
		}
	}
}
