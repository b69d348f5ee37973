// Package segment is the codec for one log segment: a run of consecutive
// messages of a queue partition, packed into a single zstd-compressed body
// that the broker stores as one database row.
//
// Uncompressed wire layout (format version 1):
//
//	byte 0   format version (1)
//	then, per frame, in order:
//	  16 bytes  ID
//	  varint    CreatedAt minus the previous frame's CreatedAt (zigzag; the first frame's is relative to 0)
//	  uvarint   Flags, then uvarint KeyID
//	  uvarint length + bytes, four times: TransactionID, TraceID, ProducerSub, Payload
//	  with FlagTraceparent only: uvarint length + bytes, Traceparent
//
// FlagTraceparent came later; frames written before it lack the bit and the
// field, and decode as they always did.
//
// The frame count is not in the body; the caller stores it beside the body
// and the checksum, and Decode cross-checks all three. Every varint must be
// minimally encoded, so one list of frames has exactly one encoding and
// decoding then re-encoding a segment reproduces its checksum.
package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
)

// Flags is a bit set describing a frame.
type Flags uint32

const (
	// FlagSealed means Payload is AES-GCM ciphertext sealed with key KeyID.
	FlagSealed Flags = 1 << 0
	// FlagDeleted means the message was deleted (DELETE /api/v1/messages):
	// its frame keeps its place, so that offsets hold, and only its ID and
	// CreatedAt. Nothing delivers, lists or finds it.
	FlagDeleted Flags = 1 << 1
	// FlagTraceparent means a Traceparent field follows the payload. Encode
	// sets it on every frame with a Traceparent.
	FlagTraceparent Flags = 1 << 2
)

// Frame is one message of a segment.
type Frame struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       string
	ProducerSub   string
	CreatedAt     int64 // unix microseconds, UTC
	Flags         Flags
	KeyID         uint32 // encryption key id when sealed, else 0
	Payload       []byte // raw JSON, or ciphertext when sealed
	// Traceparent is the W3C trace context of the push that stored the
	// message, so that its consumer continues the producer's trace.
	Traceparent string
}

// Sealed reports whether the payload is encrypted.
func (f *Frame) Sealed() bool { return f.Flags&FlagSealed != 0 }

// Deleted reports whether the message was deleted.
func (f *Frame) Deleted() bool { return f.Flags&FlagDeleted != 0 }

// MaxSegmentSize is the largest uncompressed segment Decode accepts. It is a
// guard against hostile or corrupt bodies claiming huge sizes; writers must
// cut segments well below it, since Encode does not refuse larger ones.
const MaxSegmentSize = 256 << 20

// ErrCorrupt is wrapped by every error Decode returns.
var ErrCorrupt = errors.New("segment: corrupt")

const (
	formatV1 = 1

	// The smallest possible frame: ID, three one-byte varints and four
	// zero lengths. It bounds the frame count a body can honestly hold,
	// before the frames slice is allocated.
	minFrameSize = len(uuid.UUID{}) + 3 + 4

	// Scratch buffers that grew past this are dropped rather than pooled so
	// that one huge segment does not pin its memory for the process lifetime.
	maxPooledScratch = 4 << 20
)

var (
	// EncodeAll and DecodeAll are safe for concurrent use, and each call
	// holds one of the coder's internal states for its duration, so the
	// concurrency must be GOMAXPROCS: with 1, every partition writer in
	// the process would queue behind a single encoder.
	encoder = must(zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
		zstd.WithLowerEncoderMem(true),
		// The xxhash checksum already covers the uncompressed bytes.
		zstd.WithEncoderCRC(false),
	))
	decoder = must(zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxSegmentSize),
	))

	scratchPool = sync.Pool{New: func() any { return new(scratch) }}
)

type scratch struct {
	raw, packed []byte
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("segment: zstd setup: %v", err))
	}
	return v
}

// Encode appends the compressed segment holding frames to dst and returns it
// with the xxhash64 of the uncompressed bytes (version byte included).
// Zero frames is a valid, empty segment. Encode cannot fail, so it is up to
// the caller to keep segments under MaxSegmentSize, or Decode will refuse
// them. Beyond growing dst, Encode does not allocate once its pooled scratch
// buffers are warm.
func Encode(dst []byte, frames []Frame) (body []byte, checksum uint64) {
	s := scratchPool.Get().(*scratch)
	s.raw = appendFrames(s.raw[:0], frames)
	checksum = xxhash.Sum64(s.raw)
	// Compress into scratch and copy, rather than straight into dst: with
	// lower encoder memory EncodeAll grows a short dst step by step.
	s.packed = encoder.EncodeAll(s.raw, s.packed[:0])
	body = append(dst, s.packed...)
	if cap(s.raw) <= maxPooledScratch && cap(s.packed) <= maxPooledScratch {
		scratchPool.Put(s)
	}
	return body, checksum
}

func appendFrames(raw []byte, frames []Frame) []byte {
	// Reserve an upper bound up front so a cold buffer grows once.
	n := 1
	for i := range frames {
		f := &frames[i]
		n += minFrameSize + 8*binary.MaxVarintLen64 +
			len(f.TransactionID) + len(f.TraceID) + len(f.ProducerSub) + len(f.Payload) + len(f.Traceparent)
	}
	raw = slices.Grow(raw, n)

	raw = append(raw, formatV1)
	var prev int64
	for i := range frames {
		f := &frames[i]
		raw = append(raw, f.ID[:]...)
		// Consecutive messages are microseconds apart, so the delta is
		// 1–3 bytes instead of 8. Wrapping subtraction keeps it exact.
		raw = binary.AppendVarint(raw, f.CreatedAt-prev)
		prev = f.CreatedAt
		flags := f.Flags
		if f.Traceparent != "" {
			flags |= FlagTraceparent
		}
		raw = binary.AppendUvarint(raw, uint64(flags))
		raw = binary.AppendUvarint(raw, uint64(f.KeyID))
		raw = appendField(raw, f.TransactionID)
		raw = appendField(raw, f.TraceID)
		raw = appendField(raw, f.ProducerSub)
		raw = appendField(raw, f.Payload)
		if flags&FlagTraceparent != 0 {
			raw = appendField(raw, f.Traceparent)
		}
	}
	return raw
}

func appendField[T string | []byte](raw []byte, v T) []byte {
	raw = binary.AppendUvarint(raw, uint64(len(v)))
	return append(raw, v...)
}

// Decode decompresses body, verifies it against checksum and frameCount, and
// returns its frames. Every error wraps ErrCorrupt.
//
// The returned frames share one freshly allocated buffer: their strings and
// payloads point into it, so keeping any one field alive keeps the whole
// decompressed segment alive (clone what outlives the batch). Payloads may
// be modified in place; appending to one reallocates it rather than
// overwriting its neighbours. An empty payload decodes as nil.
func Decode(body []byte, checksum uint64, frameCount int) ([]Frame, error) {
	return DecodeInto(nil, body, checksum, frameCount)
}

// DecodeInto is Decode that reuses dst's frames when it has room: a pop
// decodes a segment per partition batch, and copies what it answers out of
// the frames. Their strings and payloads still point into a new buffer.
func DecodeInto(dst []Frame, body []byte, checksum uint64, frameCount int) ([]Frame, error) {
	if frameCount < 0 {
		return nil, fmt.Errorf("%w: negative frame count %d", ErrCorrupt, frameCount)
	}
	raw, err := decoder.DecodeAll(body, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %w", ErrCorrupt, err)
	}
	if sum := xxhash.Sum64(raw); sum != checksum {
		return nil, fmt.Errorf("%w: checksum %016x, want %016x", ErrCorrupt, sum, checksum)
	}
	if len(raw) == 0 || raw[0] != formatV1 {
		return nil, fmt.Errorf("%w: unknown format version", ErrCorrupt)
	}
	if frameCount > (len(raw)-1)/minFrameSize {
		return nil, fmt.Errorf("%w: %d bytes cannot hold %d frames", ErrCorrupt, len(raw), frameCount)
	}

	frames := dst[:0]
	if cap(frames) < frameCount {
		frames = make([]Frame, frameCount)
	}
	frames = frames[:frameCount]
	clear(frames)
	r := reader{buf: raw, off: 1}
	var prev int64
	for i := range frames {
		f := &frames[i]
		r.read(f.ID[:], "id")
		prev += r.varint("created_at")
		f.CreatedAt = prev
		f.Flags = Flags(r.uint32("flags"))
		f.KeyID = r.uint32("key_id")
		f.TransactionID = r.string("transaction_id")
		f.TraceID = r.string("trace_id")
		f.ProducerSub = r.string("producer_sub")
		f.Payload = r.bytes("payload")
		if f.Flags&FlagTraceparent != 0 {
			f.Traceparent = r.string("traceparent")
		}
		if r.bad != "" {
			return nil, fmt.Errorf("%w: frame %d of %d: malformed %s at byte %d",
				ErrCorrupt, i, frameCount, r.bad, r.off)
		}
	}
	if r.off != len(raw) {
		return nil, fmt.Errorf("%w: %d bytes left after %d frames", ErrCorrupt, len(raw)-r.off, frameCount)
	}
	return frames, nil
}

// reader parses the uncompressed body. After the first failure it records
// the field name in bad and every later read returns a zero value, so the
// caller checks once per frame instead of once per field.
type reader struct {
	buf []byte
	off int
	bad string
}

func (r *reader) fail(field string) {
	if r.bad == "" {
		r.bad = field
	}
}

func (r *reader) read(dst []byte, field string) {
	if r.bad != "" || len(r.buf)-r.off < len(dst) {
		r.fail(field)
		return
	}
	r.off += copy(dst, r.buf[r.off:])
}

func (r *reader) uvarint(field string) uint64 {
	if r.bad != "" {
		return 0
	}
	v, n := binary.Uvarint(r.buf[r.off:])
	// A trailing zero byte means a padded, non-minimal encoding.
	if n <= 0 || n > 1 && r.buf[r.off+n-1] == 0 {
		r.fail(field)
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint(field string) int64 {
	u := r.uvarint(field)
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (r *reader) uint32(field string) uint32 {
	v := r.uvarint(field)
	if v > math.MaxUint32 {
		r.fail(field)
		return 0
	}
	return uint32(v)
}

func (r *reader) bytes(field string) []byte {
	n := r.uvarint(field)
	if r.bad != "" || n > uint64(len(r.buf)-r.off) {
		r.fail(field)
		return nil
	}
	if n == 0 {
		return nil
	}
	end := r.off + int(n)
	// Capped capacity: an append by the caller must not run into the next field.
	b := r.buf[r.off:end:end]
	r.off = end
	return b
}

func (r *reader) string(field string) string {
	b := r.bytes(field)
	if len(b) == 0 {
		return ""
	}
	// Safe because raw is private to Decode and the only slices of it that
	// escape are payloads, which never overlap string bytes; this saves a
	// copy and an allocation per string.
	return unsafe.String(&b[0], len(b))
}
