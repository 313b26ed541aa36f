"""Remove `^`/`$` anchors from YANG `pattern` statements, in place.

YANG patterns are XSD regular expressions (RFC 7950, Section 9.4.5), which
are implicitly anchored and have no `^`/`$` metacharacters: an XSD engine
reads them as literal characters, so `pattern '^[0-9]+$'` matches no
number. The OpenConfig models of the 2020 bundle that PyPI's
`ydk-models-openconfig` ships still carry POSIX anchors (OpenConfig moved
them to `oc-ext:posix-pattern` in 2021 and left `pattern` unanchored);
libyang, a strict XSD engine, would then refuse every IPv4 address. This
script makes that same change to the fetched copy. It edits only the first
`^` and the last `$` of a pattern's (possibly `+`-concatenated) string.

Usage: python3 unanchor-patterns.py DIR
"""

import pathlib
import re
import sys

STR = r"""(?:'[^']*'|"(?:[^"\\]|\\.)*")"""
SEP = r"""(?:\s|//[^\n]*\n)*"""
PAT = re.compile(
    r"(\bpattern" + SEP + r")(" + STR + r"(?:" + SEP + r"\+" + SEP + STR + r")*)"
)


def unanchor(m: re.Match) -> str:
    body = m.group(2)
    quote = body[0]
    if body[1:2] == "^":
        body = quote + body[2:]
    if body[-2:-1] == "$" and body[-3:-2] != "\\":
        body = body[:-2] + body[-1]
    return m.group(1) + body


def main(folder: str) -> None:
    changed = 0
    for path in sorted(pathlib.Path(folder).glob("*.yang")):
        text = path.read_text()
        fixed = PAT.sub(unanchor, text)
        if fixed != text:
            changed += 1
            path.write_text(fixed)
    print(f"unanchored patterns in {changed} module(s) under {folder}")


if __name__ == "__main__":
    main(sys.argv[1])
