"""``python -m kernelscope``."""

import sys

if sys.argv[1:] == ["serve"]:
    # Editors start the server this way: skip the CLI's imports, start-up time counts.
    from kernelscope.server import main as serve

    serve()
    sys.exit(0)

from kernelscope.cli import main

sys.exit(main())
