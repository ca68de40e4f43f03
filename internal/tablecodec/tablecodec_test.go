package tablecodec

import (
	"testing"
	"unsafe"
)

// TestStringInAllocatesOnce: a string read through an Interner a second time is the same copy,
// read without an allocation, and reads as String would.
func TestStringInAllocatesOnce(t *testing.T) {
	w := NewWriter('x', 64)
	w.String("gateway-log/RESPONSE")
	w.String("gateway-log/RESPONSE")
	var in Interner
	r, _, err := NewReader(w.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.StringIn(&in), r.StringIn(&in)
	if a != "gateway-log/RESPONSE" || b != a || unsafe.StringData(a) != unsafe.StringData(b) || r.Err() != nil {
		t.Fatalf("read %q and %q (%v)", a, b, r.Err())
	}
	data := w.Bytes()
	if n := testing.AllocsPerRun(100, func() {
		r, _, _ := NewReader(data)
		r.StringIn(&in)
	}); n > 1 { // the reader itself
		t.Fatalf("%.0f allocations per read of an interned string", n)
	}
}
