// Package envfile reads the KEY=VALUE files that deploy/local/stack writes (.stack/env), so
// tests and the backflow binary see the same addresses a shell gets from `. .stack/env`.
package envfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Parse reads KEY=VALUE lines. Blank lines and lines starting with # are skipped; an optional
// leading "export " is dropped, and one pair of matching quotes around a value is removed.
// A line without '=' is an error naming its line number.
func Parse(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("envfile: line %d: %q is not KEY=VALUE", n, line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("envfile: %w", err)
	}
	return out, nil
}

// Load parses the file at path.
func Load(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("envfile: %w", err)
	}
	defer f.Close()
	vals, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return vals, nil
}

// Apply loads the file at path into the process's environment: each variable the environment
// does not set already (a variable set there wins over the file).
func Apply(path string) error {
	vals, err := Load(path)
	if err != nil {
		return err
	}
	for k, v := range vals {
		if _, set := os.LookupEnv(k); !set {
			if err := os.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}
