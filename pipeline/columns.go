package pipeline

import (
	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// Column is a member of every output the pipeline emits: a table sink's
// column. Kind is its value's CEL type: int, uint, double, string, bool,
// google.protobuf.Timestamp (a timestamp, written in RFC 3339), or dyn when
// the type is known only once evaluated.
type Column struct {
	Name string
	Kind string
}

// The kinds of Column a table sink maps to column types.
const (
	KindInt       = "int"
	KindUint      = "uint"
	KindDouble    = "double"
	KindString    = "string"
	KindBool      = "bool"
	KindTimestamp = "google.protobuf.Timestamp"
	KindDyn       = "dyn"
)

// Columns is what every output of the pipeline holds, in order, and
// whether that is known: a window's plain output, or a project that is a
// map literal with constant keys. A stateless pipeline's event as it came,
// or a project computed otherwise, has no columns known before it runs.
func (p *Program) Columns() ([]Column, bool) { return p.columns, p.columns != nil }

// windowColumns are the columns of a window's plain output (plainWindow).
func windowColumns(aggs []v1.Aggregate) []Column {
	cols := []Column{{"key", KindString}, {"windowStart", KindTimestamp}, {"windowEnd", KindTimestamp}}
	for _, a := range aggs {
		cols = append(cols, Column{a.Name, aggregateKind(a.Fn)})
	}
	return cols
}

func aggregateKind(fn v1.AggregateFn) string {
	switch fn {
	case v1.FnCount:
		return KindInt
	case v1.FnFirst, v1.FnLast:
		return KindDyn
	}
	return KindDouble
}

// projectColumns are the entries of a project that is a map literal with
// constant string keys, each with its checked type; nil for any other.
func projectColumns(env *cel.Env, src string) []Column {
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil
	}
	native := ast.NativeRep()
	e := native.Expr()
	if e.Kind() != celast.MapKind {
		return nil
	}
	var cols []Column
	for _, entry := range e.AsMap().Entries() {
		me := entry.AsMapEntry()
		k := me.Key()
		if k.Kind() != celast.LiteralKind {
			return nil
		}
		name, ok := k.AsLiteral().(types.String)
		if !ok {
			return nil
		}
		kind := KindDyn
		if t := native.GetType(me.Value().ID()); t != nil {
			switch s := t.String(); s {
			case KindInt, KindUint, KindDouble, KindString, KindBool, KindTimestamp:
				kind = s
			}
		}
		cols = append(cols, Column{string(name), kind})
	}
	return cols
}
