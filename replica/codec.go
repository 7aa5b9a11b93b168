package replica

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Rows travel as SQLite's own values, each a tag byte and its bytes
// (docs/FORMAT.md, "Replica objects"): what a column held is what a
// restore writes back, with its storage class.
const (
	tagNull  = 0
	tagInt   = 1
	tagFloat = 2
	tagText  = 3
	tagBlob  = 4
)

// Record kinds in a shard or segment body.
const (
	recEnd    = 0
	recPut    = 1
	recDelete = 2
)

var errCorrupt = errors.New("replica: an object's contents are damaged")

type encoder struct {
	w   *bufio.Writer
	buf [binary.MaxVarintLen64]byte
	err error
}

func newEncoder(w io.Writer) *encoder { return &encoder{w: bufio.NewWriterSize(w, 64<<10)} }

func (e *encoder) byte(b byte) {
	if e.err == nil {
		e.err = e.w.WriteByte(b)
	}
}

func (e *encoder) uvarint(n uint64) {
	if e.err == nil {
		_, e.err = e.w.Write(e.buf[:binary.PutUvarint(e.buf[:], n)])
	}
}

func (e *encoder) bytes(b []byte) {
	e.uvarint(uint64(len(b)))
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) value(v any) {
	switch v := v.(type) {
	case nil:
		e.byte(tagNull)
	case int64:
		e.byte(tagInt)
		if e.err == nil {
			_, e.err = e.w.Write(e.buf[:binary.PutVarint(e.buf[:], v)])
		}
	case float64:
		e.byte(tagFloat)
		e.uvarint(math.Float64bits(v))
	case string:
		e.byte(tagText)
		e.bytes([]byte(v))
	case []byte:
		e.byte(tagBlob)
		e.bytes(v)
	case bool:
		e.value(map[bool]int64{false: 0, true: 1}[v])
	default:
		if e.err == nil {
			e.err = fmt.Errorf("replica: a column holds a %T, which the replica cannot carry", v)
		}
	}
}

func (e *encoder) values(vs []any) {
	for _, v := range vs {
		e.value(v)
	}
}

func (e *encoder) flush() error {
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.err
}

type decoder struct {
	r *bufio.Reader
}

func newDecoder(r io.Reader) *decoder { return &decoder{r: bufio.NewReaderSize(r, 64<<10)} }

func (d *decoder) byte() (byte, error) {
	b, err := d.r.ReadByte()
	if err == io.EOF {
		err = errCorrupt
	}
	return b, err
}

func (d *decoder) uvarint() (uint64, error) {
	n, err := binary.ReadUvarint(d.r)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = errCorrupt
	}
	return n, err
}

const maxValue = 64 << 20 // no catalog value comes near it

func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n > maxValue {
		return nil, errCorrupt
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, errCorrupt
	}
	return b, nil
}

func (d *decoder) value() (any, error) {
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNull:
		return nil, nil
	case tagInt:
		n, err := binary.ReadVarint(d.r)
		if err != nil {
			return nil, errCorrupt
		}
		return n, nil
	case tagFloat:
		n, err := d.uvarint()
		return math.Float64frombits(n), err
	case tagText:
		b, err := d.bytes()
		return string(b), err
	case tagBlob:
		return d.bytes()
	}
	return nil, errCorrupt
}

func (d *decoder) values(n int) ([]any, error) {
	out := make([]any, n)
	for i := range out {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// encodeKey writes a key as bytes, for the shard bounds the state and the
// manifest keep.
func encodeKey(k []any) ([]byte, error) {
	if k == nil {
		return nil, nil
	}
	var b bytes.Buffer
	e := newEncoder(&b)
	e.uvarint(uint64(len(k)))
	e.values(k)
	if err := e.flush(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func decodeKey(b []byte) ([]any, error) {
	if b == nil {
		return nil, nil
	}
	d := newDecoder(bytes.NewReader(b))
	n, err := d.uvarint()
	if err != nil || n > 8 {
		return nil, errCorrupt
	}
	return d.values(int(n))
}

// compare orders two values as SQLite's BINARY collation does: NULL, then
// numbers, then text, then blobs.
func compare(a, b any) int {
	ca, cb := class(a), class(b)
	if ca != cb {
		return ca - cb
	}
	switch a := a.(type) {
	case int64:
		switch b := b.(type) {
		case int64:
			return cmp3(a < b, a > b)
		case float64:
			return cmp3(float64(a) < b, float64(a) > b)
		}
	case float64:
		switch b := b.(type) {
		case int64:
			return cmp3(a < float64(b), a > float64(b))
		case float64:
			return cmp3(a < b, a > b)
		}
	case string:
		return bytes.Compare([]byte(a), []byte(b.(string)))
	case []byte:
		return bytes.Compare(a, b.([]byte))
	}
	return 0
}

func class(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case int64, float64:
		return 1
	case string:
		return 2
	}
	return 3
}

func cmp3(less, more bool) int {
	switch {
	case less:
		return -1
	case more:
		return 1
	}
	return 0
}

func compareKeys(a, b []any) int {
	for i := range a {
		if i >= len(b) {
			return 1
		}
		if c := compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}
