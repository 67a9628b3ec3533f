import sys

from vramtui.cli import main

try:
    status = main()
except KeyboardInterrupt:  # a ctrl-c that lands after main's own handler (its cleanup): still no traceback
    print("vramtui: interrupted", file=sys.stderr)
    status = 130
sys.exit(status)
