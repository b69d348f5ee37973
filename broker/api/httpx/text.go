package httpx

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// CheckText is the rule of every request string that is stored or looked
// up as PostgreSQL text, which holds neither NUL nor invalid UTF-8: a 400
// naming the field, where the request is decoded, instead of a database
// error later. (Payloads are not text: a NUL inside a JSON payload's
// strings is stored as it came.)
func CheckText(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return BadRequest("%s must not contain NUL characters", field)
	}
	if !utf8.ValidString(v) {
		return BadRequest("%s must be valid UTF-8", field)
	}
	return nil
}

// CheckTexts applies CheckText to field/value pairs, in order, and returns
// the first refusal.
func CheckTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckText(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// CheckElementTexts is CheckTexts for fields of element i of a list, named
// list[i].field; the name is made only for a refusal, since a push carries
// hundreds of elements.
func CheckElementTexts(list string, i int, pairs ...string) error {
	for k := 0; k+1 < len(pairs); k += 2 {
		if v := pairs[k+1]; CheckText(pairs[k], v) != nil {
			return CheckText(fmt.Sprintf("%s[%d].%s", list, i, pairs[k]), v)
		}
	}
	return nil
}
