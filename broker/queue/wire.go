package queue

import (
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/httpx"
)

// The pop and push answers are the bodies the broker writes on its hot
// paths; they are built by hand into pooled buffers. encoding/json spent a
// sixth of the broker's CPU under the popack benchmark reflecting over the
// same few fields, and re-validating payloads that were validated when
// pushed.

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf keeps one huge answer from pinning its buffer.
const maxPooledBuf = 1 << 20

// writeBody writes the JSON that build appends to a pooled buffer.
func writeBody(w http.ResponseWriter, status int, build func([]byte) []byte) {
	bp := bufPool.Get().(*[]byte)
	b := build((*bp)[:0])
	httpx.WriteBody(w, status, b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		bufPool.Put(bp)
	}
}

func (s *Store) writePop(w http.ResponseWriter, p *popRequest, msgs []message, claims []claim, lease string) {
	writeBody(w, http.StatusOK, func(b []byte) []byte { return appendPop(b, p, msgs, claims, lease) })
}

func appendPop(b []byte, p *popRequest, msgs []message, claims []claim, lease string) []byte {
	b = append(b, `{"success":true,"queue":`...)
	b = appendString(b, p.queue)
	b = append(b, `,"partition":`...)
	b = appendString(b, claims[0].name)
	b = append(b, `,"partitionId":`...)
	b = appendUUID(b, claims[0].id)
	b = append(b, `,"leaseId":`...)
	b = appendString(b, lease)
	b = append(b, `,"consumerGroup":`...)
	b = appendString(b, p.group)
	b = append(b, `,"partitionsClaimed":`...)
	b = strconv.AppendInt(b, int64(len(claims)), 10)
	b = append(b, `,"messages":[`...)
	// The frames of a segment share their creation time, so one formatting
	// usually serves a whole batch.
	var createdUS int64
	var createdBuf [40]byte
	var created []byte
	// So do the messages of a claim their last four fields.
	var tailOf *message
	var tailBuf [256]byte
	tail := tailBuf[:0]
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendUUID(b, m.ID)
		b = append(b, `,"transactionId":`...)
		b = appendString(b, m.TransactionID)
		b = append(b, `,"traceId":`...)
		b = appendOptional(b, m.TraceID)
		b = append(b, `,"data":`...)
		b = append(b, m.Data...)
		b = append(b, `,"producerSub":`...)
		b = appendOptional(b, m.ProducerSub)
		b = append(b, `,"createdAt":`...)
		if created == nil || m.CreatedAt != createdUS {
			createdUS = m.CreatedAt
			created = appendTime(createdBuf[:0], createdUS)
		}
		b = append(b, created...)
		if tailOf == nil || m.PartitionID != tailOf.PartitionID || m.Partition != tailOf.Partition ||
			m.LeaseID != tailOf.LeaseID || m.ConsumerGroup != tailOf.ConsumerGroup {
			tailOf = m
			tail = append(tail[:0], `,"partitionId":`...)
			tail = appendUUID(tail, m.PartitionID)
			tail = append(tail, `,"partition":`...)
			tail = appendString(tail, m.Partition)
			tail = append(tail, `,"leaseId":`...)
			tail = appendString(tail, m.LeaseID)
			tail = append(tail, `,"consumerGroup":`...)
			tail = appendString(tail, m.ConsumerGroup)
			tail = append(tail, '}')
		}
		b = append(b, tail...)
	}
	return append(b, "]}"...)
}

// appendTime appends µs since the epoch as a JSON string in TimeFormat.
func appendTime(b []byte, us int64) []byte {
	b = append(b, '"')
	b = time.UnixMicro(us).UTC().AppendFormat(b, TimeFormat)
	return append(b, '"')
}

// appendUUID appends id as a JSON string in its canonical form, without
// the string that id.String would allocate.
func appendUUID(b []byte, id uuid.UUID) []byte {
	b = append(b, '"')
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return append(b, '"')
}

func appendOptional(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does:
// quotes, backslashes, control characters, <, > and & (for HTML safety),
// U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
