# pyright: basic
"""A captured call at another batch size (the memory forecast of a program's call): the
tensors whose first dimension is the call's batch, their rows repeated or cut to the size."""

from collections import Counter


def rebatch(torch, args, kwargs, size):
    """(args, kwargs, note): copies of the call's arguments in which every tensor whose first
    dimension is the batch (the size most tensor arguments share there; top level and one
    level into lists, tuples and dicts) has ``size`` rows, repeated in order or cut; modules
    and everything else are shared. ValueError when no tensor has a first dimension."""
    new_args, new_kwargs = list(args), dict(kwargs)
    slots = []  # (label, tensor, holder, key)
    containers = []  # (holder, key, items, type): rebuilt once their tensors are replaced
    for holder, key, label, value in [
        *((new_args, i, "args[%d]" % i, a) for i, a in enumerate(args)),
        *((new_kwargs, k, k, v) for k, v in kwargs.items()),
    ]:
        if isinstance(value, torch.Tensor):
            slots.append((label, value, holder, key))
        elif isinstance(value, (list, tuple, dict)):
            items = dict(value) if isinstance(value, dict) else list(value)
            keys = items.keys() if isinstance(items, dict) else range(len(items))
            for k in keys:
                if isinstance(items[k], torch.Tensor):
                    slots.append(("%s[%r]" % (label, k), items[k], items, k))
            containers.append((holder, key, items, type(value)))
    sized = [s for s in slots if s[1].dim() >= 1]
    if not sized:
        raise ValueError("no tensor argument has a first dimension to take as the batch")
    batch = Counter(t.shape[0] for _label, t, _h, _k in sized).most_common(1)[0][0]
    moved = []
    for label, t, holder, key in sized:
        if t.shape[0] != batch:
            continue
        rows = torch.arange(size, device=t.device) % batch
        resized = t.detach().index_select(0, rows)
        if t.requires_grad and t.is_leaf:
            resized.requires_grad_(True)
        holder[key] = resized
        moved.append(label)
    for holder, key, items, kind in containers:
        if kind in (list, dict):
            holder[key] = items
        else:  # a tuple, or a named tuple (its fields as arguments)
            holder[key] = kind(*items) if hasattr(kind, "_fields") else kind(items)
    named = ", ".join(moved[:6]) + (" and %d more" % (len(moved) - 6) if len(moved) > 6 else "")
    how = "repeated" if size > batch else "cut" if size < batch else "as captured"
    note = "batch %d -> %d: dim 0 of %s, rows %s" % (batch, size, named, how)
    return tuple(new_args), new_kwargs, note


def resized_call(job, args, kwargs):
    """(args, kwargs, note) of the call the job runs: as captured, or at the entry's
    ``rebatch`` size (a JobError when the call has no batch dimension)."""
    size = int((job.entry or {}).get("rebatch") or 0)
    if not size:
        return args, kwargs, None
    from .errors import JobError

    try:
        return rebatch(job.torch, args, kwargs, size)
    except ValueError as e:
        raise JobError("bad_batch", "cannot run the captured call at batch %d: %s" % (size, e),
                       job.path, None) from None  # fmt: skip
