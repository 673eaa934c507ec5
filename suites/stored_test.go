package suites

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// A key stored before a keying rule changed is read as the case is keyed
// now, so a run stored then pairs with a new run of the case; two cases of
// one run never become one.
func TestStoredKeys(t *testing.T) {
	// The suite the old keys below were stored from, as it keys them now.
	s := mustParse(t, "name: s\nparams: {k: 64, width: 128}\ncases:\n  - name: norm\n    op: rms_norm\n  - name: mm\n    op: matmul\n    params: {m: 4, n: 32}\n")
	var now []string
	for _, c := range s.Cases {
		now = append(now, c.Key)
	}
	tests := []struct {
		name  string
		keys  []string
		vocab int
		want  []string
	}{
		{
			name: "a suite param the op does not read",
			keys: []string{"kernel/norm/k=64/op=rms_norm/width=128", "kernel/mm/k=64/m=4/n=32/op=matmul/width=128"},
			want: now,
		},
		{
			name: "a moe kernel case's moe_chunk beside loop",
			keys: []string{"kernel/m/moe_chunk=16/moe_strategy=loop/op=moe", "kernel/c/moe_chunk=16/op=moe"},
			want: []string{"kernel/m/moe_strategy=loop/op=moe", "kernel/c/moe_chunk=16/op=moe"},
		},
		{
			name:  "a top_k of the whole vocabulary",
			keys:  []string{"model/s/sampling=temperature:1,top_k:200000", "model/t/sampling=temperature:1,top_k:5"},
			vocab: 151936,
			want:  []string{"model/s/sampling=temperature:1", "model/t/sampling=temperature:1,top_k:5"},
		},
		{
			name: "a vocabulary the run does not record",
			keys: []string{"model/s/sampling=temperature:1,top_k:200000"},
			want: []string{"model/s/sampling=temperature:1,top_k:200000"},
		},
		{
			name: "two cases of one run that would become one",
			keys: []string{"kernel/norm/k=64/op=rms_norm", "kernel/norm/k=128/op=rms_norm", "kernel/x/op=rope", "kernel/x/k=1/op=rope"},
			want: []string{"kernel/norm/k=64/op=rms_norm", "kernel/norm/k=128/op=rms_norm", "kernel/x/op=rope", "kernel/x/k=1/op=rope"},
		},
		{
			// M3 Ultra is the default witness too: keyed as none.
			name: "a witness GPU's largest bin spelled with its cores",
			keys: []string{"kernel/g/op=rope/witness_gpu=M4-Max-40-core", "model/d/witness_gpu=M3-Ultra-80-core", "kernel/h/op=rope/witness_gpu=M4-Max-32-core"},
			want: []string{"kernel/g/op=rope/witness_gpu=M4-Max", "model/d", "kernel/h/op=rope/witness_gpu=M4-Max-32-core"},
		},
		{
			name: "two bins of one run that would become one",
			keys: []string{"kernel/g/op=rope/witness_gpu=M4-Max-40-core", "kernel/g/op=rope/witness_gpu=M4-Max"},
			want: []string{"kernel/g/op=rope/witness_gpu=M4-Max-40-core", "kernel/g/op=rope/witness_gpu=M4-Max"},
		},
		{
			name: "keys no suite makes",
			keys: []string{"", "batch=1,prompt_len=8", "kernel/g/op=nosuchop/k=1", "kernel/g/width", "peer/x/k=1"},
			want: []string{"", "batch=1,prompt_len=8", "kernel/g/op=nosuchop/k=1", "kernel/g/width", "peer/x/k=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StoredKeys(tt.keys, tt.vocab); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("StoredKeys(%q, %d):\n got %q\nwant %q", tt.keys, tt.vocab, got, tt.want)
			}
		})
	}
}

// A key this mtlbench makes is read as it is: every shipped suite's.
func TestStoredKeysKeepNewKeys(t *testing.T) {
	data, err := os.ReadFile("testdata/shipped-keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		_, key, _ := strings.Cut(line, " ")
		keys = append(keys, key)
	}
	if got := StoredKeys(keys, 151936); !reflect.DeepEqual(got, keys) {
		for i := range keys {
			if got[i] != keys[i] {
				t.Errorf("%s read as %s", keys[i], got[i])
			}
		}
	}
}

// A stored run's vocabulary is what its model cases recorded; cases that
// recorded none (kernel cases, runs stored before) do not count, and cases
// that disagree give none.
func TestRunVocab(t *testing.T) {
	for _, c := range []struct {
		name   string
		params []map[string]string
		want   int
	}{
		{"none", nil, 0},
		{"not recorded", []map[string]string{{"model": "qwen3_moe"}}, 0},
		{"model and kernel cases", []map[string]string{{"op": "rms_norm"}, {"vocab": "151936"}, {"vocab": "151936"}}, 151936},
		{"not a count", []map[string]string{{"vocab": "many"}, {"vocab": "-1"}}, 0},
		{"disagree", []map[string]string{{"vocab": "512"}, {"vocab": "8192"}}, 0},
	} {
		if got := RunVocab(c.params); got != c.want {
			t.Errorf("%s: RunVocab = %d, want %d", c.name, got, c.want)
		}
	}
}
