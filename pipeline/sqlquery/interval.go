package sqlquery

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	pg "github.com/pganalyze/pg_query_go/v6"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// intervalUnits are the units of a constant interval, each a fixed length
// of time: months and years are not.
var intervalUnits = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// fieldUnits are PostgreSQL's interval field masks (INTERVAL '1' MINUTE).
var fieldUnits = map[int32]time.Duration{1 << 3: 24 * time.Hour, 1 << 10: time.Hour, 1 << 11: time.Minute, 1 << 12: time.Second}

// interval is a window's duration argument: a constant INTERVAL '1 minute',
// INTERVAL '1' MINUTE or '1 minute'::interval.
func (c *compiler) interval(arg string, n *pg.Node) (*metav1.Duration, error) {
	tc := n.GetTypeCast()
	var k *pg.A_Const
	if tc != nil && typeName(tc.TypeName) == "interval" {
		k = tc.Arg.GetAConst()
	}
	if k == nil || k.GetSval() == nil {
		return nil, c.errorf("%s must be a constant interval, such as INTERVAL '1 minute'", arg)
	}
	text := k.GetSval().Sval
	if mods := tc.TypeName.Typmods; len(mods) > 0 {
		mask := mods[0].GetAConst().GetIval().GetIval()
		unit, ok := fieldUnits[mask]
		num, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if !ok || err != nil || len(mods) > 1 {
			return nil, c.errorf("%s: INTERVAL %q with this field is not supported: write INTERVAL '<n> <unit>', with units ms, s, min, h, d or w", arg, text)
		}
		return &metav1.Duration{Duration: time.Duration(num * float64(unit))}, nil
	}
	d, ok := parseInterval(text)
	if !ok {
		return nil, c.errorf("%s: INTERVAL %q is not a fixed length of time: write INTERVAL '<n> <unit>' (units ms, s, min, h, d, w; not months or years)", arg, text)
	}
	return &metav1.Duration{Duration: d}, nil
}

// parseInterval reads "1 minute 30 seconds", "1.5s" or "90 s".
func parseInterval(s string) (time.Duration, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return !(unicode.IsDigit(r) || r == '.') })
		if i <= 0 {
			return 0, false
		}
		num, err := strconv.ParseFloat(s[:i], 64)
		if err != nil {
			return 0, false
		}
		s = strings.TrimLeft(s[i:], " ")
		j := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) })
		if j < 0 {
			j = len(s)
		}
		unit, ok := intervalUnits[s[:j]]
		if !ok || num*float64(unit) > float64(365*24*time.Hour) {
			return 0, false
		}
		total += time.Duration(num * float64(unit))
		s = strings.TrimLeft(s[j:], " ")
	}
	return total, true
}
