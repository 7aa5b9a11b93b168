package catalog

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAuditAppend commits audit records 100 to a transaction, as a
// busy group commit does: their rows alone ("row", the insert Audit made
// before the trees, with the index it had), then rows and leaves ("leaf",
// Audit). The difference
// of cpu-µs/op is what an append costs a record (at most 10 µs, issue 28):
//
//	go test -run '^$' -bench AuditAppend -benchtime 20000x ./catalog/
func BenchmarkAuditAppend(b *testing.B) {
	for _, leaf := range []bool{false, true} {
		name := "row"
		if leaf {
			name = "leaf"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			c, tn := withTenant(b, b.TempDir())
			if !leaf {
				withoutTrees(b, c)
			}
			r := Record{Actor: "key:0123456789abcdef", Label: "ingest", Action: "store", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 201}
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i += 100 {
				err := c.Update(ctx, func(tx *Tx) error {
					for j := i; j < min(i+100, b.N); j++ {
						if leaf {
							if err := tx.Audit(tn.ID, r); err != nil {
								return err
							}
							continue
						}
						if _, err := tx.exec(`INSERT INTO audit(tenant, at, actor, label, action, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
							tn.ID[:], nanos(tx.now), r.Actor, r.Label, r.Action, nullString(r.Target), r.Status); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkAuditNotes commits the audit records of reads as the server
// does, as notes, in batches of 1 and of 4 (16 clients' reads make
// batches of one or two): their rows alone ("row"), then rows and leaves
// ("leaf"). Where BenchmarkAuditAppend measures an append, this measures
// what a batch adds too (the insert of its nodes, their pages). The
// batches are handed to the writer's commit directly, so that each is of
// the size named:
//
//	go test -run '^$' -bench AuditNotes -benchtime 20000x ./catalog/
func BenchmarkAuditNotes(b *testing.B) {
	for _, batch := range []int{1, 4} {
		for _, leaf := range []bool{false, true} {
			name := fmt.Sprintf("row/%d", batch)
			if leaf {
				name = fmt.Sprintf("leaf/%d", batch)
			}
			b.Run(name, func(b *testing.B) { benchNotes(b, batch, leaf) })
		}
	}
}

func benchNotes(b *testing.B, batch int, leaf bool) {
	ctx := context.Background()
	c, tn := withTenant(b, b.TempDir())
	if !leaf {
		withoutTrees(b, c)
	}
	r := Record{Actor: "key:0123456789abcdef", Label: "ingest", Action: "read", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 200}
	call := func(tx *Tx) error {
		if leaf {
			return tx.Audit(tn.ID, r)
		}
		_, err := tx.exec(`INSERT INTO audit(tenant, at, actor, label, action, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			tn.ID[:], nanos(tx.now), r.Actor, r.Label, r.Action, nullString(r.Target), r.Status)
		return err
	}
	// The writer goroutine idles: nothing is queued to it.
	w := &writer{c: c, timer: time.NewTimer(time.Hour)}
	cpu0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		reqs := make([]*writeReq, min(batch, b.N-i))
		for j := range reqs {
			reqs[j] = &writeReq{ctx: ctx, fn: call, err: make(chan error, 1), kind: note}
		}
		w.commitBatch(reqs)
		for _, q := range reqs {
			if err := <-q.err; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// withoutTrees gives c back the index a tenant's records had before the
// trees, which their rows alone need for a read by time (migration 19).
func withoutTrees(b *testing.B, c *Catalog) {
	if _, err := c.db.Exec(`CREATE INDEX audit_by_tenant ON audit (tenant, at)`); err != nil {
		b.Fatal(err)
	}
}
