"""Values as the gateway handles them, with no I/O: strict JSON and its limits (`jsonvalue`),
the canonical form and input hash (`canonical`), schema validation (`validation`),
redaction (`redact`, `outputexpr`), and compact JWS (`jws`)."""
