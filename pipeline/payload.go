package pipeline

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/valyala/fastjson"
)

// jsonObject is a JSON object as a CEL map whose fields are converted when
// an expression reads them: `payload.customer` costs one parse of the
// message (fastjson, reusing its memory from event to event) and the
// conversion of that one field, not a Go map of the whole payload.
// Integers are int and other numbers double, as Kubernetes reads JSON.
//
// It points into the parser's memory, so it lives only while its event is
// folded: a value kept past that (first, last) is made native first, by
// stable.
type jsonObject struct {
	o    *fastjson.Object
	full traits.Mapper // the whole map, built only for what needs it
}

var _ traits.Mapper = (*jsonObject)(nil)

// jsonValue converts one JSON value to CEL.
func jsonValue(v *fastjson.Value) ref.Val {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		return &jsonObject{o: o}
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return types.String(b)
	case fastjson.TypeNumber:
		var buf [32]byte
		raw := v.MarshalTo(buf[:0])
		if !bytes.ContainsAny(raw, ".eE") {
			if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				return types.Int(i)
			}
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return types.NewErr("JSON number %s: %v", raw, err)
		}
		return types.Double(f)
	case fastjson.TypeTrue:
		return types.True
	case fastjson.TypeFalse:
		return types.False
	case fastjson.TypeArray:
		a, _ := v.Array()
		elems := make([]ref.Val, len(a))
		for i, e := range a {
			elems[i] = jsonValue(e)
		}
		return types.DefaultTypeAdapter.NativeToValue(elems)
	}
	return types.NullValue
}

// stable is v, made independent of the parser's memory.
func stable(v ref.Val) ref.Val {
	switch v.(type) {
	case *jsonObject, traits.Lister:
		n, err := native(v)
		if err != nil {
			return types.NewErr("%v", err)
		}
		return types.DefaultTypeAdapter.NativeToValue(n)
	}
	return v
}

func (j *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	v := j.o.Get(string(k))
	if v == nil {
		return nil, false
	}
	return jsonValue(v), true
}

func (j *jsonObject) Get(key ref.Val) ref.Val {
	if v, ok := j.Find(key); ok {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (j *jsonObject) Contains(key ref.Val) ref.Val {
	_, ok := j.Find(key)
	return types.Bool(ok)
}

// materialised is the whole object as a CEL map of native values, for the
// operations that need all of it.
func (j *jsonObject) materialised() traits.Mapper {
	if j.full == nil {
		m := map[string]any{}
		j.o.Visit(func(k []byte, v *fastjson.Value) {
			n, err := native(jsonValue(v))
			if err != nil {
				n = nil
			}
			m[string(k)] = n
		})
		j.full = types.DefaultTypeAdapter.NativeToValue(m).(traits.Mapper)
	}
	return j.full
}

func (j *jsonObject) Size() ref.Val             { return types.Int(j.o.Len()) }
func (j *jsonObject) Iterator() traits.Iterator { return j.materialised().Iterator() }
func (j *jsonObject) Equal(o ref.Val) ref.Val   { return j.materialised().Equal(o) }
func (j *jsonObject) Type() ref.Type            { return types.MapType }
func (j *jsonObject) Value() any                { return j.materialised().Value() }
func (j *jsonObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.MapType {
		return j
	}
	if t == types.TypeType {
		return types.MapType
	}
	return types.NewErr("type conversion error from map to %s", t)
}

func (j *jsonObject) ConvertToNative(t reflect.Type) (any, error) {
	v, err := j.materialised().ConvertToNative(t)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	return v, nil
}
