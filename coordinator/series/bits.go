package series

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errShort means a chunk ended inside a value.
var errShort = errors.New("chunk ends early")

// bitWriter appends bits, most significant first, to buf.
type bitWriter struct {
	buf  []byte
	free uint // unused low bits of buf's last byte
}

// writeBits writes the n (<= 64) low bits of v.
func (w *bitWriter) writeBits(v uint64, n uint) {
	for n > 0 {
		if w.free == 0 {
			w.buf = append(w.buf, 0)
			w.free = 8
		}
		k := min(n, w.free)
		b := byte(v>>(n-k)) & byte(1<<k-1)
		w.buf[len(w.buf)-1] |= b << (w.free - k)
		w.free -= k
		n -= k
	}
}

func (w *bitWriter) writeBit(b bool) {
	if b {
		w.writeBits(1, 1)
	} else {
		w.writeBits(0, 1)
	}
}

// Buckets of writeVar: a prefix of ones ended by a zero (none for the
// last bucket) then the value in the bucket's width.
var varWidths = [...]uint{5, 9, 13, 20, 64}

// writeVar writes v in the smallest bucket of varWidths that holds it:
// 6 bits up to 31, 11 up to 511, 16 up to 8191, 24 up to about a
// million, 68 beyond.
func (w *bitWriter) writeVar(v uint64) {
	for i, width := range varWidths {
		last := i == len(varWidths)-1
		if last || v < 1<<width {
			if last {
				w.writeBits(1<<i-1, uint(i)) // i ones
			} else {
				w.writeBits(1<<(i+1)-2, uint(i+1)) // i ones and a zero
			}
			w.writeBits(v, width)
			return
		}
	}
}

// bitReader reads what a bitWriter wrote.
type bitReader struct {
	data []byte
	pos  uint // in bits
}

func (r *bitReader) readBits(n uint) (uint64, error) {
	if r.pos+n > uint(len(r.data))*8 {
		return 0, errShort
	}
	if n > 56 {
		hi, _ := r.readBits(n - 32)
		lo, _ := r.readBits(32)
		return hi<<32 | lo, nil
	}
	if n == 0 {
		return 0, nil
	}
	// Load the 8 bytes from the current one (zeros past the end), drop
	// the bits already read, keep the top n.
	i := r.pos / 8
	var w uint64
	if i+8 <= uint(len(r.data)) {
		w = binary.BigEndian.Uint64(r.data[i:])
	} else {
		var buf [8]byte
		copy(buf[:], r.data[i:])
		w = binary.BigEndian.Uint64(buf[:])
	}
	v := (w << (r.pos % 8)) >> (64 - n)
	r.pos += n
	return v, nil
}

// checkEnd refuses, with an error wrapping ErrCorrupt, what follows the
// last item of a chunk (a sample, a rollup) other than up to 7 zero bits
// of padding; padPrefix comes before "padding" in the error ("rollup ").
func (r *bitReader) checkEnd(item, padPrefix string) error {
	if pad := uint(len(r.data))*8 - r.pos; pad >= 8 {
		return fmt.Errorf("%w: %d bytes after the last %s", ErrCorrupt, pad/8, item)
	} else if v, _ := r.readBits(pad); v != 0 {
		return fmt.Errorf("%w: %spadding bits are not zero", ErrCorrupt, padPrefix)
	}
	return nil
}

func (r *bitReader) readBit() (bool, error) {
	b, err := r.readBits(1)
	return b == 1, err
}

func (r *bitReader) readVar() (uint64, error) {
	i := 0
	for ; i < len(varWidths)-1; i++ {
		one, err := r.readBit()
		if err != nil {
			return 0, err
		}
		if !one {
			break
		}
	}
	return r.readBits(varWidths[i])
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }
