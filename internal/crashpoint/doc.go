// Package crashpoint lets tests kill the process at named points of every
// multi-step write, to prove that the next start repairs what is left.
// Only a binary built with -tags crashpoints has them; in every other
// build Hit is an empty function.
package crashpoint

// EnvVar names the point to die at, in a crashpoints build.
const EnvVar = "VCON_SERVER_CRASH_AT"

// The points, in the order their operation passes them.
const (
	StoreAfterObject    = "store-after-object"    // object durable, catalog row not committed
	StoreAfterCommit    = "store-after-commit"    // row committed, answer not sent
	PurgeAfterKey       = "purge-after-key"       // data key destroyed and checkpointed
	PurgeAfterCount     = "purge-after-count"     // storage's purge count raised, tombstone not written
	PurgeAfterTombstone = "purge-after-tombstone" // tombstone written
	PurgeAfterDelete    = "purge-after-delete"    // bytes deleted, purge not recorded done
	RotateBeforeCommit  = "rotate-before-commit"  // every tenant key re-wrapped in the open transaction, not committed

	// The move of an older catalog's data keys under tenant keys
	// (docs/FORMAT.md, "Keys").
	KeyMoveAfterKeys = "key-move-after-keys" // every tenant has its key, no data key moved
	KeyMoveAfterPage = "key-move-after-page" // a page of data keys moved and the cursor committed, pages still to move

	// Erasure (docs/erasure.md); between these two, the purge points above.
	EraseAfterBatch  = "erase-after-batch"  // the erasure recorded, a batch of its vCons hidden and their keys destroyed, a batch still to take
	EraseAfterKeys   = "erase-after-keys"   // every batch of the erasure taken: its vCons hidden and its keys destroyed, not checkpointed
	EraseAfterPurges = "erase-after-purges" // every purge of the erasure done, the erasure not yet recorded done

	// The audit logs' trees (docs/FORMAT.md, "Audit log tree").
	LogAfterNodes = "log-after-nodes" // a batch's records and their leaves written in its transaction, not committed
	LogAfterSign  = "log-after-sign"  // checkpoints signed over synced records, not recorded

	// A tenant's delete (docs/FORMAT.md, "Tenant delete").
	TenantDeleteAfterKey     = "tenant-delete-after-key"     // the tenant's key destroyed and it marked deleting, checkpointed; its objects and rows all there
	TenantDeleteAfterObjects = "tenant-delete-after-objects" // the tenant's objects deleted and proven gone, its rows still there
	TenantDeleteAfterRows    = "tenant-delete-after-rows"    // every row of the tenant deleted, the deletion not yet recorded done

	// Parquet storage (docs/parquet-storage.md).
	PackAfterPut       = "pack-after-put"       // new pack file PUT, catalog row still pending
	PackAfterCommit    = "pack-after-commit"    // versions moved to the file, manifest and objects not yet
	PackAfterDeletes   = "pack-after-deletes"   // packed versions' objects deleted
	MergeAfterPut      = "merge-after-put"      // merged file PUT, catalog row still pending
	MergeAfterCommit   = "merge-after-commit"   // rows moved, sources retired, manifest not yet written
	ManifestAfterPut   = "manifest-after-put"   // manifest PUT, not yet recorded in the catalog
	RewriteAfterPut    = "rewrite-after-put"    // a purge's rewritten file PUT, catalog row still pending
	RewriteAfterCommit = "rewrite-after-commit" // rewrite committed, old file not yet deleted
	RewriteAfterDelete = "rewrite-after-delete" // old files deleted, not yet proven gone nor the purge recorded done

	// Moving objects into the bucket (storage move-objects).
	MoveAfterCopy   = "move-after-copy"   // the bucket's copy verified, the row still names the data directory
	MoveAfterCommit = "move-after-commit" // the row names the bucket, the local copy not yet deleted

	// Export (docs/export.md).
	ExportAfterFile      = "export-after-file"      // a part file is whole under its name
	ExportBeforeManifest = "export-before-manifest" // every part file is whole, no manifest yet

	// The catalog's replica (docs/FORMAT.md, "Replica", "Replica rollover").
	ReplicaAfterSegment  = "replica-after-segment"  // a segment written, not yet recorded in the catalog
	ReplicaAfterHead     = "replica-after-head"     // the head rewritten to name a segment not yet recorded in the catalog
	ReplicaAfterPending  = "replica-after-pending"  // a rollover's new generation recorded as pending, nothing written
	ReplicaAfterShards   = "replica-after-shards"   // the new generation's shards and fold written, no manifest
	ReplicaAfterManifest = "replica-after-manifest" // the new manifest written, the catalog's record not yet
	ReplicaAfterNewHead  = "replica-after-new-head" // the head rewritten to name the new manifest, the catalog's record not yet
	ReplicaAfterRecord   = "replica-after-record"   // the record names the new generation, old objects not yet deleted
	ReplicaAfterDeletes  = "replica-after-deletes"  // old objects deleted, not yet proven gone

	// Webhooks (docs/webhooks.md).
	WebhookAfterDelivery = "webhook-after-delivery" // a receiver took an event, its outbox row not yet deleted

	// The disk's reserve (docs/troubleshooting.md, "The disk is low").
	ReserveReleased = "reserve-released" // a write failed for space and the reserve was given back, not yet made again
)
