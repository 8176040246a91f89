"""`reconciler policy test DIR`: run a repo's policy test cases, as CI would."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reconciler.config.files import read_files, read_library, read_shipped_policies
from reconciler.config.policy_file import Override, Policy, parse_policy_file
from reconciler.config.repo import VALUES_FILE, is_repo_file, load_config
from reconciler.errors import ReconcilerError
from reconciler.policy.engine import compile_policies, effective_policies
from reconciler.policy.loader import shipped_documents
from reconciler.policy.subjects import default_params, params_of
from reconciler.policy.testing import CaseResult, parse_test_file, run_cases


def register(sub: argparse._SubParsersAction) -> None:
    policy = sub.add_parser("policy", help="CEL policies: test them against example objects")
    actions = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    test = actions.add_parser(
        "test",
        help="run policies/tests/*.yaml (kind: PolicyTest) against the policies",
        description=(
            "DIR is a config repo (values.yaml, policies/*.yaml, policies/tests/*.yaml) or a "
            "folder of policies (*.yaml, tests/*.yaml), such as the shipped policies/. The "
            "shipped policies are always loaded, with the repo's added and overridden as a "
            "revision would have them. Exit 1 if a case fails."
        ),
    )
    test.add_argument("dir", type=Path, metavar="DIR")
    test.add_argument("-v", "--verbose", action="store_true", help="show every finding")
    test.set_defaults(func=run_policy_test)


def run_policy_test(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if not root.is_dir():
        raise ReconcilerError(f"{root} is not a directory", hint="pass a config repo or policies/")
    repo_docs, params, tests = _suite(root)
    if not tests:
        raise ReconcilerError(
            f"no test files in {tests_dir(root)}",
            hint="add *.yaml files of kind: PolicyTest (see docs/policies.md)",
        )
    policies = compile_policies(effective_policies(shipped_documents(read_shipped_policies()),
                                                   repo_docs))  # fmt: skip
    cases = [
        case
        for rel, text in tests.items()
        for case in parse_test_file(text, str(root / rel), params)
    ]
    results = run_cases(policies, cases)
    for result in results:
        _report(result, args.verbose)
    failed = sum(not r.passed for r in results)
    print(f"\n{len(results) - failed} passed, {failed} failed ({len(policies)} policies)")
    return 1 if failed else 0


def tests_dir(root: Path) -> Path:
    return root / _tests_folder(root)


def _tests_folder(root: Path) -> str:
    return "policies/tests" if (root / VALUES_FILE).exists() else "tests"


def _suite(root: Path) -> tuple[list[Policy | Override], dict[str, Any], dict[str, str]]:
    """(the repo's policies, params, test file -> text), every file read as the repo's are
    (config/files.read_files): sizes capped, no link out of DIR, no special file."""
    folder = _tests_folder(root) + "/"

    def is_test(rel: str) -> bool:
        return rel.startswith(folder) and _is_yaml(rel.removeprefix(folder))

    if (root / VALUES_FILE).exists():
        found = read_files(root, lambda rel: is_repo_file(rel) or is_test(rel))
        tests = {rel: text for rel, text in found.items() if is_test(rel)}
        repo = {rel: text for rel, text in found.items() if rel not in tests}
        config = load_config(repo, read_library())
        return list(config.policies), params_of(config), tests
    found = read_files(root, lambda rel: is_test(rel) or _is_yaml(rel))
    tests = {rel: text for rel, text in found.items() if is_test(rel)}
    files = {rel: text for rel, text in found.items() if rel not in tests}
    # The shipped policies themselves, wherever this copy of them lies (a checkout's
    # policies/ beside an installed reconciler, say): loading them again would define each twice.
    if files == read_shipped_policies():
        return [], default_params(), tests
    docs = [
        doc
        for name, text in files.items()
        for doc in parse_policy_file(text, str(root / name), "repo")
    ]
    return docs, default_params(), tests


def _is_yaml(name: str) -> bool:
    """A YAML file directly in the folder (not below it)."""
    return "/" not in name and name.endswith(".yaml")


def _report(result: CaseResult, verbose: bool) -> None:
    case = result.case
    print(f"{'PASS' if result.passed else 'FAIL'}  {case.name}  ({case.where})")
    for line in result.differences():
        print(f"      {line}")
    if verbose or not result.passed:
        for finding in result.findings:
            actions = ",".join(sorted(finding.actions))
            print(f"      [{actions}] {finding.policy}: {finding.message}")
