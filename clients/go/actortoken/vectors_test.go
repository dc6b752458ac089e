package actortoken_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/capgate/capgate/clients/go/actortoken"
)

// The golden vectors shared by every verifier (never skipped: they need no stack).
var vectorsPath = filepath.Join("..", "..", "..", "tests", "vectors", "actor_token", "vectors.json")

type vectorFile struct {
	Format   string `json:"format"`
	Verifier struct {
		LeewayS      float64 `json:"leeway_s"`
		MaxLifetimeS float64 `json:"max_lifetime_s"`
	} `json:"verifier"`
	JWKS  json.RawMessage `json:"jwks"`
	Cases []struct {
		Name     string          `json:"name"`
		Token    string          `json:"token"`
		Now      float64         `json:"now"`
		Issuer   string          `json:"issuer"`
		Audience string          `json:"audience"`
		Expect   string          `json:"expect"`
		Claims   json.RawMessage `json:"claims"`
		Reason   string          `json:"reason"`
	} `json:"cases"`
}

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("the golden vectors must be readable: %v", err)
	}
	var vf vectorFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatal(err)
	}
	if vf.Format != "capgate-actor-token-vectors/1" || len(vf.Cases) == 0 {
		t.Fatalf("unexpected vectors file: format %q, %d cases", vf.Format, len(vf.Cases))
	}
	return vf
}

func TestGoldenVectors(t *testing.T) {
	vf := loadVectors(t)
	seen := map[string]bool{}
	for _, tc := range vf.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			v, err := actortoken.NewVerifier(vf.JWKS, tc.Issuer, tc.Audience,
				actortoken.WithLeeway(time.Duration(vf.Verifier.LeewayS*float64(time.Second))),
				actortoken.WithMaxLifetime(time.Duration(vf.Verifier.MaxLifetimeS*float64(time.Second))))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(0, int64(tc.Now*1e9))
			claims, err := v.VerifyAt(tc.Token, now)
			switch tc.Expect {
			case "valid":
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				dec := json.NewDecoder(bytes.NewReader(tc.Claims))
				dec.UseNumber()
				var want map[string]any
				if err := dec.Decode(&want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(claims.Raw, want) {
					t.Fatalf("claims differ:\n got %v\nwant %v", claims.Raw, want)
				}
				wantExec, _ := want["exec_id"].(string) // optional: absent from reused tokens
				if claims.Subject != want["sub"] || claims.ExecutionID != wantExec {
					t.Fatalf("typed claims do not match the payload: %+v", claims)
				}
				seen["valid"] = true
			case "invalid":
				var inv *actortoken.InvalidError
				if !errors.As(err, &inv) {
					t.Fatalf("want %s, got %v", tc.Reason, err)
				}
				if string(inv.Reason) != tc.Reason {
					t.Fatalf("want reason %s, got %s", tc.Reason, inv.Reason)
				}
				seen[tc.Reason] = true
			default:
				t.Fatalf("unknown expectation %q", tc.Expect)
			}
		})
	}
	// Every reason class of the check order must have been exercised.
	for _, r := range []string{"valid", "malformed", "bad_alg", "wrong_type", "unknown_kid",
		"bad_signature", "invalid_claims", "wrong_issuer", "wrong_audience", "expired",
		"not_yet_valid", "lifetime_exceeded"} {
		if !seen[r] {
			t.Errorf("no vector exercised %s", r)
		}
	}
}

func TestJWKSRefusesKeysThatCannotBePinned(t *testing.T) {
	vf := loadVectors(t)
	var set struct{ Keys []map[string]any }
	if err := json.Unmarshal(vf.JWKS, &set); err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(k map[string]any)) []byte {
		k := map[string]any{}
		for name, v := range set.Keys[0] {
			k[name] = v
		}
		f(k)
		out, _ := json.Marshal(map[string]any{"keys": []any{k}})
		return out
	}
	cases := map[string][]byte{
		"no keys":          []byte(`{"keys":[]}`),
		"not json":         []byte(`keys`),
		"no alg":           mutate(func(k map[string]any) { delete(k, "alg") }),
		"alg HS256":        mutate(func(k map[string]any) { k["alg"] = "HS256" }),
		"alg of other kty": mutate(func(k map[string]any) { k["alg"] = "ES256" }),
		"private member":   mutate(func(k map[string]any) { k["d"] = "AAAA" }),
		"no kid":           mutate(func(k map[string]any) { delete(k, "kid") }),
	}
	for name, jwks := range cases {
		if _, err := actortoken.NewVerifier(jwks, "capgate", "orders"); err == nil {
			t.Errorf("%s: want a configuration error", name)
		}
	}
	if _, err := actortoken.NewVerifier(vf.JWKS, "", "orders"); err == nil {
		t.Error("an empty issuer must be refused")
	}
}
