#!/usr/bin/env bash
# The line pass against pure-Python lines timed directly (line_tracer_2026-12-03.txt).
cd "$(dirname "$0")/../.."
for fn in rows loop; do .venv/bin/python -m kernelscope profile tests/workloads/pure_loops.py::$fn --device cpu --json > /tmp/lt-$fn.json 2>/dev/null; done
.venv/bin/python -m kernelscope profile tests/workloads/pure_python.py::rows --device cpu --json > /tmp/lt-pp.json 2>/dev/null
.venv/bin/python - <<'PY'
import json, statistics, time
def t(f):
    xs=[]
    for _ in range(200):
        s=time.perf_counter(); f(); xs.append((time.perf_counter()-s)*1e6)
    return statistics.median(xs)
def comp(): [i + 0 for i in range(2000)]
def pp(): [float((i * 7) % 13) for i in range(2000)]
def loop():
    x = 0
    for i in range(2000):
        x = i
for fn, path, lines, f in (("rows","/tmp/lt-rows.json",[8],comp),("loop","/tmp/lt-loop.json",[14,15],loop),("pure_python","/tmp/lt-pp.json",[8],pp)):
    r=json.load(open(path))
    got=sum(l["self_cpu_us"] for l in r["lines"] if l["line"] in lines)
    raw=sum(l["self_cpu_us"]+l["tracer_us"] for l in r["lines"] if l["line"] in lines)
    d=t(f)
    print(f"{fn:12s} in_line {r['line_tracer']['in_line_us']:.3f} between {r['line_tracer']['between_lines_us']:.3f} raw {raw:.0f} corrected {got:.0f} direct {d:.0f} x{got/d:.1f}")
PY
