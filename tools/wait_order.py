#!/usr/bin/env python3
"""Where a Hopper kernel's wgmma waits land among its softmax instructions, from SASS (issue 21.1).

    cuobjdump -sass file.cubin > all.sass;  tools/wait_order.py all.sass --function NAME_PART
    tools/wait_order.py file.cubin --function NAME_PART   (nvcc -cubin for sm_90a: no cuobjdump needed)
    tools/wait_order.py ncu_source.csv         (ncu --page source --csv --print-source sass: the Source column)

The prefill's consumer issues S_{t+1} and P V of tile t, waits for S (`WARPGROUP.DEPBAR.LE gsb0, 0x1`), runs the
softmax of S_{t+1}, then waits for P V (`... 0x0`) before it rescales O. The overlap holds only if the softmax's
exponentials (`MUFU.EX2`) sit between the two waits in the SASS; session 20 found ptxas had moved the second wait
up to the softmax's first max. For each `DEPBAR ... 0x1`, this prints the instructions up to the next
`DEPBAR ... 0x0` and after it up to the next wgmma (`HGMMA`): how many MUFU.EX2, FMNMX and barrier arrives fall in
each, and the verdict "overlapped" (most exponentials before the second wait) or "serialized". First it prints where
the wgmma take their A operand from (shared memory: SS, registers: RS) and how many ldmatrix (`LDSM`) the kernel has,
which tells the forms apart (session 30's Q in registers: S = Q Kᵀ as RS, 8 LDSM).
"""
import argparse
import csv
import re
import struct
import sys

OP = re.compile(r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_x]+)*)")


# sm_90 SASS in a cubin: 16 bytes an instruction, the opcode in the low 12 bits of its first 64-bit word. Read off
# cuobjdump's listing of the prefill kernels (session 21: the verdicts from the cubin and from the listing agreed on
# every instance). Only what this tool counts is named; every other instruction reads "?".
MUFU_OPS, FMNMX_OPS = {0x308, 0x908, 0xd08}, {0x209, 0x809, 0xc09}
HGMMA_SS_OP, HGMMA_RS_OP = 0x9f0, 0xdf0  # A from shared memory / from registers (session 30: 8 S = Q Kᵀ k-steps moved)
WARPGROUP_OP, SYNCS_ARRIVE_OP, LDSM_OP = 0x9c5, 0x9a7, 0x83b
MUFU_FUNCTIONS = {2: "EX2", 4: "RCP", 5: "RSQ", 6: "RCP64H"}  # bits 10-13 of the second word


def decode(w0, w1):
    op = w0 & 0xFFF
    if op in MUFU_OPS:
        return "MUFU." + MUFU_FUNCTIONS.get((w1 >> 10) & 0xF, "?")
    if op in FMNMX_OPS:
        return "FMNMX"
    if op in (HGMMA_SS_OP, HGMMA_RS_OP):  # pseudo-operands: what a_source reads off a listing
        return "HGMMA " + ("gdesc" if op == HGMMA_SS_OP else "R")
    if op == LDSM_OP:
        return "LDSM"
    if op == SYNCS_ARRIVE_OP:
        return "SYNCS.ARRIVE"
    if op == WARPGROUP_OP:  # bit 47: DEPBAR, its count in bits 8-13 of the second word; else ARRIVE
        return f"WARPGROUP.DEPBAR.LE gsb0, 0x{(w1 >> 8) & 0x3F:x}" if (w0 >> 47) & 1 else "WARPGROUP.ARRIVE"
    return "?"


def cubin_functions(data):
    """(name, instruction texts) of each .text.NAME section of an ELF64 cubin."""
    if len(data) < 64 or data[4] != 2:
        sys.exit("not an ELF64 cubin")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        sys.exit("cubin: its section headers lie past the end of the file or name no section-name table")
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = []
    for h in headers:
        name = data[names_at + h[0]:data.index(b"\0", names_at + h[0])].decode(errors="replace")
        if not name.startswith(".text."):
            continue
        body = data[h[4]:h[4] + h[5]]
        words = [struct.unpack_from("<QQ", body, i) for i in range(0, len(body) - 15, 16)]
        out.append((name[len(".text."):], [decode(w0, w1) for w0, w1 in words]))
    return out


def pick(functions, function, path):
    if function is None and len(functions) == 1:
        return functions[0][1]
    matches = [body for name, body in functions if function is not None and function in name]
    if len(matches) != 1:
        sys.exit(f"{len(matches)} functions of {path} contain {function!r} (need exactly one)")
    return matches[0]


def instructions(path, function=None):
    """The SASS instruction texts of a cuobjdump listing or a cubin (of the one function whose name contains
    `function`, where it holds several) or an ncu source CSV, in order."""
    with open(path, "rb") as f:
        data = f.read()
    if data.startswith(b"\x7fELF"):
        try:
            functions = cubin_functions(data)
        except (ValueError, struct.error) as e:  # a section name or header past the end of the file
            sys.exit(f"{path}: not a readable cubin ({e})")
        return pick(functions, function, path)
    text = data.decode(errors="replace")
    if text.startswith('"Kernel Name"') or '"Address","Source"' in text:
        rows = list(csv.reader(text.splitlines()))
        head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
        return [r[1].strip() for r in rows[head + 1:] if len(r) > 1]
    if function is not None:
        parts = re.split(r"\n\s*Function : (\S+)", text)
        text = pick([(parts[i], parts[i + 1]) for i in range(1, len(parts) - 1, 2)], function, path)
    out = []
    for line in text.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m:
            out.append(m.group(1).strip())
    return out


def opcode(ins):
    m = OP.match(ins)
    return m.group(1) if m else ""


def a_source(ins):
    """A wgmma's A operand: "SS" (a shared-memory descriptor, `gdesc[...]`) or "RS" (registers). Its operands are D,
    A, B, ...; a cubin's decode names A alone."""
    text = ins.split(None, 1)[1] if ins.startswith("@") else ins  # a predicate first
    operands = text.split(None, 1)[1].split(",") if " " in text else []
    a = operands[1] if len(operands) > 1 else operands[0] if operands else ""
    return "SS" if a.strip().startswith("gdesc") else "RS"


def main():
    parser = argparse.ArgumentParser(description="Where a Hopper kernel's wgmma waits land among its exponentials.")
    parser.add_argument("listing", help="a cuobjdump -sass listing, an sm_90a cubin or an ncu source CSV")
    parser.add_argument("--function", help="a part of the kernel's (mangled) name, where the listing holds several")
    args = parser.parse_args()
    ins = instructions(args.listing, args.function)
    if not ins:
        sys.exit(f"{args.listing}: no SASS instructions found")
    ops = [opcode(i) for i in ins]
    sources = [a_source(i) for i, o in zip(ins, ops) if o.startswith("HGMMA")]
    print(f"wgmma: {sources.count('SS')} with A from shared memory (SS), {sources.count('RS')} from registers (RS); "
          f"{sum(o.startswith('LDSM') for o in ops)} LDSM")
    first_waits = [i for i, o in enumerate(ops) if o.startswith("WARPGROUP.DEPBAR") and ins[i].endswith("0x1")]
    if not first_waits:
        sys.exit("no `WARPGROUP.DEPBAR.LE gsb0, 0x1` (a wait that leaves one wgmma group in flight) in this kernel")

    def count(a, b):
        seg = ops[a:b]
        return (sum(o.startswith("MUFU.EX2") for o in seg), sum(o.startswith("FMNMX") for o in seg),
                sum(o.startswith("SYNCS.ARRIVE") for o in seg))

    verdicts = []
    for w1 in first_waits:
        w0 = next((i for i in range(w1 + 1, len(ops)) if ops[i].startswith("WARPGROUP.DEPBAR")), None)
        if w0 is None:
            continue
        nxt = next((i for i in range(w0 + 1, len(ops)) if ops[i].startswith("HGMMA")), len(ops))
        before, after = count(w1 + 1, w0), count(w0 + 1, nxt)
        verdict = "overlapped" if before[0] > after[0] else "serialized"
        verdicts.append(verdict)
        print(f"wait 0x1 at {w1}, next wait ({ins[w0].split()[-1]}) at {w0}: between them {before[0]} MUFU.EX2, "
              f"{before[1]} FMNMX, {before[2]} arrives; after it, before the next HGMMA: {after[0]} MUFU.EX2, "
              f"{after[1]} FMNMX, {after[2]} arrives -> {verdict}")
    print("verdict:", "overlapped" if verdicts and all(v == "overlapped" for v in verdicts) else "serialized")


if __name__ == "__main__":
    main()
