// Package catalog is the SQLite database that decides what exists: tenants,
// keys, tenant keys, vCons, their versions with the wrapped data keys, pack files,
// manifests and the audit logs (docs/FORMAT.md, "The catalog decides").
//
// The file is opened in WAL mode with synchronous FULL (but for the
// records of reads: writer.go), foreign keys and secure_delete on. Several
// processes share it (a serving server and the CLI): every connection waits on a busy timeout instead of failing, and
// nothing read from it is cached, so a key created or revoked, or a tenant
// changed, by the CLI applies at the server's next request. What is kept
// is each hot query's prepared statement (stmts.go), which holds no rows:
// every call reads the catalog as it is.
//
// The package is filed by table: each file holds the queries of one table
// or aggregate. The table below says which tables each file reads or
// writes and where docs/FORMAT.md describes them; a file added to the
// package is named in it (test/e2e's TestLayout holds that).
//
//	file             tables                                                     docs/FORMAT.md section
//	catalog.go       meta                                                       The catalog
//	schema.go        every table: the migrations                                The catalog, Indexes
//	writer.go        (every write: batches, commits)                            The catalog
//	stmts.go         (prepared statements)                                      The catalog
//	scan.go          (every read of rows: eachRow, queryAll; the page size)     Indexes
//	lock.go          (serve.lock beside the file)                               The data directory
//	tenants.go       tenants                                                    The catalog
//	tenantkeys.go    tenant_keys, versions.wrapped_key (the move), meta.key_move  Tenant keys
//	tenantdelete.go  tenant_deletions, every table with a tenant column         Tenant delete
//	keys.go          keys                                                       The catalog
//	audit.go         audit, admin_log                                           The catalog
//	logtree.go       logs, log_nodes (numbers, appends, the backfill), leaves   Audit log tree
//	lognodes.go      log_nodes (a batch's inserts)                              Audit log tree
//	logreads.go      log_nodes, log_checkpoints (reads; checkpoints)            Audit log tree
//	logtrees_on.go   (whether records are leaves; reads by time, migration 19)  Audit log tree
//	logtrees_off.go  (the same, off in the nologtree benchmark build only)      Audit log tree
//	appended.go      (the indexes a request's records got, for its answer)       Audit log tree
//	holds.go         vcons.held                                                 The catalog
//	versions.go      versions, vcons (writes)                                   Store, Delete
//	versionreads.go  versions, vcons (reads)                                    Indexes, Export
//	purges.go        versions (key destruction), meta.purges                    Purge of an object
//	packs.go         pack_files                                                 Pack files, Restore
//	packrows.go      versions, pack_files (rows into packs)                     Pack run, Merge
//	packpurge.go     versions, pack_files (purges in packs)                     Purge of a packed row
//	manifests.go     manifests                                                  Manifests
//	search.go        search_tokens, tenants.search                              Search index
//	lawfulbasis.go   versions' lawful columns, tenants.lawful_basis             Lawful basis
//	signatures.go    tenants' signature policy, tenant_anchors                  Signatures
//	erasures.go      erasures, erased                                           Erasure
//	erasebatch.go    erase_todo, erased                                         Erasure
//	signingkeys.go   signing_keys                                               The receipts' signing key, Audit log tree
//	webhooks.go      webhooks, webhook_events                                   Webhook outbox
//	rotate.go        tenant_keys, signing_keys, webhooks.secret, meta           Master-key rotation
//	replog.go        replica_log, replica_state (the change log)                Replica
//	replogview.go    every table a replica carries (one consistent read)        Replica objects
//	rebuild.go       every table (a catalog built from the replica)             Restore
//	backup.go        (a copy of the whole file)                                 Catalog backup
package catalog
