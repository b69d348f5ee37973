package spool

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/produce"
)

// A spool file is a sequence of records, each a header of the body's length
// and CRC-32C (little-endian uint32s) and the body: the length of the
// item's metadata (a little-endian uint32), the metadata as a JSON object,
// and the item's payload as the client sent it, which is empty for none. A
// record whose header or body is cut short, or whose checksum does not
// match, is where a crash interrupted an append that was never
// acknowledged: reading stops there.
const headerSize = 8

// maxRecord bounds a record's length as read back, so that a damaged header
// cannot make the reader allocate gigabytes. A push body is at most a few
// tens of MiB; this is far above any item of one.
const maxRecord = 1 << 30

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one spooled item with whose push it was.
type Record struct {
	Tenant string
	Sub    string
	Item   produce.Item
}

// meta is a record's metadata. The item's message id is its transaction id
// when the client sent none (see Spool.Take), so it is kept as given.
type meta struct {
	Tenant    string     `json:"t"`
	Sub       string     `json:"s,omitempty"`
	Queue     string     `json:"q"`
	Partition string     `json:"p,omitempty"`
	TxID      string     `json:"x"`
	TraceID   string     `json:"r,omitempty"`
	MessageID *uuid.UUID `json:"m,omitempty"`
	// Traceparent came later; older records lack it and read as none.
	Traceparent string `json:"w,omitempty"`
}

// appendRecord appends r, framed, to b.
func appendRecord(b []byte, r Record) ([]byte, error) {
	m := meta{Tenant: r.Tenant, Sub: r.Sub, Queue: r.Item.Queue, Partition: r.Item.Partition,
		TxID: r.Item.TransactionID, TraceID: r.Item.TraceID, Traceparent: r.Item.Traceparent}
	if r.Item.MessageID != uuid.Nil {
		m.MessageID = &r.Item.MessageID
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return b, fmt.Errorf("encode spool record: %w", err)
	}
	start := len(b)
	b = append(b, make([]byte, headerSize)...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(mb)))
	b = append(append(b, mb...), r.Item.Payload...)
	body := b[start+headerSize:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, castagnoli))
	return b, nil
}

// reader reads the records of one file from an offset.
type reader struct {
	f   *os.File
	br  *bufio.Reader
	off int64 // of the next record
}

func openReader(path string, off int64) (*reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open spool file: %w", err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek spool file %s: %w", path, err)
	}
	return &reader{f: f, br: bufio.NewReaderSize(f, 1<<16), off: off}, nil
}

func (r *reader) Close() error { return r.f.Close() }

// next returns the next record, or io.EOF at the end of the file or at a
// torn record.
func (r *reader) next() (Record, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r.br, h[:]); err != nil {
		return Record{}, eofOr(err)
	}
	n := binary.LittleEndian.Uint32(h[:4])
	if n > maxRecord {
		return Record{}, io.EOF
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r.br, p); err != nil {
		return Record{}, eofOr(err)
	}
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return Record{}, io.EOF
	}
	// The checksum matched what was written: past this point a record
	// that does not decode is no torn write, and must not pass for the end.
	var m meta
	var mlen uint32
	if len(p) >= 4 {
		mlen = binary.LittleEndian.Uint32(p)
	}
	if len(p) < 4 || uint64(mlen) > uint64(len(p)-4) {
		return Record{}, fmt.Errorf("decode spool record at %s:%d: metadata length %d of %d bytes", r.f.Name(), r.off, mlen, len(p))
	}
	if err := json.Unmarshal(p[4:4+mlen], &m); err != nil {
		return Record{}, fmt.Errorf("decode spool record at %s:%d: %w", r.f.Name(), r.off, err)
	}
	r.off += headerSize + int64(n)
	rec := Record{Tenant: m.Tenant, Sub: m.Sub, Item: produce.Item{Queue: m.Queue, Partition: m.Partition,
		TransactionID: m.TxID, TraceID: m.TraceID, Traceparent: m.Traceparent}}
	if payload := p[4+mlen:]; len(payload) > 0 {
		rec.Item.Payload = payload
	}
	if m.MessageID != nil {
		rec.Item.MessageID = *m.MessageID
	}
	return rec, nil
}

func eofOr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// File names: spool-<seq>.log holds records; spool-<seq>.done, when present,
// holds the byte offset up to which they have been pushed.
const (
	prefix   = "spool-"
	logExt   = ".log"
	doneExt  = ".done"
	lockName = "LOCK"
)

func logPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%016d%s", prefix, seq, logExt))
}

func donePath(logFile string) string { return strings.TrimSuffix(logFile, logExt) + doneExt }

// files lists the sequence numbers of the spool files in dir, in order.
func files(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list spool dir: %w", err)
	}
	var seqs []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, logExt) {
			continue
		}
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, prefix), logExt), 10, 64)
		if err != nil {
			continue
		}
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// pushedUpTo reads a file's checkpoint; none, or one a crash cut short,
// is 0: replaying pushed records costs time, not correctness.
func pushedUpTo(logFile string) int64 {
	b, err := os.ReadFile(donePath(logFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// checkpoint records that a file's records before off are pushed.
func checkpoint(logFile string, off int64) error {
	f, err := os.OpenFile(donePath(logFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write spool checkpoint: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(off, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write spool checkpoint: %w", err)
	}
	return nil
}

// syncDir makes the creation or removal of files in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
