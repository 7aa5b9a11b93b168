package cli

import (
	"context"
	"runtime/pprof"
	"sync"
	"testing"
)

// TestLoopGroup: every loop runs in a goroutine of its own with its name
// as the profiler label loop, and Stop returns only once each loop saw
// its context end and returned.
func TestLoopGroup(t *testing.T) {
	g := newLoopGroup()
	names := []string{"look", "pack runs", "purge sweep"}
	var mu sync.Mutex
	labels := map[string]string{}
	returned := map[string]bool{}
	var running sync.WaitGroup
	for _, name := range names {
		running.Add(1)
		g.Go(name, func(ctx context.Context) {
			label, _ := pprof.Label(ctx, "loop")
			mu.Lock()
			labels[name] = label
			mu.Unlock()
			running.Done()
			<-ctx.Done()
			mu.Lock()
			returned[name] = true
			mu.Unlock()
		})
	}
	running.Wait()
	g.Stop()
	for _, name := range names {
		if labels[name] != name {
			t.Errorf("loop %q ran with the label loop=%q", name, labels[name])
		}
		if !returned[name] {
			t.Errorf("Stop returned before the loop %q did", name)
		}
	}
}
