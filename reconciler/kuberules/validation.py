"""The name rules of k8s.io/apimachinery/pkg/util/validation (v1.20.2, the same upstream today):
IsQualifiedName (label keys, resource names), IsValidLabelValue, IsDNS1123Label and
IsDNS1123Subdomain. Each returns Kubernetes' reasons for refusing the value, in its words, and
[] when the value is valid; callers print them as Kubernetes does. Lengths count UTF-8 bytes, as
Go's len does (a name outside ASCII is refused by the pattern anyway).
"""

from __future__ import annotations

import re
from typing import Final

QUALIFIED_NAME_MAX_LENGTH: Final = 63
LABEL_VALUE_MAX_LENGTH: Final = 63
DNS1123_LABEL_MAX_LENGTH: Final = 63
DNS1123_SUBDOMAIN_MAX_LENGTH: Final = 253

_EMPTY: Final = "must be non-empty"

_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT: Final = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT: Final = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)

_QUALIFIED_NAME = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(_LABEL_VALUE_FMT)
_DNS1123_LABEL = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)


def is_qualified_name(value: str) -> list[str]:
    """An optional DNS-subdomain prefix and "/", then a name of 63 bytes or fewer of
    alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric."""
    parts = value.split("/")
    if len(parts) > 2:
        prefixed = "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        return [f"a qualified name {_name_regex_error()} {prefixed}"]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        prefix_errors = is_dns1123_subdomain(prefix) if prefix else [_EMPTY]
        errors += [f"prefix part {error}" for error in prefix_errors]
    name = parts[-1]
    if not name:
        errors.append(f"name part {_EMPTY}")
    elif _length(name) > QUALIFIED_NAME_MAX_LENGTH:
        errors.append(f"name part {_max_len_error(QUALIFIED_NAME_MAX_LENGTH)}")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append(f"name part {_name_regex_error()}")
    return errors


def is_valid_label_value(value: str) -> list[str]:
    """Empty, or a qualified name's name part."""
    examples = ("MyValue", "my_value", "12345")
    return _errors(value, LABEL_VALUE_MAX_LENGTH, _LABEL_VALUE, _LABEL_VALUE_MSG, examples)


def is_dns1123_label(value: str) -> list[str]:
    """63 bytes or fewer of lowercase alphanumerics and '-', starting and ending with an
    alphanumeric."""
    examples = ("my-name", "123-abc")
    return _errors(value, DNS1123_LABEL_MAX_LENGTH, _DNS1123_LABEL, _DNS1123_LABEL_MSG, examples)


def is_dns1123_subdomain(value: str) -> list[str]:
    """253 bytes or fewer: DNS-1123 labels joined by '.'."""
    examples = ("example.com",)
    return _errors(
        value, DNS1123_SUBDOMAIN_MAX_LENGTH, _DNS1123_SUBDOMAIN, _DNS1123_SUBDOMAIN_MSG, examples
    )


def _errors(
    value: str, max_length: int, regex: re.Pattern[str], message: str, examples: tuple[str, ...]
) -> list[str]:
    """The two checks each predicate but IsQualifiedName makes: the length, then the pattern."""
    errors = [_max_len_error(max_length)] if _length(value) > max_length else []
    if not regex.fullmatch(value):
        errors.append(_regex_error(regex, message, examples))
    return errors


def _name_regex_error() -> str:
    return _regex_error(_QUALIFIED_NAME, _QUALIFIED_NAME_MSG, ("MyName", "my.name", "123-abc"))


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def _regex_error(regex: re.Pattern[str], message: str, examples: tuple[str, ...]) -> str:
    """RegexError, to the letter (the double space before each "or" included)."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{regex.pattern}')"


def _length(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode())
