"""Commit signature verification for the git source (`--verify-signatures --trusted-keys FILE`).

The operator's public keys are imported once into a private GNUPGHOME that holds nothing else,
and `git verify-commit --raw` is run against it: a commit is trusted only when gpg reports a
good, valid signature by one of those keys. The user's own ~/.gnupg is never read or written,
and gpg is never allowed to fetch a key from the network or to start an agent.

Only the head commit is verified: it is the only tree the daemon checks out, and a trusted
signature on it vouches for that whole tree, whatever the commits below it hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import SourceError

# The keyring holds exactly the keys the operator listed in --trusted-keys, so being in it is
# the trust decision. gpg's web of trust would only demand an ownertrust for each of them;
# `always` makes any key of this keyring valid, while a key outside it still fails (ERRSIG).
# A signature must not pull its key from a keyserver or WKD into the keyring, and no agent is
# needed for public keys (and none would be left running behind the daemon).
GPG_CONF = "trust-model always\nno-auto-key-retrieve\nno-autostart\n"

TIMEOUT_SECONDS = 60
UNKNOWN_KEY_RC = "9"  # gpg's GPG_ERR_NO_PUBKEY in an ERRSIG line
ARMOR_HEADERS = {
    "-----BEGIN PGP SIGNATURE-----": "openpgp",
    "-----BEGIN SSH SIGNATURE-----": "ssh",
    "-----BEGIN SIGNED MESSAGE-----": "x509",
}


@dataclass(frozen=True)
class Verdict:
    """gpg's answer for one commit: `signer` when trusted, else `reason` and `hint`."""

    signer: str = ""  # fingerprint of the trusted primary key that signed
    reason: str = ""
    hint: str = ""

    @property
    def trusted(self) -> bool:
        return bool(self.signer) and not self.reason


def verifier_for(
    verify: bool, trusted_keys: Path | None, home_parent: Path
) -> SignatureVerifier | None:
    """The verifier the two flags ask for, or None; a flag without the other is an error,
    since either half alone would let an operator believe commits are checked."""
    if trusted_keys is not None and not verify:
        raise SourceError(
            "--trusted-keys is given without --verify-signatures",
            hint="add --verify-signatures (RECONCILER_VERIFY_SIGNATURES=true) or drop "
            "--trusted-keys",
        )
    if not verify:
        return None
    if trusted_keys is None:
        raise SourceError(
            "--verify-signatures needs --trusted-keys FILE",
            hint="FILE holds the ASCII-armored public keys allowed to sign the branch: "
            "gpg --export --armor KEYID... > FILE",
        )
    return SignatureVerifier(trusted_keys, home_parent)


class SignatureVerifier:
    """A private GNUPGHOME holding the keys of `keyring`, built at construction, so a missing
    gpg or a bad keyring file stops the daemon at startup rather than at the first push."""

    def __init__(self, keyring: Path, home_parent: Path) -> None:
        self.keyring = Path(keyring)
        self._gpg = _find_gpg()
        armored = _read_keyring(self.keyring)
        home_parent.mkdir(parents=True, exist_ok=True)
        # mkdtemp makes it 0700, which gpg insists on; removed when the process exits.
        self._home = tempfile.TemporaryDirectory(prefix="gnupg-", dir=home_parent)
        (self.home / "gpg.conf").write_text(GPG_CONF)
        self._import(armored)
        self.fingerprints = self._list_fingerprints()

    @property
    def home(self) -> Path:
        return Path(self._home.name)

    def verify(self, repo: Path, sha: str) -> Verdict:
        kind = signature_kind(_commit_object(repo, sha))
        if kind is None:
            return _unsigned(self.keyring)
        if kind != "openpgp":
            return Verdict(
                reason=f"signed with {kind}, not OpenPGP",
                hint=f"sign with an OpenPGP key whose public part is in {self.keyring}",
            )
        done = _git(
            repo, "-c", f"gpg.program={self._gpg}", "verify-commit", "--raw", sha, env=self._env()
        )
        # git's exit status also reflects its own trust settings (gpg.minTrustLevel), which
        # this keyring replaces: the status lines alone decide.
        return verdict_of(done.stderr, self.fingerprints, self.keyring)

    def _env(self) -> dict[str, str]:
        # For this subprocess only: the daemon's own environment keeps the user's GNUPGHOME.
        return {**os.environ, "GNUPGHOME": str(self.home)}

    def _import(self, armored: bytes) -> None:
        done = self._run_gpg(["--import"], armored)
        if done.returncode != 0 or b"IMPORT_OK" not in done.stdout:
            raise SourceError(
                f"--trusted-keys {self.keyring}: gpg imported no public key from it "
                f"({_first_line(done.stderr)})",
                hint="the file must hold ASCII-armored public keys: "
                "gpg --export --armor KEYID... > FILE",
            )

    def _list_fingerprints(self) -> frozenset[str]:
        done = self._run_gpg(["--list-keys", "--with-colons"], b"")
        fields = (line.split(":") for line in done.stdout.decode().splitlines())
        return frozenset(f[9].upper() for f in fields if f[0] == "fpr" and len(f) > 9)

    def _run_gpg(self, args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(
                [self._gpg, "--batch", "--status-fd", "1", *args], input=stdin,
                capture_output=True, env=self._env(), timeout=TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SourceError(f"cannot run {self._gpg}: {error}") from None


def signature_kind(commit_object: str) -> str | None:
    """The kind of the commit's signature ("openpgp", "ssh", "x509"), or None when unsigned.

    Checked before git runs a verifier, so an SSH or X.509 signature never reaches ssh-keygen
    or gpgsm, whose trust does not come from --trusted-keys."""
    for line in commit_object.splitlines():
        if not line:  # the headers end at the first empty line; the message follows
            break
        name, _, value = line.partition(" ")
        if name in ("gpgsig", "gpgsig-sha256"):
            return ARMOR_HEADERS.get(value.strip(), "an unknown kind of signature")
    return None


def verdict_of(status: str, trusted: frozenset[str], keyring: Path) -> Verdict:
    """Judge gpg's status lines (`[GNUPG:] KEYWORD args`) for one commit signature."""
    lines = [line.split()[1:] for line in status.splitlines() if line.startswith("[GNUPG:] ")]
    for words in lines:
        refused = _refusal(words, keyring)
        if refused is not None:
            return refused
    if not any(w[0] == "GOODSIG" for w in lines if w):
        return Verdict(
            reason=f"gpg found no good signature ({_last_line(status)})",
            hint="re-sign the commit with an OpenPGP key in --trusted-keys",
        )
    signers = [_primary_fingerprint(w) for w in lines if w and w[0] == "VALIDSIG"]
    if not signers or any(s not in trusted for s in signers):
        return Verdict(
            reason=f"signed by a key outside {keyring}",
            hint="add the signer's public key to the --trusted-keys file and restart",
        )
    return Verdict(signer=signers[0])


def _refusal(words: list[str], keyring: Path) -> Verdict | None:
    keyword, args = (words[0], words[1:]) if words else ("", [])
    key = f"0x{args[0]}" if args else "(unknown)"
    if keyword == "BADSIG":
        return Verdict(
            reason=f"bad signature by {key}: the commit is not what was signed",
            hint="do not trust this push: find who pushed it, and re-sign the intended commit",
        )
    if keyword == "ERRSIG":
        # ERRSIG keyid pkalgo hashalgo class time rc [fingerprint]: the fingerprint is better
        # for people, it is what `gpg --export` takes.
        shown = f"0x{args[6]}" if len(args) > 6 else key
        if len(args) > 5 and args[5] == UNKNOWN_KEY_RC:
            return Verdict(
                reason=f"signed by unknown key {shown} not in --trusted-keys {keyring}",
                hint=f"if {shown} may sign this branch, append its public key "
                f"(gpg --export --armor {shown} >> {keyring}) and restart; else revert the push",
            )
        return Verdict(
            reason=f"gpg cannot check the signature by {shown} (gpg error "
            f"{args[5] if len(args) > 5 else '?'})",
            hint="re-sign the commit with a current OpenPGP key",
        )
    if keyword in ("EXPKEYSIG", "REVKEYSIG", "EXPSIG"):
        what = {"EXPKEYSIG": "an expired key", "REVKEYSIG": "a revoked key"}.get(keyword, "")
        return Verdict(
            reason=f"signed by {what} {key}" if what else f"the signature by {key} has expired",
            hint=f"re-sign with a valid key in {keyring} (or put the key's renewed public "
            "part there and restart)",
        )
    return None


def _primary_fingerprint(words: list[str]) -> str:
    # VALIDSIG fpr date time expire version reserved pkalgo hashalgo class [primary-fpr]
    return (words[10] if len(words) > 10 else words[1] if len(words) > 1 else "").upper()


def _unsigned(keyring: Path) -> Verdict:
    return Verdict(
        reason="unsigned",
        hint=f"sign it with a key whose public part is in {keyring} (git commit --amend -S, "
        "or push a signed commit on top)",
    )


def _find_gpg() -> str:
    found = shutil.which("gpg")
    if found is None:
        raise SourceError(
            "--verify-signatures needs the gpg binary, and there is none on PATH",
            hint="install GnuPG (Debian: apt-get install gpg)",
        )
    return found


def _read_keyring(keyring: Path) -> bytes:
    try:
        data = keyring.read_bytes()
    except OSError as error:
        raise SourceError(
            f"cannot read --trusted-keys {keyring}: {error.strerror}",
            hint="the file of public keys must be readable by the daemon",
        ) from None
    if not data.strip():
        raise SourceError(
            f"--trusted-keys {keyring} is empty",
            hint="export the keys allowed to sign: gpg --export --armor KEYID... > FILE",
        )
    return data


def _commit_object(repo: Path, sha: str) -> str:
    done = _git(repo, "cat-file", "commit", sha)
    if done.returncode != 0:
        raise SourceError(f"cannot read commit {sha[:12]}: {_last_line(done.stderr)}")
    return done.stdout


def _git(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=repo, capture_output=True, text=True, env=env,
            timeout=TIMEOUT_SECONDS, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SourceError(f"cannot run git {args[0]}: {error}") from None


def _first_line(text: bytes) -> str:
    # gpg's first complaint is the cause ("no valid OpenPGP data found"); before it come notes
    # on the new keybox and the absent agent, after it a summary.
    noise = ("gpg: keybox ", "gpg: no gpg-agent")
    lines = [line.strip() for line in text.decode(errors="replace").splitlines()]
    return next((line for line in lines if line and not line.startswith(noise)), "no output")


def _last_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
