package catalog

import (
	"context"
	"sync"
	"testing"
)

// BenchmarkAuditAppend commits audit records 100 to a transaction, as a
// busy group commit does: their rows alone ("row", the insert Audit made
// before the trees), then rows and leaves ("leaf", Audit). The difference
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
// does, as notes from 16 goroutines (batches of a few records each):
// their rows alone ("row"), then rows and leaves ("leaf"). Where
// BenchmarkAuditAppend measures an append, this measures what a batch
// adds (reading the log's head, writing its nodes):
//
//	go test -run '^$' -bench AuditNotes -benchtime 20000x ./catalog/
func BenchmarkAuditNotes(b *testing.B) {
	for _, leaf := range []bool{false, true} {
		name := "row"
		if leaf {
			name = "leaf"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			c, tn := withTenant(b, b.TempDir())
			r := Record{Actor: "key:0123456789abcdef", Label: "ingest", Action: "read", Target: "019ad2c4-7a1e-7cc3-9a55-3d2f1e0b7c11", Status: 200}
			note := func() error {
				if leaf {
					return c.NoteAudit(ctx, tn.ID, r)
				}
				return c.Note(ctx, func(tx *Tx) error {
					_, err := tx.exec(`INSERT INTO audit(tenant, at, actor, label, action, target, status) VALUES (?, ?, ?, ?, ?, ?, ?)`,
						tn.ID[:], nanos(tx.now), r.Actor, r.Label, r.Action, nullString(r.Target), r.Status)
					return err
				})
			}
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range work {
						if err := note(); err != nil {
							b.Error(err)
						}
					}
				})
			}
			cpu0, commits0 := processCPU(), c.Commits()
			b.ResetTimer()
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(b.N)/float64(c.Commits()-commits0), "records/batch")
		})
	}
}
