package actortoken

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"time"
)

// TokenType is the JWS typ header of every actor token.
const TokenType = "capgate-actor+jwt"

// Defaults of the contract: a few seconds of clock skew, tokens live at most 60 s.
const (
	DefaultLeeway      = 5 * time.Second
	DefaultMaxLifetime = 60 * time.Second
)

// Verifier checks actor tokens for one upstream (audience) from one gateway (issuer).
// It is safe for concurrent use.
type Verifier struct {
	keys        map[string]key
	issuer      string
	audience    string
	leeway      float64
	maxLifetime float64
	now         func() time.Time
}

// Option tunes a Verifier.
type Option func(*Verifier)

// WithLeeway sets the clock skew allowed for exp, iat and nbf (default 5 s).
func WithLeeway(d time.Duration) Option { return func(v *Verifier) { v.leeway = d.Seconds() } }

// WithMaxLifetime sets the largest allowed exp - iat (default 60 s).
func WithMaxLifetime(d time.Duration) Option {
	return func(v *Verifier) { v.maxLifetime = d.Seconds() }
}

// WithClock injects the clock (tests; the default is time.Now).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// NewVerifier builds a verifier over the JWKS JSON the gateway publishes (actor_token.jwks_out).
// issuer is the gateway's actor_token.issuer (usually "capgate"); audience is this upstream's
// name in the gateway config.
func NewVerifier(jwks []byte, issuer, audience string, opts ...Option) (*Verifier, error) {
	if issuer == "" || audience == "" {
		return nil, errors.New("actortoken: a verifier needs the gateway issuer and its audience")
	}
	keys, err := parseJWKS(jwks)
	if err != nil {
		return nil, err
	}
	v := &Verifier{
		keys: keys, issuer: issuer, audience: audience,
		leeway: DefaultLeeway.Seconds(), maxLifetime: DefaultMaxLifetime.Seconds(), now: time.Now,
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// LoadVerifier reads the JWKS file and builds a verifier (see NewVerifier).
func LoadVerifier(path, issuer, audience string, opts ...Option) (*Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return NewVerifier(data, issuer, audience, opts...)
}

// Verify checks token at the verifier's clock and returns its claims, or an *InvalidError whose
// Reason is the class of the first failed check.
func (v *Verifier) Verify(token string) (*Claims, error) {
	return v.VerifyAt(token, v.now())
}

// VerifyAt is Verify at the given time.
func (v *Verifier) VerifyAt(token string, now time.Time) (*Claims, error) {
	header, payload, signingInput, sig, err := parseCompact(token)
	if err != nil {
		return nil, invalid(Malformed)
	}
	if _, ok := header["crit"]; ok {
		return nil, invalid(Malformed) // no extension is understood
	}
	alg, _ := header["alg"].(string)
	if alg != AlgEdDSA && alg != AlgES256 {
		return nil, invalid(BadAlg)
	}
	if typ, _ := header["typ"].(string); typ != TokenType {
		return nil, invalid(WrongType)
	}
	kid, isString := header["kid"].(string)
	k, found := v.keys[kid]
	if !isString || !found {
		return nil, invalid(UnknownKid) // kid is a dictionary key only, never a path or URL
	}
	if alg != k.alg {
		return nil, invalid(BadAlg) // the algorithm comes from the key, never from the token
	}
	if !verifySignature(k, signingInput, sig) {
		return nil, invalid(BadSignature)
	}
	claims, ok := typedClaims(payload)
	if !ok || claims.exp <= claims.iat {
		return nil, invalid(InvalidClaims)
	}
	if claims.Issuer != v.issuer {
		return nil, invalid(WrongIssuer)
	}
	if aud, isStr := payload["aud"].(string); !isStr || aud != v.audience {
		return nil, invalid(WrongAudience) // an array never matches, even one naming us
	}
	t := float64(now.UnixNano()) / 1e9
	if t >= claims.exp+v.leeway {
		return nil, invalid(Expired)
	}
	if claims.iat > t+v.leeway || (claims.hasNbf && claims.nbf > t+v.leeway) {
		return nil, invalid(NotYetValid)
	}
	if claims.exp-claims.iat > v.maxLifetime {
		return nil, invalid(LifetimeExceeded)
	}
	return claims, nil
}

// parseCompact splits and decodes a compact JWS; nothing is verified here.
func parseCompact(token string) (header, payload map[string]any, signingInput, sig []byte, err error) {
	parts := bytes.Split([]byte(token), []byte("."))
	if len(parts) != 3 {
		return nil, nil, nil, nil, errMalformed
	}
	if header, err = decodeObject(parts[0]); err != nil {
		return nil, nil, nil, nil, err
	}
	if payload, err = decodeObject(parts[1]); err != nil {
		return nil, nil, nil, nil, err
	}
	if sig, err = decodeSegment(string(parts[2])); err != nil {
		return nil, nil, nil, nil, err
	}
	signingInput = []byte(token[:len(parts[0])+1+len(parts[1])])
	return header, payload, signingInput, sig, nil
}

var errMalformed = errors.New("malformed")

// decodeSegment is strict unpadded base64url (RFC 7515 §2). The alphabet check comes first
// because Go's decoder silently skips CR and LF.
func decodeSegment(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return nil, errMalformed
		}
	}
	out, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errMalformed
	}
	return out, nil
}

func decodeObject(segment []byte) (map[string]any, error) {
	raw, err := decodeSegment(string(segment))
	if err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		return nil, errMalformed // also refuses trailing data after the object
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // claims are returned member for member, numbers as written
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errMalformed // not an object (arrays, strings and null fail here)
	}
	return obj, nil
}

func verifySignature(k key, signingInput, sig []byte) bool {
	switch pub := k.pub.(type) {
	case ed25519.PublicKey:
		return ed25519.Verify(pub, signingInput, sig)
	case *ecdsa.PublicKey:
		// JWS ECDSA is raw R || S, 64 bytes (RFC 7518 §3.4); DER or any other length is refused.
		if len(sig) != 64 {
			return false
		}
		digest := sha256.Sum256(signingInput)
		r := new(big.Int).SetBytes(sig[:32])
		s := new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(pub, digest[:], r, s)
	}
	return false
}

func p256() elliptic.Curve { return elliptic.P256() }
