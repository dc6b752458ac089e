"""A `jwt` block's verification keys, loaded exactly as a listener loads them (ADR 0003): the
inline keys and the JWKS file, with their pins, types and `use` checked and duplicate `kid`s
refused. Here, below the listeners, so that `config check` runs the very same loading
(gateway/config/listeners.py) as the authenticator (gateway/transport/auth/jwt.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from gateway.config.settings import JwtAuth
from gateway.values import jws


def _pinned_alg(settings: JwtAuth, kid: str) -> str | None:
    for key in settings.keys:
        if key.kid == kid and key.secret is None and key.public_key_pem is None:
            return key.alg
    return None


def _jwks_keys(settings: JwtAuth, path: str) -> list[jws.VerifyKey]:
    """Keys from a JWKS file. Each needs a `kid`; its algorithm is the JWK's `alg`, else the
    `alg` of a material-less config key with the same `kid` (a pin); neither => config error."""
    try:
        document = jws.loads_object(Path(path).read_bytes())
    except (OSError, jws.MalformedToken) as exc:
        raise ValueError(f"cannot load JWKS file {path}: {exc}") from None
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise ValueError(f"JWKS file {path} has no 'keys' list")
    out: list[jws.VerifyKey] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str) or not entry["kid"]:
            raise ValueError(f"every key in JWKS file {path} needs a non-empty 'kid'")
        kid = entry["kid"]
        if entry.get("use", "sig") != "sig":
            raise ValueError(f"JWKS key {kid!r}: 'use' must be 'sig'")
        alg = entry.get("alg") or _pinned_alg(settings, kid)
        if alg is None:
            raise ValueError(f"JWKS key {kid!r} carries no 'alg' and no config key pins one")
        key, served = jws.public_key_from_jwk(cast("dict[str, Any]", entry))
        if alg not in served:
            raise ValueError(f"JWKS key {kid!r}: its key type cannot serve alg {alg}")
        out.append(jws.VerifyKey(kid, alg, jws.check_key_matches_alg(key, alg)))
    return out


def load_keys(settings: JwtAuth) -> dict[str, jws.VerifyKey]:
    """Every verification key by `kid`; `ValueError` on any weak, mistyped or duplicate key."""
    keys: list[jws.VerifyKey] = []
    for key in settings.keys:
        if key.alg not in jws.ALGORITHMS:
            raise ValueError(f"JWT key {key.kid!r}: unsupported alg {key.alg!r}")
        if key.alg == "HS256":
            if key.secret is None or key.public_key_pem is not None:
                raise ValueError(f"JWT key {key.kid!r}: HS256 needs 'secret' and no public key")
            keys.append(jws.VerifyKey(key.kid, "HS256", jws.hs256_secret(key.secret)))
        elif key.public_key_pem is not None:
            if key.secret is not None:
                raise ValueError(f"JWT key {key.kid!r}: {key.alg} keys take no 'secret'")
            keys.append(
                jws.VerifyKey(
                    key.kid, key.alg, jws.public_key_from_pem(key.public_key_pem, key.alg)
                )
            )
        elif key.secret is not None or settings.jwks_file is None:
            raise ValueError(f"JWT key {key.kid!r}: {key.alg} needs 'public_key_pem'")
        # else: a pin for a JWKS key without `alg`, consumed by _jwks_keys
    if settings.jwks_file is not None:
        keys.extend(_jwks_keys(settings, settings.jwks_file))
    by_kid: dict[str, jws.VerifyKey] = {}
    for vk in keys:
        if vk.kid in by_kid:
            raise ValueError(f"duplicate JWT key id {vk.kid!r}")
        by_kid[vk.kid] = vk
    if not by_kid:
        raise ValueError("JWT auth needs at least one key (keys or jwks_file)")
    return by_kid
