package catalog

// migrations are applied in order, each in its own transaction; the count
// applied is meta.schema_version. Never edit a released migration: append.
var migrations = []string{
	// 1: the first schema. Ids are 16-byte blobs, times Unix nanoseconds.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE tenants (
	id             BLOB PRIMARY KEY,
	name           TEXT NOT NULL UNIQUE,
	metadata       TEXT NOT NULL DEFAULT 'none',
	retention_days INTEGER,
	created_at     INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE keys (
	id         TEXT PRIMARY KEY,
	tenant     BLOB REFERENCES tenants(id),
	scopes     TEXT NOT NULL,
	label      TEXT NOT NULL,
	token_hash BLOB NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
) WITHOUT ROWID;

CREATE TABLE vcons (
	tenant  BLOB NOT NULL REFERENCES tenants(id),
	uuid    BLOB NOT NULL,
	current BLOB,
	held    INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (tenant, uuid)
) WITHOUT ROWID;
CREATE INDEX vcons_current ON vcons (tenant, uuid) WHERE current IS NOT NULL;

CREATE TABLE versions (
	id               BLOB PRIMARY KEY,
	tenant           BLOB NOT NULL REFERENCES tenants(id),
	uuid             BLOB NOT NULL,
	stored_at        INTEGER NOT NULL,
	content_type     TEXT NOT NULL,
	content_encoding TEXT NOT NULL,
	form             TEXT NOT NULL,
	size             INTEGER NOT NULL,
	sealed_size      INTEGER NOT NULL,
	wrapped_key      BLOB,
	hidden_at        INTEGER,
	purge            INTEGER NOT NULL DEFAULT 0,
	location         TEXT NOT NULL,
	pack_file        BLOB,
	pack_offset      INTEGER,
	pack_length      INTEGER
) WITHOUT ROWID;
CREATE INDEX versions_by_uuid ON versions (tenant, uuid, stored_at);
CREATE INDEX versions_hidden ON versions (hidden_at) WHERE hidden_at IS NOT NULL AND purge = 0;
CREATE INDEX versions_purging ON versions (purge) WHERE purge <> 0;
CREATE INDEX versions_by_location ON versions (location, tenant, stored_at);
CREATE INDEX versions_by_pack ON versions (pack_file) WHERE pack_file IS NOT NULL;

CREATE TABLE pack_files (
	id         BLOB PRIMARY KEY,
	tenant     BLOB NOT NULL REFERENCES tenants(id),
	date       TEXT NOT NULL,
	object_key TEXT NOT NULL UNIQUE,
	bytes      INTEGER NOT NULL,
	rows       INTEGER NOT NULL,
	state      TEXT NOT NULL,
	retired_at INTEGER,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX pack_files_by_tenant ON pack_files (tenant, state, date);

CREATE TABLE manifests (
	tenant     BLOB NOT NULL REFERENCES tenants(id),
	seq        INTEGER NOT NULL,
	digest     BLOB NOT NULL,
	state      TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, seq)
) WITHOUT ROWID;

CREATE TABLE audit (
	id      INTEGER PRIMARY KEY,
	tenant  BLOB NOT NULL,
	at      INTEGER NOT NULL,
	actor   TEXT NOT NULL,
	label   TEXT NOT NULL,
	action  TEXT NOT NULL,
	target  TEXT,
	status  INTEGER NOT NULL
);
CREATE INDEX audit_by_tenant ON audit (tenant, at);

CREATE TABLE admin_log (
	id      INTEGER PRIMARY KEY,
	at      INTEGER NOT NULL,
	actor   TEXT NOT NULL,
	label   TEXT NOT NULL,
	action  TEXT NOT NULL,
	tenant  TEXT,
	target  TEXT,
	status  INTEGER NOT NULL
);
`,

	// 2: the blind search index (docs/FORMAT.md, "Search index"): tokens
	// are keyed hashes, never clear values.
	`
ALTER TABLE tenants ADD COLUMN search TEXT NOT NULL DEFAULT 'off';
ALTER TABLE tenants ADD COLUMN search_cursor BLOB;
ALTER TABLE tenants ADD COLUMN search_built INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN search_key_check BLOB;

CREATE TABLE search_tokens (
	tenant  BLOB NOT NULL,
	token   BLOB NOT NULL,
	version BLOB NOT NULL,
	PRIMARY KEY (tenant, token, version)
) WITHOUT ROWID;
CREATE INDEX search_tokens_by_version ON search_tokens (version);
CREATE INDEX vcons_by_current ON vcons (current) WHERE current IS NOT NULL;
`,

	// 3: every scan that pages reads one range of an index, in the order
	// it pages (docs/FORMAT.md, "Indexes"): a tenant's versions by id, a
	// location's by tenant and id, the admin log by time, and the search
	// tokens by the vCon they came from, so a search pages in uuid order.
	// The tokens move to a table keyed (tenant, token, uuid, version).
	`
CREATE INDEX versions_by_tenant ON versions (tenant, id);
CREATE INDEX versions_at ON versions (location, tenant, id);
CREATE INDEX admin_log_by_time ON admin_log (at);

CREATE TABLE search_tokens_by_uuid (
	tenant  BLOB NOT NULL,
	token   BLOB NOT NULL,
	uuid    BLOB NOT NULL,
	version BLOB NOT NULL,
	PRIMARY KEY (tenant, token, uuid, version)
) WITHOUT ROWID;
INSERT INTO search_tokens_by_uuid(tenant, token, uuid, version)
	SELECT s.tenant, s.token, v.uuid, s.version FROM search_tokens s JOIN versions v ON v.id = s.version;
DROP TABLE search_tokens;
ALTER TABLE search_tokens_by_uuid RENAME TO search_tokens;
CREATE INDEX search_tokens_by_version ON search_tokens (version);
`,

	// 4: the change log and state of the catalog's replica (docs/FORMAT.md,
	// "Replica"). The log holds only which rows changed, never their
	// values; triggers fill it while a replica is configured.
	`
CREATE TABLE replica_log (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	tbl TEXT NOT NULL,
	k1, k2, k3, k4
);
CREATE TABLE replica_state (
	key   TEXT PRIMARY KEY,
	value
) WITHOUT ROWID;
`,

	// 5: webhooks (docs/FORMAT.md, "Webhook outbox"): a tenant's
	// endpoint with its secret sealed under the master key, the outbox of
	// events (ids and times only), and each version's keyed hash of its
	// body, by which a retried store is recognised. The triggers that
	// fill the outbox are made at every open (catalog/webhooks.go).
	`
ALTER TABLE versions ADD COLUMN body_mac BLOB;

CREATE TABLE webhooks (
	tenant     BLOB PRIMARY KEY REFERENCES tenants(id),
	url        TEXT NOT NULL,
	secret     BLOB NOT NULL,
	ca_pem     TEXT,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE webhook_events (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_id   TEXT NOT NULL,
	tenant   BLOB NOT NULL,
	uuid     BLOB NOT NULL,
	version  BLOB,
	type     TEXT NOT NULL,
	at       INTEGER NOT NULL,
	failed   INTEGER NOT NULL DEFAULT 0,
	attempts INTEGER NOT NULL DEFAULT 0,
	next_at  INTEGER NOT NULL DEFAULT 0,
	error    TEXT
);
CREATE INDEX webhook_events_by_vcon ON webhook_events (tenant, uuid, id);
CREATE INDEX webhook_events_due ON webhook_events (failed, next_at);
`,

	// 6: erasures for a data subject (docs/erasure.md, docs/FORMAT.md
	// "Erasure"): the receipts' signing keys, each Ed25519 seed wrapped
	// under the master key as a data key is, with the catalog id and the
	// key's id in the place of the tenant and version ids; each erasure
	// with its outcome and receipt (no filter value, only its kind); and
	// the uuids it erased or found held.
	`
CREATE TABLE signing_keys (
	kid        TEXT PRIMARY KEY,
	id         BLOB NOT NULL UNIQUE,
	public     BLOB NOT NULL,
	wrapped    BLOB NOT NULL,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE erasures (
	id           BLOB PRIMARY KEY,
	tenant       BLOB NOT NULL REFERENCES tenants(id),
	kind         TEXT NOT NULL,
	actor        TEXT NOT NULL,
	label        TEXT NOT NULL,
	requested_at INTEGER NOT NULL,
	unsearchable INTEGER NOT NULL,
	done_at      INTEGER,
	error        TEXT,
	receipt      TEXT
) WITHOUT ROWID;
CREATE INDEX erasures_running ON erasures (id) WHERE done_at IS NULL;

CREATE TABLE erased (
	erasure  BLOB NOT NULL REFERENCES erasures(id),
	tenant   BLOB NOT NULL,
	uuid     BLOB NOT NULL,
	versions INTEGER NOT NULL,
	whole    INTEGER NOT NULL,
	held     INTEGER NOT NULL,
	PRIMARY KEY (erasure, uuid)
) WITHOUT ROWID;
CREATE INDEX erased_whole ON erased (tenant, uuid) WHERE whole = 1;
`,

	// 7: an erasure sends one erasure.completed, written by the
	// transaction that records it done (docs/FORMAT.md, "Webhook
	// outbox"), no longer one per purged version's row deleted.
	`
DROP TRIGGER IF EXISTS webhook_version_erased;
`,

	// 8: an erasure is small and works in batches (docs/erasure.md,
	// docs/FORMAT.md "Erasure"): a uuid the tenant does not hold is
	// counted (not_found), not listed; the receipt of an erasure that
	// lists more than 100 uuids carries the digest of its lists; the
	// uuids still to take wait in erase_todo, one row per batch, each
	// deleted by the transaction that takes it, so that a start finishes
	// an erasure a crash cut between two batches.
	`
ALTER TABLE erasures ADD COLUMN not_found INTEGER NOT NULL DEFAULT 0;
ALTER TABLE erasures ADD COLUMN digest TEXT;
CREATE TABLE erase_todo (
	erasure BLOB NOT NULL REFERENCES erasures(id),
	batch   INTEGER NOT NULL,
	entries BLOB NOT NULL,
	PRIMARY KEY (erasure, batch)
);
`,

	// 9: webhooks fair across tenants (docs/webhooks.md, "Retries, and
	// failed events"): the sender reads the heads of each tenant's
	// outbox in turn, by webhook_events_by_tenant_due; a webhook whose
	// secret does not open is parked, its events waiting, until it is
	// set again.
	`
ALTER TABLE webhooks ADD COLUMN parked TEXT;
CREATE INDEX webhook_events_by_tenant_due ON webhook_events (tenant, failed, next_at);
`,

	// 10: only the indexes the plans use (docs/FORMAT.md, "Indexes"),
	// since every store writes each of them. vcons' primary key serves
	// the list of vCons (vcons_current repeated it, less its deleted
	// ones) and every lookup by current version, which knows the vCon
	// (vcons_by_current). The versions at a location page by tenant and
	// stored time on versions_by_location, and a tenant's packed ones by
	// id on versions_by_tenant (versions_at). A vCon's versions come in
	// id order, newest first for its /versions, with the stored time
	// after the id so that a count of a tenant's period still reads the
	// index only (SQLite chose to read the whole tenant on
	// versions_by_tenant rather than sort a vCon's few versions).
	`
DROP INDEX vcons_current;
DROP INDEX vcons_by_current;
DROP INDEX versions_at;
DROP INDEX versions_by_uuid;
CREATE INDEX versions_by_uuid ON versions (tenant, uuid, id, stored_at);
`,

	// 11: a key per tenant (docs/FORMAT.md, "Tenant keys"). A catalog made before
	// has none: serve makes each tenant's and moves its data keys under it
	// (archive.MoveToTenantKeys), its cursor in meta key_move.
	`
CREATE TABLE tenant_keys (
	tenant      BLOB PRIMARY KEY,
	wrapped     BLOB NOT NULL,
	key_check   BLOB NOT NULL,
	kms_key     TEXT,
	kms_service TEXT,
	made_at     INTEGER NOT NULL
) WITHOUT ROWID;
`,

	// 12: a tenant removed for good (docs/FORMAT.md, "Tenant delete"):
	// one row per deletion, written by the transaction that destroys the
	// tenant's key, kept after the tenant's rows are gone with its counts
	// and its signed receipt. A tenant with a row here is deleting: no
	// lookup finds it and no key is made for it.
	`
CREATE TABLE tenant_deletions (
	id           BLOB PRIMARY KEY,
	tenant       BLOB NOT NULL UNIQUE,
	actor        TEXT NOT NULL,
	label        TEXT NOT NULL,
	requested_at INTEGER NOT NULL,
	vcons        INTEGER NOT NULL,
	versions     INTEGER NOT NULL,
	digest       TEXT NOT NULL,
	kms_key      TEXT,
	kms_service  TEXT,
	rows_done_at INTEGER,
	done_at      INTEGER,
	receipt      TEXT
) WITHOUT ROWID;
`,

	// 13: each tenant's audit log and the admin log as RFC 6962 Merkle
	// trees (docs/FORMAT.md, "Audit log tree"): per record, the hashes
	// its leaf completes; per log, the newest signed checkpoint. The
	// admin log's key is the blob 'admin'. A signing key has a purpose:
	// the receipts', or the logs'. The records already there become
	// leaves at the first start (catalog/logtree.go).
	`
CREATE TABLE log_nodes (
	log    BLOB NOT NULL,
	idx    INTEGER NOT NULL,
	rec    INTEGER NOT NULL,
	hashes BLOB NOT NULL,
	PRIMARY KEY (log, idx)
) WITHOUT ROWID;
CREATE TABLE log_checkpoints (
	log  BLOB PRIMARY KEY,
	size INTEGER NOT NULL,
	note TEXT NOT NULL,
	at   INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE signing_keys ADD COLUMN purpose TEXT NOT NULL DEFAULT 'receipt';
INSERT INTO meta(key, value) VALUES ('log_backfill', 1);
`,

	// 14: the index of a finished erasure's record in its tenant's audit
	// log, written by the transaction that records it done, so that its
	// answer can carry the record's inclusion proof (docs/erasure.md).
	// NULL for an erasure finished before.
	`
ALTER TABLE erasures ADD COLUMN audit_index INTEGER;
`,

	// 15: lawful bases (docs/lawful-basis.md, docs/FORMAT.md "Lawful
	// basis"): per version what its lawful-basis attachments say, and no
	// more of the vCon: the basis ('unknown', 'malformed', or the bases;
	// NULL without one, and for versions stored before), the earliest
	// expiration (NULL: none), the purposes granted and refused, each a
	// space-separated list of vocabulary words. Per tenant, its mode.
	`
ALTER TABLE versions ADD COLUMN lawful_basis TEXT;
ALTER TABLE versions ADD COLUMN lawful_expires INTEGER;
ALTER TABLE versions ADD COLUMN purposes_granted TEXT;
ALTER TABLE versions ADD COLUMN purposes_refused TEXT;
ALTER TABLE tenants ADD COLUMN lawful_basis TEXT NOT NULL DEFAULT 'off';
`,

	// 16: a tenant key's purposes (docs/lawful-basis.md, "Purposes at the
	// door"): a space-separated list of vocabulary words; NULL for a key
	// bound to none, as every key made before is.
	`
ALTER TABLE keys ADD COLUMN purposes TEXT;
`,

	// 17: erasure at a lawful basis's expiry (docs/lawful-basis.md,
	// "Expiry"): an erasure's reason (NULL for one a request asked for,
	// lawful_basis_expired for one the sweep made), and the index the
	// sweep finds expired versions by, a tenant's at a time.
	`
ALTER TABLE erasures ADD COLUMN reason TEXT;
CREATE INDEX versions_lawful_expires ON versions (tenant, lawful_expires) WHERE lawful_expires IS NOT NULL AND purge = 0;
`,

	// 18: signatures (docs/signatures.md, docs/FORMAT.md "Signatures"):
	// per tenant its policy, whether it takes encrypted vCons under
	// require, and its trust anchors (PEM certificates, by fingerprint;
	// anchors_at changes with them); per version the signers verified
	// (JSON, NULL when none was checked) and why its metadata was left
	// unread (NULL when it was read).
	`
ALTER TABLE tenants ADD COLUMN signatures TEXT NOT NULL DEFAULT 'off';
ALTER TABLE tenants ADD COLUMN signatures_encrypted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenants ADD COLUMN anchors_at INTEGER NOT NULL DEFAULT 0;
CREATE TABLE tenant_anchors (
	tenant      BLOB NOT NULL REFERENCES tenants(id),
	fingerprint TEXT NOT NULL,
	pem         TEXT NOT NULL,
	PRIMARY KEY (tenant, fingerprint)
) WITHOUT ROWID;
ALTER TABLE versions ADD COLUMN signers TEXT;
ALTER TABLE versions ADD COLUMN unread TEXT;
`,

	// 19: log_nodes as a rowid table (docs/FORMAT.md, "Audit log tree"):
	// a node's id is its log's number (logs) shifted left 40 bits, plus
	// the record's index, so that an append is SQLite's cheap append at
	// the end of a table (the WITHOUT ROWID table's rows rebalanced a
	// few pages at every commit). The change log's notes of nodes name
	// their ids. A tenant's nodes are then its records' index in time
	// order: audit_by_tenant goes (logTreesMigration).
	`
CREATE TABLE logs (
	num INTEGER PRIMARY KEY AUTOINCREMENT,
	log BLOB NOT NULL UNIQUE
);
INSERT INTO logs(log) SELECT DISTINCT log FROM log_nodes ORDER BY log;
UPDATE replica_log SET k1 = (SELECT (num << 40) + replica_log.k2 FROM logs WHERE log = replica_log.k1), k2 = NULL
	WHERE tbl = 'log_nodes';
ALTER TABLE log_nodes RENAME TO log_nodes_13;
CREATE TABLE log_nodes (
	id     INTEGER PRIMARY KEY,
	rec    INTEGER NOT NULL,
	hashes BLOB NOT NULL
);
INSERT INTO log_nodes(id, rec, hashes)
	SELECT (l.num << 40) + o.idx, o.rec, o.hashes FROM log_nodes_13 o JOIN logs l ON l.log = o.log ORDER BY 1;
DROP TABLE log_nodes_13;
` + logTreesMigration,
}
