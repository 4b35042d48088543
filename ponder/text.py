"""Text read from outside -- a card, a sweep record, a journal, a history row, a link, a folder's name -- checked
once where it is read, so that nothing past the reader meets text that Streamlit, a terminal or the file system
refuses. Imports nothing from ponder (the file readers stand on it).

Refused (text_problem names the first such character, in a message that is itself plain ASCII):
- text that does not encode as UTF-8: a lone surrogate such as '\\ud800', which JSON may hold ("\\ud800" is valid
  JSON) and Python decodes, but which every encoder (Streamlit's tables and tooltips, a file name) refuses;
- NUL and the other control characters (C0, DEL, C1): the OS refuses a NUL in a path with a ValueError, and the
  others (an escape sequence, a backspace) change what a terminal or a page shows; tab, newline and carriage return
  are the exception in free text (a failure's reason may span lines), never in a name;
- the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder how the text
  around them is shown, so a name could show as another one.
"""
from __future__ import annotations

import re
from typing import Optional

BAD_NAME = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")   # in a name or a key
BAD_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")  # free text
MAX_WALK = 1_000_000                 # strings walk_problem looks at in one value (a 32 MB sweep.json holds far fewer)


def _what(c: str) -> str:
    n = ord(c)
    kind = ("a lone surrogate, not text that encodes as UTF-8" if 0xD800 <= n <= 0xDFFF else
            "a bidirectional override" if 0x202A <= n <= 0x2069 else "a control character")
    return f"U+{n:04X} ({kind})"


def text_problem(s: str, name: bool = False) -> Optional[str]:
    """None for usable text, else what is wrong with it ('holds U+0000 (a control character) at character 3').
    name=True: a name or a key, where tab, newline and carriage return are refused too."""
    m = (BAD_NAME if name else BAD_TEXT).search(s)
    return None if m is None else f"holds {_what(m.group())} at character {m.start() + 1}"


def text_ok(s, name: bool = False) -> bool:
    """Whether s is a str that text_problem accepts."""
    return isinstance(s, str) and text_problem(s, name) is None


def walk_problem(value) -> Optional[str]:
    """None when every string in a JSON value (its keys: as names, its values: as free text) is usable text, else
    where the first one that is not sits and why ('train.reader: holds U+D800 ...'). Walked without recursion."""
    todo, seen = [("", value)], 0
    while todo:
        where, v = todo.pop()
        seen += 1
        if seen > MAX_WALK:
            return f"more than {MAX_WALK:,} values"
        if isinstance(v, str):
            if (p := text_problem(v)) is not None:
                return f"{where[:120] or 'the value'}: {p}"
        elif isinstance(v, dict):
            for k, x in v.items():
                if isinstance(k, str) and (p := text_problem(k, name=True)) is not None:
                    return f"{where[:120] + ': ' if where else ''}a key {p}"
                todo.append((f"{where}.{k}" if where else str(k), x))
        elif isinstance(v, list):
            todo.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


def clean_text(s, name: bool = False) -> str:
    """s with every character text_problem refuses replaced by U+FFFD (the replacement character): what a writer
    stores of text it did not make (an exception's message as a failure's reason), so that its reader accepts it."""
    return (BAD_NAME if name else BAD_TEXT).sub("\ufffd", str(s))


def shown(s, limit: int = 80) -> str:
    """s for a message about it: Python's ascii() of it (quoted; a control character, a surrogate or any other
    non-ASCII character as an escape), cut to `limit` characters."""
    a = ascii(str(s))
    return a if len(a) <= limit else a[:limit - 4] + "...'"
