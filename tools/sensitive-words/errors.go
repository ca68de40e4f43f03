package sensitivewords

import (
	"errors"
	"fmt"
)

var (
	// ErrDictionary: a dictionary file cannot be used: a line that is not
	// word<TAB>category<TAB>weight, a weight outside (0,1], a word that normalizes to nothing,
	// or a bad category. The *DictionaryError that wraps it names the file and the line.
	ErrDictionary = errors.New("sensitive: bad dictionary")
	// ErrEmptyDictionary: the dictionary file has no entries. It is refused rather than served,
	// so a file truncated while being rewritten never turns the service into one that allows
	// everything.
	ErrEmptyDictionary = errors.New("sensitive: dictionary has no entries")
	// ErrConfig: a Config field has a bad value; the error names the field and the value.
	ErrConfig = errors.New("sensitive: bad config")
	// ErrFaultsDisabled: fault injection was asked for on a server built without
	// Config.TestFaults. Faults exist only for tests of the pipeline's error handling.
	ErrFaultsDisabled = errors.New("sensitive: test faults are disabled")
)

// DictionaryError says where a dictionary file is wrong. It wraps ErrDictionary or
// ErrEmptyDictionary, or the error of reading the file.
type DictionaryError struct {
	Path string // the file, as given
	Line int    // 1-based line number; 0 when the error is about the whole file
	Err  error
}

func (e *DictionaryError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("dictionary %s line %d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("dictionary %s: %v", e.Path, e.Err)
}

func (e *DictionaryError) Unwrap() error { return e.Err }
