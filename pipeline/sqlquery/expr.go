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

// supported lists the functions, for the message refusing another.
func supported() string {
	var scalar []string
	for name := range scalarFns {
		scalar = append(scalar, name)
	}
	slices.Sort(scalar)
	return "the aggregates are count(*), sum, min, max, avg, first and last; the window functions TUMBLE, HOP and SESSION (in GROUP BY); " +
		"the functions " + strings.Join(scalar, ", ")
}

func funcName(fc *pg.FuncCall) string {
	var parts []string
	for _, n := range fc.Funcname {
		parts = append(parts, n.GetString_().GetSval())
	}
	return strings.Join(parts, ".")
}

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

func (c *compiler) operator(e *pg.A_Expr, sub func(*pg.Node) (val, error)) (val, error) {
	var name string
	if len(e.Name) > 0 {
		name = e.Name[len(e.Name)-1].GetString_().GetSval()
	}
	switch e.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
	case pg.A_Expr_Kind_AEXPR_IN:
		l, err := sub(e.Lexpr)
		if err != nil {
			return val{}, err
		}
		var items []string
		for _, it := range e.Rexpr.GetList().GetItems() {
			v, err := sub(it)
			if err != nil {
				return val{}, err
			}
			items = append(items, v.cel)
		}
		in := l.operand(pRel) + " in [" + strings.Join(items, ", ") + "]"
		if name == "<>" {
			return val{cel: "!(" + in + ")", t: tBool, prec: pUnary}, nil
		}
		return val{cel: in, t: tBool, prec: pRel}, nil
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		return c.like(e, name, sub)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		l, err := sub(e.Lexpr)
		if err != nil {
			return val{}, err
		}
		bounds := e.Rexpr.GetList().GetItems()
		if len(bounds) != 2 {
			return val{}, c.errorf("BETWEEN takes two bounds")
		}
		lo, err := sub(bounds[0])
		if err != nil {
			return val{}, err
		}
		hi, err := sub(bounds[1])
		if err != nil {
			return val{}, err
		}
		between := fmt.Sprintf("%s >= %s && %s <= %s", l.operand(pRel), lo.right(pRel), l.operand(pRel), hi.right(pRel))
		if e.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN {
			return val{cel: "!(" + between + ")", t: tBool, prec: pUnary}, nil
		}
		return val{cel: between, t: tBool, prec: pAnd}, nil
	default:
		return val{}, c.errorf("the operator %s is not supported", strings.TrimPrefix(e.Kind.String(), "AEXPR_"))
	}
	if name == "->" || name == "->>" {
		return c.access(e, name, sub)
	}
	if e.Lexpr == nil { // prefix
		r, err := sub(e.Rexpr)
		if err != nil {
			return val{}, err
		}
		switch name {
		case "-":
			return val{cel: "-" + r.atom(), t: r.t, prec: pUnary}, nil
		case "+":
			return r, nil
		}
		return val{}, c.errorf("the prefix operator %s is not supported", name)
	}
	l, err := sub(e.Lexpr)
	if err != nil {
		return val{}, err
	}
	r, err := sub(e.Rexpr)
	if err != nil {
		return val{}, err
	}
	switch name {
	case "~", "~*", "!~", "!~*":
		re := r.cel
		if strings.HasSuffix(name, "*") {
			re = `"(?i)" + ` + r.right(pAdd)
		}
		return matches(l, re, strings.HasPrefix(name, "!")), nil
	}
	op, ok := binaryOps[name]
	if !ok {
		return val{}, c.errorf("the operator %s is not supported: the operators are = <> < <= > >= + - * / %% || ~ ->> ->, AND, OR, NOT, IN, BETWEEN, LIKE, IS NULL", name)
	}
	p, t := pRel, tBool
	switch op {
	case "+", "-":
		p = pAdd
	case "*", "/", "%":
		p = pMul
	}
	if p != pRel {
		// CEL does no arithmetic across int and double: an int beside a
		// double becomes one, as it would in SQL.
		l, r = promote(l, r), promote(r, l)
		t = l.t
		if l.t != r.t {
			t = tDyn
		}
	}
	if name == "||" {
		t = tString
	}
	return val{cel: l.operand(p) + " " + op + " " + r.right(p), t: t, prec: p}, nil
}

// access is payload->'field' (the JSON value) or payload->>'field' (its
// text), or ->n for an array element.
func (c *compiler) access(e *pg.A_Expr, name string, sub func(*pg.Node) (val, error)) (val, error) {
	l, err := sub(e.Lexpr)
	if err != nil {
		return val{}, err
	}
	if l.json != "" {
		return val{}, c.errorf("->> gives text: use -> to reach into a JSON value, then ->> for the last step")
	}
	k := e.Rexpr.GetAConst()
	var v val
	switch {
	case k != nil && k.GetSval() != nil:
		f := k.GetSval().Sval
		v.in, v.field = l.atom(), strconv.Quote(f)
		if celIdent.MatchString(f) && !celReserved[f] {
			v.json = l.atom() + "." + f
		} else {
			v.json = l.atom() + "[" + strconv.Quote(f) + "]"
		}
	case k != nil && k.GetIval() != nil:
		v.json = l.atom() + "[" + strconv.Itoa(int(k.GetIval().Ival)) + "]"
	default:
		return val{}, c.errorf("%s takes a constant field name or array index", name)
	}
	if name == "->" {
		v.cel, v.json = v.json, ""
		v.in, v.field = "", ""
		return v, nil
	}
	v.cel, v.t = "string("+v.json+")", tString
	return v, nil
}

// promote makes v a double when it is an int beside the double other.
func promote(v, other val) val {
	switch {
	case other.t != tDouble || v.t != tInt:
		return v
	case v.lit:
		return val{cel: v.cel + ".0", t: tDouble}
	}
	return val{cel: "double(" + v.cel + ")", t: tDouble}
}

// like turns a LIKE pattern into an anchored regular expression.
func (c *compiler) like(e *pg.A_Expr, name string, sub func(*pg.Node) (val, error)) (val, error) {
	l, err := sub(e.Lexpr)
	if err != nil {
		return val{}, err
	}
	k := e.Rexpr.GetAConst()
	if k == nil || k.GetSval() == nil {
		return val{}, c.errorf("LIKE takes a constant pattern")
	}
	var re strings.Builder
	if e.Kind == pg.A_Expr_Kind_AEXPR_ILIKE {
		re.WriteString("(?i)")
	}
	re.WriteString("^")
	pattern := []rune(k.GetSval().Sval)
	for i := 0; i < len(pattern); i++ {
		switch r := pattern[i]; r {
		case '%':
			re.WriteString("(?s:.*)")
		case '_':
			re.WriteString("(?s:.)")
		case '\\':
			if i+1 < len(pattern) {
				i++
				re.WriteString(regexp.QuoteMeta(string(pattern[i])))
			}
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	return matches(l, strconv.Quote(re.String()), strings.HasPrefix(name, "!")), nil
}

func matches(l val, re string, not bool) val {
	m := l.atom() + ".matches(" + re + ")"
	if not {
		return val{cel: "!" + m, t: tBool, prec: pUnary}
	}
	return val{cel: m, t: tBool}
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

func (c *compiler) call(fc *pg.FuncCall, sc scope, sub func(*pg.Node) (val, error)) (val, error) {
	name := funcName(fc)
	switch {
	case fc.Over != nil:
		return val{}, c.errorf("window functions (OVER) are not supported: group by TUMBLE, HOP or SESSION")
	case windowFns[name]:
		return val{}, c.errorf("%s is a window: it goes in GROUP BY", strings.ToUpper(name))
	case aggregateFns[name] != "":
		if sc != perWindow {
			return val{}, c.errorf("the aggregate %s() is only for SELECT and HAVING of a query with GROUP BY", name)
		}
		n, err := c.aggregate(fc, "")
		// As package pipeline types them: count int, first and last dyn,
		// the others double.
		t := map[v1.AggregateFn]kind{v1.FnCount: tInt, v1.FnFirst: tDyn, v1.FnLast: tDyn}
		k, ok := t[aggregateFns[name]]
		if !ok {
			k = tDouble
		}
		return val{cel: n, t: k}, err
	}
	f, ok := scalarFns[name]
	if !ok {
		return val{}, c.errorf("unknown function %s(): %s", name, supported())
	}
	if fc.AggStar || fc.AggDistinct || fc.AggFilter != nil || len(fc.AggOrder) > 0 || fc.FuncVariadic || len(fc.Args) != f.arity {
		return val{}, c.errorf("%s() takes %d plain argument(s)", name, f.arity)
	}
	args := make([]any, len(fc.Args))
	for i, a := range fc.Args {
		v, err := sub(a)
		if err != nil {
			return val{}, err
		}
		args[i] = v.cel
		if i == 0 && strings.HasPrefix(f.cel, "%s.") {
			args[i] = v.atom()
		}
	}
	return val{cel: fmt.Sprintf(f.cel, args...), t: f.t}, nil
}

// aggregate translates an aggregate call into one of the pipeline's
// aggregates, and returns its name.
func (c *compiler) aggregate(fc *pg.FuncCall, alias string) (string, error) {
	name := funcName(fc)
	fn := aggregateFns[name]
	switch {
	case fc.Over != nil:
		return "", c.errorf("window functions (OVER) are not supported: group by TUMBLE, HOP or SESSION")
	case fc.AggDistinct:
		return "", c.errorf("%s(DISTINCT …) is not supported", name)
	case fc.AggFilter != nil:
		return "", c.errorf("%s(…) FILTER (WHERE …) is not supported: filter events with WHERE", name)
	case len(fc.AggOrder) > 0 || fc.AggWithinGroup:
		return "", c.errorf("ORDER BY inside %s() is not supported: first and last go by event time", name)
	case fn == v1.FnCount && (!fc.AggStar || len(fc.Args) > 0):
		return "", c.errorf("count(expression) is not supported: count(*) counts a window's events (filter them with WHERE)")
	case fn != v1.FnCount && (fc.AggStar || len(fc.Args) != 1 || fc.FuncVariadic):
		return "", c.errorf("%s() takes one argument", name)
	}
	var of string
	if fn != v1.FnCount {
		v, err := c.exprAt(fc.Args[0], perEvent, 1)
		if err != nil {
			return "", err
		}
		of = v.cel
	}
	return c.addAggregate(fn, of, alias)
}

// addAggregate returns the name of the aggregate fn of of, adding it when
// it is new: named alias when that is a free identifier, else after fn.
func (c *compiler) addAggregate(fn v1.AggregateFn, of, alias string) (string, error) {
	id := string(fn) + "\x00" + of
	if i, ok := c.aggIndex[id]; ok {
		return c.p.Aggregate[i].Name, nil
	}
	if len(c.p.Aggregate) == 64 {
		return "", c.errorf("more than 64 aggregates")
	}
	name := alias
	if !c.freeName(name) {
		name = string(fn)
		for i := 2; !c.freeName(name); i++ {
			name = fmt.Sprintf("%s_%d", fn, i)
		}
	}
	c.names[name] = true
	c.aggIndex[id] = len(c.p.Aggregate)
	c.p.Aggregate = append(c.p.Aggregate, v1.Aggregate{Name: name, Fn: fn, Of: of})
	c.aggOf = append(c.aggOf, fmt.Sprintf("%s %s(…)", c.clause, fn))
	return name, nil
}

func (c *compiler) freeName(name string) bool {
	return celIdent.MatchString(name) && len(name) <= 63 && !celReserved[name] && !c.names[name] &&
		!slices.Contains([]string{"key", "windowStart", "windowEnd", "partition", "payload", "transactionId", "createdAt"}, name)
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

// window translates TUMBLE(time, size), HOP(time, slide, size) or
// SESSION(time, gap), with the named arguments lateness, idle_flush and
// late.
func (c *compiler) window(fc *pg.FuncCall) error {
	name := funcName(fc)
	sig := map[string]string{"tumble": "TUMBLE(time, size)", "hop": "HOP(time, slide, size)", "session": "SESSION(time, gap)"}[name]
	c.clause = "GROUP BY " + strings.ToUpper(name)
	var pos []*pg.Node
	named := map[string]*pg.Node{}
	for _, a := range fc.Args {
		if na := a.GetNamedArgExpr(); na != nil {
			if _, ok := named[na.Name]; ok {
				return c.errorf("%s is given twice", na.Name)
			}
			named[na.Name] = na.Arg
			continue
		}
		pos = append(pos, a)
	}
	if fc.AggStar || fc.AggDistinct || fc.Over != nil || fc.AggFilter != nil || len(fc.AggOrder) > 0 || len(pos) != map[string]int{"tumble": 2, "hop": 3, "session": 2}[name] {
		return c.errorf("%s takes %s, then optionally lateness => INTERVAL, idle_flush => INTERVAL and late => 'queue'", sig, strings.TrimPrefix(sig, strings.ToUpper(name)))
	}
	w := &v1.Window{}
	if cr := pos[0].GetColumnRef(); cr == nil || len(cr.Fields) != 1 || cr.Fields[0].GetString_().GetSval() != "created_at" {
		t, err := c.expr(pos[0], perEvent)
		if err != nil {
			return err
		}
		c.p.EventTime = t.cel
	}
	var err error
	switch name {
	case "tumble":
		w.Type = v1.WindowTumbling
		w.Size, err = c.interval("size", pos[1])
	case "hop":
		w.Type = v1.WindowSliding
		if w.Slide, err = c.interval("slide", pos[1]); err == nil {
			w.Size, err = c.interval("size", pos[2])
		}
	case "session":
		w.Type = v1.WindowSession
		w.Gap, err = c.interval("gap", pos[1])
	}
	if err != nil {
		return err
	}
	for arg, n := range named {
		switch arg {
		case "lateness":
			w.AllowedLateness, err = c.interval(arg, n)
		case "idle_flush":
			w.IdleFlush, err = c.interval(arg, n)
		case "late":
			k := n.GetAConst()
			if k == nil || k.GetSval() == nil {
				return c.errorf("late takes a constant: 'drop' or a queue's name")
			}
			c.p.Late = k.GetSval().Sval
		default:
			return c.errorf("unknown argument %s: the named arguments are lateness, idle_flush and late", arg)
		}
		if err != nil {
			return err
		}
	}
	c.p.Window = w
	c.windowClause, c.clause = c.clause, "GROUP BY"
	return nil
}
