"""The `fair-pipeline` command line: one module per command, each with `add_arguments(parser)` and `run(args)`.

`parser` builds the argument parser (a command's arguments are added only when that command is chosen, so
`fair-pipeline --help` imports neither numpy nor DuckDB), `main` parses, runs the chosen command and turns an
error into one line and an exit code. `arguments` holds the flags several commands share, `console` the output
line, `jobs` the Dagster runs that `run` and `backfill` chain (ingest, train and audit, reference models) and the
failures of this command, `results` where the results are and the report's findings.

Commands: `simulate`, `run`, `backfill`, `promote`, `ui`, `import-open-bandit` (`import_open_bandit`), `audit`
(the engine is `fair_pipeline.audit.files`, its text output `fair_pipeline.audit.formatting`) and `elicit` (the
session store is `fair_pipeline.selection.session`).

    from fair_pipeline.commands import main
    main(["--home", "/tmp/fp", "run", "--days", "3"])     # the exit code
"""
from fair_pipeline.commands.main import main

__all__ = ["main"]
