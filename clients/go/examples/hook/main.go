// Command hook runs the reference governance hooks in Go (the Python twin:
// examples/hooks/reference.py; docs/hooks.md):
//
//   - standing (PreInvoke): the standing of the customer an order belongs to, as context
//     attributes in_arrears (boolean) and tier (string) for policies; it never decides itself.
//   - dlp (PostInvoke): e-mail addresses and card-number-like digit runs in any string of the
//     output replaced by a marker (updated_output, validated and redacted by the gateway).
//
// go run ./examples/hook -address 127.0.0.1:7450 prints "listening <port>" once it serves.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"google.golang.org/grpc"

	capgatev1 "github.com/capgate/capgate/clients/go/capgatev1"
	"github.com/capgate/capgate/clients/go/hook"
)

// The demo's standing ledger: order -> customer -> standing.
var (
	orderCustomers = map[string]string{"o-1001": "c-1", "o-1002": "c-1", "o-1003": "c-2", "o-1004": "c-2"}
	standings      = map[string]struct {
		inArrears bool
		tier      string
	}{"c-1": {false, "gold"}, "c-2": {true, "basic"}}
	email = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	card  = regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`)
)

const mark = "[removed by dlp]"

func standing(_ context.Context, call hook.PreInvoke) (hook.PreResult, error) {
	var input map[string]any
	if err := json.Unmarshal(call.Input, &input); err != nil {
		return hook.PreResult{}, nil // not an object: no standing
	}
	customer, _ := input["customer_id"].(string)
	if customer == "" {
		order, _ := input["order_id"].(string)
		customer = orderCustomers[order]
	}
	found, ok := standings[customer]
	if !ok {
		return hook.PreResult{}, nil
	}
	return hook.PreResult{Context: map[string]any{"in_arrears": found.inArrears, "tier": found.tier}}, nil
}

func scrub(value any) (any, bool) {
	switch v := value.(type) {
	case string:
		cleaned := card.ReplaceAllString(email.ReplaceAllString(v, mark), mark)
		return cleaned, cleaned != v
	case []any:
		changed := false
		for i, item := range v {
			var c bool
			v[i], c = scrub(item)
			changed = changed || c
		}
		return v, changed
	case map[string]any:
		changed := false
		for k, item := range v {
			var c bool
			v[k], c = scrub(item)
			changed = changed || c
		}
		return v, changed
	}
	return value, false
}

func dlp(_ context.Context, call hook.PostInvoke) (hook.PostResult, error) {
	var output any
	decoder := json.NewDecoder(bytes.NewReader(call.Output))
	decoder.UseNumber() // integers stay exact
	if err := decoder.Decode(&output); err != nil {
		return hook.PostResult{}, err
	}
	if cleaned, changed := scrub(output); changed {
		return hook.PostResult{UpdatedOutput: cleaned}, nil
	}
	return hook.PostResult{}, nil
}

func main() {
	address := flag.String("address", "127.0.0.1:0", "listen address (host:port)")
	flag.Parse()
	lis, err := net.Listen("tcp", *address)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	capgatev1.RegisterHookServer(server, &hook.Server{
		Pre:  map[string]hook.PreFunc{"standing": standing},
		Post: map[string]hook.PostFunc{"dlp": dlp},
	})
	fmt.Printf("listening %d\n", lis.Addr().(*net.TCPAddr).Port)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-stop; server.GracefulStop() }()
	if err := server.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
