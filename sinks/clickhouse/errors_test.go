package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
)

func TestErrorClasses(t *testing.T) {
	exc := func(code int32) error {
		return fmt.Errorf("insert: %w", &ch.Exception{Code: code, Name: "DB::Exception", Message: "x"})
	}
	tests := []struct {
		name                       string
		err                        error
		retryable, rejected, fatal bool
	}{
		{"nil", nil, false, false, false},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true, false, false},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true, false, false},
		{"eof", fmt.Errorf("send: %w", io.EOF), true, false, false},
		{"dns", &net.DNSError{Err: "no such host", Name: "ch"}, true, false, false},
		{"attempt timed out", fmt.Errorf("send: %w", context.DeadlineExceeded), true, false, false},
		{"stopping", fmt.Errorf("send: %w", context.Canceled), false, false, false},
		{"acquire conn timeout", ch.ErrAcquireConnTimeout, true, false, false},
		{"TOO_MANY_PARTS", exc(252), true, false, false},
		{"TIMEOUT_EXCEEDED", exc(159), true, false, false},
		{"MEMORY_LIMIT_EXCEEDED", exc(241), true, false, false},
		{"TOO_MANY_SIMULTANEOUS_QUERIES", exc(202), true, false, false},
		{"NETWORK_ERROR", exc(210), true, false, false},
		{"TABLE_IS_READ_ONLY", exc(242), true, false, false},
		{"NOT_ENOUGH_SPACE", exc(243), true, false, false},
		// Regression (fault suite #21): 18.16 reports a full disk as code 75 with errno 28, and
		// the sink stopped with exit 1 instead of waiting for room.
		{"full disk on 18.16", fmt.Errorf("insert moderation_hits: %w", &ch.Exception{Code: 75, Name: "DB::Exception",
			Message: "Cannot write to file /var/lib/clickhouse/data/tmp_insert_202612_2_2_0/minmax_event_time.idx, errno: 28, strerror: No space left on device"}), true, false, false},
		{"TYPE_MISMATCH", exc(53), false, true, false},
		{"CANNOT_PARSE_TEXT", exc(6), false, true, false},
		{"driver conversion", &ch.OpError{Op: "AppendStruct", ColumnName: "x", Err: &column.ColumnConverterError{Op: "Append", From: "string", To: "UInt8"}}, false, true, false},
		{"our rejection", fmt.Errorf("%w: row 3: bad", ErrClickHouseRejected), false, true, false},
		{"UNKNOWN_TABLE", exc(60), false, false, true},
		{"UNKNOWN_DATABASE", exc(81), false, false, true},
		{"NO_SUCH_COLUMN_IN_TABLE", exc(16), false, false, true},
		{"AUTHENTICATION_FAILED", exc(516), false, false, true},
		{"unknown code", exc(1), false, false, true},
		{"plain error", errors.New("something"), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsRetryable(tt.err); got != tt.retryable {
				t.Errorf("IsRetryable = %v, want %v", got, tt.retryable)
			}
			if got := tt.err != nil && IsRejected(tt.err); got != tt.rejected {
				t.Errorf("IsRejected = %v, want %v", got, tt.rejected)
			}
			if got := tt.err != nil && IsFatal(tt.err); got != tt.fatal {
				t.Errorf("IsFatal = %v, want %v", got, tt.fatal)
			}
		})
	}
}
