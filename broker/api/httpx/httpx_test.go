package httpx

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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

// An answer larger than net/http's 2 KiB buffer still goes out with its
// length, not chunked.
func TestWriteJSONDeclaresTheLengthOfALargeAnswer(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"v": big})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
		t.Fatalf("Content-Length %d, Transfer-Encoding %v, for a body of %d bytes", resp.ContentLength, resp.TransferEncoding, len(body))
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("Content-Type %q", got)
	}
}

func TestNotUUIDNamesTheFieldAndQuotesTheValueCutShort(t *testing.T) {
	if e := NotUUID("ack.leaseId", "nope"); e.Status != http.StatusBadRequest || e.Message != `ack.leaseId must be a UUID, got "nope"` {
		t.Errorf("NotUUID = %d %s", e.Status, e.Message)
	}
	long := strings.Repeat("x", 1000)
	if got, want := NotUUID("f", long).Message, `f must be a UUID, got "`+long[:40]+`…"`; got != want {
		t.Errorf("NotUUID of a long value = %s, want %s", got, want)
	}
}

// streamedAnswer writes a JSON array of n strings of size bytes each.
func streamedAnswer(n, size int) http.HandlerFunc {
	piece := []byte(`"` + strings.Repeat("x", size) + `"`)
	return func(w http.ResponseWriter, r *http.Request) {
		WriteStreamed(w, http.StatusOK, func(s *Stream, b []byte) []byte {
			b = append(b, '[')
			for i := range n {
				if i > 0 {
					b = append(s.Flush(b), ',')
				}
				b = s.AppendLarge(b, piece)
			}
			return append(b, ']')
		})
	}
}

func TestAStreamedAnswerLargerThanThePooledBufferArrivesWholeInPieces(t *testing.T) {
	for name, tc := range map[string]struct {
		n, size int
		length  bool // sent whole, with a Content-Length
	}{
		"small":        {3, 10, true},
		"many pieces":  {20000, 100, false},
		"large pieces": {5, 3 * maxPooledBuf, false},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(streamedAnswer(tc.n, tc.size))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("answer of %d bytes is not JSON: %v", len(body), err)
			}
			if len(got) != tc.n || len(got[tc.n-1]) != tc.size {
				t.Fatalf("got %d strings, the last of %d bytes", len(got), len(got[len(got)-1]))
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if (resp.ContentLength == int64(len(body))) != tc.length {
				t.Fatalf("Content-Length %d for %d bytes: want it set %v", resp.ContentLength, len(body), tc.length)
			}
		})
	}
}
