package v1alpha1

// TableSinkMode says how a table sink writes a row.
// +kubebuilder:validation:Enum=upsert;append
type TableSinkMode string

const (
	// TableSinkUpsert: one row per key columns, replaced when a window is
	// emitted again.
	TableSinkUpsert TableSinkMode = "upsert"
	// TableSinkAppend: every output is a new row.
	TableSinkAppend TableSinkMode = "append"
)

// TableSink is a table the pipeline's output is written to.
// +kubebuilder:validation:XValidation:rule="self.mode == 'append' || (has(self.keyColumns) && size(self.keyColumns) > 0)",message="mode upsert needs keyColumns: a row replaces the one of the same key columns"
type TableSink struct {
	// table is the table's name in the tenant's schema, as it is (a quoted
	// identifier: case, spaces and any character are kept, never read as
	// SQL). PostgreSQL cuts names at 63 bytes, so a longer one is refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Table string `json:"table"`

	// schema, when set, must be the tenant's schema, regent_<tenant>: a
	// query writes only there. Absent means that one.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Schema string `json:"schema,omitempty"`

	// keyColumns are the output members that identify a row (for a window:
	// its key, its start, and its partition when several source partitions
	// emit the same key). In mode upsert the table needs a unique index on
	// exactly them; createTable makes them its primary key.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	KeyColumns []string `json:"keyColumns,omitempty"`

	// mode is upsert (one row per key columns, replaced when a window is
	// emitted again) or append (every output a new row).
	// +optional
	// +kubebuilder:default=upsert
	Mode TableSinkMode `json:"mode,omitempty"`

	// createTable lets the operator create the table (and the tenant's
	// schema) when it is absent: a column per output member, typed after
	// it, and a primary key on keyColumns. An existing table is never
	// changed.
	// +optional
	CreateTable bool `json:"createTable,omitempty"`
}
