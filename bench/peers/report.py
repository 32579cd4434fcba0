"""Joins `RESULT` lines of bench_kernels (ours) and torch_peers.py (peers) into one table:
kernel, shape, ours, best peer, ours/peer, % of roofline (bandwidth kernels: of the copy bandwidth measured in
the same run; attention prefill: of the 8192^3 torch GEMM rate measured in the same run), and ours / SDPA flash
where that peer ran."""
import sys


def parse(path, with_peer):
    rows = []
    for line in open(path):
        parts = line.split()
        if not parts or parts[0] != "RESULT":
            continue
        rows.append((parts[1], parts[2], float(parts[3]), parts[4], parts[5] if with_peer and len(parts) > 5 else "ours"))
    return rows


def main(ours_path, peers_path):
    ours = parse(ours_path, False)
    peers = parse(peers_path, True)
    copy_bw = next((v for k, s, v, u, p in ours if k == "copy"), None)
    gemm = next((v for k, s, v, u, p in peers if k == "gemm"), None)
    print(f"{'kernel':<15} {'shape':<28} {'ours':>9} {'peer':>9} {'peer name':<11} {'ours/peer':>9} {'%roof':>6} "
          f"{'/flash':>7}")
    for kernel, shape, value, unit, _ in ours:
        # The deterministic-mode rows (kernel_det) are compared with the peers of the plain kernel.
        base = kernel[:-4] if kernel.endswith("_det") else kernel.replace("_det_", "_")
        cands = [(v, p) for k, s, v, u, p in peers if k == base and s == shape]
        best = max(cands) if cands else (float("nan"), "-")
        # Rates only: times (us) and counts have no roofline.
        ceiling = copy_bw if unit == "TB/s" else gemm if unit == "TFLOP/s" else None
        roof = f"{100 * value / ceiling:.0f}%" if ceiling else "-"
        ratio = value / best[0] if cands else float("nan")
        flash = [v for v, p in cands if p == "sdpa_flash"]
        vs_flash = f"{value / flash[0]:.2f}" if flash else "-"
        print(f"{kernel:<15} {shape:<28} {value:>7.3g}{unit[:2]:>2} {best[0]:>7.3g}{unit[:2]:>2} {best[1]:<11} "
              f"{ratio:>9.2f} {roof:>6} {vs_flash:>7}")
    print(f"(units: TB = TB/s, TF = TFLOP/s; roofline: copy {copy_bw} TB/s, torch GEMM {gemm} TFLOP/s)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
