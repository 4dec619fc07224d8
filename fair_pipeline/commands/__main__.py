"""`python -m fair_pipeline.commands ...`: the same as `fair-pipeline ...`."""
import sys

from fair_pipeline.commands.main import main

sys.exit(main())
