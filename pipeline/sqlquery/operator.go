package sqlquery

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"
)

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
