package catalog

import (
	"context"
	"crypto/rand"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vcon-server/vcon-server/internal/ids"
)

// BenchmarkStoreCommit commits what a store commits (the retry check, the
// version, its record, six search tokens) from 16 goroutines, through
// Update and through UpdateSmall, and reports the process's CPU per store
// beside the time: run both in one go to compare them.
//
//	go test -run '^$' -bench StoreCommit -benchtime 20000x ./catalog/
func BenchmarkStoreCommit(b *testing.B) {
	b.Run("general", func(b *testing.B) { benchStoreCommit(b, general) })
	b.Run("small", func(b *testing.B) { benchStoreCommit(b, small) })
}

func benchStoreCommit(b *testing.B, kind writeKind) {
	ctx := context.Background()
	c, tn := withTenant(b, b.TempDir())
	store := func() error {
		now := time.Now()
		v := Version{ID: ids.NewV7(now), Tenant: tn.ID, UUID: ids.NewRandom(), StoredAt: now, ContentType: "application/vcon+json",
			Form: "unsigned", Size: 4096, SealedSize: 4200, WrappedKey: make([]byte, 60), Location: InS3, BodyMAC: make([]byte, 32)}
		rand.Read(v.BodyMAC)
		tokens := make([][16]byte, 6)
		for i := range tokens {
			rand.Read(tokens[i][:])
		}
		return c.write(ctx, func(tx *Tx) error {
			if _, err := tx.ReplayOf(tn.ID, v.UUID, v.BodyMAC, v.ContentType, ""); err == nil {
				return nil
			}
			if _, err := tx.InsertVersion(v, CreateOnly); err != nil {
				return err
			}
			if err := tx.Audit(tn.ID, Record{Actor: "key:x", Action: "store", Target: v.UUID.String(), Status: 201}); err != nil {
				return err
			}
			return tx.AddTokens(tn.ID, v.ID, tokens)
		}, kind)
	}
	work := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range work {
				if err := store(); err != nil {
					b.Error(err)
				}
			}
		})
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		work <- struct{}{}
	}
	close(work)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}
