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
	"strings"
	"syscall"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/logline"
	"github.com/vcon-server/vcon-server/replica"
	"github.com/vcon-server/vcon-server/seal"
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

func runInit(e *env, _ *flag.FlagSet, _ []string) error {
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create the data directory: %w", err)
	}
	// On a new host with a [replica], the catalog comes back by restore:
	// a new one would be another catalog, and its server would refuse the
	// target (docs/disaster-recovery.md).
	if _, err := os.Stat(filepath.Join(cfg.DataDir, catalog.FileName)); errors.Is(err, fs.ErrNotExist) && cfg.Replica != nil {
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
	madeKey := false
	if err := seal.CreateMasterKeyFile(cfg.MasterKey); err == nil {
		madeKey = true
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	mk, err := seal.LoadMasterKey(cfg.MasterKey)
	if err != nil {
		return err
	}
	cat, made, err := catalog.Create(e.ctx, cfg.DataDir, mk.CheckValue())
	if err != nil {
		return err
	}
	defer cat.Close()
	if check, _, err := cat.KeyCheck(e.ctx); err != nil {
		return err
	} else if string(check) != string(mk.CheckValue()) {
		return fmt.Errorf("the master key %s does not open the catalog already in %s; use the key file init made for it", cfg.MasterKey, cfg.DataDir)
	}
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
