// Package httpx holds the JSON conventions every broker route shares: how a
// body is read, how an answer and an error are written, and the status a bad
// request gets. A bad request is never a 500.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"

	gojson "github.com/goccy/go-json"

	"github.com/regent-mq/regent/broker/domain/quota"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Error is a failure with the HTTP status it maps to. Its message is safe to
// show a client.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf makes an *Error.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// BadRequest makes a 400 *Error.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// NotUUID is the 400 of a request field that must hold a UUID and does not.
// It quotes the value, cut short: a client sending a huge one does not get it
// back whole.
func NotUUID(field, value string) *Error {
	if len(value) > 40 {
		value = value[:40] + "…"
	}
	return BadRequest("%s must be a UUID, got %q", field, value)
}

// ReadJSON decodes the request body into v. The body size is bounded by the
// server's MaxBytesReader; exceeding it is a 413.
func ReadJSON(r *http.Request, v any) error {
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	return DecodeJSON(body, v)
}

// ReadBody reads the request body, with ReadJSON's errors. A body of
// declared length is read into one buffer of its size: io.ReadAll grows
// its buffer from 512 bytes, allocating twice a body's size on the way.
func ReadBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	// MinRead more, so that the read that finds the end needs no growth.
	buf.Grow(int(min(max(r.ContentLength, 0), maxPresized)) + bytes.MinRead)
	_, err := buf.ReadFrom(r.Body)
	body := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, "Request body larger than %d bytes", tooBig.Limit)
		}
		return nil, BadRequest("Could not read request body: %v", err)
	}
	return body, nil
}

// maxPresized bounds the buffer that a declared length makes ReadBody
// take before any of the body has arrived.
const maxPresized = 1 << 20

// DecodeJSON decodes body into v with the conventions of ReadJSON.
//
// It decodes with github.com/goccy/go-json, which took a third of
// encoding/json's time on a stock 100-item push body (BenchmarkDecodePush),
// where encoding/json's decoding was 29 % of the broker's push CPU. A body
// it refuses is decoded again with encoding/json, whose verdict and errors
// are the contract's: go-json only makes the accepted bodies faster, and a
// fuzz target (test/fuzz FuzzDecodeJSONAgreesWithEncodingJSON) holds the
// two to the same values on the bodies go-json accepts.
func DecodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("Empty request body")
	}
	if gojson.Unmarshal(body, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			field := typeErr.Field
			if field == "" {
				return BadRequest("Invalid JSON: expected %s, got %s", typeErr.Type, typeErr.Value)
			}
			return BadRequest("Invalid field %q: expected %s, got %s", field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
		}
		var fieldErr *Error
		if errors.As(err, &fieldErr) {
			return fieldErr
		}
		return BadRequest("Invalid JSON: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	default:
		return "number"
	}
}

// WriteJSON writes v as the body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		// Only a programming error gets here (an unmarshalable value).
		status = http.StatusInternalServerError
		buf = []byte(`{"error":"internal error"}`)
	}
	WriteBody(w, status, buf)
}

// WriteBody writes a JSON body that is already encoded. With its length
// declared, net/http writes the answer as it is instead of chunking what
// does not fit its 2 KiB buffer.
func WriteBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteAppended writes the JSON body that appendTo appends to a pooled
// buffer: the answers of the hot paths, built by hand.
func WriteAppended(w http.ResponseWriter, status int, appendTo func([]byte) []byte) {
	WriteStreamed(w, status, func(_ *Stream, b []byte) []byte { return appendTo(b) })
}

// bufPool holds answer buffers, each with the Stream that writes it, so that
// an answer costs no allocation once the pool is warm.
var bufPool = sync.Pool{New: func() any { return new(pooledBuf) }}

type pooledBuf struct {
	b []byte
	s Stream
}

// Stream is WriteAppended for answers that may be large: the pooled buffer
// goes to the client whenever it passes maxPooledBuf, and a large piece is
// written straight from where it lies, so an answer of any size never needs
// a buffer of its own size. An answer that fits in the buffer is written
// whole, with its Content-Length, as WriteAppended does.
type Stream struct {
	w      http.ResponseWriter
	status int
	sent   bool
}

// WriteStreamed writes the JSON body that appendTo appends, through s.
func WriteStreamed(w http.ResponseWriter, status int, appendTo func(s *Stream, b []byte) []byte) {
	pb := bufPool.Get().(*pooledBuf)
	pb.s = Stream{w: w, status: status}
	b := appendTo(&pb.s, pb.b[:0])
	if pb.s.sent {
		_, _ = w.Write(b)
	} else {
		WriteBody(w, status, b)
	}
	if cap(b) <= maxPooledBuf {
		pb.b, pb.s = b[:0], Stream{}
		bufPool.Put(pb)
	}
}

// Flush sends b once it has passed maxPooledBuf/2 and returns it emptied;
// call it between pieces.
func (s *Stream) Flush(b []byte) []byte {
	if len(b) < maxPooledBuf/2 {
		return b
	}
	return s.send(b)
}

// AppendLarge appends p to b, or, when p would outgrow the buffer, sends b
// and then p itself.
func (s *Stream) AppendLarge(b, p []byte) []byte {
	if len(b)+len(p) <= maxPooledBuf/2 {
		return append(b, p...)
	}
	b = s.send(b)
	_, _ = s.w.Write(p)
	return b
}

func (s *Stream) send(b []byte) []byte {
	if !s.sent {
		s.sent = true
		s.w.Header()["Content-Type"] = contentTypeJSON
		s.w.WriteHeader(s.status)
	}
	_, _ = s.w.Write(b)
	return b[:0]
}

// maxPooledBuf keeps one huge answer from pinning its buffer.
const maxPooledBuf = 1 << 20

// contentTypeJSON is shared by every answer: net/http only reads it.
var contentTypeJSON = []string{"application/json"}

// WriteError writes {"error": message} with the given status.
func WriteError(w http.ResponseWriter, status int, message string) {
	WriteJSON(w, status, map[string]string{"error": message})
}

// Fail writes err: an *Error with its own status and message; a database
// that cannot be reached as a 503 with Retry-After; anything else as a 500
// whose detail stays in the server log, never in the body.
func Fail(w http.ResponseWriter, err error) {
	var e *Error
	var q *quota.Refusal
	switch {
	case errors.As(err, &q):
		writeRefusal(w, q)
	case errors.As(err, &e):
		WriteError(w, e.Status, e.Message)
	case db.Unavailable(err):
		w.Header().Set("Retry-After", RetryAfter)
		WriteError(w, http.StatusServiceUnavailable, "Database unavailable")
	default:
		WriteError(w, http.StatusInternalServerError, "Internal server error")
	}
}

// writeRefusal writes a quota's refusal, whose body names the limit and
// the tenant. A limit that waiting lifts is a 429 with Retry-After, as
// HTTP says (RFC 6585). A request larger than the burst would be refused
// at every retry, and a client that honours 429 and Retry-After (Queen's
// retry on 429) would loop on it: it is a 413 without Retry-After, the
// answer the broker already gives a body over --max-body-bytes, which
// clients know means "split it, do not retry".
func writeRefusal(w http.ResponseWriter, r *quota.Refusal) {
	status := http.StatusTooManyRequests
	if r.TooLarge {
		status = http.StatusRequestEntityTooLarge
	} else {
		w.Header().Set("Retry-After", "1")
	}
	WriteJSON(w, status, map[string]string{"error": r.Message, "quota": r.Quota, "tenant": r.Tenant})
}

// RetryAfter is the Retry-After of a 503, in seconds: long enough for a
// failover or a restart to get somewhere, short for a blip.
const RetryAfter = "1"

// Internal reports whether Fail writes err as a 500, the broker's own
// fault, which the caller logs.
func Internal(err error) bool {
	var e *Error
	var q *quota.Refusal
	return !errors.As(err, &e) && !errors.As(err, &q) && !db.Unavailable(err)
}

type drainKey struct{}

// WithDrain returns ctx carrying drain, a channel closed when the server
// begins to shut down. Requests are not cancelled then: they finish within
// the shutdown grace. Only a request that would wait for more (a parked
// long-poll) looks at Draining and answers at once.
func WithDrain(ctx context.Context, drain <-chan struct{}) context.Context {
	return context.WithValue(ctx, drainKey{}, drain)
}

// Draining is the channel WithDrain put in ctx, or nil (never ready) when
// there is none.
func Draining(ctx context.Context) <-chan struct{} {
	d, _ := ctx.Value(drainKey{}).(<-chan struct{})
	return d
}
