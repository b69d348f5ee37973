package sqlquery

import (
	"fmt"
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
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
