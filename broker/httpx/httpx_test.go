package httpx

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestDecodeJSONErrorsName(t *testing.T) {
	type body struct {
		Queue string `json:"queue"`
		Batch int    `json:"batch"`
	}
	for name, tc := range map[string]struct{ in, want string }{
		"empty":      {"  ", "Empty request body"},
		"not json":   {"{nope", "Invalid JSON"},
		"wrong type": {`{"queue": 5}`, `"queue"`},
		"number":     {`{"batch": "x"}`, `"batch": expected number`},
	} {
		t.Run(name, func(t *testing.T) {
			var v body
			err := DecodeJSON([]byte(tc.in), &v)
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("err = %v, want a 400 mentioning %q", err, tc.want)
			}
		})
	}
}
