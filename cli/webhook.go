package cli

import (
	"flag"
	"fmt"
	"os"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/config"
	"github.com/vcon-server/vcon-server/server"
	"github.com/vcon-server/vcon-server/webhook"
)

// The webhook commands (docs/webhooks.md).
func init() {
	var secretFile, caFile string
	register(&command{
		name: "tenant set-webhook", args: "TENANT URL|off",
		summary: "send the tenant's events to URL, signed with the secret of --secret-file (Standard Webhooks); off drops its pending events",
		flags: func(fs *flag.FlagSet) {
			secretFile, caFile = "", ""
			fs.StringVar(&secretFile, "secret-file", "", "a file (mode 0600 or 0400) holding the secret, whsec_ and base64")
			fs.StringVar(&caFile, "ca-file", "", "PEM certificates the endpoint's must chain to, instead of the system's")
		},
		run: func(e *env, _ *flag.FlagSet, args []string) error {
			return tenantSetWebhook(e, args[0], args[1], secretFile, caFile)
		},
	})
	var failedTenant, retryTenant string
	register(&command{
		name: "webhook failed", summary: "list a tenant's events that failed after the last attempt, one JSON line each",
		flags: func(fs *flag.FlagSet) {
			failedTenant = ""
			fs.StringVar(&failedTenant, "tenant", "", "the tenant (id or name)")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return webhookFailed(e, failedTenant) },
	})
	register(&command{
		name: "webhook retry", summary: "send a tenant's failed events again, from the first attempt",
		flags: func(fs *flag.FlagSet) {
			retryTenant = ""
			fs.StringVar(&retryTenant, "tenant", "", "the tenant (id or name)")
		},
		run: func(e *env, _ *flag.FlagSet, _ []string) error { return webhookRetry(e, retryTenant) },
	})
}

func tenantSetWebhook(e *env, tenant, url, secretFile, caFile string) error {
	if url == "off" {
		if secretFile != "" || caFile != "" {
			return fmt.Errorf("tenant set-webhook %s off takes no --secret-file nor --ca-file", tenant)
		}
		return e.withTenant(tenant, func(cat *catalog.Catalog, t catalog.Tenant) error {
			n, err := cat.DropWebhook(e.ctx, t.ID, catalog.CLI)
			if err != nil {
				return err
			}
			return e.emit(server.WebhookView{Tenant: t.ID.String(), Webhook: "off", Dropped: &n})
		})
	}
	if secretFile == "" {
		return fmt.Errorf("tenant set-webhook needs --secret-file F, a file holding whsec_ and base64; make one with: (umask 077; echo whsec_$(head -c 32 /dev/urandom | base64) > F)")
	}
	secret, err := readSecret(secretFile)
	if err != nil {
		return fmt.Errorf("--secret-file %s %w", secretFile, err)
	}
	st := webhook.Setting{URL: url, Secret: string(secret)}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		st.CAPEM = string(pem)
	}
	// The secret is kept sealed under the master key.
	_, mk, cat, err := e.keyed(func(cfg *config.Config) error { return st.Check(webhookRules(cfg)) })
	if err != nil {
		return err
	}
	defer cat.Close()
	t, err := findTenant(e, cat, tenant)
	if err != nil {
		return err
	}
	sealed, err := mk.SealSecret(t.ID, secret)
	if err != nil {
		return err
	}
	if err := cat.SetWebhook(e.ctx, catalog.Webhook{Tenant: t.ID, URL: url, Secret: sealed, CAPEM: st.CAPEM, KeyCheck: mk.CheckValue()}, catalog.CLI); err != nil {
		return err
	}
	return e.emit(server.WebhookView{Tenant: t.ID.String(), Webhook: "on", URL: url, CA: st.CAPEM != ""})
}

// failedView is one failed event as webhook failed prints it.
type failedView struct {
	ID       string `json:"id"` // the webhook-id of every attempt
	Type     string `json:"type"`
	UUID     string `json:"uuid,omitempty"`
	Version  string `json:"version,omitempty"`
	Erasure  string `json:"erasure,omitempty"` // an erasure.completed event's, in place of uuid and version
	Size     uint64 `json:"size,omitempty"`    // an audit.checkpoint event's, likewise
	At       string `json:"at"`
	Attempts int    `json:"attempts"`
	Error    string `json:"error"`
}

func webhookFailed(e *env, tenant string) error {
	if tenant == "" {
		return fmt.Errorf("webhook failed needs --tenant T")
	}
	return e.withTenant(tenant, func(cat *catalog.Catalog, t catalog.Tenant) error {
		evs, err := cat.FailedEvents(e.ctx, t.ID)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			v := failedView{ID: ev.MsgID, Type: ev.Type, At: ev.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Attempts: ev.Attempts, Error: ev.Error}
			switch ev.Type {
			case catalog.EventErased:
				v.Erasure = ev.Erasure.String()
			case catalog.EventCheckpoint:
				v.Size = ev.Size
			default:
				v.UUID, v.Version = ev.UUID.String(), ev.Version.String()
			}
			if err := e.emit(v); err != nil {
				return err
			}
		}
		return nil
	})
}

func webhookRetry(e *env, tenant string) error {
	if tenant == "" {
		return fmt.Errorf("webhook retry needs --tenant T")
	}
	return e.withTenant(tenant, func(cat *catalog.Catalog, t catalog.Tenant) error {
		n, err := cat.RetryFailed(e.ctx, t.ID, catalog.CLI)
		if err != nil {
			return err
		}
		return e.emit(struct {
			Tenant  string `json:"tenant"`
			Retried int    `json:"retried"`
		}{t.ID.String(), n})
	})
}

// webhookRules are the rules of where webhooks may go that cfg's
// [webhooks] table sets.
func webhookRules(cfg *config.Config) webhook.Rules {
	if cfg == nil {
		return webhook.Rules{}
	}
	return webhook.Rules{Allow: cfg.Webhooks.Allow}
}
