"""The result-file helper's program: ``python -m tolokaforge.host.file_writer_main`` (see file_writer.py)."""

from __future__ import annotations

import sys

from tolokaforge.host.file_writer import serve

if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
