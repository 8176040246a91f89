"""`--verify-signatures`: real git repositories, real gpg keys, real signed commits."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.cli import _subcommand, build_parser
from reconciler.cli.run import _source
from reconciler.cli.settings import layered_defaults
from reconciler.errors import ReconcilerError, SourceError
from reconciler.sources.git import GitSource
from reconciler.sources.signatures import signature_kind, verdict_of
from tests.unit.git_remote import git, new_remote


@dataclass(frozen=True)
class Keys:
    home: Path  # the signer's GNUPGHOME, holding both secret keys
    trusted: str  # fingerprint of the key exported to `keyring`
    other: str  # fingerprint of a key nobody trusts
    keyring: Path  # ASCII-armored public part of `trusted` only


def gpg(home: Path, *args: str) -> str:
    return subprocess.run(
        ["gpg", "--batch", *args], env={**os.environ, "GNUPGHOME": str(home)},
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def new_key(home: Path, uid: str) -> str:
    gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    colons = gpg(home, "--list-keys", "--with-colons", uid)
    return next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keys]:
    """Two signing keys, made once for the module (key generation is the slow part)."""
    base = tmp_path_factory.mktemp("gpg")
    home = base / "signer"
    home.mkdir(mode=0o700)
    trusted = new_key(home, "Trusted <trusted@example.org>")
    other = new_key(home, "Other <other@example.org>")
    keyring = base / "trusted.asc"
    keyring.write_text(gpg(home, "--export", "--armor", trusted))
    yield Keys(home, trusted, other, keyring)
    # Signing started a gpg-agent for this home: stop that one.
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env={**os.environ, "GNUPGHOME": str(home)},
                   check=False)  # fmt: skip


@pytest.fixture
def remote(tmp_path: Path) -> tuple[Path, Path]:
    return new_remote(tmp_path)


def push(work: Path, text: str, *, key: str | None = None, keys: Keys | None = None) -> str:
    """Commit values.yaml holding `text`, signed by `key` (a fingerprint) or unsigned."""
    (work / "values.yaml").write_text(text)
    git(work, "add", "values.yaml")
    if key is None:
        git(work, "-c", "commit.gpgsign=false", "commit", "-q", "-m", text.strip())
    else:
        assert keys is not None
        git(work, "-c", f"user.signingkey={key}", "-c", "gpg.program=gpg",
            "commit", "-q", "-S", "-m", text.strip(), home=keys.home)  # fmt: skip
    git(work, "push", "-q", "origin", "main")
    return git(work, "rev-parse", "HEAD")


def verifying(bare: Path, checkout: Path, keys: Keys) -> GitSource:
    return GitSource(str(bare), "main", checkout, verify_signatures=True, trusted_keys=keys.keyring)


def test_a_commit_signed_by_a_trusted_key_is_fetched(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    head = push(work, "release: a\n", key=keys.trusted, keys=keys)
    revision = verifying(bare, tmp_path / "checkout", keys).fetch()
    assert revision.id == head
    assert (revision.path / "values.yaml").read_text() == "release: a\n"


def test_an_unsigned_head_is_refused_and_the_checkout_stays(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    good = push(work, "release: a\n", key=keys.trusted, keys=keys)
    source = verifying(bare, tmp_path / "checkout", keys)
    checkout = source.fetch().path
    unsigned = push(work, "release: evil\n")
    with pytest.raises(SourceError) as caught:
        source.fetch()
    text = str(caught.value)
    assert f"refusing commit {unsigned[:12]} of branch 'main'" in text
    assert ": unsigned" in text and "hint: sign it" in text
    assert git(checkout, "rev-parse", "HEAD") == good
    assert (checkout / "values.yaml").read_text() == "release: a\n"
    # The fix the hint names: a signed commit on top is taken.
    fixed = push(work, "release: b\n", key=keys.trusted, keys=keys)
    assert source.fetch().id == fixed


def test_an_unsigned_head_is_never_checked_out_even_by_the_first_clone(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    push(work, "release: evil\n")
    with pytest.raises(SourceError, match="unsigned"):
        verifying(bare, tmp_path / "checkout", keys).fetch()
    assert not (tmp_path / "checkout" / "values.yaml").exists()


def test_a_commit_signed_by_an_unknown_key_is_refused(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    head = push(work, "release: a\n", key=keys.other, keys=keys)
    with pytest.raises(SourceError) as caught:
        verifying(bare, tmp_path / "checkout", keys).fetch()
    text = str(caught.value)
    assert head[:12] in text
    assert f"signed by unknown key 0x{keys.other} not in --trusted-keys {keys.keyring}" in text


def test_a_commit_changed_after_signing_has_a_bad_signature(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    bare, work = remote
    signed = push(work, "release: a\n", key=keys.trusted, keys=keys)
    # The same commit object, signature and all, with its message changed.
    body = git(work, "cat-file", "commit", signed).replace("release: a", "release: forged")
    forged = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"], cwd=work, input=body + "\n",
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    git(work, "push", "-q", "--force", "origin", f"{forged}:refs/heads/main")
    with pytest.raises(SourceError, match=f"refusing commit {forged[:12]}.*bad signature"):
        verifying(bare, tmp_path / "checkout", keys).fetch()


@pytest.mark.parametrize(
    ("keyring_text", "error"),
    [
        (None, "cannot read --trusted-keys .*absent.asc: No such file"),
        ("  \n", "--trusted-keys .*absent.asc is empty"),
        ("not a key\n", "gpg imported no public key from it"),
    ],
)
def test_a_bad_keyring_fails_at_startup(
    tmp_path: Path, keyring_text: str | None, error: str
) -> None:
    keyring = tmp_path / "absent.asc"
    if keyring_text is not None:
        keyring.write_text(keyring_text)
    with pytest.raises(SourceError, match=error):
        GitSource("unused", "main", tmp_path / "c", verify_signatures=True, trusted_keys=keyring)


def test_a_missing_gpg_fails_at_startup(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no gpg on it
    with pytest.raises(SourceError, match="needs the gpg binary"):
        GitSource("u", "main", tmp_path / "c", verify_signatures=True, trusted_keys=keys.keyring)


def test_each_flag_needs_the_other(keys: Keys, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="--verify-signatures needs --trusted-keys FILE"):
        GitSource("u", "main", tmp_path / "c", verify_signatures=True)
    with pytest.raises(SourceError, match="--trusted-keys is given without --verify-signatures"):
        GitSource("u", "main", tmp_path / "c", trusted_keys=keys.keyring)


def test_the_private_gnupghome(keys: Keys, remote: tuple[Path, Path], tmp_path: Path) -> None:
    bare, work = remote
    push(work, "release: a\n", key=keys.trusted, keys=keys)
    source = verifying(bare, tmp_path / "checkout", keys)
    source.fetch()
    home = source._verifier.home  # type: ignore[union-attr]
    assert home.parent == tmp_path and home.stat().st_mode & 0o777 == 0o700
    assert "trust-model always" in (home / "gpg.conf").read_text()
    assert source._verifier.fingerprints >= {keys.trusted}  # type: ignore[union-attr]
    assert not list(home.glob("S.gpg-agent*"))  # no agent started for it
    assert os.environ.get("GNUPGHOME") != str(home)


def test_other_sources_refuse_the_flags(keys: Keys, tmp_path: Path) -> None:
    args = parse(["run", "--source-dir", str(tmp_path), "--verify-signatures"], {})
    with pytest.raises(ReconcilerError, match="work with --git-url only"):
        _source(args, None, tmp_path)  # type: ignore[arg-type]


def parse(argv: list[str], environ: dict[str, str]) -> object:
    parser = build_parser()
    run = _subcommand(parser, "run")
    run.set_defaults(**layered_defaults(run, argv, environ))
    return parser.parse_args(argv)


def test_the_flags_come_from_the_environment_and_the_config_file(tmp_path: Path) -> None:
    environ = {"RECONCILER_VERIFY_SIGNATURES": "true", "RECONCILER_TRUSTED_KEYS": "/k/a.asc"}
    args = parse(["run"], environ)
    assert args.verify_signatures is True  # type: ignore[attr-defined]
    assert args.trusted_keys == Path("/k/a.asc")  # type: ignore[attr-defined]
    config = tmp_path / "run.yaml"
    config.write_text("verify-signatures: true\ntrusted-keys: /k/b.asc\n")
    args = parse(["run", "--config", str(config)], {})
    assert (args.verify_signatures, args.trusted_keys) == (True, Path("/k/b.asc"))  # type: ignore[attr-defined]
    assert parse(["run"], {}).verify_signatures is False  # type: ignore[attr-defined]


FPR = "D0438A316D015F4F185E88FA6BE0F6ADBD4D3CAF"


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (f"[GNUPG:] EXPKEYSIG 6BE0F6ADBD4D3CAF T\n[GNUPG:] VALIDSIG {FPR} x 1 0 4 0 22 8 00 {FPR}",
         "signed by an expired key 0x6BE0F6ADBD4D3CAF"),
        ("[GNUPG:] REVKEYSIG 6BE0F6ADBD4D3CAF T", "signed by a revoked key"),
        ("[GNUPG:] BADSIG 6BE0F6ADBD4D3CAF T", "bad signature"),
        ("[GNUPG:] ERRSIG 6BE0F6ADBD4D3CAF 22 8 00 1795332892 4", "gpg cannot check"),
        (f"[GNUPG:] GOODSIG 1 T\n[GNUPG:] VALIDSIG {'0' * 40} x 1 0 4 0 22 8 00 {'0' * 40}",
         "signed by a key outside"),
        ("", "no good signature"),
    ],
)  # fmt: skip
def test_gpg_status_lines_that_refuse(status: str, reason: str) -> None:
    verdict = verdict_of(status, frozenset({FPR}), Path("k.asc"))
    assert not verdict.trusted and reason in verdict.reason


def test_only_openpgp_signatures_are_checked() -> None:
    header = "tree 1\nauthor A <a@b> 1 +0000\ngpgsig {}\n line\n\nmessage\ngpgsig in the body\n"
    assert signature_kind(header.format("-----BEGIN PGP SIGNATURE-----")) == "openpgp"
    assert signature_kind(header.format("-----BEGIN SSH SIGNATURE-----")) == "ssh"
    assert signature_kind("tree 1\n\ngpgsig -----BEGIN PGP SIGNATURE-----\n") is None


def test_a_force_push_of_an_older_signed_commit_is_refused(
    keys: Keys, remote: tuple[Path, Path], tmp_path: Path
) -> None:
    """Every commit is signed, so the signature check alone passes a
    rollback; the head must also descend from the revision applied last."""
    bare, work = remote
    old = push(work, "release: a\n", key=keys.trusted, keys=keys)
    new = push(work, "release: b\n", key=keys.trusted, keys=keys)
    applied = [""]
    source = GitSource(str(bare), "main", tmp_path / "checkout", verify_signatures=True,
                       trusted_keys=keys.keyring, applied=lambda: (applied[0], ""))  # fmt: skip
    assert source.fetch().id == new
    applied[0] = new
    git(work, "push", "-q", "--force", "origin", f"{old}:refs/heads/main")
    with pytest.raises(SourceError, match=f"does not descend from {new[:12]}.*--allow-non"):
        source.fetch()
