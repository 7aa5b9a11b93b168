package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/internal/masterkey"
	"github.com/vcon-server/vcon-server/objstore"
	"github.com/vcon-server/vcon-server/replica"
)

func init() {
	register(&command{
		name:    "init",
		summary: "create the data directory, the catalog, the master key file and a self-signed certificate where absent",
		run:     runInit,
	})
	register(&command{
		name:    "serve",
		summary: "run the HTTPS server and the purge sweep until SIGTERM or SIGINT",
		run:     runServe,
	})
	register(&command{
		name:    "version",
		summary: "print the version",
		run: func(e *env, _ *flag.FlagSet, _ []string) error {
			return e.emit(map[string]string{"version": Version, "go": runtime.Version(), "os": runtime.GOOS, "arch": runtime.GOARCH})
		},
	})
}

func runInit(e *env, _ *flag.FlagSet, _ []string) (err error) {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	// A refused init leaves the places it was pointed at as it found them:
	// the folders it made until the refusal are removed again (when still
	// empty), and so is a master key file it made that opens nothing.
	fresh := absentDirs(cfg.DataDir, objstore.SpoolDir(cfg.DataDir), filepath.Dir(cfg.MasterKey))
	done := false
	defer func() {
		if err != nil && !done {
			fresh.remove()
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create the data directory: %w", err)
	}
	// On a new host with a [replica], the catalog comes back by restore:
	// a new one would be another catalog, and its server would refuse the
	// target (docs/disaster-recovery.md).
	if _, err := os.Stat(filepath.Join(cfg.DataDir, catalog.FileName)); errors.Is(err, fs.ErrNotExist) && cfg.Replica != nil {
		if cfg.Replica.To != "s3" {
			fresh = append(fresh, absentDirs(cfg.Replica.To)...)
		}
		store, err := openReplicaStore(e.ctx, cfg, false)
		if err != nil {
			return err
		}
		if has, err := replica.Holds(e.ctx, store); err != nil {
			return err
		} else if has {
			return fmt.Errorf("%s holds a replica of a catalog, and the data directory %s has none: run vcon-server restore --config %s to bring that catalog back, or point [replica] at an empty place to start a new one", store, cfg.DataDir, cfg.Path)
		}
	}
	w, err := keyService(cfg)
	if err != nil {
		return err
	}
	// A wrapped key is bound to its catalog's id, so the id is chosen
	// first; a key file left by an earlier init keeps the id it names.
	madeKey := false
	if err := masterkey.Create(e.ctx, cfg.MasterKey, w, ids.NewRandom()); err == nil {
		madeKey = true
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	defer func() {
		if err != nil && !done && madeKey {
			os.Remove(cfg.MasterKey)
		}
	}()
	mk, wrapped, err := masterkey.Load(e.ctx, cfg.MasterKey, w)
	if err != nil {
		return err
	}
	cat, made, err := catalog.CreateAs(e.ctx, cfg.DataDir, mk.CheckValue(), wrapped.Catalog)
	if err != nil {
		return err
	}
	defer cat.Close()
	if err := boundTo(cfg, wrapped, cat); err != nil {
		return err
	}
	// From here a new catalog and its master key belong together: a
	// failure keeps them, and init run again goes on from them.
	done = made
	if check, _, err := cat.KeyCheck(e.ctx); err != nil {
		return err
	} else if string(check) != string(mk.CheckValue()) {
		return fmt.Errorf("the master key %s does not open the catalog already in %s; use the key file init made for it", cfg.MasterKey, cfg.DataDir)
	}
	done = true
	if _, err := archive.EnsureSigningKey(e.ctx, cat, mk); err != nil {
		return err
	}
	madeCert, err := selfSignedIfAbsent(cfg)
	if err != nil {
		return err
	}
	if madeCert {
		fmt.Fprintf(e.stderr, "vcon-server: made a self-signed certificate %s for %s; replace it with your own for production\n", cfg.TLS.Cert, strings.Join(certHosts(cfg), ", "))
	}
	return e.emit(map[string]any{
		"data_dir": cfg.DataDir, "catalog": filepath.Join(cfg.DataDir, catalog.FileName), "catalog_id": cat.ID.String(),
		"created": made, "master_key": cfg.MasterKey, "master_key_created": madeKey,
		"tls_cert": cfg.TLS.Cert, "tls_cert_created": madeCert,
	})
}

// dirs are folders a command made, deepest first.
type dirs []string

// absentDirs is the folders of paths, and of their parents, that do not
// exist yet, deepest first.
func absentDirs(paths ...string) dirs {
	var out dirs
	for _, p := range paths {
		for p = filepath.Clean(p); ; p = filepath.Dir(p) {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) || slices.Contains(out, p) {
				break
			}
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// remove removes those of d that are empty: a folder a command made and
// then put something in (or that someone else filled meanwhile) stays.
func (d dirs) remove() {
	for _, p := range d {
		os.Remove(p)
	}
}

func runServe(e *env, _ *flag.FlagSet, _ []string) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	log := logline.New(e.stderr, cfg.Log.Level, "serve")
	ctx, stop := signal.NotifyContext(e.ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	d, err := Start(ctx, cfg, log, Options{})
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("stopping: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Close(sctx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	log.Info("stopped")
	return nil
}
