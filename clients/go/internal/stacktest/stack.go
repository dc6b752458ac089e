// Package stacktest finds the shared test stack that `scripts/stack.py start` runs (one gateway,
// the example upstream and Redis for every client suite) by reading .run/stack.json at the
// repository root, or the file named by $CAPGATE_STACK. Suites skip when it is absent.
package stacktest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Stack is .run/stack.json.
type Stack struct {
	Agents      string            `json:"agents"`       // CapabilityGateway, surface agent, bearer JWT
	Admin       string            `json:"admin"`        // ApprovalAdmin, bearer JWT (audience capgate-admin)
	LocalSocket string            `json:"local_socket"` // CapabilityGateway, surface direct, trusted-local
	Orders      string            `json:"orders"`       // the example upstream
	Tokens      map[string]string `json:"tokens"`       // alice, bob (admin), bob_agent, root
	JWKSFile    string            `json:"jwks_file"`    // the gateway's actor-token JWKS
}

// Path is where the stack description is expected.
func Path() (string, error) {
	if p := os.Getenv("CAPGATE_STACK"); p != "" {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return filepath.Join(p, "stack.json"), nil
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".run", "stack.json"), nil
}

// RepoRoot walks up from the working directory to the folder holding proto/capgate/v1.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, "proto", "capgate", "v1")); err == nil && fi.IsDir() {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Load returns the running stack, or skips the test with the reason when there is none.
func Load(t testing.TB) *Stack {
	t.Helper()
	path, err := Path()
	if err != nil {
		t.Skipf("no shared test stack (repository root not found): run `python scripts/stack.py start`")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no shared test stack at %s: run `python scripts/stack.py start` (or set CAPGATE_STACK)", path)
	}
	var s Stack
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s is not a stack description: %v", path, err)
	}
	for _, name := range []string{"alice", "bob"} {
		if s.Tokens[name] == "" {
			t.Fatalf("%s has no %s token", path, name)
		}
	}
	return &s
}
