"""`python -m fusion.synthetic OUT_DIR ...`: write a generated pair with its ground truth."""

import sys

from fusion.synthetic.pairs import main

sys.exit(main())
