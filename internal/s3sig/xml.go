package s3sig

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// The XML documents below are matched by local name only: encoding/xml
// ignores the namespace when a field's tag names none, and servers differ
// (AWS and MinIO send xmlns="http://s3.amazonaws.com/doc/2006-03-01/",
// some gateways send an ObjectLockConfiguration without it).

type errorXML struct {
	Code             string `xml:"Code"`
	Message          string `xml:"Message"`
	RequestID        string `xml:"RequestId"`
	HostID           string `xml:"HostId"`
	CanonicalRequest string `xml:"CanonicalRequest"`
	StringToSign     string `xml:"StringToSign"`
}

// parseErrorXML reads an <Error> body. ok is false for an empty or non-XML
// body (a HEAD answer, a proxy's HTML page).
func parseErrorXML(body []byte) (errorXML, bool) {
	var x errorXML
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '<' {
		return x, false
	}
	if err := xml.Unmarshal(body, &x); err != nil {
		return errorXML{}, false
	}
	return x, x.Code != ""
}

// Object is one entry of a listing.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
	ETag         string
}

// ListPage is one ListObjectsV2 answer.
type ListPage struct {
	Objects               []Object
	IsTruncated           bool
	NextContinuationToken string
}

type listXML struct {
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
	EncodingType          string `xml:"EncodingType"`
	Contents              []struct {
		Key          string `xml:"Key"`
		Size         int64  `xml:"Size"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
	} `xml:"Contents"`
}

// parseList reads a ListBucketResult.
func parseList(body []byte) (*ListPage, error) {
	var x listXML
	if err := xml.Unmarshal(body, &x); err != nil {
		return nil, fmt.Errorf("s3: list objects: reading the answer: %w", err)
	}
	p := &ListPage{IsTruncated: x.IsTruncated, NextContinuationToken: x.NextContinuationToken}
	p.Objects = make([]Object, 0, len(x.Contents))
	for _, c := range x.Contents {
		o := Object{Key: c.Key, Size: c.Size, ETag: c.ETag}
		if x.EncodingType == "url" {
			// Asked for or not, a server that says it URL-encoded the
			// keys did so; AWS writes a space as "+".
			k, err := url.QueryUnescape(c.Key)
			if err != nil {
				// The error text would quote part of the key: leave it out.
				return nil, errors.New("s3: list objects: a key is not URL-encoded as the answer says")
			}
			o.Key = k
		}
		if c.LastModified != "" {
			t, err := time.Parse(time.RFC3339Nano, c.LastModified)
			if err != nil {
				return nil, fmt.Errorf("s3: list objects: bad LastModified %q: %w", c.LastModified, err)
			}
			o.LastModified = t
		}
		if c.Size < 0 {
			return nil, fmt.Errorf("s3: list objects: negative size %d", c.Size)
		}
		p.Objects = append(p.Objects, o)
	}
	return p, nil
}

type versioningXML struct {
	Status string `xml:"Status"`
}

// parseVersioning reads a VersioningConfiguration. A bucket whose
// versioning was never turned on answers one without Status: "".
func parseVersioning(body []byte) (string, error) {
	var x versioningXML
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	if err := xml.Unmarshal(body, &x); err != nil {
		return "", fmt.Errorf("s3: get bucket versioning: reading the answer: %w", err)
	}
	switch x.Status {
	case "", VersioningEnabled, VersioningSuspended:
		return x.Status, nil
	}
	return "", fmt.Errorf("s3: get bucket versioning: unknown status %q", x.Status)
}

type objectLockXML struct {
	ObjectLockEnabled string `xml:"ObjectLockEnabled"`
}

// parseObjectLock reads an ObjectLockConfiguration; an empty one (some
// servers answer 200 with no setting) means no lock.
func parseObjectLock(body []byte) (bool, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return false, nil
	}
	var x objectLockXML
	if err := xml.Unmarshal(body, &x); err != nil {
		return false, fmt.Errorf("s3: get object lock configuration: reading the answer: %w", err)
	}
	return x.ObjectLockEnabled == "Enabled", nil
}
