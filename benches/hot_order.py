#!/usr/bin/env python3
"""The symbol ordering file of the release build, from callgrind profiles of the daemon.

    benches/hot_order.py BINARY_NAME IDLE.callgrind TURNS.callgrind > packaging/hot-functions.order

Each profile's functions of the executable that ran (self cost above zero), the idle profile's
first, then the turns' that are not already listed; each list by cost, most first. Function
names are the mangled ones (`callgrind --demangle=no`), which is what the linker matches; a
function callgrind shows under a recursion marker (`name'2`) is listed once, by its name; one
without a symbol (an address) is left out.
`benches/hot-order.sh` makes the profiles and runs this.
"""
import re
import sys

HEADER = """\
# Functions laid out first in the release binary's .text (build.rs, --symbol-ordering-file):
# those the daemon ran while idle, then those it ran in turns, each by cost. Made by
# benches/hot-order.sh from callgrind profiles of the benchmark's daemon; names of another
# build (a toolchain or dependency changed) are skipped by the linker. Do not edit by hand.
"""


def ran(path, binary):
    """{mangled name: self cost} of `binary`'s functions in one callgrind profile."""
    names, objects, cost = {}, {}, {}
    obj = fn = None
    after_calls = False

    def name(rest, table):
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not m:
            return rest
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1))

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                obj = name(line[3:], objects)
            elif line.startswith("cob="):
                name(line[4:], objects)
            elif line.startswith("fn="):
                fn, after_calls = name(line[3:], names), False
            elif line.startswith("cfn="):
                name(line[4:], names)
            elif line.startswith("calls="):
                after_calls = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                parts = line.split()
                if len(parts) >= 2 and obj and obj.endswith("/" + binary) and fn:
                    key = re.sub(r"'\d+$", "", fn)
                    cost[key] = cost.get(key, 0) + int(parts[1])
    return cost


def main():
    binary, profiles = sys.argv[1], sys.argv[2:]
    seen = set()
    out = [HEADER]
    for path in profiles:
        cost = ran(path, binary)
        for fn, c in sorted(cost.items(), key=lambda kv: (-kv[1], kv[0])):
            # An address is a function without a name (no symbol): nothing to order by.
            if c > 0 and fn not in seen and not fn.startswith("0x"):
                seen.add(fn)
                out.append(fn + "\n")
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
