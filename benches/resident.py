#!/usr/bin/env python3
"""Which pages of a running process's executable are resident, by ELF section.

    benches/resident.py PID            # e.g. the idle `ethan run` of benches/daemon.sh

Reads /proc/PID/maps (the mappings of the executable file), /proc/PID/pagemap (whether each page
is present; needs root, or the same user with CAP_SYS_ADMIN for the page frame, which is not used)
and the section headers of the file (`readelf -SW`), and prints, for each section, its size and
how much of it is resident, and the dirty private (copy-on-write) pages per mapping from
/proc/PID/smaps: what relocation at start wrote. Pages that hold no section (headers, padding)
are counted as "(no section)".
"""
import os
import re
import struct
import subprocess
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def sections(path):
    """(name, file offset, size) of each allocated section with file contents."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*)", line)
        if not m:
            continue
        name, kind, _addr, off, size, flags = m.groups()
        if "A" in flags and kind != "NOBITS" and int(size, 16) > 0:
            rows.append((name, int(off, 16), int(size, 16)))
    return rows


def main():
    pid = int(sys.argv[1])
    exe = os.readlink(f"/proc/{pid}/exe")
    secs = sections(exe)
    resident = {}  # file page index -> True
    dirty = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            parts = line.split()
            if len(parts) < 6 or parts[5] != exe:
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            off = int(parts[2], 16)
            pm.seek(lo // PAGE * 8)
            data = pm.read((hi - lo) // PAGE * 8)
            for i in range((hi - lo) // PAGE):
                (entry,) = struct.unpack_from("<Q", data, i * 8)
                if entry >> 63 & 1:
                    resident[off // PAGE + i] = True
    with open(f"/proc/{pid}/smaps") as smaps:
        current = None
        for line in smaps:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                current = parts[1] if len(parts) > 5 and parts[5] == exe else None
            elif current and line.startswith("Private_Dirty:"):
                dirty.append((current, int(line.split()[1])))
    total = 0
    print(f"{exe} (pid {pid}): resident pages of the executable, by section")
    print(f"{'section':<24}{'size KiB':>10}{'resident KiB':>14}")
    covered = set()
    for name, off, size in secs:
        pages = range(off // PAGE, (off + size + PAGE - 1) // PAGE)
        # A page shared by two sections is counted with the first.
        mine = [p for p in pages if p in resident and p not in covered]
        covered.update(mine)
        kib = len(mine) * PAGE // 1024
        total += kib
        print(f"{name:<24}{size // 1024:>10}{kib:>14}")
    rest = len([p for p in resident if p not in covered]) * PAGE // 1024
    print(f"{'(no section)':<24}{'':>10}{rest:>14}")
    print(f"{'total':<24}{os.path.getsize(exe) // 1024:>10}{total + rest:>14}")
    for perms, kib in dirty:
        print(f"private dirty (copy-on-write) in the {perms} mapping: {kib} KiB")


if __name__ == "__main__":
    main()
