// Package seal encrypts message payloads at rest with AES-256-GCM and lets
// the key rotate without re-encrypting what is already stored.
//
// Each sealed payload is stored alongside the id of the key that sealed it.
// The id is derived from the key itself (KeyID), so every replica given the
// same key files agrees on it without further configuration. To rotate, make
// the new key current and keep the previous one among the old keys until no
// payload sealed under it remains. Rotate well before a key has sealed 2^32
// payloads: beyond that, random 96-bit nonces risk repeating.
//
// Sealed layout: a 12-byte random nonce, then the ciphertext and its 16-byte
// GCM tag. The key id is bound as additional data, so a payload relabelled
// with another key's id fails to open instead of being misattributed.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// Overhead is how many bytes sealing adds to a payload: nonce and tag.
const Overhead = 12 + 16

var (
	// ErrNoKey is returned by a nil Sealer: no key is configured.
	ErrNoKey = errors.New("seal: no encryption key configured")
	// ErrUnknownKey is returned by Open for a key id the Sealer does not hold.
	ErrUnknownKey = errors.New("seal: unknown key id")
	// ErrAuthFailed is returned by Open when the payload is truncated or was
	// altered, or its key id was.
	ErrAuthFailed = errors.New("seal: message authentication failed")
)

// Sealer seals under its current key and opens under the current key or any
// old one. A nil *Sealer is valid and means that no key is configured. A
// Sealer is safe for concurrent use.
type Sealer struct {
	currentID uint32
	keys      map[uint32]keySlot
}

type keySlot struct {
	aead cipher.AEAD
	// ad is the key id as GCM additional data, built once because a slice
	// passed through the AEAD interface would otherwise be allocated on
	// every call.
	ad []byte
}

// KeyID returns the id of key: the first 4 bytes of its SHA-256, read
// big-endian.
func KeyID(key []byte) uint32 {
	sum := sha256.Sum256(key)
	return binary.BigEndian.Uint32(sum[:4])
}

// New returns a Sealer that seals under current and also opens payloads
// sealed under any of old. Each key must be KeySize bytes. Listing a key
// twice, for instance the current key among the old ones, is harmless.
func New(current []byte, old ...[]byte) (*Sealer, error) {
	s := &Sealer{currentID: KeyID(current), keys: make(map[uint32]keySlot, 1+len(old))}
	seen := make(map[uint32][]byte, 1+len(old))
	for i, k := range append([][]byte{current}, old...) {
		name := "current key"
		if i > 0 {
			name = fmt.Sprintf("old key %d", i)
		}
		if len(k) != KeySize {
			return nil, fmt.Errorf("seal: %s is %d bytes, want %d", name, len(k), KeySize)
		}
		id := KeyID(k)
		if prev, ok := seen[id]; ok {
			if bytes.Equal(prev, k) {
				continue
			}
			// Payloads record only the id, so two keys sharing one could
			// no longer say which of them sealed a payload.
			return nil, fmt.Errorf("seal: %s has the same id %08x as another key; generate a new key", name, id)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("seal: %s: %w", name, err)
		}
		// The random-nonce mode draws and prepends a fresh nonce on every
		// Seal, so no caller can reuse a nonce.
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("seal: %s: %w", name, err)
		}
		seen[id] = k
		s.keys[id] = keySlot{aead: aead, ad: binary.BigEndian.AppendUint32(nil, id)}
	}
	return s, nil
}

// Seal encrypts plaintext under the current key, appends the sealed form to
// dst and returns the extended slice with the id to store beside it. As with
// cipher.AEAD, to reuse plaintext's storage pass plaintext[:0] as dst;
// otherwise dst's spare capacity must not overlap plaintext.
func (s *Sealer) Seal(dst, plaintext []byte) (sealed []byte, keyID uint32, err error) {
	if s == nil {
		return nil, 0, ErrNoKey
	}
	k := s.keys[s.currentID]
	return k.aead.Seal(dst, nil, plaintext, k.ad), s.currentID, nil
}

// Open decrypts sealed, which was sealed under the key with id keyID,
// appends the plaintext to dst and returns the extended slice. To reuse
// sealed's storage pass sealed[:0] as dst.
func (s *Sealer) Open(dst, sealed []byte, keyID uint32) ([]byte, error) {
	if s == nil {
		return nil, ErrNoKey
	}
	k, ok := s.keys[keyID]
	if !ok {
		return nil, fmt.Errorf("%w %08x", ErrUnknownKey, keyID)
	}
	out, err := k.aead.Open(dst, nil, sealed, k.ad)
	if err != nil {
		return nil, fmt.Errorf("%w (key id %08x)", ErrAuthFailed, keyID)
	}
	return out, nil
}
