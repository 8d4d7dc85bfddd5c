# Command-line configuration for train.py, run inside the script's namespace with
#
#     exec(open("configurator.py").read())
#
# so every name it touches is one of the script's own globals. Two kinds of argument:
#
#     python train.py config/tiny.py          a config file: plain assignments, run in order
#     python train.py --max_iters=50          an override of a global the script already has
#
# An override's value is read as a Python literal when it parses as one (numbers, True,
# None, quoted strings, tuples...) and kept as the raw string otherwise; either way it must
# have the type of the default it replaces (an int is accepted where a float was).
# Everything lives under the _cfg_ prefix and is deleted at the end so the script's
# namespace is left as it was, apart from the settings themselves.

import ast as _cfg_ast
import sys as _cfg_sys


def _cfg_parse(_cfg_text):
    try:
        return _cfg_ast.literal_eval(_cfg_text)
    except (ValueError, SyntaxError):
        return _cfg_text


for _cfg_arg in _cfg_sys.argv[1:]:
    if not _cfg_arg.startswith("--"):
        print(f"configurator: reading {_cfg_arg}")
        with open(_cfg_arg) as _cfg_file:
            _cfg_source = _cfg_file.read()
        exec(compile(_cfg_source, _cfg_arg, "exec"), globals())
        continue
    _cfg_key, _cfg_eq, _cfg_text = _cfg_arg[2:].partition("=")
    if not _cfg_eq:
        raise SystemExit(f"configurator: expected --key=value, got {_cfg_arg!r}")
    _cfg_key = _cfg_key.replace("-", "_")
    if _cfg_key not in globals():
        raise SystemExit(f"configurator: unknown setting {_cfg_key!r}")
    _cfg_old = globals()[_cfg_key]
    _cfg_new = _cfg_parse(_cfg_text)
    if isinstance(_cfg_old, float) and isinstance(_cfg_new, int) and not isinstance(_cfg_new, bool):
        _cfg_new = float(_cfg_new)
    if type(_cfg_new) is not type(_cfg_old):
        raise SystemExit(
            f"configurator: --{_cfg_key} wants {type(_cfg_old).__name__}, "
            f"got {_cfg_text!r} ({type(_cfg_new).__name__})"
        )
    print(f"configurator: {_cfg_key} = {_cfg_new!r} (was {_cfg_old!r})")
    globals()[_cfg_key] = _cfg_new

for _cfg_name in [n for n in globals() if n.startswith("_cfg_")]:
    del globals()[_cfg_name]
del _cfg_name
