"""Regenerate the approval-hash golden vectors (vectors.json beside this file).

    .venv/bin/python tests/vectors/approval_hash/generate.py          # rewrite vectors.json
    .venv/bin/python tests/vectors/approval_hash/generate.py --check  # exit 1 if it is stale

Every expected canonical form below is written by hand, from RFC 8785 (its own examples are
taken verbatim: §3.2.2, §3.2.3 and Appendix B) and ECMAScript's Number::toString; the gateway's
`gateway.values.canonical` is never asked. This script only adds the SHA-256 of each canonical form
and checks that each number's input text is the IEEE 754 double it names. Format: README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "vectors.json"

# RFC 8785 Appendix B: IEEE 754 bits -> ECMAScript form. The input is a JSON number that
# parses to exactly those bits (a test checks it).
RFC_NUMBERS: list[tuple[str, str, str]] = [
    ("0000000000000000", "0.0", "0"),
    ("8000000000000000", "-0.0", "0"),
    ("0000000000000001", "5e-324", "5e-324"),
    ("8000000000000001", "-5e-324", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e308", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e308", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992.0", "9007199254740992"),
    ("c340000000000000", "-9007199254740992.0", "-9007199254740992"),
    ("4430000000000000", "295147905179352825856.0", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e22", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e23", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e23", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000.0", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000.0", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e21", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001", "0.000001"),
    ("41b3de4355555553", "333333333.3333332", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.25", "1424953923781206.2"),
]

# More doubles: the thresholds of ECMAScript's exponent form and common decimal fractions.
MORE_NUMBERS: list[tuple[str, str, str, str]] = [
    ("one", "3ff0000000000000", "1e0", "1"),
    ("one_point_zero", "3ff0000000000000", "1.0", "1"),
    ("one_e20_plain", "4415af1d78b58c40", "1e20", "100000000000000000000"),
    ("one_e16", "4341c37937e08000", "1E16", "10000000000000000"),
    (
        "two_pow_53_spelled_with_exponent",
        "4340000000000000",
        "9.007199254740992e15",
        "9007199254740992",
    ),
    ("one_e_minus_7", "3e7ad7f29abcaf48", "1e-7", "1e-7"),
    ("one_e_minus_6_spelled_with_exponent", "3eb0c6f7a0b5ed8d", "1e-6", "0.000001"),
    ("tenth", "3fb999999999999a", "0.1", "0.1"),
    ("tenth_plus_fifth", "3fd3333333333334", "0.30000000000000004", "0.30000000000000004"),
    ("four_point_fifty", "4012000000000000", "4.50", "4.5"),
    ("two_e_minus_3", "3f60624dd2f1a9fc", "2e-3", "0.002"),
    ("negative_one_and_a_half", "bff8000000000000", "-1.5", "-1.5"),
    ("one_e30", "46293e5939a08cea", "1E30", "1e+30"),
    ("tiny", "3a53ce9a36f23c10", "0.000000000000000000000000001", "1e-27"),
    ("largest_exact_integer_double", "433fffffffffffff", "9007199254740991.0", "9007199254740991"),
]

# capgate writes integers as their exact decimal digits, also beyond 2**53 (ADR 0006): an
# implementation that turns every number into a double must not be used for the approval hash.
EXACT_INTEGERS: list[tuple[str, str]] = [
    ("zero", "0"),
    ("negative_zero_integer", "-0"),
    ("two_pow_53", "9007199254740992"),
    ("two_pow_53_plus_one", "9007199254740993"),
    ("int64_min", "-9223372036854775808"),
    ("int64_max", "9223372036854775807"),
    ("uint64_max", "18446744073709551615"),
]
EXACT_INTEGER_CANONICAL = {"negative_zero_integer": "0"}

# (name, input JSON text, canonical form) — strings, keys, nesting and the RFC's examples.
STRUCTURES: list[tuple[str, str, str]] = [
    (
        "rfc8785_3_2_2_sample",
        '{\n  "numbers": [333333333.33333329, 1E30, 4.50,\n              2e-3, '
        '0.000000000000000000000000001],\n  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042'
        '\\u0022\\u005c\\\\\\"\\/",\n  "literals": [null, true, false]\n}',
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    ),
    (
        "rfc8785_3_2_3_sorting",
        '{\n  "\\u20ac": "Euro Sign",\n  "\\r": "Carriage Return",\n  "\\ufb33": "Hebrew '
        'Letter Dalet With Dagesh",\n  "1": "One",\n  "\\ud83d\\ude00": "Emoji: Grinning '
        'Face",\n  "\\u0080": "Control",\n  "\\u00f6": "Latin Small Letter O With '
        'Diaeresis"\n}',
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O '
        'With Diaeresis","\u20ac":"Euro Sign","\U0001f600":"Emoji: Grinning Face","\ufb33":'
        '"Hebrew Letter Dalet With Dagesh"}',
    ),
    ("literals", "[ null , true , false ]", "[null,true,false]"),
    ("empty_object", " { } ", "{}"),
    ("empty_array", "[ ]", "[]"),
    ("empty_string", '""', '""'),
    ("short_escapes", '"\\b\\f\\n\\r\\t"', '"\\b\\f\\n\\r\\t"'),
    (
        "other_controls_lowercase_hex",
        '"\\u0000\\u0001\\u001F\\u000B"',
        '"\\u0000\\u0001\\u001f\\u000b"',
    ),
    ("delete_is_not_escaped", '"\\u007f"', '"\u007f"'),
    ("solidus_unescaped", '"a\\/b"', '"a/b"'),
    ("quote_and_backslash", '"\\"\\\\"', '"\\"\\\\"'),
    ("line_and_paragraph_separators_raw", '"\\u2028\\u2029"', '"\u2028\u2029"'),
    ("escaped_non_ascii_written_raw", '"\\u00e9\\u4e2d"', '"\u00e9\u4e2d"'),
    ("astral_from_surrogate_pair_escape", '"\\ud83d\\ude00"', '"\U0001f600"'),
    ("astral_raw", '"\U0001d11e"', '"\U0001d11e"'),
    ("byte_order_mark_in_string", '"\\ufeffx"', '"\ufeffx"'),
    ("no_unicode_normalization", '["\u00e9","e\u0301"]', '["\u00e9","e\u0301"]'),
    ("keys_sorted", '{"b":1,"a":2,"":0}', '{"":0,"a":2,"b":1}'),
    ("keys_uppercase_first", '{"a":1,"B":2,"A":3}', '{"A":3,"B":2,"a":1}'),
    ("keys_prefix_first", '{"ab":1,"a":2,"a\\u0000":3}', '{"a":2,"a\\u0000":3,"ab":1}'),
    # By UTF-16 code units, not code points: U+10000 (D800 DC00) sorts before U+FFFF, and
    # U+1F600 (D83D DE00) before U+E000.
    (
        "keys_utf16_not_code_points",
        '{"\\uffff":1,"\\ud800\\udc00":2}',
        '{"\U00010000":2,"\uffff":1}',
    ),
    (
        "keys_utf16_surrogates_before_private_use",
        '{"\\ue000":1,"\U0001f600":2}',
        '{"\U0001f600":2,"\ue000":1}',
    ),
    (
        "nesting_sorted_at_every_level",
        '{"z":[3,{"y":null,"x":true}],"a":{"c":{"b":[]},"a":"\\u0041"}}',
        '{"a":{"a":"A","c":{"b":[]}},"z":[3,{"x":true,"y":null}]}',
    ),
    ("arrays_keep_their_order", '[3, 1, 2, ["b", "a"]]', '[3,1,2,["b","a"]]'),
    ("deep_nesting", "[" * 30 + "0" + "]" * 30, "[" * 30 + "0" + "]" * 30),
    (
        "typical_refund_input",
        '{"order_id": "o-1002", "amount": 750.00, "reason": "wrong item \\u2014 customer"}',
        '{"amount":750,"order_id":"o-1002","reason":"wrong item \u2014 customer"}',
    ),
]

# JSON texts that have no approval hash: the gateway refuses them as input (INPUT_INVALID)
# before any hash is computed; an implementation must refuse them, never hash them.
REFUSED: list[tuple[str, str, str]] = [
    ("lone_high_surrogate", '"\\ud800"', "a lone surrogate is not a Unicode string"),
    ("lone_low_surrogate", '"\\udc00"', "a lone surrogate is not a Unicode string"),
    ("reversed_surrogates", '"\\ude00\\ud83d"', "a lone surrogate is not a Unicode string"),
    ("duplicate_key", '{"a":1,"a":2}', "duplicate object keys"),
    ("integer_beyond_64_bits", "18446744073709551616", "integers outside the 64-bit range"),
    ("number_overflows_to_infinity", "1e400", "NaN and Infinity have no JSON form"),
]


def _bits(text: str) -> str:
    return struct.pack(">d", float(text)).hex()


def _case(name: str, group: str, text: str, canonical: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "group": group,
        "input": text,
        "canonical": canonical,
        "sha256": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
        **extra,
    }


def cases() -> list[dict[str, Any]]:
    out = []
    for bits, text, canonical in RFC_NUMBERS:
        if _bits(text) != bits:
            raise SystemExit(f"{text} is not the double {bits}")
        out.append(_case(f"rfc8785_b_{bits}", "number", text, canonical, ieee754=bits))
    for name, bits, text, canonical in MORE_NUMBERS:
        if _bits(text) != bits:
            raise SystemExit(f"{text} is not the double {bits}")
        out.append(_case(name, "number", text, canonical, ieee754=bits))
    for name, text in EXACT_INTEGERS:
        canonical = EXACT_INTEGER_CANONICAL.get(name, text)
        out.append(_case(name, "exact_integer", text, canonical))
    for name, text, canonical in STRUCTURES:
        json.loads(text)  # well-formed JSON text
        out.append(_case(name, "structure", text, canonical))
    return out


def build() -> dict[str, Any]:
    return {
        "format": "capgate-approval-hash-vectors/1",
        "about": "Golden vectors for the approval input hash: hex SHA-256 of the RFC 8785 "
        "(JCS) canonical UTF-8 bytes of the input, integers written exactly (ADR 0006).",
        "cases": cases(),
        "refused": [{"name": n, "input": t, "why": why} for n, t, why in REFUSED],
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if vectors.json is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(build()['cases'])} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
