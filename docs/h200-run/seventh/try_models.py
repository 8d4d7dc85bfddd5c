"""`kernelscope try` on the seventh held-out set against the same variants written by hand in
a fresh process (tests/support/hand_variants.py's loop, try's block sizes): issue 24 item 6 on
models it was not tuned for. python3 docs/h200-run/seventh/try_models.py NAME:VARIANTS ..."""

import json
import sys

sys.path.insert(0, "tests")
from support import hand_variants

hand_variants.W = "fixtures/workloads/seventh.py"
for arg in sys.argv[1:]:
    name, variants = arg.split(":")
    got = hand_variants.compare(name, variants)
    if "error" in got:
        print(f"{name}: ERROR {got['error']}", flush=True)
        continue
    hand, tried = got["hand"], got["try"]
    print(f"{name}: baseline try {tried['baseline_us']:.1f} µs, hand {hand['us']['baseline']:.1f}; "
          f"loops try {tried['reference_us']:.1f} (host {tried['host_reference_us'] or 0:.1f}, "
          f"{tried['slowed_kept']} slowed kept, {tried['slowed_rounds']} left out), hand "
          f"{hand['reference_us']:.1f} ({hand['slowed_rounds']} left out)", flush=True)  # fmt: skip
    for v in tried["variants"]:
        if v["status"] != "ok":
            print(f"  {v['name']}: {v['status']} {json.dumps(v)[:400]}", flush=True)
            continue
        h = hand["speedup"][v["name"]]
        mine, theirs = v["us_per_call"], hand["us"][v["name"]]
        print(f"  {v['name']}: try {v['speedup']:.2f}x ({mine:.1f} µs), hand {h:.2f}x "
              f"({theirs:.1f} µs), ratio {v['speedup'] / h:.3f}", flush=True)  # fmt: skip
    print(json.dumps(got)[:4000], flush=True)
