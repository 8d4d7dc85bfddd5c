"""A first call past the job's timeout (engine/stuck.py): the loop of the profiled function
it was in, found in the source with `ast`, and the in-place command the hint gives."""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernelscope import pyfunctions
from kernelscope.engine.stuck import loop_hint
from kernelscope.protocol import Entry, RunProfile

SOURCE = (
    "def train(loader):\n"  # 1
    "    setup()\n"  # 2
    "    for epoch in range(3):\n"  # 3
    "        for batch in loader:\n"  # 4
    "            step(batch)\n"  # 5
    "        log(epoch)\n"  # 6
    "    while True:\n"  # 7
    "        break\n"  # 8
    "def other():\n"  # 9
    "    for x in y:\n"  # 10
    "        pass\n"  # 11
)


def test_the_loop_around_a_line_is_the_innermost_of_the_function() -> None:
    fn = pyfunctions.find(SOURCE, "train")
    assert fn is not None
    assert pyfunctions.loop_around(SOURCE, fn, 5) == 4
    assert pyfunctions.loop_around(SOURCE, fn, 6) == 3
    assert pyfunctions.loop_around(SOURCE, fn, 8) == 7
    assert pyfunctions.loop_around(SOURCE, fn, 2) is None  # before any loop
    assert pyfunctions.loop_around(SOURCE, fn, 11) is None  # another function's loop


def test_the_hint_takes_the_innermost_frame_in_the_function(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    entry = Entry(kind="script", target="train.py", args=["--lr", "0.1 x"])
    root = str(tmp_path)
    request = RunProfile(job_id="j", path=str(path), qualname="train", module_name="train",
                         project_root=root, trace_dir=root, entry=entry)  # fmt: skip
    frames = [("/lib/torch/nn.py", 40), (str(path), 5), (str(path), 20)]
    hint = loop_hint(request, frames)
    assert hint is not None and "it was in its loop at " in hint
    assert hint.endswith(":4 --via 'train.py --lr 0.1 x'")
    assert "(at line 5)" in hint
    assert loop_hint(request, [(str(path), 2)]) is None  # in the function, in no loop
    other = msgspec.structs.replace(request, qualname="other")
    assert loop_hint(other, [(str(path), 5)]) is None  # not a line of `other`
    assert loop_hint(request, []) is None


def test_a_nested_helper_without_a_loop_is_passed_for_the_loop_around_it(
    tmp_path: Path,
) -> None:
    """The innermost frame is in a helper defined inside the function, with no loop of its
    own: the hint is the loop around the helper's call; an unreadable file gives none, and
    never an error (the timeout's failure comes whatever the hint finds)."""
    path = tmp_path / "epoch.py"
    path.write_text(
        "def train(loader):\n"  # 1
        "    def helper(b):\n"  # 2
        "        return b * 2\n"  # 3
        "    for b in loader:\n"  # 4
        "        helper(b)\n"  # 5
    )
    root = str(tmp_path)
    request = RunProfile(job_id="j", path=str(path), qualname="train", module_name="epoch",
                         project_root=root, trace_dir=root)  # fmt: skip
    hint = loop_hint(request, [(str(path), 3), (str(path), 5)])
    assert hint is not None and "epoch.py:4 (at line 5)" in hint and hint.endswith("--via PROGRAM")
    gone = msgspec.structs.replace(request, path=str(tmp_path / "gone.py"))
    assert loop_hint(gone, [(str(path), 5)]) is None
