"""A config repo built to hurt is refused quickly, by name, and never leaks.

Alias bombs, deep nesting and huge files are refused with an error that names the file (and
the line where there is one) in well under a second; a symlink that leaves the repo is refused
without reading it. Real repos, many node definitions and YAML merge keys included, still load.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.compile.desired import compile_desired_state
from reconciler.config.files import read_repo
from reconciler.config.yamlfile import parse_yaml, parse_yaml_documents
from reconciler.errors import ConfigSyntaxError, ReconcilerError
from tests.unit.conftest import config_from

# 460 bytes that expand to 9**9 (387 million) list items: the classic YAML alias bomb.
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
ALIAS_BOMB = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n' + ALIAS_BOMB
OUTSIDE_SECRET = "secret-content-of-outside-file: hunter2\n"


def _render(repo: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    cli.build_parser()  # imports every command module once: not part of the refusal
    start = time.perf_counter()
    code = cli.main(["render", str(repo)])
    elapsed = time.perf_counter() - start
    return code, capsys.readouterr().err, elapsed


def _repo(root: Path, values: str, **files: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "values.yaml").write_text(values)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ---- aliases ------------------------------------------------------------------------------


def test_an_alias_bomb_is_refused_naming_file_and_line() -> None:
    start = time.perf_counter()
    with pytest.raises(ConfigSyntaxError) as err:
        config_from(ALIAS_BOMB)
    assert time.perf_counter() - start < 1.0
    text = str(err.value)
    assert text.startswith("values.yaml:")
    assert "aliases" in text and "hint:" in text


def test_render_refuses_the_alias_bomb_repo_in_under_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, elapsed = _render(_repo(tmp_path, ALIAS_BOMB + "compute: {nodes: {}}\n"), capsys)
    assert code == 1 and elapsed < 1.0
    assert err.startswith("error: values.yaml:")


def test_an_alias_bomb_in_a_policy_file_is_refused_too() -> None:
    with pytest.raises(ConfigSyntaxError, match=r"^policies/x.yaml:"):
        parse_yaml_documents(ALIAS_BOMB, "policies/x.yaml")


def test_a_recursive_alias_is_refused_not_a_crash() -> None:
    with pytest.raises(ConfigSyntaxError, match=r"^values.yaml:1: .*refers to itself"):
        parse_yaml("a: &a [1, *a]\n", "values.yaml")


def test_modest_aliases_and_merge_keys_still_load() -> None:
    config = config_from(
        """
        common: &common
          definitions: [cpu-epyc, las1]
          env: [{name: A, value: "1"}]
        compute:
          nodes:
            a: {<<: *common, replicas: 1}
            b:
              <<: *common
              replicas: 2
        """
    )
    nodes = config.values["compute"]["nodes"]
    assert nodes["b"]["definitions"] == ["cpu-epyc", "las1"] and nodes["b"]["replicas"] == 2


# ---- nesting ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 900 + "]" * 900 + "\n",  # within libyaml's limit: a RecursionError today
        "x: " + "{a: " * 500 + "1" + "}" * 500 + "\n",
        "x:\n" + "".join(" " * (i + 1) + "- \n" for i in range(300)),
    ],
    ids=["flow-lists", "flow-mappings", "block-lists"],
)
def test_deep_nesting_is_refused_naming_file_and_line(text: str) -> None:
    with pytest.raises(ConfigSyntaxError) as err:
        config_from(text)
    assert str(err.value).startswith("values.yaml:")
    assert "nested" in str(err.value)


def test_render_refuses_a_deeply_nested_repo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = "compute: {nodes: {}}\nx: " + "[" * 900 + "]" * 900 + "\n"
    code, err, elapsed = _render(_repo(tmp_path, values), capsys)
    assert code == 1 and elapsed < 1.0
    assert err.startswith("error: values.yaml:2") and "Traceback" not in err


def test_kubernetes_affinity_depth_is_fine() -> None:
    config_from(
        """
        compute:
          nodes:
            a:
              definitions: [cpu-epyc, las1]
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - key: topology.kubernetes.io/region
                            operator: In
                            values: [LAS1]
        """
    )


# ---- size ---------------------------------------------------------------------------------


def test_a_huge_file_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, "compute: {nodes: {}}\n")
    (repo / "values.d").mkdir()
    with (repo / "values.d" / "big.yaml").open("w") as big:
        big.truncate(64 * 2**20)  # sparse: 64 MiB on paper, nothing on disk
    code, err, elapsed = _render(repo, capsys)
    assert code == 1 and elapsed < 1.0
    assert err.startswith("error: values.d/big.yaml:") and "MiB" in err


def test_a_big_real_values_file_still_loads() -> None:
    """A SUNK values file with 2000 node definitions (a quarter of a megabyte)."""
    nodes = "".join(
        f"    n{i}:\n"
        "      definitions: [cpu-epyc, las1]\n"
        "      replicas: 1\n"
        "      env:\n"
        "        - {name: NCCL_DEBUG, value: WARN}\n"
        f"      features: [f{i}]\n"
        for i in range(2000)
    )
    config = config_from("compute:\n  nodes:\n" + nodes)
    assert len(config.values["compute"]["nodes"]) == 2000


# ---- symlinks -----------------------------------------------------------------------------


def test_a_symlink_out_of_the_repo_is_refused_without_its_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(OUTSIDE_SECRET)
    repo = _repo(tmp_path / "repo", "compute: {nodes: {}}\n")
    (repo / "values.d").mkdir()
    (repo / "values.d" / "x.yaml").symlink_to(outside)
    code, err, elapsed = _render(repo, capsys)
    assert code == 1 and elapsed < 1.0
    assert err.startswith("error: values.d/x.yaml: ")
    assert "outside the config repo" in err
    assert "secret" not in err and "hunter2" not in err and str(outside) not in err


def test_a_symlinked_directory_out_of_the_repo_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "a.yaml").write_text(OUTSIDE_SECRET)
    repo = _repo(tmp_path / "repo", "compute: {nodes: {}}\n")
    (repo / "compute-defs").mkdir()
    (repo / "compute-defs" / "shared").symlink_to(outside, target_is_directory=True)
    (repo / "compute-defs" / "b.yaml").symlink_to(outside / "a.yaml")
    with pytest.raises(ReconcilerError) as err:
        read_repo(repo)
    assert "compute-defs/b.yaml" in str(err.value) and "hunter2" not in str(err.value)


def test_a_symlink_inside_the_repo_is_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "compute: {nodes: {}}\n", **{"shared/extra.yaml": "killWait: 5\n"})
    (repo / "values.d").mkdir()
    (repo / "values.d" / "extra.yaml").symlink_to(repo / "shared" / "extra.yaml")
    assert read_repo(repo)["values.d/extra.yaml"] == "killWait: 5\n"


# ---- many files ---------------------------------------------------------------------------

# 6**6 = 46 656 values: a modest file, but many of them add up.
SMALL_BOMB = 'a: &a ["x", "x", "x", "x", "x", "x"]\n' + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 6)}]\n"
    for prev, name in zip("abcde", "bcdef", strict=True)
)


def test_small_alias_bombs_in_many_files_add_up() -> None:
    files = {f"values.d/{i:02}.yaml": SMALL_BOMB for i in range(10)}
    with pytest.raises(
        ConfigSyntaxError, match=r"^values.d/0[1-9].yaml:\d+: the config repo holds"
    ):
        config_from("compute: {nodes: {}}\n", files)


def test_policy_files_draw_on_the_same_budget() -> None:
    files = {f"policies/{i:02}.yaml": SMALL_BOMB for i in range(10)}
    with pytest.raises(
        ConfigSyntaxError, match=r"^policies/0[1-9].yaml:\d+: the config repo holds"
    ):
        config_from("compute: {nodes: {}}\n", files)


def test_a_repo_of_too_many_files_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "compute: {nodes: {}}\n")
    (repo / "values.d").mkdir()
    for i in range(1200):
        (repo / "values.d" / f"{i:04}.yaml").write_text("{}\n")
    start = time.perf_counter()
    with pytest.raises(
        ReconcilerError, match=r"^values.d/\d{4}.yaml: the config repo has more than"
    ):
        read_repo(repo)
    assert time.perf_counter() - start < 1.0


# ---- long lists ---------------------------------------------------------------------------


def test_a_long_env_list_is_layered_in_linear_time() -> None:
    """Named list items were matched by a scan of the list for each one: 8000 env entries
    (270 KB, no alias) took 9 s. Within the caps, a repo is compiled in about a second."""
    env = "".join(f"        - {{name: V{i}, value: x}}\n" for i in range(20_000))
    values = "compute:\n  nodes:\n    a:\n      definitions: [cpu-epyc, las1]\n      env:\n"
    start = time.perf_counter()
    config = config_from(values + env)
    compile_desired_state(config)
    assert time.perf_counter() - start < 5.0
