package pipeline

import (
	"fmt"
	"math"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"github.com/valyala/fastjson"
)

// eventVars is the activation of the per-event expressions. The payload is
// parsed once, when an expression first reads it, and its fields are
// converted as they are read (see jsonObject): no expression costs a JSON
// round trip.
type eventVars struct {
	parser    *fastjson.Parser
	data      []byte
	payload   ref.Val
	partition types.String
	txid      types.String
	createdAt types.Timestamp
	key       ref.Val
}

func (a *eventVars) ResolveName(name string) (any, bool) {
	switch name {
	case "payload":
		if a.payload == nil {
			v, err := a.parser.ParseBytes(a.data)
			if err != nil {
				a.payload = types.NewErr("payload is not JSON: %v", err)
			} else {
				a.payload = jsonValue(v)
			}
		}
		return a.payload, true
	case "partition":
		return a.partition, true
	case "transactionId":
		return a.txid, true
	case "createdAt":
		return a.createdAt, true
	case "key":
		return a.key, a.key != nil
	}
	return nil, false
}

func (a *eventVars) Parent() interpreter.Activation { return nil }

// windowVars is the activation of having and project.
type windowVars struct {
	p          *Program
	key        types.String
	start, end types.Timestamp
	partition  types.String
	aggs       []ref.Val
}

func (a *windowVars) ResolveName(name string) (any, bool) {
	switch name {
	case "key":
		return a.key, true
	case "windowStart":
		return a.start, true
	case "windowEnd":
		return a.end, true
	case "partition":
		return a.partition, true
	}
	for i := range a.p.aggs {
		if a.p.aggs[i].name == name {
			return a.aggs[i], true
		}
	}
	return nil, false
}

func (a *windowVars) Parent() interpreter.Activation { return nil }

func eval(prg cel.Program, vars interpreter.Activation, field string) (ref.Val, error) {
	out, _, err := prg.Eval(vars)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return out, nil
}

func evalBool(prg cel.Program, vars interpreter.Activation, field string) (bool, error) {
	out, err := eval(prg, vars, field)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%s: got %s, want bool", field, out.Type())
	}
	return bool(b), nil
}

// millis is an event time: a timestamp, or a number of epoch milliseconds.
func millis(v ref.Val) (int64, error) {
	switch t := v.(type) {
	case types.Timestamp:
		return t.UnixMilli(), nil
	case types.Int:
		return int64(t), nil
	case types.Uint:
		return int64(t), nil
	case types.Double:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return 0, fmt.Errorf("eventTime: %v is not a time", t)
		}
		return int64(math.Floor(float64(t))), nil
	}
	return 0, fmt.Errorf("eventTime: got %s, want a timestamp or epoch milliseconds", v.Type())
}

func number(v ref.Val) (float64, error) {
	switch t := v.(type) {
	case types.Int:
		return float64(t), nil
	case types.Uint:
		return float64(t), nil
	case types.Double:
		return float64(t), nil
	}
	return 0, fmt.Errorf("got %s, want a number", v.Type())
}

// native turns a CEL value into what encoding/json writes: timestamps in
// RFC 3339 with milliseconds, durations as Go spells them.
func native(v ref.Val) (any, error) {
	switch t := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool, types.Int, types.Uint, types.String, types.Bytes:
		return t.Value(), nil
	case types.Double:
		f := float64(t)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", f)
		}
		return f, nil
	case types.Timestamp:
		return rfc3339(t.UnixMilli()), nil
	case types.Duration:
		return t.Duration.String(), nil
	case traits.Mapper:
		out := map[string]any{}
		for it := t.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			e, err := native(t.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		n := int(t.Size().(types.Int))
		out := make([]any, n)
		for i := range n {
			e, err := native(t.Get(types.Int(i)))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s has no JSON form", v.Type())
}

func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
