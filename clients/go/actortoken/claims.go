package actortoken

import (
	"encoding/json"
	"math"
)

// Reason is the class of the first check a token failed (tests/vectors/actor_token/README.md).
type Reason string

// The reason classes, in check order (bad_alg appears twice in the order).
const (
	Malformed        Reason = "malformed"
	BadAlg           Reason = "bad_alg"
	WrongType        Reason = "wrong_type"
	UnknownKid       Reason = "unknown_kid"
	BadSignature     Reason = "bad_signature"
	InvalidClaims    Reason = "invalid_claims"
	WrongIssuer      Reason = "wrong_issuer"
	WrongAudience    Reason = "wrong_audience"
	Expired          Reason = "expired"
	NotYetValid      Reason = "not_yet_valid"
	LifetimeExceeded Reason = "lifetime_exceeded"
)

// InvalidError is a refused token. Its message is the reason only: never token contents.
type InvalidError struct{ Reason Reason }

func (e *InvalidError) Error() string { return "actor token invalid: " + string(e.Reason) }

func invalid(r Reason) error { return &InvalidError{Reason: r} }

// Claims are a verified token's claims (docs/auth.md, "The forwarded actor token").
// The actor's identity is the pair (ActorIssuer, Subject).
type Claims struct {
	Issuer      string   // iss: the gateway
	Audience    string   // aud: this upstream
	Subject     string   // sub: the actor id
	ActorIssuer string   // actor_iss: the actor's own issuer
	Kind        string   // user, service, agent or anonymous
	Roles       []string // roles
	ExecutionID string   // exec_id: optional (absent from reused tokens; then x-capgate-execution-id)
	Capability  string   // cap: optional (absent from reused tokens; then x-capgate-capability)
	Surface     string   // surface of the listener the call came in on
	ApprovalID  string   // approval_id: only on a resumed, approved execution
	Approver    string   // approver: who approved it
	JTI         string   // jti
	// Raw is the complete payload as decoded (numbers as json.Number).
	Raw map[string]any

	iat, exp, nbf float64
	hasNbf        bool
}

// IssuedAt and ExpiresAt are iat and exp in Unix seconds.
func (c *Claims) IssuedAt() float64  { return c.iat }
func (c *Claims) ExpiresAt() float64 { return c.exp }

// typedClaims checks presence and JSON types of the claims (check 7, except exp <= iat).
func typedClaims(p map[string]any) (*Claims, bool) {
	c := &Claims{Raw: p}
	strs := []struct {
		name string
		dst  *string
	}{
		{"iss", &c.Issuer}, {"sub", &c.Subject}, {"actor_iss", &c.ActorIssuer}, {"kind", &c.Kind},
		{"surface", &c.Surface}, {"jti", &c.JTI},
	}
	for _, s := range strs {
		v, ok := p[s.name].(string)
		if !ok {
			return nil, false
		}
		*s.dst = v
	}
	// exec_id and cap are optional: the gateway reuses a token across executions (DESIGN §12,
	// amended 2026-12-01) and sends them as metadata beside it; older tokens carry them.
	optional := map[string]*string{
		"exec_id": &c.ExecutionID, "cap": &c.Capability, "approval_id": &c.ApprovalID, "approver": &c.Approver,
	}
	for name, dst := range optional {
		if raw, present := p[name]; present {
			v, ok := raw.(string)
			if !ok {
				return nil, false
			}
			*dst = v
		}
	}
	aud, present := p["aud"]
	if !present {
		return nil, false
	}
	c.Audience, _ = aud.(string)
	roles, ok := p["roles"].([]any)
	if !ok {
		return nil, false
	}
	c.Roles = make([]string, 0, len(roles))
	for _, r := range roles {
		role, isStr := r.(string)
		if !isStr {
			return nil, false
		}
		c.Roles = append(c.Roles, role)
	}
	var okIat, okExp bool
	c.iat, okIat = number(p["iat"])
	c.exp, okExp = number(p["exp"])
	if !okIat || !okExp {
		return nil, false
	}
	if raw, present := p["nbf"]; present {
		if c.nbf, ok = number(raw); !ok {
			return nil, false
		}
		c.hasNbf = true
	}
	return c, true
}

// number accepts a finite JSON number only (booleans and strings are not numbers).
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
