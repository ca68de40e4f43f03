package clickhouse

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/backflowhq/backflow/internal/dlq"
	"github.com/backflowhq/backflow/internal/secure"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
)

var (
	// ErrClickHouseRejected marks a record ClickHouse (or the driver's type conversion)
	// refused on its own merits; it goes to the DLQ once, with class ClassRejected.
	ErrClickHouseRejected = errors.New("clickhouse: record rejected")
	// ErrClickHouseFatal marks an error no retry and no DLQ can fix: a missing table or
	// column, a wrong password, a read-only user. The sink stops without committing.
	ErrClickHouseFatal = errors.New("clickhouse: fatal")
)

// ClassRejected is the DLQ class of records ClickHouse refused (ErrClickHouseRejected).
const ClassRejected = "clickhouse_rejected"

func init() {
	dlq.RegisterClass(ClassRejected, "ClickHouse refused the record's row (a value it cannot store)")
}

// ClickHouse server error codes the sink tells apart (ErrorCodes.cpp).
const (
	codeNoSuchColumnInTable   = 16
	codeCannotParseText       = 6
	codeCannotParseDate       = 38
	codeCannotParseDateTime   = 41
	codeCannotParseNumber     = 72
	codeTypeMismatch          = 53
	codeUnknownTable          = 60
	codeUnknownDatabase       = 81
	codeTooManyParts          = 252
	codeTimeoutExceeded       = 159
	codeMemoryLimitExceeded   = 241
	codeTooManySimultaneous   = 202
	codeSocketTimeout         = 209
	codeNetworkError          = 210
	codeTableIsReadOnly       = 242
	codeReadonly              = 164
	codeAllConnectionTriesBad = 279
	codeNoFreeConnection      = 203
	codeKeeperException       = 999
	codeUnknownUser           = 192
	codeWrongPassword         = 193
	codeRequiredPassword      = 194
	codeAuthenticationFailed  = 516
	codeAccessDenied          = 497
	codeNotEnoughSpace        = 243
	codeCannotWriteToFile     = 75
	codeAbortedQuery          = 394
	codeThereIsNoColumn       = 8
	codeIllegalColumn         = 44
	codeValueOutOfRange       = 69
	codeTooLargeStringSize    = 131
)

// IsRetryable reports whether err is an outage that a later attempt can get past: the sink
// backs off, stops polling Kafka, and retries the same flush. Everything else is permanent;
// see IsRejected and IsFatal for what then happens.
//
//   - network errors (refused, reset, EOF, DNS, dial and read timeouts): ClickHouse is down,
//     restarting or unreachable;
//   - context.DeadlineExceeded from a per-attempt timeout: the server is slow (a parent context
//     that ended is not retryable: the sink is stopping);
//   - codes 252 TOO_MANY_PARTS (merges lag behind inserts), 159 TIMEOUT_EXCEEDED, 241
//     MEMORY_LIMIT_EXCEEDED, 202 TOO_MANY_SIMULTANEOUS_QUERIES, 209 SOCKET_TIMEOUT, 210
//     NETWORK_ERROR, 203 NO_FREE_CONNECTION, 279 ALL_CONNECTION_TRIES_FAILED, 242
//     TABLE_IS_READ_ONLY (replica lost ZooKeeper), 243 NOT_ENOUGH_SPACE, 999 KEEPER_EXCEPTION,
//     394 QUERY_WAS_CANCELLED (server shutting down): load or a transient server state;
//   - code 75 CANNOT_WRITE_TO_FILE_DESCRIPTOR: the server could not write a part to its disk.
//     18.16 reports a full disk so ("errno: 28, strerror: No space left on device") where
//     current servers say 243; the rows wait until there is room, as they do for 243;
//   - the driver's acquire-connection timeout and closed connection.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var ex *ch.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeTooManyParts, codeTimeoutExceeded, codeMemoryLimitExceeded, codeTooManySimultaneous,
			codeSocketTimeout, codeNetworkError, codeNoFreeConnection, codeAllConnectionTriesBad,
			codeTableIsReadOnly, codeNotEnoughSpace, codeCannotWriteToFile, codeKeeperException, codeAbortedQuery:
			return true
		}
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false // the sink is stopping
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ch.ErrAcquireConnTimeout) ||
		errors.Is(err, ch.ErrConnectionClosed) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true // *net.OpError, *net.DNSError, timeouts
	}
	var op *ch.OpError // has no Unwrap: look inside by hand
	if errors.As(err, &op) && op.Err != nil && op.Err != err {
		return IsRetryable(op.Err)
	}
	return false
}

// IsRejected reports whether err is about the data of one record, so that the record alone goes
// to the DLQ (once) and the sink carries on: the driver could not convert a value to its
// column's type (*column.ColumnConverterError, *column.Error), or the server answered 53
// TYPE_MISMATCH, 6/38/41/72 CANNOT_PARSE_*, 69 VALUE_IS_OUT_OF_RANGE, 131 TOO_LARGE_STRING_SIZE.
// The sink finds the record by inserting a failed batch's rows one at a time.
func IsRejected(err error) bool {
	if errors.Is(err, ErrClickHouseRejected) {
		return true
	}
	var conv *column.ColumnConverterError
	var colErr *column.Error
	if errors.As(err, &conv) || errors.As(err, &colErr) {
		return true
	}
	var op *ch.OpError // has no Unwrap: look inside by hand
	if errors.As(err, &op) {
		switch op.Err.(type) {
		case *column.ColumnConverterError, *column.Error:
			return true
		}
	}
	var ex *ch.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeTypeMismatch, codeCannotParseText, codeCannotParseDate, codeCannotParseDateTime,
			codeCannotParseNumber, codeValueOutOfRange, codeTooLargeStringSize:
			return true
		}
	}
	return false
}

// IsAuthError reports whether err means ClickHouse refused who we are, or our TLS setup: 192
// UNKNOWN_USER, 193 WRONG_PASSWORD, 194 REQUIRED_PASSWORD, 516 AUTHENTICATION_FAILED, 497
// ACCESS_DENIED, or a failed TLS handshake (untrusted certificate, a plaintext port). At
// start-up a stage stops on these with the settings to check (mid-run, IsFatal stops the sink
// on the codes; a TLS failure mid-run is retried like the network error it arrives as).
func IsAuthError(err error) bool {
	var ex *ch.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeUnknownUser, codeWrongPassword, codeRequiredPassword, codeAuthenticationFailed, codeAccessDenied:
			return true
		}
		return false
	}
	return secure.IsTLSError(err)
}

// IsFatal reports whether err is a deployment error that no retry and no DLQ fixes: 60
// UNKNOWN_TABLE, 81 UNKNOWN_DATABASE, 16 NO_SUCH_COLUMN_IN_TABLE, 8 THERE_IS_NO_COLUMN, 44
// ILLEGAL_COLUMN (migrations not applied, or applied to another database), 192/193/194/516
// authentication, 164 READONLY and 497 ACCESS_DENIED (grants). Sending every record to the DLQ
// for these would empty the stream into it; the sink stops with the error instead, commits
// nothing, and resumes where it stopped once fixed. Any other server exception that is neither
// retryable nor rejected is treated as fatal too, and so is a table the schema engine finds
// missing (chschema.ErrMissingTable).
func IsFatal(err error) bool {
	if errors.Is(err, ErrClickHouseFatal) || errors.Is(err, chschema.ErrMissingTable) {
		return true
	}
	var ex *ch.Exception
	if errors.As(err, &ex) {
		return !IsRetryable(err) && !IsRejected(err)
	}
	return false
}
