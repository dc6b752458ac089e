// Command approval walks through capgate from Go: describe, invoke, and a refund that needs a
// manager's approval (approved here by "bob" on the admin listener, standing in for the human),
// then wait for the decision and resume.
//
//	go run ./examples/approval -stack ../../.run/stack.json
//	go run ./examples/approval -agents 127.0.0.1:7443 -token "$ALICE_JWT" -admin 127.0.0.1:7444 -admin-token "$BOB_JWT"
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/capgate/capgate/clients/go/capgate"
	"github.com/capgate/capgate/clients/go/capgatev1"
)

func main() {
	stack := flag.String("stack", "", "a stack.json from scripts/stack.py (sets the four flags below)")
	agents := flag.String("agents", "", "agents listener address")
	token := flag.String("token", "", "caller JWT for the agents listener")
	admin := flag.String("admin", "", "admin listener address (to approve; optional)")
	adminToken := flag.String("admin-token", "", "approver JWT for the admin listener")
	flag.Parse()
	if *stack != "" {
		var s struct {
			Agents, Admin string
			Tokens        map[string]string
		}
		data, err := os.ReadFile(*stack)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(data, &s); err != nil {
			log.Fatal(err)
		}
		*agents, *token, *admin, *adminToken = s.Agents, s.Tokens["alice"], s.Admin, s.Tokens["bob"]
	}
	if *agents == "" || *token == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*agents, *token, *admin, *adminToken); err != nil {
		log.Fatal(err)
	}
}

func run(agents, token, admin, adminToken string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := capgate.Dial(agents, capgate.WithBearerToken(token))
	if err != nil {
		return err
	}
	defer c.Close()

	cat, err := c.Describe(ctx)
	if err != nil {
		return err
	}
	for _, capability := range cat.Capabilities {
		fmt.Printf("%-16s %-6s %s\n", capability.ID, capability.SideEffect, capability.Description)
	}

	res, err := c.Invoke(ctx, "orders.get", map[string]any{"order_id": "o-1001"})
	if err != nil {
		return err
	}
	report("orders.get", res)

	res, err = c.Invoke(ctx, "orders.refund", map[string]any{"order_id": "o-1003", "amount": 800, "reason": "damaged"})
	if err != nil {
		return err
	}
	report("orders.refund", res)
	pending, ok := res.Outcome.(*capgate.ApprovalRequired)
	if !ok {
		return nil
	}
	if admin != "" {
		if err := approve(ctx, admin, adminToken, pending.Approval); err != nil {
			return err
		}
	} else {
		fmt.Println("waiting for an approver to decide", pending.Approval.ID)
	}
	decided, err := c.WaitForApproval(ctx, pending.Approval.ID)
	if err != nil {
		return err
	}
	if !decided.Approved() {
		return fmt.Errorf("approval %s was %s", decided.ID, decided.Status)
	}
	res, err = c.Resume(ctx, decided.ID)
	if err != nil {
		return err
	}
	report("resumed refund", res)
	return nil
}

// approve plays the human approver: DecideApproval on the admin listener, against the input
// hash shown to the approver.
func approve(ctx context.Context, addr, token string, a *capgate.Approval) error {
	adm, err := capgate.Dial(addr, capgate.WithBearerToken(token))
	if err != nil {
		return err
	}
	defer adm.Close()
	resp, err := capgatev1.NewApprovalAdminClient(adm.Conn()).DecideApproval(adm.Context(ctx),
		&capgatev1.DecideApprovalRequest{ApprovalId: a.ID, Verdict: capgatev1.Verdict_VERDICT_APPROVE,
			InputHash: a.InputHash, Note: "approved by the Go example"})
	if err != nil {
		return err
	}
	if resp.GetError() != nil {
		return fmt.Errorf("decide: %s", resp.GetError().GetMessage())
	}
	fmt.Println("approved by", resp.GetApproval().GetDecidedBy().GetId())
	return nil
}

func report(what string, res *capgate.Result) {
	switch o := res.Outcome.(type) {
	case *capgate.Completed:
		fmt.Printf("%s: completed %v\n", what, o.Output)
	case *capgate.ApprovalRequired:
		fmt.Printf("%s: approval required (%s): %s\n", what, o.Approval.ID, o.Approval.Message)
	case *capgate.Failed:
		fmt.Printf("%s: failed %s: %s\n", what, capgate.CodeName(o.Err.Code), o.Err.Message)
	case *capgate.Cancelled:
		fmt.Printf("%s: cancelled %s\n", what, capgate.CodeName(o.Err.Code))
	}
}
