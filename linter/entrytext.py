"""The text of each entry of a flat batch-size table, found in one pass: what the engine keys an
entry's identity by before it takes the entry's ``repr`` (two entries of equal text have equal
values, so a repeated entry is known by its text, which a table's parse already holds)."""

from __future__ import annotations

import re

# an object that holds no object: in a text whose every brace is an entry's or the table's, each
# match is one entry's object, in file order
_FLAT_OBJECT = re.compile(r"\{[^{}]*+\}")


def entry_texts(doc, entries: list) -> list[str] | None:
    """The text of each of ``entries`` (a table's ``(key, entry)`` pairs, in file order, every one
    it has) in ``doc``'s text, where the text separates them so: every entry an object, no
    duplicated key (of the table or an entry: ``json.load`` then keeps the last one, which the
    text of one object does not say), and no brace but the table's and its entries' own (none in a
    string, no nested object). None otherwise."""
    if doc is None or doc.has_duplicates or not entries:
        return None
    n = len(entries)
    text = doc.text
    if text.count("{") != n + 1 or text.count("}") != n + 1:
        return None
    for _key, entry in entries:
        if type(entry) is not dict:
            return None
    found = _FLAT_OBJECT.findall(text)
    return found if len(found) == n else None
