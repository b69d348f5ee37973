package segment

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/google/uuid"
)

// FuzzDecode feeds Decode hostile input. With compressed set, data is the
// body as stored, which mostly exercises zstd and the checksum. Otherwise
// data is an uncompressed segment that the target compresses and checksums
// itself, so the frame parser sees it despite the checksum guard.
func FuzzDecode(f *testing.F) {
	for _, frames := range [][]Frame{nil, {{}}, testFrames(1, 60), testFrames(3, 10)} {
		body, sum := Encode(nil, frames)
		f.Add(body, sum, len(frames), true)
		f.Add(appendFrames(nil, frames), uint64(0), len(frames), false)
	}
	f.Add([]byte{}, uint64(0), 0, true)
	f.Add([]byte("\x28\xb5\x2f\xfd garbage"), uint64(0), 1, true)
	f.Add([]byte{formatV1, 0x80}, uint64(0), 1, false)

	f.Fuzz(func(t *testing.T, data []byte, checksum uint64, frameCount int, compressed bool) {
		body := data
		if !compressed {
			body, checksum = encoder.EncodeAll(data, nil), xxhash.Sum64(data)
		}
		frames, err := Decode(body, checksum, frameCount)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			if frames != nil {
				t.Fatalf("frames returned with error %v", err)
			}
			return
		}
		if len(frames) != frameCount {
			t.Fatalf("got %d frames, want %d", len(frames), frameCount)
		}
		// The encoding is canonical, so accepted input re-encodes to the
		// very bytes that were checksummed.
		raw := appendFrames(nil, frames)
		if xxhash.Sum64(raw) != checksum {
			t.Fatalf("re-encoding changed the checksum")
		}
		if !compressed && !bytes.Equal(raw, data) {
			t.Fatalf("re-encoding changed the bytes:\n got %x\nwant %x", raw, data)
		}
	})
}

// FuzzRoundTrip checks that Decode returns exactly what Encode was given,
// over up to 16 frames whose fields are derived from the fuzzed values.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), "tx-1", "trace", "sub", baseTime, int64(37), uint32(0), uint32(0), []byte(`{"a":1}`), uint8(3))
	f.Add([]byte{}, "", "", "", int64(0), int64(0), uint32(1), uint32(9), []byte("null"), uint8(1))
	f.Add([]byte{0xff}, "交易", "😀", "\x00", int64(-1), int64(-1<<63), ^uint32(0), ^uint32(0), []byte{}, uint8(16))

	f.Fuzz(func(t *testing.T, id []byte, tx, trace, sub string, createdAt, step int64,
		flags, keyID uint32, payload []byte, n uint8) {
		frames := make([]Frame, n%17)
		for i := range frames {
			// Vary each frame so deltas, lengths and ids differ between them.
			var fid uuid.UUID
			copy(fid[:], id)
			fid[i] ^= byte(i)
			frames[i] = Frame{
				ID:            fid,
				TransactionID: tx[min(i, len(tx)):],
				TraceID:       trace[:len(trace)-min(i, len(trace))],
				ProducerSub:   sub,
				CreatedAt:     createdAt + int64(i)*step, // wraps on purpose
				Flags:         Flags(flags >> i),
				KeyID:         keyID + uint32(i),
				Payload:       payload[min(i, len(payload)):],
			}
		}
		got := roundTrip(t, frames)
		body, sum := Encode(nil, frames)
		if again, sum2 := Encode(nil, got); sum2 != sum || !bytes.Equal(again, body) {
			t.Fatalf("encoding is not deterministic")
		}
	})
}
