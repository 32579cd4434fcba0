#!/usr/bin/env python3
"""tools/wait_order.py on synthetic SASS: a cuobjdump listing of two functions, one whose softmax exponentials sit
between the two wgmma waits (overlapped) and one whose second wait comes first (serialized, as ptxas placed it in
session 20), picked with --function; the same serialized loop as an ncu source CSV; and the errors.

    test_wait_order.py PATH/TO/wait_order.py
"""
import os
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
failures = []


def loop(serialized):
    """One consumer iteration: S and P V issued, wait for S, softmax (2 max, 3 exp), wait for P V, release V."""
    body = ["HGMMA.64x128x16.F32.BF16 R88, gdesc[UR20], R88, gsb0",
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


def run(text, *extra, name="k.sass"):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name)
        open(path, "w").write(text)
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
rc, out = run(sass, "--function", "kernel_")
expect(rc != 0 and "2 functions" in out, "an ambiguous --function fails", out)

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
