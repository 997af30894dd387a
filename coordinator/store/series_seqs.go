package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// This file holds what the store remembers of a source's report seqs
// (bucketSeriesSeqs), so that a resent report is known after it left the
// head: the seqs stored, and the agent's numberings of them.
//
// An agent numbers its reports in its spool file; when it loses that file
// (a reboot wiped /run, a spool in memory only) its seqs start again at
// 1 under a new seq epoch. The store keeps its own seqs, one numbering
// after the other: a numbering maps its agent seqs from `from` on to the
// store's from `base` on, and a new one starts after the highest seq
// stored so far, so that its reports are new ones, never taken for
// resends of another's. An older numbering that goes on past where a
// newer one began (an agent run with and without its spool file in
// turn, two agents under one name) goes on in a numbering of its own
// after that too: its resends still map where they were stored, and a
// seq below its numberings kept (maxNumberings) is taken for a resend.

// seqState is a source's entry in bucketSeriesSeqs.
type seqState struct {
	// numberings are the source's latest numberings, newest first, at
	// most maxNumberings. None stands for implicitSeqs, the numbering
	// of the agents older than seq epochs and of a new source.
	numberings []numbering
	// ranges are the stored seqs of the reports that left the head.
	ranges seqRanges
	// top is the highest stored seq of the source that storedSeq gave;
	// once scanned, also of the ranges and the head. dirty says
	// numberings changed.
	top            uint64
	scanned, dirty bool
}

// numbering maps the agent seqs from `from` on of one seq epoch of a
// source to the store's seqs from base on.
type numbering struct{ epoch, from, base uint64 }

// implicitSeqs is epoch 0's numbering, the store's seqs the agent's.
var implicitSeqs = numbering{epoch: 0, from: 1, base: 1}

// maxNumberings bounds a source's numberings: the seqs of an older one
// are taken for new ones (its spool is long gone).
const maxNumberings = 4

// decodeSeqState decodes a bucketSeriesSeqs value: the ranges alone (16
// bytes each: the layout before seq epochs, implicitSeqs), or a count
// byte k, k numberings (epoch, from, base: 8 bytes each, big-endian),
// then the ranges. A nil v is a source with nothing stored yet.
func decodeSeqState(v []byte) (*seqState, error) {
	st := &seqState{}
	if len(v)%16 != 0 {
		k := int(v[0])
		if k < 1 || k > maxNumberings || len(v) < 1+24*k || (len(v)-1-24*k)%16 != 0 {
			return nil, fmt.Errorf("%w: series seqs of %d bytes with %d numberings", ErrCorrupt, len(v), k)
		}
		for i := range k {
			o := 1 + 24*i
			st.numberings = append(st.numberings, numbering{binary.BigEndian.Uint64(v[o:]),
				binary.BigEndian.Uint64(v[o+8:]), binary.BigEndian.Uint64(v[o+16:])})
		}
		v = v[1+24*k:]
	}
	var err error
	st.ranges, err = decodeSeqRanges(v)
	return st, err
}

// encode is st as bucketSeriesSeqs holds it: the layout before seq
// epochs while the source has had only implicitSeqs.
func (st *seqState) encode() []byte {
	if len(st.numberings) == 0 || len(st.numberings) == 1 && st.numberings[0] == implicitSeqs {
		return st.ranges.encode()
	}
	out := append(make([]byte, 0, 1+24*len(st.numberings)+16*len(st.ranges)), byte(len(st.numberings)))
	for _, n := range st.numberings {
		out = binary.BigEndian.AppendUint64(out, n.epoch)
		out = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(out, n.from), n.base)
	}
	return append(out, st.ranges.encode()...)
}

// storedSeq is the store's seq of the report numbered seq (> 0) in epoch
// of the source src, whose head reports are in hb: by the newest of the
// source's numberings of epoch that holds seq, or else by a new one
// after the highest seq stored. It is 0 for a seq below every numbering
// the source keeps of a known epoch: one whose numbering maxNumberings
// let go, older than what the store tracks of it, taken for a resend (a
// new numbering from it would cover, and store again, the epoch's later
// resends). ok is false if the store's seq overflows a uint64 (a seq no
// agent reaches).
func (st *seqState) storedSeq(hb *bolt.Bucket, src uint32, epoch, seq uint64) (stored uint64, ok bool) {
	if len(st.numberings) == 0 {
		st.numberings = []numbering{implicitSeqs}
	}
	known, split := false, false
	from := uint64(1) // of a new numbering: an epoch not (or no longer) known
	for i, n := range st.numberings {
		known = known || n.epoch == epoch
		if n.epoch != epoch || seq < n.from {
			continue
		}
		if seq-n.from > math.MaxUint64-n.base {
			return 0, false
		}
		stored = n.base + (seq - n.from)
		if i == 0 || stored < st.numberings[i-1].base {
			st.top = max(st.top, stored)
			return stored, true
		}
		from, split = seq, true // a new seq of a numbering that a newer one came after
		break
	}
	if known && !split {
		return 0, true // below the epoch's numberings kept
	}
	if !st.scanned {
		st.top, st.scanned = max(st.top, st.ranges.top(), headTop(hb, src)), true
	}
	if st.top == math.MaxUint64 || seq-from > math.MaxUint64-(st.top+1) {
		return 0, false
	}
	n := numbering{epoch: epoch, from: from, base: st.top + 1}
	st.numberings = slices.Insert(st.numberings, 0, n)[:min(len(st.numberings)+1, maxNumberings)]
	st.dirty = true
	stored = n.base + (seq - from)
	st.top = stored
	return stored, true
}

// headTop is the highest seq of src's reports in the head, 0 if none.
func headTop(hb *bolt.Bucket, src uint32) uint64 {
	prefix := binary.BigEndian.AppendUint32(nil, src)
	c := hb.Cursor()
	k, _ := c.Seek(headKey(src, math.MaxUint64)) // that key, or the first after it
	switch {
	case k == nil:
		k, _ = c.Last()
	case !bytes.HasPrefix(k, prefix):
		k, _ = c.Prev()
	}
	if len(k) != 12 || !bytes.HasPrefix(k, prefix) {
		return 0
	}
	return binary.BigEndian.Uint64(k[4:])
}

// seqRanges are sorted, disjoint, inclusive ranges of seqs (bucketSeriesSeqs).
type seqRanges [][2]uint64

// maxSeqRanges bounds one source's seqRanges: past it, the two lowest
// ranges are merged, which counts the seqs between them as seen (a report
// that old arriving for the first time is then taken for a resend).
const maxSeqRanges = 32

func decodeSeqRanges(v []byte) (seqRanges, error) {
	if len(v)%16 != 0 {
		return nil, fmt.Errorf("%w: series seq ranges of %d bytes", ErrCorrupt, len(v))
	}
	r := make(seqRanges, len(v)/16)
	for i := range r {
		r[i] = [2]uint64{binary.BigEndian.Uint64(v[i*16:]), binary.BigEndian.Uint64(v[i*16+8:])}
	}
	return r, nil
}

func (r seqRanges) encode() []byte {
	out := make([]byte, 0, len(r)*16)
	for _, x := range r {
		out = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(out, x[0]), x[1])
	}
	return out
}

// top is the highest seq of r, 0 if none.
func (r seqRanges) top() uint64 {
	if len(r) == 0 {
		return 0
	}
	return r[len(r)-1][1]
}

func (r seqRanges) contains(seq uint64) bool {
	i, _ := slices.BinarySearchFunc(r, seq, func(x [2]uint64, s uint64) int {
		switch {
		case x[1] < s:
			return -1
		case x[0] > s:
			return 1
		}
		return 0
	})
	return i < len(r) && r[i][0] <= seq && seq <= r[i][1]
}

// add is r with the seqs of the sorted slice seqs.
func (r seqRanges) add(seqs []uint64) seqRanges {
	for _, s := range seqs {
		r = append(r, [2]uint64{s, s})
	}
	slices.SortFunc(r, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	out := r[:0]
	for _, x := range r {
		if n := len(out); n > 0 && (x[0] <= out[n-1][1] || out[n-1][1] != ^uint64(0) && x[0] == out[n-1][1]+1) {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	for len(out) > maxSeqRanges {
		out[1][0] = out[0][0]
		out = out[1:]
	}
	return out
}
