package sensitivewords

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Entry is one dictionary word.
type Entry struct {
	// Word is the word as the file spells it (trimmed); hits report it.
	Word string
	// Key is Normalize(Word), what the matcher searches for.
	Key string
	// Category groups words, e.g. "demo-fraud". Hits and metrics report it.
	Category string
	// Weight in (0,1] is how strongly one occurrence indicates a problem; see Score.
	Weight float64
}

// Dictionary is a parsed dictionary file: entries with distinct keys, sorted by key.
type Dictionary struct {
	Entries []Entry
	// Version identifies the normalized content: the first 12 hex digits of the SHA-256 of
	// the sorted "key<TAB>category<TAB>weight" lines. Comments, blank lines, line order and
	// spellings that normalize alike do not change it.
	Version string
}

// categoryRE: a category is a short label (it becomes a Prometheus label value).
var categoryRE = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N}_.:-]{0,63}$`)

// maxLineBytes bounds one dictionary line.
const maxLineBytes = 64 * 1024

// LoadDictionary reads and parses the dictionary file at path (see ParseDictionary).
func LoadDictionary(path string) (*Dictionary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &DictionaryError{Path: path, Err: err}
	}
	defer f.Close()
	return ParseDictionary(f, path)
}

// ParseDictionary parses a dictionary in TSV form, one entry per line:
//
//	word<TAB>category<TAB>weight
//
// Fields are trimmed of surrounding spaces; a word may contain inner spaces ("paper tiger").
// Blank lines and lines whose first non-space character is '#' are skipped. The weight is a
// decimal number in (0,1]. Words that normalize alike are one entry: the one with the highest
// weight wins (the first on a tie). Any bad line makes the whole file an error that names the
// line (a *DictionaryError wrapping ErrDictionary); so does a file without entries
// (ErrEmptyDictionary). name is used in errors only.
func ParseDictionary(r io.Reader, name string) (*Dictionary, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	byKey := map[string]int{} // key → index in entries
	var entries []Entry
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff") // a BOM some editors write
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		e, err := parseLine(text)
		if err != nil {
			return nil, &DictionaryError{Path: name, Line: line, Err: err}
		}
		if i, ok := byKey[e.Key]; ok {
			if e.Weight > entries[i].Weight {
				entries[i] = e
			}
			continue
		}
		byKey[e.Key] = len(entries)
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &DictionaryError{Path: name, Line: line + 1, Err: fmt.Errorf("%w: line longer than %d bytes", ErrDictionary, maxLineBytes)}
		}
		return nil, &DictionaryError{Path: name, Err: err}
	}
	if len(entries) == 0 {
		return nil, &DictionaryError{Path: name, Err: ErrEmptyDictionary}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	return &Dictionary{Entries: entries, Version: version(entries)}, nil
}

func parseLine(text string) (Entry, error) {
	fields := strings.Split(text, "\t")
	if len(fields) != 3 {
		return Entry{}, fmt.Errorf("%w: %d tab-separated fields, want 3 (word, category, weight)", ErrDictionary, len(fields))
	}
	word := strings.TrimSpace(fields[0])
	category := strings.TrimSpace(fields[1])
	weightText := strings.TrimSpace(fields[2])
	key := Normalize(word)
	if key == "" {
		return Entry{}, fmt.Errorf("%w: word %q has no letters or digits", ErrDictionary, word)
	}
	if !categoryRE.MatchString(category) {
		return Entry{}, fmt.Errorf("%w: category %q, want a letter or digit, then up to 63 letters, digits or _.:-", ErrDictionary, category)
	}
	weight, err := strconv.ParseFloat(weightText, 64)
	if err != nil || math.IsNaN(weight) || weight <= 0 || weight > 1 {
		return Entry{}, fmt.Errorf("%w: weight %q, want a number in (0,1]", ErrDictionary, weightText)
	}
	return Entry{Word: word, Key: key, Category: category, Weight: weight}, nil
}

// version hashes the normalized entries (sorted by key).
func version(entries []Entry) string {
	var buf bytes.Buffer
	for _, e := range entries {
		buf.WriteString(e.Key)
		buf.WriteByte('\t')
		buf.WriteString(e.Category)
		buf.WriteByte('\t')
		buf.WriteString(strconv.FormatFloat(e.Weight, 'g', -1, 64))
		buf.WriteByte('\n')
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:6])
}
