package kafka

import "hash"

// Murmur2 is Kafka's murmur2 hash of a key, as its default partitioner (and franz-go's
// StickyKeyPartitioner) computes it.
func Murmur2(b []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for len(b) >= 4 {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		b = b[4:]
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// KeyPartition is the partition Kafka's default partitioner gives key among n partitions.
func KeyPartition(key []byte, n int) int32 {
	return int32(int(Murmur2(key)&0x7fffffff) % n)
}

// Murmur2Hasher makes goka place keys where Kafka's default partitioner does (pass it to
// goka.WithHasher and friends), so a goka group's tables, loopback and the source topics
// written by ordinary producers agree on every key's partition. Sum32 returns the positive
// murmur2 (goka negates negative sums, Kafka masks the sign bit; masking first makes both
// agree).
func Murmur2Hasher() hash.Hash32 { return &murmur2Hash{} }

type murmur2Hash struct{ buf []byte }

func (h *murmur2Hash) Write(p []byte) (int, error) { h.buf = append(h.buf, p...); return len(p), nil }
func (h *murmur2Hash) Sum(b []byte) []byte {
	s := h.Sum32()
	return append(b, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}
func (h *murmur2Hash) Reset()         { h.buf = h.buf[:0] }
func (h *murmur2Hash) Size() int      { return 4 }
func (h *murmur2Hash) BlockSize() int { return 4 }
func (h *murmur2Hash) Sum32() uint32  { return Murmur2(h.buf) & 0x7fffffff }
