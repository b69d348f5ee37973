package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
)

// ParseKey decodes a key in any of the forms a key file may hold:
//
//   - exactly 32 raw bytes, as from `head -c 32 /dev/urandom`;
//   - 64 hexadecimal characters, as from `openssl rand -hex 32`;
//   - standard, padded base64 of 32 bytes (44 characters), as from
//     `openssl rand -base64 32` or a Kubernetes Secret's decoded value.
//
// The text forms may end with a newline (LF or CRLF). The raw form may not:
// a file of exactly 32 bytes is always taken as a raw key, even when those
// bytes happen to be printable text.
func ParseKey(data []byte) ([]byte, error) {
	if len(data) == KeySize {
		return bytes.Clone(data), nil
	}
	text := bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	if len(text) == hex.EncodedLen(KeySize) {
		key := make([]byte, KeySize)
		if _, err := hex.Decode(key, text); err == nil {
			return key, nil
		}
	}
	if len(text) == base64.StdEncoding.EncodedLen(KeySize) {
		// Sized for what the text could decode to, not for a key: 44
		// characters may also carry 31 or 33 bytes.
		key := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
		if n, err := base64.StdEncoding.Decode(key, text); err == nil && n == KeySize {
			return key[:n], nil
		}
	}
	// The message gives only the length: the content is secret.
	return nil, fmt.Errorf("key is neither %d raw bytes, %d hex characters nor base64 of %d bytes (got %d bytes)",
		KeySize, hex.EncodedLen(KeySize), KeySize, len(data))
}

// LoadFiles reads the current key from currentPath and old keys from
// oldPaths (see ParseKey for the accepted forms) and returns a Sealer.
func LoadFiles(currentPath string, oldPaths []string) (*Sealer, error) {
	current, err := readKey(currentPath)
	if err != nil {
		return nil, err
	}
	old := make([][]byte, 0, len(oldPaths))
	for _, p := range oldPaths {
		k, err := readKey(p)
		if err != nil {
			return nil, err
		}
		old = append(old, k)
	}
	return New(current, old...)
}

func readKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: read key file: %w", err)
	}
	key, err := ParseKey(data)
	if err != nil {
		return nil, fmt.Errorf("seal: key file %s: %w", path, err)
	}
	return key, nil
}
