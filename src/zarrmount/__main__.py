import sys

from zarrmount.command import main

sys.exit(main())
