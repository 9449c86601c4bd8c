import sys

from zarrmount.cli import main

sys.exit(main())
