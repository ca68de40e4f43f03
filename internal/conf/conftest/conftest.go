// Package conftest is the table test of a Validate method, which every package's config test
// shares: each row a value, and either nothing wrong or the error it must report (and the
// field it must name). Production code never imports it.
package conftest

import (
	"strings"
	"testing"

	"github.com/backflowhq/backflow/internal/conf"
)

// Case is one row.
type Case[C any] struct {
	Name   string
	Config C
	// WantErr is "" for a valid value, else a substring of the error Validate must return.
	WantErr string
	// Field, when set, is the Go field path (as in conf.FieldError) the error saying WantErr
	// must be about, so that a loader reports it at that field's key.
	Field string
}

// Validate runs Validate on each case's Config in a subtest, and fails when a valid value is
// refused, a bad one accepted, the error does not say WantErr or is about another field, or
// an error shows any of hide (the secrets used in the cases).
func Validate[C interface{ Validate() error }](t *testing.T, cases []Case[C], hide ...string) {
	t.Helper()
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Config.Validate()
			if tc.WantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.WantErr) {
				t.Fatalf("Validate() = %v, want an error saying %q", err, tc.WantErr)
			}
			for _, h := range hide {
				if strings.Contains(err.Error(), h) {
					t.Fatalf("the error shows a secret (%q): %v", h, err)
				}
			}
			if tc.Field == "" {
				return
			}
			var fields []string
			for _, fe := range conf.Fields(err) {
				if strings.Contains(fe.Error(), tc.WantErr) {
					if fe.Field == tc.Field {
						return
					}
					fields = append(fields, fe.Field)
				}
			}
			t.Fatalf("the error saying %q is about field(s) %q, want %q", tc.WantErr, fields, tc.Field)
		})
	}
}
