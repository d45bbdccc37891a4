"""Child processes of the runner: the one supervisor (supervisor.py: own session, group kill, reap) and
the sandbox every child runs in (sandbox.py: resource limits, network namespace, scrubbed environment).

Nothing is imported here: a tool worker imports ``sandbox`` alone, before any pack code.
"""
