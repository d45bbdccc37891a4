"""The result-file helper's program: ``python -m tolokaforge.host.results.file_writer_main`` (see file_writer.py)."""

from __future__ import annotations

import os
import sys

from tolokaforge.host.results.file_writer import serve

if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
    # Every file was written and closed before its answer went out: nothing is left to flush, and the
    # interpreter's teardown would only hold up the run that waits for this process to end.
    os._exit(0)
