package archive

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vcon-server/vcon-server/catalog"
	"github.com/vcon-server/vcon-server/internal/ids"
)

// Every object key vcon-server writes is spelled in this file: the data
// directory's and the bucket's (docs/FORMAT.md, "Where things are"), and
// an export target's (docs/export.md). Keys never start with "/"; a
// bucket's prefix is added by the store, not here.

// MarkerKey names the object that binds a bucket and prefix to one catalog.
const MarkerKey = "catalog-id"

// PurgeCountKey names the object that holds storage's count of purges, in
// the data directory or the bucket (docs/FORMAT.md, "Purge of an object").
const PurgeCountKey = "purge-count"

// The kinds of object a tenant's folder holds.
const (
	kindObjects  = "objects"
	kindPurged   = "purged"
	kindParquet  = "parquet"
	kindManifest = "manifest"
)

// tenantFolder is a tenant's folder in a bucket.
func tenantFolder(tenant ids.ID) string { return "tenants/" + tenant.String() + "/" }

// kindPrefix is the folder of one kind of a tenant's objects in a store
// of kind loc: "objects/<tenant>/" in the data directory,
// "tenants/<tenant>/objects/" in a bucket.
func kindPrefix(loc catalog.Location, kind string, tenant ids.ID) string {
	if loc == catalog.InDir {
		return kind + "/" + tenant.String() + "/"
	}
	return tenantFolder(tenant) + kind + "/"
}

// ObjectKey is where a version's sealed object lives in a store of kind loc.
func ObjectKey(loc catalog.Location, tenant, version ids.ID) string {
	return kindPrefix(loc, kindObjects, tenant) + version.String()
}

// TombstoneKey marks a purged version in storage, so that a start on a
// catalog restored from an older backup destroys its key again.
func TombstoneKey(loc catalog.Location, tenant, version ids.ID) string {
	return kindPrefix(loc, kindPurged, tenant) + version.String()
}

// PurgeWrite reports whether key is one a purge writes before it deletes
// any bytes (its count and tombstones): these may take the disk's reserve
// (diskspace.Spare), so that a purge on a full disk can go on to free it.
func PurgeWrite(key string) bool {
	if key == PurgeCountKey {
		return true
	}
	kind, _, _, ok := dirKey(key)
	if ok {
		return kind == kindPurged
	}
	parts := strings.Split(key, "/")
	return len(parts) == 4 && parts[0] == "tenants" && parts[2] == kindPurged
}

// PackKey is where a pack file lives in the bucket.
func PackKey(tenant ids.ID, date string, file ids.ID) string {
	return kindPrefix(catalog.InS3, kindParquet, tenant) + "date=" + date + "/part-" + file.String() + ".parquet"
}

// ManifestKey is where a tenant's manifest number seq lives in the bucket:
// 20 digits, so that names sort as numbers.
func ManifestKey(tenant ids.ID, seq int64) string {
	return fmt.Sprintf("%s%020d.json", kindPrefix(catalog.InS3, kindManifest, tenant), seq)
}

// packFileOf reads the date and file id a pack file's key names.
func packFileOf(tenant ids.ID, key string) (date string, file ids.ID, ok bool) {
	rest, ok := strings.CutPrefix(key, kindPrefix(catalog.InS3, kindParquet, tenant)+"date=")
	if !ok {
		return "", file, false
	}
	date, name, ok := strings.Cut(rest, "/part-")
	if !ok {
		return "", file, false
	}
	id, err := ids.Parse(strings.TrimSuffix(name, ".parquet"))
	if err != nil || !strings.HasSuffix(name, ".parquet") || PackKey(tenant, date, id) != key {
		return "", file, false
	}
	return date, id, true
}

// manifestSeq reads the number a manifest's key names.
func manifestSeq(tenant ids.ID, key string) (int64, bool) {
	name, ok := strings.CutPrefix(key, kindPrefix(catalog.InS3, kindManifest, tenant))
	if !ok || len(name) != 25 || !strings.HasSuffix(name, ".json") {
		return 0, false
	}
	n, err := strconv.ParseInt(name[:20], 10, 64)
	return n, err == nil
}

// manifestPath is a pack file's path as its manifest names it: relative
// to the tenant's folder.
func manifestPath(tenant ids.ID, packKey string) string {
	return strings.TrimPrefix(packKey, tenantFolder(tenant))
}

// versionOf reads the version id that ends an object or tombstone key.
func versionOf(key string) (ids.ID, bool) {
	id, err := ids.Parse(key[strings.LastIndexByte(key, '/')+1:])
	return id, err == nil
}

// dirKey splits a data-directory key of an object or a tombstone into its
// kind and ids; ok is false for any other key.
func dirKey(key string) (kind string, tenant, version ids.ID, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || (parts[0] != kindObjects && parts[0] != kindPurged) {
		return "", tenant, version, false
	}
	t, err1 := ids.Parse(parts[1])
	v, err2 := ids.Parse(parts[2])
	if err1 != nil || err2 != nil {
		return "", tenant, version, false
	}
	return parts[0], t, v, true
}

// Export targets (docs/export.md): one folder per tenant, Hive-style.

// ExportPrefix is a tenant's folder under an export target.
func ExportPrefix(tenant ids.ID) string { return "tenant=" + tenant.String() + "/" }

// ExportManifestPrefix is the folder of a tenant's export manifests.
func ExportManifestPrefix(tenant ids.ID) string { return ExportPrefix(tenant) + "manifest/" }

// ExportManifestKey is where export manifest seq of tenant goes under the
// target: 20 digits, so the names sort in the order of their numbers.
func ExportManifestKey(tenant ids.ID, seq int64) string {
	return fmt.Sprintf("%s%020d.json", ExportManifestPrefix(tenant), seq)
}

// ExportPartKey is where a part file of tenant goes under the target: one
// folder per store date (UTC), named by a fresh UUIDv7 in 32 hexadecimal
// digits, so names sort by the time the export made them and never repeat.
func ExportPartKey(tenant ids.ID, date string, file ids.ID) string {
	return ExportPrefix(tenant) + "date=" + date + "/part-" + file.Hex() + ".parquet"
}
