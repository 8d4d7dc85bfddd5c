"""A captured call's arguments at another batch size (the worker's rebatch, as shipped):
which tensors carry the batch, how their rows are repeated or cut, what is left alone."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

from support.worker import worker_modules

Pair = namedtuple("Pair", "x y")


def test_the_batch_is_the_first_dimension_most_tensors_share() -> None:
    rebatch = worker_modules()["rebatch"].rebatch
    model = torch.nn.Linear(4, 4)
    x, y, w = torch.randn(3, 4), torch.tensor([0, 1, 2]), torch.randn(4)
    args, kwargs, note = rebatch(torch, (model, x, (y, w)), {"mask": torch.ones(3, 2), "n": 5}, 7)
    assert args[0] is model and kwargs["n"] == 5
    assert args[1].shape == (7, 4) and torch.equal(args[1][3], x[0])  # rows repeated in order
    assert isinstance(args[2], tuple) and args[2][0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert args[2][1] is w  # 4 rows is not the batch
    assert kwargs["mask"].shape == (7, 2)
    assert note == "batch 3 -> 7: dim 0 of args[1], args[2][0], mask, rows repeated"
    assert x.shape == (3, 4)  # the capture's own tensors are left as they were


def test_cut_rows_keep_leaves_that_need_grad_and_named_tuples() -> None:
    rebatch = worker_modules()["rebatch"].rebatch
    x = torch.randn(6, 2, requires_grad=True)
    args, _kwargs, note = rebatch(torch, (Pair(x, torch.zeros(6)),), {}, 2)
    assert isinstance(args[0], Pair) and args[0].x.shape == (2, 2)
    assert args[0].x.is_leaf and args[0].x.requires_grad
    assert note.endswith("rows cut")


def test_a_call_without_a_batch_dimension_is_refused() -> None:
    rebatch = worker_modules()["rebatch"].rebatch
    with pytest.raises(ValueError, match="no tensor argument has a first dimension"):
        rebatch(torch, (torch.nn.Linear(2, 2), torch.tensor(1.0)), {}, 4)
