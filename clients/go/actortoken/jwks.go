// Package actortoken verifies the actor token that capgate signs for every upstream call
// (metadata x-capgate-actor-token): a compact JWS, EdDSA or ES256, checked against the gateway's
// published JWKS. The checks, their order and their reason classes are those of
// tests/vectors/actor_token/README.md; the golden vectors in that folder pin them.
//
// Only the standard library is used: crypto/ed25519 and crypto/ecdsa. The algorithm always comes
// from the JWKS key that the token's kid selects, never from the token (RFC 8725 §3.1).
package actortoken

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
)

// Algorithms the gateway signs with; anything else is refused as bad_alg.
const (
	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"
)

type key struct {
	alg string
	pub crypto.PublicKey // ed25519.PublicKey or *ecdsa.PublicKey
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	// Private members: a verification JWKS must not carry them.
	D string `json:"d"`
}

// parseJWKS turns a public JWKS into kid -> pinned key. Every key needs a kid and an alg that fits
// its key type; anything else is a configuration error (as in the Python verifier).
func parseJWKS(data []byte) (map[string]key, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("actortoken: the JWKS is not a JSON object with keys: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("actortoken: the JWKS has no keys")
	}
	keys := make(map[string]key, len(set.Keys))
	for _, raw := range set.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			return nil, errors.New("actortoken: every JWKS key must be a JSON object")
		}
		if k.Kid == "" || (k.Alg != AlgEdDSA && k.Alg != AlgES256) {
			return nil, errors.New("actortoken: every JWKS key needs a kid and alg EdDSA or ES256")
		}
		if k.D != "" {
			return nil, errors.New("actortoken: a JWKS for verification must hold public keys only")
		}
		if _, dup := keys[k.Kid]; dup {
			return nil, fmt.Errorf("actortoken: duplicate kid %q in the JWKS", k.Kid)
		}
		pub, err := publicKey(k)
		if err != nil {
			return nil, fmt.Errorf("actortoken: JWKS key %q: %w", k.Kid, err)
		}
		keys[k.Kid] = key{alg: k.Alg, pub: pub}
	}
	return keys, nil
}

func publicKey(k jwk) (crypto.PublicKey, error) {
	switch {
	case k.Alg == AlgEdDSA && k.Kty == "OKP" && k.Crv == "Ed25519":
		x, err := decodeSegment(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 x")
		}
		return ed25519.PublicKey(x), nil
	case k.Alg == AlgES256 && k.Kty == "EC" && k.Crv == "P-256":
		x, errX := decodeSegment(k.X)
		y, errY := decodeSegment(k.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("bad P-256 coordinates")
		}
		// ParseUncompressedPublicKey also checks that the point is on the curve.
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(p256(), point)
		if err != nil {
			return nil, errors.New("the P-256 point is not on the curve")
		}
		return pub, nil
	default:
		return nil, errors.New("alg does not fit the key type (EdDSA needs OKP Ed25519, ES256 needs EC P-256)")
	}
}
