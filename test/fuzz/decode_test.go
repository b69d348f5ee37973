package fuzz_test

import (
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"
)

// decodeShape has the field kinds the routes' wire types use: pointers to
// strings, raw payloads, numbers, booleans, arrays of objects and maps.
type decodeShape struct {
	Items *[]struct {
		Queue         *string         `json:"queue"`
		Partition     *string         `json:"partition"`
		Payload       json.RawMessage `json:"payload"`
		TransactionID *string         `json:"transactionId"`
	} `json:"items"`
	Seconds *int              `json:"seconds"`
	Limit   int               `json:"limit"`
	Reset   bool              `json:"reset"`
	Ops     []json.RawMessage `json:"ops"`
	Options map[string]any    `json:"options"`
	Value   any               `json:"value"`
}

// httpx.DecodeJSON decodes with go-json, and with encoding/json only what
// go-json refuses. So every body go-json accepts must be one encoding/json
// accepts, decoded to the same value: the broker then stores and answers
// exactly what it would with encoding/json alone.
func FuzzDecodeJSONAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"queue":"q","partition":"p","payload":{"a":[1,2.5e3,"x\u00e9"]},"transactionId":"t"}]}`,
		`{"items":[{"queue":"q","payload":  { "spaced" : true } }]}`,
		`{"seconds":30,"limit":-1,"reset":true,"ops":[{"op":"upsert"},null],"options":{"leaseTime":1.5}}`,
		`{"value":"\ud83d\ude00","Seconds":1,"LIMIT":2}`,
		`{"items":null,"value":[{},[],"",0,false,null]}`,
		`{"queue":"a","queue":"b"}`,
		"{\"value\":\"\xff\"}",
		`{"limit":1e2}`, `{"limit":18446744073709551616}`, `[]`, `null`, `{"items":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast, std decodeShape
		if gojson.Unmarshal(body, &fast) == nil {
			if err := json.Unmarshal(body, &std); err != nil {
				t.Fatalf("go-json accepts what encoding/json refuses (%v): %q", err, body)
			}
			if !reflect.DeepEqual(fast, std) {
				t.Fatalf("the two decode %q differently:\n go-json:       %#v\n encoding/json: %#v", body, fast, std)
			}
		}
		var fastAny, stdAny any
		if gojson.Unmarshal(body, &fastAny) == nil {
			if err := json.Unmarshal(body, &stdAny); err != nil {
				t.Fatalf("go-json accepts what encoding/json refuses (%v): %q", err, body)
			}
			if !reflect.DeepEqual(fastAny, stdAny) {
				t.Fatalf("the two decode %q differently:\n go-json:       %#v\n encoding/json: %#v", body, fastAny, stdAny)
			}
		}
	})
}
