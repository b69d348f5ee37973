package streams

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/pg/db"
)

// foldStateOps checks a cycle's state_ops and folds them to their effect.
// The ops apply in order inside one transaction, where now() does not move,
// so the last op on a key alone decides what the key holds afterwards:
// the procedure then writes each key once, in one statement per kind,
// instead of running a statement per op.
//
// An element that breaks the rules (an unknown type, a key that is not a
// string, an upsert without a value) becomes the fold's Refusal: the cycle
// fails, and commits nothing, after the ownership verdicts (see
// db.CheckOwner). Only state_ops that is not an array at all is a 400.
// raw is the member of a decoded request, so JSON.
//
// The preconditions are about the state the worker read before the cycle,
// so a key's first if_updated_at is the one expected. An idle flush
// (flush) also expects every row it removes to exist, unless an earlier op
// of the same cycle wrote it: queen_streams.cycle_rules.s file says why.
func foldStateOps(raw json.RawMessage, flush bool) (db.StateOps, error) {
	var f db.StateOps
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return f, nil
	}
	if raw[0] != '[' {
		return f, httpx.BadRequest(`Invalid field "state_ops": expected array`)
	}
	// Each key once, in the order keys first appear, with its last op's
	// value; a nil value is a delete (an upsert's is never empty: JSON null
	// is "null").
	at := map[string]int{}
	var keys []string
	var values []json.RawMessage
	var expect map[string]bool       // keys with an if_updated_at
	var firstDeleted map[string]bool // a flush's keys whose first op deletes
	i := 0
	for e := range elements(raw) {
		key, value, read, refusal := stateOp(i, e)
		if refusal != "" {
			return db.StateOps{Refusal: refusal}, nil
		}
		j, seen := at[key]
		if !seen {
			j = len(keys)
			at[key] = j
			keys, values = append(keys, key), append(values, nil)
			if flush && value == nil {
				if firstDeleted == nil {
					firstDeleted = map[string]bool{}
				}
				firstDeleted[key] = true
			}
		}
		if read != nil && !expect[key] {
			if expect == nil {
				expect = map[string]bool{}
			}
			expect[key] = true
			f.ExpectKeys, f.ExpectAt = append(f.ExpectKeys, key), append(f.ExpectAt, read)
		}
		values[j] = value
		i++
	}
	f.Applied = int32(i)
	deletes := 0
	for _, v := range values {
		if v == nil {
			deletes++
		}
	}
	f.UpsertKeys = make([]string, 0, len(keys)-deletes)
	f.UpsertValues = make([]json.RawMessage, 0, len(keys)-deletes)
	f.DeleteKeys = make([]string, 0, deletes)
	for j, key := range keys {
		if values[j] == nil {
			f.DeleteKeys = append(f.DeleteKeys, key)
			if firstDeleted[key] && !expect[key] {
				f.ExpectKeys, f.ExpectAt = append(f.ExpectKeys, key), append(f.ExpectAt, nil)
			}
		} else {
			f.UpsertKeys = append(f.UpsertKeys, key)
			f.UpsertValues = append(f.UpsertValues, values[j])
		}
	}
	return f, nil
}

// stateOp reads element i of state_ops: its key, the value of an upsert
// (nil for a delete), and the updated_at the worker read the row with, if
// it says. A refusal is the procedure's message for the first rule the
// element breaks: the type, then the key, then if_updated_at, then an
// upsert's value. JSON null is a value.
func stateOp(i int, e []byte) (key string, value json.RawMessage, read *time.Time, refusal string) {
	var rawType, rawKey, rawRead []byte
	for name, v := range members(e) {
		switch {
		case is(name, "type"):
			rawType = v
		case is(name, "key"):
			rawKey = v
		case is(name, "value"):
			value = v
		case is(name, "if_updated_at"):
			rawRead = v
		}
	}
	upsert := is(rawType, "upsert")
	if !upsert && !is(rawType, "delete") {
		shown := []byte("null")
		if rawType != nil {
			var b bytes.Buffer
			if json.Compact(&b, rawType) == nil {
				shown = b.Bytes()
			}
		}
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: unknown type %s", i, shown)
	}
	key, ok := unquote(rawKey)
	if !ok {
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: key must be a string", i)
	}
	// Decoding would replace invalid UTF-8 with U+FFFD: the key would not
	// be the one sent.
	if !utf8.Valid(rawKey) {
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: key is not valid UTF-8", i)
	}
	// Keys are text and values jsonb: PostgreSQL stores a NUL in neither.
	if strings.IndexByte(key, 0) >= 0 {
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: key must not contain NUL characters", i)
	}
	// An absent or null if_updated_at is no precondition.
	if rawRead != nil && !bytes.Equal(rawRead, []byte("null")) {
		s, ok := unquote(rawRead)
		t, err := time.Parse(time.RFC3339Nano, s)
		if !ok || err != nil {
			return "", nil, nil, fmt.Sprintf("state_ops[%d]: if_updated_at must be the updated_at state/get returned, an RFC 3339 time", i)
		}
		read = &t
	}
	if !upsert {
		return key, nil, read, ""
	}
	if value == nil {
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: upsert needs a value", i)
	}
	if escapesNUL(value) {
		return "", nil, nil, fmt.Sprintf("state_ops[%d]: value must not contain \\u0000", i)
	}
	return key, value, read, ""
}

// escapesNUL reports whether the JSON text v holds the escape \u0000, which
// jsonb refuses. Backslashes occur only inside strings, each starting an
// escape, so the walk needs no string tracking.
func escapesNUL(v []byte) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if bytes.HasPrefix(v[i+1:], []byte("u0000")) {
			return true
		}
		i++ // the escaped character, which may be a backslash
	}
	return false
}

// The ops are read by walking the JSON text, which decoding the request has
// checked. Decoding each op into a map instead (the fields are
// case-sensitive, as in jsonb, which encoding/json's struct fields are not)
// took six times as long: 12 against 1.9 us for four ops
// (BenchmarkFoldStateOps4). On text that is not JSON the walk gives
// nonsense, never a panic.

// elements yields the elements of the JSON array arr.
func elements(arr []byte) iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		for i := skipSpace(arr, 1); i < len(arr) && arr[i] != ']'; {
			end := valueEnd(arr, i)
			if !yield(arr[i:end]) {
				return
			}
			i = skipSpace(arr, end)
			if i < len(arr) && arr[i] == ',' {
				i = skipSpace(arr, i+1)
			}
		}
	}
}

// members yields the name (still quoted) and value of each member of v, if
// v is a JSON object; of anything else, none.
func members(v []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		if len(v) == 0 || v[0] != '{' {
			return
		}
		for i := skipSpace(v, 1); i < len(v) && v[i] == '"'; {
			nameEnd := valueEnd(v, i)
			start := skipSpace(v, min(skipSpace(v, nameEnd)+1, len(v))) // past the colon
			end := valueEnd(v, start)
			if !yield(v[i:nameEnd], v[start:end]) {
				return
			}
			i = skipSpace(v, end)
			if i < len(v) && v[i] == ',' {
				i = skipSpace(v, i+1)
			}
		}
	}
}

// valueEnd returns where the JSON value starting at v[i] ends.
func valueEnd(v []byte, i int) int {
	if i >= len(v) {
		return len(v)
	}
	switch v[i] {
	case '"':
		for i++; i < len(v); i++ {
			switch v[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	case '{', '[':
		depth := 0
		for ; i < len(v); i++ {
			switch v[i] {
			case '"':
				i = valueEnd(v, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	default: // a number, true, false or null
		for ; i < len(v); i++ {
			switch v[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
		}
	}
	return len(v)
}

func skipSpace(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == '\n') {
		i++
	}
	return i
}

// is reports whether the JSON value v is the string s; an escaped spelling
// of s counts, as in jsonb.
func is(v []byte, s string) bool {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1:len(v)-1]) == s
	}
	u, ok := unquote(v)
	return ok && u == s
}

// unquote returns the string a JSON string value holds; ok is false for
// any other value.
func unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	if s, ok := unescapeASCII(v[1 : len(v)-1]); ok {
		return s, true
	}
	var u string
	return u, json.Unmarshal(v, &u) == nil
}

// unescapeASCII decodes the body of a JSON string that is all ASCII and
// whose escapes all stand for ASCII characters, as the keys of Regent's
// worker (pipeline's separator, U+001F, is sent as \u001f). It reports
// false for any other body (a byte beyond ASCII, an escape of a character
// beyond it, a malformed escape, an unescaped quote or control character),
// which unquote leaves to encoding/json, whose Unmarshal cost some 0.7 µs a
// key: about 5% of the broker's CPU in a fold at batch 100.
func unescapeASCII(b []byte) (string, bool) {
	var out strings.Builder
	out.Grow(len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
		if c != '\\' {
			out.WriteByte(c)
			continue
		}
		if i+1 >= len(b) {
			return "", false
		}
		i++
		switch b[i] {
		case '"', '\\', '/':
			out.WriteByte(b[i])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			if i+4 >= len(b) || b[i+1] != '0' || b[i+2] != '0' {
				return "", false
			}
			hi, lo := hexDigit(b[i+3]), hexDigit(b[i+4])
			if hi < 0 || hi > 7 || lo < 0 {
				return "", false
			}
			out.WriteByte(byte(hi<<4 | lo))
			i += 4
		default:
			return "", false
		}
	}
	return out.String(), true
}

// hexDigit is the value of the hexadecimal digit c, or -1.
func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
