"""What the discovery phase's policies read (`PolicySet.discovery_reads`): Describe's cache of
descriptors keys by it (docs/performance.md), so it must name every actor field a discovery
policy can depend on, and say "unknown" (None) rather than guess."""

from __future__ import annotations


def test_reads_name_each_selected_field_and_stop_at_an_index(load_policies):
    policy_set = load_policies(
        """
        policies:
          - name: tenant-only
            phases: [discovery]
            match: {expr: "actor.kind == 'user'"}
            rules:
              - when: "actor.attributes.tenant != 'acme' && 'x' in actor.roles"
                effect: hide
              - when: "actor.attributes['plan'] == 'free'"
                effect: hide
              - when: "actor.roles.exists(r, r == surface)"
                effect: deny
          - name: not-in-discovery
            rules:
              - when: "actor.id == 'x' && request.now > timestamp('2020-01-01T00:00:00Z')"
                effect: deny
        """
    )
    reads = policy_set.discovery_reads
    assert reads is not None
    actor_paths = {p for p in reads if p[0] == "actor"}
    assert actor_paths == {
        ("actor", "kind"),
        ("actor", "attributes", "tenant"),
        ("actor", "attributes"),  # the index reads the whole map, conservatively
        ("actor", "roles"),
    }
    assert ("surface",) in reads
    assert not any(p[0] == "request" for p in reads)  # only the invocation policy reads it


def test_a_policy_reading_the_time_in_discovery_is_visible(load_policies):
    policy_set = load_policies(
        """
        policies:
          - name: office-hours
            phases: [discovery, invocation]
            rules:
              - when: "request.now.getHours() > 18"
                effect: hide
        """
    )
    assert ("request", "now") in (policy_set.discovery_reads or set())


def test_no_discovery_policy_reads_nothing(load_policies):
    policy_set = load_policies(
        """
        policies:
          - name: invocation-only
            rules: [{when: "actor.id == 'x'", effect: deny}]
        """
    )
    assert policy_set.discovery_reads == frozenset()
