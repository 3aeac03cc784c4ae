"""Reading the section headers and symbol names of an ELF64 little-endian relocatable object.

What the runtime needs to know about object code before it links anything: which symbols an
object defines and imports (``hlo.aot`` checks imports before loading a saved executable), and
the sizes and relocations of its sections (``runtime.loader`` checks that llvmlite's one-block
memory manager can hold it). Standard library only: loading a saved executable imports this.
"""
from __future__ import annotations

import struct
from typing import List, NamedTuple, Optional, Tuple

SHT_SYMTAB = 2
SHT_RELA = 4
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR, SHF_TLS = 0x1, 0x2, 0x4, 0x400
EM_X86_64 = 62


class Section(NamedTuple):
    name: int  # offset in the section-name string table
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


def is_elf64_le(obj: bytes) -> bool:
    return len(obj) >= 64 and obj[:4] == b"\x7fELF" and obj[4] == 2 and obj[5] == 1


def machine(obj: bytes) -> Optional[int]:
    """The ELF ``e_machine`` (62: x86-64), or None for another format."""
    return struct.unpack_from("<H", obj, 18)[0] if is_elf64_le(obj) else None


def sections(obj: bytes) -> List[Section]:
    """The section headers; raises ``struct.error`` / ``IndexError`` on a truncated object."""
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    return [Section(*struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)) for i in range(shnum)]


def symbols(obj: bytes) -> Optional[Tuple[List[str], List[str]]]:
    """``(defined, undefined)`` symbol names, sorted, or None for an object that is not
    ELF64 little-endian. Raises ``struct.error`` / ``IndexError`` / ``ValueError`` when
    the object is truncated or corrupt."""
    if not is_elf64_le(obj):
        return None
    heads = sections(obj)
    defined, undefined = set(), set()
    for h in heads:
        if h.type != SHT_SYMTAB:
            continue
        entsize = h.entsize or 24
        stroff = heads[h.link].offset
        for k in range(1, h.size // entsize):
            name_off, _info, _other, shndx = struct.unpack_from("<IBBH", obj, h.offset + k * entsize)
            if not name_off:
                continue
            end = obj.index(b"\x00", stroff + name_off)
            name = obj[stroff + name_off:end].decode("ascii", "replace")
            (undefined if shndx == 0 else defined).add(name)
    return sorted(defined), sorted(undefined)
