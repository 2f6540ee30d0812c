"""``python -m oncelog.broker [options]`` is ``oncelog broker [options]``."""

import sys

from oncelog.broker.cli import main

sys.exit(main(["broker", *sys.argv[1:]]))
