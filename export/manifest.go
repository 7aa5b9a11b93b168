package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vcon-server/vcon-server/archive"
	"github.com/vcon-server/vcon-server/objstore"
)

// ManifestFormat is the manifest's format number.
const ManifestFormat = 1

// Manifest is what a manifest holds, in the order of its fields. Purpose
// is null for an export of every version, and Withheld counts the versions
// it left out for its purpose. Live lists the ids, as 32 lowercase
// hexadecimal digits, of the rows whose version was its vCon's current
// one, neither hidden nor deleted, when the export listed it.
type Manifest struct {
	Format    int         `json:"format"`
	Seq       int64       `json:"seq"`
	Metadata  string      `json:"metadata"`
	CreatedAt string      `json:"created_at"`
	Since     *string     `json:"since"`
	Until     *string     `json:"until"`
	Purpose   *string     `json:"purpose"`
	Tenant    string      `json:"tenant"`
	Files     []fileEntry `json:"files"`
	Rows      int64       `json:"rows"`
	Withheld  int64       `json:"withheld"`
	Live      []string    `json:"live"`
}

// nextSeq is one more than the highest manifest number of the tenant under
// the target; 1 for the first. Only published manifests count: an export
// cut off before its manifest takes no number.
func (x *run) nextSeq(ctx context.Context) (int64, error) {
	var high int64
	err := x.opt.Target.List(ctx, archive.ExportManifestPrefix(x.opt.Tenant.ID), func(info objstore.Info) error {
		if n, ok := parseManifestName(info.Key[strings.LastIndexByte(info.Key, '/')+1:]); ok && n > high {
			high = n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("export: list the manifests in %s: %w", x.opt.Target, err)
	}
	return high + 1, nil
}

func parseManifestName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// publish writes the manifest last, create-only: link(2) in a directory,
// If-None-Match: * in a bucket. It never replaces a manifest; a number
// another export took meanwhile is a *RaceError.
func (x *run) publish(ctx context.Context) (string, int64, error) {
	seq, err := x.nextSeq(ctx)
	if err != nil {
		return "", 0, err
	}
	key := archive.ExportManifestKey(x.opt.Tenant.ID, seq)
	if x.opt.BeforePublish != nil {
		x.opt.BeforePublish(seq)
	}
	up, err := x.opt.Target.Upload(ctx, key, true)
	if err != nil {
		return "", 0, fmt.Errorf("export: start the manifest in %s: %w", x.opt.Target, err)
	}
	defer up.Abort()
	w := bufio.NewWriterSize(up, 256<<10)
	if err := x.writeManifest(w, seq); err != nil {
		return "", 0, fmt.Errorf("export: write the manifest to %s: %w", x.opt.Target, err)
	}
	if err := w.Flush(); err != nil {
		return "", 0, fmt.Errorf("export: write the manifest to %s: %w", x.opt.Target, err)
	}
	err = up.Commit()
	if errors.Is(err, objstore.ErrExists) {
		return "", 0, &RaceError{Manifest: key}
	}
	if err != nil {
		return "", 0, fmt.Errorf("export: write the manifest to %s: %w", x.opt.Target, err)
	}
	return key, seq, nil
}

// writeManifest streams the manifest: the live ids come from the scratch
// file, so a tenant of any size is written with bounded memory.
func (x *run) writeManifest(w io.Writer, seq int64) error {
	m := Manifest{
		Format: ManifestFormat, Seq: seq, Metadata: string(x.level),
		CreatedAt: x.now.Format(time.RFC3339Nano),
		Since:     timeText(x.opt.Since), Until: timeText(x.opt.Until),
		Purpose: purposeText(x.opt.Purpose),
		Tenant:  x.opt.Tenant.ID.String(), Files: x.files, Rows: x.rows,
		Withheld: x.withheld, Live: []string{},
	}
	if m.Files == nil {
		m.Files = []fileEntry{}
	}
	head, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Everything but the empty live list and the closing brace: `[]}`.
	const tail = `[]}`
	if !bytes.HasSuffix(head, []byte(tail)) {
		return errors.New("manifest layout")
	}
	if _, err := w.Write(head[:len(head)-len(tail)]); err != nil {
		return err
	}
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	if _, err := x.live.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(x.live, 64<<10)
	var id [16]byte
	item := make([]byte, 0, 36)
	for i := int64(0); i < x.liveCount; i++ {
		if _, err := io.ReadFull(r, id[:]); err != nil {
			return fmt.Errorf("scratch file: %w", err)
		}
		item = item[:0]
		if i > 0 {
			item = append(item, ',')
		}
		item = append(item, '"')
		item = hex.AppendEncode(item, id[:])
		item = append(item, '"')
		if _, err := w.Write(item); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

func timeText(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}
