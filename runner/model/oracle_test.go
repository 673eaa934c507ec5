package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

// oracleFile is how transformers reads tiny configs that vary one key at a
// time: whether AutoConfig takes each, whether the model builds and runs,
// and the values it resolves (tools/fixtures/make_hf_config_oracle.py).
const oracleFile = "testdata/hf_config_oracle.json"

type oracleRow struct {
	Case      string          `json:"case"`
	ModelType string          `json:"model_type"`
	Set       json.RawMessage `json:"set"`
	Unset     []string        `json:"unset"`
	Config    string          `json:"config"`
	Model     string          `json:"model"`

	KVHeads    any             `json:"num_key_value_heads"`
	HeadDim    any             `json:"head_dim"`
	Window     *int            `json:"sliding_window"`
	HiddenAct  *string         `json:"hidden_act"`
	Tie        *bool           `json:"tie_word_embeddings"`
	RMSNormEps *float64        `json:"rms_norm_eps"`
	LNEps      *float64        `json:"layer_norm_epsilon"`
	NInner     any             `json:"n_inner"`
	RopeParams json.RawMessage `json:"rope_parameters"`
	AttnBias   *bool           `json:"attention_bias"`
	MLPBias    *bool           `json:"mlp_bias"`
	NormTopK   *bool           `json:"norm_topk_prob"`
	Inter      *int            `json:"intermediate_size"`
	// InvFreq and AttnScaling are the model's rotary embedding as
	// transformers built it: its frequencies and its scale of cos and sin.
	InvFreq     []float64 `json:"inv_freq"`
	AttnScaling *float64  `json:"attention_scaling"`
}

// members are a JSON object's keys and values as the text gives them, in
// order, so that a value keeps its spelling (2.0 stays 2.0).
type member struct {
	key string
	val json.RawMessage
}

func members(t *testing.T, raw json.RawMessage) []member {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%s: not an object", raw)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, member{tok.(string), v})
	}
	return out
}

// oracleConfig is base with set's keys put in place (a new key at the end),
// one key a line, as Python's dict update and json.dump make it.
func oracleConfig(base, set []member, unset []string) []byte {
	all := slices.DeleteFunc(slices.Clone(base), func(m member) bool { return slices.Contains(unset, m.key) })
	for _, s := range set {
		i := slices.IndexFunc(all, func(m member) bool { return m.key == s.key })
		if i < 0 {
			all = append(all, s)
		} else {
			all[i] = s
		}
	}
	var b strings.Builder
	b.WriteString("{\n")
	for i, m := range all {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "%q: %s", m.key, m.val)
	}
	b.WriteString("\n}\n")
	return []byte(b.String())
}

// oracleRefused are changes (key__variant) transformers builds and runs a
// model from that mtlbench refuses with an error naming the key: a shape
// no published model has, or what the engine does not run
// (docs/architecture.md, "Where input is checked").
var oracleRefused = map[string]string{
	"rope__scaling_dynamic":         "dynamic NTK scaling changes the frequencies as a sequence grows, which no backend's rotary tables do",
	"hidden_size__zero":             "no model has no width",
	"intermediate_size__zero":       "an MLP of no width",
	"num_hidden_layers__zero":       "a model of no layers",
	"num_hidden_layers__neg":        "a model of no layers",
	"n_layer__zero":                 "a model of no layers",
	"n_layer__neg":                  "a model of no layers",
	"head_dim__zero":                "heads of no width",
	"max_position_embeddings__neg":  "no position is below -1",
	"sliding_window__neg":           "a window of -1 tokens, though the class uses it only with use_sliding_window",
	"num_experts__neg":              "a negative count of experts, which transformers reads as none",
	"num_experts_per_tok__zero":     "a router that picks no expert",
	"decoder_sparse_step__neg":      "a negative step between MoE layers",
	"hidden_act__gelu_pytorch_tanh": "these models run SiLU only",
	"activation_function__swish":    "GPT-2 runs GELU (tanh) only",
	"rope_theta__true":              "a boolean where the RoPE base goes, which transformers computes with as 1",
	"partial_rotary_factor__str":    "RoPE over part of a head is not run, and a string is no factor",
}

// oracleOpen are the cases where mtlbench does not read the file as
// transformers does, and why; a case listed here that agrees fails too
// (docs/architecture.md, "Where input is checked").
var oracleOpen = map[string]string{}

// oracleUnread are keys mtlbench does not read: transformers' checks of
// them are not mtlbench's.
var oracleUnread = []string{"bos_token_id", "pad_token_id", "initializer_range", "use_cache", "attention_dropout"}

// TestConfigAsTransformersReadsIt: every config transformers 5.17 refuses
// (as AutoConfig reads it, or building and running the model) mtlbench
// refuses naming the key; every one it takes mtlbench takes (but for
// oracleRefused), resolving the same key value heads, head size, window,
// activation, tie, epsilon, RoPE base, biases, norm_topk_prob and MLP
// width.
func TestConfigAsTransformersReadsIt(t *testing.T) {
	data, err := os.ReadFile(oracleFile)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Transformers string                     `json:"transformers"`
		Base         map[string]json.RawMessage `json:"base"`
		Cases        []oracleRow                `json:"cases"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	var agree, unread int
	for _, r := range o.Cases {
		set := members(t, r.Set)
		text := oracleConfig(members(t, o.Base[r.ModelType]), set, r.Unset)
		var keys []string
		for _, m := range set {
			keys = append(keys, m.key)
		}
		change := strings.TrimPrefix(r.Case, r.ModelType+"__")
		c, err := ParseHFConfig("config.json", text)
		refused := r.Config != "ok" || r.Model != "ok"
		var bad string
		switch {
		case refused && err == nil && len(keys) == 1 && slices.Contains(oracleUnread, keys[0]):
			unread++
			continue
		case refused && err == nil:
			bad = fmt.Sprintf("transformers refuses it (%s), mtlbench reads it", cmpOr(r.Config, r.Model))
		case refused && len(keys) > 0 && !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(err.Error(), k) }):
			bad = fmt.Sprintf("refused, but the error names none of %v: %v", keys, err)
		case !refused && err != nil && !(oracleRefused[change] != "" && strings.Contains(err.Error(), keys[0])):
			bad = fmt.Sprintf("transformers takes it, mtlbench refuses it: %v", err)
		case !refused && err == nil:
			bad = oracleResolved(r, c)
		}
		if why, open := oracleOpen[r.Case]; open {
			if bad == "" {
				t.Errorf("%s agrees now: take it out of oracleOpen (%s)", r.Case, why)
			}
			continue
		}
		if bad != "" {
			t.Errorf("%s %s: %s", r.Case, r.Set, bad)
			continue
		}
		agree++
	}
	t.Logf("transformers %s: %d cases, %d agree, %d open, %d refused by transformers over keys mtlbench does not read",
		o.Transformers, len(o.Cases), agree, len(oracleOpen), unread)
}

func cmpOr(a, b string) string {
	if a != "ok" {
		return a
	}
	return b
}

// oracleResolved says where c's values differ from transformers' (r).
func oracleResolved(r oracleRow, c *Config) string {
	var d []string
	ne := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			d = append(d, fmt.Sprintf("%s %v, transformers %v", what, got, want))
		}
	}
	if r.KVHeads != nil {
		ne("key value heads", c.KVHeads, r.KVHeads)
	}
	if r.HeadDim != nil {
		ne("head_dim", c.HeadDim, r.HeadDim)
	}
	ne("sliding window", c.Window, cmpInt(r.Window))
	if r.HiddenAct != nil && !slices.Contains(siluActivations, *r.HiddenAct) {
		d = append(d, fmt.Sprintf("hidden_act %q read as SiLU", *r.HiddenAct))
	}
	if r.Tie != nil {
		ne("tie", c.TieEmbed, *r.Tie)
	}
	eps := r.RMSNormEps
	if c.GPT2() {
		eps = r.LNEps
	}
	if eps != nil {
		ne("eps", c.Eps, float32(*eps))
	}
	if len(r.RopeParams) > 0 && string(r.RopeParams) != "null" && !c.GPT2() {
		var p struct {
			Theta float64 `json:"rope_theta"`
		}
		json.Unmarshal(r.RopeParams, &p)
		if math.Abs(c.RopeTheta-p.Theta) > 0 {
			ne("rope theta", c.RopeTheta, p.Theta)
		}
	}
	if r.InvFreq != nil && !c.GPT2() {
		d = append(d, rotaryDiffers(c, r.InvFreq, r.AttnScaling)...)
	}
	if r.AttnBias != nil {
		ne("attention_bias", c.OBias, *r.AttnBias)
	}
	if r.MLPBias != nil {
		ne("mlp_bias", c.MLPBias, *r.MLPBias)
	}
	if r.NormTopK != nil {
		ne("norm_topk_prob", c.NormTopK, *r.NormTopK)
	}
	if r.Inter != nil && !c.GPT2() {
		ne("intermediate_size", c.Inter, *r.Inter)
	}
	if c.GPT2() && r.NInner != nil {
		ne("n_inner", c.Inter, r.NInner)
	}
	return strings.Join(d, "; ")
}

// rotaryDiffers compares the rotary embedding every backend runs with
// transformers': each frequency within one f32 ulp of its own, the scale of
// cos and sin within 1e-12.
func rotaryDiffers(c *Config, want []float64, scale *float64) []string {
	var d []string
	got := c.Rotary().InvFreq(c.HeadDim)
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%d rotary frequencies, transformers %d", len(got), len(want))}
	}
	for i, w := range want {
		w32 := float32(w)
		if ulp := math.Nextafter32(w32, float32(math.Inf(1))) - w32; math.Abs(float64(got[i]-w32)) > float64(ulp) {
			d = append(d, fmt.Sprintf("rotary frequency %d %g, transformers %g", i, got[i], w))
			break
		}
	}
	if scale != nil {
		a := 1.0
		if c.RopeScaling != nil && c.RopeScaling.Attention != 0 {
			a = c.RopeScaling.Attention
		}
		if math.Abs(a-*scale) > 1e-12 {
			d = append(d, fmt.Sprintf("rotary attention scale %g, transformers %g", a, *scale))
		}
	}
	return d
}

func cmpInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
