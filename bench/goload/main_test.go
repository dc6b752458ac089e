package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	capgatev1 "github.com/capgate/capgate/clients/go/capgatev1"
	"google.golang.org/protobuf/proto"
)

func TestPercentileIsNearestRank(t *testing.T) {
	values := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	cases := map[float64]float64{0.5: 5, 0.9: 9, 0.99: 10, 0.01: 1}
	for q, want := range cases {
		if got := percentile(values, q); got != want {
			t.Errorf("percentile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("empty percentile = %v, want 0", got)
	}
}

func TestDriveCountsErrorsAndBadAnswersAndStopsAtTheCount(t *testing.T) {
	n := 0
	c := func(context.Context) (bool, error) {
		n++
		switch n % 3 {
		case 0:
			return false, errors.New("boom")
		case 1:
			return true, nil
		}
		return false, nil
	}
	r := drive(c, 1, 30, 10)
	if r.Calls != 20 || r.Errors != 10 || r.Bad != 10 {
		t.Fatalf("calls %d errors %d bad %d, want 20 10 10", r.Calls, r.Errors, r.Bad)
	}
	if r.FirstError != "boom" {
		t.Fatalf("first error %q", r.FirstError)
	}
}

func TestCheckerDecodesEachAnswerKind(t *testing.T) {
	allow, _ := proto.Marshal(&capgatev1.CheckResponse{Decision: capgatev1.Decision_DECISION_ALLOW})
	deny, _ := proto.Marshal(&capgatev1.CheckResponse{Decision: capgatev1.Decision_DECISION_DENY})
	check, err := checker("check", json.RawMessage(`1`))
	if err != nil {
		t.Fatal(err)
	}
	if !check(allow) || check(deny) || check([]byte{0xff}) {
		t.Fatal("check: allow must pass, deny and garbage must not")
	}
	if _, err := checker("nope", nil); err == nil {
		t.Fatal("an unknown check must be refused")
	}
	if _, err := checker("invoke", json.RawMessage(`"failed"`)); err == nil {
		t.Fatal("invoke supports expect=completed only")
	}
}

func TestBadJobsAreReportedNotRun(t *testing.T) {
	for line, want := range map[string]string{
		`not json`: "not JSON",
		`{"kind":"unary","target":"10.1.2.3:80","concurrency":1,"count":1,"seconds":1}`:        "loopback",
		`{"kind":"http","host":"example.com","port":80,"concurrency":1,"count":1,"seconds":1}`: "loopback",
		`{"kind":"unary","target":"127.0.0.1:1","concurrency":0,"count":1,"seconds":1}`:        "positive",
		`{"kind":"stream","concurrency":1,"count":1,"seconds":1}`:                              "unknown job kind",
	} {
		got, ok := run([]byte(line)).(map[string]string)
		if !ok || !strings.Contains(got["failed"], want) {
			t.Errorf("%s: got %v, want a failure naming %q", line, got, want)
		}
	}
}

func TestHTTPJobAgainstALoopbackServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"result":{"allow":true}}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	line, _ := json.Marshal(map[string]any{
		"kind": "http", "host": "127.0.0.1", "port": port, "path": "/v1/data/x",
		"body": `{"input":{}}`, "expect": `"allow"`, "concurrency": 4, "count": 200,
		"seconds": 10, "warmup": 10,
	})
	r, ok := run(line).(result)
	if !ok {
		t.Fatalf("job failed: %v", run(line))
	}
	if r.Calls != 200 || r.Errors != 0 || r.Bad != 0 || r.WarmupCalls != 10 {
		t.Fatalf("calls %d errors %d bad %d warm-up %d", r.Calls, r.Errors, r.Bad, r.WarmupCalls)
	}
}
