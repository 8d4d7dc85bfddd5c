"""Issue 24, item 6 on the GPU host: `kernelscope try` against the same variants written by
hand in a fresh process (tests/support/hand_variants.py). Prints each variant's speedup both
ways and their ratio (try / hand: 1.00 is agreement). Needs server/ and tests/ on PYTHONPATH.

    python docs/h200-run/timing/try_vs_hand.py
"""

from support.hand_variants import CASES, compare


def main() -> None:
    """Each case's rows, side by side."""
    head = ("workload", "variant", "try", "hand", "try/hand", "try µs", "hand µs")
    print("{:17} {:14} {:>8} {:>8} {:>8} {:>9} {:>9}  kernelscope says".format(*head))
    for name, variants in CASES.items():
        got = compare(name, variants)
        if "error" in got:
            print(name, "FAILED", got["error"])
            continue
        h, k = got["hand"], got["try"]
        print(f"{name:17} {'baseline':14} {'':>8} {'':>8} {'':>8} "
              f"{k['baseline_us']:9.1f} {h['us']['baseline']:9.1f}")  # fmt: skip
        for v in k["variants"]:
            hs = h["speedup"].get(v["name"])
            ks_s = v.get("speedup")
            ratio = f"{ks_s / hs:8.2f}" if ks_s and hs else f"{'-':>8}"
            kus = f"{v['us_per_call']:9.1f}" if v.get("us_per_call") else f"{'-':>9}"
            says = (v.get("summary") or v.get("why") or "")[:120]
            print(f"{'':17} {v['name']:14} {ks_s or 0:8.2f} {hs or 0:8.2f} {ratio} {kus} "
                  f"{h['us'].get(v['name'], 0):9.1f}  {says}")  # fmt: skip


if __name__ == "__main__":
    main()
