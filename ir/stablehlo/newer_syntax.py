"""The text shim for collective forms newer than jaxlib's StableHLO (``newer_collectives.py``
imports them): ``rewrite`` moves their op names into the unregistered ``hlo_newer`` dialect,
which jaxlib's parser accepts, so ``mlir_bridge.parse`` can retry a text it rejected."""
from __future__ import annotations

import re

DIALECT = "hlo_newer"
_OPS = re.compile(r'"stablehlo\.(collective_reduce|collective_broadcast)"(?=\s*\()')


def rewrite(text: str) -> str:
    """``text`` with the ops ``newer_collectives`` imports renamed into ``hlo_newer`` (a
    ``collective_broadcast`` only where it has ``has_dynamic_root``; others stay)."""
    out, pos = [], 0
    for m in _OPS.finditer(text):
        name = m.group(1)
        if name == "collective_broadcast":
            end = text.find("} : (", m.end())  # the end of its attributes
            if "has_dynamic_root" not in text[m.end():end if end > 0 else len(text)]:
                continue
        out.append(text[pos:m.start()])
        out.append(f'"{DIALECT}.{name}"')
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def needs_rewrite(text: str) -> bool:
    return "stablehlo.collective_reduce" in text or "has_dynamic_root" in text
