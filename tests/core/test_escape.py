"""Texts from input files as reports write them: one line, no control sequence, no markup."""

from __future__ import annotations

from agent.core.escape import markdown, plain


def test_plain_keeps_printable_text_and_writes_the_rest_as_escapes():
    assert plain("hr-assistant / ヘルプ é") == "hr-assistant / ヘルプ é"
    assert plain("a\nb\r\tc\x1b[2J\x00") == r"a\nb\r\tc\x1b[2J\x00"
    assert plain("evil\u202egnp.exe\u2028x\x85") == r"evil\u202egnp.exe\u2028x\x85"  # bidi override, separators
    assert plain("a\\nb") == r"a\\nb"  # a backslash in the text is not a newline in the report


def test_markdown_escapes_every_ascii_punctuation_character():
    assert markdown("<!-- **pass** -->") == r"\<\!\-\- \*\*pass\*\* \-\-\>"
    assert markdown("a|b `c` [d](e) _f_ #g &amp; $h$ ~i~ @j") == \
        r"a\|b \`c\` \[d\]\(e\) \_f\_ \#g \&amp\; \$h\$ \~i\~ \@j"
    assert markdown("x\ny") == r"x\\ny"  # renders as plain's x\ny
    assert markdown("ja ヘルプ 42") == "ja ヘルプ 42"
