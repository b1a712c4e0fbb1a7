"""The undefined dynamic symbols of a built library (and of its objects)
and the libraries it needs, read from the ELF64 tables themselves, without nm:
what the symbol allowlist (korch_rules.check_symbols) judges. A leaf module:
korch_rules imports it; it imports nothing of korch's. Part of the symbol
policy's digest (korch_rules.symbol_policy)."""
import struct
from typing import Iterable


class ElfError(Exception):
    pass


def _elf_read(path: str):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if data[4] != 2:
        raise ElfError(f"{path}: not ELF64")
    end = "<" if data[5] == 1 else ">"
    return data, end


def _elf_tables(data: bytes, end: str):
    """Yield (symtab_offset, nsyms, strtab_offset, strtab_size) from both the
    section headers (.dynsym) and the dynamic segment (what the loader uses)."""
    (e_phoff, e_shoff) = struct.unpack_from(end + "QQ", data, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from(end + "HHHH", data, 0x36)
    found = []
    # Section headers.
    for k in range(e_shnum if e_shoff else 0):
        off = e_shoff + k * e_shentsize
        sh_name, sh_type, _, _, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from(
            end + "IIQQQQIIQQ", data, off)
        if sh_type == 11:  # SHT_DYNSYM
            loff = e_shoff + sh_link * e_shentsize
            _, _, _, _, str_off, str_size, _, _, _, _ = struct.unpack_from(end + "IIQQQQIIQQ", data, loff)
            found.append((sh_offset, sh_size // (sh_entsize or 24), str_off, str_size))
    # Program headers: PT_DYNAMIC.
    loads = []
    dyn = None
    for k in range(e_phnum if e_phoff else 0):
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from(
            end + "IIQQQQQQ", data, e_phoff + k * e_phentsize)
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dyn = (p_offset, p_filesz)

    def v2o(addr):
        for vaddr, off, size in loads:
            if vaddr <= addr < vaddr + size:
                return off + (addr - vaddr)
        raise ElfError("address outside loadable segments")

    if dyn is not None:
        tags: dict[int, list[int]] = {}
        for k in range(dyn[1] // 16):
            tag, val = struct.unpack_from(end + "qQ", data, dyn[0] + 16 * k)
            if tag == 0:
                break
            tags.setdefault(tag, []).append(val)
        if 6 in tags and 5 in tags:  # DT_SYMTAB, DT_STRTAB
            symoff, stroff = v2o(tags[6][0]), v2o(tags[5][0])
            strsz = tags.get(10, [len(data) - stroff])[0]
            nsyms = 0
            if 4 in tags:  # DT_HASH: nchain
                nsyms = struct.unpack_from(end + "I", data, v2o(tags[4][0]) + 4)[0]
            elif 0x6FFFFEF5 in tags:  # DT_GNU_HASH
                h = v2o(tags[0x6FFFFEF5][0])
                nbuckets, symoffset, bloom_size, _ = struct.unpack_from(end + "IIII", data, h)
                buckets_off = h + 16 + 8 * bloom_size
                buckets = struct.unpack_from(end + f"{nbuckets}I", data, buckets_off)
                last = max(buckets) if buckets else 0
                nsyms = symoffset
                if last >= symoffset:
                    chain_off = buckets_off + 4 * nbuckets
                    while True:
                        (hv,) = struct.unpack_from(end + "I", data, chain_off + 4 * (last - symoffset))
                        last += 1
                        if hv & 1:
                            break
                    nsyms = last
            found.append((symoff, nsyms, stroff, strsz))
        return found, tags, v2o
    return found, {}, None


def _cstr(data, off):
    end = data.find(b"\0", off)
    return data[off:end if end >= 0 else len(data)].decode("utf-8", "replace")


def _object_symbols(data: bytes, end: str) -> tuple[set[str], set[str]]:
    """(undefined, defined) global symbols of a relocatable object (.symtab)."""
    e_shoff = struct.unpack_from(end + "Q", data, 0x28)[0]
    e_shentsize, e_shnum = struct.unpack_from(end + "HH", data, 0x3A)
    undef, defined = set(), set()
    for k in range(e_shnum):
        _, sh_type, _, _, sh_offset, sh_size, sh_link, _, _, sh_entsize = struct.unpack_from(
            end + "IIQQQQIIQQ", data, e_shoff + k * e_shentsize)
        if sh_type != 2:  # SHT_SYMTAB
            continue
        str_off = struct.unpack_from(end + "IIQQQQIIQQ", data, e_shoff + sh_link * e_shentsize)[4]
        for j in range(sh_size // (sh_entsize or 24)):
            st_name, st_info, _, st_shndx, _, _ = struct.unpack_from(end + "IBBHQQ", data, sh_offset + 24 * j)
            bind, typ = st_info >> 4, st_info & 0xF
            if not st_name or bind == 0 or typ in (3, 4):  # local, SECTION, FILE
                continue
            (undef if st_shndx == 0 else defined).add(_cstr(data, str_off + st_name))
    return undef, defined


def undefined_symbols_of_objects(paths: Iterable[str]) -> list[str]:
    """Symbols the given relocatable objects (.o) import from outside the
    set: the union of their undefined globals minus what any of them defines.
    Use this on the objects compiled from the candidate's own sources (not
    korch's binding glue) when the toolchain links libstdc++ statically, in
    which case the final .so imports libstdc++'s own needs (open, syscall...)."""
    undef, defined = set(), set()
    for p in paths:
        data, end = _elf_read(p)
        if struct.unpack_from(end + "H", data, 0x10)[0] != 1:
            raise ElfError(f"{p}: not a relocatable object")
        u, d = _object_symbols(data, end)
        undef |= u
        defined |= d
    return sorted(undef - defined)


def undefined_symbols(so_path: str) -> list[str]:
    """Undefined (imported) symbols of an ELF64 file without version
    suffixes, weak ones included. Shared objects: the union of the section
    table's .dynsym and the dynamic segment's DT_SYMTAB (what the loader
    uses). Relocatable objects (.o): the global undefined symbols of .symtab."""
    data, end = _elf_read(so_path)
    if struct.unpack_from(end + "H", data, 0x10)[0] == 1:  # ET_REL
        return sorted(_object_symbols(data, end)[0])
    tables, _, _ = _elf_tables(data, end)
    if not tables:
        raise ElfError(f"{so_path}: no dynamic symbol table")
    names = set()
    for symoff, nsyms, stroff, strsz in tables:
        for k in range(nsyms):
            st_name, st_info, st_other, st_shndx, _, _ = struct.unpack_from(end + "IBBHQQ", data, symoff + 24 * k)
            if st_shndx == 0 and st_name and (st_info & 0xF) != 4 and st_name < strsz:  # not STT_FILE
                names.add(_cstr(data, stroff + st_name))
    return sorted(names)


def needed_libraries(so_path: str) -> list[str]:
    """DT_NEEDED entries of an ELF64 shared object."""
    data, end = _elf_read(so_path)
    _, tags, v2o = _elf_tables(data, end)
    if not tags or 5 not in tags:
        return []
    stroff = v2o(tags[5][0])
    return [_cstr(data, stroff + v) for v in tags.get(1, [])]
