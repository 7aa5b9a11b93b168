package cli

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/auditlog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/internal/ids"
	"github.com/vcon-server/vcon-server/objstore"
)

// checkpointInterval is how soon a record is under a signed checkpoint
// while records arrive (docs/audit-log.md): a pass a second, each signing
// only the logs that grew.
const checkpointInterval = time.Second

// savedFlags collects --checkpoint FILE, given any number of times.
type savedFlags []string

func (s *savedFlags) String() string     { return strings.Join(*s, ",") }
func (s *savedFlags) Set(v string) error { *s = append(*s, v); return nil }

func init() {
	var tenant string
	var admin bool
	var saved savedFlags
	register(&command{
		name:    "audit verify",
		summary: "recompute a tenant's audit log (or the admin log) from its rows and check its newest signed checkpoint and each --checkpoint FILE; exit 1 names the first record that differs",
		flags: func(fs *flag.FlagSet) {
			tenant, admin, saved = "", false, nil
			fs.StringVar(&tenant, "tenant", "", "the tenant (id or name)")
			fs.BoolVar(&admin, "admin", false, "the admin log instead of a tenant's")
			fs.Var(&saved, "checkpoint", "a checkpoint saved earlier (GET /audit/log/checkpoint) the log must be consistent with; any number of times")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return auditVerify(e, tenant, admin, saved) },
	})
}

func auditVerify(e *env, tenant string, admin bool, files []string) error {
	if (tenant == "") == !admin {
		return errors.New("audit verify needs --tenant T or --admin")
	}
	var saved []auditlog.Saved
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read the checkpoint: %w", err)
		}
		saved = append(saved, auditlog.Saved{Name: f, Note: b})
	}
	cfg, cat, err := e.openCatalog()
	if err != nil {
		return err
	}
	defer cat.Close()
	name, err := logName(cfg)
	if err != nil {
		return err
	}
	log := catalog.AdminLogID
	if !admin {
		t, err := findTenant(e, cat, tenant)
		if err != nil {
			return err
		}
		log = catalog.LogID(t.ID)
	}
	rep, err := auditlog.Verify(e.ctx, cat, name, log, saved)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: %d records, each its leaf; the newest checkpoint (%d records) and %d saved checkpoints consistent\n",
		rep.Origin, rep.Records, rep.Signed, rep.Saved)
	return nil
}

// checkWitnessed checks the catalog a restore built at path against each
// checkpoint file a witness or tenant kept (restore --checkpoint): the log
// it names must hold, unchanged, every record it covers, or the replica is
// an older copy or a rewritten one (docs/disaster-recovery.md).
func checkWitnessed(ctx context.Context, path string, files []string) error {
	if len(files) == 0 {
		return nil
	}
	cat, err := catalog.OpenFile(ctx, path)
	if err != nil {
		return err
	}
	defer cat.Close()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read the checkpoint: %w", err)
		}
		origin, _, _ := strings.Cut(string(b), "\n")
		slash := strings.LastIndexByte(origin, '/')
		if slash < 1 {
			return fmt.Errorf("the checkpoint %s does not start with a log's origin (<log name>/<tenant id> or <log name>/admin)", f)
		}
		name, log := origin[:slash], catalog.AdminLogID
		if id := origin[slash+1:]; id != "admin" {
			t, err := ids.Parse(id)
			if err != nil {
				return fmt.Errorf("the checkpoint %s names the log %q, which is no tenant's", f, origin)
			}
			log = catalog.LogID(t)
		}
		if _, err := auditlog.Verify(ctx, cat, name, log, []auditlog.Saved{{Name: f, Note: b}}); err != nil {
			return fmt.Errorf("the replica's audit log %s does not extend the checkpoint %s: %w; the replica is an older copy or was rewritten: restore from one that holds that history", origin, f, err)
		}
	}
	return nil
}

// logName is the logs' name: [audit_log] name, else the first DNS name
// of the TLS certificate (its first IP address when it names none).
func logName(cfg *config.Config) (string, error) {
	if cfg.AuditLog.Name != "" {
		return cfg.AuditLog.Name, nil
	}
	b, err := os.ReadFile(cfg.TLS.Cert)
	if err != nil {
		return "", fmt.Errorf("audit log: read the TLS certificate for the log name: %w; or set [audit_log] name", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return "", fmt.Errorf("audit log: %s holds no PEM certificate to take the log name from; set [audit_log] name", cfg.TLS.Cert)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("audit log: parse %s for the log name: %w; or set [audit_log] name", cfg.TLS.Cert, err)
	}
	switch {
	case len(cert.DNSNames) > 0:
		return cert.DNSNames[0], nil
	case len(cert.IPAddresses) > 0:
		// A certificate for an address only: the logs are named by it
		// rather than refuse to start a server upgraded in place.
		return cert.IPAddresses[0].String(), nil
	}
	return "", fmt.Errorf("audit log: the TLS certificate %s names no DNS name nor IP address to name the logs by; set [audit_log] name", cfg.TLS.Cert)
}

// openLogs opens the audit logs' signer, making its key at the first
// start (auditlog.Open).
func (d *Daemon) openLogs(ctx context.Context, cfg *config.Config) error {
	name, err := logName(cfg)
	if err != nil {
		return err
	}
	if d.Logs, err = auditlog.Open(ctx, d.Cat, d.key, name); err != nil {
		return err
	}
	if d.Replica != nil {
		d.Logs.Replicated = d.Replica.Replicated
	}
	// The witnesses' bucket copy (docs/audit-log.md, "Witnesses"): the
	// storage's bucket, the replica's bucket, or both.
	var targets []objstore.Store
	if cfg.Storage.Objects == "s3" {
		targets = append(targets, d.Archive.Objects)
	}
	if d.Replica != nil && cfg.Replica.To == "s3" {
		targets = append(targets, d.Replica.Target())
	}
	if len(targets) > 0 {
		d.copies = auditlog.NewCopier(d.Logs, targets...)
		d.Logs.Published = func(context.Context, []byte, uint64, []byte) { d.copies.Poke() }
	}
	return nil
}

// copyLogs runs the logs' bucket copy (auditlog.Copier.Run), at most once
// every interval ([audit_log] copy_interval).
func (d *Daemon) copyLogs(ctx context.Context, interval time.Duration) {
	d.copies.Run(ctx, interval, func(err error) {
		d.Log.Warn("audit log copy to the bucket failed; it is tried again after [audit_log] copy_interval", "error", err.Error())
	})
}

// signLogs runs the audit logs' signing loop (auditlog.Logs.Run).
func (d *Daemon) signLogs(ctx context.Context) {
	d.Logs.Run(ctx, checkpointInterval, func(err error) {
		d.Log.Error("audit log checkpoint failed", "error", err.Error())
	})
}

// logCheck is check's look at the audit logs: each recomputed from its
// rows and its newest checkpoint checked, as audit verify does
// (auditlog.Verify); what differs is a problem of its log's line.
type logCheck struct {
	e       *env
	cat     *catalog.Catalog
	name    string
	nameErr error // no log name: no origin to check a checkpoint against
}

func newLogCheck(e *env, cfg *config.Config, cat *catalog.Catalog) *logCheck {
	name, err := logName(cfg)
	return &logCheck{e: e, cat: cat, name: name, nameErr: err}
}

// verify checks log, and returns what it found and its problems.
func (l *logCheck) verify(log []byte) (auditlog.Report, []string) {
	if l.nameErr != nil {
		return auditlog.Report{}, []string{"audit log not checked: " + l.nameErr.Error()}
	}
	rep, err := auditlog.Verify(l.e.ctx, l.cat, l.name, log, nil)
	if err != nil {
		return rep, []string{"audit log: " + err.Error() + "; vcon-server audit verify names the same (docs/audit-log.md)"}
	}
	return rep, nil
}

// admin checks the admin log and prints its line, before the replica's;
// it returns its count of problems.
func (l *logCheck) admin() (int, error) {
	rep, problems := l.verify(catalog.AdminLogID)
	if problems == nil {
		problems = []string{}
	}
	line := map[string]any{"records": rep.Records, "signed": rep.Signed, "problems": problems}
	restored, err := l.cat.LogsRestored(l.e.ctx)
	if err != nil {
		return 0, err
	}
	if restored != nil {
		// Not a problem, a fact to keep: what a lost host appended after
		// the replica's last change is in no log (docs/audit-log.md).
		logs := map[string]uint64{}
		for k, n := range restored.Sizes {
			b, _ := hex.DecodeString(k)
			logs[auditlog.LogName(b)] = n
		}
		line["restored"] = map[string]any{"at": time.Unix(0, restored.At).UTC().Format(time.RFC3339), "logs": logs,
			"note": "each log as the replica held it at the restore: a record made on the lost host after the replica's last change is in no log, and an index at or past a log's size here, handed out before the restore, named such a record"}
	}
	return len(problems), l.e.emit(map[string]any{"admin_log": line})
}
