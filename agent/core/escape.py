"""Texts from input files as a report writes them: never a line, a control sequence or markup of their own.

A run's `config`, a query id, a slice label or a doc id is whatever the file
holds, and a report is read by people and rendered by CI. `plain` is the
terminal's form: a backslash is doubled and every character that is not
printable (newlines, tabs, escape sequences, bidirectional overrides, line
separators) is written as its Python escape (`\\n`, `\\x1b`, `\\u202e`), so a
text stays on its line and shows what it holds. `markdown` is `plain` with
every ASCII punctuation character backslash-escaped, which CommonMark and
GitHub render as the character itself: no text opens an HTML comment or tag,
emphasis, code, a link or a table cell, and rendered it reads as `plain`.
"""

from __future__ import annotations

import re
import string

_MARKUP = re.compile(f"([{re.escape(string.punctuation)}])")


def plain(text: str) -> str:
    """`text` on one line, each unprintable character and backslash as its Python escape."""
    if text.isprintable() and "\\" not in text:  # the common case, kept as it is
        return text
    return "".join(c if c.isprintable() and c != "\\" else c.encode("unicode_escape").decode("ascii") for c in text)


def markdown(text: str) -> str:
    """`plain(text)` with every ASCII punctuation character escaped: literal text in Markdown."""
    return _MARKUP.sub(r"\\\1", plain(text))
