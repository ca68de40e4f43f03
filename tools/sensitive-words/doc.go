// Package sensitivewords is the sensitive-word service (binary tools/sensitive-words/cmd/sensitive-words): a dictionary of
// words with categories and weights, searched in batches of texts over HTTP. The pipeline's
// ingest stage calls it through package moderation, its only client. Start with Server (New,
// Handler, Reload, Watch); Matcher is the search on its own.
//
// # Dictionary
//
// A UTF-8 TSV file, one entry per line, "word<TAB>category<TAB>weight"; see ParseDictionary.
// Words are normalized (see Normalize: width folding, case folding, and removal of spaces,
// punctuation and symbols), the same way as the texts, so "b l u e f i n", "B-L-U-E-F-I-N",
// "ｂｌｕｅｆｉｎ" and "BLUEFIN" all match the entry "bluefin", and "测 试 词" matches "测试词".
// deploy/sensitive-words/sample.tsv is a harmless sample.
//
// # Matching and scoring
//
// One Aho–Corasick automaton (github.com/petar-dambovaliev/aho-corasick, a DFA with standard,
// overlapping match semantics) runs over the normalized text's UTF-8 bytes. Every occurrence
// is a hit, overlapping ones included; its position is mapped back to the original text in
// runes. The risk score of a text is 1 − ∏(1 − weight) over the distinct entries found (0
// when none), rounded to 6 decimals; the verdict is BLOCK when score ≥ the block threshold
// (default 0.9), REVIEW when score ≥ the review threshold (default 0.4), else ALLOW.
//
// # HTTP API
//
// All bodies are JSON. When a token is configured, /v1/check and /debug/faults require
// "Authorization: Bearer <token>"; /healthz and /metrics never do.
//
// POST /v1/check, Content-Type: application/json:
//
//	{"items": [{"id": "r1", "text": "..."}, ...]}
//
// Every item needs a non-empty id (at most 256 bytes, unique in the request) and a "text"
// (which may be ""). Unknown fields are refused. The answer, 200:
//
//	{"items": [{"id": "r1", "riskScore": 0.5, "verdict": "REVIEW",
//	            "categories": ["demo-fraud"],
//	            "hits": [{"word": "bluefin", "category": "demo-fraud", "weight": 0.5,
//	                      "start": 3, "end": 10}]}],
//	 "dictionary": "3f2a9c0d41b7"}
//
// The fields:
//
//   - items: one per request item, in request order, with the request's id;
//   - riskScore: number in [0,1]; verdict: "ALLOW", "REVIEW" or "BLOCK";
//   - categories: the distinct categories found, sorted; [] when none;
//   - hits: each occurrence, ordered by start, then end; word is the dictionary's spelling;
//     start (inclusive) and end (exclusive) are offsets in runes (Unicode code points) into
//     the text as sent; [] when none. At most --max-hits-per-item (default 256) are listed,
//     but riskScore and categories count them all;
//   - dictionary: the version of the dictionary that answered, the first 12 hex digits of the
//     SHA-256 of its normalized entries. One request is answered by one dictionary, even
//     when a reload happens meanwhile.
//
// Errors, on every route, are {"error": "<message>", "code": "<snake_case>"}:
//
//	400 bad_request             malformed JSON, unknown field, data after the object, "items"
//	                            missing or null, an id missing, empty, longer than 256 bytes or
//	                            duplicated, a "text" missing
//	401 unauthorized            token configured and missing or wrong (WWW-Authenticate: Bearer)
//	404 not_found               unknown path; /debug/faults without --test-faults
//	405 method_not_allowed      other methods (Allow names the right ones)
//	413 too_many_items          more than --max-items items (default 1000)
//	413 body_too_large          body above --max-body-bytes (default 8 MiB)
//	415 unsupported_media_type  Content-Type not application/json
//
// With --test-faults only: 500/503 injected_fault, and 429 rate_limited with Retry-After: 1.
//
// GET /healthz answers 200 {"status": "ok", "dictionary": "<version>", "entries": N}.
//
// GET /metrics is the Prometheus text format (see metrics.go for the series).
//
// # Reloads
//
// SIGHUP (Server.Reload), and a change of the file's modification time, size or identity seen
// by Server.Watch (every 2 s), reload the dictionary: the new matcher is built off to the side
// and swapped in atomically. A file that does not parse is logged and counted
// (sensitive_words_dictionary_reloads_total{result="failed"}) and the old dictionary stays.
// Replace the file by renaming a complete new one over it, so that no poll sees half a file.
//
// # Test faults
//
// Only a server started with --test-faults (Config.TestFaults) can misbehave: a latency, a
// share of 500/503 answers, of 429 answers, of answers missing their last item, and of answers
// in reverse order (see Faults). They are set by --fault-* flags and changed at runtime with
//
//	POST /debug/faults  {"latency": "2s", "errorRate": 0, "rate429": 0,
//	                     "wrongCountRate": 0, "wrongOrderRate": 0}
//
// which replaces all of them (a field left out is 0) and answers the faults now in force, as
// does GET /debug/faults. Without --test-faults the route does not exist (404) and no fault
// code runs.
//
// # Logs
//
// log/slog: start-up, reloads, faults, and refused requests (route, status, code, reason).
// Texts are never logged.
package sensitivewords
