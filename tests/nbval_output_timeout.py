"""A pytest plugin of the notebook runs (the Makefile's ``NBVAL``).

After a cell has run, nbval reads the kernel's messages (its outputs,
then the idle status) and gives up when none comes for 5 seconds, a
fixed number (``IPyNbCell.output_timeout``): the cell then fails with
"Timeout of 5 seconds exceeded waiting for output", and every later
cell of the notebook with it.  On a busy machine a cell that trained a
model for minutes has failed so (the multi-head section's 8-head model,
from an empty cache).  This plugin gives every notebook cell
``OUTPUT_TIMEOUT`` seconds instead; how long a cell may run is still
``--nbval-cell-timeout``.
"""

OUTPUT_TIMEOUT = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's IPyNbCell
            item.output_timeout = OUTPUT_TIMEOUT
