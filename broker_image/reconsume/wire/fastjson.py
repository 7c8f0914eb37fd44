"""JSON as Apache RocketMQ's fastjson writes it, both ways: the name server writes it for
clients that parse exactly that, and the client reads what any name server writes.

fastjson writes a map with integer keys unquoted (``{0:"127.0.0.1:10911"}``) unless asked for
standard JSON; RocketMQ 4.9.4+ clients ask (by request version or
``acceptStandardJsonOnly``), older ones expect the fastjson form.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconsume.errors import CodecError

# An integer object key as fastjson writes it: `{0:` or `,1:` (never inside a string here:
# topic, broker and cluster names cannot contain '{', ',' or ':' followed by digits and ':').
_UNQUOTED_KEY = re.compile(r'([{,])(-?\d+):(?=["{\[\d tfn-])')


def dumps(value: Any, *, standard: bool) -> str:
    """Keys sorted; integer map keys quoted only when ``standard``."""
    if isinstance(value, dict):
        items = []
        for key in sorted(value, key=lambda k: (isinstance(k, str), str(k))):
            quoted = standard or not isinstance(key, int)
            text = json.dumps(str(key)) if quoted else str(key)
            items.append(f"{text}:{dumps(value[key], standard=standard)}")
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        items_list = sorted(value) if isinstance(value, set | frozenset) else value
        return "[" + ",".join(dumps(v, standard=standard) for v in items_list) + "]"
    return json.dumps(value, ensure_ascii=standard)


def loads(data: bytes | str) -> Any:
    """Parse JSON that may use fastjson's unquoted integer keys."""
    text = data.decode() if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_UNQUOTED_KEY.sub(r'\1"\2":', text))
    except json.JSONDecodeError as exc:
        raise CodecError(f"route data is not JSON: {exc}") from exc
