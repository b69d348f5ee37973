package streams

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func TestFoldStateOpsKeepsEachKeysLastOp(t *testing.T) {
	f, err := foldStateOps(json.RawMessage(`[
		{"type": "upsert", "key": "a", "value": 1},
		{"type": "upsert", "key": "a", "value": {"acc": 2}},
		{"type": "upsert", "key": "b", "value": 7},
		{"type": "delete", "key": "b"},
		{"type": "delete", "key": "c"},
		{"type": "upsert", "key": "c", "value": null},
		{"type": "delete", "key": ""},
		{"type": "up\u0073ert", "key": "", "value": "empty"},
		{"type": "delete", "key": "d"}
	]`), false)
	if err != nil || f.Refusal != "" {
		t.Fatalf("fold: %v %q", err, f.Refusal)
	}
	got := fmt.Sprintf("applied %d, upsert %q = %s, delete %q", f.Applied, f.UpsertKeys, f.UpsertValues, f.DeleteKeys)
	want := `applied 9, upsert ["a" "c" ""] = [{"acc": 2} null "empty"], delete ["b" "d"]`
	if got != want {
		t.Fatalf("fold gave\n%s\nwant\n%s", got, want)
	}
}

func TestFoldStateOpsAbsentNullAndEmptyFoldToNothing(t *testing.T) {
	for _, raw := range []string{``, `null`, ` [ ] `} {
		f, err := foldStateOps(json.RawMessage(raw), false)
		if err != nil || f.Applied != 0 || len(f.UpsertKeys)+len(f.DeleteKeys) != 0 || f.Refusal != "" {
			t.Fatalf("state_ops %q folded to %+v, %v; want nothing", raw, f, err)
		}
	}
}

func TestFoldStateOpsThatIsNotAnArrayIs400(t *testing.T) {
	for _, raw := range []string{`{}`, `"x"`, `1`} {
		if _, err := foldStateOps(json.RawMessage(raw), false); err == nil {
			t.Fatalf("state_ops %s folded without an error", raw)
		}
	}
}

// The procedure applied the ops one by one and raised at the first element
// breaking a rule, checking its type, then its key, then an upsert's value.
// The fold gives the same message, for the element at the same index.
func TestFoldStateOpsRefusesTheFirstBadElementAsTheProcedureDid(t *testing.T) {
	for raw, want := range map[string]string{
		`[{"type": "upsret", "key": "b", "value": 3}]`:                           `state_ops[0]: unknown type "upsret"`,
		`[{"type": "upsert", "key": "a", "value": 1}, {"key": "a", "value": 1}]`: `state_ops[1]: unknown type null`,
		`[{"type": ["upsert"], "key": "a"}]`:                                     `state_ops[0]: unknown type ["upsert"]`,
		`[{"type": 5}]`:                                                          `state_ops[0]: unknown type 5`,
		`["upsert"]`:                                                             `state_ops[0]: unknown type null`,
		`[{"TYPE": "upsert", "key": "a", "value": 1}]`:                           `state_ops[0]: unknown type null`,
		`[{"type": "nope", "value": 1}]`:                                         `state_ops[0]: unknown type "nope"`,
		`[{"type": "delete"}]`:                                                   `state_ops[0]: key must be a string`,
		`[{"type": "delete", "key": 7}]`:                                         `state_ops[0]: key must be a string`,
		`[{"type": "upsert", "key": null, "value": 1}]`:                          `state_ops[0]: key must be a string`,
		`[{"type": "upsert", "key": "a"}, {"type": "nope"}]`:                     `state_ops[0]: upsert needs a value`,
		"[{\"type\": \"delete\", \"key\": \"\xff\"}]":                            `state_ops[0]: key is not valid UTF-8`,
	} {
		f, err := foldStateOps(json.RawMessage(raw), false)
		if err != nil || f.Refusal != want {
			t.Errorf("state_ops %s: refusal %q (err %v), want %q", raw, f.Refusal, err, want)
		}
		if len(f.UpsertKeys)+len(f.DeleteKeys) != 0 {
			t.Errorf("state_ops %s: a refused fold still carries ops %+v", raw, f)
		}
	}
}

func TestFoldStateOpsNeverPanicsOnTextCutShort(t *testing.T) {
	raw := `[{"type": "upsert", "key": "a\"b", "value": {"x": [1, "]}", true]}}, {"type": "delete", "key": "c"}, 7, null]`
	for n := 1; n <= len(raw); n++ {
		_, _ = foldStateOps(json.RawMessage(raw[:n]), false)
	}
}

func BenchmarkFoldStateOps4(b *testing.B) {
	raw := json.RawMessage(`[{"type":"upsert","key":"k0","value":{"acc":100}},{"type":"upsert","key":"k1","value":{"acc":100}},` +
		`{"type":"upsert","key":"k2","value":{"acc":100}},{"type":"upsert","key":"k3","value":{"acc":100}}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := foldStateOps(raw, false); err != nil {
			b.Fatal(err)
		}
	}
}

// PostgreSQL stores a NUL neither in a text key nor in a jsonb value: the
// fold refuses both instead of failing the cycle's transaction with a 500.
// An escaped backslash before "u0000" is no NUL.
func TestFoldStateOpsRefusesNULInKeysAndValues(t *testing.T) {
	for raw, want := range map[string]string{
		`[{"type": "delete", "key": "a\u0000b"}]`:                                                       `state_ops[0]: key must not contain NUL characters`,
		`[{"type": "upsert", "key": "k", "value": "\u0000"}]`:                                           `state_ops[0]: value must not contain \u0000`,
		`[{"type": "upsert", "key": "k", "value": {"a": ["x\\\u0000"]}}]`:                               `state_ops[0]: value must not contain \u0000`,
		`[{"type": "upsert", "key": "k", "value": 1}, {"type": "upsert", "key": "\u0000", "value": 1}]`: `state_ops[1]: key must not contain NUL characters`,
	} {
		f, err := foldStateOps(json.RawMessage(raw), false)
		if err != nil || f.Refusal != want {
			t.Errorf("state_ops %s: refusal %q (err %v), want %q", raw, f.Refusal, err, want)
		}
	}
	f, err := foldStateOps(json.RawMessage(`[{"type": "upsert", "key": "k", "value": "\\u0000"}]`), false)
	if err != nil || f.Refusal != "" || len(f.UpsertKeys) != 1 {
		t.Fatalf("an escaped backslash before u0000 was refused: %+v %v", f, err)
	}
}

// FuzzUnquoteDecodesAsEncodingJSON: a string value with escapes, as members
// delimits it, is decoded as encoding/json decodes it, or refused as it
// refuses it.
func FuzzUnquoteDecodesAsEncodingJSON(f *testing.F) {
	for _, s := range []string{`"pl\u001f2026-12-07T09:00:00Z\u001fk"`, `"\/\b\f\n\r\t\"\\"`, `"\u007f\u0080"`,
		`"\u0000"`, `"\ud800"`, `"\u12"`, `"\x"`, `"a\u00AFb"`, `"é\u001f"`, `"\u001F\u001g"`, "\"\x01\\t\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' || valueEnd(v, 0) != len(v) || bytes.IndexByte(v, '\\') < 0 {
			return
		}
		var want string
		err := json.Unmarshal(v, &want)
		got, ok := unquote(v)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("unquote(%q) = %q, %v; encoding/json: %q, %v", v, got, ok, want, err)
		}
	})
}

// BenchmarkUnquoteWorkerKey decodes a state key of Regent's worker, whose
// separator (U+001F) JSON escapes.
func BenchmarkUnquoteWorkerKey(b *testing.B) {
	v := []byte(`"pl\u001f2026-12-07T09:00:00Z\u001fkey-123"`)
	for b.Loop() {
		if _, ok := unquote(v); !ok {
			b.Fatal("not a string")
		}
	}
}
