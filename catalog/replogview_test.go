package catalog

import (
	"context"
	"strings"
	"testing"
)

// TestChangedRowsPlans: a segment's read of each carried table costs what
// changed, not the table: the log is read by its range of change numbers
// and each row by its key, never by a scan.
func TestChangedRowsPlans(t *testing.T) {
	ctx := context.Background()
	c, _, err := Create(ctx, t.TempDir(), masterKey(t, 1).CheckValue())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnableChangeLog(ctx); err != nil {
		t.Fatal(err)
	}
	var tables []RepTable
	if err := c.Read(ctx, func(v *View) (err error) { tables, err = v.Tables(); return err }); err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("%d carried tables", len(tables))
	}
	for _, tb := range tables {
		plan := explain(t, c.DB(), changedRowsQuery(tb), []any{tb.Name, 10, 20})
		all := strings.Join(plan, "\n")
		if !strings.Contains(all, "SEARCH replica_log USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") {
			t.Errorf("%s: the log is not read by its range of change numbers:\n%s", tb.Name, all)
		}
		if !strings.Contains(all, "SEARCH t USING") || strings.Contains(all, "SCAN t") {
			t.Errorf("%s: its rows are not read by key:\n%s", tb.Name, all)
		}
	}
}
