"""try against hand-written variants, both sides' µs (issue 24, item 6): the hand loop as the
test times it (20 calls a block) and with try's block sizes (about 20 ms of calls, 5-200),
and `kernelscope try` itself, on one workload of fixtures/workloads/what_if_gpu.py.

    python3 docs/h200-run/sixth/try_blocks.py NAME VARIANTS

Run (try_blocks.txt) with tests/support/hand_variants.py as of 3d4abcd, whose HAND timed
blocks of 20 calls; HAND now takes try's block sizes, so "hand20" here needs that commit.
"""

import json
import subprocess
import sys

sys.path.insert(0, "tests")
from support.hand_variants import HAND, W

name, variants = sys.argv[1], sys.argv[2]
TRY_SIZED = HAND.replace(
    "for call in calls.values():\n    block_us(call)  # the warm-up: 20 calls back to back",
    "for call in calls.values():\n    block_us(call)\n"
    "N = {k: int(max(5, min(200, 20000 / max(block_us(c), 1.0)))) for k, c in calls.items()}",
).replace("rnd.append((k, block_us(c)))", "rnd.append((k, block_us(c, N[k])))")
assert TRY_SIZED != HAND


def hand(code):
    done = subprocess.run(
        [sys.executable, "-c", code, f"{W}::{name}", variants],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    if done.returncode:
        return {"error": done.stderr[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def tried():
    dev = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    argv = [
        sys.executable,
        "-m",
        "kernelscope",
        "try",
        f"{W}::{name}",
        "--device",
        dev,
        "--variants",
        variants,
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=200, check=False)
    if done.returncode:
        return {"error": done.stderr[-400:]}
    got = json.loads(done.stdout)
    us = {"baseline": got["baseline_us"]}
    us.update({v["name"]: v["us_per_call"] for v in got["variants"] if v.get("us_per_call")})
    return {
        "us": us,
        "speedup": {k: us["baseline"] / x for k, x in us.items()},
        "rounds": got["rounds"],
        "slowed_rounds": got.get("slowed_rounds"),
        "status": {v["name"]: v["status"] + " " + v.get("why", "")[:80] for v in got["variants"]},
    }


def show(label, got):
    if "error" in got:
        print(name, label, "ERROR", got["error"].replace("\n", " | "), flush=True)
        return
    us = " ".join(f"{k}={v:.1f}" for k, v in got["us"].items())
    sp = " ".join(f"{k}={v:.2f}x" for k, v in got["speedup"].items() if k != "baseline")
    print(
        f"{name} {label}: µs {us}; speedup {sp}; rounds {got['rounds']} "
        f"slowed {got['slowed_rounds']} {got.get('status', '')}",
        flush=True,
    )


if len(sys.argv) > 3:  # a check of the parsing on this machine's CPU: try alone
    show("try", tried())
    sys.exit(0)
show("hand20", hand(HAND))
show("hand_try_sized", hand(TRY_SIZED))
show("try", tried())
show("hand20_again", hand(HAND))
