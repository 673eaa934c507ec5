package jsonerr

import (
	"encoding/json"
	"testing"
	"time"
)

// Unknown names the first key encoding/json would drop, by its path, with
// the field it is near; keys of maps, RawMessages, any and types that
// decode themselves are not its to judge.
func TestUnknownNamesADroppedKey(t *testing.T) {
	type op struct {
		Read    int64 `json:"read"`
		Written int64 `json:"written"`
	}
	type line struct {
		Format string            `json:"format"`
		Ops    []op              `json:"ops"`
		Params map[string]string `json:"params"`
		Raw    json.RawMessage   `json:"raw"`
		Any    any               `json:"any"`
		At     time.Time         `json:"at"`
		Skip   string            `json:"-"`
	}
	for _, c := range []struct{ in, want string }{
		{`{"format":"x","ops":[{"read":1,"written":2}],"params":{"anything":"1"}}`, ""},
		{`{"raw":{"a":1},"any":{"b":[{"c":1}]},"at":"2026-01-02T03:04:05Z"}`, ""},
		{`{"FORMAT":"x","ops":[{"Read":1}]}`, ""}, // read as the field, in any case
		{`{"ops":[{"read":1},{"wirtten":2}]}`, `unknown field ops[1].wirtten (did you mean "written"?)`},
		{`{"ops":[],"formt":"x"}`, `unknown field formt (did you mean "format"?)`},
		{`{"read_bytes":1}`, `unknown field read_bytes`},
		{`{"Skip":"x"}`, `unknown field Skip`},
		{`{"o\u0070s":[{"x\ty":1}]}`, "unknown field ops[0].x\ty"},
		{`{"ops":[`, ""}, // not JSON: the decoder's to say
	} {
		err := Unknown([]byte(c.in), &line{})
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
}
