package suites

import (
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/bridge/mtl/applegpu"
	"github.com/mtlbench/mtlbench/kernels/ops"
)

// RecordedVocab is the parameter a model case records its model's
// vocabulary in (beside model, dtype and seed): StoredKeys' vocab when the
// run's keys are read back. Runs stored before it record none.
const RecordedVocab = "vocab"

// RunVocab is the vocabulary a stored run's model cases recorded
// (RecordedVocab), given each case's recorded parameters; 0 when none did,
// or when they disagree.
func RunVocab(params []map[string]string) int {
	vocab := 0
	for _, p := range params {
		v, err := strconv.Atoi(p[RecordedVocab])
		if err != nil || v <= 0 {
			continue
		}
		if vocab != 0 && v != vocab {
			return 0
		}
		vocab = v
	}
	return vocab
}

// StoredKeys are the case keys of one stored run, as an earlier mtlbench
// may have written them, spelled as this one keys those cases, so that
// compare, gate and a resume pair them with the cases of new runs. The
// keying rules they are read by are expansion's and Vocabulary's own:
//
//   - a kernel case holds only the parameters its op reads (reads): a run
//     stored before keyed rms_norm under a suite's params {k: 64} with
//     k=64;
//   - where vocab, the run's model's vocabulary, is known (above 0), a
//     model case's sampling leaves out a top_k of vocab or more;
//   - a witness_gpu of its chip's largest bin is the chip alone
//     (applegpu.Key): a run stored before keyed "M4 Max 40-core" as
//     M4-Max-40-core, which "M4 Max" runs too;
//   - a parameter at its default is left out (keyDefaults): a run stored
//     before keyed a suite's batch: 1 as batch=1, which a case without
//     a batch runs too.
//
// The stored rows keep the keys they were written with. A key that is not
// one a suite makes (a peer import's) is returned as it is, and so are the
// keys that would become one, or another case's of the run: two cases of
// one run are never pooled as one.
func StoredKeys(keys []string, vocab int) []string {
	out := make([]string, len(keys))
	n := make(map[string]int, len(keys))
	for i, k := range keys {
		out[i] = storedKey(k, vocab)
		n[out[i]]++
	}
	for i, k := range keys {
		if out[i] != k && n[out[i]] > 1 {
			out[i] = k
		}
	}
	return out
}

// RunKeys are the keys of one stored run's cases read as StoredKeys reads
// them, a top_k against the vocabulary the run recorded (RunVocab), given
// each case's key and recorded parameters: how compare, gate and show read
// a stored run.
func RunKeys(keys []string, params []map[string]string) []string {
	return StoredKeys(keys, RunVocab(params))
}

// storedKey is StoredKeys' rewriting of one key.
func storedKey(key string, vocab int) string {
	parts := strings.Split(key, "/")
	if len(parts) < 2 || parts[0] != KindModel && parts[0] != KindKernel {
		return key
	}
	kind, group := parts[0], parts[1]
	vals := make(map[string]string, len(parts)-2)
	for _, part := range parts[2:] {
		name, v, ok := strings.Cut(part, "=")
		if _, dup := vals[name]; !ok || dup {
			return key // not a key expansion made
		}
		vals[name] = v
	}
	if v, ok := vals[ParamWitnessGPU]; ok {
		if k := applegpu.Key(v); k != "" {
			vals[ParamWitnessGPU] = k
		}
	}
	switch kind {
	case KindModel:
		if v, ok := vals[ParamSampling]; ok && vocab > 0 {
			seg, _ := unlimitTopK(group+"/"+ParamSampling+"="+v, vocab)
			vals[ParamSampling] = strings.TrimPrefix(seg, group+"/"+ParamSampling+"=")
		}
	case KindKernel:
		c := Case{Kind: KindKernel, Group: group, Params: make(map[string]Value, len(vals))}
		for name, v := range vals {
			c.Params[name] = Value{Raw: v}
		}
		c.Op = ops.ID(vals[ParamOp])
		if _, ok := ops.Lookup(c.Op); !ok {
			return key
		}
		for name := range vals {
			if _, known := params[name]; known && !reads(c, name) {
				delete(vals, name)
			}
		}
	}
	return Key(kind, group, vals)
}
