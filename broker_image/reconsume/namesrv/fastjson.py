"""JSON as Apache RocketMQ's fastjson writes it, for clients that parse exactly that.

fastjson writes a map with integer keys unquoted (``{0:"127.0.0.1:10911"}``) unless asked for
standard JSON; RocketMQ 4.9.4+ clients ask (by request version or
``acceptStandardJsonOnly``), older ones expect the fastjson form.
"""

from __future__ import annotations

import json
from typing import Any


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
