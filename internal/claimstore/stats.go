package claimstore

// Stats describes a store's size.
type Stats struct {
	Segments    int   // time segments on disk
	Keys        int   // keys indexed over all segments (a key rewritten in a later segment counts in each)
	Records     int   // value and deletion records
	DiskBytes   int64 // logs, indexes and filters
	MemoryBytes int64 // the active index and the filters
	Skipped     int64 // expired changelog records SetAt was not given (Update)
	// OpenScanned is the bytes of log Open read to rebuild the newest segment's index, and
	// OpenRebuiltUnion whether it rebuilt the union filter from the index files: both are
	// what a crash costs a reopen, and nothing after a clean Close.
	OpenScanned      int64
	OpenRebuiltUnion bool
}

// Stats reports the store's size.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Segments: len(s.segs), Skipped: s.skipped, OpenScanned: s.openScanned, OpenRebuiltUnion: s.openRebuiltUnion}
	for _, g := range s.segs {
		st.Keys += g.keyCount()
		st.Records += g.records
		st.DiskBytes += g.size + int64(len(g.buf))
		if g.idx != nil {
			st.MemoryBytes += int64(len(g.idx.slots)) * 8
		} else {
			st.DiskBytes += idxHeader + int64(g.mask+1)*8 + g.filter.bytes()
			st.MemoryBytes += g.filter.bytes()
		}
	}
	if s.union != nil {
		st.MemoryBytes += s.union.bytes()
	}
	return st
}
