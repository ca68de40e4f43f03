package kafka

import (
	"strings"
	"testing"
	"time"
)

func TestMembershipSettings(t *testing.T) {
	tests := []struct {
		name        string
		conn        Conn
		wantID      string
		wantSession time.Duration // sarama's; franz-go's the same when set
		wantOpts    int
	}{
		{name: "dynamic keeps sarama's default", conn: Conn{Brokers: []string{"k:9092"}}, wantSession: 10 * time.Second, wantOpts: 0},
		{name: "static takes 45s", conn: Conn{Brokers: []string{"k:9092"}, InstanceID: "backflow-ingest-0"}, wantID: "backflow-ingest-0", wantSession: StaticSessionTimeout, wantOpts: 3},
		{name: "an explicit timeout wins", conn: Conn{Brokers: []string{"k:9092"}, InstanceID: "slot-2", SessionTimeout: 2 * time.Minute}, wantID: "slot-2", wantSession: 2 * time.Minute, wantOpts: 3},
		{name: "dynamic with a timeout", conn: Conn{Brokers: []string{"k:9092"}, SessionTimeout: 20 * time.Second}, wantSession: 20 * time.Second, wantOpts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.conn.Validate(); err != nil {
				t.Fatal(err)
			}
			sc := tt.conn.Sarama()
			if sc.Consumer.Group.InstanceId != tt.wantID {
				t.Errorf("sarama instance id %q, want %q", sc.Consumer.Group.InstanceId, tt.wantID)
			}
			if sc.Consumer.Group.Session.Timeout != tt.wantSession {
				t.Errorf("sarama session timeout %v, want %v", sc.Consumer.Group.Session.Timeout, tt.wantSession)
			}
			if hb := sc.Consumer.Group.Heartbeat.Interval; hb <= 0 || hb >= sc.Consumer.Group.Session.Timeout/3 {
				t.Errorf("heartbeat %v for a session of %v", hb, sc.Consumer.Group.Session.Timeout)
			}
			if err := sc.Validate(); err != nil {
				t.Errorf("sarama refuses the config: %v", err)
			}
			if n := len(tt.conn.GroupOpts()); n != tt.wantOpts {
				t.Errorf("%d franz-go group options, want %d", n, tt.wantOpts)
			}
		})
	}
}

func TestMembershipValidate(t *testing.T) {
	tests := []struct {
		name    string
		conn    Conn
		wantErr string
	}{
		{name: "a space", conn: Conn{InstanceID: "pod 0"}, wantErr: "instance id: \"pod 0\": only letters"},
		{name: "dot", conn: Conn{InstanceID: ".."}, wantErr: "instance id: \"..\" is not allowed"},
		{name: "too long", conn: Conn{InstanceID: strings.Repeat("a", 250)}, wantErr: "250 characters, at most 249"},
		{name: "timeout too short", conn: Conn{SessionTimeout: time.Second}, wantErr: "session timeout: 1s is outside 6s..30m0s"},
		{name: "timeout too long", conn: Conn{SessionTimeout: time.Hour}, wantErr: "session timeout: 1h0m0s is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.conn.Brokers = []string{"k:9092"}
			err := tt.conn.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
