package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/meshperf/meshperf/coordinator/series"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// LatestSample is one summary of a source node's newest stored report:
// the series' key and its sample.
type LatestSample struct {
	// Key names the series: Src probed Dst on Path with Kind.
	Key series.Key
	// Sample is the summary as a sample of the report's period.
	Sample series.Sample
}

// LatestSamples returns, for every source node whose newest report in
// the head (the reports not yet compacted into chunks) ends at or after
// since, that report's summaries of path and kind: the continuous mesh's
// last period as each node saw it, in (Src, Dst) ID order, one sample per
// pair at most. A source whose newest report ended before since (its
// agent gone quiet) has none; so has one whose reports were all
// compacted: the caller compacts only reports older than since
// (CompactSeries' before). It costs one cursor seek per source and the decoding of
// the newest report's summaries; path and kind must be valid (Path not
// unspecified, Kind not unspecified), else ErrInvalid. A limit above 0
// bounds the samples returned: one more is ErrLimit, and nothing is
// returned (a mesh too large to show whole).
func (s *Store) LatestSamples(ctx context.Context, path measurev1.Path, kind measurev1.ProbeKind, since time.Time, limit int) ([]LatestSample, error) {
	for _, err := range []error{series.ValidPath("path", path), series.ValidKind("kind", kind)} {
		if err != nil {
			return nil, fmt.Errorf("%w: latest samples: %w", ErrInvalid, err)
		}
	}
	srcs, err := s.seriesSources(ctx, bucketSeriesHead)
	if err != nil {
		return nil, err
	}
	pk := packPK(path, kind, measurev1.IPFamily_IP_FAMILY_IPV4) // the mesh view is IPv4's
	var out []LatestSample
	err = s.db.View(func(tx *bolt.Tx) error {
		names := tx.Bucket(bucketSeriesNodeIDs)
		name := func(id uint32) (string, error) {
			v := names.Get(binary.BigEndian.AppendUint32(nil, id))
			if v == nil {
				return "", fmt.Errorf("%w: series node id %d has no name", ErrCorrupt, id)
			}
			return string(v), nil
		}
		dsts := map[uint32]string{}
		c := tx.Bucket(bucketSeriesHead).Cursor()
		for _, src := range srcs {
			if err := ctx.Err(); err != nil {
				return err
			}
			// The newest key of src: the one before src+1's first.
			var k, v []byte
			if src == 1<<32-1 {
				k, v = c.Last()
			} else if k, _ = c.Seek(binary.BigEndian.AppendUint32(nil, src+1)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			if k == nil || !bytes.HasPrefix(k, binary.BigEndian.AppendUint32(nil, src)) {
				continue
			}
			h, err := parseHead(v)
			if err != nil {
				return err
			}
			if h.end().Before(since) {
				continue
			}
			srcName, err := name(src)
			if err != nil {
				return err
			}
			err = h.each(func(dst uint32, got byte, smp *series.Sample) error {
				if got != pk {
					return nil
				}
				dn, ok := dsts[dst]
				if !ok {
					if dn, err = name(dst); err != nil {
						return err
					}
					dsts[dst] = dn
				}
				if limit > 0 && len(out) == limit {
					return fmt.Errorf("%w: more than %d samples", ErrLimit, limit)
				}
				out = append(out, LatestSample{Key: series.Key{Src: srcName, Dst: dn, Path: path, Kind: kind}, Sample: *smp})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latest samples %v %v: %w", path, kind, err)
	}
	return out, nil
}
