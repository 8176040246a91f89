"""Policy documents, compile errors, evaluation semantics (matchConditions, messages,
failurePolicy), overrides, plan-time targets, and the shipped policies' own test cases."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli import main
from reconciler.compile.desired import compile_desired_state
from reconciler.config.files import read_library, read_repo, read_shipped_policies
from reconciler.config.policy_file import PolicyError, parse_policy_file
from reconciler.config.repo import load_config
from reconciler.errors import ReconcilerError
from reconciler.pipeline.plans import with_policies
from reconciler.plan.diff import plan_changes
from reconciler.policy.engine import (
    PolicyCompileError,
    compile_policies,
    effective_policies,
    evaluate,
)
from reconciler.policy.loader import shipped_documents

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_REPO = ROOT / "fixtures" / "config-repo"
HEADER = "apiVersion: policy.reconciler.sunk.dev/v1alpha1\n"


def policy(name: str, body: str, *, target: str = "pod") -> str:
    return (
        HEADER
        + f"kind: Policy\nmetadata: {{name: {name}}}\nspec:\n  target: {target}\n"
        + (textwrap.indent(textwrap.dedent(body).strip("\n"), "  ") + "\n")
    )


def compiled(*texts: str) -> tuple:
    docs = [d for i, t in enumerate(texts) for d in parse_policy_file(t, f"p{i}.yaml", "repo")]
    return compile_policies(effective_policies([], docs))


def findings(policies: tuple, obj: dict, target: str = "pod", **params: object) -> list:
    return evaluate(policies, target, obj, "the object", params=params)


POD = {"metadata": {"name": "p", "labels": {"team": "a"}}, "spec": {"priority": 5}}


# ---- evaluation -------------------------------------------------------------------------


def test_a_false_validation_is_a_finding_with_the_policy_actions_and_message() -> None:
    policies = compiled(policy("max-priority", """
        validationActions: [Warn, Audit]
        validations:
          - expression: object.spec.priority <= params.max
            message: priority too high
            reason: Forbidden
    """))  # fmt: skip
    [found] = findings(policies, POD, max=3)
    assert found.policy == "max-priority" and found.message == "priority too high"
    assert found.actions == {"Warn", "Audit"} and found.reason == "Forbidden"
    assert not found.denies and found.warns
    assert str(found.where) == "p0.yaml:3 (metadata.name)"
    assert findings(policies, POD, max=10) == []


def test_match_conditions_all_must_hold() -> None:
    policies = compiled(policy("team-a-only", """
        matchConditions:
          - {name: team-a, expression: "object.metadata.labels['team'] == 'a'"}
          - {name: has-priority, expression: has(object.spec.priority)}
        validations:
          - expression: "false"
            message: always
    """))  # fmt: skip
    assert len(findings(policies, POD)) == 1
    other = {"metadata": {"name": "q", "labels": {"team": "b"}}, "spec": {"priority": 1}}
    assert findings(policies, other) == []


def test_message_expression_wins_and_falls_back_to_message_when_it_fails() -> None:
    policies = compiled(policy("named", """
        validations:
          - expression: "false"
            message: static
            messageExpression: "'pod ' + object.metadata.name + ' refused'"
          - expression: "false"
            message: static fallback
            messageExpression: "'x' + object.nope"
    """))  # fmt: skip
    assert [f.message for f in findings(policies, POD)] == ["pod p refused", "static fallback"]


def test_a_runtime_error_follows_failure_policy() -> None:
    body = """
        failurePolicy: {failure}
        validations:
          - expression: object.spec.missing > 1
            message: never shown
    """
    [failed] = findings(compiled(policy("strict", body.format(failure="Fail"))), POD)
    assert failed.denies and "failurePolicy Fail" in failed.message
    assert "missing" in failed.message and failed.reason == "InternalError"
    [ignored] = findings(compiled(policy("lenient", body.format(failure="Ignore"))), POD)
    assert ignored.actions == {"Audit"} and "failurePolicy Ignore" in ignored.message


def test_a_non_bool_result_is_an_error_not_a_pass() -> None:
    policies = compiled(policy("typo", """
        validations:
          - expression: object.metadata.name
    """))  # fmt: skip
    [found] = findings(policies, POD)
    assert found.denies and "expected a bool" in found.message


def test_targets_are_kept_apart() -> None:
    policies = compiled(policy("nodes", """
        validations:
          - expression: "false"
    """, target="nodeDefinition"))  # fmt: skip
    assert findings(policies, POD, target="pod") == []
    assert len(findings(policies, {"name": "h100"}, target="nodeDefinition")) == 1


# ---- documents and compile errors ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "wanted"),
    [
        ("validations: []", "no spec.validations"),
        ("failurePolicy: Sometimes\nvalidations: [{expression: 'true'}]", "failurePolicy"),
        ("validationActions: [Deny, Warn]\nvalidations: [{expression: 'true'}]", "Deny and Warn"),
        ("validationActions: [Block]\nvalidations: [{expression: 'true'}]", "validationActions"),
        ("validations: [{message: no expression}]", "expression must be a non-empty string"),
    ],
)
def test_a_bad_document_names_its_file_and_line(body: str, wanted: str) -> None:
    with pytest.raises(PolicyError) as error:
        parse_policy_file(policy("bad", body), "policies/bad.yaml", "repo")
    assert wanted in str(error.value) and "policies/bad.yaml:" in str(error.value)


def test_a_wrong_target_or_kind_is_refused() -> None:
    with pytest.raises(PolicyError, match=r"spec\.target"):
        parse_policy_file(policy("t", "validations: [{expression: 'true'}]", target="job"),
                          "p.yaml", "repo")  # fmt: skip
    with pytest.raises(PolicyError, match="not a policy document"):
        parse_policy_file("apiVersion: v1\nkind: ConfigMap\n", "p.yaml", "repo")


def test_compile_errors_are_all_reported_with_file_line_policy_and_column() -> None:
    with pytest.raises(PolicyCompileError) as error:
        compiled(
            policy("broken", """
                validations:
                  - expression: object.spec.priority >
                  - expression: object.metadata.name.noSuchFunction()
            """),
            policy("fine", "validations: [{expression: 'true'}]"),
        )  # fmt: skip
    problems = error.value.problems
    assert len(problems) == 2
    assert problems[0].startswith("p0.yaml:7 (spec.validations[0].expression): policy broken")
    assert "does not parse at column" in problems[0]
    assert "unknown function noSuchFunction" in problems[1]


# ---- shipped, repo-added, overridden ---------------------------------------------------


def test_a_repo_override_softens_or_turns_off_a_shipped_policy() -> None:
    shipped = shipped_documents(read_shipped_policies())
    names = {p.name for p in effective_policies(shipped, [])}
    assert "pod-grace-below-kill-wait" in names
    override = HEADER + textwrap.dedent("""\
        kind: PolicyOverride
        metadata: {name: pod-grace-below-kill-wait}
        spec: {validationActions: [Warn]}
        ---
        apiVersion: policy.reconciler.sunk.dev/v1alpha1
        kind: PolicyOverride
        metadata: {name: pod-static-cpu-pinning}
        spec: {disabled: true}
    """)
    changed = {
        p.name: p
        for p in effective_policies(shipped, parse_policy_file(override, "o.yaml", "repo"))
    }
    assert changed["pod-grace-below-kill-wait"].actions == {"Warn"}
    assert "pod-static-cpu-pinning" not in changed


def test_overriding_an_unknown_policy_or_reusing_a_shipped_name_is_an_error() -> None:
    shipped = shipped_documents(read_shipped_policies())
    unknown = HEADER + "kind: PolicyOverride\nmetadata: {name: nope}\nspec: {disabled: true}\n"
    with pytest.raises(ReconcilerError, match="no such policy"):
        effective_policies(shipped, parse_policy_file(unknown, "o.yaml", "repo"))
    twice = policy("pod-grace-below-kill-wait", "validations: [{expression: 'true'}]")
    with pytest.raises(ReconcilerError, match="defined twice"):
        effective_policies(shipped, parse_policy_file(twice, "t.yaml", "repo"))


# ---- plan time -------------------------------------------------------------------------


def _plan_with(tmp_path: Path, extra: str):
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURE_REPO, repo)
    (repo / "policies" / "extra.yaml").write_text(extra)
    config = load_config(read_repo(repo), read_library())
    state = compile_desired_state(config)
    return with_policies(plan_changes(state, None, offline=True), config, state)


def test_a_deny_on_compiled_objects_is_in_the_plan_and_apply_refuses_it(tmp_path: Path) -> None:
    extra = policy("two-replicas-at-most", """
        validations:
          - expression: object.replicas <= 1
            messageExpression: "'has ' + string(object.replicas) + ' replicas'"
    """, target="nodeDefinition") + "---\n" + policy("partitions-set-default", """
        validationActions: [Warn]
        validations:
          - expression: "'Default' in object.options"
            message: not the default partition
    """, target="partition") + "---\n" + policy("killwait-short", """
        validations:
          - expression: "int(object.options['KillWait']) < 30"
            messageExpression: "'KillWait is ' + object.options['KillWait']"
    """, target="slurmConfig")  # fmt: skip
    plan = _plan_with(tmp_path, extra)
    assert any(
        "nodeDefinition gpu-small: policy two-replicas-at-most" in d and "has 2 replicas" in d
        for d in plan.denials
    ), plan.denials
    assert not any("nodeDefinition cpu:" in d for d in plan.denials)
    defaults = [w for w in plan.warnings if "partitions-set-default" in w]
    assert len(defaults) == 1 and defaults[0].startswith("partition gpu: ")
    [killwait] = [d for d in plan.denials if "killwait-short" in d]
    assert killwait.startswith("slurmConfig: ") and killwait.endswith("KillWait is 30")


def test_the_fixture_repo_passes_its_own_policies(tmp_path: Path) -> None:
    config = load_config(read_repo(FIXTURE_REPO), read_library())
    state = compile_desired_state(config)
    plan = with_policies(plan_changes(state, None, offline=True), config, state)
    assert plan.denials == ()


# ---- reconciler policy test ------------------------------------------------------------


def test_the_shipped_policies_pass_their_own_cases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(ROOT / "policies")]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and " 0 failed" in out


def test_a_copy_of_the_shipped_policies_tests_as_them_and_an_edited_copy_as_a_repos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An installed reconciler (the image) tests a checkout's policies/ as the shipped ones;
    a copy with a change is a repo's policies, whose names then clash with the shipped."""
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    assert main(["policy", "test", str(tmp_path / "policies")]) == 0
    assert " 0 failed" in capsys.readouterr().out
    with (tmp_path / "policies" / "sunk-pods.yaml").open("a") as edited:
        edited.write("# edited\n")
    assert main(["policy", "test", str(tmp_path / "policies")]) != 0
    assert "is defined twice" in capsys.readouterr().err


def test_the_fixture_repo_passes_its_cases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "test", str(FIXTURE_REPO)]) == 0


def test_a_failing_case_says_what_differs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "p.yaml").write_text(policy("no-latest", """
        validations:
          - expression: "!object.spec.containers.exists(c, c.image.endsWith(':latest'))"
            message: pin the image
    """))  # fmt: skip
    (tmp_path / "tests" / "t.yaml").write_text(
        HEADER
        + textwrap.dedent("""\
        kind: PolicyTest
        metadata: {name: images}
        spec:
          cases:
            - name: latest is denied (wrongly expected to pass)
              params: {allowedUserIds: {'*': [1001]}}
              object: {metadata: {name: x, annotations: {sunk.coreweave.com/user-id: '1001'}},
                       spec: {terminationGracePeriodSeconds: 5,
                       containers: [{name: a, image: 'nginx:latest',
                                     resources: {requests: {cpu: '1', memory: 1Gi}}}]}}
              expect: {deny: []}
    """)
    )
    assert main(["policy", "test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL  latest is denied" in out and "Deny: expected none, got ['no-latest']" in out
    assert "pin the image" in out


# ---- the memo: a verdict remembered by the values a policy reads -----------------------

NAMED = policy("name-is-short", """
    validations:
      - expression: size(object.metadata.name) < 8
        messageExpression: "'name ' + object.metadata.name + ' is long'"
""")  # fmt: skip
GRACE = policy("grace", """
    validations:
      - expression: object.spec.terminationGracePeriodSeconds < params.limit
        message: too long
""")  # fmt: skip


def _pod(name: str, grace: int) -> dict:
    return {"metadata": {"name": name}, "spec": {"terminationGracePeriodSeconds": grace}}


def test_pods_that_differ_only_where_a_policy_does_not_look_share_its_verdict() -> None:
    policies = compiled(GRACE, NAMED)
    first = evaluate(policies, "pod", _pod("a-very-long-name", 40), "Pod a", params={"limit": 30})
    again = evaluate(policies, "pod", _pod("another-long-one", 40), "Pod b", params={"limit": 30})
    assert [(f.policy, f.subject) for f in first] == [
        ("grace", "Pod a"),
        ("name-is-short", "Pod a"),
    ]
    assert [f.message for f in again] == ["too long", "name another-long-one is long"]
    assert [f.subject for f in again] == ["Pod b", "Pod b"]
    grace = policies[0]
    assert grace.inputs == (
        ("object", "spec", "terminationGracePeriodSeconds"),
        ("params", "limit"),
    )
    assert len(grace.memo) == 1  # the second Pod was answered from it
    assert evaluate(policies, "pod", _pod("x", 10), "Pod c", params={"limit": 30}) == []
    assert len(evaluate(policies, "pod", _pod("x", 10), "Pod c", params={"limit": 5})) == 1


@given(
    names=st.lists(st.sampled_from(["a", "bb", "a-long-pod-name"]), min_size=1, max_size=6),
    graces=st.lists(st.sampled_from([None, 0, 10, 40]), min_size=1, max_size=6),
    limit=st.sampled_from([5, 30]),
)
def test_the_memo_never_changes_a_verdict(names: list, graces: list, limit: int) -> None:
    shared = compiled(GRACE, NAMED)
    for name, grace in zip(names, graces, strict=False):
        pod = {"metadata": {"name": name}, "spec": {}}
        if grace is not None:
            pod["spec"]["terminationGracePeriodSeconds"] = grace
        fresh = compiled(GRACE, NAMED)
        assert evaluate(shared, "pod", pod, name, params={"limit": limit}) == evaluate(
            fresh, "pod", pod, name, params={"limit": limit}
        )
