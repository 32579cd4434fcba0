#!/usr/bin/env python3
"""tools/wait_order.py on synthetic SASS: a cuobjdump listing of two functions, one whose softmax exponentials sit
between the two wgmma waits (overlapped) and one whose second wait comes first (serialized, as ptxas placed it in
session 20), picked with --function; the same two loops encoded in a cubin (an ELF64 with a .text section each);
the serialized loop as an ncu source CSV; the wgmma's A operands (shared memory or registers) and the ldmatrix
counted in each form; and the errors.

    test_wait_order.py PATH/TO/wait_order.py
"""
import os
import struct
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []


def loop(serialized, q_in_registers=False):
    """One consumer iteration: S and P V issued, wait for S, softmax (2 max, 3 exp), wait for P V, release V. S's A
    from shared memory, or (q_in_registers) from registers after an ldmatrix."""
    s = ["LDSM.16.M88.4 R136, [R2]", "HGMMA.64x128x16.F32.BF16 R88, R136, gdesc[UR20], R88, gsb0"] if q_in_registers \
        else ["HGMMA.64x128x16.F32.BF16 R88, gdesc[UR20], R88, gsb0"]
    body = s + [
            "HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR12].tnspB, R24, gsb0",
            "WARPGROUP.DEPBAR.LE gsb0, 0x1",
            "@!P4 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR53+0x38040], RZ",
            "FMNMX R9, R88, R89, !PT"]
    softmax = ["FMNMX R10, R90, R91, !PT", "MUFU.EX2 R88, R88", "MUFU.EX2 R89, R89", "MUFU.EX2 R90, R90"]
    wait = ["WARPGROUP.DEPBAR.LE gsb0, 0x0", "@!P4 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR56+0x38070], RZ"]
    return body + (wait + softmax if serialized else softmax + wait) + ["F2FP.BF16.F32.PACK_AB R152, R89, R88"]


def listing(functions):
    out = ["", "Fatbin elf code:", "================", "arch = sm_90a"]
    for name, ins in functions:
        out.append(f"\t\tFunction : {name}")
        out.append("\t.headerflags\t@\"EF_CUDA_SM90\"")
        for k, i in enumerate(ins):
            out.append(f"        /*{16 * k:04x}*/                   {i} ;   /* 0x000fe20000000f00 */")
    return "\n".join(out) + "\n"


# sm_90 encodings (first word, second word) of the instructions the loop names, as cuobjdump showed them; anything
# else is a NOP.
ENCODING = {"HGMMA": (0x01E00000285879F0, 0), "WARPGROUP.DEPBAR.LE gsb0, 0x1": (0x00008000000079C5, 0x0C40000010100),
            "WARPGROUP.DEPBAR.LE gsb0, 0x0": (0x00008000000079C5, 0x0C40000010000),
            "SYNCS": (0x00000000000099A7, 0), "FMNMX": (0x0000000000007209, 0),
            "MUFU.EX2": (0x0000000000007308, 0x000220000000800), "LDSM": (0x000000000200783B, 0)}
HGMMA_RS = (0x01E00000285879F0 & ~0xFFF | 0xDF0, 0)  # A from registers


def encode(ins):
    text = ins.split(None, 1)[1] if ins.startswith("@") else ins
    key = next((k for k in ENCODING if text.startswith(k)), None)
    if key == "HGMMA" and not text.split(",")[1].strip().startswith("gdesc"):
        return struct.pack("<QQ", *HGMMA_RS)
    return struct.pack("<QQ", *ENCODING[key]) if key else struct.pack("<QQ", 0x7918, 0)


def cubin(functions):
    """An ELF64 of a null section, a .text.NAME section per function and the section names."""
    names = b"\0.shstrtab\0" + b"".join(b".text." + n.encode() + b"\0" for n, _ in functions)
    bodies = [b"".join(encode(i) for i in ins) for _, ins in functions]
    data = bytearray(64)
    sections = [(0, 0, 0)]  # (name offset, file offset, size)
    at = names.index(b".text.")
    for body in bodies:
        sections.append((at, len(data), len(body)))
        at = names.index(b"\0", at) + 1
        data += body
    sections.append((1, len(data), len(names)))
    data += names
    shoff = len(data)
    for name, off, size in sections:
        data += struct.pack("<IIQQQQIIQQ", name, 1, 0, 0, off, size, 0, 0, 16, 0)
    data[0:16] = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    struct.pack_into("<Q", data, 0x28, shoff)
    struct.pack_into("<HHH", data, 0x3A, 64, len(sections), len(sections) - 1)
    return bytes(data)


def run(text, *extra, name="k.sass"):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name)
        open(path, "wb" if isinstance(text, bytes) else "w").write(text)
        p = subprocess.run([sys.executable, TOOL, path, *extra], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


def expect(cond, what, out):
    if not cond:
        failures.append(what + "\n--- output ---\n" + out)


sass = listing([("_Z14kernel_overlapv", loop(False)), ("_Z17kernel_serializedv", loop(True))])
rc, out = run(sass, "--function", "kernel_overlap")
expect(rc == 0 and "between them 3 MUFU.EX2, 2 FMNMX, 1 arrives" in out and out.strip().endswith("overlapped"),
       "the exponentials between the waits: overlapped", out)
rc, out = run(sass, "--function", "kernel_serialized")
expect(rc == 0 and "between them 0 MUFU.EX2, 1 FMNMX, 1 arrives" in out and
       "after it, before the next HGMMA: 3 MUFU.EX2, 1 FMNMX, 1 arrives" in out and
       out.strip().endswith("verdict: serialized"), "the second wait first: serialized", out)
expect("wgmma: 1 with A from shared memory (SS), 1 from registers (RS); 0 LDSM" in out, "the SS / RS count", out)
rc, out = run(listing([("_Z5qregsv", loop(False, True))]), "--function", "qregs")
expect(rc == 0 and "wgmma: 0 with A from shared memory (SS), 2 from registers (RS); 1 LDSM" in out,
       "Q in registers: S as RS after an ldmatrix", out)
rc, out = run(sass, "--function", "kernel_")
expect(rc != 0 and "2 functions" in out, "an ambiguous --function fails", out)

elf = cubin([("_Z14kernel_overlapv", loop(False)), ("_Z17kernel_serializedv", loop(True))])
rc, out = run(elf, "--function", "kernel_overlap", name="k.cubin")
expect(rc == 0 and "between them 3 MUFU.EX2, 2 FMNMX, 1 arrives" in out and out.strip().endswith("overlapped"),
       "a cubin: overlapped", out)
expect("wgmma: 1 with A from shared memory (SS), 1 from registers (RS); 0 LDSM" in out, "a cubin: SS / RS", out)
rc, out = run(cubin([("_Z5qregsv", loop(False, True))]), "--function", "qregs", name="k.cubin")
expect(rc == 0 and "wgmma: 0 with A from shared memory (SS), 2 from registers (RS); 1 LDSM" in out,
       "a cubin: Q in registers", out)
rc, out = run(elf, "--function", "kernel_serialized", name="k.cubin")
expect(rc == 0 and "after it, before the next HGMMA: 3 MUFU.EX2, 1 FMNMX, 1 arrives" in out and
       out.strip().endswith("verdict: serialized"), "a cubin: serialized", out)
rc, out = run(b"\x7fELF" + bytes([2]) + bytes(100), name="bad.cubin")
expect(rc != 0 and "section headers lie past the end" in out, "a truncated cubin fails", out)

rows = ['"Kernel Name","k"', '"Address","Source","Warp Stall Sampling (All Samples)"']
rows += [f'"0x{16 * k:x}","      {i}","0"' for k, i in enumerate(loop(True))]
rc, out = run("\n".join(rows) + "\n", name="ncu.csv")
expect(rc == 0 and out.strip().endswith("verdict: serialized"), "an ncu source CSV reads the same", out)

rc, out = run(listing([("_Z1fv", ["FADD R1, R2, R3", "EXIT"])]), "--function", "_Z1fv")
expect(rc != 0 and "no `WARPGROUP.DEPBAR.LE gsb0, 0x1`" in out, "a kernel without the waits fails", out)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("wait_order: all checks passed")
