package export

import (
	"context"
	"sync"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/parquetstore"
)

// The pipeline of an export (steps 1 to 3 of the order in export.go):
//
//   - a lister goroutine pages through the catalog, each page a short read
//     of its own, with a prefetch goroutine reading the next page while
//     this one is handed out;
//   - it cuts each page into jobs, batches of consecutive versions, and
//     hands every job twice: to the writer's queue, in version order, and
//     to the pool of workers (work), which fetch, check and inspect it
//     (process, rows.go) and close the job's done channel;
//   - the writer (stream's own goroutine) takes jobs from the queue in
//     order and waits on each one's done channel, so rows reach the part
//     files in version order whatever order the workers finish in;
//   - a byte budget (Options.InFlight) bounds the sealed bytes held between
//     fetch and write: the lister waits for room before it hands out a
//     job, the writer gives the room back once the job's rows are written.
//
// The first error (a listing's, carried to the writer by a job of its
// own; a worker's, in its job; or the writer's) ends the pipeline: stream
// cancels the rest and waits for every goroutine before it returns.
// Written jobs go back to a pool for the next ones.

// job is a batch of consecutive versions on their way from the catalog to
// a file.
type job struct {
	items []item
	done  chan struct{}
	held  int64 // sealed bytes counted against the budget
	err   error
}

// jobs keeps written jobs for the next ones: an item holds a version and
// its row, and making them afresh for every version was a tenth of what an
// export allocated.
var jobs sync.Pool

func newJob() *job {
	j, ok := jobs.Get().(*job)
	if !ok {
		j = new(job)
	}
	j.done = make(chan struct{})
	return j
}

// putJob keeps j once the writer is done with it and no worker holds it.
func putJob(j *job) {
	clear(j.items)
	*j = job{items: j.items[:0]}
	jobs.Put(j)
}

// item is one version of a job and what became of it.
type item struct {
	v        catalog.Version
	row      parquetstore.ExportRow
	skip     bool // purged while the export ran
	unread   bool // its clear columns could not be read
	withheld bool // the export's purpose may not see it: never fetched
}

// stream runs the pipeline: a lister pages through the catalog, workers
// fetch and inspect, and this goroutine writes the rows in version order.
func (x *run) stream(outer context.Context, upto ids.ID) error {
	// Files outlive the pipeline: they are opened with the outer context.
	ctx, cancel := context.WithCancel(outer)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	budget := newBudget(ctx, x.opt.InFlight)
	// Every worker busy and a couple of batches ready (one per worker
	// with fewer than two) keeps the writer fed; a deeper queue would only
	// hold more sealed bytes.
	queue := make(chan *job, x.opt.Workers+min(x.opt.Workers, 2))
	work := make(chan *job)

	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(queue)
		defer close(work)
		x.list(ctx, upto, budget, queue, work)
	}()
	for range x.opt.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				x.process(ctx, j)
				close(j.done)
			}
		}()
	}

	for j := range queue {
		select {
		case <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if j.err != nil {
			return j.err
		}
		for i := range j.items {
			if err := x.write(outer, &j.items[i]); err != nil {
				return err
			}
			// The writer copied the row: its sealed buffer serves the
			// next fetch.
			putSealed(j.items[i].row.Sealed)
			j.items[i].row = parquetstore.ExportRow{}
		}
		budget.release(j.held)
		putJob(j)
	}
	// The lister stops early only when ctx ended.
	return ctx.Err()
}

// list pages through the versions to export and hands each to the writer
// (queue, in order) and to a worker (work). A listing failure reaches the
// writer as a job that carries it. The next page is read while this one
// is handed out: read in turn, the workers waited out every page's read.
func (x *run) list(ctx context.Context, upto ids.ID, budget *budget, queue, work chan<- *job) {
	ctx, cancel := context.WithCancel(ctx)
	pages := make(chan listed, 1)
	go x.pages(ctx, upto, pages)
	defer func() {
		cancel()
		for range pages {
		}
	}()
	for p := range pages {
		if p.err != nil {
			j := &job{err: p.err, done: make(chan struct{})}
			close(j.done)
			select {
			case queue <- j:
			case <-ctx.Done():
			}
			return
		}
		page, withheld := p.versions, p.withheld
		for len(page) > 0 {
			j := newJob()
			for len(page) > 0 && len(j.items) < x.opt.Batch && (len(j.items) == 0 || j.held < batchBytes) {
				it := item{v: page[0], withheld: withheld != nil && withheld[0]}
				if !it.withheld {
					j.held += page[0].SealedSize
				}
				j.items = append(j.items, it)
				page = page[1:]
				if withheld != nil {
					withheld = withheld[1:]
				}
			}
			if err := budget.acquire(j.held); err != nil {
				return
			}
			select {
			case queue <- j:
			case <-ctx.Done():
				return
			}
			select {
			case work <- j:
			case <-ctx.Done():
				return
			}
		}
	}
}

// listed is one page of versions, or the error that ended the listing.
// With a purpose, withheld says which of them it may not see.
type listed struct {
	versions []catalog.Version
	withheld []bool
	err      error
}

// pages reads the pages of versions to export into out, and closes it
// after the last one, an error, or the end of ctx.
func (x *run) pages(ctx context.Context, upto ids.ID, out chan<- listed) {
	defer close(out)
	var after ids.ID
	for {
		page, err := x.opt.Archive.Cat.ExportPage(ctx, x.opt.Tenant.ID, after, upto, x.opt.Since, x.opt.Until, x.opt.PageSize)
		if err == nil && len(page) == 0 {
			return
		}
		var withheld []bool
		if err == nil && x.opt.Purpose != "" {
			withheld, err = x.withheldOf(ctx, page)
		}
		select {
		case out <- listed{page, withheld, err}:
		case <-ctx.Done():
			return
		}
		if err != nil || len(page) < x.opt.PageSize {
			return
		}
		after = page[len(page)-1].ID
	}
}

// budget bounds the sealed bytes held in memory between fetch and write.
type budget struct {
	ctx   context.Context
	mu    sync.Mutex
	cond  *sync.Cond
	free  int64
	total int64
}

func newBudget(ctx context.Context, total int64) *budget {
	b := &budget{ctx: ctx, free: total, total: total}
	b.cond = sync.NewCond(&b.mu)
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.cond.Broadcast()
	})
	return b
}

// acquire waits until n bytes are free; a request larger than the whole
// budget waits until all of it is free.
func (b *budget) acquire(n int64) error {
	n = min(n, b.total)
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.free < n {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		b.cond.Wait()
	}
	if err := b.ctx.Err(); err != nil {
		return err
	}
	b.free -= n
	return nil
}

func (b *budget) release(n int64) {
	n = min(n, b.total)
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	b.cond.Broadcast()
}
