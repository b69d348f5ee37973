package controllers

import (
	"fmt"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline/sqlquery"
)

// compileSQL compiles spec.sql, when the query has one, into
// status.compiledPipeline, so that the user sees what their SQL became and
// everything after runs it as it runs spec.pipeline. A query that does not
// compile, or reads another queue than sourceQueue, is an error the user
// must fix.
func compileSQL(q *v1.StreamQuery) error {
	q.Status.CompiledPipeline = nil
	if q.Spec.SQL == "" {
		return nil
	}
	c, err := sqlquery.Compile(q.Spec.SQL)
	if err != nil {
		return fmt.Errorf("spec.sql: %w", err)
	}
	if c.Source != q.Spec.SourceQueue {
		return fmt.Errorf("spec.sql: FROM %q is not spec.sourceQueue %q: a query reads its source queue", c.Source, q.Spec.SourceQueue)
	}
	q.Status.CompiledPipeline = &c.Pipeline
	return nil
}

// specPipeline is the pipeline the spec asks for: spec.pipeline, or what
// spec.sql compiled to.
func specPipeline(q *v1.StreamQuery) *v1.Pipeline {
	if q.Spec.SQL != "" {
		return q.Status.CompiledPipeline
	}
	return q.Spec.Pipeline
}
