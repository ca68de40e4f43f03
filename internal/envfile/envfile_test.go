package envfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "stack file", in: "# generated\nBACKFLOW_KAFKA_BROKERS=127.0.0.1:19092,127.0.0.1:19192\n\nBACKFLOW_REDIS_ADDR=127.0.0.1:16379\n",
			want: map[string]string{"BACKFLOW_KAFKA_BROKERS": "127.0.0.1:19092,127.0.0.1:19192", "BACKFLOW_REDIS_ADDR": "127.0.0.1:16379"}},
		{name: "export and quotes", in: "export A=\"x y\"\nB='z'\nC=\"unbalanced\n",
			want: map[string]string{"A": "x y", "B": "z", "C": "\"unbalanced"}},
		{name: "value with equals", in: "URL=http://h/p?a=b\n", want: map[string]string{"URL": "http://h/p?a=b"}},
		{name: "no equals", in: "A=1\njunk\n", wantErr: "line 2"},
		{name: "empty key", in: "=v\n", wantErr: "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
