"""``python -m kernelscope``."""

import sys

from kernelscope.entry import main

sys.exit(main())
