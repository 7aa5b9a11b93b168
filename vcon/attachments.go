package vcon

import (
	"fmt"

	"github.com/vcon-server/vcon-server/vcon/lawfulbasis"
)

// Lawful-basis attachments (draft-howe-vcon-lawful-basis-02), read as the
// attachments stream by: each attachment's bytes are kept while it passes,
// up to lawfulbasis.MaxAttachmentSize, and handed to lawfulbasis.Parse
// when its purpose turns out to be "lawful_basis" (the purpose may come
// after the body). Any other attachment's bytes are dropped at its end,
// so memory holds one attachment's worth at most, whatever the vCon.

func (d *doc) readAttachments(s *scanner) error {
	d.lawful, d.lawfulErr = nil, nil
	n := 0
	_, err := arrayItems(s, func(i int) error {
		c, err := s.valueStart()
		if err != nil {
			return err
		}
		if c != '{' {
			return s.skip()
		}
		s.startRecord(lawfulbasis.MaxAttachmentSize)
		var purpose, typ value
		var seen uint32
		err = s.object(func(key []byte) error {
			d.once(&seen, attachmentMembers, key, func() string { return fmt.Sprintf("attachments[%d].%s", i, key) })
			var err error
			switch string(key) {
			case "purpose":
				purpose, err = capture(s, maxShort)
			case "type":
				typ, err = capture(s, maxShort)
			default:
				err = s.skip()
			}
			return err
		})
		raw, whole := s.stopRecord()
		lawful := purpose.kind == '"' && purpose.s == lawfulbasis.Purpose ||
			!purpose.present() && typ.kind == '"' && lawfulbasis.IsLegacy(typ.s)
		if err != nil || !lawful || d.lawfulErr != nil {
			return err
		}
		if n++; n > lawfulbasis.MaxAttachments {
			d.lawfulErr = &lawfulbasis.Error{Reason: fmt.Sprintf("more than %d lawful_basis attachments; merge their grants into fewer", lawfulbasis.MaxAttachments)}
			return nil
		}
		var a lawfulbasis.Attachment
		if whole {
			a, err = lawfulbasis.Parse(raw)
		} else {
			err = &lawfulbasis.Error{Reason: fmt.Sprintf("the attachment is over %d KiB; a lawful basis needs far less", lawfulbasis.MaxAttachmentSize>>10)}
		}
		if err != nil {
			d.lawfulErr = atAttachment(i, err)
			return nil
		}
		a.Index = i
		d.lawful = append(d.lawful, a)
		return nil
	})
	return err
}

// atAttachment names the attachment a reason is about.
func atAttachment(i int, err error) error {
	if e, ok := err.(*lawfulbasis.Error); ok {
		return &lawfulbasis.Error{Reason: fmt.Sprintf("attachments[%d]: %s", i, e.Reason)}
	}
	return err
}

// lawfulBasis is the vCon's lawful basis once the whole document is read:
// the party and dialog indexes can only be checked against arrays that
// may come after the attachments.
func (d *doc) lawfulBasis() (lawfulbasis.Summary, error) {
	if d.lawfulErr != nil {
		return lawfulbasis.Summary{Basis: lawfulbasis.Malformed}, d.lawfulErr
	}
	for _, a := range d.lawful {
		if err := a.CheckRefs(d.partyCount, d.dialogCount); err != nil {
			return lawfulbasis.Summary{Basis: lawfulbasis.Malformed}, atAttachment(a.Index, err)
		}
	}
	return lawfulbasis.Summarize(d.lawful), nil
}
