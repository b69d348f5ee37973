package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"
)

// baseTime is a fixed instant (2025-01-01) so test data is reproducible.
const baseTime = int64(1_735_689_600_000_000)

// testFrames returns n frames shaped like real traffic: UUIDv7-style ids,
// random transaction ids and JSON payloads of about payloadSize bytes with
// enough entropy that compression ratios are not flattering.
func testFrames(n, payloadSize int) []Frame {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	const letters = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	frames := make([]Frame, n)
	for i := range frames {
		createdAt := baseTime + int64(i)*int64(1+rng.IntN(500))
		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], uint64(createdAt/1000)<<16|0x7000|rng.Uint64()&0xfff)
		binary.BigEndian.PutUint64(id[8:], 0x8000_0000_0000_0000|rng.Uint64()>>2)
		tx := uuid.UUID{}
		binary.BigEndian.PutUint64(tx[:8], rng.Uint64())
		binary.BigEndian.PutUint64(tx[8:], rng.Uint64())

		payload := fmt.Appendf(nil, `{"order":%d,"customer":"c-%06d","amount":%d.%02d,"sku":"%x","note":"`,
			i, rng.IntN(1e6), rng.IntN(1e4), rng.IntN(100), rng.Uint32())
		for len(payload) < payloadSize-2 {
			payload = append(payload, letters[rng.IntN(len(letters))])
		}
		payload = append(payload, `"}`...)

		frames[i] = Frame{
			ID:            id,
			TransactionID: tx.String(),
			ProducerSub:   "svc-orders",
			CreatedAt:     createdAt,
			Payload:       payload,
		}
		if i%2 == 0 {
			frames[i].TraceID = fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		}
	}
	return frames
}

func roundTrip(t *testing.T, frames []Frame) []Frame {
	t.Helper()
	got := roundTripLoose(t, frames)
	if err := equalFrames(got, frames); err != nil {
		t.Fatal(err)
	}
	return got
}

// equalFrames treats nil and empty payloads as equal, as Decode does.
func equalFrames(got, want []Frame) error {
	if len(got) != len(want) {
		return fmt.Errorf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Payload, w.Payload) {
			return fmt.Errorf("frame %d: payload %q, want %q", i, g.Payload, w.Payload)
		}
		g.Payload, w.Payload = nil, nil
		if !reflect.DeepEqual(g, w) {
			return fmt.Errorf("frame %d: got %+v, want %+v", i, g, w)
		}
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>9) // poorly compressible, unlike zeros
	}
	for _, tc := range []struct {
		name   string
		frames []Frame
	}{
		{"zero frames", nil},
		{"one frame", testFrames(1, 100)},
		{"many frames", testFrames(5000, 100)},
		{"empty strings and payload", []Frame{{}}},
		{"null payload", []Frame{{ID: uuid.New(), TransactionID: "t", CreatedAt: baseTime, Payload: []byte("null")}}},
		{"1 MiB payload", []Frame{{ID: uuid.New(), CreatedAt: baseTime, Payload: big}}},
		{"unicode", []Frame{{
			ID:            uuid.New(),
			TransactionID: "交易-😀-ünïcödé",
			TraceID:       "трасса\u0000with nul",
			ProducerSub:   "👩‍💻@example",
			CreatedAt:     baseTime,
			Payload:       []byte(`{"msg":"こんにちは 🌍"}`),
		}}},
		{"sealed", []Frame{{ID: uuid.New(), Flags: FlagSealed, KeyID: 7, Payload: []byte{0, 0xff, 0x10}}}},
		{"traceparent", []Frame{
			{ID: uuid.New(), Flags: FlagTraceparent, Traceparent: testTraceparent, Payload: []byte("1")},
			{ID: uuid.New(), Payload: []byte("2")},
			{ID: uuid.New(), Flags: FlagTraceparent | FlagSealed, Traceparent: testTraceparent},
		}},
		{"extreme values", []Frame{
			{CreatedAt: math.MaxInt64, Flags: math.MaxUint32, KeyID: math.MaxUint32},
			{CreatedAt: math.MinInt64},
			{CreatedAt: -1},
			{CreatedAt: 0},
		}},
		{"out-of-order times", []Frame{{CreatedAt: baseTime}, {CreatedAt: baseTime - 5}, {CreatedAt: baseTime + 1e9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := roundTrip(t, tc.frames)
			for i := range got {
				if got[i].Sealed() != (tc.frames[i].Flags&FlagSealed != 0) {
					t.Errorf("frame %d: Sealed() = %v", i, got[i].Sealed())
				}
			}
		})
	}
}

func TestEncodeAppendsToDst(t *testing.T) {
	frames := testFrames(3, 100)
	want, wantSum := Encode(nil, frames)
	prefix := []byte("prefix")
	got, sum := Encode(bytes.Clone(prefix), frames)
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) || sum != wantSum {
		t.Fatalf("Encode with dst is not prefix+body")
	}
}

func TestDecodedFramesDoNotOverlap(t *testing.T) {
	frames := testFrames(2, 50)
	body, sum := Encode(nil, frames)
	got, err := Decode(body, sum, 2)
	if err != nil {
		t.Fatal(err)
	}
	// Appending to or scribbling over one payload must not leak into the
	// strings of the next frame, which live right after it in the buffer.
	got[0].Payload = append(got[0].Payload, "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"...)
	clear(got[0].Payload)
	if err := equalFrames(got[1:], frames[1:]); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	frames := testFrames(20, 100)
	body, sum := Encode(nil, frames)
	compress := func(raw []byte) ([]byte, uint64) { return encoder.EncodeAll(raw, nil), xxhash.Sum64(raw) }
	raw := appendFrames(nil, frames)

	type input struct {
		body  []byte
		sum   uint64
		count int
		want  string // in the message, to show the intended check fired
	}
	cases := map[string]input{
		"truncated body":     {body[:len(body)-1], sum, 20, "decompress"},
		"half body":          {body[:len(body)/2], sum, 20, "decompress"},
		"empty body":         {nil, sum, 20, "checksum"},
		"wrong checksum":     {body, sum ^ 1, 20, "checksum"},
		"count one too many": {body, sum, 21, "frame 20 of 21"},
		"count one too few":  {body, sum, 19, "left after 19 frames"},
		"count zero":         {body, sum, 0, "left after 0 frames"},
		"count negative":     {body, sum, -1, "negative"},
		"count huge":         {body, sum, math.MaxInt, "cannot hold"},
		"garbage":            {[]byte("definitely not zstd, just text"), sum, 20, "decompress"},
		"trailing garbage":   {append(bytes.Clone(body), 0xde, 0xad), sum, 20, "decompress"},
	}
	t.Run("flipped bytes", func(t *testing.T) {
		// A flip may land in bits zstd ignores (padding, unused table
		// entries); then the checksum proves the output is still right.
		// Anything else must be refused.
		refused := 0
		for i := range len(body) {
			for _, mask := range []byte{0x01, 0x40, 0xff} {
				b := bytes.Clone(body)
				b[i] ^= mask
				got, err := Decode(b, sum, 20)
				switch {
				case errors.Is(err, ErrCorrupt):
					refused++
				case err != nil:
					t.Errorf("byte %d ^ %#x: %v does not wrap ErrCorrupt", i, mask, err)
				default:
					if err := equalFrames(got, frames); err != nil {
						t.Errorf("byte %d ^ %#x: accepted with wrong data: %v", i, mask, err)
					}
				}
			}
		}
		if total := 3 * len(body); refused < total*9/10 {
			t.Errorf("only %d of %d flips refused", refused, total)
		}
		t.Logf("%d of %d flips refused, the rest decoded to the original", refused, 3*len(body))
	})

	// Valid zstd and valid checksum, but the bytes inside are not frames.
	frame := func(tail ...byte) []byte { // version, zero ID, created_at 0, then tail
		return append(append([]byte{formatV1}, make([]byte, 17)...), tail...)
	}
	for name, in := range map[string]input{
		"zstd of text":        {[]byte("hello, world"), 0, 20, "version"},
		"zstd of nothing":     {nil, 0, 0, "version"},
		"zstd wrong version":  {append([]byte{2}, raw[1:]...), 0, 20, "version"},
		"zstd truncated":      {raw[:len(raw)-3], 0, 20, "frame 19 of 20: malformed payload"},
		"zstd extra bytes":    {append(bytes.Clone(raw), 0), 0, 20, "1 bytes left"},
		"zstd padded varint":  {padFirstVarint(raw), 0, 20, "frame 0 of 20: malformed created_at"},
		"zstd key_id > 2^32":  {frame(0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0, 0, 0), 0, 1, "malformed key_id"},
		"zstd varint > 2^64":  {frame(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0), 0, 1, "malformed key_id"},
		"zstd length overrun": {frame(0, 0, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0), 0, 1, "malformed transaction_id"},
		"zstd short last id":  {append(frame(0, 0, 0, 0, 0, 30), make([]byte, 35)...), 0, 2, "frame 1 of 2: malformed id"},
		"zstd stray bytes":    {[]byte{formatV1, 1, 2, 3}, 0, 0, "3 bytes left"},
	} {
		in.body, in.sum = compress(in.body)
		cases[name] = in
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(in.body, in.sum, in.count)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode = %d frames, %v; want ErrCorrupt", len(got), err)
			}
			if !strings.Contains(err.Error(), in.want) {
				t.Errorf("error %q does not mention %q", err, in.want)
			}
			if got != nil {
				t.Fatalf("Decode returned frames with an error")
			}
		})
	}
}

// padFirstVarint rewrites the first frame's one-byte CreatedAt delta as an
// equal-valued two-byte varint, with the checksum fixed by the caller.
func padFirstVarint(raw []byte) []byte {
	at := 1 + 16
	_, n := binary.Uvarint(raw[at:])
	out := append([]byte(nil), raw[:at]...)
	v := raw[at : at+n]
	out = append(out, v[:n-1]...)
	out = append(out, v[n-1]|0x80, 0)
	return append(out, raw[at+n:]...)
}

func TestDecodeOversize(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses 257 MiB")
	}
	// Declared content size over the limit: rejected before allocating.
	huge := make([]byte, MaxSegmentSize+1)
	huge[0] = formatV1
	body := encoder.EncodeAll(huge, nil)
	if _, err := Decode(body, xxhash.Sum64(huge), 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("declared oversize: %v", err)
	}

	// Unknown content size (streamed): rejected once output passes the limit.
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for range MaxSegmentSize>>20 + 1 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(buf.Bytes(), 0, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("streamed oversize: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			frames := testFrames(10+g*13, 40+g*30)
			var dst []byte
			for range 50 {
				var sum uint64
				dst, sum = Encode(dst[:0], frames)
				got, err := Decode(dst, sum, len(frames))
				if err == nil {
					err = equalFrames(got, frames)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestEncodeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool is randomised under the race detector")
	}
	frames := testFrames(100, 100)
	dst, _ := Encode(nil, frames)
	if n := testing.AllocsPerRun(100, func() { dst, _ = Encode(dst[:0], frames) }); n > 0 {
		t.Errorf("Encode into a reused dst: %v allocs, want 0", n)
	}
}

func BenchmarkEncode100(b *testing.B) {
	frames := testFrames(100, 100)
	body, _ := Encode(nil, frames)
	b.SetBytes(int64(len(appendFrames(nil, frames))))
	b.ReportAllocs()
	var dst []byte
	for b.Loop() {
		dst, _ = Encode(dst[:0], frames)
	}
	b.ReportMetric(float64(len(body)), "body-bytes")
}

func BenchmarkEncode100NewDst(b *testing.B) {
	frames := testFrames(100, 100)
	b.SetBytes(int64(len(appendFrames(nil, frames))))
	b.ReportAllocs()
	for b.Loop() {
		Encode(nil, frames)
	}
}

func BenchmarkDecode100(b *testing.B) {
	frames := testFrames(100, 100)
	body, sum := Encode(nil, frames)
	b.SetBytes(int64(len(appendFrames(nil, frames))))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(body, sum, 100); err != nil {
			b.Fatal(err)
		}
	}
}

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestFramesWrittenBeforeTraceparentStillDecode builds a segment in the
// layout frames had before FlagTraceparent existed, by hand, and decodes
// it; a frame without a traceparent must still encode to exactly that.
func TestFramesWrittenBeforeTraceparentStillDecode(t *testing.T) {
	id := uuid.MustParse("01890a5d-ac96-774b-bcce-b302099a8057")
	raw := []byte{formatV1}
	raw = append(raw, id[:]...)
	raw = binary.AppendVarint(raw, baseTime)
	raw = binary.AppendUvarint(raw, uint64(FlagSealed))
	raw = binary.AppendUvarint(raw, 3)
	for _, f := range []string{"tx", "trace", "sub", "payload"} {
		raw = binary.AppendUvarint(raw, uint64(len(f)))
		raw = append(raw, f...)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	body := enc.EncodeAll(raw, nil)
	got, err := Decode(body, xxhash.Sum64(raw), 1)
	if err != nil {
		t.Fatalf("Decode of an old frame: %v", err)
	}
	want := []Frame{{ID: id, TransactionID: "tx", TraceID: "trace", ProducerSub: "sub", CreatedAt: baseTime,
		Flags: FlagSealed, KeyID: 3, Payload: []byte("payload")}}
	if err := equalFrames(got, want); err != nil {
		t.Fatal(err)
	}
	if _, sum := Encode(nil, want); sum != xxhash.Sum64(raw) {
		t.Errorf("a frame without a traceparent no longer encodes in the old layout")
	}
}

// TestEncodeMarksFramesWithATraceparent: the flag follows the field, so a
// caller cannot store a traceparent that Decode would not read back.
func TestEncodeMarksFramesWithATraceparent(t *testing.T) {
	got := roundTripLoose(t, []Frame{{ID: uuid.New(), Traceparent: testTraceparent}})
	if got[0].Traceparent != testTraceparent || got[0].Flags&FlagTraceparent == 0 {
		t.Errorf("got traceparent %q flags %b", got[0].Traceparent, got[0].Flags)
	}
}

// roundTripLoose encodes and decodes frames, comparing nothing.
func roundTripLoose(t *testing.T, frames []Frame) []Frame {
	t.Helper()
	body, sum := Encode(nil, frames)
	got, err := Decode(body, sum, len(frames))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return got
}

// TestDecodeIntoAnswersAsDecodeWithNothingLeftOfTheFramesItReuses: a frame
// decoded over one that had a traceparent, a trace id and a sealed flag
// keeps none of them.
func TestDecodeIntoAnswersAsDecodeWithNothingLeftOfTheFramesItReuses(t *testing.T) {
	first := testFrames(8, 64)
	for i := range first {
		first[i].Traceparent, first[i].TraceID, first[i].Flags, first[i].KeyID = testTraceparent, "trace", FlagSealed, 7
	}
	body, sum := Encode(nil, first)
	buf, err := DecodeInto(nil, body, sum, len(first))
	if err != nil {
		t.Fatal(err)
	}
	second := testFrames(5, 32)
	body, sum = Encode(nil, second)
	got, err := DecodeInto(buf, body, sum, len(second))
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &buf[0] {
		t.Errorf("DecodeInto allocated frames although dst had room")
	}
	want, err := Decode(body, sum, len(second))
	if err != nil {
		t.Fatal(err)
	}
	if err := equalFrames(got, want); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeInto(buf[:1], body, sum, len(second)); err != nil || len(got) != len(second) {
		t.Fatalf("DecodeInto into a short dst: %d frames, %v", len(got), err)
	}
}
