package objstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A caller that arrives while a folder sync runs waits for the next one
// (the running one may have started before its rename), and every caller
// that arrived meanwhile shares that next one.
func TestDirSyncJoinsTheNextSync(t *testing.T) {
	started := make(chan int, 10)
	release := make(chan struct{}, 10)
	var mu sync.Mutex
	n := 0
	s := &dirSyncs{syncDir: func(string) error {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		started <- k
		<-release
		return nil
	}}
	first := make(chan error, 1)
	go func() { first <- s.sync("d") }()
	if k := <-started; k != 1 {
		t.Fatalf("sync %d started first", k)
	}
	late := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { late <- s.sync("d") }()
	}
	time.Sleep(20 * time.Millisecond) // the three wait on the running sync
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if k := <-started; k != 2 {
		t.Fatalf("sync %d started second", k)
	}
	select {
	case <-late:
		t.Fatal("a caller returned with the sync that started before it")
	default:
	}
	release <- struct{}{}
	for i := 0; i < 3; i++ {
		if err := <-late; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case k := <-started:
		t.Fatalf("sync %d ran for no caller", k)
	case <-time.After(20 * time.Millisecond):
	}
}

// Concurrent uploads into one folder all commit and read back.
func TestDirConcurrentCommits(t *testing.T) {
	d, err := NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- Put(ctx, d, fmt.Sprintf("objects/t/%02d", i), bytes.NewReader([]byte{byte(i)}), i%2 == 0)
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 32; i++ {
		rc, err := d.Get(ctx, fmt.Sprintf("objects/t/%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	// The last round forgets its folder just after it wakes its callers.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		d.syncs.mu.Lock()
		left := len(d.syncs.folders)
		d.syncs.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d folders left in the sync table", left)
		}
	}
}
