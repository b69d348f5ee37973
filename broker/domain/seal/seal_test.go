package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func mustNew(t testing.TB, current []byte, old ...[]byte) *Sealer {
	t.Helper()
	s, err := New(current, old...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyIDIsStable(t *testing.T) {
	// Pinned so that a change to the derivation, which would strand every
	// stored payload, cannot go unnoticed.
	key := bytes.Repeat([]byte{0x42}, KeySize)
	if got, want := KeyID(key), uint32(0x425ed4e4); got != want {
		t.Errorf("KeyID = %08x, want %08x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	key := newKey(t)
	s := mustNew(t, key)
	for _, pt := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("payload "), 1<<14)} {
		prefix := []byte("hdr:")
		sealed, id, err := s.Seal(bytes.Clone(prefix), pt)
		if err != nil {
			t.Fatal(err)
		}
		if id != KeyID(key) {
			t.Errorf("key id = %08x, want %08x", id, KeyID(key))
		}
		if !bytes.HasPrefix(sealed, prefix) || len(sealed) != len(prefix)+len(pt)+Overhead {
			t.Fatalf("Seal must append %d+%d bytes to dst; got %d bytes", len(pt), Overhead, len(sealed))
		}
		if len(pt) > 8 && bytes.Contains(sealed, pt[:8]) {
			t.Error("sealed payload contains plaintext")
		}
		got, err := s.Open([]byte("out:"), sealed[len(prefix):], id)
		if err != nil {
			t.Fatal(err)
		}
		if want := append([]byte("out:"), pt...); !bytes.Equal(got, want) {
			t.Errorf("Open appended %q, want %q", got, want)
		}
	}
}

func TestSealUsesFreshNonces(t *testing.T) {
	s := mustNew(t, newKey(t))
	a, _, _ := s.Seal(nil, []byte("same"))
	b, _, _ := s.Seal(nil, []byte("same"))
	if bytes.Equal(a[:12], b[:12]) || bytes.Equal(a, b) {
		t.Error("two seals of one plaintext share a nonce")
	}
}

func TestInPlace(t *testing.T) {
	s := mustNew(t, newKey(t))
	buf := make([]byte, 5, 5+Overhead)
	copy(buf, "hello")
	sealed, id, err := s.Seal(buf[:0], buf)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := s.Open(sealed[:0], sealed, id)
	if err != nil || string(opened) != "hello" {
		t.Fatalf("Open in place = %q, %v", opened, err)
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey_ := newKey(t), newKey(t)
	before := mustNew(t, oldKey)
	sealedOld, oldID, err := before.Seal(nil, []byte("sealed before rotation"))
	if err != nil {
		t.Fatal(err)
	}

	after := mustNew(t, newKey_, oldKey)
	got, err := after.Open(nil, sealedOld, oldID)
	if err != nil || string(got) != "sealed before rotation" {
		t.Fatalf("open under old key after rotation = %q, %v", got, err)
	}

	sealedNew, newID, err := after.Seal(nil, []byte("sealed after rotation"))
	if err != nil {
		t.Fatal(err)
	}
	if newID != KeyID(newKey_) || newID == oldID {
		t.Errorf("new seals use key id %08x, want the new key's %08x", newID, KeyID(newKey_))
	}
	// A replica that has not rotated yet cannot read the new key's payloads,
	// and says so plainly.
	if _, err := before.Open(nil, sealedNew, newID); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("old replica: err = %v, want %v", err, ErrUnknownKey)
	}
	// Retiring the old key makes its payloads unreadable.
	retired := mustNew(t, newKey_)
	if _, err := retired.Open(nil, sealedOld, oldID); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("retired key: err = %v, want %v", err, ErrUnknownKey)
	}
}

func TestOpenRejects(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	s := mustNew(t, k1, k2)
	sealed, id, err := s.Seal(nil, []byte("attack at dawn"))
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 1
		return b
	}

	tests := []struct {
		name    string
		sealed  []byte
		keyID   uint32
		wantErr error
	}{
		{name: "nonce flipped", sealed: flip(0), keyID: id, wantErr: ErrAuthFailed},
		{name: "ciphertext flipped", sealed: flip(12), keyID: id, wantErr: ErrAuthFailed},
		{name: "tag flipped", sealed: flip(len(sealed) - 1), keyID: id, wantErr: ErrAuthFailed},
		{name: "truncated", sealed: sealed[:len(sealed)-1], keyID: id, wantErr: ErrAuthFailed},
		{name: "shorter than overhead", sealed: sealed[:Overhead-1], keyID: id, wantErr: ErrAuthFailed},
		{name: "empty", sealed: nil, keyID: id, wantErr: ErrAuthFailed},
		{name: "extended", sealed: append(bytes.Clone(sealed), 0), keyID: id, wantErr: ErrAuthFailed},
		// The other key is held, but the payload was not sealed under it.
		{name: "relabelled with another known key", sealed: sealed, keyID: KeyID(k2), wantErr: ErrAuthFailed},
		{name: "unknown key id", sealed: sealed, keyID: id + 1, wantErr: ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := s.Open(nil, tt.sealed, tt.keyID)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open() = %q, %v; want error %v", out, err, tt.wantErr)
			}
		})
	}
}

func TestNilSealer(t *testing.T) {
	var s *Sealer
	if _, _, err := s.Seal(nil, []byte("x")); !errors.Is(err, ErrNoKey) {
		t.Errorf("Seal on nil Sealer: err = %v, want %v", err, ErrNoKey)
	}
	if _, err := s.Open(nil, []byte("x"), 1); !errors.Is(err, ErrNoKey) {
		t.Errorf("Open on nil Sealer: err = %v, want %v", err, ErrNoKey)
	}
}

func TestNew(t *testing.T) {
	k := newKey(t)
	if _, err := New(nil); err == nil || !strings.Contains(err.Error(), "current key is 0 bytes") {
		t.Errorf("New(nil) error = %v", err)
	}
	if _, err := New(k[:31]); err == nil {
		t.Error("New accepted a 31-byte key")
	}
	if _, err := New(k, newKey(t), make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "old key 2 is 16 bytes") {
		t.Errorf("New with a short old key: error = %v", err)
	}
	// The current key repeated among the old ones is not a collision.
	s, err := New(k, k, bytes.Clone(k))
	if err != nil {
		t.Fatalf("New with duplicate keys: %v", err)
	}
	if len(s.keys) != 1 {
		t.Errorf("duplicate keys registered %d times", len(s.keys))
	}
}

func TestParseKey(t *testing.T) {
	key := newKey(t)
	hexKey := hex.EncodeToString(key)
	b64Key := base64.StdEncoding.EncodeToString(key)

	tests := []struct {
		name string
		data []byte
		ok   bool
	}{
		{name: "raw", data: key, ok: true},
		{name: "hex", data: []byte(hexKey), ok: true},
		{name: "hex upper case", data: []byte(strings.ToUpper(hexKey)), ok: true},
		{name: "hex LF", data: []byte(hexKey + "\n"), ok: true},
		{name: "hex CRLF", data: []byte(hexKey + "\r\n"), ok: true},
		{name: "base64", data: []byte(b64Key), ok: true},
		{name: "base64 LF", data: []byte(b64Key + "\n"), ok: true},
		{name: "empty", data: nil},
		{name: "raw 31 bytes", data: key[:31]},
		{name: "raw with newline", data: append(bytes.Clone(key[:31]), '\n', 'x')},
		{name: "hex too short", data: []byte(hexKey[:62])},
		{name: "hex not hex", data: []byte("zz" + hexKey[2:])},
		{name: "hex two newlines", data: []byte(hexKey + "\n\n")},
		{name: "base64 unpadded", data: []byte(strings.TrimRight(b64Key, "="))},
		// All-ones bytes encode to "/" in every position, so the URL
		// alphabet is bound to differ from the standard one.
		{name: "base64 url alphabet", data: []byte(base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, KeySize)))},
		{name: "base64 of 24 bytes", data: []byte(base64.StdEncoding.EncodeToString(key[:24]) + "\n")},
		{name: "base64 of 31 bytes", data: []byte(base64.StdEncoding.EncodeToString(key[:31]))},
		{name: "base64 of 33 bytes", data: []byte(base64.StdEncoding.EncodeToString(append(bytes.Clone(key), 1)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.data)
			if !tt.ok {
				if err == nil {
					t.Fatalf("ParseKey accepted %q", tt.data)
				}
				if len(tt.data) >= 8 && strings.Contains(err.Error(), string(tt.data[:8])) {
					t.Errorf("error %q quotes the key material", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, key) {
				t.Errorf("ParseKey = %x, want %x", got, key)
			}
		})
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldRaw, oldHex, current := newKey(t), newKey(t), newKey(t)
	rawPath := write("old-raw", oldRaw)
	hexPath := write("old-hex", []byte(hex.EncodeToString(oldHex)+"\n"))
	curPath := write("current", []byte(base64.StdEncoding.EncodeToString(current)+"\n"))

	s, err := LoadFiles(curPath, []string{rawPath, hexPath})
	if err != nil {
		t.Fatal(err)
	}
	if _, id, _ := s.Seal(nil, nil); id != KeyID(current) {
		t.Errorf("current key id = %08x, want %08x", id, KeyID(current))
	}
	for _, k := range [][]byte{oldRaw, oldHex} {
		sealed, id, err := mustNew(t, k).Seal(nil, []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Open(nil, sealed, id); err != nil || string(got) != "old" {
			t.Errorf("open under old key %08x = %q, %v", id, got, err)
		}
	}

	if _, err := LoadFiles(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "read key file") {
		t.Errorf("missing current file: error = %v", err)
	}
	bad := write("bad", []byte("not a key\n"))
	if _, err := LoadFiles(curPath, []string{rawPath, bad}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad old file: error = %v, want it to name %s", err, bad)
	}
}

const benchPayload = 100

func BenchmarkSeal(b *testing.B) {
	s := mustNew(b, newKey(b))
	pt := make([]byte, benchPayload)
	buf := make([]byte, 0, benchPayload+Overhead)
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Seal(buf[:0], pt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	s := mustNew(b, newKey(b))
	sealed, id, err := s.Seal(nil, make([]byte, benchPayload))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, benchPayload)
	b.SetBytes(benchPayload)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Open(buf[:0], sealed, id); err != nil {
			b.Fatal(err)
		}
	}
}
