package sqlquery

import (
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

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
