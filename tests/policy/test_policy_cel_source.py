"""CEL source handling: the `const` spelling and constant-regex discovery."""

from __future__ import annotations

import pytest
from cel_expr_python import cel

from policy.celast import read_facts
from policy.celsource import rewrite_const


@pytest.mark.parametrize(
    ("source", "rewritten"),
    [
        ("const.limit > 1", "_cnst.limit > 1"),
        ("input.x > const.a && const.b", "input.x > _cnst.a && _cnst.b"),
        ("'const.x' == const.y", "'const.x' == _cnst.y"),
        ('"it\\"s const" == const.y', '"it\\"s const" == _cnst.y'),
        ("r'raw\\' + const.z", "r'raw\\' + _cnst.z"),
        ("'''a ' const''' + const.w", "'''a ' const''' + _cnst.w"),
        ("// const in a comment\nconst.q", "// const in a comment\n_cnst.q"),
        ("input.const == 1", "input.const == 1"),
        ("constant.x + myconst", "constant.x + myconst"),
    ],
)
def test_const_is_renamed_only_where_it_is_the_identifier(source, rewritten):
    assert rewrite_const(source) == rewritten
    assert len(rewrite_const(source)) == len(source)  # columns stay valid


def test_constant_regexes_are_found_with_their_offsets():
    env = cel.NewEnv(variables={"d": cel.Type.DYN})
    source = "d.a.matches('x+') && matches(d.b, r'[') && [d.c].exists(s, s.matches(d.p))"

    facts = read_facts(env.compile(source).serialize())

    assert facts.patterns == [("x+", 12), ("[", 34)]
