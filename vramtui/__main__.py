import sys

from vramtui.cli import main

sys.exit(main())
