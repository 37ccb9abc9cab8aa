import sys

from tapetui.cli import main

sys.exit(main())
