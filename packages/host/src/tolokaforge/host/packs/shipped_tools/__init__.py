"""Tool modules of ours that ship inside a task's tool code (see ../builtin_tools.py)."""
