"""apimachinery 1.20.2's util/validation test tables, run against kuberules/validation.py.

Source: Kubernetes v1.20.2 (Debian's kubernetes 1.20.5+really1.20.2 source package),
staging/src/k8s.io/apimachinery/pkg/util/validation/validation_test.go: TestIsDNS1123Label,
TestIsDNS1123Subdomain, TestIsQualifiedName and TestIsValidLabelValue, every case. The texts in
TEXTS are what that version's functions return for the value (run there, copied here).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconciler.kuberules.validation import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
)

Check = Callable[[str], list[str]]

DNS1123_LABEL_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a" * 63,
]  # fmt: skip
DNS1123_LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
]  # fmt: skip
DNS1123_SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a",
    "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1",
    "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2",
    "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
    "a" * 253,
]  # fmt: skip
DNS1123_SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a..b", "1.", ".1", "1..2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "A.a", "aB.a", "ab.A", "A1.a", "a1.A",
    "A.1", "aB.1", "A1.1", "1A.1",
    "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
    "a@b", "a,b", "a_b", "a;b",
    "a:b", "a%b", "a?b", "a$b",
    "a" * 254,
]  # fmt: skip
QUALIFIED_NAME_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
QUALIFIED_NAME_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
]
LABEL_VALUE_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "end-with-num-1",
    "1234",  # only num
    "a" * 63,  # to the limit
    "",  # empty value
]
LABEL_VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-rā.is.Māori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,  # over the limit
]

TABLES: list[tuple[Check, list[str], list[str]]] = [
    (is_dns1123_label, DNS1123_LABEL_GOOD, DNS1123_LABEL_BAD),
    (is_dns1123_subdomain, DNS1123_SUBDOMAIN_GOOD, DNS1123_SUBDOMAIN_BAD),
    (is_qualified_name, QUALIFIED_NAME_GOOD, QUALIFIED_NAME_BAD),
    (is_valid_label_value, LABEL_VALUE_GOOD, LABEL_VALUE_BAD),
]
CASES = [
    pytest.param(check, value, valid, id=f"{check.__name__}-{'good' if valid else 'bad'}-{i}")
    for check, good, bad in TABLES
    for valid, values in ((True, good), (False, bad))
    for i, value in enumerate(values)
]


@pytest.mark.parametrize(("check", "value", "valid"), CASES)
def test_upstream_tables(check: Check, value: str, valid: bool) -> None:
    assert (check(value) == []) is valid


_NAME = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
TOO_LONG_63 = "must be no more than 63 characters"

# (check, value, what Kubernetes 1.20.2 returns), its reasons in its order.
TEXTS: list[tuple[Check, str, list[str]]] = [
    (is_qualified_name, "a/b/c", [
        f"a qualified name {_NAME} with an optional DNS subdomain prefix and '/' "
        "(e.g. 'example.com/MyName')"
    ]),
    (is_qualified_name, "/simple", ["prefix part must be non-empty"]),
    (is_qualified_name, "example.com/", ["name part must be non-empty", f"name part {_NAME}"]),
    (is_qualified_name, "Example.com/abc", [f"prefix part {_SUBDOMAIN}"]),
    (is_qualified_name, "a" * 64, [f"name part {TOO_LONG_63}"]),
    (is_qualified_name, "a" * 254 + "/abc", ["prefix part must be no more than 253 characters"]),
    (is_valid_label_value, "a" * 64, [TOO_LONG_63]),
    (is_valid_label_value, "-starts-with-dash", [_LABEL_VALUE]),
    (is_valid_label_value, "a" * 63 + "-", [TOO_LONG_63, _LABEL_VALUE]),
    (is_dns1123_label, "A", [_LABEL]),
    (is_dns1123_label, "a" * 64, [TOO_LONG_63]),
    (is_dns1123_subdomain, "a..b", [_SUBDOMAIN]),
    (is_dns1123_subdomain, "a" * 254, ["must be no more than 253 characters"]),
    # Go's len counts bytes: 32 two-byte letters are 64
    (is_valid_label_value, "ā" * 32, [TOO_LONG_63, _LABEL_VALUE]),
]  # fmt: skip


@pytest.mark.parametrize(("check", "value", "errors"), TEXTS)
def test_kubernetes_words(check: Check, value: str, errors: list[str]) -> None:
    assert check(value) == errors
