package sqlquery

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// scope is what an expression can see: one event (WHERE, GROUP BY, the
// arguments of aggregates) or one closed window (SELECT and HAVING of a
// query with GROUP BY).
type scope int

const (
	perEvent scope = iota
	perWindow
)

// kind is what the translation knows of an expression's CEL type; CEL's
// checker has the last word.
type kind int

const (
	tDyn kind = iota
	tString
	tInt
	tDouble
	tBool
	tTime
)

// val is a translated expression.
type val struct {
	cel string
	t   kind
	// prec is the precedence of the CEL's outermost operator (0 for none),
	// which decides where an operand needs parentheses.
	prec int
	lit  bool // an integer literal, which becomes a double beside one
	// json is set for payload->>'field': the JSON value before it is made
	// text, so that a cast converts the value itself.
	json string
	// in and field are set for an access by name, for IS [NOT] NULL.
	in, field string
}

// CEL's precedences, loosest first.
const (
	pAtom = iota
	pCond
	pOr
	pAnd
	pRel
	pAdd
	pMul
	pUnary
)

// operand is v as an operand of an operator of precedence p, on its left
// (or alone); right is v on its right, where an equal precedence needs
// parentheses too: a - (b - c).
func (v val) operand(p int) string {
	if v.prec != pAtom && v.prec < p {
		return "(" + v.cel + ")"
	}
	return v.cel
}

func (v val) right(p int) string {
	if v.prec != pAtom && v.prec <= p {
		return "(" + v.cel + ")"
	}
	return v.cel
}

// atom is v as a receiver or after a prefix operator.
func (v val) atom() string { return v.operand(pUnary + 1) }

// maxDepth bounds the nesting of an expression, and so the work of
// matching each subexpression against the GROUP BY keys.
const maxDepth = 100

// The functions of the subset: aggregates, window functions (GROUP BY
// only) and scalar functions, each mapped to CEL.
var (
	aggregateFns = map[string]v1.AggregateFn{"count": v1.FnCount, "sum": v1.FnSum, "min": v1.FnMin, "max": v1.FnMax,
		"avg": v1.FnAvg, "first": v1.FnFirst, "last": v1.FnLast}
	windowFns = map[string]bool{"tumble": true, "hop": true, "session": true}
	scalarFns = map[string]struct {
		arity int
		cel   string // a format of the operands
		t     kind
	}{
		"length":           {1, "size(%s)", tInt},
		"char_length":      {1, "size(%s)", tInt},
		"character_length": {1, "size(%s)", tInt},
		"starts_with":      {2, "%s.startsWith(%s)", tBool},
		"ends_with":        {2, "%s.endsWith(%s)", tBool},
		"regexp_like":      {2, "%s.matches(%s)", tBool},
		"to_timestamp":     {1, "timestamp(int(%s))", tTime},
	}
	// casts maps a SQL type to CEL's conversion.
	casts = map[string]struct {
		fn string
		t  kind
	}{
		"numeric": {"double", tDouble}, "float8": {"double", tDouble}, "float4": {"double", tDouble},
		"int2": {"int", tInt}, "int4": {"int", tInt}, "int8": {"int", tInt},
		"text": {"string", tString}, "varchar": {"string", tString},
		"bool":        {"bool", tBool},
		"timestamptz": {"timestamp", tTime}, "timestamp": {"timestamp", tTime},
	}
	binaryOps = map[string]string{"=": "==", "<>": "!=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
		"+": "+", "-": "-", "*": "*", "/": "/", "%": "%", "||": "+"}
	celIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// celReserved are CEL's reserved words, which cannot be a field after a
	// dot nor a variable.
	celReserved = map[string]bool{"as": true, "break": true, "const": true, "continue": true, "else": true,
		"false": true, "for": true, "function": true, "if": true, "import": true, "in": true, "let": true,
		"loop": true, "package": true, "namespace": true, "null": true, "return": true, "true": true,
		"var": true, "void": true}
)

func (c *compiler) expr(n *pg.Node, sc scope) (val, error) {
	return c.exprAt(n, sc, 0)
}

func (c *compiler) exprAt(n *pg.Node, sc scope, depth int) (val, error) {
	if depth > maxDepth {
		return val{}, c.errorf("the expression is nested more than %d deep", maxDepth)
	}
	if sc == perWindow && len(c.keys) > 0 {
		if k, ok := c.keyRef(n, depth); ok {
			return k, nil
		}
	}
	sub := func(n *pg.Node) (val, error) { return c.exprAt(n, sc, depth+1) }
	switch {
	case n.GetColumnRef() != nil:
		return c.column(n.GetColumnRef(), sc)
	case n.GetAConst() != nil:
		return constant(n.GetAConst()), nil
	case n.GetTypeCast() != nil:
		return c.cast(n.GetTypeCast(), sub)
	case n.GetAExpr() != nil:
		return c.operator(n.GetAExpr(), sub)
	case n.GetBoolExpr() != nil:
		b := n.GetBoolExpr()
		p, join := pAnd, " && "
		switch b.Boolop {
		case pg.BoolExprType_OR_EXPR:
			p, join = pOr, " || "
		case pg.BoolExprType_NOT_EXPR:
			p = pUnary
		}
		var args []string
		for _, a := range b.Args {
			v, err := sub(a)
			if err != nil {
				return val{}, err
			}
			args = append(args, v.operand(p))
		}
		if p == pUnary && len(args) == 1 {
			return val{cel: "!" + args[0], t: tBool, prec: pUnary}, nil
		}
		return val{cel: strings.Join(args, join), t: tBool, prec: p}, nil
	case n.GetNullTest() != nil:
		nt := n.GetNullTest()
		v, err := sub(nt.Arg)
		if err != nil {
			return val{}, err
		}
		isNull := nt.Nulltesttype == pg.NullTestType_IS_NULL
		switch {
		case v.field != "" && isNull:
			return val{cel: fmt.Sprintf("!(%s in %s) || %s == null", v.field, v.in, v.json), t: tBool, prec: pOr}, nil
		case v.field != "":
			return val{cel: fmt.Sprintf("%s in %s && %s != null", v.field, v.in, v.json), t: tBool, prec: pAnd}, nil
		case isNull:
			return val{cel: v.operand(pRel) + " == null", t: tBool, prec: pRel}, nil
		}
		return val{cel: v.operand(pRel) + " != null", t: tBool, prec: pRel}, nil
	case n.GetCaseExpr() != nil:
		return c.caseExpr(n.GetCaseExpr(), sub)
	case n.GetFuncCall() != nil:
		return c.call(n.GetFuncCall(), sc, sub)
	}
	return val{}, c.errorf("%s is not supported", nodeName(n))
}

// nodeName names an expression outside the subset in SQL's words.
func nodeName(n *pg.Node) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", n.GetNode()), "*pg_query.Node_")
	if sql, ok := map[string]string{
		"SubLink": "a subquery", "CoalesceExpr": "COALESCE", "MinMaxExpr": "GREATEST/LEAST", "SqlvalueFunction": "CURRENT_TIMESTAMP and its kin",
		"ParamRef": "a parameter ($n)", "AArrayExpr": "ARRAY[…]", "RowExpr": "ROW(…)", "BooleanTest": "IS TRUE/IS FALSE",
		"AIndirection": "a subscript", "CollateClause": "COLLATE", "NullIfExpr": "NULLIF",
	}[name]; ok {
		return sql
	}
	return name
}

// keyRef recognises a GROUP BY key in SELECT or HAVING. A single string key
// is the window's key; any other is carried by a first() aggregate, the
// same for every event of the group.
func (c *compiler) keyRef(n *pg.Node, depth int) (val, bool) {
	e, err := c.exprAt(n, perEvent, depth)
	if err != nil {
		return val{}, false
	}
	i := slices.Index(c.keys, e.cel)
	if i < 0 {
		return val{}, false
	}
	if len(c.keys) == 1 && c.p.KeyBy == e.cel {
		return val{cel: "key", t: tString}, true
	}
	name, err := c.addAggregate(v1.FnFirst, e.cel, "")
	if err != nil {
		return val{}, false
	}
	return val{cel: name, t: e.t}, true
}

func (c *compiler) column(cr *pg.ColumnRef, sc scope) (val, error) {
	var parts []string
	for _, f := range cr.Fields {
		if f.GetAStar() != nil {
			return val{}, c.errorf("* is only supported as SELECT *, alone, without GROUP BY")
		}
		parts = append(parts, f.GetString_().GetSval())
	}
	if len(parts) == 2 && (parts[0] == c.alias || (c.alias == "" && parts[0] == c.from)) {
		parts = parts[1:]
	}
	if len(parts) != 1 {
		return val{}, c.errorf("column %q: qualify columns with the queue's name or alias only", strings.Join(parts, "."))
	}
	name := parts[0]
	if sc == perWindow {
		switch name {
		case "window_start":
			return val{cel: "windowStart", t: tTime}, nil
		case "window_end":
			return val{cel: "windowEnd", t: tTime}, nil
		case "partition":
			return val{cel: "partition", t: tString}, nil
		case "payload", "transaction_id", "created_at":
			return val{}, c.errorf("%s is neither a GROUP BY key nor inside an aggregate", name)
		}
		return val{}, c.errorf("unknown column %q: a window has window_start, window_end, partition, its GROUP BY keys and aggregates", name)
	}
	switch name {
	case "payload":
		return val{cel: "payload"}, nil
	case "partition":
		return val{cel: "partition", t: tString}, nil
	case "transaction_id":
		return val{cel: "transactionId", t: tString}, nil
	case "created_at":
		return val{cel: "createdAt", t: tTime}, nil
	case "window_start", "window_end":
		return val{}, c.errorf("%s is a window's: it is for SELECT and HAVING of a query with GROUP BY", name)
	}
	return val{}, c.errorf("unknown column %q: an event has payload, partition, transaction_id and created_at", name)
}

func constant(k *pg.A_Const) val {
	switch {
	case k.Isnull:
		return val{cel: "null"}
	case k.GetIval() != nil:
		return val{cel: strconv.FormatInt(int64(k.GetIval().Ival), 10), t: tInt, lit: true}
	case k.GetFval() != nil:
		f := k.GetFval().Fval
		if strings.ContainsAny(f, ".eE") {
			return val{cel: f, t: tDouble}
		}
		return val{cel: f, t: tInt, lit: true} // an integer beyond 32 bits
	case k.GetBoolval() != nil:
		return val{cel: strconv.FormatBool(k.GetBoolval().Boolval), t: tBool}
	case k.GetBsval() != nil:
		return val{cel: strconv.Quote(k.GetBsval().Bsval), t: tString}
	}
	return val{cel: strconv.Quote(k.GetSval().GetSval()), t: tString}
}

// typeName is a cast's type, without pg_catalog.
func typeName(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 {
		return ""
	}
	name := tn.Names[len(tn.Names)-1].GetString_().GetSval()
	if len(tn.ArrayBounds) > 0 {
		name += "[]"
	}
	return name
}

func (c *compiler) cast(tc *pg.TypeCast, sub func(*pg.Node) (val, error)) (val, error) {
	name := typeName(tc.TypeName)
	to, ok := casts[name]
	if !ok {
		if name == "interval" {
			return val{}, c.errorf("an INTERVAL is only a window's size, slide, gap, lateness or idle_flush")
		}
		return val{}, c.errorf("a cast to %s is not supported: cast to numeric, float8, int, bigint, text, boolean or timestamptz", name)
	}
	v, err := sub(tc.Arg)
	if err != nil {
		return val{}, err
	}
	in := v.cel
	if v.json != "" {
		in = v.json // the JSON value itself, not its text
	}
	return val{cel: to.fn + "(" + in + ")", t: to.t}, nil
}

func (c *compiler) caseExpr(ce *pg.CaseExpr, sub func(*pg.Node) (val, error)) (val, error) {
	out := val{cel: "null"}
	if ce.Defresult != nil {
		var err error
		if out, err = sub(ce.Defresult); err != nil {
			return val{}, err
		}
	}
	var subject val
	if ce.Arg != nil {
		var err error
		if subject, err = sub(ce.Arg); err != nil {
			return val{}, err
		}
	}
	for i := len(ce.Args) - 1; i >= 0; i-- {
		w := ce.Args[i].GetCaseWhen()
		cond, err := sub(w.GetExpr())
		if err != nil {
			return val{}, err
		}
		if ce.Arg != nil {
			cond = val{cel: subject.operand(pRel) + " == " + cond.right(pRel), prec: pRel}
		}
		res, err := sub(w.GetResult())
		if err != nil {
			return val{}, err
		}
		out = val{cel: cond.right(pCond) + " ? " + res.right(pCond) + " : " + out.operand(pCond), t: res.t, prec: pCond}
	}
	return out, nil
}

// outputName is a SELECT column's name: its alias, or as PostgreSQL would
// name it, or the field it reads.
func (c *compiler) outputName(rt *pg.ResTarget) (string, error) {
	if rt.Name != "" {
		return rt.Name, nil
	}
	for n := rt.Val; n != nil; {
		switch {
		case n.GetColumnRef() != nil:
			f := n.GetColumnRef().Fields
			return f[len(f)-1].GetString_().GetSval(), nil
		case n.GetFuncCall() != nil:
			return funcName(n.GetFuncCall()), nil
		case n.GetTypeCast() != nil:
			n = n.GetTypeCast().Arg
			continue
		case n.GetAExpr() != nil && n.GetAExpr().Rexpr.GetAConst().GetSval() != nil:
			if op := n.GetAExpr().Name; len(op) == 1 && strings.HasPrefix(op[0].GetString_().GetSval(), "->") {
				return n.GetAExpr().Rexpr.GetAConst().GetSval().Sval, nil
			}
		}
		break
	}
	return "", c.errorf("name each computed column with AS")
}
