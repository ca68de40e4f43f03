package pipelines_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/backflowhq/backflow/avro"
	"github.com/backflowhq/backflow/pipelines"
	"github.com/backflowhq/backflow/sinks/clickhouse/chschema"
	"github.com/backflowhq/backflow/test/pipelinetest"
	"github.com/backflowhq/backflow/test/testenv"
)

// TestProtobufStreamEndToEnd: the shop-order example (deploy/streams/shop-order.proto, which
// references shop-common.proto under a subject of its own) is a declared stream like an Avro
// one, on the real registry, Kafka and ClickHouse. Its table is derived from the message
// (imported and nested messages, a repeated message, a map, a oneof, an optional scalar, a
// wrapper, a Struct, a Timestamp); each order is one row of v_shop_order with the values
// sent, a duplicate key collapsing to its latest record; v2 (a field and an enum value
// added), registered under BACKWARD while the stage runs, adds the column and extends the
// enum, and v1 records sent after it get the new field's zero value; a body that does not
// parse, an unknown schema id and an enum number the schema lacks are each dead-lettered
// once with their class; every offset is committed.
func TestProtobufStreamEndToEnd(t *testing.T) {
	env := pipelinetest.NewEnv(t, "spb")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, conn := env.Database(t, ctx, "")
	topic, group, dlqTopic := "shop-"+env.ID, "stream-shop-"+env.ID, "sdlq-"+env.ID
	subject, common := topic+"-value", "shop-common-"+env.ID
	testenv.Topics(t, ctx, env.Kafka, 1, topic, dlqTopic) // one partition: the offsets are the send order
	testenv.Groups(t, env.Kafka, group)
	testenv.Subjects(t, env.Registry, subject, common)

	text := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "deploy", "streams", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if _, err := env.Registry.CreateSchema(ctx, common, sr.Schema{Schema: text("shop-common.proto"), Type: sr.TypeProtobuf}); err != nil {
		t.Fatalf("register shop-common.proto: %v", err)
	}
	if r := env.Registry.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject); len(r) != 1 || r[0].Err != nil {
		t.Fatalf("set %s's compatibility to BACKWARD: %+v", subject, r)
	}
	// register registers a version of the order schema and compiles it as its producer does.
	register := func(name string) (protoreflect.MessageDescriptor, int) {
		t.Helper()
		ss, err := env.Registry.CreateSchema(ctx, subject, sr.Schema{Schema: text(name), Type: sr.TypeProtobuf,
			References: []sr.SchemaReference{{Name: "shop-common.proto", Subject: common, Version: 1}}})
		if err != nil {
			t.Fatalf("register %s under %s (BACKWARD): %v", name, subject, err)
		}
		c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{"shop-common.proto": text("shop-common.proto"), name: text(name)})})}
		files, err := c.Compile(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return files[0].Messages().ByName("Order"), ss.ID
	}
	prod, err := env.Kafka.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	var h sr.ConfluentHeader
	produce := func(value []byte) {
		t.Helper()
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	send := func(md protoreflect.MessageDescriptor, id int, orders ...string) {
		t.Helper()
		for _, js := range orders {
			m := dynamicpb.NewMessage(md)
			if err := protojson.Unmarshal([]byte(js), m); err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			body, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			value, _ := h.AppendEncode(nil, id, []int{0})
			produce(append(value, body...))
		}
	}
	order := func(n int, status, extra string) string {
		return fmt.Sprintf(`{"orderId": "o%d", "created": "2026-12-0%dT10:00:00Z", "customer": {"id": "c%d", "tier": "gold"},
			"items": [{"sku": "s%d", "qty": %d, "price": 2.5}], "counters": {"views": "%d"}, "status": %q, "tags": ["t"]%s}`, n, n, n, n, n, 10*n, status, extra)
	}

	v1, id1 := register("shop-order.proto")
	send(v1, id1, order(1, "PAID", `, "card": "visa"`), order(2, "PAID", `, "voucher": {"code": "V2"}, "priority": 3`),
		order(3, "PAID", `, "note": "n3", "extra": {"k": "v"}`), order(2, "SHIPPED", `, "voucher": {"code": "V2"}, "priority": 3`))
	// Poison, one of each class: a body that does not parse, an unknown schema id, an enum
	// number the schema does not declare (status = 9).
	garbage, _ := h.AppendEncode(nil, id1, []int{0})
	produce(append(garbage, 0x0a, 0xff, 0xff))
	unknown, _ := h.AppendEncode(nil, 987654321, []int{0})
	produce(append(unknown, 0x0a, 0x01, 0x78))
	badEnum, _ := h.AppendEncode(nil, id1, []int{0})
	produce(append(badEnum, 0x0a, 0x02, 0x6f, 0x39, 0x30, 0x09))
	poison := map[int64]string{4: avro.ClassCorrupt, 5: avro.ClassUnknownSchema, 6: avro.ClassInvalid}

	st := oneStream{name: "shop-order", topic: topic, group: group, dedupeKey: "order_id", eventTime: "created"}
	run := runOneStream(t, ctx, env, st, dlqTopic)
	rows := "SELECT concat(order_id, ' ', toString(toUnixTimestamp(created)), ' ', customer_id, ' ', toString(items_qty), ' ', toString(counters_keys), " +
		"toString(counters_values), ' ', toString(status), ' ', ifNull(card, '-'), ' ', ifNull(voucher_code, '-'), ' ', ifNull(toString(priority), '-'), ' ', " +
		"ifNull(note, '-'), ' ', extra, ' ', toString(_offset)%s) FROM v_shop_order ORDER BY order_id"
	day := func(n int) int64 { return time.Date(2026, 12, n, 10, 0, 0, 0, time.UTC).Unix() }
	want := []string{
		fmt.Sprintf("o1 %d c1 [1] ['views'][10] PAID visa - - -  0", day(1)),
		fmt.Sprintf("o2 %d c2 [2] ['views'][20] SHIPPED - V2 3 -  3", day(2)), // the duplicate key's latest record
		fmt.Sprintf("o3 %d c3 [3] ['views'][30] PAID - - - n3 {\"k\":\"v\"} 2", day(3)),
	}
	if got := queryStrings(t, ctx, conn, fmt.Sprintf(rows, "")); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("v1 rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// v2 while the stage runs: channel added, REFUNDED appended to the enum.
	v2, id2 := register("shop-order.v2.proto")
	// What `migrate --dry-run` plans for it (the subject's latest schema, as the stage reads
	// it), before any v2 record arrives.
	latest, latestID, err := pipelines.LatestSchema(ctx, env.Registry, chschema.StreamConfig{Subject: subject})
	if err != nil || latestID != id2 {
		t.Fatalf("latest schema: id %d (%v), want %d", latestID, err, id2)
	}
	plan, err := chschema.PlanStream(ctx, conn, chschema.StreamConfig{Name: "shop-order", Topic: topic, Group: group, DedupeKey: "order_id", EventTime: "created"}, latest, id2, chschema.Capabilities{})
	if err != nil || plan.Change() != "add columns channel; modify columns status" || plan.Version != 2 {
		t.Fatalf("v2's plan: %q as version %d (%v), want %q as version 2", plan.Change(), plan.Version, err, "add columns channel; modify columns status")
	}
	send(v2, id2, order(7, "REFUNDED", `, "channel": "web"`))
	send(v1, id1, order(8, "PAID", ""))
	testenv.WaitCommitted(t, run.Context(), env.Admin, group, topic)
	want = append(want,
		fmt.Sprintf("o7 %d c7 [7] ['views'][70] REFUNDED - - - -  7 web", day(7)),
		fmt.Sprintf("o8 %d c8 [8] ['views'][80] PAID - - - -  8 ", day(8))) // v1 after v2: the zero value
	for i := range 3 {
		want[i] += " " // rows written before v2: the column's default
	}
	if got := queryStrings(t, ctx, conn, fmt.Sprintf(rows, ", ' ', channel")); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows after v2:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkStreamEnd(t, ctx, env, conn, st, dlqTopic, []string{fmt.Sprintf("1 %d: create", id1), fmt.Sprintf("2 %d: add columns channel; modify columns status", id2)}, poison, 9)
	run.Stop()
}
