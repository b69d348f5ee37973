package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// The consumers of popack and cycle read every pop answer, and encoding/json
// spent about half of the tool's CPU doing it, CPU taken from the broker
// under test on a small machine. popAnswer reads the few fields a consumer
// needs in one pass over the body, skipping the rest (payloads included)
// without building anything, and refuses a body that is not well-formed
// JSON structure. It still reads every message it counts: a message without
// an id is an error.

// popAnswer is what a consumer reads of a pop answer. Its strings are
// slices of the body and valid while the body is.
type popAnswer struct {
	PartitionID, Partition, LeaseID []byte
	Messages                        []popMessage
}

type popMessage struct {
	ID, TransactionID, PartitionID []byte
}

var errPopAnswer = errors.New("malformed pop answer")

// parse reads body into a, reusing a.Messages.
func (a *popAnswer) parse(body []byte) error {
	*a = popAnswer{Messages: a.Messages[:0]}
	s := scanner{b: body}
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "partitionId":
			return s.str(&a.PartitionID)
		case "partition":
			return s.str(&a.Partition)
		case "leaseId":
			return s.str(&a.LeaseID)
		case "messages":
			return s.array(func() error {
				var m popMessage
				err := s.object(func(key []byte) error {
					switch string(key) {
					case "id":
						return s.str(&m.ID)
					case "transactionId":
						return s.str(&m.TransactionID)
					case "partitionId":
						return s.str(&m.PartitionID)
					}
					return s.skip()
				})
				if err == nil && len(m.ID) == 0 {
					err = fmt.Errorf("%w: message %d has no id", errPopAnswer, len(a.Messages))
				}
				a.Messages = append(a.Messages, m)
				return err
			})
		}
		return s.skip()
	})
	if err == nil && s.ws() < len(s.b) {
		err = fmt.Errorf("%w: data after the answer", errPopAnswer)
	}
	return err
}

// succeeded reads the "success" member of an answer object (the cycle's),
// without decoding the rest.
func succeeded(body []byte) (bool, error) {
	s := scanner{b: body}
	ok := false
	err := s.object(func(key []byte) error {
		if string(key) == "success" {
			ok = s.ws()+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "true"
		}
		return s.skip()
	})
	return ok, err
}

// scanner walks JSON without allocating.
type scanner struct {
	b []byte
	i int
}

// ws skips white space and returns the position of the next byte.
func (s *scanner) ws() int {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.i
		}
	}
	return s.i
}

func (s *scanner) fail(want string) error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end, want %s", errPopAnswer, want)
	}
	return fmt.Errorf("%w: at byte %d, want %s", errPopAnswer, s.i, want)
}

func (s *scanner) expect(c byte) bool {
	if s.ws() < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, calling member with each key; member must read
// the value.
func (s *scanner) object(member func(key []byte) error) error {
	if !s.expect('{') {
		return s.fail("{")
	}
	if s.expect('}') {
		return nil
	}
	for {
		var key []byte
		if err := s.str(&key); err != nil {
			return err
		}
		if !s.expect(':') {
			return s.fail(":")
		}
		if err := member(key); err != nil {
			return err
		}
		if s.expect('}') {
			return nil
		}
		if !s.expect(',') {
			return s.fail(", or }")
		}
	}
}

// array reads an array, calling elem to read each element.
func (s *scanner) array(elem func() error) error {
	if !s.expect('[') {
		return s.fail("[")
	}
	if s.expect(']') {
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if s.expect(']') {
			return nil
		}
		if !s.expect(',') {
			return s.fail(", or ]")
		}
	}
}

// str reads a string into *dst. A string with escapes is decoded into a
// copy; the wire fields read here never have any in practice. null reads as
// empty.
func (s *scanner) str(dst *[]byte) error {
	if s.ws()+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		*dst = nil
		return nil
	}
	if !s.expect('"') {
		return s.fail("a string")
	}
	start, escaped := s.i, false
	for s.i < len(s.b) {
		// Most of a pop answer is strings: skip their plain bytes eight at
		// a time, then one at a time up to the byte that ends the run.
		for s.i+8 <= len(s.b) && !hasStrSpecial(binary.LittleEndian.Uint64(s.b[s.i:])) {
			s.i += 8
		}
		for s.i < len(s.b) && !strSpecial[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			*dst = s.b[start:s.i]
			s.i++
			if escaped {
				var v string
				if err := json.Unmarshal(s.b[start-1:s.i], &v); err != nil {
					return fmt.Errorf("%w: %v", errPopAnswer, err)
				}
				*dst = []byte(v)
			}
			return nil
		case c == '\\':
			escaped = true
			s.i += 2
		default:
			return s.fail("no control character in a string")
		}
	}
	return s.fail(`"`)
}

// hasStrSpecial reports whether any of the eight bytes in v may be a quote,
// a backslash or a control character (the strSpecial bytes). It has no
// false negatives; a false positive only sends the caller to its
// byte-at-a-time loop.
func hasStrSpecial(v uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := v^(ones*'"'), v^(ones*'\\')
	// A byte lane of x is zero where (x - 1) borrows into a clear high bit;
	// v - 0x20 in a lane whose high bit was clear borrows where v < 0x20.
	return ((quote-ones)&^quote|(backslash-ones)&^backslash|(v-ones*0x20)&^v)&highs != 0
}

// strSpecial marks the bytes that end the plain run of a string: the quote,
// the backslash and the control characters.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// skip reads any value.
func (s *scanner) skip() error {
	if s.ws() >= len(s.b) {
		return s.fail("a value")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		var v []byte
		return s.str(&v)
	case c == '-' || c >= '0' && c <= '9':
		for s.i++; s.i < len(s.b); s.i++ {
			if c := s.b[s.i]; !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
				break
			}
		}
		return nil
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return nil
		}
	}
	return s.fail("a value")
}

// appendJSONString appends s as a JSON string.
func appendJSONString[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(string(s)) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
