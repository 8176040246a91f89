"""The Slurm release a render targets: the one parser, the order of its sources (slurmctld,
slurmConfig.release, our image's tag, the default), the plan's note when slurmctld and the
values disagree, and the values key's errors naming the file, line and key."""

from __future__ import annotations

import pytest

from reconciler.compile.desired import compile_desired_state
from reconciler.compile.target_release import DEFAULT_RELEASE, target_release
from reconciler.errors import ConfigTypeError
from reconciler.slurm_release import ReleaseError, SlurmRelease, maybe_release, parse_release
from tests.unit.conftest import config_from


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("26.05.3", SlurmRelease(26, 5, 3)),
        ("slurm 25.11.7", SlurmRelease(25, 11, 7)),  # slurmctld -V
        ("Slurm-24.11.5", SlurmRelease(24, 11, 5)),
        ("slurm-25-11-7-1", SlurmRelease(25, 11, 7)),  # SchedMD's tag
        ("26.05", SlurmRelease(26, 5, 0)),
        ("26.05.0-0rc1", SlurmRelease(26, 5, 0)),
    ],
)
def test_parse_release_reads_the_spellings_slurm_uses(text: str, want: SlurmRelease) -> None:
    assert parse_release(text) == want


@pytest.mark.parametrize("text", ["", "latest", "25", "25.13.1", "v25.11", "2511"])
def test_parse_release_refuses_what_names_no_release(text: str) -> None:
    with pytest.raises(ReleaseError):
        parse_release(text)
    assert maybe_release(text) is None


def test_releases_order_and_print_as_slurm_does() -> None:
    assert SlurmRelease(24, 11, 5) < SlurmRelease(25, 5) < SlurmRelease(25, 11, 7)
    assert str(SlurmRelease(26, 5, 3)) == "26.05.3" and str(SlurmRelease(25, 11)) == "25.11"
    assert SlurmRelease(26, 5, 3).series == "26.05"
    assert SlurmRelease(25, 11).at_least(25, 5) and not SlurmRelease(24, 11).at_least(25, 5)


def test_the_live_release_wins_and_the_plan_says_when_the_values_disagree() -> None:
    values = {"slurmConfig": {"release": "25.11"}}
    live = SlurmRelease(26, 5, 3)
    target = target_release(values, live)
    assert (target.release, target.source) == (live, "slurmctld")
    assert target.notes == (
        "slurmConfig.release is 25.11, but slurmctld runs Slurm 26.05.3: rendering for 26.05; "
        'set slurmConfig.release: "26.05.3" (or remove it) to match',
    )
    assert target_release(values, SlurmRelease(25, 11, 7)).notes == ()  # a series agrees
    patch = {"slurmConfig": {"release": "25.11.5"}}
    assert target_release(patch, SlurmRelease(25, 11, 7)).notes


def test_offline_the_values_key_then_our_image_tag_then_the_default() -> None:
    keyed = target_release({"slurmConfig": {"release": "25.11.7"}})
    assert (keyed.release, keyed.source) == (SlurmRelease(25, 11, 7), "slurmConfig.release")
    tagged = target_release({"image": {"tag": "26.05.3"}})
    assert (tagged.release, tagged.source) == (SlurmRelease(26, 5, 3), "image tag")
    # Someone else's image (its tag says nothing we can trust) or a tag that is no release.
    other = {"controller": {"image": {"repository": "example.com/slurm", "tag": "25.11.7"}}}
    assert target_release(other).release == DEFAULT_RELEASE
    assert target_release({"image": {"tag": "nightly"}}).release == DEFAULT_RELEASE
    default = target_release({})
    assert (default.release, default.source) == (SlurmRelease(24, 11, 5), "default")
    assert str(default) == (
        "Slurm 24.11.5 (our image's release; set slurmConfig.release for another)"
    )


def test_a_compile_records_the_release_and_warns_when_slurmctld_disagrees() -> None:
    config = config_from('slurmConfig:\n  release: "25.11.7"\n')
    state = compile_desired_state(config, live_release=SlurmRelease(26, 5, 3))
    assert state.slurm_release.release == SlurmRelease(26, 5, 3)
    assert [w.where for w in state.warnings if "slurmctld runs" in w.message] == [
        "slurmConfig.release"
    ]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('  release: "latest"', "'latest' is not a Slurm release"),
        ("  release: 25.11", "slurmConfig.release must be a string, got number 25.11"),
        ('  release: "25.13"', "13 is not a month"),
    ],
)
def test_a_bad_release_key_is_an_error_naming_file_line_and_key(line: str, why: str) -> None:
    with pytest.raises(ConfigTypeError, match=why) as error:
        config_from(f"slurmConfig:\n{line}\n")
    assert str(error.value.where) == "values.yaml:2 (slurmConfig.release)"
