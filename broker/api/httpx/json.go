package httpx

import (
	"unicode/utf8"

	"github.com/google/uuid"
)

// TimeFormat is the wire format of timestamps: RFC 3339, UTC, microseconds.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// The answers on the hot paths (pops, pushes, state reads) are built by
// hand into reused buffers; these write their JSON strings exactly as
// encoding/json would.

// AppendUUID appends id as a JSON string in its canonical form, without
// the string that id.String would allocate.
func AppendUUID(b []byte, id uuid.UUID) []byte {
	b = append(b, '"')
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hex[c>>4], hex[c&0xf])
	}
	return append(b, '"')
}

const hex = "0123456789abcdef"

// AppendOptionalString appends *s as AppendString does, or null when s is
// nil.
func AppendOptionalString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

// AppendStringOrNull appends s as AppendString does, or null when s is "".
func AppendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return AppendString(b, s)
}

// plain are the ASCII bytes a JSON string holds as they are. A table,
// since AppendString asks for each byte of every id and name it writes.
var plain = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string, escaped as encoding/json does:
// quotes, backslashes, control characters, <, > and & (for HTML safety),
// U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
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
