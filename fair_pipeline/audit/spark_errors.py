"""Input errors found on the executors, raised on the driver as the audit's own.

An `AuditInputError` raised where the rows are (a NULL id, a non-finite score, a scorer's wrong shape) reaches the
driver as Spark's `PythonException`, whose text is the executor's traceback: the user would get a Java-flavoured
wrapper instead of the message the DuckDB path gives for the same rows. `executor_input_errors` raises that message
as an `AuditInputError` again (the Spark error is kept as its cause); any other failure passes unchanged.
"""
from __future__ import annotations

import contextlib
import re

from pyspark.errors import PythonException

from fair_pipeline.audit.stats import AuditInputError

# The traceback's last line: `fair_pipeline.audit.stats.validation.AuditInputError: <message>`.
_RAISED = re.compile(r"^(?:[\w.]+\.)?AuditInputError: (.+)$", re.MULTILINE)


@contextlib.contextmanager
def executor_input_errors():
    """Usable as a decorator of a function that runs Spark jobs over the audited rows."""
    try:
        yield
    except PythonException as error:
        raised = _RAISED.findall(str(error))
        if not raised:
            raise
        raise AuditInputError(raised[-1].strip()) from error
