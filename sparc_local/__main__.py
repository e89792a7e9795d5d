import sys

from sparc_local.entry import main

sys.exit(main())
